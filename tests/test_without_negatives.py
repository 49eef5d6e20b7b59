"""Lesson 13's methods in the trainer and on the command line: BYOL resumes bit for bit (its target and momentum
schedule are in the checkpoint), and Barlow Twins and VICReg on 2 gloo processes compute the loss of the global
batch, as one process does on all the rows."""
import pytest
import torch
from torch import nn

from test_cli import TINY, cli, final_weights, train_until_killed
from contrastive_nb.launch import launch
from contrastive_nb.loop import Callback
from contrastive_nb.runs import latest_checkpoint, load_latest_checkpoint
from contrastive_nb.training import TrainConfig, Trainer, resume, train
from contrastive_nb.without_negatives import (BarlowTwins, VICReg, barlow_twins_loss, byol_momentum,
                                              vicreg_loss)

SMALL = dict(n_train=72, n_test=16, augment={'size': 16}, width=4, blocks=2, head_hidden=16, embed_dim=8,
             batch_size=16, epochs=3, knn_every=0, progress=False, threads=1, schedule='cosine')

class StopAtStep(Callback):
    "The run dies as it starts step 7 (after its checkpoint at step 6)."
    def before_step(self, loop):
        if loop.step == 7: raise KeyboardInterrupt("stopped")

@pytest.mark.parametrize('method', ['byol', 'simsiam', 'barlow_twins', 'vicreg'])
def test_a_stopped_run_resumes_to_the_same_weights(tmp_path, method):
    config = TrainConfig(**SMALL, method=method, checkpoint_every=3)  # 4 steps per epoch, 12 in all
    whole = train(config, tmp_path / 'whole')
    with pytest.raises(KeyboardInterrupt): Trainer(config, tmp_path / 'stopped', callbacks=[StopAtStep()]).fit()
    resumed = resume(tmp_path / 'stopped')
    a, b = whole.method.state_dict(), resumed.method.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

def test_byol_keeps_its_target_and_schedule_in_the_checkpoint(tmp_path):
    run = train(TrainConfig(**SMALL, method='byol'), tmp_path)
    _, state = load_latest_checkpoint(tmp_path)
    assert int(state['loop']['method']['steps']) == run.step == 12
    assert any(k.startswith('target_encoder.') for k in state['loop']['method'])
    assert run.method.momentum() == pytest.approx(1.0)  # the schedule ended at its final value
    trained = {id(p) for p in run.optimizer.param_groups[0]['params']}
    assert trained.isdisjoint(id(p) for p in run.method.target_encoder.parameters())

@pytest.mark.slow
def test_byol_trains_from_the_command_line_and_resumes_after_a_sigkill(tmp_path):
    # 200 images: 180 train at a batch of 16 = 11 steps per epoch, 44 in all; a checkpoint every 5 steps
    args = [*TINY, '--n-train', '200', '--batch-size', '16', '--epochs', '4', '--method', 'byol',
            '--options.base-momentum', '0.9', '--checkpoint-every', '5']
    assert cli('train', *args, '--run-dir', 'whole', cwd=tmp_path).returncode == 0
    train_until_killed(args, 'killed', tmp_path)
    out = cli('train', '--resume', 'killed', cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    whole, resumed = final_weights(tmp_path / 'whole'), final_weights(tmp_path / 'killed')
    assert whole.keys() == resumed.keys() and any(k.startswith('target_') for k in whole)
    assert all(torch.equal(whole[k], resumed[k]) for k in whole), "resumed weights differ from the uninterrupted run"
    help_text = cli('train', '--method', 'byol', '--help', cwd=tmp_path).stdout
    assert '--options.base-momentum FLOAT' in help_text and '--options.final-momentum FLOAT' in help_text

# --- the global batch on 2 processes -------------------------------------------------------------------------------

def _embeddings(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(12, 5, generator=g, dtype=torch.float64), torch.randn(12, 5, generator=g, dtype=torch.float64)

def _local_loss_and_gradient() -> dict:
    """In each of 2 processes: the method's loss of this process's 6 rows, and their gradient, averaged as the
    trainer does."""
    import torch.distributed as dist
    rank, world = dist.get_rank(), dist.get_world_size()
    out = {}
    for name, cls in (('barlow_twins', BarlowTwins), ('vicreg', VICReg)):
        method = cls(nn.Identity(), nn.Linear(5, 5))
        rows = slice(rank * 6, (rank + 1) * 6)
        z1, z2 = (z[rows].clone().requires_grad_() for z in _embeddings())
        loss = method.pair_loss(z1, z2, None)
        loss.backward()
        out[name] = (loss.item(), z1.grad / world, z2.grad / world)  # the trainer divides by the world size
    return out

def test_barlow_twins_and_vicreg_use_the_global_batch_on_two_processes():
    results = launch(_local_loss_and_gradient, 2, timeout=120)
    for name, loss_fn in (('barlow_twins', barlow_twins_loss), ('vicreg', vicreg_loss)):
        z1, z2 = (z.clone().requires_grad_() for z in _embeddings())
        loss = loss_fn(z1, z2)
        loss.backward()
        for rank, result in enumerate(results):
            local_loss, g1, g2 = result[name]
            rows = slice(rank * 6, (rank + 1) * 6)
            assert local_loss == pytest.approx(loss.item(), rel=1e-9), name  # every process: the global loss
            assert torch.allclose(g1, z1.grad[rows]) and torch.allclose(g2, z2.grad[rows]), name
        per_process = loss_fn(z1[:6].detach(), z2[:6].detach())
        assert abs(per_process.item() - loss.item()) > 1e-3  # the other semantics would differ

# --- the package's losses against the formulas, written out (the notebook tests its own copies) -------------------

def _rows(n: int = 5, d: int = 3, count: int = 4, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, d, generator=g, dtype=torch.float64) for _ in range(count)]

def _cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor: return (a @ b) / (a.norm() * b.norm())

def test_simsiam_and_byol_losses_are_their_formulas():
    from contrastive_nb.without_negatives import byol_loss, simsiam_loss
    p1, z1, p2, z2 = _rows()
    n = len(p1)
    simsiam = sum(-_cos(p1[i], z2[i]) / 2 - _cos(p2[i], z1[i]) / 2 for i in range(n)) / n
    byol = sum((2 - 2 * _cos(p1[i], z2[i])) + (2 - 2 * _cos(p2[i], z1[i])) for i in range(n)) / n
    assert torch.allclose(simsiam_loss(p1, z1, p2, z2), simsiam)
    assert torch.allclose(byol_loss(p1, z1, p2, z2), byol)

def test_barlow_twins_and_vicreg_are_their_formulas():
    from contrastive_nb.without_negatives import cross_correlation, vicreg_terms
    z1, z2 = _rows(count=2, seed=1)
    n, d = z1.shape
    standard = lambda z: (z - z.mean(0)) / torch.sqrt(((z - z.mean(0)) ** 2).mean(0) + 1e-5)
    c = torch.tensor([[sum(standard(z1)[k, i] * standard(z2)[k, j] for k in range(n)) / n for j in range(d)]
                      for i in range(d)], dtype=torch.float64)
    assert torch.allclose(cross_correlation(z1, z2), c)
    expected = sum((1 - c[i, i]) ** 2 if i == j else 0.3 * c[i, j] ** 2 for i in range(d) for j in range(d))
    assert torch.allclose(barlow_twins_loss(z1, z2, lambda_=0.3), expected)
    def var_cov(z):
        cov = (z - z.mean(0)).T @ (z - z.mean(0)) / (n - 1)
        hinge = sum(max(0.0, 1.2 - float(torch.sqrt(cov[j, j] + 1e-4))) for j in range(d)) / d
        return hinge, sum(float(cov[i, j]) ** 2 for i in range(d) for j in range(d) if i != j) / d
    (v1, c1), (v2, c2) = var_cov(z1), var_cov(z2)
    terms = vicreg_terms(z1, z2, gamma=1.2)
    assert terms['invariance'].item() == pytest.approx(((z1 - z2) ** 2).sum().item() / (n * d))
    assert terms['variance'].item() == pytest.approx(v1 / 2 + v2 / 2) and v1 > 0
    assert terms['covariance'].item() == pytest.approx(c1 + c2)
    weights = dict(invariance=2.0, variance=3.0, covariance=5.0)
    total = 2.0 * terms['invariance'] + 3.0 * terms['variance'] + 5.0 * terms['covariance']
    assert torch.allclose(vicreg_loss(z1, z2, **weights, gamma=1.2), total)

def test_two_rows_are_enough_one_is_not_and_eps_must_be_positive():
    from contrastive_nb.without_negatives import cross_correlation
    z1, z2 = _rows(n=2, count=2)
    assert torch.isfinite(barlow_twins_loss(z1, z2)) and torch.isfinite(vicreg_loss(z1, z2))
    with pytest.raises(ValueError, match='at least 2'): vicreg_loss(z1[:1], z2[:1])
    for loss in (barlow_twins_loss, vicreg_loss, cross_correlation):
        with pytest.raises(ValueError, match='eps'): loss(z1, z2, eps=0.0)

def test_byol_without_a_known_length_keeps_its_base_momentum():
    from contrastive_nb.models import ProjectionHead, SmallCNN
    from contrastive_nb.without_negatives import BYOL, BYOLOptions
    encoder = SmallCNN(width=4, blocks=2)
    byol = BYOL(encoder, ProjectionHead(encoder.feature_dim, 8, 4), BYOLOptions(base_momentum=0.9))
    for _ in range(3): byol.after_step()
    assert byol.momentum() == pytest.approx(0.9) and int(byol.steps) == 3

def test_byol_momentum_is_a_half_cosine_and_simsiam_refuses_a_non_flag():
    from contrastive_nb.without_negatives import simsiam_loss
    assert [byol_momentum(k, 4, base=0.9) for k in (0, 2, 4)] == pytest.approx([0.9, 0.95, 1.0])
    assert byol_momentum(1, 4, base=0.9) == pytest.approx(1 - 0.1 * (1 + 2 ** -0.5) / 2)
    with pytest.raises(TypeError, match='stop_gradient'): simsiam_loss(*_rows(), stop_gradient='yes')

# --- values near the floating-point limits (issue 41) ----------------------------------------------------------------

def _scaled_columns(z: torch.Tensor, scales) -> torch.Tensor:
    return z * torch.tensor(scales, dtype=z.dtype)

@pytest.mark.parametrize('dtype, scales', [(torch.float64, [1e200, 1e300, 1e150, 1e250]),
                                           (torch.float32, [1e30, 1e25, 1e36, 1e20])])
def test_barlow_twins_at_huge_values_is_the_correlation_it_always_was(dtype, scales):
    # Each dimension is standardised, so a factor per column changes nothing but ε's share (here negligible); the
    # variances of 1e200 overflowed float64 and the loss came out as exactly D
    from contrastive_nb.without_negatives import cross_correlation
    z1, z2 = (z.to(dtype) for z in _rows(n=12, d=4, count=2, seed=3))
    big1, big2 = _scaled_columns(z1, scales), _scaled_columns(z2, scales[::-1])
    tiny_eps = 1e-30 if dtype == torch.float32 else 1e-290
    rtol = 1e-4 if dtype == torch.float32 else 1e-10
    assert torch.allclose(cross_correlation(big1, big2), cross_correlation(z1, z2, eps=tiny_eps), rtol=rtol, atol=rtol)
    loss = barlow_twins_loss(big1, big2, check_values=False)
    assert torch.allclose(loss, barlow_twins_loss(z1, z2, eps=tiny_eps), rtol=rtol)
    assert loss < z1.shape[1] - 0.1  # not the D of an overflow
    constant = torch.full((6, 3), 1.5 * 2.0 ** 1000, dtype=torch.float64)  # a constant column at 2^1000: C = 0
    assert barlow_twins_loss(constant, constant) == 3

@pytest.mark.parametrize('dtype, scale', [(torch.float64, 1e200), (torch.float32, 1e30)])
def test_simsiam_and_byol_at_huge_values_are_the_same_cosines(dtype, scale):
    # cosines are scale-free per row; the norms of 1e200 overflowed and every cosine came out as 0
    from contrastive_nb.without_negatives import byol_loss, simsiam_loss
    rows = [x.to(dtype) for x in _rows(seed=4)]
    factors = torch.tensor([[scale], [1.0], [scale ** 0.5], [1e-3], [scale]], dtype=dtype)
    big = [x * factors for x in rows]
    rtol = 1e-5 if dtype == torch.float32 else 1e-12
    for loss in (simsiam_loss, byol_loss):
        assert torch.allclose(loss(*big), loss(*rows), rtol=rtol), loss.__name__
        assert torch.allclose(loss(*big, check_values=False), loss(*rows), rtol=rtol), loss.__name__

def test_vicreg_covariance_with_one_huge_dimension_is_finite_and_right():
    # Dimension 0 at 1e100: its variance squared (1e400) overflows but is on the diagonal, which the term leaves
    # out; sum of all squares minus the diagonal's was inf - inf = NaN
    from contrastive_nb.without_negatives import vicreg_terms
    z1, z2 = _rows(n=10, d=3, count=2, seed=5)
    scales = torch.tensor([1e100, 1.0, 2.0], dtype=torch.float64)
    terms = vicreg_terms(z1 * scales, z2 * scales)
    def off_diagonal(z):
        cov = (z - z.mean(0)).T @ (z - z.mean(0)) / (len(z) - 1) * scales[:, None] * scales[None, :]
        return sum(float(cov[i, j]) ** 2 for i in range(3) for j in range(3) if i != j) / 3
    assert terms['covariance'].item() == pytest.approx(off_diagonal(z1) + off_diagonal(z2), rel=1e-10)
    assert terms['invariance'].item() == pytest.approx((((z1 - z2) * scales) ** 2).mean().item(), rel=1e-10)

def test_vicreg_refuses_embeddings_whose_terms_overflow_and_never_says_nan():
    # VICReg is not scale-free (invariance grows with s², covariance with s⁴): at 1e200 its value is beyond
    # float64, so the checked path says so, naming the arguments; the unchecked one gives inf for the trainer
    from contrastive_nb.without_negatives import vicreg_terms
    z1, z2 = _rows(n=8, d=4, count=2, seed=6)
    for call in (lambda: vicreg_loss(1e200 * z1, 1e200 * z2), lambda: vicreg_terms(1e200 * z1, 1e200 * z2)):
        with pytest.raises(ValueError, match=r'z1 and z2 .*too large.*covariance') as e: call()
        assert 'float64' in str(e.value)
    assert vicreg_loss(1e200 * z1, 1e200 * z2, check_values=False) == float('inf')
    near_max = torch.tensor([[1.7e308, 1.0], [-1.7e308, 1.25], [1.7e308, 2.0]], dtype=torch.float64)
    terms = vicreg_terms(near_max, near_max, check_values=False)  # the mean's sum overflowed: a NaN hinge
    hinge = 1 - (near_max[:, 1].var().item() + 1e-4) ** 0.5  # dimension 1's; dimension 0's std is far above 1
    assert terms['variance'].item() == pytest.approx(hinge / 2, rel=1e-12)
    assert terms['invariance'] == 0 and terms['covariance'] == float('inf')
    with pytest.raises(ValueError, match='weights'): vicreg_loss(z1, z2, invariance=1e308, covariance=1e308)
    constant = torch.full((6, 3), 1.5 * 2.0 ** 1000, dtype=torch.float64)  # no spread: the hinge is 1 - √ε
    assert vicreg_terms(constant, constant)['variance'].item() == pytest.approx(1 - 1e-2, rel=1e-12)

def test_lesson_13_losses_read_no_values_unchecked(monkeypatch):
    "The overflow guards are tensor operations: the trainer's unchecked path still reads nothing."
    from test_host_sync import counting_reads
    from contrastive_nb.without_negatives import byol_loss, cross_correlation, simsiam_loss, vicreg_terms
    p1, z1, p2, z2 = _rows()
    with counting_reads(monkeypatch) as fast:
        simsiam_loss(p1, z1, p2, z2, check_values=False), byol_loss(p1, z1, p2, z2, check_values=False)
        barlow_twins_loss(z1, z2, check_values=False), vicreg_loss(z1, z2, check_values=False)
        vicreg_terms(z1, z2, check_values=False)
    assert sum(fast.values()) == 0, fast
    with counting_reads(monkeypatch) as checked: vicreg_loss(z1, z2)
    assert sum(checked.values()) <= 4, checked  # z1's and z2's finite checks, the terms' and the loss's

# --- as a hostile user (issue 41) -------------------------------------------------------------------------------

def test_lesson_13_losses_refuse_embeddings_of_width_0_and_a_non_flag_check_values():
    # width 0: an IndexError from inside torch (the row scale's amax) or a RuntimeError (VICReg's overflow message)
    from contrastive_nb.without_negatives import byol_loss, cross_correlation, simsiam_loss, vicreg_terms
    z = torch.zeros(4, 0)
    calls = {'simsiam_loss': lambda **k: simsiam_loss(z, z, z, z, **k),
             'byol_loss': lambda **k: byol_loss(z, z, z, z, **k),
             'barlow_twins_loss': lambda **k: barlow_twins_loss(z, z, **k),
             'vicreg_loss': lambda **k: vicreg_loss(z, z, **k),
             'vicreg_terms': lambda **k: vicreg_terms(z, z, **k)}
    for name, call in calls.items():
        with pytest.raises(ValueError, match=r'has 0 columns \(shape \(4, 0\)\)'): call()
        with pytest.raises(TypeError, match='check_values'): call(check_values='no')  # was read as True
    with pytest.raises(ValueError, match='0 columns'): cross_correlation(z, z)

def test_barlow_twins_takes_views_of_two_float_dtypes():
    # float32 and float64 views: torch's "expected m1 and m2 to have the same dtype" from the product
    from contrastive_nb.without_negatives import cross_correlation
    z1, z2 = _rows(count=2, seed=7)
    assert torch.allclose(cross_correlation(z1.float(), z2), cross_correlation(z1.float().double(), z2))
    assert barlow_twins_loss(z1.float(), z2).dtype == torch.float64

def test_a_weight_that_overflows_the_loss_is_named():
    # |C_ij| <= 1 and each hinge <= γ: past the dtype only λ or γ can take them, and the error names that one
    z1, z2 = (z.float() for z in _rows(count=2, seed=8))
    with pytest.raises(ValueError, match=r'lambda_ \(1e\+300\) is too large'): barlow_twins_loss(z1, z2, lambda_=1e300)
    with pytest.raises(ValueError, match=r'gamma \(1e\+300\) is too large'): vicreg_loss(z1, z2, gamma=1e300)
    assert barlow_twins_loss(z1, z2, lambda_=1e300, check_values=False) == float('inf')  # the trainer reads it

def test_byol_after_step_moves_each_target_towards_its_online_network_by_the_momentum():
    "Each step: target <- tau * target + (1 - tau) * online, for the encoder and the head alike."
    from contrastive_nb.models import ProjectionHead, SmallCNN
    from contrastive_nb.without_negatives import BYOL, BYOLOptions
    torch.manual_seed(0)
    encoder = SmallCNN(width=4, blocks=2)
    byol = BYOL(encoder, ProjectionHead(encoder.feature_dim, 8, 4), BYOLOptions(base_momentum=0.75))
    with torch.no_grad():  # the online networks move away from their targets, as an optimiser step does
        for p in [*byol.encoder.parameters(), *byol.head.parameters()]: p.add_(torch.randn_like(p))
    pairs = [(byol.encoder, byol.target_encoder), (byol.head, byol.target_head)]
    before = [[(o.detach().clone(), t.detach().clone()) for o, t in zip(a.parameters(), b.parameters())]
              for a, b in pairs]
    byol.after_step()
    for (online, target), kept in zip(pairs, before):
        for t, (o0, t0) in zip(target.parameters(), kept):
            assert torch.allclose(t, 0.75 * t0 + 0.25 * o0, atol=1e-6)
    assert int(byol.steps) == 1

def test_simsiam_of_float16_rows_is_computed_in_float32():
    "Half-precision inputs (autocast) are widened before their norms: the cosines are float32's, not float16's."
    from contrastive_nb.without_negatives import simsiam_loss
    torch.manual_seed(0)
    p1, z1, p2, z2 = (torch.randn(64, 256).half() for _ in range(4))
    cos = lambda a, b: torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=1).mean()
    reference = -(cos(p1, z2) + cos(p2, z1)) / 2  # of the same float16 values, in float64
    loss = simsiam_loss(p1, z1, p2, z2)
    assert loss.dtype == torch.float32 and abs(loss.double() - reference) < 1e-6

def test_barlow_twins_of_float16_views_is_standardised_in_float32():
    "Half-precision views are widened before their means and variances: C is float32's, not float16's."
    from contrastive_nb.without_negatives import cross_correlation
    torch.manual_seed(0)
    z1, z2 = torch.randn(64, 8).half(), torch.randn(64, 8).half()
    c = cross_correlation(z1, z2)
    assert c.dtype == torch.float32
    assert torch.allclose(c.double(), cross_correlation(z1.double(), z2.double()), atol=1e-5)

def test_rows_and_columns_are_only_ever_shrunk_so_eps_keeps_its_meaning():
    "Rows are scaled by 2^-k only at |values| of 1 and above: one whose norm is just above the cosine's ε = 1e-8"
    "is not pushed below it (its cosine stays 1). Columns carry ε along: C_ii = var / (var + ε) at any scale."
    from contrastive_nb.without_negatives import byol_loss, cross_correlation, simsiam_loss
    torch.manual_seed(0)
    p = torch.randn(8, 4, dtype=torch.float64)
    p = p / p.norm(dim=1, keepdim=True) * 1.5e-8  # norm 1.5 ε: cos(p, p) = 1
    assert simsiam_loss(p, p, p, p).item() == pytest.approx(-1.0, abs=1e-9)
    assert byol_loss(p, p, p, p).item() == pytest.approx(0.0, abs=1e-9)
    z = torch.randn(16, 4, dtype=torch.float64)
    z = (z - z.mean(0)) / z.std(0, unbiased=False) * 0.01  # variance 1e-4, ten times ε = 1e-5
    expected = 1e-4 / (1e-4 + 1e-5)  # C_ii = var / (var + ε), exactly what BatchNorm's ε gives
    assert torch.diagonal(cross_correlation(z, z)).tolist() == pytest.approx([expected] * 4, rel=1e-9)

def test_vicreg_is_the_official_codes_loss_and_gradient_bit_for_bit_where_nothing_overflows():
    "The covariance sums all squares minus the diagonal's (leaving the diagonal out, needed only when a square is"
    "inf, rounds differently), and z's gradients add up in the same order: lesson 13's committed VICReg numbers"
    "came from the official formula, and a last-bit change moves a 184-step run."
    g = torch.Generator().manual_seed(11)
    z1, z2 = (3 * torch.randn(128, 64, generator=g) for _ in range(2))
    def official(z1, z2):
        n, d = z1.shape
        a, b = z1 - z1.mean(0), z2 - z2.mean(0)
        hinge = lambda x: torch.relu(1.0 - torch.sqrt(x.var(0) + 1e-4)).mean()
        off = lambda m: (m.pow(2).sum() - torch.diagonal(m).pow(2).sum()) / d
        return (25 * torch.nn.functional.mse_loss(z1, z2) + 25 * (hinge(a) / 2 + hinge(b) / 2)
                + off(a.T @ a / (n - 1)) + off(b.T @ b / (n - 1)))
    results = []
    for loss in (lambda a, b: vicreg_loss(a, b, check_values=False), official):
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        value = loss(a, b)
        value.backward()
        results.append((value, a.grad, b.grad))
    assert all(torch.equal(x, y) for x, y in zip(*results))  # the same operations, on one machine

class _Rates(Callback):
    "The learning rate of each optimiser group as each step starts."
    def __init__(self): self.rows = []
    def before_step(self, loop): self.rows.append([g['lr'] for g in loop.optimizers[0].param_groups])

@pytest.mark.parametrize('fixed', [True, False])
def test_simsiams_predictor_keeps_its_rate_under_a_cosine_schedule_through_the_loop(fixed):
    "Lesson 13's SimSiam arm on the one loop: warm-up and cosine for the networks, the predictor at lr throughout."
    rates = _Rates()
    config = TrainConfig(**{**SMALL, 'epochs': 3, 'schedule': 'cosine'}, method='simsiam', optimizer='sgd', lr=0.05,
                         options={'fixed_predictor_lr': fixed}, warmup_epochs=1)
    trainer = Trainer(config, callbacks=[rates])
    trainer.fit()
    predictor = {id(p) for p in trainer.method.predictor.parameters()}
    groups = [{id(p) for p in g['params']} for g in trainer.optimizer.param_groups]
    if fixed: assert groups == [groups[0], predictor] and not groups[0] & predictor  # a group of its own
    else: assert len(groups) == 1 and predictor <= groups[0]  # scheduled with the rest
    scheduled = [row[0] for row in rates.rows]
    assert len(rates.rows) == trainer.total_steps == 12
    assert scheduled[0] < scheduled[3] == pytest.approx(0.05) and scheduled[-1] < 0.1 * 0.05  # warm-up, cosine
    if fixed: assert all(row[1] == 0.05 for row in rates.rows)  # the predictor's group: lr at every step
