"""Package tests for contrastive_nb.memory_bank: the momentum update, duplicate merging, self-free
negative sampling, the bank's state, its errors on bad input, and the training loop."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st
from torch import nn

from contrastive_nb.infonce import info_nce
from contrastive_nb.memory_bank import (MemoryBank, merge_duplicates, momentum_blend,
                                        negative_indices, shared_negative_indices, train_memory_bank)
from contrastive_nb.augment import AugmentationPolicy, augment_batch

F64 = torch.float64

def unit_rows(n: int, d: int, seed: int, dtype=F64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(n, d, generator=g, dtype=dtype), dim=1)

# --- the update maths --------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 8), st.floats(0, 1), st.integers(0, 10_000))
def test_momentum_blend_is_the_normalised_blend(n, d, m, seed):
    rows, new = unit_rows(n, d, seed), unit_rows(n, d, seed + 1)
    blend = m * rows + (1 - m) * new
    out = momentum_blend(rows, new, m)
    ok = blend.norm(dim=1) > 1e-6  # away from the cancelling case, the formula itself
    assert torch.allclose(out[ok], blend[ok] / blend[ok].norm(dim=1, keepdim=True), atol=1e-12)
    assert torch.allclose(out.norm(dim=1), torch.ones(n, dtype=F64))

def test_momentum_zero_replaces_and_one_keeps():
    rows, new = unit_rows(5, 4, 0), unit_rows(5, 4, 1)
    assert torch.allclose(momentum_blend(rows, new, 0.0), new, atol=1e-15)
    assert torch.equal(momentum_blend(rows, new, 1.0), rows)  # exact: m = 1 returns a copy of rows

def test_momentum_blend_by_hand_and_cancelling_row_is_kept():
    rows = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    new = torch.tensor([[0.0, 1.0], [-1.0, 0.0]])
    out = momentum_blend(rows, new, 0.5)
    assert torch.allclose(out[0], torch.tensor([1.0, 1.0]) / math.sqrt(2))
    assert torch.equal(out[1], rows[1]) and torch.isfinite(out).all()  # exact: the stored row itself
    want = torch.tensor([0.9, 0.1]) / math.hypot(0.9, 0.1)
    assert torch.allclose(momentum_blend(rows, new, 0.9)[0], want)

def test_momentum_blend_keeps_the_dtype_of_rows_and_accepts_layouts():
    rows, new = unit_rows(4, 3, 0, torch.float32), unit_rows(4, 3, 1)
    assert momentum_blend(rows, new, 0.5).dtype == torch.float32
    half = momentum_blend(rows.half(), new.half(), 0.5)
    assert half.dtype == torch.float16 and torch.allclose(half.float().norm(dim=1), torch.ones(4),
                                                          atol=1e-2)
    rows_t = unit_rows(3, 4, 2).T  # non-contiguous (4, 3)
    assert not rows_t.is_contiguous()
    assert torch.allclose(momentum_blend(rows_t, unit_rows(4, 3, 3), 0.3),
                          momentum_blend(rows_t.contiguous(), unit_rows(4, 3, 3), 0.3))
    assert momentum_blend(torch.empty(0, 3), torch.empty(0, 3), 0.5).shape == (0, 3)

@pytest.mark.parametrize('m', [-0.1, 1.5, float('nan'), float('inf')])
def test_momentum_out_of_range(m):
    with pytest.raises(ValueError, match='momentum'):
        momentum_blend(unit_rows(2, 2, 0), unit_rows(2, 2, 1), m)
    with pytest.raises(ValueError, match='momentum'): MemoryBank(4, 2, momentum=m)

@pytest.mark.parametrize('m', [True, '0.5', None])
def test_momentum_of_the_wrong_type(m):
    with pytest.raises(TypeError, match='momentum'):
        momentum_blend(unit_rows(2, 2, 0), unit_rows(2, 2, 1), m)
    with pytest.raises(TypeError, match='momentum'): MemoryBank(4, 2, momentum=m)

@pytest.mark.parametrize('rows, new, error, match', [
    (torch.ones(2, 3), torch.ones(2, 4), ValueError, 'shape of rows'),
    (torch.ones(2, 3), torch.ones(3, 3), ValueError, 'shape of rows'),
    (torch.ones(3), torch.ones(3), ValueError, 'rows must have 2 dimensions'),
    (torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3), TypeError, 'rows must be floating'),
    (torch.ones(2, 3), torch.ones(2, 3, dtype=torch.bool), TypeError, 'new must be floating'),
    (torch.ones(2, 3), torch.tensor([[1.0, 0, 0], [float('nan'), 0, 0]]), ValueError, 'NaN'),
    ([[1.0]], torch.ones(1, 1), TypeError, 'torch.Tensor'),
])
def test_momentum_blend_bad_tensors(rows, new, error, match):
    with pytest.raises(error, match=match): momentum_blend(rows, new, 0.5)

@pytest.mark.parametrize('m', [0.0, 0.3, 0.5, 1.0])
def test_bank_update_follows_the_formula_and_touches_nothing_else(m):
    bank, before = MemoryBank(20, 6, momentum=m, seed=4), MemoryBank(20, 6, seed=4).memory.clone()
    idx = torch.tensor([3, 17, 0, 9])
    scale = torch.tensor([[0.01], [1.0], [30.0], [2.0]])
    f = torch.randn(4, 6, generator=torch.Generator().manual_seed(1)) * scale
    bank.update(idx, f)
    expected = F.normalize(m * before[idx] + (1 - m) * F.normalize(f, dim=1), dim=1)
    assert torch.allclose(bank.memory[idx], expected, atol=1e-6)
    assert torch.allclose(bank.memory.norm(dim=1), torch.ones(20), atol=1e-6)
    others = ~torch.isin(torch.arange(20), idx)
    # exact: rows never written, from the same seeded draw (the same arithmetic, bit for bit)
    assert torch.equal(bank.memory[others], before[others])
    if m == 0: assert torch.allclose(bank.memory[idx], F.normalize(f, dim=1), atol=1e-6)
    if m == 1: assert torch.equal(bank.memory, before)  # exact: m = 1 writes copies of the rows

def test_update_detaches_and_bank_has_no_parameters():
    bank = MemoryBank(8, 3, momentum=0.0)
    f = torch.randn(2, 3, requires_grad=True)
    bank.update(torch.tensor([1, 2]), f * 2)
    assert not bank.memory.requires_grad and bank.memory.grad_fn is None
    assert list(bank.parameters()) == [] and not bank(torch.tensor([1])).requires_grad

def test_update_casts_half_embeddings_to_the_bank_dtype():
    bank = MemoryBank(8, 4, momentum=0.0)
    f = torch.randn(2, 4).half()
    bank.update(torch.tensor([0, 5]), f)
    assert bank.memory.dtype == torch.float32
    assert torch.allclose(bank.memory[[0, 5]], F.normalize(f.float(), dim=1), atol=1e-3)

def test_update_with_int32_indices_and_an_empty_batch():
    bank = MemoryBank(8, 4, momentum=0.0)
    before = bank.memory.clone()
    bank.update(torch.tensor([], dtype=torch.long), torch.empty(0, 4))
    assert torch.equal(bank.memory, before)  # exact: nothing written
    bank.update(torch.tensor([2], dtype=torch.int32), torch.tensor([[0.0, 3.0, 0.0, 0.0]]))
    assert torch.allclose(bank.memory[2], torch.tensor([0.0, 1.0, 0.0, 0.0]))

# --- duplicates --------------------------------------------------------------------------------

def test_merge_duplicates_matches_a_loop():
    idx = torch.tensor([5, 2, 5, 5, 0, 2])
    emb = torch.randn(6, 3, generator=torch.Generator().manual_seed(0), dtype=F64)
    u, mean = merge_duplicates(idx, emb)
    assert u.tolist() == [0, 2, 5]
    assert torch.allclose(mean, torch.stack([emb[idx == i].mean(0) for i in (0, 2, 5)]))

def test_merge_duplicates_without_repeats_sorts_and_handles_empty_input():
    idx, emb = torch.tensor([3, 0, 1], dtype=torch.int32), torch.randn(3, 2)
    u, rows = merge_duplicates(idx, emb)
    # exact: without repeats the rows are only reordered, nothing is computed
    assert u.tolist() == [0, 1, 3] and u.dtype == torch.int64 and torch.equal(rows, emb[[1, 2, 0]])
    u, rows = merge_duplicates(torch.tensor([], dtype=torch.long), torch.empty(0, 2))
    assert u.shape == (0,) and rows.shape == (0, 2)

@pytest.mark.parametrize('indices, embeddings, error, match', [
    (torch.tensor([1, 2]), torch.randn(3, 4), ValueError, 'one row per index: 2 indices, got 3'),
    (torch.tensor([1, 1, 2]), torch.randn(2, 4), ValueError, 'one row per index: 3 indices, got 2'),
    (torch.tensor([1, -1]), torch.randn(2, 4), ValueError, r'>= 0, got \[-1\]'),
    (torch.tensor([1.0, 2.0]), torch.randn(2, 4), TypeError, 'integer dtype'),
    (torch.tensor([True, False]), torch.randn(2, 4), TypeError, 'boolean mask'),
    (torch.tensor([[1, 2]]), torch.randn(2, 4), ValueError, '1 dimension'),
    (torch.tensor([1, 2]), torch.randn(2), ValueError, '2 dimensions'),
    (torch.tensor([1, 2]), torch.ones(2, 4, dtype=torch.long), TypeError, 'floating point'),
    (torch.tensor([1, 2]), torch.tensor([[1.0], [float('inf')]]), ValueError, 'NaN or inf'),
    ([1, 2], torch.randn(2, 4), TypeError, 'torch.Tensor'),
])
def test_merge_duplicates_refuses_bad_input(indices, embeddings, error, match):
    with pytest.raises(error, match=match): merge_duplicates(indices, embeddings)

@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=12), st.integers(0, 10_000), st.floats(0, 1))
def test_duplicate_update_is_order_independent_and_equals_mean_rule(indices, seed, m):
    idx = torch.tensor(indices)
    emb = torch.randn(len(idx), 4, generator=torch.Generator().manual_seed(seed), dtype=F64)
    perm = torch.randperm(len(idx), generator=torch.Generator().manual_seed(seed + 1))
    a = MemoryBank(6, 4, momentum=m, seed=2, dtype=F64)
    b = MemoryBank(6, 4, momentum=m, seed=2, dtype=F64)
    start = a.memory.clone()
    a.update(idx, emb)
    b.update(idx[perm], emb[perm])
    assert torch.allclose(a.memory, b.memory, atol=1e-12)
    unit = F.normalize(emb, dim=1)
    for i in set(indices):
        blend = m * start[i] + (1 - m) * unit[idx == i].mean(0)
        want = blend / blend.norm() if blend.norm() > 1e-12 else start[i]
        assert torch.allclose(a.memory[i], want, atol=1e-9)

# --- negatives ---------------------------------------------------------------------------------

@pytest.mark.parametrize('replacement', [False, True])
def test_negatives_never_include_the_query_exhaustive(replacement):
    g = torch.Generator().manual_seed(0)
    for size in range(2, 10):
        every = torch.arange(size)
        for k in range(1, size):
            for _ in range(5):
                neg = negative_indices(every, size, k, g, replacement=replacement)
                assert neg.shape == (size, k) and neg.dtype == torch.int64
                assert ((neg >= 0) & (neg < size)).all() and not (neg == every[:, None]).any()
                if not replacement: assert all(len(set(r)) == k for r in neg.tolist())

def test_all_other_rows_at_k_equal_size_minus_one():
    size = 9
    neg = negative_indices(torch.arange(size), size, size - 1, torch.Generator().manual_seed(1))
    assert [sorted(r) for r in neg.tolist()] == [[j for j in range(size) if j != i]
                                                 for i in range(size)]

@pytest.mark.parametrize('replacement', [False, True])
def test_negatives_are_uniform_over_the_other_rows(replacement):
    size, query, draws = 6, 2, 30_000
    neg = negative_indices(torch.full((draws,), query), size, 2, torch.Generator().manual_seed(3),
                           replacement=replacement)
    counts = torch.bincount(neg.flatten(), minlength=size).double()
    assert counts[query] == 0
    expected = 2 * draws / (size - 1)
    others = counts[torch.arange(size) != query]
    assert ((others - expected).abs() < 5 * math.sqrt(expected)).all()

def test_negatives_without_replacement_can_repeat_only_with_replacement():
    g = torch.Generator().manual_seed(0)
    neg = negative_indices(torch.zeros(2_000, dtype=torch.long), 4, 3, g, replacement=True)
    assert any(len(set(r)) < 3 for r in neg.tolist())  # with replacement, repeats happen

def test_shared_negatives_avoid_the_whole_batch_exhaustive():
    g = torch.Generator().manual_seed(0)
    for size in range(2, 9):
        for batch in range(1, size):
            for _ in range(3):
                idx = torch.randperm(size, generator=g)[:batch]
                for k in range(1, size - batch + 1):
                    neg = shared_negative_indices(idx, size, k, g)
                    assert neg.shape == (k,) and len(set(neg.tolist())) == k
                    assert not torch.isin(neg, idx).any()
                with pytest.raises(ValueError, match='rows outside this batch'):
                    shared_negative_indices(idx, size, size - batch + 1, g)

def test_shared_negatives_with_repeated_indices_and_uniformity():
    g = torch.Generator().manual_seed(2)
    idx = torch.tensor([1, 1, 4])  # two distinct rows: 5 of 7 remain
    assert sorted(shared_negative_indices(idx, 7, 5, g).tolist()) == [0, 2, 3, 5, 6]
    draws = torch.cat([shared_negative_indices(idx, 7, 2, g) for _ in range(10_000)])
    counts = torch.bincount(draws, minlength=7).double()
    expected = 2 * 10_000 / 5
    assert counts[[1, 4]].sum() == 0
    assert ((counts[[0, 2, 3, 5, 6]] - expected).abs() < 5 * math.sqrt(expected)).all()

def test_bank_sample_negatives_shapes_and_rows():
    bank = MemoryBank(12, 12, momentum=0.0)
    bank.update(torch.arange(12), torch.eye(12))  # row i is the i-th basis vector
    idx = torch.tensor([0, 11, 5, 5])
    negs = bank.sample_negatives(idx, 7, torch.Generator().manual_seed(0))
    assert negs.shape == (4, 7, 12)
    rows = negs.argmax(-1)
    assert not (rows == idx[:, None]).any() and all(len(set(r)) == 7 for r in rows.tolist())
    assert bank(idx).shape == (4, 12)
    assert bank.sample_negatives(torch.tensor([], dtype=torch.long), 3).shape == (0, 3, 12)
    shared = bank.sample_shared_negatives(idx, 9, torch.Generator().manual_seed(0)).argmax(-1)
    assert sorted(shared.tolist()) == [1, 2, 3, 4, 6, 7, 8, 9, 10]  # the 9 rows outside the batch

def test_shared_and_per_query_forms_of_the_loss_agree_for_the_same_rows():
    bank = MemoryBank(40, 8, dtype=F64)
    idx = torch.arange(5)
    rows = bank.sample_shared_negatives(idx, 20)
    q = torch.randn(5, 8, generator=torch.Generator().manual_seed(0), dtype=F64)
    assert torch.isclose(info_nce(q, bank(idx), rows),
                         info_nce(q, bank(idx), rows.expand(5, -1, -1)), atol=1e-12)

def test_k_may_be_any_integer_type():
    bank = MemoryBank(10, 3)
    assert bank.sample_negatives(torch.tensor([0]), np.int64(4)).shape == (1, 4, 3)
    assert bank.sample_shared_negatives(torch.tensor([0]), torch.tensor(5)).shape == (5, 3)

def test_sampling_is_reproducible_from_the_generator():
    bank = MemoryBank(50, 4)
    idx = torch.arange(10)
    a = bank.sample_negatives(idx, 20, torch.Generator().manual_seed(7))
    b = bank.sample_negatives(idx, 20, torch.Generator().manual_seed(7))
    assert torch.equal(a, b)

def test_info_nce_over_the_whole_bank_is_the_non_parametric_softmax():
    bank = MemoryBank(30, 8, seed=5, dtype=F64)
    idx = torch.tensor([0, 3, 3, 29])
    q = torch.randn(4, 8, generator=torch.Generator().manual_seed(0), dtype=F64)
    ours = info_nce(q, bank(idx), bank.sample_negatives(idx, 29), 0.07)
    wu = F.cross_entropy(F.normalize(q, dim=1) @ bank.memory.T / 0.07, idx)
    assert torch.isclose(ours, wu, atol=1e-12)

# --- state -------------------------------------------------------------------------------------

def test_initialisation_is_seeded_unit_vectors():
    a, b, c = MemoryBank(100, 16, seed=0), MemoryBank(100, 16, seed=0), MemoryBank(100, 16, seed=1)
    # exact: one seed, one draw and the same arithmetic in one process
    assert torch.equal(a.memory, b.memory) and not torch.allclose(a.memory, c.memory)
    assert torch.allclose(a.memory.norm(dim=1), torch.ones(100), atol=1e-6)
    assert a.memory.abs().mean() > 0.05 and len(a) == 100 and a.dim == 16
    assert repr(a) == 'MemoryBank(size=100, dim=16, momentum=0.5)'

def test_state_dict_round_trip(tmp_path):
    bank = MemoryBank(20, 5, momentum=0.3, seed=1)
    bank.update(torch.tensor([1, 4, 4]), torch.randn(3, 5))
    path = tmp_path / 'bank.pt'
    torch.save(bank.state_dict(), path)
    restored = MemoryBank(20, 5, seed=99)
    restored.load_state_dict(torch.load(path))
    # exact: a saved and loaded copy
    assert list(bank.state_dict()) == ['memory'] and torch.equal(restored.memory, bank.memory)
    with pytest.raises(RuntimeError): MemoryBank(21, 5).load_state_dict(bank.state_dict())

def test_to_moves_the_buffer_and_keeps_working_in_float64():
    bank = MemoryBank(10, 3).to(F64)
    assert bank.memory.dtype == F64
    bank.update(torch.tensor([2]), torch.randn(1, 3))
    assert bank.memory.dtype == F64
    assert torch.allclose(bank.memory.norm(dim=1), torch.ones(10, dtype=F64))

# --- errors ------------------------------------------------------------------------------------

BANK = MemoryBank(10, 4)
IDX, EMB = torch.tensor([1, 2]), torch.randn(2, 4)

@pytest.mark.parametrize('call, error, match', [
    (lambda: BANK.update(IDX, torch.randn(2, 5)), ValueError, r'shape \(len\(indices\), dim\)'),
    (lambda: BANK.update(IDX, torch.randn(3, 4)), ValueError, 'shape'),
    (lambda: BANK.update(IDX, torch.randn(4)), ValueError, '2 dimensions'),
    (lambda: BANK.update(IDX, torch.ones(2, 4, dtype=torch.long)), TypeError, 'floating point'),
    (lambda: BANK.update(IDX, torch.randn(2, 4, device='meta')), ValueError, 'bank is on'),
    (lambda: BANK.update(IDX, [[1.0] * 4] * 2), TypeError, 'torch.Tensor'),
    (lambda: BANK.update(IDX, torch.tensor([[1.0, 0, 0, 0], [float('nan'), 0, 0, 0]])),
     ValueError, 'NaN'),
    (lambda: BANK.update(IDX, torch.zeros(2, 4)), ValueError, 'zero vector'),
    (lambda: BANK.update(torch.tensor([1, 10]), EMB), ValueError, r'\[0, 9\]'),
    (lambda: BANK(torch.tensor([-1])), ValueError, 'negatives are refused'),
    (lambda: BANK(torch.tensor([1.0, 2.0])), TypeError, 'integer dtype'),
    (lambda: BANK(torch.tensor([True, False] * 5)), TypeError, 'boolean mask'),
    (lambda: BANK(torch.tensor([[1, 2]])), ValueError, '1 dimension'),
    (lambda: BANK([1, 2]), TypeError, 'torch.Tensor'),
    (lambda: BANK(torch.tensor([1], device='meta')), ValueError, 'bank is on'),
    (lambda: BANK.sample_negatives(IDX, 10), ValueError, r'k must lie in \[1, 9\].*size - 1 = 9'),
    (lambda: BANK.sample_negatives(IDX, 0), ValueError, 'k must lie'),
    (lambda: BANK.sample_negatives(IDX, 2.0), TypeError, 'k must be an int'),
    (lambda: BANK.sample_negatives(IDX, True), TypeError, 'k must be an int'),
    (lambda: BANK.sample_negatives(IDX, 3, replacement=1), TypeError, 'replacement'),
    (lambda: BANK.sample_negatives(IDX, 3, generator=0), TypeError, 'generator'),
    (lambda: BANK.sample_negatives(torch.tensor([10]), 3), ValueError, r'\[0, 9\]'),
    (lambda: BANK.sample_shared_negatives(IDX, 9), ValueError, r'k must lie in \[1, 8\]'),
    (lambda: BANK.sample_shared_negatives(IDX, 1.5), TypeError, 'k must be an int'),
    (lambda: BANK.sample_shared_negatives(torch.tensor([0.0]), 1), TypeError, 'integer dtype'),
    (lambda: negative_indices(torch.tensor([0.5]), 10, 3), TypeError, 'integer dtype'),
    (lambda: negative_indices(torch.tensor([0]), 1, 1), ValueError, 'size must lie'),
    (lambda: negative_indices(torch.tensor([0]), 10.0, 1), TypeError, 'size must be an int'),
    (lambda: shared_negative_indices(torch.tensor([0]), True, 1), TypeError, 'size must be an int'),
    (lambda: MemoryBank(1, 4), ValueError, r'size must lie in \[2'),
    (lambda: MemoryBank(10, 0), ValueError, r'dim must lie in \[1'),
    (lambda: MemoryBank(10.0, 4), TypeError, 'size must be an int'),
    (lambda: MemoryBank(10, True), TypeError, 'dim must be an int'),
    (lambda: MemoryBank(10, 4, seed=1.5), TypeError, 'seed must be an int'),
    (lambda: MemoryBank(10, 4, dtype=torch.int64), TypeError, 'floating-point'),
    (lambda: MemoryBank(10, 4, dtype='float32'), TypeError, 'floating-point'),
])
def test_bad_input_gets_a_clear_error(call, error, match):
    before = BANK.memory.clone()
    with pytest.raises(error, match=match): call()
    assert torch.equal(BANK.memory, before)  # a refused update leaves the bank as it was, bit for bit

# --- index dtypes: a uint8 or bool tensor is a mask to torch; bounds are compared in int64 ------------------

def _index_calls(bank: MemoryBank) -> dict:
    "Every public way into the bank by index, each taking only the indices."
    n = len(bank)
    return {'forward': lambda i: bank(i),
            'update': lambda i: bank.update(i, torch.randn(len(i), bank.dim)),
            'sample_negatives': lambda i: bank.sample_negatives(i, 3),
            'sample_shared_negatives': lambda i: bank.sample_shared_negatives(i, 3),
            'negative_indices': lambda i: negative_indices(i, n, 3),
            'shared_negative_indices': lambda i: shared_negative_indices(i, n, 3),
            'merge_duplicates': lambda i: merge_duplicates(i, torch.randn(len(i), bank.dim))}

@pytest.mark.parametrize('name', list(_index_calls(BANK)))
def test_a_uint8_index_as_long_as_the_bank_is_refused_not_read_as_a_mask(name):
    mask_like = torch.tensor([1, 0] * 5, dtype=torch.uint8)  # 10 entries for 10 rows: a valid mask
    before = BANK.memory.clone()
    with pytest.raises(TypeError, match=r'indices must hold int64 \(or int32\) indices, got torch.uint8'
                                        '.*boolean mask'):
        _index_calls(BANK)[name](mask_like)
    assert torch.equal(BANK.memory, before)  # nothing written: a bit-for-bit copy compares equal

@pytest.mark.parametrize('name', list(_index_calls(BANK)))
def test_bool_indices_are_refused_everywhere(name):
    with pytest.raises(TypeError, match='boolean mask'): _index_calls(BANK)[name](torch.arange(10) < 5)

def test_a_uint8_250_on_a_300_row_bank_is_refused_as_a_mask_not_as_out_of_range():
    bank = MemoryBank(300, 4)
    for name, call in _index_calls(bank).items():  # in uint8, 300 wraps to 44: 250 looked too large
        with pytest.raises(TypeError, match=r'uint8.*\.long\(\)'):
            call(torch.tensor([250], dtype=torch.uint8))

@pytest.mark.parametrize('dtype', [torch.int8, torch.int16, torch.int32])
def test_small_integer_indices_work_on_a_300_row_bank(dtype):
    bank = MemoryBank(300, 4, momentum=0.0)
    idx = torch.tensor([100, 5, 100], dtype=dtype)  # 100 < 300, but 300 wraps to 44 in int8
    assert torch.equal(bank(idx), bank.memory[[100, 5, 100]])  # a gather copies rows exactly
    for name, call in _index_calls(bank).items():
        call(idx)  # no error
    neg = bank.sample_negatives(idx, 299, torch.Generator().manual_seed(0)).argmax(-1)
    assert neg.shape == (3, 299)
    rows = negative_indices(idx, 300, 299, torch.Generator().manual_seed(0))
    assert not (rows == torch.tensor([[100], [5], [100]])).any()  # never the query's own row
    shared = shared_negative_indices(idx, 300, 298, torch.Generator().manual_seed(0))
    assert sorted(shared.tolist()) == [j for j in range(300) if j not in (5, 100)]
    unique, _ = merge_duplicates(idx, torch.randn(3, 4))
    assert unique.tolist() == [5, 100] and unique.dtype == torch.int64
    bank.update(idx[1:2], torch.tensor([[0.0, 2.0, 0.0, 0.0]]))  # m = 0: row 5 becomes the input
    assert torch.allclose(bank.memory[5], torch.tensor([0.0, 1.0, 0.0, 0.0]))

# --- training ----------------------------------------------------------------------------------

class TinyEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    def forward(self, x): return self.net(x)

POLICY = AugmentationPolicy(size=8)

def tiny_setup(seed: int = 0, momentum: float = 0.5):
    torch.manual_seed(seed)
    encoder, head = TinyEncoder(), nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 6))
    images = torch.rand(12, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    return encoder, head, images, MemoryBank(12, 6, momentum=momentum)

def tiny_run(seed: int = 0, **options):
    encoder, head, images, bank = tiny_setup(seed)
    start = bank.memory.clone()
    options = {'k': 5, 'policy': POLICY, 'epochs': 2, 'batch_size': 4, 'seed': seed,
               'progress': False, **options}
    hist = train_memory_bank(encoder, head, images, bank, **options)
    return hist, bank, start, encoder, head, images

def reference_loop(encoder, head, images, bank, k, negatives, epochs, batch_size, temperature, lr,
                   weight_decay, seed):
    "The training loop written out step by step, with the same draws in the same order."
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=lr,
                                 weight_decay=weight_decay)
    losses = []
    steps = len(images) // batch_size
    for _ in range(epochs):
        order = torch.randperm(len(images), generator=generator)
        for step in range(steps):
            idx = order[step * batch_size:(step + 1) * batch_size]
            query = head(encoder(augment_batch(images[idx], POLICY, generator)))
            positive = bank.memory[idx].clone()
            if negatives == 'shared':
                rows = shared_negative_indices(idx, len(bank), k, generator)
            else:
                rows = negative_indices(idx, len(bank), k, generator)
            loss = info_nce(query, positive, bank.memory[rows], temperature)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            new = F.normalize(query.detach(), dim=1)
            blend = bank.momentum * bank.memory[idx] + (1 - bank.momentum) * new
            bank.memory[idx] = F.normalize(blend, dim=1)
            losses.append(loss.item())
    return losses

@pytest.mark.parametrize('negatives, momentum, temperature, lr, weight_decay', [
    ('shared', 0.5, 0.1, 1e-3, 1e-6), ('per-query', 0.0, 0.5, 1e-2, 0.1),
    ('shared', 0.9, 0.2, 3e-3, 0.0)])
def test_training_loop_equals_the_written_out_loop(negatives, momentum, temperature, lr,
                                                   weight_decay):
    options = dict(k=5, negatives=negatives, epochs=2, batch_size=4, temperature=temperature,
                   lr=lr, weight_decay=weight_decay, seed=3)
    enc_a, head_a, images, bank_a = tiny_setup(0, momentum)
    hist = train_memory_bank(enc_a, head_a, images, bank_a, policy=POLICY, progress=False,
                             **options)
    enc_b, head_b, _, bank_b = tiny_setup(0, momentum)
    want = reference_loop(enc_b, head_b, images, bank_b, **options)
    assert np.allclose(hist.loss.tolist(), want, atol=1e-5)
    assert torch.allclose(bank_a.memory, bank_b.memory, atol=1e-5)
    for a, b in zip([*enc_a.parameters(), *head_a.parameters()],
                    [*enc_b.parameters(), *head_b.parameters()]):
        assert torch.allclose(a, b, atol=1e-5)

def test_training_loop_records_losses_updates_every_row_and_is_reproducible():
    hist, bank, start, *_ = tiny_run()
    assert list(hist.columns) == ['epoch', 'step', 'loss'] and len(hist) == 6
    assert hist.loss.map(math.isfinite).all()
    assert hist.step.tolist() == list(range(6)) and hist.epoch.tolist() == [0, 0, 0, 1, 1, 1]
    assert not torch.isclose(bank.memory, start).all(1).any()  # every image seen: every row moved
    assert torch.allclose(bank.memory.norm(dim=1), torch.ones(12), atol=1e-6)
    again, bank2, *_ = tiny_run()
    assert np.allclose(again.loss, hist.loss, rtol=1e-5, atol=1e-6)
    assert torch.allclose(bank2.memory, bank.memory, atol=1e-6)
    other, *_ = tiny_run(seed=1)
    assert not np.allclose(other.loss, hist.loss, rtol=1e-5, atol=1e-6)

def test_training_sets_train_mode_and_calls_back_after_each_update():
    encoder, head, images, bank = tiny_setup()
    encoder.eval()
    head.eval()
    seen = []
    def callback(step):
        seen.append((step, bank.memory.clone()))
    train_memory_bank(encoder, head, images, bank, k=5, policy=POLICY, epochs=2, batch_size=4,
                      progress=False, callback=callback)
    assert encoder.training and head.training
    assert [s for s, _ in seen] == [0, 1, 2, 3, 4, 5]  # numbered across epochs
    assert not torch.allclose(seen[0][1], seen[1][1])  # the bank had changed before each call

def test_training_loop_with_per_query_negatives():
    hist, *_ = tiny_run(k=11, negatives='per-query', epochs=1)
    assert len(hist) == 3 and hist.loss.map(math.isfinite).all()

@pytest.mark.parametrize('options, error, match', [
    ({'negatives': 'all'}, ValueError, "negatives must be one of"),
    ({'epochs': 0}, ValueError, 'epochs must lie'),
    ({'epochs': 1.5}, TypeError, 'epochs must be an int'),
    ({'batch_size': 1}, ValueError, r'batch_size \(1\) must both be at least 2'),
    ({'temperature': 0.0}, ValueError, 'temperature'),
    ({'temperature': float('nan')}, ValueError, 'temperature'),
    ({'lr': -1e-3}, ValueError, 'lr must be'),
    ({'lr': True}, TypeError, 'lr must be'),
    ({'weight_decay': -1.0}, ValueError, 'weight_decay must be'),
    ({'seed': 0.5}, TypeError, 'seed must be an int'),
    ({'policy': 'strong'}, TypeError, 'policy must be an AugmentationPolicy'),
    ({'callback': 3}, TypeError, 'callback must be callable'),
    ({'k': 12}, ValueError, 'k must lie'),
])
def test_training_loop_refuses_bad_options(options, error, match):
    encoder, head, images, bank = tiny_setup()
    before = bank.memory.clone()
    with pytest.raises(error, match=match):
        train_memory_bank(encoder, head, images, bank, **{'k': 5, 'policy': POLICY, 'epochs': 1,
                                                          'batch_size': 4, 'progress': False,
                                                          **options})
    if 'k' not in options: assert torch.equal(bank.memory, before)  # exact: refused, nothing written

def test_training_loop_refuses_bad_setups():
    encoder, head = TinyEncoder(), nn.Linear(4, 6)
    with pytest.raises(ValueError, match='one row per image'):
        train_memory_bank(encoder, head, torch.rand(5, 3, 8, 8), MemoryBank(6, 6), k=2,
                          progress=False)
    with pytest.raises(ValueError, match='4 dimensions'):
        train_memory_bank(encoder, head, torch.rand(6, 8, 8), MemoryBank(6, 6), k=2, progress=False)
    with pytest.raises(ValueError, match='empty'):
        train_memory_bank(encoder, head, torch.rand(0, 3, 8, 8), MemoryBank(6, 6), progress=False)
    with pytest.raises(TypeError, match='torch.Tensor'):
        train_memory_bank(encoder, head, [[0.0]], MemoryBank(6, 6), progress=False)
    with pytest.raises(TypeError, match='bank must be a MemoryBank'):
        train_memory_bank(encoder, head, torch.rand(6, 3, 8, 8), torch.zeros(6, 6), progress=False)
