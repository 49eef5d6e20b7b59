"""Package tests for contrastive_nb.temperature: gradient shares, the learnable temperature, half precision at low τ."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from contrastive_nb.infonce import info_nce, nt_xent
from contrastive_nb.temperature import LearnableTemperature, negative_gradient_shares

F64 = torch.float64

# --- helpers -------------------------------------------------------------------------------------------------------

def autograd_shares(similarities: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    "Each negative's ∂L/∂s_k divided by their sum, L = cross-entropy(s / τ) with the positive in column 0."
    s = similarities.clone().requires_grad_()
    F.cross_entropy(s / temperature[:, None], torch.zeros(len(s), dtype=torch.long), reduction='sum').backward()
    push = s.grad[:, 1:]
    return push / push.sum(1, keepdim=True)

candidate_lists = st.tuples(st.integers(1, 6), st.integers(2, 12), st.integers(0, 2**31 - 1)).map(
    lambda a: torch.rand(a[0], a[1], dtype=F64, generator=torch.Generator().manual_seed(a[2])) * 2 - 1)
temperatures = st.floats(0.02, 50.0)

def learn_temperature(z1, z2, steps: int, lr: float = 0.05, record=None) -> LearnableTemperature:
    "Fit only τ to fixed embeddings with NT-Xent, clamping after each step as OpenCLIP does."
    module = LearnableTemperature()
    optimiser = torch.optim.Adam(module.parameters(), lr=lr)
    for _ in range(steps):
        loss = nt_xent(z1, z2, temperature=module.temperature)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        module.clamp_()
        if record is not None: record.append((module.scale.item(), module.log_scale.item()))
    return module

# --- negative_gradient_shares --------------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(candidate_lists, temperatures)
def test_shares_match_autograd(sims, tau):
    taus = torch.full((len(sims),), tau, dtype=F64)
    assert torch.allclose(negative_gradient_shares(sims, tau), autograd_shares(sims, taus), atol=1e-12)
    assert torch.allclose(negative_gradient_shares(sims, taus), autograd_shares(sims, taus), atol=1e-12)

def test_shares_per_row_temperature_and_sum():
    sims = torch.rand(5, 7, dtype=F64, generator=torch.Generator().manual_seed(0))
    taus = torch.tensor([0.03, 0.1, 0.5, 2.0, 10.0], dtype=F64)
    shares = negative_gradient_shares(sims, taus)
    assert shares.shape == (5, 6)
    assert torch.allclose(shares, autograd_shares(sims, taus))
    assert torch.allclose(shares.sum(-1), torch.ones(5, dtype=F64))

def test_shares_ignore_the_positive():
    sims = torch.tensor([0.8, 0.6, 0.2], dtype=F64)
    other = sims.clone()
    other[0] = -0.9  # the positive cancels from the share, whatever its similarity
    assert torch.allclose(negative_gradient_shares(sims, 0.2), negative_gradient_shares(other, 0.2))

@pytest.mark.parametrize('tau', [0.05, 0.1, 0.2, 0.5, 1.0, 7.0])
def test_two_negatives_are_a_logistic(tau):
    sims = torch.tensor([0.8, 0.6, 0.2], dtype=F64)
    assert math.isclose(negative_gradient_shares(sims, tau)[0].item(), 1 / (1 + math.exp(-0.4 / tau)), rel_tol=1e-12)

def test_limits():
    sims = torch.tensor([0.9, 0.5, 0.3, 0.1, -0.2], dtype=F64)
    assert torch.allclose(negative_gradient_shares(sims, 1e-3), torch.tensor([1.0, 0, 0, 0], dtype=F64))
    assert torch.allclose(negative_gradient_shares(sims, 1e6), torch.full((4,), 0.25, dtype=F64), atol=1e-6)

def test_shares_stay_finite_at_tiny_temperature():
    sims = torch.tensor([[0.99, 0.98, -1.0]], dtype=torch.float32)
    shares = negative_gradient_shares(sims, 1e-4)
    assert torch.isfinite(shares).all() and torch.allclose(shares, torch.tensor([[1.0, 0.0]]))

def test_shares_accept_a_differentiable_temperature():
    tau = torch.tensor(0.3, dtype=F64, requires_grad=True)
    negative_gradient_shares(torch.tensor([0.8, 0.6, 0.2], dtype=F64), tau)[0].backward()
    assert tau.grad < 0  # a warmer softmax gives the hardest negative less

# --- bad inputs ----------------------------------------------------------------------------------------------------

SIMS = torch.tensor([0.8, 0.6, 0.2])

@pytest.mark.parametrize('tau', [0.0, -0.1, float('nan'), float('inf'), torch.tensor(-1.0), torch.tensor([0.1, 0.0])])
def test_bad_temperature_is_a_value_error(tau):
    with pytest.raises(ValueError, match='temperature'):
        negative_gradient_shares(SIMS.expand(2, 3), tau)

@pytest.mark.parametrize('tau', ['0.1', None, True, torch.tensor(1)])
def test_temperature_of_the_wrong_type_is_a_type_error(tau):
    with pytest.raises(TypeError, match='temperature'):
        negative_gradient_shares(SIMS, tau)

def test_temperatures_that_do_not_broadcast():
    with pytest.raises(ValueError, match='does not broadcast'):
        negative_gradient_shares(torch.rand(5, 4), torch.full((3,), 0.1))
    assert negative_gradient_shares(torch.rand(2, 5, 4), torch.full((5,), 0.1)).shape == (2, 5, 3)

@pytest.mark.parametrize('sims, error, match', [
    (torch.tensor([0.8]), ValueError, 'negatives'),
    (torch.tensor(0.8), ValueError, 'negatives'),
    (torch.zeros(3, 0), ValueError, 'negatives'),
    (torch.tensor([0.8, float('nan')]), ValueError, 'NaN'),
    (torch.tensor([0.8, float('inf')]), ValueError, 'NaN or inf'),
    (torch.tensor([1, 0]), TypeError, 'floating point'),
    ([0.8, 0.6], TypeError, 'torch.Tensor'),
])
def test_bad_similarities(sims, error, match):
    with pytest.raises(error, match=match):
        negative_gradient_shares(sims, 0.1)

@pytest.mark.parametrize('tau', [0.0, -0.5])
def test_losses_refuse_a_nonpositive_tensor_temperature(tau):
    z = torch.randn(4, 8)
    with pytest.raises(ValueError, match='temperature'):
        nt_xent(z, z + 1, temperature=torch.tensor(tau))
    with pytest.raises(ValueError, match='temperature'):
        info_nce(z, z + 1, temperature=torch.tensor(tau))

@pytest.mark.parametrize('kwargs, match', [
    (dict(init=0.0), 'init'), (dict(init=-0.07), 'init'), (dict(init=float('nan')), 'init'),
    (dict(init=0.001), 'outside'), (dict(init=2.0), 'outside'),
    (dict(max_scale=0.0), 'max_scale'), (dict(min_scale=-1.0), 'min_scale'),
    (dict(max_scale=float('inf')), 'max_scale'),
    (dict(min_scale=200.0), 'must not exceed'),
])
def test_learnable_temperature_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LearnableTemperature(**kwargs)

# --- LearnableTemperature ------------------------------------------------------------------------------------------

def test_starts_as_clip():
    module = LearnableTemperature()
    assert math.isclose(module.temperature.item(), 0.07, rel_tol=1e-6)
    assert math.isclose(module.scale.item(), 1 / 0.07, rel_tol=1e-6)
    assert math.isclose(module.log_scale.item(), math.log(1 / 0.07), rel_tol=1e-6)
    assert [name for name, _ in module.named_parameters()] == ['log_scale']
    assert 'temperature=0.07' in repr(module)

def test_forward_multiplies_by_the_scale():
    module = LearnableTemperature(init=0.25)
    sims = torch.tensor([[0.5, -0.25]], dtype=F64)
    assert torch.allclose(module(sims), sims * 4)

@pytest.mark.parametrize('form', ['nt_xent', 'in-batch', 'shared', 'per-query'])
def test_gradient_reaches_the_parameter_and_follows_the_chain_rule(form):
    g = torch.Generator().manual_seed(2)
    q, p = torch.randn(6, 5, dtype=F64, generator=g), torch.randn(6, 5, dtype=F64, generator=g)
    negatives = {'nt_xent': None, 'in-batch': None, 'shared': torch.randn(9, 5, dtype=F64, generator=g),
                 'per-query': torch.randn(6, 4, 5, dtype=F64, generator=g)}[form]
    loss = ((lambda t: nt_xent(q, p, temperature=t)) if form == 'nt_xent'
            else (lambda t: info_nce(q, p, negatives, temperature=t)))
    module = LearnableTemperature(init=0.2).double()
    loss(module.temperature).backward()
    tau = torch.tensor(0.2, dtype=F64, requires_grad=True)
    loss(tau).backward()
    assert module.log_scale.grad is not None and module.log_scale.grad != 0
    assert torch.isclose(module.log_scale.grad, -0.2 * tau.grad)  # τ = exp(−log_scale): dτ/dlog_scale = −τ
    assert torch.autograd.gradcheck(lambda s: nt_xent(q, p, temperature=(-s).exp()),
                                    (module.log_scale.detach().clone().requires_grad_(),))

def test_clamp_holds_at_both_ends():
    module = LearnableTemperature()
    g = torch.Generator().manual_seed(3)
    z1, z2 = torch.randn(8, 4, generator=g), torch.randn(8, 4, generator=g)
    with torch.no_grad(): module.log_scale.fill_(50.0)
    assert (math.isclose(module.scale.item(), 100.0, rel_tol=1e-6)
            and math.isclose(module.temperature.item(), 0.01, rel_tol=1e-6))
    nt_xent(z1, z2, temperature=module.temperature).backward()
    beyond = module.log_scale.grad.clone()
    module.clamp_()
    assert math.isclose(module.log_scale.item(), math.log(100.0), rel_tol=1e-7)
    module.log_scale.grad = None
    nt_xent(z1, z2, temperature=module.temperature).backward()
    # The value is clamped, the gradient is not cut off: past the bound it is the gradient at the bound, never zero.
    assert beyond != 0 and torch.isclose(beyond, module.log_scale.grad)
    with torch.no_grad(): module.log_scale.fill_(-50.0)
    assert module.temperature.item() == 1.0 and module.clamp_().log_scale.item() == 0.0

def test_a_scale_on_the_bound_can_come_back():
    "After clamp_ puts the parameter on the bound, a loss that prefers a warmer softmax moves it back inside."
    module = LearnableTemperature()
    with torch.no_grad(): module.log_scale.fill_(50.0)
    module.clamp_()
    g = torch.Generator().manual_seed(8)
    z1, z2 = torch.randn(64, 16, generator=g), torch.randn(64, 16, generator=g)  # unrelated pairs: τ should rise
    optimiser = torch.optim.SGD(module.parameters(), lr=0.01)
    for _ in range(5):
        optimiser.zero_grad()
        nt_xent(z1, z2, temperature=module.temperature).backward()
        optimiser.step()
        module.clamp_()
    assert module.scale.item() < 99.0

def test_custom_bounds():
    module = LearnableTemperature(init=0.1, max_scale=20.0, min_scale=5.0)
    with torch.no_grad(): module.log_scale.fill_(10.0)
    assert math.isclose(module.temperature.item(), 0.05, rel_tol=1e-6)
    with torch.no_grad(): module.log_scale.fill_(-10.0)
    assert math.isclose(module.temperature.item(), 0.2, rel_tol=1e-6)

def test_separable_pairs_drive_tau_down_to_the_clamp_and_never_past_it():
    g = torch.Generator().manual_seed(4)
    z1 = torch.randn(64, 16, generator=g)
    z2 = z1 + 0.05 * torch.randn(64, 16, generator=g)
    history = []
    module = learn_temperature(z1, z2, steps=400, lr=0.1, record=history)
    scales, logs = zip(*history)
    assert max(scales) <= 100.0 * (1 + 1e-6) and max(logs) <= math.log(100.0) + 1e-6
    assert module.temperature.item() < 0.07
    assert scales[-1] > scales[len(scales) // 2] > scales[0]  # still heading for the clamp

def test_noisy_pairs_drive_tau_up():
    g = torch.Generator().manual_seed(5)
    z1 = torch.randn(64, 16, generator=g)
    z2 = torch.randn(64, 16, generator=g)  # positives no more alike than negatives
    module = learn_temperature(z1, z2, steps=150)
    assert module.temperature.item() > 0.3
    assert module.temperature.item() <= 1.0

def test_state_dict_round_trip_and_dtype(tmp_path):
    module = LearnableTemperature(init=0.3)
    torch.save(module.state_dict(), tmp_path / 't.pt')
    other = LearnableTemperature()
    other.load_state_dict(torch.load(tmp_path / 't.pt'))
    assert math.isclose(other.temperature.item(), 0.3, rel_tol=1e-6)
    assert module.double().temperature.dtype == F64

# --- half precision at τ = 0.01 ------------------------------------------------------------------------------------

def _embeddings(n: int = 256, d: int = 64, seed: int = 6):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    # Positives only a little closer than the nearest negatives: at τ = 0.01 the loss is of order 1, not 0 or 1000.
    return (x, x + 2.5 * torch.randn(n, d, generator=g), torch.randn(3 * n, d, generator=g),
            torch.randn(n, 8, d, generator=g))

LOSSES = {
    'nt_xent': lambda a, b, q, pq, t: nt_xent(a, b, temperature=t),
    'nt_xent chunked': lambda a, b, q, pq, t: nt_xent(a, b, temperature=t, chunk_size=100),
    'in-batch': lambda a, b, q, pq, t: info_nce(a, b, temperature=t),
    'shared': lambda a, b, q, pq, t: info_nce(a, b, q, temperature=t),
    'per-query': lambda a, b, q, pq, t: info_nce(a, b, pq, temperature=t),
}

@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
@pytest.mark.parametrize('name', list(LOSSES))
def test_half_precision_at_tau_001_is_finite_and_close(name, dtype):
    loss = LOSSES[name]
    inputs = _embeddings()
    half = [t.to(dtype) for t in inputs]
    leaves = [t.clone().requires_grad_() for t in half[:2]]
    value = loss(*leaves, *half[2:], 0.01)
    value.backward()
    assert value.dtype == torch.float32 and torch.isfinite(value)
    assert all(torch.isfinite(leaf.grad).all() and leaf.grad.dtype == dtype for leaf in leaves)
    rounded = loss(*[t.float() for t in half], 0.01)
    original = loss(*inputs, 0.01)
    assert math.isclose(value.item(), rounded.item(), rel_tol=1e-5)  # the loss adds no error of its own
    assert math.isclose(value.item(), original.item(), rel_tol=0.02)  # what remains is the rounding of the inputs

@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_half_precision_with_a_learnable_temperature_at_the_clamp(dtype):
    x, y, _, _ = _embeddings(seed=7)
    module = LearnableTemperature()
    with torch.no_grad(): module.log_scale.fill_(math.log(100.0))
    value = nt_xent(x.to(dtype), y.to(dtype), temperature=module.temperature)
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(module.log_scale.grad)
    assert math.isclose(value.item(), nt_xent(x, y, temperature=0.01).item(), rel_tol=0.02)


# --- robustness added with the shared input checks ------------------------------------------------------------------

@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize('tau', [1e-2, 1e-6, 1e-30])
def test_tiny_temperature_in_any_dtype_is_exact(dtype, tau):
    # s / τ alone overflows (float16 above 65 504): the shift by the hardest negative keeps it finite
    sims = torch.tensor([[0.9, 0.8, 0.1, -0.5]], dtype=dtype)
    shares = negative_gradient_shares(sims, tau)
    assert shares.dtype == dtype and torch.isfinite(shares).all()
    assert torch.allclose(shares.double(), torch.tensor([[1.0, 0.0, 0.0]], dtype=F64), atol=1e-4)

@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_half_similarities_match_float64(dtype):
    sims = torch.rand(5, 7, generator=torch.Generator().manual_seed(3)).to(dtype)
    got = negative_gradient_shares(sims, 0.1)
    want = negative_gradient_shares(sims.double(), 0.1)
    assert got.dtype == dtype and torch.allclose(got.double(), want, atol=1e-2)

def test_one_element_temperature_tensor_adds_no_dimension():
    for tau in (torch.tensor(0.1), torch.tensor([0.1]), torch.tensor([[0.1]])):
        assert negative_gradient_shares(SIMS, tau).shape == (2,)
        assert torch.allclose(negative_gradient_shares(SIMS, tau), negative_gradient_shares(SIMS, 0.1))

def test_temperature_tensor_must_not_add_dimensions():
    with pytest.raises(ValueError, match='does not broadcast'):
        negative_gradient_shares(torch.rand(3, 4), torch.full((2, 3), 0.1))

def test_empty_batch_and_noncontiguous_lists():
    assert negative_gradient_shares(torch.rand(0, 5), 0.1).shape == (0, 4)
    sims = torch.rand(5, 6, dtype=F64, generator=torch.Generator().manual_seed(4))
    assert torch.allclose(negative_gradient_shares(sims.T, 0.3), negative_gradient_shares(sims.T.contiguous(), 0.3))

@pytest.mark.parametrize('kwargs', [dict(init=True), dict(init='0.07'), dict(max_scale=None), dict(min_scale=[1.0])])
def test_learnable_temperature_wrong_types(kwargs):
    with pytest.raises(TypeError):
        LearnableTemperature(**kwargs)

@pytest.mark.parametrize('sims, error', [(torch.tensor([1, 0]), TypeError), ([0.5, 0.2], TypeError),
                                         (torch.tensor([0.5, float('nan')]), ValueError)])
def test_learnable_temperature_forward_refuses_bad_similarities(sims, error):
    with pytest.raises(error, match='similarities'):
        LearnableTemperature()(sims)

def test_learnable_temperature_forward_in_half_precision_stays_finite():
    module = LearnableTemperature()
    with torch.no_grad():
        module.log_scale.fill_(10.0)  # scale clamped to 100
    logits = module(torch.ones(4, 4, dtype=torch.float16))
    assert logits.dtype == torch.float16 and torch.isfinite(logits).all() and logits.max().item() == 100.0

# --- faults found by probing (issue 23) ---------------------------------------------------------------------------

@pytest.mark.parametrize('kwargs, name', [(dict(init=1e40, max_scale=1.0, min_scale=1e-40), 'min_scale'),
                                          (dict(init=1e-39, max_scale=1e40), 'max_scale')])
def test_scale_bounds_outside_float32_are_refused(kwargs, name):
    "min_scale=1e-40 is 0 in float32, so τ read as inf; max_scale=1e40 made .scale raise a RuntimeError."
    with pytest.raises(ValueError, match=name): LearnableTemperature(**kwargs)

def test_logits_that_overflow_float16_raise_instead_of_becoming_inf():
    "max_scale=1e6 and float16 similarities gave inf logits, silently."
    module = LearnableTemperature(init=1e-5, max_scale=1e6)
    with pytest.raises(ValueError, match='overflows torch.float16'): module(torch.ones(3).half())
    assert torch.isfinite(module(torch.ones(3))).all()
    assert torch.isfinite(LearnableTemperature()(torch.ones(3).half())).all()  # CLIP's 100 fits float16

def test_nan_log_scale_is_named_in_forward_and_clamp():
    "A diverged step left log_scale NaN: forward said the logits 'overflow' (scale nan), clamp_ kept the NaN silently."
    module = LearnableTemperature()
    optimiser = torch.optim.SGD(module.parameters(), lr=0.1)
    module(torch.ones(2)).sum().mul(float('nan')).backward()
    optimiser.step()  # a NaN loss, so a NaN gradient: the step makes log_scale NaN
    assert torch.isnan(module.log_scale)
    with pytest.raises(ValueError, match='log_scale is NaN.*optimiser step diverged'): module(torch.ones(3))
    with pytest.raises(ValueError, match='log_scale is NaN'): module.clamp_()
    with pytest.raises(ValueError, match='log_scale is NaN'): module(torch.ones(3).half())
    with torch.no_grad(): module.log_scale.fill_(math.inf)  # inf is a bound, not a NaN: clamped back inside
    assert module.clamp_().scale.item() == pytest.approx(100.0)
