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
                        + torch.log(sum(torch.exp(z[i] @ z[k] / t) for k in range(2 * n) if k != i))
                        for i in range(2 * n)])

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
    assert gradcheck(lambda a, b: nt_xent(a, b, temperature, chunk_size=chunk_size),
                     leaf(rand(5, 3, seed=11), rand(5, 3, seed=12)))

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
    (torch.float32, 1.0, True), (torch.float32, 30.0, True), (torch.float32, 80.0, False),
    (torch.float32, 500.0, False)])
@pytest.mark.parametrize('skip', [False, True])
@pytest.mark.parametrize('chunk_size', [None, 3])
def test_row_logsumexp_on_both_sides_of_the_switch_to_row_maxima(dtype, bound, shift_free, skip, chunk_size):
    "`shift_free` says which side of the switch a case is on (lesson 03's notebook checks the switch itself)."
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
    with torch.no_grad():
        assert torch.allclose(row_logsumexp(a.to(dtype), b.to(dtype), bound, skip, chunk_size).double(), ref, **tol)

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
    (lambda: info_nce(torch.randn(4, 8), torch.randn(4, 8), torch.randn(1, 4, 2, 8)), ValueError,
     "negatives must have"),
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
        from contrastive_nb.augment import AugmentationPolicy
        history = train_on_pairs(loss, [weight], images, AugmentationPolicy(size=16), epochs=2, batch_size=5, lr=0.1,
                                 seed=seed, progress=False)
        return history, seen, weight
    history, seen, weight = run(0)
    # the ragged batch is dropped
    assert list(history.columns) == ['epoch', 'step', 'loss'] and len(history) == 2 * (21 // 5)
    assert all(shape == (5, 3, 16, 16) and not same for shape, same in seen) and weight.item() != 1.0
    assert history.equals(run(0)[0]) and not history.equals(run(1)[0])

def test_train_on_pairs_takes_one_step_when_the_batch_exceeds_the_images():
    from contrastive_nb.infonce import train_on_pairs
    weight = torch.nn.Parameter(torch.ones(()))
    history = train_on_pairs(lambda a, b, g: (weight * a.mean() - b.mean()) ** 2, [weight], torch.rand(3, 3, 8, 8),
                             epochs=2, batch_size=8, progress=False)
    assert len(history) == 2

# --- every bad-input class of the library's rule, for both losses -----------------------------------------------

def q8(n=4, dtype=torch.float32): return torch.randn(n, 8, dtype=dtype)

@pytest.mark.parametrize('call, error, message', [
    (lambda: info_nce(q8().long(), q8()), TypeError, 'query must be floating point'),
    (lambda: info_nce(q8(), q8() > 0), TypeError, 'positive must be floating point'),
    (lambda: nt_xent(q8().int(), q8()), TypeError, 'z1 must be floating point'),
    (lambda: info_nce(q8(), q8(), q8().long()), TypeError, 'negatives must be floating point'),
    (lambda: info_nce(q8(), q8(), [[1.0] * 8]), TypeError, 'negatives must be a torch.Tensor'),
    (lambda: info_nce(q8(), q8(), temperature=True), TypeError, 'temperature'),
    (lambda: nt_xent(q8(), q8(), temperature=float('inf')), ValueError, 'temperature'),
    (lambda: nt_xent(q8(), q8(), temperature=torch.tensor(0.0)), ValueError, 'temperature'),
    (lambda: nt_xent(q8(), q8(), temperature=torch.tensor([0.1, 0.2])), ValueError, 'temperature'),
    (lambda: nt_xent(q8(), q8(), temperature=torch.tensor(1)), TypeError, 'temperature'),
    (lambda: nt_xent(q8(), q8(), temperature='0.1'), TypeError, 'temperature'),
    (lambda: nt_xent(q8(), q8(), chunk_size=True), TypeError, 'chunk_size'),
    (lambda: nt_xent(q8(), q8(), chunk_size=2.0), TypeError, 'chunk_size'),
    (lambda: info_nce(q8(), q8(), chunk_size=-3), ValueError, 'chunk_size'),
    (lambda: info_nce(q8(), q8(), reduction=None), ValueError, 'reduction'),
    (lambda: info_nce(q8()[0], q8()[0]), ValueError, 'query must have 2 dimensions'),
    (lambda: info_nce(q8()[None], q8()[None]), ValueError, 'query must have 2 dimensions'),
    (lambda: info_nce(q8(), q8(), torch.randn(8)), ValueError, 'negatives must have 2 or 3'),
    (lambda: info_nce(q8(), q8(), torch.zeros(5, 8)), ValueError, 'negatives has a zero vector'),
    (lambda: info_nce(q8(), q8(), torch.full((5, 8), float('nan'))), ValueError, 'negatives has'),
    (lambda: info_nce(q8(), torch.full((4, 8), float('inf'))), ValueError, 'positive has'),
    (lambda: nt_xent(q8(), torch.zeros(4, 8)), ValueError, 'z2 has a zero vector'),
    (lambda: nt_xent(q8(4), q8(5)), ValueError, 'same shape'),
    (lambda: nt_xent(torch.randn(4, 0), torch.randn(4, 0)), ValueError, 'no features'),
    (lambda: nt_xent(torch.randn(0, 8), torch.randn(0, 8)), ValueError, 'empty'),
])
def test_every_bad_input_class_names_its_argument(call, error, message):
    with pytest.raises(error, match=message): call()

def test_mixed_dtypes_and_layouts_give_the_float64_answer():
    q, p, n = rand(6, 5, seed=30), rand(6, 5, seed=31), rand(7, 5, seed=32)
    want = info_nce(q, p, n, 0.2)
    assert torch.isclose(info_nce(q.float(), p, n.half(), 0.2).double(), want, rtol=1e-3)
    assert torch.isclose(nt_xent(q, p.float(), 0.2).double(), nt_xent(q, p, 0.2), rtol=1e-5)
    # non-contiguous views (a transpose, a stride) are ordinary inputs
    qt, pt = rand(5, 6, seed=33).T, rand(12, 5, seed=34)[::2]
    assert not qt.is_contiguous() and not pt.is_contiguous()
    assert torch.isclose(nt_xent(qt, pt, 0.3), nt_xent(qt.contiguous(), pt.contiguous(), 0.3))
    assert torch.isclose(info_nce(qt, pt, None, 0.3), info_nce(qt.contiguous(), pt.contiguous(), None, 0.3))

def test_size_one_batches_and_a_one_element_temperature():
    q, p = rand(1, 4, seed=35), rand(1, 4, seed=36)
    # one query, one candidate: its own positive, probability 1, so the loss is 0 up to rounding, never below
    assert 0.0 <= info_nce(q, p).item() < 1e-12
    assert torch.isfinite(info_nce(q, p, rand(3, 4, seed=37)))
    t = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)
    loss = nt_xent(rand(4, 3, seed=38), rand(4, 3, seed=39), t)
    assert loss.shape == () and torch.isclose(loss, nt_xent(rand(4, 3, seed=38), rand(4, 3, seed=39), 0.3))
    loss.backward()
    assert t.grad.shape == (1,) and torch.isfinite(t.grad).all()

def test_the_error_names_the_argument_not_x():
    with pytest.raises(ValueError, match=r'query has a zero vector at row 2'):
        info_nce(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]), torch.randn(3, 2))

# --- training loops: validation before work, forwarding, non-finite losses ------------------------------------------

def test_train_on_pairs_refuses_bad_arguments_before_any_step():
    from contrastive_nb.infonce import train_on_pairs
    w = torch.nn.Parameter(torch.ones(()))
    loss = lambda a, b, g: (w * a.mean() - b.mean()) ** 2
    images = torch.rand(6, 3, 8, 8)
    cases = [
        (dict(pair_loss=None), TypeError, 'pair_loss'),
        (dict(parameters=[]), ValueError, 'parameters is empty'),
        (dict(parameters=w), TypeError, 'parameters'),
        (dict(images=images[0]), ValueError, 'images must have 4'),
        (dict(images=images[:0]), ValueError, 'images is empty'),
        (dict(images=images.tolist()), TypeError, 'images must be a torch.Tensor'),
        (dict(epochs=0), ValueError, 'epochs'),
        (dict(epochs=True), TypeError, 'epochs'),
        (dict(batch_size=2.5), TypeError, 'batch_size'),
        (dict(lr=0.0), ValueError, 'lr'),
        (dict(lr=float('nan')), ValueError, 'lr'),
        (dict(weight_decay=-1e-4), ValueError, 'weight_decay'),
        (dict(seed=1.5), TypeError, 'seed'),
    ]
    for change, error, message in cases:
        kwargs = dict(pair_loss=loss, parameters=[w], images=images, epochs=1, batch_size=3, progress=False)
        kwargs.update(change)
        with pytest.raises(error, match=message): train_on_pairs(**kwargs)
    assert w.item() == 1.0  # nothing trained: the weight is never written, so exactly its start

def test_train_on_pairs_stops_on_a_non_finite_or_non_scalar_loss():
    from contrastive_nb.infonce import train_on_pairs
    w = torch.nn.Parameter(torch.ones(()))
    with pytest.raises(FloatingPointError, match='step 0'):
        train_on_pairs(lambda a, b, g: w * float('nan'), [w], torch.rand(4, 3, 8, 8), epochs=1, batch_size=2,
                       progress=False)
    with pytest.raises(ValueError, match='scalar'):
        train_on_pairs(lambda a, b, g: w * a.mean(1), [w], torch.rand(4, 3, 8, 8), epochs=1, batch_size=2,
                       progress=False)
    assert w.item() == 1.0

def test_train_simclr_forwards_options_and_validates_its_own():
    from contrastive_nb.infonce import train_simclr
    from contrastive_nb.models import ProjectionHead, SmallCNN
    images = torch.rand(8, 3, 16, 16)
    def run(**options):
        torch.manual_seed(0)
        encoder = SmallCNN(width=4, blocks=1)
        head = ProjectionHead(encoder.feature_dim, 8, 4)
        return train_simclr(encoder, head, images, epochs=1, batch_size=4, progress=False, **options)
    base, other_seed, other_lr = run(seed=0), run(seed=1), run(seed=0, lr=1e-1)
    assert base.equals(run(seed=0)) and not base.equals(other_seed)
    assert base.loss.iloc[0] == other_lr.loss.iloc[0] and base.loss.iloc[1] != other_lr.loss.iloc[1]
    with pytest.raises(TypeError, match='unexpected keyword'): run(learning_rate=0.1)
    with pytest.raises(ValueError, match='temperature'): run(temperature=0)
    with pytest.raises(ValueError, match=r'batch_size \(1\) must both be at least 2'):
        train_simclr(SmallCNN(width=4, blocks=1), torch.nn.Identity(), images, batch_size=1)
    with pytest.raises(TypeError, match='encoder must be a torch.nn.Module'):
        train_simclr(lambda x: x, torch.nn.Identity(), images)
    with pytest.raises(ValueError, match=r'images \(1\) and batch_size'):
        train_simclr(SmallCNN(width=4, blocks=1), torch.nn.Identity(), images[:1])

# --- found by the mutation pass (scripts/mutate.py): each of these failed to notice a one-line bug ----------------

def test_train_on_pairs_is_adam_on_the_loss():
    "Same trajectory as a hand-written Adam loop: gradients are zeroed each step, every step is taken."
    from contrastive_nb.infonce import train_on_pairs
    w = torch.nn.Parameter(torch.zeros(()))
    history = train_on_pairs(lambda a, b, g: (w - 3) ** 2, [w], torch.rand(6, 3, 8, 8), epochs=3, batch_size=2,
                             lr=0.1, weight_decay=0.01, progress=False)
    v = torch.nn.Parameter(torch.zeros(()))
    adam = torch.optim.Adam([v], lr=0.1, weight_decay=0.01)
    for _ in range(9):
        adam.zero_grad()
        ((v - 3) ** 2).backward()
        adam.step()
    assert history.step.tolist() == list(range(9)) and history.epoch.tolist() == [0] * 3 + [1] * 3 + [2] * 3
    assert torch.allclose(w, v, atol=1e-6)

def test_train_simclr_accepts_the_smallest_batch_and_dataset():
    from contrastive_nb.infonce import train_simclr
    from contrastive_nb.models import ProjectionHead, SmallCNN
    torch.manual_seed(0)
    encoder = SmallCNN(width=4, blocks=1)
    history = train_simclr(encoder, ProjectionHead(encoder.feature_dim, 8, 4), torch.rand(2, 3, 8, 8),
                           epochs=1, batch_size=2, progress=False)
    assert len(history) == 1 and math.isfinite(history.loss.iloc[0])

def test_a_cold_tensor_temperature_is_as_stable_as_a_float():
    "τ = 0.005 puts logits near 200, past float32's exp range: the shift must be chosen from 1/τ."
    z1, z2 = rand(6, 4, dtype=torch.float32), rand(6, 4, seed=1, dtype=torch.float32)
    for chunk_size in (None, 2):
        as_tensor = nt_xent(z1, z2, torch.tensor(0.005), chunk_size=chunk_size)
        assert torch.isfinite(as_tensor) and torch.isclose(as_tensor, nt_xent(z1, z2, 0.005), rtol=1e-5)

def test_chunked_rows_are_all_written():
    "Each chunk writes its own slice of the result: no resized output, no row left as uninitialised memory."
    import warnings
    a, b = rand(7, 4) / 0.1, F.normalize(rand(9, 4, seed=1), dim=1)
    expected = torch.logsumexp(a @ b.T, dim=1)
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # torch warns when an `out=` tensor of the wrong size is resized
        for chunk_size in (1, 2, 3, 6):
            torch.full((7,), float('nan'))  # leave NaN in freed memory that torch.empty may reuse
            assert torch.allclose(row_logsumexp(a, b, 10.0, chunk_size=chunk_size), expected)

def test_a_temperature_of_any_one_element_shape_keeps_the_loss_shape():
    z1, z2 = rand(4, 3), rand(4, 3, seed=1)
    for t in (torch.tensor([0.5]), torch.tensor([[0.5]])):
        assert nt_xent(z1, z2, t, reduction='none').shape == (8,)
        assert info_nce(z1, z2, temperature=t, reduction='none').shape == (4,)

def test_train_on_pairs_progress_bar_counts_every_step(capsys):
    from contrastive_nb.infonce import train_on_pairs
    w = torch.nn.Parameter(torch.zeros(()))
    train_on_pairs(lambda a, b, g: (w - 1) ** 2, [w], torch.rand(6, 3, 8, 8), epochs=2, batch_size=2, desc='bar')
    assert '6/6' in capsys.readouterr().err

@pytest.mark.parametrize('chunk_size', [None, 3])
def test_losses_under_autocast_match_float32_and_backpropagate(chunk_size):
    # under autocast the custom kernels would run forward in bfloat16 and backward in float32, and fail
    torch.manual_seed(0)
    z1, z2, negatives = torch.randn(8, 16), torch.randn(8, 16), torch.randn(5, 16)
    def loss_and_grad(autocast: bool):
        a = z1.clone().requires_grad_()
        with torch.autocast('cpu', dtype=torch.bfloat16, enabled=autocast):
            loss = nt_xent(a, z2, chunk_size=chunk_size) + info_nce(a, z2, negatives)
        loss.backward()
        return loss.detach(), a.grad
    (loss, grad), (ref, ref_grad) = loss_and_grad(True), loss_and_grad(False)
    assert loss.dtype == torch.float32
    assert torch.allclose(loss, ref, atol=1e-5) and torch.allclose(grad, ref_grad, atol=1e-5)
