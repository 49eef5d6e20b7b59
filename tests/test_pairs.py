"""Package tests for contrastive_nb.pairs: pair masks, views, text views, other positives, false negatives."""
from types import MappingProxyType

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch.utils.data import DataLoader
from torchvision.transforms import v2

from contrastive_nb.augment import AugmentationPolicy, simclr_transform
from contrastive_nb.data import make_shapes
from contrastive_nb.pairs import (TICKET_SYNONYMS, MultiViewDataset, delete_words,
                                  expected_false_negatives, flatten_views, instance_ids, mask_span, pair_masks,
                                  position_phrase, replace_synonyms, shape_captions, temporal_pair_masks, ticket_view)

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

@pytest.mark.parametrize('bad, error', [
    (torch.tensor([[0, 1], [1, 0]]), ValueError), (torch.tensor(3), ValueError), (torch.tensor([0.0, 1.0]), TypeError),
    (torch.tensor([True, False]), TypeError), (['cat', 'dog'], TypeError), ([0.5, 1.0], TypeError)])
def test_pair_masks_rejects_bad_ids(bad, error):
    with pytest.raises(error, match='ids'): pair_masks(bad)

def test_pair_masks_of_an_empty_batch_is_empty():
    pos, neg = pair_masks([])
    assert pos.shape == neg.shape == (0, 0)

def test_pair_masks_keeps_the_device_and_layout():
    ids = torch.tensor([[0, 1], [0, 2]])[:, 0]  # a non-contiguous view: ids [0, 0]
    assert not ids.is_contiguous()
    pos, _ = pair_masks(ids)
    assert pos.tolist() == [[False, True], [True, False]] and pos.device == ids.device

@pytest.mark.parametrize('n, n_views', [(0, 2), (3, 0), (-1, 2)])
def test_instance_ids_rejects_bad_sizes(n, n_views):
    with pytest.raises(ValueError): instance_ids(n, n_views)

@pytest.mark.parametrize('n, n_views', [(2.5, 2), (True, 2), (3, 2.0), ('3', 2)])
def test_instance_ids_rejects_non_integers(n, n_views):
    with pytest.raises(TypeError): instance_ids(n, n_views)

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

@pytest.mark.parametrize('times, window, seqs, error', [
    (torch.tensor([[0, 1]]), 1, None, ValueError), (torch.tensor([0.0, float('nan')]), 1, None, ValueError),
    (torch.tensor([0.0, float('inf')]), 1, None, ValueError), (torch.arange(3), -1, None, ValueError),
    (torch.arange(3), float('nan'), None, ValueError),
    (torch.arange(3), 1, torch.zeros(2, dtype=torch.long), ValueError),
    (torch.arange(3), 1, torch.zeros(3), TypeError), (torch.tensor([True, False]), 1, None, TypeError),
    (torch.arange(3), True, None, TypeError), (torch.arange(3), '1', None, TypeError)])
def test_temporal_masks_reject_bad_input(times, window, seqs, error):
    with pytest.raises(error): temporal_pair_masks(times, window, seqs)

def test_temporal_masks_accept_lists():
    pos, _ = temporal_pair_masks([0, 1, 5], 1)
    assert pos.tolist() == [[False, True, False], [True, False, False], [False, False, False]]

# --- views ------------------------------------------------------------------------------------------------------

def test_multiview_dataset_keeps_source_id_and_label(shapes):
    ds = MultiViewDataset(shapes, simclr_transform(AugmentationPolicy()), n_views=3)
    views, i, label = ds[-2]
    assert views.shape == (3, 3, 32, 32) and i == len(shapes) - 2 and label == shapes.labels[-2]
    xb, ib, lb = next(iter(DataLoader(ds, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))))
    assert xb.shape == (8, 3, 3, 32, 32) and torch.equal(lb, shapes.labels[ib])
    flat = flatten_views(xb)
    assert flat.shape == (24, 3, 32, 32) and torch.equal(flat[2 * 8 + 5], xb[5, 2])  # exact: a copy, no arithmetic

def test_multiview_dataset_without_labels_and_with_text():
    ds = MultiViewDataset(['one two three four'], lambda t: ticket_view(t, np.random.default_rng(0)), n_views=2)
    views, i, label = ds[0]
    assert isinstance(views, list) and len(views) == 2 and i == 0 and label == -1
    with pytest.raises(IndexError): ds[1]
    with pytest.raises(ValueError): MultiViewDataset(['a'], str, n_views=0)
    with pytest.raises(TypeError): MultiViewDataset(['a'], str, n_views=2.0)
    with pytest.raises(TypeError): MultiViewDataset(['a'], 'not callable')
    with pytest.raises(TypeError): MultiViewDataset(3, str)
    with pytest.raises(TypeError): MultiViewDataset('a string', str)
    with pytest.raises(TypeError): ds[True]

def test_flatten_views_matches_instance_ids():
    views = torch.arange(4)[:, None].expand(4, 3) * 10 + torch.arange(3)  # source i, view v holds 10 i + v
    flat = flatten_views(views)
    assert torch.equal(flat // 10, instance_ids(4, 3)) and torch.equal(flat % 10, torch.arange(3).repeat_interleave(4))
    with pytest.raises(ValueError): flatten_views(torch.arange(3))
    with pytest.raises(TypeError): flatten_views([[1, 2], [3, 4]])

def test_v2_transform_on_a_batch_shares_its_parameters(shapes):
    "The pitfall augment_batch fixes: torchvision v2 draws one set of parameters per call, for the whole batch."
    transform = simclr_transform(AugmentationPolicy())
    copies = shapes.images[:1].expand(16, -1, -1, -1).clone()
    for seed in range(5):
        torch.manual_seed(seed)
        out = transform(copies)
        assert all(torch.allclose(out[0], out[k], atol=1e-6) for k in range(16))  # one draw: equal up to rounding
    # With different images the crop is shared too: a crop of a coordinate ramp gives the same ramp for every image.
    ramp = torch.linspace(0, 1, 32).expand(3, 32, 32)
    batch = torch.stack([ramp * (0.5 + 0.1 * k) for k in range(4)])
    torch.manual_seed(0)
    cropped = v2.RandomResizedCrop(32, scale=(0.1, 0.5), antialias=False)(batch)
    scaled_back = cropped / torch.tensor([0.5 + 0.1 * k for k in range(4)])[:, None, None, None]
    assert torch.allclose(scaled_back, scaled_back[:1].expand_as(scaled_back), atol=1e-5)

# --- other sources of positives ----------------------------------------------------------------------------------

@pytest.mark.parametrize('x, y, phrase', [
    (0.1, 0.1, 'in the upper left'), (0.5, 0.1, 'at the top'), (0.9, 0.2, 'in the upper right'),
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
    with pytest.raises(TypeError): shape_captions(table.to_dict())
    with pytest.raises(ValueError): shape_captions(table.assign(x=1.5))  # outside the image
    with pytest.raises(ValueError): shape_captions(table.assign(y=float('nan')))

@pytest.mark.parametrize('x, y, error', [(-0.1, 0.5, ValueError), (0.5, 1.01, ValueError),
                                         (float('nan'), 0.5, ValueError), ('0.5', 0.5, TypeError)])
def test_position_phrase_rejects_points_outside_the_image(x, y, error):
    with pytest.raises(error): position_phrase(x, y)

# --- text views --------------------------------------------------------------------------------------------------

TEXT = "Hi, I was charged twice for my subscription. Please refund one payment!"

@FAST
@given(st.lists(st.sampled_from(list('abc ,.!') + ['charged ', 'Twice, ', 'app ']), max_size=40).map(''.join),
       st.integers(0, 2**32 - 1))
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

def test_synonym_tables_accept_tuples_lists_and_mappings():
    assert replace_synonyms('refund please', 1.0, synonyms={'refund': ['money back']}) == 'money back please'
    table = MappingProxyType({'refund': ('reimbursement',)})
    assert replace_synonyms('Refund!', 1.0, synonyms=table) == 'Reimbursement!'
    assert replace_synonyms('refund', 1.0, synonyms={'refund': ()}) == 'refund'  # no options: kept

@pytest.mark.parametrize('table, error, message', [
    ({'refund': 'money back'}, TypeError,  # a str would be replaced by one of its characters
     r"synonyms\['refund'\] must be a tuple or list of strings, got str 'money back'; write \('money back',\)"),
    ({'refund': {'money back'}}, TypeError, r"synonyms\['refund'\] must be a tuple or list"),  # a set has no order
    ({'refund': None}, TypeError, r"synonyms\['refund'\] must be a tuple or list"),
    ({'refund': ('money back', 3)}, TypeError, r"synonyms\['refund'\] must hold strings, got int 3"),
    ({'refund': ('',)}, ValueError, r"synonyms\['refund'\] holds an empty replacement"),
    ({3: ('three',)}, TypeError, r"synonyms keys must be strings, got int 3"),
    ({'Refund': ('money back',)}, ValueError, r"synonyms key 'Refund' can never match"),
    ({'money back': ('refund',)}, ValueError, r"synonyms key 'money back' can never match"),
    ([('refund', ('money back',))], TypeError, r"synonyms must be a dict of word -> replacements, got list"),
])
def test_synonym_table_is_checked_where_it_enters(table, error, message):
    with pytest.raises(error, match=message):
        replace_synonyms('I want a refund', 1.0, synonyms=table)

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

@pytest.mark.parametrize('call, error', [
    (lambda: delete_words(TEXT, -0.1), ValueError), (lambda: replace_synonyms(TEXT, 2.0), ValueError),
    (lambda: mask_span(TEXT, 1.5), ValueError), (lambda: delete_words(TEXT, float('nan')), ValueError),
    (lambda: ticket_view(TEXT, rng=-1), ValueError), (lambda: delete_words(3, 0.1), TypeError),
    (lambda: ticket_view(TEXT, rng=1.5), TypeError), (lambda: ticket_view(TEXT, rng=True), TypeError),
    (lambda: delete_words(TEXT, True), TypeError), (lambda: mask_span(None), TypeError),
    (lambda: mask_span(TEXT, mask=3), TypeError)])
def test_text_views_reject_bad_input(call, error):
    with pytest.raises(error): call()

# --- false negatives ---------------------------------------------------------------------------------------------

def _simulate_with_replacement(b, c, n_batches, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(c, (n_batches, b), generator=g)
    counts = torch.zeros(n_batches, c).scatter_add_(1, labels, torch.ones(n_batches, b))
    others = counts.gather(1, labels) - 1
    return others.mean().item()

@pytest.mark.parametrize('b, c', [(2, 2), (16, 10), (256, 10), (4096, 1000), (100, 1)])
def test_false_negative_formula_matches_simulation_with_replacement(b, c):
    mean = _simulate_with_replacement(b, c, max(400, 400_000 // b))
    assert mean == pytest.approx(expected_false_negatives(b, c), rel=0.03, abs=0.01)

@pytest.mark.parametrize('b, c, n', [(8, 4, 40), (50, 10, 100), (64, 10, 1000), (10, 5, 10)])
def test_false_negative_formula_matches_simulation_without_replacement(b, c, n):
    labels = torch.arange(n) % c
    g = torch.Generator().manual_seed(0)
    means = []
    for _ in range(2000):
        batch = labels[torch.randperm(n, generator=g)[:b]]
        others = torch.bincount(batch, minlength=c)[batch] - 1
        means.append(others.float().mean())
    assert torch.stack(means).mean().item() == pytest.approx(expected_false_negatives(b, c, dataset_size=n),
                                                             rel=0.03, abs=0.01)

def test_false_negatives_counted_with_the_masks():
    labels = torch.randint(5, (40,), generator=torch.Generator().manual_seed(0))
    _, negative = pair_masks(instance_ids(40, 2))
    same_class, _ = pair_masks(labels.repeat(2))
    per_anchor = (negative & same_class).sum(1)
    assert torch.equal(per_anchor, 2 * (torch.bincount(labels)[labels.repeat(2)] - 1))

def test_false_negative_numbers_from_the_literature():
    assert expected_false_negatives(4096, 1000) == pytest.approx(4.095)
    assert expected_false_negatives(4096, 1000, n_views=2) == pytest.approx(8.19)
    # exact: V (B - 1) P = 1 * 0 * 0.1 is 0.0 with no rounding
    assert expected_false_negatives(1, 10) == 0

@pytest.mark.parametrize('call, error', [
    (lambda: expected_false_negatives(0, 10), ValueError), (lambda: expected_false_negatives(10, 0), ValueError),
    (lambda: expected_false_negatives(10, 3, dataset_size=100), ValueError),
    (lambda: expected_false_negatives(10, 5, dataset_size=5), ValueError),
    (lambda: expected_false_negatives(10, 5, n_views=0), ValueError),
    (lambda: expected_false_negatives(True, 10), TypeError), (lambda: expected_false_negatives(10.0, 10), TypeError),
    (lambda: expected_false_negatives(10, 5, n_views=2.0), TypeError)])
def test_false_negative_formulas_reject_bad_input(call, error):
    with pytest.raises(error): call()
