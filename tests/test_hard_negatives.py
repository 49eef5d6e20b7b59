"""Package tests for contrastive_nb.hard_negatives: brute-force loops, gradients, half precision, ordering rules."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck

from contrastive_nb.hard_negatives import importance_weighted_negatives, importance_weighted_nt_xent
from contrastive_nb.infonce import nt_xent

def rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)

def leaf(*xs): return tuple(x.clone().requires_grad_() for x in xs)

# --- importance weighting ---------------------------------------------------------------------------------------

def hcl_loops(z1, z2, t, beta, detach=False):
    "HCL's reweighting without debiasing, one anchor at a time, straight from the paper's estimator."
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    n = len(z1)
    losses = []
    for i in range(2 * n):
        partner = (i + n) % (2 * n)
        sims = torch.stack([z[i] @ z[k] for k in range(2 * n) if k not in (i, partner)])
        w = torch.exp(beta * (sims.detach() if detach else sims) / t)
        weighted = len(sims) * (w * torch.exp(sims / t)).sum() / w.sum()
        pos = torch.exp(z[i] @ z[partner] / t)
        losses.append(-torch.log(pos / (pos + weighted)))
    return torch.stack(losses)

@pytest.mark.parametrize('beta', [0.0, 0.5, 1.0, 2.0, 6.0])
@pytest.mark.parametrize('temperature', [1.0, 0.5, 0.1])
@pytest.mark.parametrize('detach', [False, True])
def test_importance_weighting_equals_loops(beta, temperature, detach):
    z1, z2 = rand(5, 4, seed=1), rand(5, 4, seed=2)
    got = importance_weighted_nt_xent(z1, z2, temperature, beta, detach, reduction='none')
    assert torch.allclose(got, hcl_loops(z1, z2, temperature, beta), rtol=1e-10, atol=1e-12)

@pytest.mark.parametrize('beta', [0.5, 2.0])
def test_gradient_flows_through_the_weights_unless_detached(beta):
    z1, z2 = rand(4, 3, seed=3), rand(4, 3, seed=4)
    for detach in (False, True):
        a, b = leaf(z1, z2)
        importance_weighted_nt_xent(a, b, 0.5, beta, detach, reduction='sum').backward()
        ra, rb = leaf(z1, z2)
        hcl_loops(ra, rb, 0.5, beta, detach).sum().backward()
        assert torch.allclose(a.grad, ra.grad, atol=1e-10) and torch.allclose(b.grad, rb.grad, atol=1e-10)
        other_a, other_b = leaf(z1, z2)
        hcl_loops(other_a, other_b, 0.5, beta, not detach).sum().backward()
        assert (a.grad - other_a.grad).abs().max() > 1e-4  # the two choices really differ

def test_detaching_changes_nothing_at_beta_zero():
    z1, z2 = rand(4, 3, seed=5), rand(4, 3, seed=6)
    grads = []
    for detach in (False, True):
        a = z1.clone().requires_grad_()
        importance_weighted_nt_xent(a, z2, 0.3, 0.0, detach).backward()
        grads.append(a.grad)
    assert torch.equal(grads[0], grads[1])  # exact: at β = 0 both take the same code path

@pytest.mark.parametrize('beta', [0.0, 1.0, 6.0])
@pytest.mark.parametrize('temperature', [0.5, 0.01])
def test_importance_weighting_gradcheck(beta, temperature):
    # detach_weights=True is not a gradient of the value (that is its point): checked against loops above
    fn = lambda a, b: importance_weighted_nt_xent(a, b, temperature, beta)
    assert gradcheck(fn, leaf(rand(4, 3, seed=7), rand(4, 3, seed=8)))

def test_gradient_reaches_a_tensor_temperature():
    z1, z2 = rand(5, 3, seed=9), rand(5, 3, seed=10)
    assert gradcheck(lambda t: importance_weighted_nt_xent(z1, z2, t, 1.0),
                     leaf(torch.tensor(0.4, dtype=torch.float64)))

@pytest.mark.parametrize('temperature', [1.0, 0.1, 0.01])
def test_beta_zero_is_nt_xent(temperature):
    z1, z2 = rand(7, 5, seed=11), rand(7, 5, seed=12)
    got = importance_weighted_nt_xent(z1, z2, temperature, 0.0, reduction='none')
    assert torch.allclose(got, nt_xent(z1, z2, temperature, reduction='none'), rtol=1e-12, atol=1e-12)

@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
@pytest.mark.parametrize('beta', [0.0, 1.0, 6.0])
def test_half_precision_at_a_cold_temperature(dtype, beta):
    z1, z2 = rand(16, 8, seed=13), rand(16, 8, seed=14)
    ref = importance_weighted_nt_xent(z1, z2, 0.01, beta)
    a, b = leaf(z1.to(dtype), z2.to(dtype))
    got = importance_weighted_nt_xent(a, b, 0.01, beta)
    got.backward()
    assert got.dtype == torch.float32 and torch.isfinite(got)
    assert a.grad.dtype == dtype and torch.isfinite(a.grad).all()
    assert math.isclose(got.item(), ref.item(), rel_tol=0.05)

def test_float32_cold_temperature_has_finite_gradient():
    a, b = leaf(rand(16, 8, seed=15, dtype=torch.float32), rand(16, 8, seed=16, dtype=torch.float32))
    importance_weighted_nt_xent(a, b, 0.005, 2.0).backward()
    assert torch.isfinite(a.grad).all() and torch.isfinite(b.grad).all()

def test_negative_sum_pieces():
    z1, z2 = rand(4, 3, seed=17), rand(4, 3, seed=18)
    pos, log_neg = importance_weighted_negatives(z1, z2, 0.5, 1.0)
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    assert pos.shape == log_neg.shape == (8,)
    assert torch.allclose(pos, (z * z.roll(4, 0)).sum(1) / 0.5)
    # one negative sum by hand: anchor 0's negatives are rows 1, 2, 3, 5, 6, 7
    s = torch.stack([z[0] @ z[k] for k in (1, 2, 3, 5, 6, 7)]) / 0.5
    w = torch.exp(s)
    assert torch.isclose(log_neg[0], torch.log(6 * (w * torch.exp(s)).sum() / w.sum()))

def test_reductions_and_equivariance():
    z1, z2 = rand(6, 4, seed=19), rand(6, 4, seed=20)
    per = importance_weighted_nt_xent(z1, z2, 0.5, 1.0, reduction='none')
    assert torch.isclose(importance_weighted_nt_xent(z1, z2, 0.5, 1.0), per.mean())
    assert torch.isclose(importance_weighted_nt_xent(z1, z2, 0.5, 1.0, reduction='sum'), per.sum())
    order = torch.tensor([3, 0, 5, 1, 4, 2])
    permuted = importance_weighted_nt_xent(z1[order], z2[order], 0.5, 1.0, reduction='none')
    assert torch.allclose(permuted, per[torch.cat([order, order + 6])])
    # swapping the views swaps the two halves
    swapped = importance_weighted_nt_xent(z2, z1, 0.5, 1.0, reduction='none')
    assert torch.allclose(swapped, per.roll(6))

@pytest.mark.parametrize('kwargs, error, match', [
    (dict(beta=-0.5), ValueError, 'beta'),
    (dict(beta=float('nan')), ValueError, 'beta'),
    (dict(beta=True), TypeError, 'beta'),
    (dict(detach_weights=1), TypeError, 'detach_weights'),
    (dict(temperature=0.0), ValueError, 'temperature'),
    (dict(reduction='avg'), ValueError, 'reduction'),
])
def test_importance_weighting_rejects_bad_options(kwargs, error, match):
    with pytest.raises(error, match=match):
        importance_weighted_nt_xent(rand(4, 3), rand(4, 3, seed=1), **kwargs)

def test_importance_weighting_rejects_bad_batches():
    with pytest.raises(ValueError, match='at least 2'):
        importance_weighted_nt_xent(rand(1, 3), rand(1, 3, seed=1))
    with pytest.raises(ValueError, match='same shape'):
        importance_weighted_nt_xent(rand(4, 3), rand(5, 3, seed=1))
    with pytest.raises(ValueError, match='z2'):
        importance_weighted_nt_xent(rand(4, 3), torch.zeros(4, 3, dtype=torch.float64))

# --- selection ------------------------------------------------------------------------------------------------------

from contrastive_nb.hard_negatives import (CrossBatchMemory, CrossBatchMemoryOptions, MoCHi,
                                           hard_negative_loss, hardness_schedule, in_batch_hard_negative_loss,
                                           in_batch_negatives, mix_hard_negatives, random_negatives,
                                           semi_hard_negatives, top_k_negatives)
from contrastive_nb.infonce import info_nce
from contrastive_nb.methods import Batch
from contrastive_nb.models import ProjectionHead, SmallCNN
from contrastive_nb.moco import MoCo
from contrastive_nb.pairs import instance_ids, pair_masks

def masked_case(n=6, m=9, seed=0):
    sims = rand(n, m, seed=seed).tanh()
    mask = torch.rand(n, m, generator=torch.Generator().manual_seed(seed + 1)) < 0.7
    mask[:, :3] = True  # every row has at least 3 negatives
    return sims, mask

def test_top_k_equals_a_sort_per_row():
    sims, mask = masked_case()
    got = top_k_negatives(sims, mask, 3)
    for i in range(len(sims)):
        negatives = [j for j in range(sims.shape[1]) if mask[i, j]]
        expected = sorted(negatives, key=lambda j: -sims[i, j].item())[:3]
        assert got[i].tolist() == expected

def test_semi_hard_equals_a_loop_and_its_sign_convention():
    sims, mask = masked_case(seed=2)
    pos = rand(6, seed=3).tanh()
    got = semi_hard_negatives(sims, pos, mask, 0.4)
    for i in range(6):
        for j in range(9):
            expected = bool(mask[i, j]) and pos[i] - 0.4 < sims[i, j] < pos[i]
            assert bool(got[i, j]) == expected
    # strictly below the positive: a negative exactly as similar as the positive is not semi-hard
    s = torch.tensor([[0.5, 0.5, 0.45, 0.3]])
    assert semi_hard_negatives(s, torch.tensor([0.5]), torch.tensor([[False, True, True, True]]), 0.1)[0].tolist() \
        == [False, False, True, False]
    # a negative above the positive is hard, never semi-hard, however large the margin
    assert not semi_hard_negatives(torch.tensor([[0.9]]), torch.tensor([0.5]), torch.tensor([[True]]), 5.0).any()

@pytest.mark.parametrize('margin', [0.0, -0.2])
def test_semi_hard_refuses_a_margin_of_the_wrong_sign(margin):
    sims, mask = masked_case()
    with pytest.raises(ValueError, match='margin must be positive'):
        semi_hard_negatives(sims, sims[:, 0], mask, margin)

def test_random_negatives_are_uniform_and_reproducible():
    mask = torch.tensor([[True, False, True, True, False, True]] * 2000)
    draw = random_negatives(mask, 2, torch.Generator().manual_seed(0))
    assert torch.equal(draw, random_negatives(mask, 2, torch.Generator().manual_seed(0)))
    assert mask.gather(1, draw).all() and (draw[:, 0] != draw[:, 1]).all()
    counts = torch.bincount(draw.flatten(), minlength=6).double() / draw.numel()
    assert torch.allclose(counts[[0, 2, 3, 5]], torch.full((4,), 0.25, dtype=torch.float64), atol=0.02)

@pytest.mark.parametrize('k', [0, 4])
def test_counts_beyond_the_negatives_are_refused(k):
    mask = torch.tensor([[True, True, True, False], [True, False, True, True]])
    sims = rand(2, 4)
    with pytest.raises(ValueError, match='k'):
        top_k_negatives(sims, mask, k)
    with pytest.raises(ValueError, match='k'):
        random_negatives(mask, k)

def test_a_count_equal_to_the_fewest_negatives_is_allowed():
    # k may reach the fewest negatives of any anchor (bound inclusive): then a row takes all of them
    mask = torch.tensor([[True, True, True, False], [True, False, True, True]])
    top = top_k_negatives(rand(2, 4), mask, 3)
    drawn = random_negatives(mask, 3, torch.Generator().manual_seed(0))
    for got in (top, drawn):
        assert got.shape == (2, 3) and mask.gather(1, got).all()

def test_selection_rejects_bad_masks():
    sims = rand(3, 4)
    with pytest.raises(TypeError, match='negative_mask'):
        top_k_negatives(sims, torch.ones(3, 4), 1)
    with pytest.raises(ValueError, match='negative_mask'):
        top_k_negatives(sims, torch.ones(3, 5, dtype=torch.bool), 1)
    with pytest.raises(ValueError, match='similarities'):
        top_k_negatives(torch.full((3, 4), float('nan')), torch.ones(3, 4, dtype=torch.bool), 1)

# --- the hard-negative loss -----------------------------------------------------------------------------------------

def hard_loss_loops(q, p, n, t, w, h):
    q, p = F.normalize(q, dim=-1), F.normalize(p, dim=-1)
    losses = []
    for i in range(len(q)):
        negs = F.normalize(n if n.ndim == 2 else n[i], dim=-1)
        sims = negs @ q[i]
        hard = negs[sims.argsort(descending=True)[:h]]
        def one(candidates):
            logits = torch.cat([(q[i] @ p[i])[None], candidates @ q[i]]) / t
            return torch.logsumexp(logits, 0) - logits[0]
        losses.append((1 - w) * one(negs) + w * one(hard))
    return torch.stack(losses)

@pytest.mark.parametrize('shape', [(7, 4), (5, 7, 4)])
@pytest.mark.parametrize('w, h', [(0.0, None), (0.5, None), (0.3, 2), (1.0, 1), (1.0, 7)])
@pytest.mark.parametrize('temperature', [0.5, 0.07])
def test_hard_negative_loss_equals_loops(shape, w, h, temperature):
    q, p, n = rand(5, 4, seed=21), rand(5, 4, seed=22), rand(*shape, seed=23)
    got = hard_negative_loss(q, p, n, temperature, w, h, reduction='none')
    assert torch.allclose(got, hard_loss_loops(q, p, n, temperature, w, h or max(1, 7 // 4)), rtol=1e-10)

def test_default_num_hard_is_never_zero():
    q, p, n = rand(3, 4, seed=24), rand(3, 4, seed=25), rand(3, 4, seed=26)  # K = 3: K // 4 = 0
    loss = hard_negative_loss(q, p, n, 0.1, 1.0, reduction='none')
    assert torch.allclose(loss, hard_loss_loops(q, p, n, 0.1, 1.0, 1)) and (loss > 0).all()

@pytest.mark.parametrize('shape', [(6, 3), (4, 6, 3)])
def test_hard_negative_loss_gradcheck(shape):
    fn = lambda q, p, n: hard_negative_loss(q, p, n, 0.2, 0.5, 2)
    assert gradcheck(fn, leaf(rand(4, 3, seed=27), rand(4, 3, seed=28), rand(*shape, seed=29)))

@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_hard_negative_loss_half_precision_cold(dtype):
    q, p, n = rand(8, 16, seed=30), rand(8, 16, seed=31), rand(8, 20, 16, seed=32)
    ref = hard_negative_loss(q, p, n, 0.01, 0.5, 3)
    a = q.to(dtype).requires_grad_()
    got = hard_negative_loss(a, p.to(dtype), n.to(dtype), 0.01, 0.5, 3)
    got.backward()
    assert torch.isfinite(got) and torch.isfinite(a.grad).all()
    assert math.isclose(got.item(), ref.item(), rel_tol=0.05)

@pytest.mark.parametrize('kwargs, error, match', [
    (dict(num_hard=0), ValueError, 'num_hard'), (dict(num_hard=8), ValueError, 'num_hard'),
    (dict(num_hard=2.0), TypeError, 'num_hard'), (dict(hard_weight=1.5), ValueError, 'hard_weight'),
    (dict(hard_weight=-0.1), ValueError, 'hard_weight'), (dict(negatives=None), TypeError, 'negatives'),
    (dict(negatives=torch.zeros(0, 4, dtype=torch.float64)), ValueError, 'negatives'),
    (dict(negatives=rand(5, 0, 4)), ValueError, 'negatives'), (dict(negatives=rand(3, 7, 4)), ValueError, 'queries'),
    (dict(negatives=rand(7, 5)), ValueError, 'features'), (dict(positive=rand(4, 4)), ValueError, 'shape'),
])
def test_hard_negative_loss_rejects_bad_input(kwargs, error, match):
    args = dict(query=rand(5, 4), positive=rand(5, 4, seed=1), negatives=rand(7, 4, seed=2))
    with pytest.raises(error, match=match):
        hard_negative_loss(**{**args, **kwargs})

def test_in_batch_negatives_layout():
    z1, z2 = rand(3, 2, seed=33), rand(3, 2, seed=34)
    q, p, n = in_batch_negatives(z1, z2)
    z = torch.cat([z1, z2])
    assert torch.equal(q, z) and torch.equal(p, z.roll(3, 0)) and n.shape == (6, 4, 2)
    for i in range(6):
        assert torch.equal(n[i], z[[j for j in range(6) if j not in (i, (i + 3) % 6)]])
    assert torch.allclose(info_nce(q, p, n, 0.3, reduction='none'), nt_xent(z1, z2, 0.3, reduction='none'))

# --- MoCHi ----------------------------------------------------------------------------------------------------------

def test_mixes_are_convex_combinations_of_the_hardest_keys():
    g = torch.Generator().manual_seed(0)
    q = rand(3, 6, seed=35, dtype=torch.float32)
    keys = F.normalize(rand(30, 6, seed=36, dtype=torch.float32), dim=1)
    mixes = mix_hard_negatives(q, keys, 4, 5, 0, generator=g)
    hard = keys[(F.normalize(q, dim=1) @ keys.T).topk(4, 1).indices]  # (3, 4, 6)
    for i in range(3):
        # each mix is a non-negative combination of the 4 hardest keys (least squares, non-negative weights)
        sol = torch.linalg.lstsq(hard[i].T.double(), mixes[i].T.double()).solution
        assert torch.allclose(hard[i].T.double() @ sol, mixes[i].T.double(), atol=1e-5)
        assert (sol > -1e-5).all()

def test_query_share_stays_below_the_bound():
    q = F.normalize(rand(2, 5, seed=37, dtype=torch.float32), dim=1)
    key = F.normalize(rand(1, 5, seed=38, dtype=torch.float32), dim=1)
    for bound in (0.5, 0.2):
        mixes = mix_hard_negatives(q, key, 1, 0, 200, bound, torch.Generator().manual_seed(1))
        # mix ∝ β q + (1 − β) key: solve for β per mix
        a = torch.stack([q[:, None].expand(-1, 200, -1), key.expand(2, 200, -1)], -1).double()
        coef = torch.linalg.lstsq(a, mixes.double()[..., None]).solution[..., 0]
        share = coef[..., 0] / coef.sum(-1)
        assert (share > 0).all() and (share < bound + 1e-6).all() and share.max() > 0.8 * bound

def test_mixes_are_detached_and_reproducible():
    q = rand(3, 6, seed=39, dtype=torch.float32).requires_grad_()
    keys = rand(10, 6, seed=40, dtype=torch.float32)
    a = mix_hard_negatives(q, keys, 3, 4, 2, generator=torch.Generator().manual_seed(2))
    b = mix_hard_negatives(q, keys, 3, 4, 2, generator=torch.Generator().manual_seed(2))
    assert not a.requires_grad and torch.equal(a, b) and a.shape == (3, 6, 6)

def tiny_model(cls, **kwargs):
    torch.manual_seed(0)
    encoder = SmallCNN(width=4, blocks=2, norm='group')
    options = cls.Options(queue_size=10, momentum=0.9, temperature=0.1, **kwargs)
    return cls(encoder, ProjectionHead(encoder.feature_dim, 8, 4), options)

def test_mochi_enqueues_only_real_keys_and_reads_first():
    x1, x2 = torch.rand(4, 3, 8, 8, generator=torch.Generator().manual_seed(3)), torch.rand(4, 3, 8, 8)
    mochi, moco = tiny_model(MoCHi, num_hard=3, n_mixes=5, n_query_mixes=2), tiny_model(MoCo)
    before = mochi.queue.negatives()
    mochi(x1, x2, torch.Generator().manual_seed(0))
    moco(x1, x2)
    assert torch.allclose(mochi.queue.negatives(), moco.queue.negatives(), atol=1e-6)
    assert int(mochi.queue.seen) == 4
    # the loss used the queue as it was before the step: recompute by hand
    replay = tiny_model(MoCHi, num_hard=3, n_mixes=5, n_query_mixes=2)
    q = replay.head_q(replay.encoder_q(x1))
    from contrastive_nb.moco import momentum_update
    momentum_update(replay.encoder_q, replay.encoder_k, 0.9)
    momentum_update(replay.head_q, replay.head_k, 0.9)
    k = replay.head_k(replay.encoder_k(x2)).detach()
    synthetic = mix_hard_negatives(q, before, 3, 5, 2, 0.5, torch.Generator().manual_seed(0))
    loss = info_nce(q, k, torch.cat([before.expand(4, -1, -1), synthetic], 1), 0.1)
    fresh = tiny_model(MoCHi, num_hard=3, n_mixes=5, n_query_mixes=2)
    assert torch.isclose(fresh(x1, x2, torch.Generator().manual_seed(0)), loss, atol=1e-6)

def test_mochi_eval_mode_changes_nothing():
    x1, x2 = torch.rand(4, 3, 8, 8), torch.rand(4, 3, 8, 8)
    mochi = tiny_model(MoCHi, num_hard=3, n_mixes=0, n_query_mixes=6).eval()
    state = {k: v.clone() for k, v in mochi.state_dict().items()}
    mochi(x1, x2, torch.Generator().manual_seed(0))
    assert all(torch.equal(state[k], v) for k, v in mochi.state_dict().items())

def test_mochi_rejects_bad_settings():
    with pytest.raises(ValueError, match='num_hard'):
        tiny_model(MoCHi, num_hard=11)
    with pytest.raises(ValueError, match='query_max'):
        tiny_model(MoCHi, num_hard=3, query_max=0.6)
    with pytest.raises(ValueError, match='n_mixes'):
        tiny_model(MoCHi, num_hard=3, n_mixes=-1)

def test_mochi_takes_no_query_mixes():
    # n_query_mixes = 0 is a valid setting (only key-key mixes), as it is for mix_hard_negatives
    mochi = tiny_model(MoCHi, num_hard=3, n_mixes=4, n_query_mixes=0)
    assert mochi.n_query_mixes == 0
    assert torch.isfinite(mochi(torch.rand(4, 3, 8, 8), torch.rand(4, 3, 8, 8)))

# --- cross-batch memory ---------------------------------------------------------------------------------------------

def tiny_xbm(**kwargs):
    torch.manual_seed(0)
    encoder = SmallCNN(width=4, blocks=2, norm='group')
    options = CrossBatchMemoryOptions(**{'temperature': 0.5, **kwargs})
    return CrossBatchMemory(encoder, ProjectionHead(encoder.feature_dim, 8, 4), options)

def xbm_loss(xbm, x1, x2):
    "The loss of one step of two views."
    return xbm.loss(Batch([x1, x2], torch.arange(len(x1)), torch.zeros(len(x1), dtype=torch.long), None))

def test_xbm_reads_then_enqueues():
    x1, x2 = torch.rand(3, 3, 8, 8, generator=torch.Generator().manual_seed(4)), torch.rand(3, 3, 8, 8)
    xbm = tiny_xbm(memory_size=8, weight=0.0)
    before = xbm.memory.negatives()
    loss = xbm_loss(xbm, x1, x2)
    with torch.no_grad():
        z1, z2 = xbm.head(xbm.encoder(x1)), xbm.head(xbm.encoder(x2))
    q, p, n = in_batch_negatives(z1, z2)
    expected = info_nce(q, p, torch.cat([n, before.expand(6, -1, -1)], 1), 0.5)
    assert torch.isclose(loss, expected, atol=1e-6)
    assert torch.allclose(xbm.memory.negatives()[-6:], F.normalize(torch.cat([z1, z2]), dim=1), atol=1e-6)
    # the second step sees the first batch in its memory
    loss2 = xbm_loss(xbm, x1, x2)
    q, p, n = in_batch_negatives(z1, z2)
    memory = torch.cat([before, F.normalize(torch.cat([z1, z2]), dim=1)])[-8:]  # oldest first
    expected2 = info_nce(q, p, torch.cat([n, memory.expand(6, -1, -1)], 1), 0.5)
    assert torch.isclose(loss2, expected2, atol=1e-5)

def test_xbm_eval_mode_does_not_enqueue():
    xbm = tiny_xbm(memory_size=8).eval()
    before = xbm.memory.negatives()
    xbm_loss(xbm, torch.rand(3, 3, 8, 8), torch.rand(3, 3, 8, 8))
    assert torch.equal(before, xbm.memory.negatives()) and int(xbm.memory.seen) == 0

def test_xbm_rejects_bad_settings():
    with pytest.raises(ValueError, match='memory_size'):
        tiny_xbm(memory_size=0)
    with pytest.raises(ValueError, match='num_hard'):
        xbm_loss(tiny_xbm(memory_size=4, num_hard=50), torch.rand(3, 3, 8, 8), torch.rand(3, 3, 8, 8))

def test_xbm_num_hard_may_take_every_negative():
    # 3 sources: 2·3 − 2 in-batch negatives and 4 in memory; num_hard = all 8 is allowed
    x1, x2 = torch.rand(3, 3, 8, 8), torch.rand(3, 3, 8, 8)
    assert torch.isfinite(xbm_loss(tiny_xbm(memory_size=4, num_hard=8), x1, x2))

# --- curriculum -----------------------------------------------------------------------------------------------------

def test_hardness_schedule():
    assert [hardness_schedule(s, 4, 1.0, 3.0) for s in range(6)] == [1.0, 1.5, 2.0, 2.5, 3.0, 3.0]
    assert [hardness_schedule(s, 4, 2.0, 0.0, warmup_steps=2) for s in range(5)] == [2.0, 2.0, 2.0, 1.0, 0.0]
    assert hardness_schedule(3, 3, 0.0, 1.0, warmup_steps=3) == 0.0  # step <= warm-up: `start` returned as is
    with pytest.raises(ValueError, match='warmup_steps'):
        hardness_schedule(0, 3, 0.0, 1.0, warmup_steps=4)
    with pytest.raises(ValueError, match='step'):
        hardness_schedule(-1, 3, 0.0, 1.0)

def test_the_last_warm_up_step_returns_start_itself():
    # step == warmup_steps returns `start`, not start + (end − start)·0, which overflows to NaN here
    assert hardness_schedule(3, 6, -1e308, 1e308, warmup_steps=3) == -1e308


@pytest.mark.parametrize('hard_weight, num_hard', [(0.0, None), (0.5, None), (1.0, 1), (0.25, 14)])
def test_in_batch_hard_negative_loss_is_the_per_query_loss(hard_weight, num_hard):
    "The (2N, 2N) shortcut against hard_negative_loss on in_batch_negatives: values and gradients, float64."
    g = torch.Generator().manual_seed(11)
    z = [torch.randn(8, 5, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    y = [x.detach().clone().requires_grad_() for x in z]
    want = hard_negative_loss(*in_batch_negatives(*z), 0.3, hard_weight, num_hard, reduction='none')
    got = in_batch_hard_negative_loss(*y, 0.3, hard_weight, num_hard, reduction='none')
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    (want * torch.arange(16.0, dtype=torch.float64)).sum().backward()  # weights: every row's gradient counts
    (got * torch.arange(16.0, dtype=torch.float64)).sum().backward()
    for a, b in zip(y, z): torch.testing.assert_close(a.grad, b.grad, rtol=1e-10, atol=1e-12)

def test_in_batch_hard_negative_loss_refuses_too_many_hard_negatives():
    z = torch.randn(3, 4)
    with pytest.raises(ValueError, match=r'num_hard = 5 but each query has only 4 negatives'):
        in_batch_hard_negative_loss(z, z.flip(0), num_hard=5)
    assert torch.isfinite(in_batch_hard_negative_loss(z.half(), z.flip(0).half(), 0.01))
