"""Package tests for contrastive_nb.similarity: cosine similarity, similarity matrices, alignment and uniformity."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from contrastive_nb.similarity import alignment, cosine_similarity, l2_normalize, similarity_matrix, uniformity

F64 = torch.float64
DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

# --- strategies ---------------------------------------------------------------------------------------------------

def batches(min_rows: int = 1, max_rows: int = 8, max_dim: int = 8, dim: int | None = None, min_norm: float = 0.0):
    """(N, D) float64 tensors with no zero rows; entries span many orders of magnitude, subnormals included.
    Comparisons with references that clamp norms with an eps (F.normalize, F.cosine_similarity) need `min_norm`."""
    def build(shape):
        elements = st.one_of(st.floats(-1e3, 1e3, allow_nan=False), st.floats(-1e-3, 1e-3, allow_nan=False))
        return arrays(np.float64, shape, elements=elements).map(torch.from_numpy).filter(
            lambda x: bool((x.abs().amax(-1) > 0).all() and (x.norm(dim=-1) >= min_norm).all()))
    dims = st.just(dim) if dim is not None else st.integers(1, max_dim)
    return st.tuples(st.integers(min_rows, max_rows), dims).flatmap(build)

@st.composite
def pairs_of_batches(draw, min_rows: int = 1, min_norm: float = 0.0):
    a = draw(batches(min_rows, min_norm=min_norm))
    b = draw(batches(len(a), len(a), dim=a.shape[1], min_norm=min_norm))
    return a, b

REF = 1e-3  # rows at least this long: the references below are accurate there
SCALABLE = 1e-200  # rows at least this long survive a rescaling by 1e-6 without underflowing to zero

positive_scales = st.floats(1e-6, 1e6, allow_nan=False, allow_infinity=False)

# --- cosine_similarity ---------------------------------------------------------------------------------------------

def test_seed_example_exact():
    anchor = torch.tensor([0.6, 0.8])
    candidates = torch.tensor([[0.8, 0.6], [1.0, 0.0], [-0.8, 0.6]])  # positive, hard negative, easy negative
    assert torch.allclose(cosine_similarity(anchor, candidates), torch.tensor([0.96, 0.60, 0.00]), atol=1e-6)
    assert torch.allclose(cosine_similarity(anchor.double(), candidates.double()),
                          torch.tensor([0.96, 0.60, 0.00], dtype=F64), atol=1e-15)

@settings(max_examples=60, deadline=None)
@given(pairs_of_batches(min_norm=REF))
def test_cosine_symmetric_bounded_and_matches_reference(ab):
    a, b = ab
    c = cosine_similarity(a, b)
    assert c.shape == (len(a),) and torch.equal(c, cosine_similarity(b, a))
    assert (c.abs() <= 1).all()
    dot = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))  # the definition; fine in float64 at these scales
    assert torch.allclose(c, dot.clamp(-1, 1), atol=1e-12)

@settings(max_examples=60, deadline=None)
@given(pairs_of_batches(min_norm=SCALABLE), positive_scales, positive_scales)
def test_cosine_scale_invariant_and_odd(ab, s, t):
    a, b = ab
    c = cosine_similarity(a, b)
    assert torch.allclose(cosine_similarity(s * a, t * b), c, atol=1e-12)
    assert torch.allclose(cosine_similarity(-a, b), -c, atol=1e-12)

def test_cosine_self_is_one_and_opposite_is_minus_one():
    x = torch.randn(20, 9, dtype=F64)
    assert torch.allclose(cosine_similarity(x, x), torch.ones(20, dtype=F64))
    assert torch.allclose(cosine_similarity(x, -x), -torch.ones(20, dtype=F64))

def test_cosine_broadcasts_leading_dimensions_only():
    a, b = torch.randn(5, 4), torch.randn(3, 4)
    assert cosine_similarity(a[0], b).shape == (3,)
    assert cosine_similarity(a[:, None], b).shape == (5, 3)
    assert torch.allclose(cosine_similarity(a[:, None], b), similarity_matrix(a, b), atol=1e-6)
    assert cosine_similarity(a[0], a[1]).shape == ()
    with pytest.raises(ValueError, match='same number of features'):
        cosine_similarity(torch.randn(5, 1), torch.randn(5, 4))
    with pytest.raises(ValueError, match='do not broadcast'): cosine_similarity(a, b)

@pytest.mark.parametrize('dtype,value', [(torch.float16, 300.0), (torch.float16, 3e-5), (torch.bfloat16, 1e30),
                                         (torch.bfloat16, 1e-30), (torch.float32, 1e20), (torch.float32, 1e-20),
                                         (torch.float32, 1e-40), (torch.float64, 1e300), (torch.float64, 1e-300)])
def test_cosine_exact_at_extreme_scales(dtype, value):
    "Rescaling by the largest entry first: no overflow, no underflow, no eps."
    u = torch.full((64,), value, dtype=dtype)
    v = u.clone(); v[0] = -v[0]
    c = cosine_similarity(u, v)
    assert c.dtype == dtype and c.item() == 62 / 64
    assert torch.allclose(l2_normalize(u).double(), torch.full((64,), 1 / 8, dtype=F64), rtol=1e-2)

def test_tiny_vectors_keep_their_direction():
    "F.cosine_similarity's eps makes two identical short vectors dissimilar; ours does not."
    tiny = torch.full((1, 4), 5e-10)
    assert F.cosine_similarity(tiny, tiny).item() < 0.1
    assert cosine_similarity(tiny, tiny).item() == pytest.approx(1.0)

@pytest.mark.parametrize('dtype', DTYPES)
def test_dtype_is_kept_and_values_close(dtype):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(16, 32, generator=g, dtype=F64), torch.randn(12, 32, generator=g, dtype=F64)
    tol = {torch.float16: 5e-3, torch.bfloat16: 3e-2, torch.float32: 1e-6, torch.float64: 1e-12}[dtype]
    for got, want in [(cosine_similarity(a[:12].to(dtype), b.to(dtype)), cosine_similarity(a[:12], b)),
                      (similarity_matrix(a.to(dtype), b.to(dtype)), similarity_matrix(a, b)),
                      (similarity_matrix(a.to(dtype)), similarity_matrix(a)),
                      (l2_normalize(a.to(dtype)), l2_normalize(a))]:
        assert got.dtype == dtype and (got.double() - want).abs().max() < tol

def test_mixed_dtypes_promote():
    a, b = torch.randn(4, 3), torch.randn(5, 3, dtype=F64)
    assert cosine_similarity(a[:, None], b).dtype == F64 and similarity_matrix(a, b).dtype == F64

@pytest.mark.parametrize('dtype', DTYPES)
def test_gradients_flow_in_every_dtype(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 8, generator=g).to(dtype).requires_grad_()
    y = torch.randn(6, 8, generator=g).to(dtype).requires_grad_()
    (similarity_matrix(x, y).sum() + cosine_similarity(x, y).sum() + alignment(x, y) + uniformity(x)).backward()
    for grad in (x.grad, y.grad):
        assert grad is not None and grad.dtype == dtype and torch.isfinite(grad).all() and grad.abs().sum() > 0

# --- similarity_matrix ---------------------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(batches(min_norm=REF), st.data())
def test_similarity_matrix_is_the_loop_of_cosines(a, data):
    b = data.draw(batches(dim=a.shape[1], min_norm=REF))
    S = similarity_matrix(a, b)
    loop = torch.stack([torch.stack([cosine_similarity(x, y) for y in b]) for x in a])
    assert S.shape == (len(a), len(b)) and torch.allclose(S, loop, atol=1e-12)
    assert torch.allclose(S, F.cosine_similarity(a[:, None], b[None], dim=-1), atol=1e-9)
    assert (S.abs() <= 1).all()

@settings(max_examples=60, deadline=None)
@given(batches(), st.randoms(use_true_random=False))
def test_similarity_matrix_symmetric_and_permutation_equivariant(a, rnd):
    S = similarity_matrix(a)
    assert (torch.allclose(S, S.T, atol=1e-12)
            and torch.allclose(S.diagonal(), torch.ones(len(a), dtype=F64), atol=1e-12))
    p = torch.tensor(rnd.sample(range(len(a)), len(a)))
    assert torch.allclose(similarity_matrix(a[p]), S[p][:, p], atol=1e-12)
    b = a.flip(0) * 3.0
    q = torch.tensor(rnd.sample(range(len(b)), len(b)))
    assert torch.allclose(similarity_matrix(a[p], b[q]), similarity_matrix(a, b)[p][:, q], atol=1e-12)
    assert torch.allclose(similarity_matrix(b, a), similarity_matrix(a, b).T, atol=1e-12)

@settings(max_examples=40, deadline=None)
@given(batches(min_norm=SCALABLE), arrays(np.float64, 8, elements=st.floats(1e-6, 1e6)))
def test_similarity_matrix_row_scale_invariant(a, scales):
    s = torch.from_numpy(scales[:len(a)])[:, None]
    assert torch.allclose(similarity_matrix(a * s), similarity_matrix(a), atol=1e-12)

def test_similarity_matrix_never_exceeds_one():
    "Rounding puts cosines of parallel vectors above 1 without the clamp; acos must stay finite."
    g = torch.Generator().manual_seed(0)
    v = torch.randn(2000, 7, generator=g)
    w = v * (0.1 + 10 * torch.rand(2000, 1, generator=g))
    assert torch.isfinite(torch.acos(cosine_similarity(v, w))).all()
    assert torch.isfinite(torch.acos(similarity_matrix(v))).all()

# --- alignment -----------------------------------------------------------------------------------------------------

def alignment_loop(x, y, alpha):
    u, v = F.normalize(x, dim=-1), F.normalize(y, dim=-1)
    return sum(math.dist(p, q) ** alpha for p, q in zip(u.tolist(), v.tolist())) / len(u)

@settings(max_examples=60, deadline=None)
@given(pairs_of_batches(min_norm=REF), st.sampled_from([0.5, 1.0, 2.0, 3.0]))
def test_alignment_matches_loop_and_bounds(xy, alpha):
    x, y = xy
    a = alignment(x, y, alpha)
    assert a.shape == () and 0 <= a.item() <= 2 ** alpha + 1e-12
    # the loop's rounding error in a distance (~1e-16) is raised to the power alpha
    assert a.item() == pytest.approx(alignment_loop(x, y, alpha), rel=1e-9, abs=max(1e-15 ** alpha, 1e-12))
    assert alignment(x, y, alpha).item() == pytest.approx(alignment(y, x, alpha).item(), rel=1e-12, abs=1e-15)

@settings(max_examples=40, deadline=None)
@given(pairs_of_batches(min_norm=SCALABLE), positive_scales)
def test_alignment_identical_pairs_zero_and_alpha2_identity(xy, s):
    x, y = xy
    assert alignment(x, x) == 0 and alignment(x, s * x) < 1e-20
    assert alignment(x, y).item() == pytest.approx((2 - 2 * cosine_similarity(x, y)).mean().item(), abs=1e-12)

def test_alignment_hand_values():
    e1, e2 = torch.tensor([[1.0, 0.0]], dtype=F64), torch.tensor([[0.0, 1.0]], dtype=F64)
    assert alignment(e1, e2).item() == pytest.approx(2.0)
    assert alignment(e1, e2, alpha=1).item() == pytest.approx(math.sqrt(2))
    assert alignment(e1, -e1).item() == pytest.approx(4.0)

# --- uniformity ----------------------------------------------------------------------------------------------------

def uniformity_pdist(x, t):
    "Wang & Isola's reference code."
    return torch.pdist(F.normalize(x, dim=-1), p=2).pow(2).mul(-t).exp().mean().log()

@settings(max_examples=60, deadline=None)
@given(batches(min_rows=2, min_norm=REF), st.sampled_from([0.5, 1.0, 2.0, 4.0]), st.randoms(use_true_random=False))
def test_uniformity_matches_pdist_bounds_and_permutation(x, t, rnd):
    u = uniformity(x, t)
    n = len(x)
    assert u.shape == () and -2 * t * n / (n - 1) - 1e-9 <= u.item() <= 0
    assert u.item() == pytest.approx(uniformity_pdist(x, t).item(), abs=1e-9)
    p = torch.tensor(rnd.sample(range(n), n))
    assert uniformity(x[p], t).item() == pytest.approx(u.item(), abs=1e-12)

@pytest.mark.parametrize('dim', [1, 2, 3, 50])
def test_uniformity_collapsed_points_is_zero(dim):
    direction = torch.randn(1, dim, generator=torch.Generator().manual_seed(dim))
    x = (0.01 + 10 * torch.rand(30, 1)) * direction  # one direction, many lengths
    assert abs(uniformity(x).item()) < 1e-6

@pytest.mark.parametrize('n', [2, 3, 5, 10, 33])
def test_uniformity_regular_simplex_reaches_the_floor(n):
    x = torch.eye(n, dtype=F64) - 1 / n  # vertices of a regular simplex centred at the origin
    assert uniformity(x).item() == pytest.approx(-2 * 2 * n / (n - 1), rel=1e-12)

@pytest.mark.parametrize('t', [1.0, 2.0, 3.0])
def test_uniformity_equally_spaced_circle_closed_form(t):
    "Uniform on S¹: E exp(−t‖u−v‖²) = e^{−2t} I₀(2t); N equally spaced points give (N·m − 1)/(N − 1)."
    n = 720
    theta = torch.arange(n, dtype=F64) * 2 * math.pi / n
    m = math.exp(-2 * t) * float(np.i0(2 * t))
    assert uniformity(torch.stack([theta.cos(), theta.sin()], 1), t).item() == pytest.approx(
        math.log((n * m - 1) / (n - 1)), rel=1e-10)

def test_uniformity_random_points_on_the_two_sphere():
    "Uniform on S²: the cosine is uniform on [−1, 1], so E exp(−t‖u−v‖²) = e^{−2t} sinh(2t)/(2t); strongly negative."
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3000, 3, generator=g, dtype=F64)
    want = math.log(math.exp(-4) * math.sinh(4) / 4)
    assert want < -2 and uniformity(x).item() == pytest.approx(want, abs=0.02)

def test_uniformity_high_dimension_approaches_minus_2t():
    x = torch.randn(1000, 1024, generator=torch.Generator().manual_seed(1))
    assert uniformity(x).item() == pytest.approx(-4.0, abs=0.02)

def test_uniformity_large_t_stays_finite():
    "logsumexp: exp(−t·d²) underflows for every pair at large t, the log of the mean does not."
    x = torch.eye(4)
    assert uniformity(x, t=100.0).item() == pytest.approx(-200.0, rel=1e-6)

# --- gradients -----------------------------------------------------------------------------------------------------

def test_gradcheck_float64():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 4, generator=g, dtype=F64, requires_grad=True)
    y = torch.randn(5, 4, generator=g, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(cosine_similarity, (x, y))
    assert torch.autograd.gradcheck(lambda a, b: similarity_matrix(a, b), (x, y))
    assert torch.autograd.gradcheck(lambda a: similarity_matrix(a), (x,))
    assert torch.autograd.gradcheck(l2_normalize, (x,))
    for alpha in (0.5, 1.0, 2.0, 3.0):
        assert torch.autograd.gradcheck(lambda a, b: alignment(a, b, alpha), (x, y))
    for t in (0.5, 2.0, 5.0):
        assert torch.autograd.gradcheck(lambda a: uniformity(a, t), (x,))

@pytest.mark.parametrize('alpha', [0.5, 1.0, 2.0])
def test_gradient_finite_at_perfect_alignment(alpha):
    x = torch.randn(4, 3, dtype=F64, requires_grad=True)
    grad, = torch.autograd.grad(alignment(x, x.detach() * 2, alpha), x)
    assert torch.isfinite(grad).all() and grad.abs().max() < 1e-6

def test_gradient_finite_at_collapse():
    x = torch.randn(1, 5, dtype=F64).repeat(6, 1).requires_grad_()
    grad, = torch.autograd.grad(uniformity(x), x)
    assert torch.isfinite(grad).all() and grad.abs().max() < 1e-6

# --- bad inputs ----------------------------------------------------------------------------------------------------

NAN, INF = float('nan'), float('inf')

@pytest.mark.parametrize('call,error,message', [
    (lambda: cosine_similarity(torch.tensor([1.0, 0.0]), torch.zeros(2)), ValueError, 'b has a zero vector'),
    (lambda: similarity_matrix(torch.tensor([[1.0, 2.0], [0.0, 0.0]])), ValueError, 'zero vector at row 1'),
    (lambda: similarity_matrix(torch.zeros(3, 2, 2)[:, 0]), ValueError, 'at 3 rows'),
    (lambda: cosine_similarity(torch.zeros(2, 3, 4), torch.ones(4)), ValueError, 'at 6 indices'),
    (lambda: l2_normalize(torch.zeros(3, dtype=torch.float16)), ValueError, 'zero vector'),
    (lambda: similarity_matrix(torch.tensor([[1.0, NAN]])), ValueError, 'NaN or inf'),
    (lambda: alignment(torch.tensor([[1.0, INF]]), torch.ones(1, 2)), ValueError,
     'x has a vector containing NaN or inf'),
    (lambda: uniformity(torch.tensor([[1.0, 0.0], [-INF, 1.0]])), ValueError,
     'x has a vector containing NaN or inf at row 1'),
    (lambda: cosine_similarity(torch.randn(3, 4), torch.randn(3, 5)), ValueError, 'same number of features'),
    (lambda: similarity_matrix(torch.randn(3, 4), torch.randn(3, 5)), ValueError, 'same number of features'),
    (lambda: similarity_matrix(torch.randn(5)), ValueError, r'a\[None\]'),
    (lambda: similarity_matrix(torch.randn(2, 3), torch.randn(3)), ValueError, r'b must be a \(N, D\) batch'),
    (lambda: uniformity(torch.randn(4, 3, 8)), ValueError, r'flatten\(1\)'),
    (lambda: alignment(torch.randn(4)[None], torch.randn(4)), ValueError, r'\(N, D\) batch'),
    (lambda: alignment(torch.randn(4, 3), torch.randn(5, 3)), ValueError, 'same shape'),
    (lambda: alignment(torch.randn(0, 3), torch.randn(0, 3)), ValueError, 'at least one pair'),
    (lambda: alignment(torch.randn(2, 3), torch.randn(2, 3), alpha=0), ValueError,
     r'alpha must be a finite number in \(0'),
    (lambda: uniformity(torch.randn(1, 3)), ValueError, 'at least two'),
    (lambda: uniformity(torch.randn(4, 3), t=-1.0), ValueError, 't must be a finite number'),
    (lambda: uniformity(torch.randn(4, 3), t=NAN), ValueError, 't must be a finite number'),
    (lambda: cosine_similarity(torch.tensor([1, 0]), torch.tensor([0, 1])), TypeError, 'floating point'),
    (lambda: similarity_matrix([[1.0, 0.0]]), TypeError, 'torch.Tensor'),
    (lambda: cosine_similarity(torch.tensor(1.0), torch.tensor(2.0)), ValueError, 'scalar'),
    (lambda: similarity_matrix(torch.randn(3, 0)), ValueError, 'no features'),
])
def test_bad_inputs_get_clear_errors(call, error, message):
    with pytest.raises(error, match=message): call()


# --- the shared checks: wrong types are TypeErrors, bad values ValueErrors, every one named ---------------------------

@pytest.mark.parametrize('call, error, message', [
    (lambda: alignment(torch.randn(2, 3), torch.randn(2, 3), alpha=True), TypeError, 'alpha'),
    (lambda: alignment(torch.randn(2, 3), torch.randn(2, 3), alpha=INF), ValueError, 'alpha'),
    (lambda: alignment(torch.randn(2, 3), torch.randn(2, 3), alpha='2'), TypeError, 'alpha'),
    (lambda: uniformity(torch.randn(4, 3), t=False), TypeError, 't must be a real number'),
    (lambda: uniformity(torch.randn(4, 3), t=INF), ValueError, 't must be'),
    (lambda: uniformity(torch.randn(4, 3) > 0), TypeError, 'x must be floating point'),
    (lambda: alignment(torch.ones(2, 3, dtype=torch.int32), torch.ones(2, 3)), TypeError, 'x must be floating'),
    (lambda: similarity_matrix(torch.randn(3, 2), [[1.0, 0.0]]), TypeError, 'b must be a torch.Tensor'),
    (lambda: l2_normalize(None), TypeError, 'x must be a torch.Tensor'),
    (lambda: similarity_matrix(torch.randn(2, 2, 2), torch.randn(2, 2)), ValueError, r'flatten\(1\)'),
])
def test_bad_types_and_values_name_the_argument(call, error, message):
    with pytest.raises(error, match=message): call()

def test_results_that_do_not_fit_the_dtype_raise_instead_of_returning_inf():
    # Seeded: for about 5 % of draws the closest pair is so close that uniformity at t = 1e6 fits
    # float16 (e.g. −18 416), and then returning it is right.
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    y = -x  # every distance is 2, and 2^alpha overflows float32 at alpha = 200
    with pytest.raises(ValueError, match='alpha = 200'): alignment(x, y, alpha=200.0)
    with pytest.raises(ValueError, match='alpha = 20'): alignment(x.half(), y.half(), alpha=20.0)
    assert torch.isfinite(alignment(x.double(), y.double(), alpha=200.0))
    with pytest.raises(ValueError, match='t = 1e\\+06'): uniformity(x.half(), t=1e6)
    # half precision at an ordinary t is computed in float32 and returned as float16, close to float64
    got = uniformity(x.half(), t=2.0)
    assert got.dtype == torch.float16 and abs(got.item() - uniformity(x.double(), t=2.0).item()) < 0.02

def test_size_one_and_non_contiguous_inputs():
    x = torch.randn(4, 6)
    xt = torch.randn(6, 4).T
    assert not xt.is_contiguous()
    # Cosines lie in [-1, 1]: an absolute tolerance, since one near 0 differs relatively in float32.
    assert torch.allclose(similarity_matrix(xt), similarity_matrix(xt.contiguous()), atol=1e-6)
    assert torch.allclose(cosine_similarity(xt, x), cosine_similarity(xt.contiguous(), x), atol=1e-6)
    assert alignment(x[:1], x[:1]).item() == 0.0
    assert similarity_matrix(x[:1]).shape == (1, 1)
    assert torch.isclose(uniformity(x[:2]), uniformity(x[:2].contiguous()))

def test_overflow_advice_fits_the_inputs_dtype():
    "The advice was always 'or float32 inputs', also for float32 inputs, and where no dtype would hold the result."
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    y = -x  # every distance is 2: 2^200 overflows float32 but fits float64, 2^2000 fits neither
    with pytest.raises(ValueError, match=r'float32 at alpha = 200: use a smaller alpha, or torch.float64 inputs$'):
        alignment(x, y, alpha=200.0)
    with pytest.raises(ValueError, match=r'float16 at alpha = 20: use a smaller alpha, or torch.float32 inputs$'):
        alignment(x.half(), y.half(), alpha=20.0)
    with pytest.raises(ValueError, match=r'alpha = 2000: use a smaller alpha \(it does not fit in float64 either\)'):
        alignment(x, y, alpha=2000.0)
    with pytest.raises(ValueError, match=r'float64 at alpha = 2000: use a smaller alpha$'):
        alignment(x.double(), y.double(), alpha=2000.0)
    with pytest.raises(ValueError, match=r'float32 at t = 1e\+39: use a smaller t, or torch.float64 inputs$'):
        uniformity(x, t=1e39)  # t itself is inf in float32
    with pytest.raises(ValueError, match=r'bfloat16 at t = 1e\+39: use a smaller t, or torch.float64 inputs$'):
        uniformity(x.bfloat16(), t=1e39)
    with pytest.raises(ValueError, match=r'float16 at t = 1e\+06: use a smaller t, or torch.float32 inputs$'):
        uniformity(x.half(), t=1e6)
    antipodes = torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=F64)  # -t * 4 passes float64's range
    with pytest.raises(ValueError, match=r'float64 at t = 1e\+308: use a smaller t$'):
        uniformity(antipodes, t=1e308)
