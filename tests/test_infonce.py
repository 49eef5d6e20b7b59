"""Package tests for contrastive_nb.infonce: independent formulations, gradients, chunking, properties, bad input."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st
from torch.autograd import gradcheck

from contrastive_nb.infonce import info_nce, nt_xent, row_logsumexp

def rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)

def leaf(*xs): return tuple(x.clone().requires_grad_() for x in xs)

# --- brute force: loops over anchors straight from the definition -------------------------------------------------

def info_nce_loops(q, p, n, t):
    q, p = [F.normalize(x, dim=-1) for x in (q, p)]
    losses = []
    for i in range(len(q)):
        if n is None: candidates, target = p, i
        elif n.ndim == 2: candidates, target = torch.cat([p[i:i + 1], F.normalize(n, dim=-1)]), 0
        else: candidates, target = torch.cat([p[i:i + 1], F.normalize(n[i], dim=-1)]), 0
        logits = torch.stack([q[i] @ c / t for c in candidates])
        losses.append(-(logits[target] - torch.log(torch.exp(logits).sum())))
    return torch.stack(losses)

def nt_xent_loops(z1, z2, t):
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    n = len(z1)
    return torch.stack([-(z[i] @ z[(i + n) % (2 * n)] / t)
                        + torch.log(sum(torch.exp(z[i] @ z[k] / t) for k in range(2 * n) if k != i)) for i in range(2 * n)])

NEGATIVES = {'in-batch': None, 'shared': (7, 4), 'per-query': (5, 3, 4)}

@pytest.mark.parametrize('form', NEGATIVES)
@pytest.mark.parametrize('chunk_size', [None, 1, 2, 64])
@pytest.mark.parametrize('temperature', [1.0, 0.1, 0.005])
def test_info_nce_equals_loops(form, chunk_size, temperature):
    q, p = rand(5, 4, seed=1), rand(5, 4, seed=2)
    n = None if NEGATIVES[form] is None else rand(*NEGATIVES[form], seed=3)
    got = info_nce(q, p, n, temperature, reduction='none', chunk_size=chunk_size)
    assert torch.allclose(got, info_nce_loops(q, p, n, temperature), rtol=1e-9, atol=1e-9)

@pytest.mark.parametrize('chunk_size', [None, 1, 3, 64])
@pytest.mark.parametrize('temperature', [1.0, 0.1, 0.005])
def test_nt_xent_equals_loops(chunk_size, temperature):
    z1, z2 = rand(5, 4, seed=4), rand(5, 4, seed=5)
    got = nt_xent(z1, z2, temperature, reduction='none', chunk_size=chunk_size)
    assert torch.allclose(got, nt_xent_loops(z1, z2, temperature), rtol=1e-9, atol=1e-9)

def test_nt_xent_equals_cross_entropy_over_masked_logits():
    z1, z2 = rand(16, 8, seed=6), rand(16, 8, seed=7)
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    logits = (z @ z.T / 0.3).masked_fill(torch.eye(32, dtype=torch.bool), float('-inf'))
    assert torch.isclose(nt_xent(z1, z2, 0.3), F.cross_entropy(logits, torch.arange(32).roll(16)))

@pytest.mark.parametrize('form', NEGATIVES)
@pytest.mark.parametrize('chunk_size', [None, 2])
@pytest.mark.parametrize('temperature', [0.5, 0.01])
def test_info_nce_gradcheck(form, chunk_size, temperature):
    inputs = [rand(5, 3, seed=8), rand(5, 3, seed=9)]
    if NEGATIVES[form] is not None: inputs.append(rand(*NEGATIVES[form][:-1], 3, seed=10))
    fn = lambda q, p, *n: info_nce(q, p, n[0] if n else None, temperature, chunk_size=chunk_size)
    assert gradcheck(fn, leaf(*inputs))

@pytest.mark.parametrize('chunk_size', [None, 2])
@pytest.mark.parametrize('temperature', [0.5, 0.01])
def test_nt_xent_gradcheck(chunk_size, temperature):
    assert gradcheck(lambda a, b: nt_xent(a, b, temperature, chunk_size=chunk_size), leaf(rand(5, 3, seed=11), rand(5, 3, seed=12)))

def test_gradient_reaches_a_tensor_temperature():
    z1, z2 = rand(6, 4, seed=13), rand(6, 4, seed=14)
    assert gradcheck(lambda t: nt_xent(z1, z2, t), leaf(torch.tensor(0.3, dtype=torch.float64)))
    assert gradcheck(lambda t: info_nce(z1, z2, rand(9, 4), t), leaf(torch.tensor(0.2, dtype=torch.float64)))

@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 40), d=st.integers(1, 16), chunk=st.integers(1, 50), seed=st.integers(0, 10_000),
       t=st.sampled_from([0.02, 0.1, 0.5, 2.0]))
def test_chunked_equals_dense_in_value_and_gradient(n, d, chunk, seed, t):
    z1, z2 = rand(n, d, seed=seed), rand(n, d, seed=seed + 1)
    results = []
    for c in (None, chunk):
        a, b = leaf(z1, z2)
        loss = nt_xent(a, b, t, chunk_size=c)
        loss.backward()
        results.append((loss, a.grad, b.grad))
    assert all(torch.allclose(x, y, rtol=1e-9, atol=1e-12) for x, y in zip(*results))

@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 30), seed=st.integers(0, 10_000))
def test_relabelling_the_batch_changes_nothing(n, seed):
    z1, z2 = rand(n, 6, seed=seed), rand(n, 6, seed=seed + 1)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    assert torch.isclose(nt_xent(z1[perm], z2[perm], 0.3), nt_xent(z1, z2, 0.3))
    assert torch.isclose(info_nce(z1[perm], z2[perm], temperature=0.3), info_nce(z1, z2, temperature=0.3))
    negs = rand(7, 6, seed=seed + 2)
    assert torch.isclose(info_nce(z1, z2, negs[torch.randperm(7)], 0.3), info_nce(z1, z2, negs, 0.3))

def test_temperature_scales_the_logits():
    "Loss at τ on vectors equals cross-entropy of the cosine logits divided by τ: halving τ doubles every logit."
    q, p = rand(6, 4, seed=15), rand(6, 4, seed=16)
    cos = F.normalize(q, dim=1) @ F.normalize(p, dim=1).T
    for t in (2.0, 0.5, 0.05):
        assert torch.isclose(info_nce(q, p, temperature=t), F.cross_entropy(cos / t, torch.arange(6)))

def test_scale_invariance_and_uniform_start():
    z1, z2 = rand(6, 4, seed=17), rand(6, 4, seed=18)
    assert torch.isclose(nt_xent(3 * z1, 1e-3 * z2), nt_xent(z1, z2))
    same = torch.ones(10, 5)
    assert math.isclose(nt_xent(same, same).item(), math.log(19), rel_tol=1e-6)
    assert math.isclose(info_nce(same, same, torch.ones(30, 5)).item(), math.log(31), rel_tol=1e-6)

def test_reductions():
    z1, z2 = rand(6, 4, seed=19), rand(6, 4, seed=20)
    per = nt_xent(z1, z2, reduction='none')
    assert per.shape == (12,) and torch.isclose(per.sum(), nt_xent(z1, z2, reduction='sum'))
    assert torch.isclose(per.mean(), nt_xent(z1, z2))

@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_half_precision_at_low_temperature_is_finite_and_close(dtype):
    z1, z2 = rand(128, 32, seed=21, dtype=torch.float32), rand(128, 32, seed=22, dtype=torch.float32)
    for loss in (nt_xent, lambda a, b, temperature: info_nce(a, b, temperature=temperature)):
        ref = loss(z1, z2, temperature=0.01)
        got = loss(z1.to(dtype), z2.to(dtype), temperature=0.01)
        assert torch.isfinite(got) and abs(got.item() - ref.item()) < 0.05 * ref.item()
    a, b = leaf(z1.to(dtype), z2.to(dtype))
    nt_xent(a, b, 0.01).backward()
    assert a.grad.dtype == dtype and torch.isfinite(a.grad.float()).all()

@pytest.mark.parametrize('dtype, bound, shift_free', [
    (torch.float64, 1.0, True), (torch.float64, 500.0, True), (torch.float64, 1000.0, False),
    (torch.float32, 1.0, True), (torch.float32, 30.0, True), (torch.float32, 80.0, False), (torch.float32, 500.0, False)])
@pytest.mark.parametrize('skip', [False, True])
@pytest.mark.parametrize('chunk_size', [None, 3])
def test_row_logsumexp_on_both_sides_of_the_switch_to_row_maxima(dtype, bound, shift_free, skip, chunk_size):
    from contrastive_nb.infonce import _shift_free
    assert _shift_free(bound, 6, dtype) == shift_free
    b = F.normalize(rand(6, 3, seed=23), dim=1)
    a = F.normalize(rand(4, 3, seed=24), dim=1) * bound
    weights = rand(4, seed=25)
    ref_a, ref_b = leaf(a, b)
    ref = torch.logsumexp((ref_a @ ref_b.T).masked_fill(torch.eye(4, 6, dtype=torch.bool) & skip, float('-inf')), 1)
    ref_grads = torch.autograd.grad((ref * weights).sum(), (ref_a, ref_b))
    got_a, got_b = leaf(a.to(dtype), b.to(dtype))
    got = row_logsumexp(got_a, got_b, bound, skip, chunk_size)
    got_grads = torch.autograd.grad((got * weights.to(dtype)).sum(), (got_a, got_b))
    tol = dict(rtol=1e-5, atol=1e-4 * bound) if dtype == torch.float32 else {}
    assert torch.isfinite(got).all() and torch.allclose(got.double(), ref, **tol)
    assert all(torch.allclose(g.double(), r, **tol) for g, r in zip(got_grads, ref_grads))
    with torch.no_grad(): assert torch.allclose(row_logsumexp(a.to(dtype), b.to(dtype), bound, skip, chunk_size).double(), ref, **tol)

@pytest.mark.parametrize('call, error, message', [
    (lambda: info_nce(torch.randn(4, 8), torch.randn(5, 8)), ValueError, 'same shape'),
    (lambda: info_nce(torch.randn(4, 8), torch.randn(4, 8), temperature=0), ValueError, 'temperature'),
    (lambda: info_nce(torch.randn(4, 8), torch.randn(4, 8), temperature=-1), ValueError, 'temperature'),
    (lambda: nt_xent(torch.randn(4, 8), torch.randn(4, 8), temperature=float('nan')), ValueError, 'temperature'),
    (lambda: nt_xent(torch.full((4, 8), float('nan')), torch.randn(4, 8)), ValueError, 'NaN'),
    (lambda: nt_xent(torch.full((4, 8), float('inf')), torch.randn(4, 8)), ValueError, 'inf'),
    (lambda: info_nce(torch.zeros(4, 8), torch.randn(4, 8)), ValueError, 'zero vector'),
    (lambda: info_nce(torch.randn(0, 8), torch.randn(0, 8)), ValueError, 'empty'),
    (lambda: nt_xent(torch.randn(1, 8), torch.randn(1, 8)), ValueError, 'at least 2'),
    (lambda: nt_xent(torch.randn(8), torch.randn(8)), ValueError, '2 dimensions'),
    (lambda: info_nce(torch.randn(4, 8), torch.randn(4, 8), torch.randn(10, 6)), ValueError, 'features'),
    (lambda: info_nce(torch.randn(4, 8), torch.randn(4, 8), torch.randn(3, 2, 8)), ValueError, 'per-query'),
    (lambda: info_nce(torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 0, 8)), ValueError, 'per-query'),
    (lambda: info_nce(torch.randn(4, 8), torch.randn(4, 8), torch.randn(1, 4, 2, 8)), ValueError, 'negatives must be'),
    (lambda: info_nce(torch.randn(4, 8), torch.randn(4, 8), torch.randn(0, 8)), ValueError, 'empty'),
    (lambda: info_nce(torch.randn(4, 8), torch.randn(4, 8), reduction='avg'), ValueError, 'reduction'),
    (lambda: nt_xent(torch.randn(4, 8), torch.randn(4, 8), chunk_size=0), ValueError, 'chunk_size'),
    (lambda: nt_xent([[1.0, 2.0]], torch.randn(1, 2)), TypeError, 'torch.Tensor'),
])
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message): call()

# --- the shared two-view training loop -------------------------------------------------------------------------------

def test_train_on_pairs_steps_views_and_reproducibility():
    from contrastive_nb.data import make_shapes
    from contrastive_nb.infonce import train_on_pairs
    images = make_shapes(21, size=16, seed=3).images
    def run(seed):
        weight, seen = torch.nn.Parameter(torch.ones(())), []
        def loss(view1, view2, generator):
            seen.append((tuple(view1.shape), torch.equal(view1, view2)))
            return (weight * view1.mean() - view2.mean()) ** 2
        from contrastive_nb.pairs import AugmentationPolicy
        history = train_on_pairs(loss, [weight], images, AugmentationPolicy(size=16), epochs=2, batch_size=5, lr=0.1,
                                 seed=seed, progress=False)
        return history, seen, weight
    history, seen, weight = run(0)
    assert list(history.columns) == ['epoch', 'step', 'loss'] and len(history) == 2 * (21 // 5)  # the ragged batch is dropped
    assert all(shape == (5, 3, 16, 16) and not same for shape, same in seen) and weight.item() != 1.0
    assert history.equals(run(0)[0]) and not history.equals(run(1)[0])

def test_train_on_pairs_takes_one_step_when_the_batch_exceeds_the_images():
    from contrastive_nb.infonce import train_on_pairs
    weight = torch.nn.Parameter(torch.ones(()))
    history = train_on_pairs(lambda a, b, g: (weight * a.mean() - b.mean()) ** 2, [weight], torch.rand(3, 3, 8, 8),
                             epochs=2, batch_size=8, progress=False)
    assert len(history) == 2
