"""Package tests for contrastive_nb.pairs: pair masks, views and augmentations, text views, other positives, false negatives."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch.utils.data import DataLoader
from torchvision.transforms import v2

from contrastive_nb.data import COLOURS, SHAPE_NAMES, make_shapes
from contrastive_nb.pairs import (TICKET_SYNONYMS, AugmentationPolicy, MultiViewDataset, adjust_colour, augment_batch,
                                  chance_of_false_negative, delete_words, expected_false_negatives, flatten_views,
                                  gaussian_blur, grayscale, instance_ids, make_moving_shapes, mask_span, object_kept,
                                  pair_masks, position_phrase, render_shapes, replace_synonyms, resized_crop,
                                  sample_crop_boxes, shape_captions, simclr_transform, temporal_pair_masks, ticket_view)

FAST = settings(max_examples=40, deadline=None)

@pytest.fixture(scope='module')
def shapes(): return make_shapes(64, size=32, seed=11)

# --- pair masks -------------------------------------------------------------------------------------------------

@FAST
@given(st.integers(1, 40), st.integers(1, 4))
def test_instance_masks_count_positives_and_negatives(n, n_views):
    pos, neg = pair_masks(instance_ids(n, n_views))
    assert pos.shape == neg.shape == (n * n_views, n * n_views) and pos.dtype == neg.dtype == torch.bool
    assert (pos.sum(1) == n_views - 1).all() and (neg.sum(1) == n_views * (n - 1)).all()
    assert not (pos & neg).any() and not pos.diagonal().any() and not neg.diagonal().any()
    assert torch.equal(pos, pos.T) and torch.equal(neg, neg.T)
    # Every pair of distinct rows is exactly one of positive or negative.
    assert torch.equal(pos | neg, ~torch.eye(n * n_views, dtype=torch.bool))

@FAST
@given(st.integers(1, 60))
def test_two_views_give_one_positive_and_2n_minus_2_negatives(n):
    pos, neg = pair_masks(instance_ids(n))
    assert (pos.sum(1) == 1).all() and (neg.sum(1) == 2 * n - 2).all()
    rows = torch.arange(2 * n)
    assert torch.equal(pos.float().argmax(1), (rows + n) % (2 * n))  # the other view of the same source

def test_instance_ids_layout():
    ids = instance_ids(5, 3)
    assert ids.dtype == torch.long and ids.tolist() == [0, 1, 2, 3, 4] * 3
    assert all(ids[v * 5 + i] == i for v in range(3) for i in range(5))

@FAST
@given(st.lists(st.integers(-3, 6), min_size=1, max_size=40))
def test_supervised_masks_are_same_label_minus_self(labels):
    ids = torch.tensor(labels)
    pos, neg = pair_masks(ids)
    n = len(labels)
    for i in range(n):
        for j in range(n):
            assert pos[i, j] == (labels[i] == labels[j] and i != j)
            assert neg[i, j] == (labels[i] != labels[j])
    counts = {l: labels.count(l) for l in labels}
    assert pos.sum(1).tolist() == [counts[l] - 1 for l in labels]

@pytest.mark.parametrize('dtype', [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_pair_masks_accepts_every_integer_dtype(dtype):
    pos, _ = pair_masks(torch.tensor([0, 1, 0], dtype=dtype))
    assert pos.tolist() == [[False, False, True], [False, False, False], [True, False, False]]

def test_pair_masks_accepts_lists_and_numpy():
    assert torch.equal(pair_masks([0, 1, 0])[0], pair_masks(np.array([0, 1, 0]))[0])

@pytest.mark.parametrize('bad', [torch.tensor([[0, 1], [1, 0]]), torch.tensor([0.0, 1.0]), torch.tensor([True, False]),
                                 torch.tensor(3), ['cat', 'dog']])
def test_pair_masks_rejects_bad_ids(bad):
    with pytest.raises(ValueError, match='ids'): pair_masks(bad)

@pytest.mark.parametrize('n, n_views', [(0, 2), (3, 0), (-1, 2)])
def test_instance_ids_rejects_bad_sizes(n, n_views):
    with pytest.raises(ValueError): instance_ids(n, n_views)

def test_instance_ids_rejects_non_integers():
    with pytest.raises(TypeError): instance_ids(2.5)

@FAST
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 3)), min_size=1, max_size=30),
       st.sampled_from([0, 0.5, 1, 2, 3.5, 100]))
def test_temporal_masks_are_same_sequence_within_window(frames, window):
    times = torch.tensor([t for t, _ in frames])
    seqs = torch.tensor([s for _, s in frames])
    pos, neg = temporal_pair_masks(times, window, seqs)
    n = len(frames)
    for i in range(n):
        for j in range(n):
            want = i != j and frames[i][1] == frames[j][1] and abs(frames[i][0] - frames[j][0]) <= window
            assert pos[i, j] == want and neg[i, j] == (i != j and not want)

def test_temporal_masks_single_sequence_and_float_times():
    pos, neg = temporal_pair_masks(torch.tensor([0.0, 0.5, 1.0, 3.0]), 0.5)
    assert pos.sum(1).tolist() == [1, 2, 1, 0] and neg.sum(1).tolist() == [2, 1, 2, 3]

def test_temporal_masks_unsigned_times_do_not_wrap():
    pos, _ = temporal_pair_masks(torch.tensor([3, 250], dtype=torch.uint8), 10)
    assert not pos.any()

@pytest.mark.parametrize('times, window, seqs', [
    (torch.tensor([[0, 1]]), 1, None), (torch.tensor([0.0, float('nan')]), 1, None), (torch.arange(3), -1, None),
    (torch.arange(3), float('nan'), None), (torch.arange(3), 1, torch.zeros(2, dtype=torch.long)),
    (torch.arange(3), 1, torch.zeros(3)), (torch.tensor([True, False]), 1, None)])
def test_temporal_masks_reject_bad_input(times, window, seqs):
    with pytest.raises(ValueError): temporal_pair_masks(times, window, seqs)

# --- views ------------------------------------------------------------------------------------------------------

def test_multiview_dataset_keeps_source_id_and_label(shapes):
    ds = MultiViewDataset(shapes, simclr_transform(AugmentationPolicy()), n_views=3)
    views, i, label = ds[-2]
    assert views.shape == (3, 3, 32, 32) and i == len(shapes) - 2 and label == shapes.labels[-2]
    xb, ib, lb = next(iter(DataLoader(ds, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))))
    assert xb.shape == (8, 3, 3, 32, 32) and torch.equal(lb, shapes.labels[ib])
    flat = flatten_views(xb)
    assert flat.shape == (24, 3, 32, 32) and torch.equal(flat[2 * 8 + 5], xb[5, 2])

def test_multiview_dataset_without_labels_and_with_text():
    ds = MultiViewDataset(['one two three four'], lambda t: ticket_view(t, np.random.default_rng(0)), n_views=2)
    views, i, label = ds[0]
    assert isinstance(views, list) and len(views) == 2 and i == 0 and label == -1
    with pytest.raises(IndexError): ds[1]
    with pytest.raises(ValueError): MultiViewDataset(['a'], str, n_views=0)

def test_flatten_views_matches_instance_ids():
    views = torch.arange(4)[:, None].expand(4, 3) * 10 + torch.arange(3)  # source i, view v holds 10 i + v
    flat = flatten_views(views)
    assert torch.equal(flat // 10, instance_ids(4, 3)) and torch.equal(flat % 10, torch.arange(3).repeat_interleave(4))
    with pytest.raises(ValueError): flatten_views(torch.arange(3))

def test_v2_transform_on_a_batch_shares_its_parameters(shapes):
    "The pitfall augment_batch fixes: torchvision v2 draws one set of parameters per call, for the whole batch."
    transform = simclr_transform(AugmentationPolicy())
    copies = shapes.images[:1].expand(16, -1, -1, -1).clone()
    for seed in range(5):
        torch.manual_seed(seed)
        out = transform(copies)
        assert all(torch.equal(out[0], out[k]) for k in range(16))
    # With different images the crop is shared too: a crop of a coordinate ramp gives the same ramp for every image.
    ramp = torch.linspace(0, 1, 32).expand(3, 32, 32)
    batch = torch.stack([ramp * (0.5 + 0.1 * k) for k in range(4)])
    torch.manual_seed(0)
    cropped = v2.RandomResizedCrop(32, scale=(0.1, 0.5), antialias=False)(batch)
    scaled_back = cropped / torch.tensor([0.5 + 0.1 * k for k in range(4)])[:, None, None, None]
    assert torch.allclose(scaled_back, scaled_back[:1].expand_as(scaled_back), atol=1e-5)

def test_augment_batch_draws_independent_parameters_per_image(shapes):
    copies = shapes.images[:1].expand(32, -1, -1, -1)
    out = augment_batch(copies, AugmentationPolicy(), torch.Generator().manual_seed(0))
    assert all(not torch.equal(out[i], out[j]) for i in range(32) for j in range(i))

@pytest.mark.parametrize('field, flag', [('flip_p', 'flip'), ('grayscale_p', 'gray'), ('jitter_p', 'jitter')])
def test_each_random_step_happens_per_image_with_its_probability(shapes, field, flag):
    "With one step on at probability 1/2, about half of many copies are changed — not all or none."
    off = dict(scale=(1.0, 1.0), ratio=(1.0, 1.0), flip_p=0.0, jitter_p=0.0, grayscale_p=0.0, blur_p=0.0)
    policy = AugmentationPolicy(**{**off, field: 0.5}, jitter_strength=1.0)
    image = shapes.images[3:4]
    out = augment_batch(image.expand(1000, -1, -1, -1), policy, torch.Generator().manual_seed(1))
    changed = (out - image).abs().flatten(1).amax(1) > 1e-4
    assert 0.42 < changed.float().mean() < 0.58

def test_blur_happens_per_image_with_its_probability(shapes):
    policy = AugmentationPolicy(scale=(1.0, 1.0), ratio=(1.0, 1.0), flip_p=0.0, jitter_p=0.0, grayscale_p=0.0,
                                blur_p=0.5, blur_sigma=(1.0, 2.0))
    image = shapes.images[3:4]
    out = augment_batch(image.expand(1000, -1, -1, -1), policy, torch.Generator().manual_seed(2))
    assert 0.42 < ((out - image).abs().flatten(1).amax(1) > 1e-4).float().mean() < 0.58

@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.uint8])
@pytest.mark.parametrize('size', [16, 32, 48])
def test_augment_batch_shapes_and_ranges(shapes, dtype, size):
    images = (shapes.images[:10] * 255).round().to(torch.uint8) if dtype == torch.uint8 else shapes.images[:10].to(dtype)
    out = augment_batch(images, AugmentationPolicy(size=size, jitter_strength=1.0), torch.Generator().manual_seed(3))
    assert out.shape == (10, 3, size, size) and out.is_floating_point() and torch.isfinite(out).all()
    assert out.min() >= 0 and out.max() <= 1

def test_augment_batch_is_deterministic_under_a_generator(shapes):
    a = augment_batch(shapes.images[:8], AugmentationPolicy(), torch.Generator().manual_seed(5))
    b = augment_batch(shapes.images[:8], AugmentationPolicy(), torch.Generator().manual_seed(5))
    c = augment_batch(shapes.images[:8], AugmentationPolicy(), torch.Generator().manual_seed(6))
    assert torch.equal(a, b) and not torch.equal(a, c)

@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')
def test_augment_batch_on_gpu_matches_cpu(shapes):
    cpu = augment_batch(shapes.images[:16], AugmentationPolicy(), torch.Generator().manual_seed(7))
    gpu = augment_batch(shapes.images[:16].cuda(), AugmentationPolicy(), torch.Generator().manual_seed(7))
    assert gpu.device.type == 'cuda' and torch.allclose(gpu.cpu(), cpu, atol=1e-4)

@pytest.mark.parametrize('bad', [torch.rand(3, 32, 32), torch.rand(2, 1, 32, 32), torch.randint(0, 3, (2, 3, 8, 8)),
                                 np.zeros((2, 3, 8, 8))])
def test_augment_batch_rejects_bad_images(bad):
    with pytest.raises(ValueError): augment_batch(bad)

@pytest.mark.parametrize('kwargs', [dict(scale=(0.5, 0.2)), dict(scale=(0.0, 1.0)), dict(ratio=(2.0, 1.0)),
                                    dict(flip_p=1.5), dict(blur_p=-0.1), dict(jitter_strength=3.0),
                                    dict(blur_sigma=(0.0, 1.0)), dict(size=0)])
def test_policy_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError): AugmentationPolicy(**kwargs)

def test_policy_is_read_only_and_replaceable():
    policy = AugmentationPolicy()
    with pytest.raises(AttributeError): policy.size = 64
    bigger = policy.replace(size=96, scale=[0.2, 1.0])
    assert bigger.size == 96 and bigger.scale == (0.2, 1.0) and bigger.blur_kernel == 9 and policy.size == 32
    assert policy == AugmentationPolicy() and hash(policy) == hash(AugmentationPolicy()) and bigger != policy
    with pytest.raises(ValueError): policy.replace(flip_p=2)

def test_crop_boxes_follow_the_policy():
    boxes = sample_crop_boxes(20_000, (0.2, 0.6), (0.5, 2.0), torch.Generator().manual_seed(0))
    w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    assert (boxes >= 0).all() and (boxes <= 1 + 1e-6).all()
    assert (w * h).min() >= 0.2 - 1e-5 and (w * h).max() <= 0.6 + 1e-5
    assert (w / h).min() >= 0.5 - 1e-4 and (w / h).max() <= 2.0 + 1e-4
    # The area is uniform over its range: its mean is the midpoint.
    assert abs((w * h).mean() - 0.4) < 0.01

def test_resized_crop_identity_flip_and_block():
    img = torch.rand(2, 3, 12, 12)
    whole = torch.tensor([[0.0, 0.0, 1.0, 1.0]] * 2)
    assert torch.allclose(resized_crop(img, whole, 12), img, atol=1e-6)
    assert torch.allclose(resized_crop(img, whole, 12, torch.tensor([True, True])), img.flip(-1), atol=1e-6)
    block = torch.tensor([[0.5, 0.0, 1.0, 0.5]] * 2)
    assert torch.allclose(resized_crop(img, block, 6), img[:, :, :6, 6:], atol=1e-6)
    with pytest.raises(ValueError): resized_crop(img, whole[:1], 12)

@FAST
@given(st.integers(0, 10_000))
def test_adjust_colour_matches_torchvision(seed):
    g = torch.Generator().manual_seed(seed)
    images = torch.rand(4, 3, 6, 6, generator=g)
    b, c, s = (torch.rand(4, generator=g) * 2 for _ in range(3))
    h = torch.rand(4, generator=g) - 0.5
    ours = adjust_colour(images, b, c, s, h)
    for i in range(4):
        ref = v2.functional.adjust_brightness(images[i], b[i].item())
        ref = v2.functional.adjust_contrast(ref, c[i].item())
        ref = v2.functional.adjust_saturation(ref, s[i].item())
        ref = v2.functional.adjust_hue(ref, h[i].item())
        assert torch.allclose(ours[i], ref, atol=1e-5)

def test_adjust_colour_identity_and_grayscale():
    images = torch.rand(3, 3, 5, 5)
    ones = torch.ones(3)
    assert torch.allclose(adjust_colour(images, ones, ones, ones, torch.zeros(3)), images, atol=1e-6)
    assert torch.allclose(adjust_colour(images, ones, ones, torch.zeros(3), torch.zeros(3)), grayscale(images), atol=1e-6)

@pytest.mark.parametrize('kernel', [3, 5, 7])
def test_gaussian_blur_matches_torchvision(kernel):
    images, sigma = torch.rand(5, 3, 10, 10), torch.tensor([0.1, 0.7, 1.0, 1.9, 2.5])
    ours = gaussian_blur(images, sigma, kernel)
    for i in range(5):
        assert torch.allclose(ours[i], v2.functional.gaussian_blur(images[i], [kernel, kernel], [sigma[i].item()] * 2), atol=1e-5)

@pytest.mark.parametrize('kernel', [0, 2, 4, 21])
def test_gaussian_blur_rejects_bad_kernels(kernel):
    with pytest.raises(ValueError): gaussian_blur(torch.rand(1, 3, 10, 10), torch.ones(1), kernel)

# --- when augmentation breaks the meaning ------------------------------------------------------------------------

def test_object_kept_by_hand_and_by_brute_force(shapes):
    masks = shapes.masks[:20]
    assert torch.allclose(object_kept(masks, torch.tensor([[0.0, 0.0, 1.0, 1.0]] * 20)), torch.ones(20))
    boxes = sample_crop_boxes(20, generator=torch.Generator().manual_seed(1))
    fine = masks.repeat_interleave(8, 1).repeat_interleave(8, 2)
    c = (torch.arange(256) + 0.5) / 256
    in_x = (c >= boxes[:, :1]) & (c <= boxes[:, 2:3])
    in_y = (c >= boxes[:, 1:2]) & (c <= boxes[:, 3:4])
    brute = (fine * in_y[:, :, None] * in_x[:, None, :]).sum((1, 2)) / fine.sum((1, 2))
    assert torch.allclose(object_kept(masks, boxes), brute, atol=0.02)
    with pytest.raises(ValueError): object_kept(torch.zeros(1, 4, 4), torch.tensor([[0.0, 0.0, 1.0, 1.0]]))

# --- other sources of positives ----------------------------------------------------------------------------------

def test_render_shapes_reproduces_make_shapes():
    ref = make_shapes(40, size=24, seed=2, noise=0.0)
    redrawn = render_shapes(ref.factors, size=24)
    assert torch.allclose(redrawn.images, ref.images, atol=1e-6) and torch.allclose(redrawn.masks, ref.masks)
    assert torch.equal(redrawn.labels, ref.labels)
    with pytest.raises(ValueError, match='unknown'): render_shapes(ref.factors.assign(colour_name='mauve'))
    with pytest.raises(ValueError, match='lacks'): render_shapes(ref.factors.drop(columns='rotation'))

def test_moving_shapes_move_within_the_image_and_keep_their_identity():
    clips = make_moving_shapes(n_sequences=6, n_frames=20, speed=0.05, seed=4)
    f = clips.factors
    assert len(clips) == 120 and f.sequence.tolist() == [s for s in range(6) for _ in range(20)]
    assert f.time.tolist() == list(range(20)) * 6
    for c in ('x', 'y'): assert ((f[c] - f.scale) >= -1e-6).all() and ((f[c] + f.scale) <= 1 + 1e-6).all()
    assert (f.groupby('sequence')[['shape_name', 'colour_name', 'scale', 'background']].nunique() == 1).all().all()
    step = np.hypot(f.x.diff(), f.y.diff())[f.time > 0]
    assert (step <= 0.05 + 1e-5).all() and step.mean() > 0.03
    assert torch.equal(make_moving_shapes(2, 3, seed=1).images, make_moving_shapes(2, 3, seed=1).images)
    with pytest.raises(ValueError): make_moving_shapes(0, 3)

@pytest.mark.parametrize('x, y, phrase', [(0.1, 0.1, 'in the upper left'), (0.5, 0.1, 'at the top'), (0.9, 0.2, 'in the upper right'),
                                          (0.1, 0.5, 'on the left'), (0.5, 0.5, 'in the centre'), (0.8, 0.5, 'on the right'),
                                          (0.2, 0.9, 'in the lower left'), (0.5, 1.0, 'at the bottom'), (1.0, 1.0, 'in the lower right')])
def test_position_phrase(x, y, phrase):
    assert position_phrase(x, y) == phrase

def test_captions_describe_the_factors(shapes):
    captions = shape_captions(shapes.factors)
    assert len(captions) == len(shapes)
    for caption, (_, row) in zip(captions, shapes.factors.iterrows()):
        assert caption == f"a {row.colour_name} {row.shape_name} {position_phrase(row.x, row.y)}"
    table = pd.DataFrame({'colour_name': ['red'], 'shape_name': ['circle'], 'x': [0.2], 'y': [0.2]})
    assert shape_captions(table) == ['a red circle in the upper left']
    with pytest.raises(ValueError): shape_captions(table.drop(columns='x'))

# --- text views --------------------------------------------------------------------------------------------------

TEXT = "Hi, I was charged twice for my subscription. Please refund one payment!"

@FAST
@given(st.lists(st.sampled_from(list('abc ,.!') + ['charged ', 'Twice, ', 'app ']), max_size=40).map(''.join), st.integers(0, 2**32 - 1))
def test_text_views_are_deterministic_under_a_seed(text, seed):
    for fn in (delete_words, replace_synonyms, mask_span, ticket_view):
        assert fn(text, rng=seed) == fn(text, rng=seed)
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        assert [fn(text, rng=a) for _ in range(3)] == [fn(text, rng=b) for _ in range(3)]

def test_text_views_vary_across_seeds():
    assert len({ticket_view(TEXT, rng=s) for s in range(30)}) > 20
    g = np.random.default_rng(0)
    assert len({ticket_view(TEXT, rng=g) for _ in range(30)}) > 20

def test_word_deletion():
    assert delete_words(TEXT, 0.0) == TEXT
    assert len(delete_words(TEXT, 1.0).split()) == 1 and delete_words(TEXT, 1.0) in TEXT.split()
    kept = delete_words(TEXT, 0.5, rng=3).split()
    it = iter(TEXT.split())
    assert all(w in it for w in kept)  # the survivors keep their order
    assert delete_words('', 0.5) == ''

def test_synonym_replacement():
    assert replace_synonyms(TEXT, 0.0) == TEXT
    full = replace_synonyms(TEXT, 1.0)
    assert full.startswith('Hi, I was billed ') and 'membership.' in full and 'Kindly' in full and 'payment!' in full
    assert replace_synonyms('CANCEL it', 1.0, synonyms={'cancel': ('stop',)}) == 'Stop it'
    # The table keeps words apart whose swap would change the ticket's intent.
    for a, b in (('cancel', 'delete'), ('delete', 'cancel'), ('upgrade', 'update'), ('export', 'import')):
        assert b not in TICKET_SYNONYMS.get(a, ())

@FAST
@given(st.integers(1, 30), st.floats(0, 1), st.integers(0, 1000))
def test_span_masking_hides_one_contiguous_span(n_words, fraction, seed):
    words = [f'w{i}' for i in range(n_words)]
    out = mask_span(' '.join(words), fraction, rng=seed).split()
    length = max(1, round(fraction * n_words))
    assert len(out) == n_words and out.count('[MASK]') == length
    start = out.index('[MASK]')
    assert out[start:start + length] == ['[MASK]'] * length
    assert out[:start] + out[start + length:] == words[:start] + words[start + length:]

@pytest.mark.parametrize('call', [lambda: delete_words(TEXT, -0.1), lambda: replace_synonyms(TEXT, 2.0),
                                  lambda: mask_span(TEXT, 1.5), lambda: delete_words(3, 0.1),
                                  lambda: ticket_view(TEXT, rng=1.5), lambda: ticket_view(TEXT, rng=True)])
def test_text_views_reject_bad_input(call):
    with pytest.raises(ValueError): call()

# --- false negatives ---------------------------------------------------------------------------------------------

def _simulate_with_replacement(b, c, n_batches, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(c, (n_batches, b), generator=g)
    counts = torch.zeros(n_batches, c).scatter_add_(1, labels, torch.ones(n_batches, b))
    others = counts.gather(1, labels) - 1
    return others.mean().item(), (others > 0).float().mean().item()

@pytest.mark.parametrize('b, c', [(2, 2), (16, 10), (256, 10), (4096, 1000), (100, 1)])
def test_false_negative_formula_matches_simulation_with_replacement(b, c):
    mean, any_ = _simulate_with_replacement(b, c, max(400, 400_000 // b))
    assert mean == pytest.approx(expected_false_negatives(b, c), rel=0.03, abs=0.01)
    assert any_ == pytest.approx(chance_of_false_negative(b, c), abs=0.02)

@pytest.mark.parametrize('b, c, n', [(8, 4, 40), (50, 10, 100), (64, 10, 1000), (10, 5, 10)])
def test_false_negative_formula_matches_simulation_without_replacement(b, c, n):
    labels = torch.arange(n) % c
    g = torch.Generator().manual_seed(0)
    means, anys = [], []
    for _ in range(2000):
        batch = labels[torch.randperm(n, generator=g)[:b]]
        others = torch.bincount(batch, minlength=c)[batch] - 1
        means.append(others.float().mean()); anys.append((others > 0).float().mean())
    assert torch.stack(means).mean().item() == pytest.approx(expected_false_negatives(b, c, dataset_size=n), rel=0.03, abs=0.01)
    assert torch.stack(anys).mean().item() == pytest.approx(chance_of_false_negative(b, c, dataset_size=n), abs=0.02)

def test_false_negatives_counted_with_the_masks():
    labels = torch.randint(5, (40,), generator=torch.Generator().manual_seed(0))
    _, negative = pair_masks(instance_ids(40, 2))
    same_class, _ = pair_masks(labels.repeat(2))
    per_anchor = (negative & same_class).sum(1)
    assert torch.equal(per_anchor, 2 * (torch.bincount(labels)[labels.repeat(2)] - 1))

def test_false_negative_numbers_from_the_literature():
    assert expected_false_negatives(4096, 1000) == pytest.approx(4.095)
    assert expected_false_negatives(4096, 1000, n_views=2) == pytest.approx(8.19)
    assert expected_false_negatives(1, 10) == 0 and chance_of_false_negative(1, 10) == 0
    assert chance_of_false_negative(20, 10, dataset_size=20) == 1.0  # only 18 samples of other classes
    # N = 20, C = 2: of the anchor's 19 possible batch mates 9 share its class; no false negative = all 3 from the other 10.
    assert chance_of_false_negative(4, 2, dataset_size=20) == pytest.approx(1 - math.comb(10, 3) / math.comb(19, 3))

@pytest.mark.parametrize('call', [lambda: expected_false_negatives(0, 10), lambda: expected_false_negatives(10, 0),
                                  lambda: expected_false_negatives(10, 3, dataset_size=100),
                                  lambda: expected_false_negatives(10, 5, dataset_size=5),
                                  lambda: expected_false_negatives(10, 5, n_views=0),
                                  lambda: chance_of_false_negative(10, 3, dataset_size=100)])
def test_false_negative_formulas_reject_bad_input(call):
    with pytest.raises(ValueError): call()
