"""Package tests for contrastive_nb.debiased: debiased and HCL losses, the clamp, decoupled, false-negative
elimination and attraction, supervised contrastive (both variants, both conventions for anchors without a
positive). The notebook checks the cores, the β = 0 / τ⁺ = 0 identities and gradcheck at one setting; here: loops
over anchors, the authors' code transcribed, many settings, the clamp's gradient, half precision, bad input."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st
from torch.autograd import gradcheck

from contrastive_nb.debiased import (clamped_anchors, debiased_nt_xent, decoupled_nt_xent,
                                     detect_false_negatives, false_negative_loss, hcl_loss,
                                     supcon_loss)
from contrastive_nb.infonce import nt_xent

def rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)

def pair(n=6, d=5, seed=0, noise=None, dtype=torch.float64):
    "Two views; with `noise`, the second is the first plus noise (aligned partners: some anchors clamp)."
    z1 = rand(n, d, seed=seed, dtype=dtype)
    z2 = rand(n, d, seed=seed + 100, dtype=dtype) if noise is None else z1 + noise * rand(n, d, seed=seed + 1,
                                                                                           dtype=dtype)
    return z1, z2

# --- loops over anchors, with plain exponentials in float64 ------------------------------------------------------

def views(z1, z2):
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    n = len(z1)
    return z, [(i + n) % (2 * n) for i in range(2 * n)]

def anchor_terms(z1, z2, t, tau_plus, beta):
    "Per anchor: e^{s+/t}, the unclamped debiased negative term (HCL's reweighting) and its floor."
    z, partner = views(z1, z2)
    for i in range(len(z)):
        negatives = [j for j in range(len(z)) if j not in (i, partner[i])]
        e_pos = math.exp(float(z[i] @ z[partner[i]]) / t)
        e_neg = [math.exp(float(z[i] @ z[j]) / t) for j in negatives]
        imp = [e ** beta for e in e_neg]
        n = len(negatives)
        reweighted = sum(w * e for w, e in zip(imp, e_neg)) / (sum(imp) / n)
        yield e_pos, (reweighted - tau_plus * n * e_pos) / (1 - tau_plus), n * math.exp(-1 / t)

def debiased_loop(z1, z2, t, tau_plus, beta=0.0):
    "The authors' per-anchor formula (Chuang et al. eq. 6; HCL's reweighting), one anchor at a time."
    return torch.tensor([-math.log(e_pos / (e_pos + max(ng, floor)))
                         for e_pos, ng, floor in anchor_terms(z1, z2, t, tau_plus, beta)],
                        dtype=torch.float64)

def clamped_loop(z1, z2, t, tau_plus, beta=0.0):
    "Which anchors the floor N e^{-1/t} replaces."
    return torch.tensor([ng <= floor for _, ng, floor in anchor_terms(z1, z2, t, tau_plus, beta)])

def decoupled_loop(z1, z2, t):
    z, partner = views(z1, z2)
    out = []
    for i in range(len(z)):
        neg = sum(math.exp(float(z[i] @ z[j]) / t) for j in range(len(z)) if j not in (i, partner[i]))
        out.append(math.log(neg) - float(z[i] @ z[partner[i]]) / t)
    return torch.tensor(out, dtype=torch.float64)

def supcon_loop(features, labels, t, variant):
    "Khosla et al.'s equations (2) and (3), anchor by anchor; None for an anchor without a positive."
    z = F.normalize(features, dim=1)
    out = []
    for i in range(len(z)):
        others = [a for a in range(len(z)) if a != i]
        positives = [p for p in others if labels[p] == labels[i]]
        if not positives:
            out.append(None)
            continue
        denominator = sum(math.exp(float(z[i] @ z[a]) / t) for a in others)
        probs = [math.exp(float(z[i] @ z[p]) / t) / denominator for p in positives]
        if variant == 'out': out.append(-sum(math.log(q) for q in probs) / len(probs))
        else: out.append(-math.log(sum(probs) / len(probs)))
    return out

def fn_loop(z1, z2, flags, t, mode):
    z, partner = views(z1, z2)
    n = len(z1)
    out = []
    for i in range(len(z)):
        flagged = {j for j in range(2 * n) if j != i and j != partner[i] and flags[i % n, j % n]}
        if mode == 'eliminate':
            keep = [j for j in range(2 * n) if j != i and j not in flagged]
            denominator = sum(math.exp(float(z[i] @ z[j]) / t) for j in keep)
            out.append(-math.log(math.exp(float(z[i] @ z[partner[i]]) / t) / denominator))
        else:
            denominator = sum(math.exp(float(z[i] @ z[j]) / t) for j in range(2 * n) if j != i)
            positives = [partner[i], *sorted(flagged)]
            out.append(-sum(float(z[i] @ z[p]) / t - math.log(denominator) for p in positives) / len(positives))
    return torch.tensor(out, dtype=torch.float64)

SETTINGS = [(t, tp, noise) for t in (0.2, 0.5, 1.0) for tp in (0.0, 0.1, 0.4) for noise in (None, 0.2)]

@pytest.mark.parametrize('t,tau_plus,noise', SETTINGS)
def test_debiased_matches_the_per_anchor_formula(t, tau_plus, noise):
    z1, z2 = pair(noise=noise)
    got = debiased_nt_xent(z1, z2, t, tau_plus, reduction='none')
    assert torch.allclose(got, debiased_loop(z1, z2, t, tau_plus), rtol=1e-10, atol=1e-12)
    assert torch.equal(clamped_anchors(z1, z2, t, tau_plus), clamped_loop(z1, z2, t, tau_plus))

@pytest.mark.parametrize('beta', [0.0, 0.3, 1.0, 3.0])
@pytest.mark.parametrize('t,tau_plus,noise', [(0.5, 0.1, None), (0.2, 0.2, 0.2), (1.0, 0.05, 0.5)])
def test_hcl_matches_the_authors_formula(beta, t, tau_plus, noise):
    z1, z2 = pair(n=5, noise=noise, seed=3)
    got = hcl_loss(z1, z2, t, tau_plus, beta, reduction='none')
    assert torch.allclose(got, debiased_loop(z1, z2, t, tau_plus, beta), rtol=1e-10, atol=1e-12)
    assert torch.equal(clamped_anchors(z1, z2, t, tau_plus, beta), clamped_loop(z1, z2, t, tau_plus, beta))

def test_reductions_and_the_order_of_anchors():
    z1, z2 = pair(noise=0.3)
    for fn in (lambda **k: debiased_nt_xent(z1, z2, 0.5, 0.1, **k), lambda **k: hcl_loss(z1, z2, 0.5, 0.1, 1.0, **k),
               lambda **k: decoupled_nt_xent(z1, z2, 0.5, **k)):
        per = fn(reduction='none')
        assert per.shape == (12,)
        assert torch.isclose(fn(), per.mean()) and torch.isclose(fn(reduction='sum'), per.sum())
    swapped = debiased_nt_xent(z2, z1, 0.5, 0.1, reduction='none')  # z2's rows first now
    assert torch.allclose(swapped, debiased_nt_xent(z1, z2, 0.5, 0.1, reduction='none').roll(6))

def test_tau_plus_lowers_the_loss_where_the_positive_beats_the_average_negative():
    # d/dτ⁺ (S − τ⁺ N e⁺) / (1 − τ⁺) = (S − N e⁺) / (1 − τ⁺)²: negative where e⁺ exceeds the mean of e^{s/τ}
    z1, z2 = pair(seed=4, noise=0.5)
    values = [debiased_nt_xent(z1, z2, 1.0, tp, reduction='none') for tp in (0.0, 0.05, 0.1, 0.2)]
    assert not clamped_anchors(z1, z2, 1.0, 0.2).any()
    assert all((a > b).all() for a, b in zip(values, values[1:]))

@pytest.mark.parametrize('t', [0.3, 0.5, 1.0])
def test_decoupled_matches_a_loop_and_differs_from_nt_xent_by_log_one_minus_p(t):
    z1, z2 = pair(seed=5, noise=0.4)
    dec = decoupled_nt_xent(z1, z2, t, reduction='none')
    assert torch.allclose(dec, decoupled_loop(z1, z2, t), rtol=1e-10)
    nt = nt_xent(z1, z2, t, reduction='none')
    p_plus = torch.exp(-nt)  # NT-Xent = −log p⁺
    assert torch.allclose(nt - dec, -torch.log1p(-p_plus), rtol=1e-9)
    assert (dec < nt).all()

# --- the clamp ------------------------------------------------------------------------------------------------

def test_a_clamped_anchor_sends_no_gradient_to_its_negatives_and_has_the_closed_form_loss():
    z1, z2 = pair(n=6, noise=0.05, seed=6)  # very close partners: at τ = 0.1 every anchor clamps
    t, tau_plus = 0.1, 0.1
    flags = clamped_anchors(z1, z2, t, tau_plus)
    assert flags.all()
    a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
    loss = debiased_nt_xent(a, b, t, tau_plus, reduction='none')[0]  # anchor z1[0]; partner z2[0]
    loss.backward()
    assert torch.count_nonzero(a.grad[1:]) == 0 and torch.count_nonzero(b.grad[1:]) == 0
    assert b.grad[0].abs().sum() > 0 or loss.item() < 1e-30  # the positive is still pulled (if not underflowed)
    s_pos = F.cosine_similarity(z1[0], z2[0], dim=0).item()
    assert math.isclose(loss.item(), math.log1p(10 * math.exp(-(1 + s_pos) / t)), rel_tol=1e-9)

def test_an_unclamped_anchor_pushes_its_negatives():
    z1, z2 = pair(n=6, seed=7)
    assert not clamped_anchors(z1, z2, 0.5, 0.1).any()
    a = z1.clone().requires_grad_()
    debiased_nt_xent(a, z2, 0.5, 0.1, reduction='none')[0].backward()
    assert (a.grad[1:].abs().sum(1) > 0).all()

def test_the_clamp_is_what_keeps_the_loss_finite_for_a_prior_too_high():
    z1, z2 = pair(n=4, noise=0.01, seed=8)
    loss = debiased_nt_xent(z1, z2, 0.5, 0.9)  # the estimate is negative for every anchor
    assert torch.isfinite(loss) and clamped_anchors(z1, z2, 0.5, 0.9).all()

def test_an_estimate_exactly_at_its_floor_counts_as_clamped():
    # every negative at cosine −1; τ = 2⁻⁶⁰ makes log(2) vanish in float64: log Σ = −1/τ = the floor
    z = torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=torch.float64)
    assert clamped_anchors(z, z, 2.0 ** -60, tau_plus=0.0).all()

def test_an_estimate_of_exactly_zero_keeps_the_gradient_finite():
    # identical views and τ⁺·N = 1 make r = 0 exactly (τ = 2⁻⁶⁰ absorbs log 2): clamped, no NaN
    z = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64, requires_grad=True)
    debiased_nt_xent(z, z.detach(), 2.0 ** -60, tau_plus=0.5).backward()
    assert torch.isfinite(z.grad).all()

def test_more_anchors_clamp_at_colder_temperatures():
    z1, z2 = pair(n=32, d=16, noise=0.6, seed=9, dtype=torch.float32)
    shares = [clamped_anchors(z1, z2, t, 0.1).float().mean().item() for t in (1.0, 0.5, 0.2, 0.1, 0.05)]
    assert shares == sorted(shares) and shares[0] < shares[-1]

# --- gradients ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('fn', [
    lambda a, b, t: debiased_nt_xent(a, b, t, 0.1),
    lambda a, b, t: hcl_loss(a, b, t, 0.1, 1.0),
    lambda a, b, t: decoupled_nt_xent(a, b, t),
    lambda a, b, t: false_negative_loss(a, b, torch.eye(5, dtype=torch.bool).roll(1, 1), t, 'attract'),
    lambda a, b, t: supcon_loss(torch.cat([a, b]), torch.tensor([0, 1, 0, 2, 1] * 2), t, 'in'),
], ids=['debiased', 'hcl', 'decoupled', 'attract', 'supcon-in'])
def test_gradcheck_with_a_learnable_temperature_and_some_clamped_anchors(fn):
    z1, z2 = pair(n=5, noise=0.15, seed=10)
    t = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
    assert gradcheck(fn, (a, b, t))

def test_half_precision_gradients_stay_finite_at_a_cold_temperature():
    z1, z2 = pair(n=64, d=32, noise=0.5, seed=11, dtype=torch.float32)
    labels = torch.arange(64).repeat(2) % 7
    for dtype in (torch.float16, torch.bfloat16):
        a, b = z1.to(dtype).requires_grad_(), z2.to(dtype).requires_grad_()
        total = (debiased_nt_xent(a, b, 0.01) + hcl_loss(a, b, 0.01) + decoupled_nt_xent(a, b, 0.01)
                 + supcon_loss(torch.cat([a, b]), labels, 0.01)
                 + false_negative_loss(a, b, detect_false_negatives(a, b, 2), 0.01, 'attract'))
        total.backward()
        assert total.dtype == torch.float32 and torch.isfinite(total)
        assert torch.isfinite(a.grad).all() and torch.isfinite(b.grad).all()

@pytest.mark.parametrize('fn', [debiased_nt_xent, hcl_loss, decoupled_nt_xent])
def test_half_precision_is_close_to_float64_at_a_cold_temperature(fn):
    z1, z2 = pair(n=64, d=32, noise=0.7, seed=12)
    want = fn(z1, z2, temperature=0.01).item()
    for dtype in (torch.float16, torch.bfloat16):
        got = fn(z1.to(dtype), z2.to(dtype), temperature=0.01).item()
        assert math.isfinite(got) and abs(got - want) < 0.02 * abs(want) + 0.05

# --- false-negative elimination and attraction --------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 7), seed=st.integers(0, 10_000), mode=st.sampled_from(['eliminate', 'attract']),
       t=st.sampled_from([0.1, 0.5, 1.0]))
def test_false_negative_loss_matches_a_loop(n, seed, mode, t):
    z1, z2 = pair(n=n, seed=seed)
    flags = torch.rand(n, n, generator=torch.Generator().manual_seed(seed)) < 0.4
    got = false_negative_loss(z1, z2, flags, t, mode, reduction='none')
    assert torch.allclose(got, fn_loop(z1, z2, flags, t, mode), rtol=1e-10, atol=1e-12)

def test_the_diagonal_of_false_negatives_is_ignored():
    z1, z2 = pair(n=5, seed=13)
    flags = torch.rand(5, 5, generator=torch.Generator().manual_seed(1)) < 0.5
    with_diagonal, without = flags.clone(), flags.clone()
    with_diagonal.fill_diagonal_(True)
    without.fill_diagonal_(False)
    for mode in ('eliminate', 'attract'):
        assert torch.equal(false_negative_loss(z1, z2, with_diagonal, 0.5, mode),
                           false_negative_loss(z1, z2, without, 0.5, mode))

def test_oracle_attraction_is_supcon_and_elimination_lowers_the_loss():
    z1, z2 = pair(n=8, seed=14)
    labels = torch.tensor([0, 1, 0, 2, 1, 0, 3, 2])
    oracle = (labels[:, None] == labels[None, :])
    assert torch.allclose(false_negative_loss(z1, z2, oracle, 0.3, 'attract'),
                          supcon_loss(torch.cat([z1, z2]), labels.repeat(2), 0.3))
    eliminated = false_negative_loss(z1, z2, oracle, 0.3, reduction='none')
    assert (eliminated <= nt_xent(z1, z2, 0.3, reduction='none') + 1e-12).all()

@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 9), k=st.integers(0, 8), seed=st.integers(0, 10_000))
def test_detection_flags_the_k_highest_mean_cosines(n, k, seed):
    k = min(k, n - 1)
    z1, z2 = pair(n=n, seed=seed)
    flags = detect_false_negatives(z1, z2, k)
    assert flags.dtype == torch.bool and flags.shape == (n, n)
    assert flags.sum(1).tolist() == [k] * n and not flags.diagonal().any()
    u1, u2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    for i in range(n):
        score = {j: sum(float(a @ b) for a in (u1[i], u2[i]) for b in (u1[j], u2[j])) / 4
                 for j in range(n) if j != i}
        ranked = sorted(score, key=score.get, reverse=True)
        assert set(flags[i].nonzero().flatten().tolist()) == set(ranked[:k])

def test_detection_does_not_track_gradients():
    z1, z2 = pair(n=4, seed=15)
    flags = detect_false_negatives(z1.requires_grad_(), z2, 2)
    assert not flags.requires_grad

# --- supervised contrastive ------------------------------------------------------------------------------------

@pytest.mark.parametrize('variant', ['out', 'in'])
@pytest.mark.parametrize('t', [0.07, 0.5])
def test_supcon_matches_the_equations_anchor_by_anchor(variant, t):
    features = rand(10, 6, seed=16)
    labels = torch.tensor([0, 1, 0, 2, 1, 0, 3, 2, 4, 1])  # labels 3 and 4 occur once: lonely anchors
    want = supcon_loop(features, labels, t, variant)
    per = supcon_loss(features, labels, t, variant, reduction='none')
    for got, w in zip(per.tolist(), want):
        # a lonely anchor's entry is written as a literal 0, not computed: exact
        assert (got == 0.0) if w is None else math.isclose(got, w, rel_tol=1e-10)
    kept = [w for w in want if w is not None]
    assert math.isclose(supcon_loss(features, labels, t, variant).item(), sum(kept) / len(kept), rel_tol=1e-10)
    assert math.isclose(supcon_loss(features, labels, t, variant, reduction='sum').item(), sum(kept), rel_tol=1e-10)

def official_supcon(features, labels, temperature, base_temperature=0.07, old=False):
    """SupConLoss of the authors' repository (HobbitLong/SupContrast, contrast_mode='all'), transcribed for
    features (M, D) already holding every view: normalised here as their training script does before the loss."""
    features = F.normalize(features, dim=1)
    mask = torch.eq(labels[:, None], labels[None, :]).double()
    anchor_dot_contrast = features @ features.T / temperature
    logits = anchor_dot_contrast - anchor_dot_contrast.max(1, keepdim=True).values.detach()
    logits_mask = 1 - torch.eye(len(features), dtype=torch.float64)
    mask = mask * logits_mask
    exp_logits = torch.exp(logits) * logits_mask
    log_prob = logits - torch.log(exp_logits.sum(1, keepdim=True))
    if old:  # older copies: divide by the count, zero for a lonely anchor
        mean_log_prob_pos = (mask * log_prob).sum(1) / mask.sum(1)
    else:  # current code: a count below 1e-6 is replaced by 1, so the lonely anchor's loss is 0
        mask_pos_pairs = torch.where(mask.sum(1) < 1e-6, torch.ones_like(mask.sum(1)), mask.sum(1))
        mean_log_prob_pos = (mask * log_prob).sum(1) / mask_pos_pairs
    return (-(temperature / base_temperature) * mean_log_prob_pos).mean()

def test_the_two_conventions_for_anchors_without_a_positive():
    features = rand(8, 5, seed=17)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 4])  # the last two rows have no positive
    ours = supcon_loss(features, labels, 0.07)
    per = supcon_loss(features, labels, 0.07, reduction='none')
    # the authors' current code: lonely anchors count as 0 and stay in the mean over all 8
    assert torch.isclose(official_supcon(features, labels, 0.07), per.sum() / 8)
    # ours: they leave the mean, so it is over the 6 anchors with a positive — a larger value here
    assert torch.isclose(ours, per.sum() / 6) and ours > official_supcon(features, labels, 0.07)
    # older copies divide by zero
    assert torch.isnan(official_supcon(features, labels, 0.07, old=True))
    # with a positive for every anchor the two agree, up to the τ / base_temperature factor we leave out
    full = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    assert torch.isclose(official_supcon(features, full, 0.2), supcon_loss(features, full, 0.2) * 0.2 / 0.07)

def test_supcon_with_instance_ids_is_nt_xent_and_l_in_never_exceeds_l_out():
    z1, z2 = pair(n=7, seed=18)
    ids = torch.arange(7).repeat(2)
    for t in (0.1, 0.5):
        assert torch.allclose(supcon_loss(torch.cat([z1, z2]), ids, t), nt_xent(z1, z2, t), rtol=1e-12)
    labels = torch.tensor([0, 1, 1, 2, 0, 1, 3]).repeat(2)
    l_in = supcon_loss(torch.cat([z1, z2]), labels, 0.2, 'in', reduction='none')
    l_out = supcon_loss(torch.cat([z1, z2]), labels, 0.2, 'out', reduction='none')
    assert (l_in <= l_out + 1e-12).all() and (l_in < l_out - 1e-6).any()

def test_supcon_accepts_label_lists_and_lonely_anchors_only_when_some_anchor_has_a_positive():
    features = rand(4, 3, seed=19)
    assert torch.isclose(supcon_loss(features, [0, 0, 1, 2]), supcon_loss(features, torch.tensor([0, 0, 1, 2])))
    with pytest.raises(ValueError, match='positive'):
        supcon_loss(features, torch.tensor([0, 1, 2, 3]))
    with pytest.raises(ValueError, match='positive'):
        supcon_loss(features[:1], torch.tensor([0]))

def test_the_methods_losses_are_the_lessons_losses():
    # each method of lesson 08 computes its loss from the two views with its own options
    from contrastive_nb.debiased import (DebiasedOptions, DebiasedSimCLR, HCLOptions, HCLSimCLR,
                                         SupCon, SupConOptions)
    from contrastive_nb.methods import Batch
    from contrastive_nb.models import ProjectionHead, SmallCNN
    z1, z2 = pair(n=4, seed=30)
    labels = torch.tensor([0, 1, 0, 1])
    batch = Batch([], torch.arange(4), labels, torch.Generator().manual_seed(0))
    cases = [(DebiasedSimCLR, DebiasedOptions(0.3, 0.2), debiased_nt_xent(z1, z2, 0.3, 0.2)),
             (HCLSimCLR, HCLOptions(0.3, 0.2, 0.5), hcl_loss(z1, z2, 0.3, 0.2, 0.5)),
             (SupCon, SupConOptions(0.3), supcon_loss(torch.cat([z1, z2]), labels.repeat(2), 0.3))]
    encoder = SmallCNN(width=4, blocks=2, norm='group')
    for cls, options, expected in cases:
        method = cls(encoder, ProjectionHead(encoder.feature_dim, 8, 4), options)
        assert torch.allclose(method.pair_loss(z1, z2, batch), expected, rtol=1e-9), cls.__name__

def test_a_false_negative_mask_of_the_wrong_shape_names_the_shape():
    # the message gives the expected shape in whole numbers of sources
    with pytest.raises(ValueError, match=r'shape \(4, 4\) for 4 sources'):
        false_negative_loss(Z, Z, torch.zeros(3, 3, dtype=torch.bool))

# --- bad input ---------------------------------------------------------------------------------------------------

Z = rand(4, 3, seed=20)

@pytest.mark.parametrize('call,error,name', [
    (lambda: supcon_loss(torch.cat([Z, Z]), torch.tensor([0, 1, 0, 1])), ValueError, 'labels'),
    (lambda: supcon_loss(Z, torch.tensor([0.0, 1.0, 0.0, 1.0])), TypeError, 'labels'),
    (lambda: supcon_loss(Z, torch.tensor([[0, 1], [0, 1]])), ValueError, 'labels'),
    (lambda: supcon_loss(Z, torch.tensor([0, 1, 0, 1]), variant='both'), ValueError, 'variant'),
    (lambda: supcon_loss(Z, torch.tensor([0, 1, 0, 1]), reduction='avg'), ValueError, 'reduction'),
    (lambda: supcon_loss(Z, torch.tensor([0, 1, 0, 1]), temperature=-1.0), ValueError, 'temperature'),
    (lambda: debiased_nt_xent(Z, Z, tau_plus=1.0), ValueError, 'tau_plus'),
    (lambda: debiased_nt_xent(Z, Z, tau_plus=-0.01), ValueError, 'tau_plus'),
    (lambda: debiased_nt_xent(Z, Z, tau_plus=True), TypeError, 'tau_plus'),
    (lambda: hcl_loss(Z, Z, tau_plus=1.5), ValueError, 'tau_plus'),
    (lambda: hcl_loss(Z, Z, beta=-0.5), ValueError, 'beta'),
    (lambda: hcl_loss(Z, Z, beta=float('nan')), ValueError, 'beta'),
    (lambda: hcl_loss(Z, Z, reduction='avg'), ValueError, 'reduction'),
    (lambda: clamped_anchors(Z, Z, tau_plus=1.0), ValueError, 'tau_plus'),
    (lambda: clamped_anchors(Z, Z, beta=-1.0), ValueError, 'beta'),
    (lambda: decoupled_nt_xent(Z, Z[:3]), ValueError, 'z1'),
    (lambda: debiased_nt_xent(Z[:1], Z[:1]), ValueError, 'sources'),
    (lambda: false_negative_loss(Z, Z, torch.zeros(4, 4, dtype=torch.bool), mode='drop'), ValueError, 'mode'),
    (lambda: false_negative_loss(Z, Z, torch.zeros(4, 4)), TypeError, 'false_negatives'),
    (lambda: false_negative_loss(Z, Z, torch.zeros(3, 3, dtype=torch.bool)), ValueError, 'false_negatives'),
    (lambda: false_negative_loss(Z, Z, torch.zeros(4, dtype=torch.bool)), ValueError, 'false_negatives'),
    (lambda: detect_false_negatives(Z, Z, k=4), ValueError, 'k'),
    (lambda: detect_false_negatives(Z, Z, k=-1), ValueError, 'k'),
    (lambda: detect_false_negatives(Z, Z, k=1.5), TypeError, 'k'),
])
def test_bad_input_names_the_argument(call, error, name):
    with pytest.raises(error, match=name):
        call()
