"""contrastive_nb.clip: captions, the symmetric loss and its duplicate mask, the sigmoid (SigLIP) loss, zero-shot,
retrieval, training."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck

from contrastive_nb.clip import (CAPTION_FACTORS, TEMPLATES, CaptionEncoder, CaptionTokenizer, TinyCLIP,
                                 caption_ids, class_embeddings, class_prompts, clip_loss, crop_views,
                                 describe, factor_classes, factor_labels, recall_at_k, train_clip,
                                 zero_shot_predict, siglip_loss, prior_bias, SigLIPLoss)
from contrastive_nb.augment import AugmentationPolicy
from contrastive_nb.data import make_shapes
from contrastive_nb.infonce import info_nce
from contrastive_nb.pairs import position_phrase, shape_captions

def pairs(n=7, d=5, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=dtype), torch.randn(n, d, generator=g, dtype=dtype)

def loop_loss(zi, zt, tau, ids=None):
    "Pair by pair: −log softmax over the candidates that are not duplicates, both directions, averaged."
    zi, zt = F.normalize(zi, dim=1), F.normalize(zt, dim=1)
    n, terms = len(zi), []
    for i in range(n):
        allowed = [j for j in range(n) if j == i or ids is None or ids[j] != ids[i]]
        rows = torch.stack([zi[i] @ zt[j] / tau for j in allowed])
        cols = torch.stack([zi[j] @ zt[i] / tau for j in allowed])
        k = allowed.index(i)
        terms += [-torch.log_softmax(rows, 0)[k], -torch.log_softmax(cols, 0)[k]]
    return torch.stack(terms).mean()

# --- the loss ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('n,tau', [(2, 0.07), (7, 0.5), (16, 0.01)])
def test_loss_is_the_mean_of_two_info_nce_calls_and_symmetric(n, tau):
    zi, zt = pairs(n, seed=n)
    both = (info_nce(zi, zt, temperature=tau) + info_nce(zt, zi, temperature=tau)) / 2
    torch.testing.assert_close(clip_loss(zi, zt, tau), both)
    torch.testing.assert_close(clip_loss(zi, zt, tau), clip_loss(zt, zi, tau))
    torch.testing.assert_close(clip_loss(zi, zt, tau), loop_loss(zi, zt, tau))
    # the two directions differ in general: the symmetric loss is not one of them
    assert not torch.isclose(info_nce(zi, zt, temperature=tau), info_nce(zt, zi, temperature=tau))

def test_reductions_and_the_masked_path_agree_with_the_plain_one_when_every_id_differs():
    zi, zt = pairs(6, seed=3)
    per_pair = clip_loss(zi, zt, 0.2, reduction='none')
    rows = F.normalize(zi, dim=1) @ F.normalize(zt, dim=1).T / 0.2
    target = torch.arange(6)
    expected = (F.cross_entropy(rows, target, reduction='none')
                + F.cross_entropy(rows.T, target, reduction='none')) / 2
    torch.testing.assert_close(per_pair, expected)
    torch.testing.assert_close(clip_loss(zi, zt, 0.2, reduction='sum'), per_pair.sum())
    for reduction in ('mean', 'sum', 'none'):
        torch.testing.assert_close(clip_loss(zi, zt, 0.2, torch.arange(6) * 7, reduction),
                                   clip_loss(zi, zt, 0.2, reduction=reduction))

def test_duplicate_mask_removes_exactly_the_same_meaning_pairs():
    zi, zt = pairs(8, seed=4)
    ids = torch.tensor([3, 1, 3, 0, 1, 3, 2, 5])
    torch.testing.assert_close(clip_loss(zi, zt, 0.3, ids), loop_loss(zi, zt, 0.3, ids))
    assert not torch.isclose(clip_loss(zi, zt, 0.3, ids), clip_loss(zi, zt, 0.3))
    # all captions of one meaning: every row holds its pair alone, the loss is 0
    assert clip_loss(zi, zt, 0.3, torch.zeros(8, dtype=torch.long)).abs() < 1e-12
    # a masked duplicate's embedding does not enter image 0's image→text term
    zt_moved = zt.clone()
    zt_moved[2] = torch.randn(5, dtype=torch.float64)
    row = lambda t: clip_loss(zi[[0, 2]], t[[0, 2]], 0.3, ids[[0, 2]], reduction='none')[0]
    torch.testing.assert_close(row(zt), row(zt_moved))

def test_gradcheck_float64_embeddings_and_temperature_with_and_without_mask():
    zi, zt = pairs(5, d=3, seed=5)
    tau = torch.tensor(0.3, dtype=torch.float64)
    ids = torch.tensor([0, 1, 0, 2, 1])
    for mask in (None, ids):
        leaves = [x.clone().requires_grad_() for x in (zi, zt, tau)]
        assert gradcheck(lambda a, b, t: clip_loss(a, b, t, mask), leaves)

def test_learnable_temperature_gets_a_gradient_of_the_right_sign():
    zi = torch.eye(4, dtype=torch.float64)
    tau = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    clip_loss(zi, zi.clone(), tau).backward()  # perfect pairs: a colder softmax lowers the loss
    assert tau.grad > 0

def test_half_precision_is_computed_in_float32():
    zi, zt = pairs(32, 16, seed=6, dtype=torch.float32)
    for dtype in (torch.float16, torch.bfloat16):
        for ids in (None, torch.arange(32) % 5):
            loss = clip_loss(zi.to(dtype), zt.to(dtype), 0.01, ids)
            assert loss.dtype == torch.float32 and torch.isfinite(loss)
            assert abs(loss - clip_loss(zi, zt, 0.01, ids)) < 0.05 * clip_loss(zi, zt, 0.01, ids)

def test_empty_embeddings_are_refused_by_name():
    "No pairs is an error naming the argument (guards nonempty=True in the shared row check)."
    for ids in (None, torch.zeros(0, dtype=torch.long)):
        with pytest.raises(ValueError, match='image_embeddings is empty'):
            clip_loss(torch.empty(0, 4), torch.empty(0, 4), caption_ids=ids)

# --- captions -----------------------------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def shapes():
    return make_shapes(300, size=16, seed=11)

def test_factor_labels_follow_the_dataset_and_position_phrase(shapes):
    f = shapes.factors
    assert torch.equal(factor_labels(f, 'shape'), torch.tensor(f['shape'].to_numpy()))
    assert torch.equal(factor_labels(f, 'colour'), torch.tensor(f['colour'].to_numpy()))
    phrases = factor_classes('position')
    assert [phrases[i] for i in factor_labels(f, 'position')] == [position_phrase(x, y) for x, y in zip(f.x, f.y)]
    edges = pd.DataFrame({'x': [0.0, 1.0, 1 / 3, 2 / 3 - 1e-9], 'y': [1.0, 0.0, 0.5, 0.5]})
    assert [phrases[i] for i in factor_labels(edges, 'position')] == [position_phrase(x, y)
                                                                    for x, y in zip(edges.x, edges.y)]
    size = factor_labels(f, 'size')
    assert torch.equal(size.bool(), torch.as_tensor(f.scale.to_numpy() >= 0.27))
    assert 0 < size.sum() < len(f)

def test_describe_names_exactly_the_detail_factors(shapes):
    f = shapes.factors
    assert describe(f, templates=TEMPLATES[:1]) == shape_captions(f)
    labels = {k: factor_labels(f, k) for k in CAPTION_FACTORS}
    for detail in (('shape',), ('colour',), ('size', 'position'), CAPTION_FACTORS):
        captions = describe(f, detail, rng=2)
        for i, caption in enumerate(captions[:60]):
            padded = f' {caption} '
            for factor in CAPTION_FACTORS:
                said = [c for c in factor_classes(factor) if f' {c} ' in padded]
                if factor in detail: assert said == [factor_classes(factor)[labels[factor][i]]], caption
                else: assert not said, caption
    used = set(describe(f.assign(colour_name='red'), ('colour',), rng=0))
    assert len(used) == len(TEMPLATES)  # every template is drawn

def test_caption_ids_equal_exactly_when_the_meaning_is_equal(shapes):
    f = shapes.factors
    for detail in (('shape',), ('colour', 'shape', 'position'), CAPTION_FACTORS):
        ids = caption_ids(f, detail)
        meaning = [tuple(factor_labels(f, d)[i].item() for d in detail) for i in range(len(f))]
        same = ids[:, None] == ids[None, :]
        brute = torch.tensor([[a == b for b in meaning] for a in meaning])
        assert torch.equal(same, brute)

def test_class_prompts_are_the_templates_with_one_factor_said():
    prompts = class_prompts('shape')
    assert len(prompts) == 10 and all(len(p) == len(TEMPLATES) for p in prompts)
    assert prompts[3][1] == 'a photo of a triangle'
    assert class_prompts('position')[0][0] == 'a shape in the upper left'
    assert class_prompts('colour', TEMPLATES[:1]) == [[f'a {c} shape'] for c in factor_classes('colour')]

def test_tokenizer_pads_lowercases_and_refuses_unknown_words():
    tok = CaptionTokenizer()
    ids = tok(['A Red circle', 'there is a small blue star in the centre'])
    assert ids.shape == (2, 9) and (ids[0, 3:] == 0).all() and (ids[1] > 0).all()
    assert torch.equal(ids[0, :3], tok(['a red circle'])[0])
    every_caption = describe(make_shapes(200, size=8, seed=1).factors, CAPTION_FACTORS, rng=3)
    tok(every_caption)  # the default vocabulary covers every caption and prompt
    for factor in CAPTION_FACTORS: tok([p for group in class_prompts(factor) for p in group])
    with pytest.raises(ValueError, match='purple'): tok(['a purple circle'])

def test_caption_encoder_is_a_bag_of_words():
    tok = CaptionTokenizer()
    torch.manual_seed(0)
    enc = CaptionEncoder(len(tok), 8, 4)
    a = enc(tok(['a red circle in the centre']))
    torch.testing.assert_close(enc(tok(['in the centre a red circle'])), a)
    torch.testing.assert_close(enc(tok(['a red circle in the centre', 'a photo of a large blue star'
                                        ' in the upper left']))[:1], a)
    mean = enc.embedding(tok(['a red circle'])).mean(1)
    torch.testing.assert_close(enc(tok(['a red circle'])), enc.net(mean))

# --- views ------------------------------------------------------------------------------------------------------

def test_crop_views_full_flip_mirrors_x_exactly():
    data = make_shapes(8, size=16, seed=2)
    views, moved = crop_views(data.images, data.factors, scale=(1.0, 1.0), flip_p=1.0,
                              generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(views, data.images.flip(-1), atol=1e-5, rtol=0)
    np.testing.assert_allclose(moved.x, 1 - data.factors.x, atol=1e-6)
    np.testing.assert_allclose(moved.y, data.factors.y, atol=1e-6)
    np.testing.assert_allclose(moved.scale, data.factors.scale, atol=1e-6)
    assert moved.shape_name.tolist() == data.factors.shape_name.tolist()

def test_crop_views_move_the_factors_with_the_object():
    data = make_shapes(96, size=32, seed=6, noise=0.0)
    grid = (torch.arange(32) + 0.5) / 32
    def centre(m):
        return (m.sum(1) @ grid) / m.sum((1, 2)), (m.sum(2) @ grid) / m.sum((1, 2))
    x, y = centre(data.masks)
    marked = data.factors.assign(x=x.numpy(), y=y.numpy())
    masks, moved = crop_views(data.masks[:, None].expand(-1, 3, -1, -1), marked,
                              generator=torch.Generator().manual_seed(1))
    vx, vy = centre(masks[:, 0])
    zoom = torch.tensor((moved.scale / data.factors.scale).to_numpy(), dtype=torch.float32)
    whole = masks[:, 0].sum((1, 2)) / zoom ** 2 > 0.98 * data.masks.sum((1, 2))
    assert whole.sum() > 30
    assert (vx - torch.tensor(moved.x.to_numpy(), dtype=torch.float32)).abs()[whole].max() < 1 / 32
    assert (vy - torch.tensor(moved.y.to_numpy(), dtype=torch.float32)).abs()[whole].max() < 1 / 32
    assert (zoom >= 1 - 1e-6).all() and (zoom <= 2 ** 0.5 + 1e-6).all()  # areas in [0.5, 1]

def test_crop_views_scale_uint8_images_to_float():
    "uint8 pixels give the crops of pixels / 255 (guards check_image_batch in crop_views)."
    data = make_shapes(6, size=16, seed=2)
    u8 = (data.images * 255).round().to(torch.uint8)
    views, _ = crop_views(u8, data.factors, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(0)
    floats, _ = crop_views(u8.float() / 255, data.factors, generator=g)
    assert views.dtype == torch.float32
    torch.testing.assert_close(views, floats, atol=1e-6, rtol=1e-5)

# --- zero-shot and retrieval ---------------------------------------------------------------------------------------

def test_zero_shot_predict_is_the_brute_force_argmax():
    g = torch.Generator().manual_seed(7)
    z, w = torch.randn(40, 6, generator=g), torch.randn(5, 6, generator=g) * torch.rand(5, 1, generator=g) * 9
    cosines = [[float(image @ c / (image.norm() * c.norm())) for c in w] for image in z]
    for scale in (1, 3):  # cosine: lengths do not matter
        picked = zero_shot_predict(z * scale, w).tolist()
        # the best class by the brute force, up to a tie in the last bits (none is closer than 1e-3 here)
        assert all(row[p] >= max(row) - 1e-6 for row, p in zip(cosines, picked))

def test_class_embeddings_average_unit_prompt_embeddings_and_keep_the_mode():
    torch.manual_seed(0)
    model = TinyCLIP(width=4, blocks=2, embed_dim=8)
    model.train()
    prompts = class_prompts('colour')
    weights = class_embeddings(model, prompts)
    assert model.training  # mode restored
    model.eval()
    with torch.no_grad():
        expected = torch.stack([F.normalize(model.encode_text(p), dim=1).mean(0) for p in prompts])
    torch.testing.assert_close(weights, F.normalize(expected, dim=1))
    single = class_embeddings(model, [p[0] for p in prompts])
    with torch.no_grad():
        torch.testing.assert_close(single, F.normalize(model.encode_text([p[0] for p in prompts]), dim=1))

def test_class_embeddings_of_two_classes():
    "Two classes are enough for a zero-shot classifier (guards len(prompts) < 2, not <= 2)."
    torch.manual_seed(0)
    model = TinyCLIP(width=4, blocks=2, embed_dim=8)
    weights = class_embeddings(model, class_prompts('size'))
    assert weights.shape == (2, 8)
    with pytest.raises(ValueError, match='at least 2 classes'):
        class_embeddings(model, class_prompts('size')[:1])

def test_recall_at_k_against_brute_force():
    g = torch.Generator().manual_seed(8)
    q, k = torch.randn(50, 4, generator=g), torch.randn(60, 4, generator=g)
    qi, ki = torch.randint(6, (50,), generator=g), torch.arange(60) % 6
    cos = F.normalize(q, dim=1) @ F.normalize(k, dim=1).T
    got = recall_at_k(q, k, qi, ki, (1, 2, 7))
    ranked = cos.sort(1, descending=True).values
    for cut in (1, 2, 7):
        assert (ranked[:, cut - 1] - ranked[:, cut] > 1e-5).all()  # no near-tie at a cut: rounding can't flip a hit
        hits = [bool((ki[cos[i].argsort(descending=True)[:cut]] == qi[i]).any()) for i in range(50)]
        assert math.isclose(got[cut], float(np.mean(hits)))
    # one id per pair: recall@1 of identical sets is 1 (exactly: a mean of 50 ones in float64)
    assert recall_at_k(q, q, torch.arange(50), torch.arange(50), (1,))[1] == 1.0

def test_recall_at_k_ties_count_against_the_query():
    "A relevant key tied with an irrelevant one ranks behind it, wherever it sits in the list (topk used the order)."
    g = torch.Generator().manual_seed(9)
    # three directions, each key a power-of-two multiple of one: equal unit vectors, exact ties
    directions = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    q = directions[torch.randint(3, (30,), generator=g)]
    k = directions[torch.randint(3, (40,), generator=g)] * 2.0 ** torch.randint(3, (40, 1), generator=g)
    qi, ki = torch.randint(3, (30,), generator=g), torch.arange(40) % 3
    cos = (F.normalize(q, dim=1) @ F.normalize(k, dim=1).T).tolist()
    got = recall_at_k(q, k, qi, ki, (1, 2, 5))
    for cut in (1, 2, 5):
        hits = []
        for i in range(30):  # sort with irrelevant keys first among equal cosines
            order = sorted(range(40), key=lambda j: (-cos[i][j], bool(ki[j] == qi[i])))
            hits.append(any(ki[j] == qi[i] for j in order[:cut]))
        assert math.isclose(got[cut], float(np.mean(hits)))
    tied = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    assert recall_at_k(tied[:1], tied, torch.tensor([0]), torch.tensor([0, 1, 1]), (1, 2)) == {1: 0.0, 2: 1.0}

def test_recall_at_k_names_the_query_without_a_relevant_key_and_bounds_ks():
    "The message names the query row (guards any(1)); a cut-off past the keys is refused."
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(3, 4, generator=g), torch.randn(5, 4, generator=g)
    keys = torch.tensor([0, 1, 1, 0, 2])
    with pytest.raises(ValueError, match=r'query_ids\[1\] = 9 occurs nowhere in key_ids'):
        recall_at_k(q, k, torch.tensor([0, 9, 1]), keys, (1,))
    with pytest.raises(ValueError, match=r'ks must lie in \[1, 5\], got 6'):
        recall_at_k(q, k, torch.tensor([0, 1, 1]), keys, (1, 6))

# --- training ---------------------------------------------------------------------------------------------------

def tiny_run(**options):
    data = make_shapes(32, size=8, seed=3)
    torch.manual_seed(0)
    model = TinyCLIP(width=4, blocks=2, embed_dim=8)
    history = train_clip(model, data.images, data.factors, epochs=1, batch_size=16, progress=False,
                         **options)
    return history, model

def same_history(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    "Equal steps, and losses and temperatures equal to float32 rounding."
    return (a[['epoch', 'step']].equals(b[['epoch', 'step']])
            and np.allclose(a[['loss', 'temperature']], b[['loss', 'temperature']], rtol=1e-5, atol=1e-6))

def test_training_is_reproducible_and_options_matter():
    history, model = tiny_run()
    assert len(history) == 2 and not model.training
    norm = model.image_encoder.features[0][1]  # trained in training mode: BatchNorm statistics moved
    assert norm.num_batches_tracked == 2 and norm.running_mean.abs().sum() > 0
    assert same_history(history, tiny_run()[0])
    assert not same_history(history, tiny_run(seed=1)[0])
    shape_only = tiny_run(detail=('shape',))[0]
    assert not same_history(shape_only, tiny_run(detail=('shape',), mask_duplicates=False)[0])
    assert not same_history(history, tiny_run(views='none')[0])
    policy = tiny_run(views=AugmentationPolicy(size=8))[0]  # a policy's views: neither crops nor the images
    assert not same_history(policy, tiny_run(views='none')[0]) and not same_history(policy, history)

def test_temperature_parameter_is_clamped_after_every_step():
    _, model = tiny_run(lr=5.0)
    assert model.temperature.log_scale.item() <= math.log(100) + 1e-6
    assert model.temperature.log_scale.item() >= 0 - 1e-6

def test_train_clip_on_exactly_one_batch_of_uint8_images():
    "N == batch_size is one step (guards < not <=); uint8 without crops trains as pixels / 255."
    data = make_shapes(16, size=8, seed=3)
    u8 = (data.images * 255).round().to(torch.uint8)
    runs = []
    for images in (u8, u8.float() / 255):
        torch.manual_seed(0)
        model = TinyCLIP(width=4, blocks=2, embed_dim=8)
        runs.append(train_clip(model, images, data.factors, views='none', epochs=1, batch_size=16,
                               progress=False))
    assert len(runs[0]) == 1 and same_history(*runs)

# --- factors without the columns a function reads ---------------------------------------------------------------

@pytest.mark.parametrize('drop, missing', [(['scale'], r"\['scale'\]"), (['x', 'y'], r"\['x', 'y'\]")])
def test_crop_views_names_the_missing_factor_columns(drop, missing):
    data = make_shapes(4, size=8, seed=0)
    with pytest.raises(ValueError, match=rf"factors lacks the columns {missing} that crop_views needs"):
        crop_views(data.images, data.factors.drop(columns=drop))

def test_train_clip_with_crops_refuses_factors_without_scale_before_training():
    data = make_shapes(32, size=8, seed=3)
    torch.manual_seed(0)
    model = TinyCLIP(width=4, blocks=2, embed_dim=8)
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError, match=r"factors lacks the columns \['scale'\] that views='crop' needs"):
        train_clip(model, data.images, data.factors.drop(columns='scale'), epochs=1, batch_size=16,
                   progress=False)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # no step: bit for bit
    # without crops, and captions that do not say the size, scale is never read
    history = train_clip(model, data.images, data.factors.drop(columns='scale'), views='none', epochs=1,
                         batch_size=16, progress=False)
    assert len(history) == 2

def test_factor_labels_and_describe_name_the_missing_columns():
    f = make_shapes(4, size=8, seed=0).factors
    with pytest.raises(ValueError, match=r"factors lacks the columns \['scale'\] that 'size' needs"):
        describe(f.drop(columns='scale'), ('size', 'shape'))
    with pytest.raises(ValueError, match=r"\['x'\] that 'position' needs"):
        caption_ids(f.drop(columns='x'), ('position',))

# --- word ids are indices: the shared check -----------------------------------------------------------------------

def test_caption_encoder_refuses_uint8_ids_and_compares_bounds_in_int64():
    torch.manual_seed(0)
    enc = CaptionEncoder(300, 4, 3)
    ids = torch.tensor([[100, 5, 0]])
    want = enc(ids)
    for dtype in (torch.int8, torch.int16, torch.int32):  # 300 wraps to 44 in int8: 100 is still valid
        torch.testing.assert_close(enc(ids.to(dtype)), want)
    with pytest.raises(TypeError, match=r'tokens must hold int64 \(or int32\) indices, got torch.uint8'):
        enc(ids.to(torch.uint8))
    with pytest.raises(ValueError, match=r'tokens must lie in \[0, 299\] for 300 rows, got \[300\]'):
        enc(torch.tensor([[1, 300]]))
    with pytest.raises(ValueError, match='negatives are refused'): enc(torch.tensor([[1, -1]]))

# --- the loss is never negative ------------------------------------------------------------------------------------

@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
@pytest.mark.parametrize('ids', [None, torch.tensor([0])])
def test_a_single_pair_of_identical_embeddings_costs_zero_never_less(dtype, ids):
    z = torch.randn(1, 7, generator=torch.Generator().manual_seed(0), dtype=dtype)
    for tau in (1.0, 0.07, 0.01):
        for reduction in ('mean', 'sum', 'none'):
            loss = clip_loss(z, z.clone(), tau, ids, reduction)
            assert (loss >= 0).all() and (loss < 1e-6).all(), (tau, reduction, loss)

def _directions(zi, zt, tau, ids):
    "−log p of each pair, image→text and text→image, written out with log_softmax (no cross_entropy)."
    logits = F.normalize(zi, dim=1) @ F.normalize(zt, dim=1).T / tau
    same = (ids[:, None] == ids[None, :]) & ~torch.eye(len(ids), dtype=torch.bool)
    logits = logits.masked_fill(same, -math.inf)
    return -logits.log_softmax(1).diagonal(), -logits.log_softmax(0).diagonal()

def test_rounding_below_zero_is_lifted_to_zero_and_the_gradient_is_unchanged(monkeypatch):
    g = torch.Generator().manual_seed(9)
    zi = torch.randn(6, 4, generator=g, dtype=torch.float64)
    zt = torch.cat([zi[:3] + 1e-3 * torch.randn(3, 4, generator=g, dtype=torch.float64),
                    torch.randn(3, 4, generator=g, dtype=torch.float64)])  # pairs 0-2 almost perfect
    ids, shift = torch.tensor([0, 1, 2, 3, 4, 3]), 1e-3
    a, b = _directions(zi, zt, 0.05, ids)
    assert (a[:3] < shift).all() and (a[3:] > shift).all()  # the shift pushes exactly rows 0-2 below 0
    # A cross_entropy that rounds down by `shift`: what a kernel's last bits do, magnified.
    plain = F.cross_entropy
    monkeypatch.setattr(F, 'cross_entropy', lambda *args, **kw: plain(*args, **kw) - shift)
    per_pair = clip_loss(zi, zt, 0.05, ids, reduction='none')
    want = ((a - shift).clamp_min(0) + (b - shift).clamp_min(0)) / 2
    torch.testing.assert_close(per_pair, want, atol=1e-12, rtol=1e-9)
    assert (per_pair >= 0).all() and clip_loss(zi, zt, 0.05, ids) >= 0
    # The gradient is that of the unfloored loss, on the lifted rows too (a clamp would zero it there).
    leaves = [x.clone().requires_grad_() for x in (zi, zt, torch.tensor(0.05, dtype=torch.float64))]
    clip_loss(*leaves, ids, reduction='sum').backward()
    got = [x.grad for x in leaves]
    ref = [x.detach().clone().requires_grad_() for x in leaves]
    a, b = _directions(*ref, ids)
    ((a + b) / 2).sum().backward()
    for x, r in zip(got, ref): torch.testing.assert_close(x, r.grad, atol=1e-10, rtol=1e-7)


# --- the sigmoid loss (SigLIP) --------------------------------------------------------------------------------

def siglip_loop(zi, zt, t_prime, b, ids=None):
    "Every (image, caption) pair: −log σ(z · (exp(t′) cos + b)), z = +1 on the pair, −1 otherwise; / N."
    zi, zt = F.normalize(zi.double(), dim=1), F.normalize(zt.double(), dim=1)
    total = 0.0
    for i in range(len(zi)):
        for j in range(len(zt)):
            if ids is not None and i != j and ids[i] == ids[j]: continue
            logit = math.exp(t_prime) * float(zi[i] @ zt[j]) + b
            total += -math.log(1 / (1 + math.exp(-(1.0 if i == j else -1.0) * logit)))
    return total / len(zi)

@pytest.mark.parametrize('seed', [0, 1])
@pytest.mark.parametrize('t_prime,b', [(math.log(10), -10.0), (0.0, 0.0), (1.5, 2.0), (2.0, -math.log(6))])
def test_siglip_loss_against_a_double_loop(seed, t_prime, b):
    zi, zt = pairs(seed=seed)
    assert siglip_loss(zi, zt, t_prime, b).item() == pytest.approx(siglip_loop(zi, zt, t_prime, b), rel=1e-10)
    ids = torch.tensor([0, 1, 0, 2, 1, 1, 3])
    assert siglip_loss(zi, zt, t_prime, b, ids).item() == pytest.approx(
        siglip_loop(zi, zt, t_prime, b, ids.tolist()), rel=1e-10)
    # tensors give the same value as numbers
    same = siglip_loss(zi, zt, torch.tensor(t_prime, dtype=torch.float64), torch.tensor(b, dtype=torch.float64))
    assert same.item() == pytest.approx(siglip_loop(zi, zt, t_prime, b), rel=1e-10)

def test_siglip_loss_by_hand():
    # identity embeddings: own caption cosine 1, others 0; at the paper's start
    want = math.log(2) + 3 * math.log1p(math.exp(-10.0))
    assert siglip_loss(torch.eye(4), torch.eye(4)).item() == pytest.approx(want, rel=1e-6)
    # collapsed: every pair costs log 2 at the paper's start, 16 pairs / 4 images
    assert siglip_loss(torch.ones(4, 2), torch.ones(4, 2)).item() == pytest.approx(4 * math.log(2), rel=1e-6)
    # not symmetric in general? it is: swapping towers transposes the pair matrix
    zi, zt = pairs()
    assert torch.isclose(siglip_loss(zi, zt, 0.3, 0.2), siglip_loss(zt, zi, 0.3, 0.2))
    # the loss is divided by the number of images, not by the number of pairs
    assert siglip_loss(zi[:1], zt[:1], 0.0, 0.0).item() == pytest.approx(
        math.log1p(math.exp(-float(F.normalize(zi[:1], dim=1) @ F.normalize(zt[:1], dim=1).T))))

def test_siglip_loss_gradcheck_with_learnable_scale_and_bias():
    zi, zt = pairs(n=5, d=4)
    t_prime = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    b = torch.tensor(-1.5, dtype=torch.float64, requires_grad=True)
    ids = torch.tensor([0, 1, 0, 2, 3])
    for caption_ids in (None, ids):
        assert gradcheck(lambda a, c, s, o: siglip_loss(a, c, s, o, caption_ids),
                         (zi.clone().requires_grad_(), zt.clone().requires_grad_(), t_prime, b))
    # the gradients of t′ and b by hand: dL/db = (1/N) Σ −z σ(−z ℓ), dL/dt′ = (1/N) Σ −z σ(−z ℓ) t cos
    cos = F.normalize(zi, dim=1) @ F.normalize(zt, dim=1).T
    z = 2 * torch.eye(5, dtype=torch.float64) - 1
    logits = cos * t_prime.exp() + b
    w = -z * torch.sigmoid(-z * logits) / 5
    siglip_loss(zi, zt, t_prime, b).backward()
    assert torch.isclose(b.grad, w.sum()) and torch.isclose(t_prime.grad, (w * logits.sub(b)).sum())

def test_siglip_loss_half_precision_and_large_logits_stay_finite():
    zi, zt = pairs(dtype=torch.float32)
    for dtype in (torch.float16, torch.bfloat16):
        a, c = zi.to(dtype) * 1e3, zt.to(dtype) * 1e3  # norms of 1e3: float16 squares overflow
        loss = siglip_loss(a, c, 6.0, -50.0)
        assert loss.dtype == torch.float32 and torch.isfinite(loss)
        assert loss.item() == pytest.approx(siglip_loss(a.float(), c.float(), 6.0, -50.0).item(), rel=1e-5)
    # a logit of ±400: log(1 + exp(400)) overflows a naive formula, logsigmoid does not
    assert torch.isfinite(siglip_loss(zi, -zi, 6.0, 0.0))

def test_prior_bias_and_the_module():
    assert prior_bias(2) == 0.0 and prior_bias(65) == pytest.approx(-math.log(64))
    assert torch.sigmoid(torch.tensor(prior_bias(512), dtype=torch.float64)).item() == pytest.approx(1 / 512)
    loss_fn = SigLIPLoss()
    assert loss_fn.log_scale.item() == pytest.approx(math.log(10)) and loss_fn.bias.item() == -10.0
    zi, zt = pairs(dtype=torch.float32)
    loss = loss_fn(zi, zt)
    assert loss.item() == pytest.approx(siglip_loss(zi, zt).item(), rel=1e-6)
    loss.backward()
    assert loss_fn.log_scale.grad is not None and loss_fn.bias.grad is not None
    assert sorted(n for n, _ in loss_fn.named_parameters()) == ['bias', 'log_scale']
    prior = SigLIPLoss(bias=prior_bias(7))
    assert prior.bias.item() == pytest.approx(-math.log(6))

@pytest.mark.parametrize('call,error,match', [
    (lambda zi, zt: siglip_loss(zi, zt[:3]), ValueError, 'must have the same shape'),
    (lambda zi, zt: siglip_loss(zi, zt, log_scale=1000.0), ValueError, 'log_scale is too large'),
    (lambda zi, zt: siglip_loss(zi, zt, log_scale=math.nan), ValueError, 'log_scale'),
    (lambda zi, zt: siglip_loss(zi, zt, bias=torch.tensor([1.0, 2.0])), TypeError, 'bias must be a number'),
    (lambda zi, zt: siglip_loss(zi, zt, bias=torch.tensor(math.inf)), ValueError, 'bias must be finite'),
    (lambda zi, zt: siglip_loss(zi, zt, bias=torch.tensor(1)), TypeError, 'bias must be a number'),
    (lambda zi, zt: siglip_loss(zi, zt, bias='-10'), TypeError, 'bias'),
    (lambda zi, zt: siglip_loss(zi, zt, caption_ids=torch.arange(3)), ValueError, 'caption_ids has 3 entries'),
    (lambda zi, zt: siglip_loss(zi, zt, caption_ids=torch.ones(7, dtype=torch.bool)), TypeError, 'caption_ids'),
    (lambda zi, zt: siglip_loss(zi.long(), zt), TypeError, 'image_embeddings must be floating point'),
    (lambda zi, zt: prior_bias(1), ValueError, 'batch_size'),
    (lambda zi, zt: SigLIPLoss(bias=math.inf), ValueError, 'bias'),
])
def test_siglip_bad_inputs(call, error, match):
    zi, zt = pairs()
    with pytest.raises(error, match=match): call(zi, zt)

# --- the SigLIP method: the towers, its own t′ and b, the duplicate mask ---------------------------------------

def siglip_method(**options):
    from contrastive_nb.clip import SigLIP, SigLIPOptions
    torch.manual_seed(0)
    model = TinyCLIP(width=4, blocks=2, embed_dim=8).eval()  # eval: the towers' output is a plain function
    return SigLIP(model, SigLIPOptions(**options)), model

def siglip_batch():
    from contrastive_nb.methods import Batch
    data = make_shapes(6, size=8, seed=3)
    texts = ['a red circle', 'a blue star', 'a red circle', 'a small shape', 'a blue star', 'a photo of a ring']
    labels = torch.tensor([0, 1, 0, 2, 1, 3])  # what each caption says: rows 0, 2 and 1, 4 are duplicates
    return Batch([data.images], torch.arange(6), labels, torch.Generator().manual_seed(0), texts=texts)

def test_siglip_method_loss_is_the_double_loop_over_its_towers_with_its_own_scale_and_bias():
    "SigLIP.loss: the towers' embeddings of the view and the captions, its t′ and b, duplicates left out."
    batch = siglip_batch()
    for mask in (True, False):
        method, model = siglip_method(log_scale=1.2, bias=-3.0, mask_duplicates=mask)
        assert method.n_views == 1 and method.model is model
        with torch.no_grad(): zi, zt = model(batch.views[0], batch.texts)
        want = siglip_loop(zi, zt, 1.2, -3.0, batch.labels.tolist() if mask else None)
        loss = method.loss(batch)
        assert isinstance(loss, torch.Tensor) and loss.shape == () and loss.requires_grad
        assert loss.item() == pytest.approx(want, rel=1e-5)
    # the mask matters on this batch: the two reference values differ by far more than the tolerance
    assert siglip_loop(zi, zt, 1.2, -3.0, batch.labels.tolist()) < 0.99 * siglip_loop(zi, zt, 1.2, -3.0)

def test_siglip_method_trains_its_scale_and_bias_from_its_options():
    "t′ and b start at the options' values (or the paper's), are the method's parameters and get gradients."
    from contrastive_nb.clip import SigLIP, SigLIPOptions
    method, model = siglip_method(log_scale=0.5, bias=prior_bias(6))
    assert method.sigmoid.log_scale.item() == pytest.approx(0.5)
    assert method.sigmoid.bias.item() == pytest.approx(-math.log(5))
    names = {n for n, _ in method.named_parameters()}
    assert {'sigmoid.log_scale', 'sigmoid.bias'} <= names and len(names) == 2 + len(list(model.parameters()))
    method.loss(siglip_batch()).backward()
    assert method.sigmoid.log_scale.grad.abs() > 0 and method.sigmoid.bias.grad.abs() > 0
    assert all(p.grad is not None for p in model.image_encoder.parameters())
    default = SigLIP(model)  # no options: the paper's start
    assert default.options == SigLIPOptions() and default.options.mask_duplicates is True
    assert default.sigmoid.log_scale.item() == pytest.approx(math.log(10)) and default.sigmoid.bias.item() == -10.0

def test_siglip_method_refuses_what_it_cannot_train():
    from contrastive_nb.clip import SigLIP, SigLIPOptions
    from contrastive_nb.models import SmallCNN
    with pytest.raises(TypeError, match='model must be a TinyCLIP, got SmallCNN'):
        SigLIP(SmallCNN(width=4, blocks=2))
    with pytest.raises(TypeError, match='options must be a SigLIPOptions'):
        SigLIP(siglip_method()[1], object())
    method, _ = siglip_method()
    batch = siglip_batch()
    batch.texts = None
    with pytest.raises(ValueError, match='SigLIP needs batch.texts'): method.loss(batch)
    with pytest.raises(ValueError, match='log_scale'): SigLIPOptions(log_scale=math.log(1e4) + 0.01)
    assert SigLIPOptions(log_scale=math.log(1e4)).log_scale == pytest.approx(math.log(1e4))
    with pytest.raises(TypeError, match='mask_duplicates'): SigLIPOptions(mask_duplicates=1)

def test_train_clip_siglip_records_its_scale_and_bias_from_their_start():
    "loss='siglip': t′ and b start at log 10 and `bias` (or −10), are trained, and are recorded after each step."
    for bias, start in ((-2.0, -2.0), (None, -10.0)):
        history, _ = tiny_run(loss='siglip', bias=bias)
        assert len(history) == 2 and list(history.columns[-2:]) == ['temperature', 'bias']
        # one Adam step moves each parameter by about lr = 2e-3: near the start, but moved
        moved = (history.bias - start).abs()
        assert (moved < 1e-2).all() and (moved > 1e-4).all(), (bias, history.bias.tolist())
        assert np.allclose(history.temperature, 0.1, rtol=0.02)  # 1 / exp(t′), t′ near log 10
        assert not np.allclose(history.temperature, 0.1, rtol=1e-5, atol=0)
    assert 'bias' not in tiny_run()[0].columns  # CLIP has no b
    data = make_shapes(32, size=8, seed=3)
    with pytest.raises(ValueError, match="bias sets SigLIP's start: it needs loss='siglip'"):
        train_clip(TinyCLIP(width=4, blocks=2, embed_dim=8), data.images, data.factors, batch_size=16, bias=-2.0,
                   progress=False)

@pytest.mark.parametrize('bad, match', [
    (dict(factors='short'), 'factors'), (dict(epochs=0), 'epochs'), (dict(batch_size=1), 'batch_size'),
    (dict(batch_size='4'), 'batch_size'), (dict(lr=0.0), 'lr'), (dict(weight_decay=-1e-5), 'weight_decay'),
    (dict(mask_duplicates=1), 'mask_duplicates'), (dict(loss='sigmoid'), 'loss'), (dict(seed=-1), 'seed'),
    (dict(views='bogus'), 'views')])
def test_train_clip_refuses_a_bad_argument_by_name_before_training(bad, match):
    "Each argument is refused by name before a step (deterministic: the bad-input registry draws only some)."
    data = make_shapes(8, size=8, seed=3)
    torch.manual_seed(0)
    model = TinyCLIP(width=4, blocks=2, embed_dim=8)
    before = [p.detach().clone() for p in model.parameters()]
    args = {**dict(epochs=1, batch_size=4, views='none', progress=False), **bad}
    if args.pop('factors', None): args['factors'] = data.factors.iloc[:6]
    with pytest.raises((TypeError, ValueError), match=match):
        train_clip(model, data.images, args.pop('factors', data.factors), **args)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # no step taken

def test_train_clip_takes_the_smallest_batch_of_two_pairs():
    data = make_shapes(4, size=8, seed=3)
    torch.manual_seed(0)
    history = train_clip(TinyCLIP(width=4, blocks=2, embed_dim=8), data.images, data.factors, views='none',
                         epochs=1, batch_size=2, loss='siglip', progress=False)
    assert len(history) == 2 and np.isfinite(history[['loss', 'temperature', 'bias']].to_numpy()).all()
