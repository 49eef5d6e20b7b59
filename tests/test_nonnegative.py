"""Losses that are non-negative by definition never return a negative value, and the floor keeps the gradient.

The inputs are the hard case: every query equals its positive and the temperature is small, so the other candidates
barely count and the loss is 0 up to rounding. Without `floor_at_zero`, `info_nce` and `nt_xent` give values down to
about −1.5e-5 in float32 on such inputs (the log-sum-exp and the positive logit come from different kernels)."""
import pytest
import torch

from contrastive_nb.debiased import debiased_nt_xent, false_negative_loss, hcl_loss, supcon_loss
from contrastive_nb.distributed import global_nt_xent
from contrastive_nb.hard_negatives import importance_weighted_nt_xent
from contrastive_nb.infonce import floor_at_zero, info_nce, nt_xent

def near_zero_batches(dtype):
    "Seeded (N, D) batches of several sizes; the losses below pair each with itself (or ± itself)."
    g = torch.Generator().manual_seed(0)
    return [torch.randn(n, d, generator=g, dtype=dtype) for n in (1, 2, 3, 4) for d in (3, 5, 8)
            for _ in range(4)]

def two_views(q): return torch.cat([q, -q]), torch.cat([q, -q])  # 2N sources whose views agree

def supcon_inputs(q):
    n = len(q)
    labels = torch.cat([torch.arange(n)] * 2 + [torch.arange(n, 2 * n)] * 2)
    return torch.cat([q, q, -q, -q]), labels

no_false_negatives = lambda q: torch.zeros(2 * len(q), 2 * len(q), dtype=torch.bool)

LOSSES = {  # name -> per-row loss of one batch q (reduction 'none'), at a small temperature
    'info_nce in-batch': lambda q: info_nce(q, q, None, 0.01, 'none'),
    'info_nce shared': lambda q: info_nce(q, q, -q, 0.01, 'none'),
    'info_nce per-query': lambda q: info_nce(q, q, -q[:, None], 0.01, 'none'),
    'info_nce chunked': lambda q: info_nce(q, q, None, 0.01, 'none', chunk_size=1),
    'nt_xent': lambda q: nt_xent(*two_views(q), 0.01, 'none'),
    'importance weighted': lambda q: importance_weighted_nt_xent(*two_views(q), 0.01, 1.0,
                                                                 reduction='none'),
    'debiased': lambda q: debiased_nt_xent(*two_views(q), 0.01, reduction='none'),
    'hcl': lambda q: hcl_loss(*two_views(q), 0.01, reduction='none'),
    'false negatives eliminated': lambda q: false_negative_loss(
        *two_views(q), no_false_negatives(q), 0.01, reduction='none'),
    'false negatives attracted': lambda q: false_negative_loss(
        *two_views(q), no_false_negatives(q), 0.01, 'attract', reduction='none'),
    'supcon out': lambda q: supcon_loss(*supcon_inputs(q), 0.01, reduction='none'),
    'supcon in': lambda q: supcon_loss(*supcon_inputs(q), 0.01, 'in', reduction='none'),
    'global_nt_xent (one process)': lambda q: global_nt_xent(*two_views(q), 0.01)[None],
}

@pytest.mark.parametrize('dtype', [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize('name', LOSSES)
def test_never_below_zero(name, dtype):
    for q in near_zero_batches(dtype):
        loss = LOSSES[name](q)
        assert (loss >= 0).all(), f"{name}: {loss.min().item():.3g} for a batch of {len(q)}"

def test_floor_at_zero_only_lifts_values_below_zero_and_keeps_every_gradient():
    "A clamp_min(0) would give the lifted row a zero gradient."
    x = torch.tensor([-3e-7, 0.0, 2e-7, 1.5], requires_grad=True)
    y = floor_at_zero(x)
    assert y.tolist() == [0.0, 0.0, x[2].item(), 1.5]  # exact by construction (IEEE: x + (0 − x) = 0)
    (y * torch.arange(1.0, 5.0)).sum().backward()
    assert x.grad.tolist() == [1.0, 2.0, 3.0, 4.0]
