"""Package tests for contrastive_nb.distributed: the gathers, global_nt_xent, MoCo across processes, launch and
grad_cache_step.

The multi-process tests start 2 gloo processes on 127.0.0.1 with `launch` (a free port, a timeout on every
collective and on the whole run, processes killed by their id); each test module-level worker below runs many
checks in one launch, because starting a process (importing torch) is the slow part."""
import math
import time

import pytest
import torch
import torch.distributed as dist
from torch import nn

from contrastive_nb.augment import AugmentationPolicy
from contrastive_nb.distributed import (ANCHORS, GATHERS, all_gather_rows, all_gather_with_grad,
                                        ddp_gradient_check, enqueue_from_all, global_nt_xent,
                                        grad_cache_benchmark, grad_cache_step, shuffled_across,
                                        train_simclr_ddp, world)
from contrastive_nb.launch import free_port, launch, run_calls
from contrastive_nb.infonce import nt_xent
from contrastive_nb.models import ProjectionHead, SmallCNN
from contrastive_nb.moco import MoCoQueue

# --- one process ---------------------------------------------------------------------------------------------------

def test_without_a_process_group_everything_is_local():
    assert world() == (1, 0)
    x = torch.randn(5, 3)
    for g in GATHERS: assert all_gather_rows(x, g) is x
    assert all_gather_with_grad(x) is x
    z1, z2 = torch.randn(2, 6, 4, dtype=torch.float64)
    for chunk in (None, 4):
        assert torch.equal(global_nt_xent(z1, z2, 0.3, chunk), nt_xent(z1, z2, 0.3, chunk_size=chunk))
    q = MoCoQueue(6, 4)
    enqueue_from_all(q, z1[:2])
    torch.testing.assert_close(q.negatives()[-2:], nn.functional.normalize(z1[:2], dim=1).float())
    assert torch.equal(shuffled_across(lambda v: v * 3, z1), z1 * 3)

def test_one_process_bad_input():
    z = torch.randn(4, 3)
    with pytest.raises(ValueError, match='gather must be one of'): all_gather_rows(z, 'plain')
    with pytest.raises(ValueError, match='anchors must be one of'): global_nt_xent(z, z + 1, anchors='some')
    with pytest.raises(ValueError, match='x is empty'): all_gather_rows(z[:0])
    with pytest.raises(TypeError, match='x must be a torch.Tensor'): all_gather_rows([1.0, 2.0])
    with pytest.raises(TypeError, match='queue must be a MoCoQueue'): enqueue_from_all(torch.zeros(4, 3), z)
    with pytest.raises(TypeError, match='encode must be callable'): shuffled_across(None, z)

# --- two processes -------------------------------------------------------------------------------------------------

def _gather_gradients(rank: int, world_size: int, n: int = 3, d: int = 2) -> dict:
    "x.grad after each gather, with a loss that weights every gathered row by a rank-specific matrix."
    weights = [torch.randn(world_size * n, d, generator=torch.Generator().manual_seed(10 + s),
                           dtype=torch.float64) for s in range(world_size)]
    out = {}
    for gather in GATHERS:
        x = torch.randn(n, d, generator=torch.Generator().manual_seed(rank), dtype=torch.float64)
        x.requires_grad_()
        y = all_gather_rows(x, gather)
        out[f'{gather} values'] = y.detach()
        if not y.requires_grad:
            out[f'{gather} grad'] = None
            continue
        (weights[rank] * y).sum().backward()
        out[f'{gather} grad'] = x.grad
    rows = slice(rank * n, (rank + 1) * n)
    out['want exact'] = sum(w[rows] for w in weights)        # every process's loss
    out['want own_slice'] = weights[rank][rows]             # only this process's loss
    return out

def _unequal() -> dict:
    "The clear errors of unequal inputs across processes, and a collective that works after them."
    world_size, rank = world()
    out = {}
    for name, x in (('rows', torch.randn(3 + rank, 2)), ('features', torch.randn(3, 2 + rank)),
                    ('dtype', torch.randn(3, 2, dtype=torch.float64 if rank else torch.float32))):
        try:
            all_gather_rows(x)
            out[name] = None
        except ValueError as e:
            out[name] = str(e)
    try:
        global_nt_xent(torch.randn(3 + rank, 4), torch.randn(3 + rank, 4))
        out['loss'] = None
    except ValueError as e:
        out['loss'] = str(e)
    out['after'] = all_gather_rows(torch.full((2, 1), float(rank))).flatten().tolist()
    return out

def _moco(n: int = 4) -> dict:
    world_size, rank = world()
    keys = torch.randn(n, 3, generator=torch.Generator().manual_seed(rank))
    queue = MoCoQueue(16, 3)
    enqueue_from_all(queue, keys)
    x = torch.randn(n, 3, generator=torch.Generator().manual_seed(20 + rank))
    return {'queue': queue.negatives()[-world_size * n:], 'keys': keys,
            'rowwise': shuffled_across(lambda v: 2 * v + 1, x), 'x': x,
            'centred': shuffled_across(lambda v: v - v.mean(0, keepdim=True), x)}

def _chunked_loss(n: int = 5) -> dict:
    "global_nt_xent's value and gradient with and without chunks, and with a learnable τ."
    world_size, rank = world()
    g = torch.Generator().manual_seed(rank)
    z1, z2 = (torch.randn(n, 4, generator=g, dtype=torch.float64).requires_grad_() for _ in range(2))
    out = {}
    for chunk in (None, 2, 3):
        loss = global_nt_xent(z1, z2, 0.4, chunk)
        out[chunk] = (loss.item(), *torch.autograd.grad(loss, (z1, z2)))
    tau = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    global_nt_xent(z1, z2, tau).backward()
    out['tau grad'] = tau.grad.item()
    out['z'] = (z1.detach(), z2.detach())
    return out

def _two_process_checks() -> dict:
    world_size, rank = world()
    checks = {f'{g}, {a}': ddp_gradient_check(g, a) for g in GATHERS for a in ANCHORS
              if (g, a) != ('no_grad', 'all')}
    checks['exact, local, batch 2'] = ddp_gradient_check('exact', 'local', batch_size=2, seed=3)
    checks['exact, local, float32'] = ddp_gradient_check('exact', 'local', dtype=torch.float32)
    try:
        global_nt_xent(torch.randn(4, 3), torch.randn(4, 3), gather='no_grad', anchors='all')
        checks['no_grad all'] = None
    except ValueError as e:
        checks['no_grad all'] = str(e)
    images = torch.rand(16, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    trained = train_simclr_ddp(images, AugmentationPolicy(size=8), steps=3, batch_size=4, width=4, blocks=2)
    return {'rank': rank, 'world': world_size, 'ddp': checks, 'trained': trained,
            'gather': _gather_gradients(rank, world_size), 'unequal': _unequal(), 'moco': _moco(),
            'chunked': _chunked_loss()}

@pytest.fixture(scope='module')
def two():
    clock = time.monotonic()
    results = launch(_two_process_checks, 2, timeout=90)
    assert time.monotonic() - clock < 90
    return results

def test_ranks_and_world(two):
    assert [r['rank'] for r in two] == [0, 1] and all(r['world'] == 2 for r in two)

def test_ddp_gradients_equal_one_process_on_the_global_batch(two):
    for r in two:
        for name in ('exact, local', 'exact, all', 'exact, local, batch 2'):
            c = r['ddp'][name]
            assert abs(c['loss'] - c['reference loss']) < 1e-10, name   # mean of the per-process losses
            assert c['relative error'] < 1e-10, name
        assert r['ddp']['exact, local, float32']['relative error'] < 1e-5

def test_wrong_gathers_are_wrong(two):
    for r in two:
        d = r['ddp']
        for name in ('no_grad, local', 'own_slice, local'):
            assert abs(d[name]['loss'] - d[name]['reference loss']) < 1e-10  # the same loss value...
            assert d[name]['relative error'] > 0.05 and d[name]['cosine'] < 0.999  # ...another direction
        assert abs(d['own_slice, all']['norm ratio'] - 0.5) < 1e-10          # exactly 1/W
        assert d['own_slice, all']['cosine'] > 1 - 1e-10
        assert 'no gradient' in r['ddp']['no_grad all']

def test_gather_values_and_gradient_per_process(two):
    want_values = torch.cat([torch.randn(3, 2, generator=torch.Generator().manual_seed(r),
                                         dtype=torch.float64) for r in range(2)])
    for r in two:
        g = r['gather']
        for gather in GATHERS: torch.testing.assert_close(g[f'{gather} values'], want_values)
        torch.testing.assert_close(g['exact grad'], g['want exact'], rtol=0, atol=1e-12)
        torch.testing.assert_close(g['own_slice grad'], g['want own_slice'], rtol=0, atol=1e-12)
        assert g['no_grad grad'] is None  # a plain all_gather: no graph at all
        assert not torch.allclose(g['exact grad'], g['own_slice grad'])

def test_unequal_inputs_raise_the_same_clear_error_in_every_process(two):
    for r in two:
        u = r['unequal']
        assert 'rank 0: 3 rows of 2 values' in u['rows'] and 'rank 1: 4 rows' in u['rows']
        assert 'drop_last=True' in u['rows']
        assert '3 values' in u['features'] and 'torch.float64' in u['dtype']
        assert 'same shape' in u['loss']
        assert u['after'] == [0.0, 0.0, 1.0, 1.0]  # the group still works after the errors
    assert two[0]['unequal'] == two[1]['unequal']

def test_chunked_global_loss_and_learnable_temperature(two):
    for r in two:
        c = r['chunked']
        for chunk in (2, 3):
            assert math.isclose(c[chunk][0], c[None][0], rel_tol=1e-12)
            for a, b in zip(c[chunk][1:], c[None][1:]): torch.testing.assert_close(a, b)
    # the mean of the per-process losses is nt_xent of the global batch, also for τ's gradient
    z1 = torch.cat([r['chunked']['z'][0] for r in two]).requires_grad_()
    z2 = torch.cat([r['chunked']['z'][1] for r in two]).requires_grad_()
    tau = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    loss = nt_xent(z1, z2, tau)
    loss.backward()
    assert math.isclose(sum(r['chunked'][None][0] for r in two) / 2, loss.item(), rel_tol=1e-12)
    assert math.isclose(sum(r['chunked']['tau grad'] for r in two) / 2, tau.grad.item(), rel_tol=1e-10)

def test_moco_queue_fed_from_every_process_and_shuffle_across(two):
    keys = torch.cat([r['moco']['keys'] for r in two])
    for r in two:
        m = r['moco']
        torch.testing.assert_close(m['queue'], nn.functional.normalize(keys, dim=1))  # rank order
        torch.testing.assert_close(m['rowwise'], 2 * m['x'] + 1)  # back in this process's order
    # a batch-coupled encoder sees a random half of the global batch: two sub-batch means in all
    offsets = torch.cat([r['moco']['x'] - r['moco']['centred'] for r in two]).round(decimals=5)
    groups = offsets.unique(dim=0)
    assert len(groups) == 2
    x = torch.cat([r['moco']['x'] for r in two])
    torch.testing.assert_close(groups.mean(0), x.mean(0).round(decimals=5), atol=1e-4, rtol=0)
    local = [r['moco']['x'].mean(0) for r in two]
    assert not any(torch.allclose(g, m, atol=1e-4) for g in groups for m in local)

def test_ddp_training_keeps_the_processes_in_step(two):
    a, b = (r['trained'] for r in two)
    assert a['losses'] == b['losses'] and len(a['losses']) == 3  # the mean over processes, everywhere
    for k, v in a['encoder'].items(): assert torch.equal(v, b['encoder'][k]), k  # DDP: the same weights
    # one process with the same settings draws other views (one augmentation seed per process)
    images = torch.rand(16, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    alone = train_simclr_ddp(images, AugmentationPolicy(size=8), steps=3, batch_size=4, width=4, blocks=2)
    assert alone['losses'] != a['losses']

def test_single_process_helpers():
    images = torch.rand(12, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    kwargs = dict(images=images, policy=AugmentationPolicy(size=8), steps=4, batch_size=4, width=4, blocks=2)
    one, two_ = train_simclr_ddp(**kwargs), train_simclr_ddp(**kwargs)
    assert one['losses'] == two_['losses'] and all(math.isfinite(v) for v in one['losses'])  # seeded
    with pytest.raises(ValueError, match='images holds 12'): train_simclr_ddp(**{**kwargs, 'batch_size': 13})
    with pytest.raises(TypeError, match='policy must be an AugmentationPolicy'):
        train_simclr_ddp(**{**kwargs, 'policy': None})
    with pytest.raises(ValueError, match='lr must be'): train_simclr_ddp(**{**kwargs, 'lr': 0.0})
    plain = grad_cache_benchmark(8, None, image_size=8, width=4, blocks=2, steps=2)
    cached = grad_cache_benchmark(8, 3, image_size=8, width=4, blocks=2, steps=2)
    assert len(plain['seconds']) == 2 and plain['peak MiB'] >= 0
    assert math.isclose(plain['loss'], cached['loss'], rel_tol=1e-5)  # the same weights, images and loss
    assert run_calls([(world, {}), (dict, dict(a=3))]) == [(1, 0), {'a': 3}]
    with pytest.raises(TypeError, match='calls must be a list'): run_calls([world])
    assert 1024 <= free_port() <= 65535

def test_train_simclr_ddp_refuses_uint8_and_trains_float64_as_float32():
    "uint8 pixels are refused by name (guards the images check); float64 trains like float32."
    images = torch.rand(8, 3, 8, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    kwargs = dict(policy=AugmentationPolicy(size=8), steps=1, batch_size=4, width=4, blocks=2)
    wide = train_simclr_ddp(images, **kwargs)['losses']
    narrow = train_simclr_ddp(images.float(), **kwargs)['losses']
    assert math.isclose(wide[0], narrow[0], rel_tol=1e-4)
    with pytest.raises(TypeError, match='images'):
        train_simclr_ddp((images * 255).to(torch.uint8), **kwargs)

def test_grad_cache_benchmark_times_a_backward_pass_too(monkeypatch):
    "Every timed step, plain or cached, backpropagates its loss (guards the plain step's backward)."
    import contrastive_nb.distributed as D
    reached = []
    def loss_with_hook(*args, **kwargs):
        loss = nt_xent(*args, **kwargs)
        loss.register_hook(lambda grad: reached.append(1))  # runs when the backward reaches it
        return loss
    monkeypatch.setattr(D, 'nt_xent', loss_with_hook)
    for chunk in (None, 3):
        reached.clear()
        grad_cache_benchmark(8, chunk, image_size=8, width=4, blocks=2, steps=2)
        assert len(reached) == 3, chunk  # the warm-up step and the two timed ones

# --- launch --------------------------------------------------------------------------------------------------------

def _fails_on_rank_1() -> None:
    if world()[1] == 1: raise ValueError('rank 1 refuses')
    dist.barrier()

def _sleeps() -> None:
    time.sleep(600)

def test_launch_raises_a_workers_error_and_never_hangs():
    clock = time.monotonic()
    with pytest.raises(ValueError, match='rank 1 refuses'): launch(_fails_on_rank_1, 2, timeout=60)
    assert time.monotonic() - clock < 60

def test_launch_kills_a_process_at_the_timeout():
    clock = time.monotonic()
    with pytest.raises(RuntimeError, match='returned nothing'): launch(_sleeps, 1, timeout=6)
    assert time.monotonic() - clock < 15

def test_launch_bad_input():
    def local(): return 0
    local.__module__ = '__main__'  # what a function defined in a notebook looks like
    with pytest.raises(TypeError, match='defined in __main__'): launch(local, 2)
    with pytest.raises(TypeError, match='picklable'): launch(run_calls, 1, args=(lambda: 0,))
    with pytest.raises(ValueError, match='world_size'): launch(run_calls, 0)
    with pytest.raises(ValueError, match='timeout'): launch(run_calls, 1, timeout=0)
    with pytest.raises(TypeError, match='args must be a tuple'): launch(run_calls, 1, args=3)
    with pytest.raises(TypeError, match='fn must be callable'): launch(3)

# --- gradient caching ----------------------------------------------------------------------------------------------

def mlp(seed: int = 0, dropout: float = 0.0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 12), nn.Tanh(), nn.Dropout(dropout), nn.Linear(12, 4)).double()

def grads(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in model.parameters()])

def views(n: int = 10, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x1 = torch.randn(n, 5, generator=g, dtype=torch.float64)
    return x1, x1 + 0.3 * torch.randn(n, 5, generator=g, dtype=torch.float64)

@pytest.mark.parametrize('chunk_size', [1, 2, 3, 4, 7, 10, 64])
def test_grad_cache_equals_the_full_batch_gradient(chunk_size):
    model, (x1, x2) = mlp(), views()
    loss = nt_xent(model(x1), model(x2), 0.3)
    loss.backward()
    want = grads(model)
    model.zero_grad()
    got = grad_cache_step(model, x1, x2, lambda a, b: nt_xent(a, b, 0.3), chunk_size)
    assert not got.requires_grad and math.isclose(got.item(), loss.item(), rel_tol=1e-14)
    torch.testing.assert_close(grads(model), want, rtol=0, atol=1e-12)

def test_grad_cache_accumulates_and_passes_the_temperatures_gradient():
    model, (x1, x2) = mlp(), views(9)
    tau = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    nt_xent(model(x1), model(x2), tau).backward()
    want, want_tau = grads(model), tau.grad.clone()
    tau.grad = None
    grad_cache_step(model, x1, x2, lambda a, b: nt_xent(a, b, tau), 4)  # adds to the .grad there
    torch.testing.assert_close(grads(model), 2 * want, rtol=0, atol=1e-12)
    torch.testing.assert_close(tau.grad, want_tau, rtol=0, atol=1e-12)

def test_grad_cache_replays_the_random_state():
    model, (x1, x2) = mlp(dropout=0.5), views(11)
    torch.manual_seed(7)
    chunked = [torch.cat([model(c) for c in x.split(4)]) for x in (x1, x2)]  # the same draws, with a graph
    after = torch.get_rng_state()
    nt_xent(*chunked).backward()
    want = grads(model)
    model.zero_grad()
    torch.manual_seed(7)
    grad_cache_step(model, x1, x2, nt_xent, 4)
    torch.testing.assert_close(grads(model), want, rtol=0, atol=1e-12)
    assert torch.equal(torch.get_rng_state(), after)  # where one pass over the chunks leaves it

def test_grad_cache_with_a_small_cnn_and_group_norm():
    torch.manual_seed(0)
    cnn = SmallCNN(width=4, blocks=2, norm='group')
    model = nn.Sequential(cnn, ProjectionHead(cnn.feature_dim, 32, 8, norm='group')).double()
    x1, x2 = torch.rand(2, 7, 3, 8, 8, dtype=torch.float64)
    nt_xent(model(x1), model(x2)).backward()
    want = grads(model)
    for chunk in (2, 3):
        model.zero_grad()
        grad_cache_step(model, x1, x2, nt_xent, chunk)
        assert ((grads(model) - want).norm() / want.norm()).item() < 1e-10

def test_grad_cache_and_batchnorm():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.Linear(6, 4)).double()
    x1, x2 = views(8)
    with pytest.raises(ValueError, match='1 BatchNorm layer'): grad_cache_step(model, x1, x2, nt_xent, 4)
    start = {k: v.clone() for k, v in model[1].state_dict().items()}
    grad_cache_step(model, x1, x2, nt_xent, 3, approximate_batchnorm=True)
    approx = grads(model)
    # the running statistics move as after ONE forward pass over the chunks, not two
    reference = nn.BatchNorm1d(6).double()
    reference.load_state_dict(start)
    with torch.no_grad():
        h = [model[0](c) for x in (x1, x2) for c in x.split(3)]
        for chunk in h: reference(chunk)
    for k, v in reference.state_dict().items(): torch.testing.assert_close(model[1].state_dict()[k], v)
    model.zero_grad()
    nt_xent(model(x1), model(x2)).backward()
    assert not torch.allclose(approx, grads(model))  # per-chunk statistics: an approximation
    model.eval()  # frozen statistics: exact again, and accepted
    model.zero_grad()
    nt_xent(model(x1), model(x2)).backward()
    want = grads(model)
    model.zero_grad()
    grad_cache_step(model, x1, x2, nt_xent, 3)
    torch.testing.assert_close(grads(model), want, rtol=0, atol=1e-12)

def test_grad_cache_bad_input():
    model, (x1, x2) = mlp(), views()
    for bad in (0, -1):
        with pytest.raises(ValueError, match='chunk_size must lie in'): grad_cache_step(model, x1, x2, nt_xent, bad)
    for bad in (2.0, True, None):
        with pytest.raises(TypeError, match='chunk_size must be an int'): grad_cache_step(model, x1, x2, nt_xent, bad)
    with pytest.raises(ValueError, match='same sources'): grad_cache_step(model, x1, x2[:4], nt_xent, 2)
    with pytest.raises(ValueError, match='x1 is empty'): grad_cache_step(model, x1[:0], x2[:0], nt_xent, 2)
    with pytest.raises(TypeError, match='encoder must be an nn.Module'):
        grad_cache_step(lambda x: x, x1, x2, nt_xent, 2)
    with pytest.raises(TypeError, match='loss_fn must be callable'): grad_cache_step(model, x1, x2, 'nt_xent', 2)
    with pytest.raises(ValueError, match='scalar'):
        grad_cache_step(model, x1, x2, lambda a, b: nt_xent(a, b, reduction='none'), 2)
    with pytest.raises(TypeError, match='approximate_batchnorm must be True or False'):
        grad_cache_step(model, x1, x2, nt_xent, 2, approximate_batchnorm=1)
    assert all(p.grad is None for p in model.parameters())  # nothing ran before the checks
