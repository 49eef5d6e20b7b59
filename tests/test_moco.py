"""Package tests for contrastive_nb.moco: the key queue, the momentum update, the MoCo model, its training loop."""
import copy
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st
from torch import nn

from contrastive_nb.infonce import info_nce
from contrastive_nb.models import ProjectionHead, SmallCNN
from contrastive_nb.methods import MethodSetup
from contrastive_nb.moco import MoCo, MoCoOptions, MoCoQueue, batch_statistics_only, momentum_update, train_moco
from contrastive_nb.augment import AugmentationPolicy

def rand(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)

def one_hot(ids, dim):
    return torch.eye(dim)[[i % dim for i in ids]].reshape(len(ids), dim)

def ids_in(queue):
    "The id of each key (position of its largest entry), oldest first."
    return queue.negatives().argmax(1).tolist()

# --- queue -----------------------------------------------------------------------------------------------------------

def test_queue_starts_with_seeded_unit_vectors():
    a, b, c = MoCoQueue(10, 6, seed=3), MoCoQueue(10, 6, seed=3), MoCoQueue(10, 6, seed=4)
    assert torch.equal(a.keys, b.keys) and not torch.equal(a.keys, c.keys)
    assert torch.allclose(a.keys.norm(dim=1), torch.ones(10))
    assert int(a.pointer) == 0 and int(a.seen) == 0 and not a.full and (a.size, a.dim) == (10, 6)

def test_queue_order_small_example():
    queue = MoCoQueue(5, 8)
    for batch in ([0, 1], [2, 3], [4, 5, 6]): queue.enqueue(one_hot(batch, 8))
    assert ids_in(queue) == [2, 3, 4, 5, 6]
    assert int(queue.pointer) == 2 and int(queue.seen) == 7 and queue.full

def test_wrap_around_with_a_batch_that_does_not_divide_the_queue():
    queue = MoCoQueue(5, 32)
    for start in range(0, 30, 3):  # 3 does not divide 5: every second batch straddles the end of the buffer
        queue.enqueue(one_hot(range(start, start + 3), 32))
        assert int(queue.pointer) == (start + 3) % 5
        if start >= 3: assert ids_in(queue) == list(range(start + 3 - 5, start + 3))
    assert int(queue.seen) == 30

def test_batch_larger_than_the_queue_keeps_its_newest_keys():
    queue = MoCoQueue(5, 16)
    queue.enqueue(one_hot([0, 1], 16))
    queue.enqueue(one_hot(range(2, 14), 16))  # 12 keys into 5 slots
    assert ids_in(queue) == [9, 10, 11, 12, 13] and int(queue.pointer) == 14 % 5 and int(queue.seen) == 14

@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 8), batches=st.lists(st.integers(0, 20), min_size=1, max_size=12))
def test_queue_matches_a_list_that_keeps_its_last_k_items(size, batches):
    queue, reference, next_id = MoCoQueue(size, 64), [], 0
    for b in batches:
        batch = list(range(next_id, next_id + b))
        queue.enqueue(one_hot(batch, 64))
        reference, next_id = (reference + batch)[-size:], next_id + b
        assert int(queue.pointer) == next_id % size and int(queue.seen) == next_id
        if len(reference) == size: assert ids_in(queue) == [i % 64 for i in reference]

def test_empty_batch_changes_nothing():
    queue = MoCoQueue(4, 3)
    before = copy.deepcopy(queue.state_dict())
    queue.enqueue(torch.empty(0, 3))
    assert all(torch.equal(v, before[k]) for k, v in queue.state_dict().items())

def test_keys_are_normalised_on_the_way_in():
    queue = MoCoQueue(4, 3)
    queue.enqueue(torch.tensor([[3.0, 0.0, 4.0]]))
    assert torch.allclose(queue.negatives()[-1], torch.tensor([0.6, 0.0, 0.8]))

def test_negatives_are_a_detached_snapshot():
    queue = MoCoQueue(6, 4)
    keys = rand(3, 4).requires_grad_()
    queue.enqueue(keys)
    snapshot = queue.negatives()
    assert not snapshot.requires_grad and not queue.keys.requires_grad
    kept = snapshot.clone()
    queue.enqueue(rand(3, 4, seed=1))
    assert torch.equal(snapshot, kept)  # a later enqueue does not change negatives already handed out
    assert snapshot.data_ptr() != queue.keys.data_ptr()

def test_queue_state_round_trip(tmp_path):
    queue = MoCoQueue(7, 5)
    queue.enqueue(rand(10, 5))
    path = tmp_path / 'queue.pt'
    torch.save(queue.state_dict(), path)
    restored = MoCoQueue(7, 5, seed=99)
    restored.load_state_dict(torch.load(path))
    assert set(queue.state_dict()) == {'keys', 'pointer', 'seen'}
    assert (torch.equal(restored.negatives(), queue.negatives()) and int(restored.pointer) == 3
            and int(restored.seen) == 10)
    more = rand(4, 5, seed=2)
    queue.enqueue(more), restored.enqueue(more)
    assert torch.equal(restored.negatives(), queue.negatives()) and int(restored.pointer) == int(queue.pointer)

def test_queue_follows_dtype_conversion():
    queue = MoCoQueue(4, 3).to(torch.float64)
    assert queue.keys.dtype == torch.float64 and queue.pointer.dtype == torch.long
    queue.enqueue(rand(2, 3))  # float32 keys are stored in the queue's dtype
    assert queue.negatives().dtype == torch.float64

@pytest.mark.parametrize('keys, error, match', [
    (torch.randn(4, 5), ValueError, r'\(B, 8\)'),
    (torch.randn(8), ValueError, r'\(B, 8\)'),
    (torch.randn(2, 4, 8), ValueError, r'\(B, 8\)'),
    (torch.ones(4, 8, dtype=torch.long), TypeError, 'floating point'),
    (torch.randn(4, 8, device='meta'), ValueError, 'device|meta'),
    (torch.zeros(2, 8), ValueError, 'zero'),
    (torch.full((2, 8), float('nan')), ValueError, 'NaN'),
    (torch.tensor([[1.0] * 7 + [float('inf')]]), ValueError, 'infinite'),
    ([[0.0] * 8], TypeError, 'torch.Tensor'),
])
def test_enqueue_rejects_bad_keys(keys, error, match):
    queue = MoCoQueue(16, 8)
    before = queue.keys.clone()
    with pytest.raises(error, match=match): queue.enqueue(keys)
    assert torch.equal(queue.keys, before) and int(queue.pointer) == 0

@pytest.mark.parametrize('size, dim, seed, error, match', [
    (0, 4, 0, ValueError, 'size'), (4, 0, 0, ValueError, 'dim'), (-1, 4, 0, ValueError, 'size'),
    (2.5, 4, 0, TypeError, 'size'), (True, 4, 0, TypeError, 'size'), (4, '8', 0, TypeError, 'dim'),
    (4, 4, 1.5, TypeError, 'seed'), (4, 4, None, TypeError, 'seed')])
def test_queue_rejects_bad_sizes(size, dim, seed, error, match):
    with pytest.raises(error, match=match): MoCoQueue(size, dim, seed)

def test_queue_is_full_exactly_when_every_start_vector_is_gone():
    queue = MoCoQueue(4, 8)
    queue.enqueue(one_hot([0, 1, 2], 8))
    assert not queue.full
    queue.enqueue(one_hot([3], 8))
    assert queue.full and int(queue.pointer) == 0
    assert repr(queue) == 'MoCoQueue(size=4, dim=8, seen=4)'

@pytest.mark.parametrize('layout', ['half', 'non-contiguous', 'double'])
def test_enqueue_accepts_any_floating_layout(layout):
    keys = rand(8, 3)
    given = {'half': keys.half(), 'non-contiguous': keys.T.contiguous().T, 'double': keys.double()}[layout]
    queue = MoCoQueue(4, 3)
    queue.enqueue(given)
    assert queue.keys.dtype == torch.float32
    assert torch.allclose(queue.negatives(), F.normalize(keys[-4:], dim=1), atol=1e-3)

# --- momentum update -------------------------------------------------------------------------------------------------

def drifted_pair(seed=0):
    """An encoder with BatchNorm and a copy, after the original took a training-mode step (weights and statistics
    differ)."""
    torch.manual_seed(seed)
    online = SmallCNN(width=4, blocks=2).double()
    target = copy.deepcopy(online)
    for p in online.parameters(): p.data.add_(torch.randn_like(p))
    online(torch.rand(8, 3, 8, 8, dtype=torch.float64) * 5)
    return online, target

def snapshot(module): return {k: v.clone() for k, v in module.state_dict().items()}

@settings(max_examples=25, deadline=None)
@given(m=st.floats(0, 1))
def test_momentum_update_formula(m):
    online, target = drifted_pair()
    on, tg = snapshot(online), snapshot(target)
    momentum_update(online, target, m)
    for name, value in target.state_dict().items():
        want = m * tg[name] + (1 - m) * on[name] if value.is_floating_point() else on[name]
        assert torch.allclose(value, want, rtol=0, atol=1e-12), name
    assert all(torch.equal(v, on[k]) for k, v in online.state_dict().items())  # online is never touched

def test_m_zero_copies_everything_exactly():
    online, target = drifted_pair()
    momentum_update(online, target, 0.0)
    assert all(torch.equal(a, b) for a, b in zip(online.state_dict().values(), target.state_dict().values()))

def test_m_one_freezes_parameters_and_statistics():
    online, target = drifted_pair()
    before = snapshot(target)
    momentum_update(online, target, 1)
    for name, value in target.state_dict().items():
        if value.is_floating_point(): assert torch.equal(value, before[name]), name
    assert int(target.state_dict()['features.0.1.num_batches_tracked']) == 1  # counters are copied, not averaged

def test_buffer_policies():
    stats = lambda module: [v.clone() for k, v in module.state_dict().items() if 'running' in k]
    params = lambda module: [p.clone() for p in module.parameters()]
    online, target = drifted_pair()
    before = stats(target)
    momentum_update(online, target, 0.5, buffers='keep')
    assert all(torch.equal(a, b) for a, b in zip(stats(target), before))
    online, target = drifted_pair()
    p_on, p_tg = params(online), params(target)
    momentum_update(online, target, 0.5, buffers='copy')
    assert all(torch.equal(a, b) for a, b in zip(stats(target), stats(online)))
    assert all(torch.allclose(p, 0.5 * a + 0.5 * b) for p, a, b in zip(target.parameters(), p_tg, p_on))

def test_momentum_update_by_hand():
    online, target = nn.Linear(1, 1, bias=False), nn.Linear(1, 1, bias=False)
    nn.init.constant_(online.weight, 1.0), nn.init.constant_(target.weight, 0.0)
    path = []
    for _ in range(3):
        momentum_update(online, target, 0.9)
        path.append(target.weight.item())
    assert path == pytest.approx([0.1, 0.19, 0.271])

@pytest.mark.parametrize('m, error', [(1.5, ValueError), (-0.1, ValueError), (float('nan'), ValueError),
                                      (float('inf'), ValueError), (True, TypeError), ('0.9', TypeError),
                                      (None, TypeError)])
def test_momentum_outside_unit_interval_is_an_error(m, error):
    online, target = nn.Linear(2, 2), nn.Linear(2, 2)
    before = target.weight.clone()
    with pytest.raises(error, match='m must'): momentum_update(online, target, m)
    assert torch.equal(target.weight, before)

@pytest.mark.parametrize('m, want', [(0, 1.0), (1, 0.0), (torch.tensor(0.5), 0.5), (0.25, 0.75)])
def test_momentum_accepts_numbers_and_scalar_tensors(m, want):
    online, target = nn.Linear(1, 1, bias=False), nn.Linear(1, 1, bias=False)
    nn.init.ones_(online.weight)
    nn.init.zeros_(target.weight)
    momentum_update(online, target, m)
    assert target.weight.item() == pytest.approx(want)

def test_momentum_update_rejects_non_modules():
    with pytest.raises(TypeError, match='online'): momentum_update([1.0], nn.Linear(2, 2), 0.5)
    with pytest.raises(TypeError, match='target'): momentum_update(nn.Linear(2, 2), torch.ones(2), 0.5)

def test_momentum_update_checks_everything_before_changing_anything():
    "Parameters match but buffers do not: nothing may be half-updated."
    online, target = (nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)),
                      nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)))
    target[1].register_buffer('extra', torch.zeros(1))
    before = snapshot(target)
    with pytest.raises(ValueError, match='buffers'): momentum_update(online, target, 0.5)
    assert all(torch.equal(v, before[k]) for k, v in target.state_dict().items())
    momentum_update(online, target, 0.5, buffers='keep')  # buffers are not paired when kept

@pytest.mark.parametrize('target, match', [
    (nn.Linear(2, 3), 'weight'),
    (nn.Sequential(nn.Linear(2, 2)), 'different parameters'),
    (nn.Linear(2, 2).double(), 'float64'),
    (nn.Linear(2, 2, device='meta'), 'meta'),
])
def test_momentum_update_rejects_networks_that_are_not_copies(target, match):
    with pytest.raises(ValueError, match=match): momentum_update(nn.Linear(2, 2), target, 0.9)

def test_unknown_buffer_policy():
    with pytest.raises(ValueError, match='buffers'):
        momentum_update(nn.Linear(2, 2), nn.Linear(2, 2), 0.9, buffers='mean')

def test_batch_statistics_only_normalises_by_the_batch_and_keeps_running_stats():
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(3).train()
    x = torch.randn(16, 3) * 4 + 2
    with batch_statistics_only(bn): y = bn(x)
    assert torch.equal(bn.running_mean, torch.zeros(3)) and int(bn.num_batches_tracked) == 0 and bn.track_running_stats
    assert torch.allclose(y.mean(0), torch.zeros(3), atol=1e-5)  # batch statistics were used

def test_batch_statistics_only_restores_tracking_after_an_error_and_leaves_untracked_layers():
    net = nn.Sequential(nn.BatchNorm1d(3), nn.BatchNorm1d(3, track_running_stats=False))
    with pytest.raises(RuntimeError, match='boom'):
        with batch_statistics_only(net): raise RuntimeError('boom')
    assert net[0].track_running_stats and not net[1].track_running_stats
    with pytest.raises(TypeError, match='module'):
        with batch_statistics_only(torch.ones(3)): pass

# --- MoCo ------------------------------------------------------------------------------------------------------------

def tiny_moco(seed=0, **kwargs):
    "Lesson 06's small MoCo: K = 40, m = 0.9, τ = 0.1 unless told otherwise; the queue seeded by `seed`."
    torch.manual_seed(0)
    encoder = SmallCNN(width=8, blocks=2)
    options = MoCoOptions(**{'queue_size': 40, 'momentum': 0.9, 'temperature': 0.1, **kwargs})
    return MoCo(encoder, ProjectionHead(encoder.feature_dim, 32, 16), options, MethodSetup(40, 12, 16, seed=seed))

def views(n=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, 16, 16, generator=g), torch.rand(n, 3, 16, 16, generator=g)

def key_params(model):
    return [p.detach().clone() for p in [*model.encoder_k.parameters(), *model.head_k.parameters()]]
def query_params(model):
    return [p.detach().clone() for p in [*model.encoder_q.parameters(), *model.head_q.parameters()]]

def reference_step(model, x_q, x_k):
    """One MoCo step from parts tested on their own: `momentum_update`, batch-statistics keys and `info_nce`
    against the queue as it was before the step (the pseudocode replay lives in the lesson). Changes `model`."""
    q = model.head_q(model.encoder_q(x_q))
    momentum_update(model.encoder_q, model.encoder_k, model.momentum)
    momentum_update(model.head_q, model.head_k, model.momentum)
    with torch.no_grad(), batch_statistics_only(model.encoder_k), batch_statistics_only(model.head_k):
        k = model.head_k(model.encoder_k(x_k))
    negatives = model.queue.negatives()
    loss = info_nce(q, k, negatives, model.temperature)
    return loss, F.normalize(torch.cat([negatives, k]), dim=1)[-model.queue.size:]

def test_forward_matches_the_reference_step_and_reads_before_enqueue():
    model = tiny_moco()
    for step in range(4):  # later steps have real keys in the queue, including the previous batch's; 48 > 40 wraps
        x1, x2 = views(seed=step)
        replica = copy.deepcopy(model)
        loss = model(x1, x2)
        want, queue = reference_step(replica, x1, x2)
        assert loss.ndim == 0 and torch.isclose(loss, want, atol=1e-5), step
        assert torch.allclose(model.queue.negatives(), queue, atol=1e-5), step
        assert all(torch.equal(a, b) for a, b in zip(key_params(model), key_params(replica)))
    assert int(model.queue.seen) == 48 and int(model.queue.pointer) == 48 % 40

def test_key_side_running_statistics_are_the_ema_of_the_query_side():
    "The key encoder's BatchNorm statistics move only by the momentum update, with the same m as the weights."
    model = tiny_moco(momentum=0.75)
    x1, x2 = views()
    model.encoder_q(x1 * 3 + 1)  # the query side's statistics drift away from the key side's
    running = lambda net: {k: v.clone() for k, v in net.state_dict().items() if 'running' in k}
    counters = lambda net: {k: v.clone() for k, v in net.state_dict().items() if 'num_batches' in k}
    key_before = running(model.encoder_k)
    model(x1, x2)  # queries first (their statistics move again), then the momentum update, then the keys
    query_after, key_after = running(model.encoder_q), running(model.encoder_k)
    assert key_after.keys() == key_before.keys() and len(key_after) > 0
    for name in key_after:
        assert torch.allclose(key_after[name], 0.75 * key_before[name] + 0.25 * query_after[name], atol=1e-6), name
    key_counters, query_counters = counters(model.encoder_k), counters(model.encoder_q)
    assert all(torch.equal(key_counters[k], query_counters[k]) for k in key_counters)  # copied, not averaged

def test_m_zero_copies_the_whole_key_side_buffers_included():
    "With m = 0 the whole key side (encoder and head, buffers included) is the query side after a step."
    model = tiny_moco(momentum=0.0)
    model(*views())
    for net_q, net_k in ((model.encoder_q, model.encoder_k), (model.head_q, model.head_k)):
        assert all(torch.equal(a, b) for a, b in zip(net_q.state_dict().values(), net_k.state_dict().values()))

def test_a_batch_is_never_its_own_negative():
    """Queries equal to their keys (m = 0, same view twice, no batch dependence): read-first keeps the loss far below
    log 2."""
    torch.manual_seed(0)
    encoder = SmallCNN(width=8, blocks=2, norm='group')
    model = MoCo(encoder, nn.Sequential(nn.Linear(encoder.feature_dim, 16)),
                 MoCoOptions(queue_size=32, momentum=0.0, temperature=0.05))
    x, _ = views()
    loss = model(x, x)
    assert loss < 0.1  # enqueue-first would put each positive among the negatives: loss >= log 2
    assert int(model.queue.seen) == 12

def test_forward_updates_queue_and_key_encoder():
    model = tiny_moco()
    x1, x2 = views()
    k0, q0 = key_params(model), query_params(model)
    assert all(torch.equal(a, b) for a, b in zip(k0, q0))  # the key side starts as a copy
    queue0 = model.queue.keys.clone()
    model(x1, x2)
    assert not torch.equal(model.queue.keys, queue0) and int(model.queue.pointer) == 12
    # the two sides were equal, so the first momentum update leaves the key side equal to the query side
    assert all(torch.allclose(a, b) for a, b in zip(key_params(model), q0))

def test_key_encoder_gets_no_gradient_and_only_momentum_moves_it():
    model = tiny_moco()
    optimiser = torch.optim.SGD(model.parameters(), lr=0.5, weight_decay=0.1)
    x1, x2 = views()
    loss = model(x1, x2)
    k0 = key_params(model)
    loss.backward()
    assert all(p.grad is None and not p.requires_grad
               for p in [*model.encoder_k.parameters(), *model.head_k.parameters()])
    assert all(p.grad is not None for p in model.encoder_q.parameters())
    optimiser.step()
    k1, q1 = key_params(model), query_params(model)
    assert all(torch.equal(a, b) for a, b in zip(k0, k1))
    assert any(not torch.equal(a, b) for a, b in zip(k0, q1))
    model(x1, x2)
    assert all(torch.allclose(k, 0.9 * a + 0.1 * b, atol=1e-6) for k, a, b in zip(key_params(model), k1, q1))

def test_key_forward_leaves_running_statistics_to_the_momentum_update():
    model = tiny_moco(momentum=1.0)  # frozen key side: nothing may change it
    before = snapshot(model.encoder_k)
    model(*views())
    assert all(torch.equal(v, before[k]) for k, v in model.encoder_k.state_dict().items() if v.is_floating_point())

def test_m_zero_key_side_is_the_query_side():
    model = tiny_moco(momentum=0.0)
    model(*views())
    assert all(torch.equal(a, b)
               for a, b in zip(model.encoder_q.state_dict().values(), model.encoder_k.state_dict().values()))

def test_eval_mode_changes_nothing():
    model = tiny_moco().eval()
    before = snapshot(model)
    loss = model(*views())
    assert torch.isfinite(loss) and all(torch.equal(v, before[k]) for k, v in model.state_dict().items())

def test_symmetric_loss_is_the_mean_of_both_directions():
    model = tiny_moco(symmetric=True)
    x1, x2 = views()
    r = copy.deepcopy(model)
    loss = model(x1, x2)
    q1, q2 = r.head_q(r.encoder_q(x1)), r.head_q(r.encoder_q(x2))
    momentum_update(r.encoder_q, r.encoder_k, r.momentum), momentum_update(r.head_q, r.head_k, r.momentum)
    with torch.no_grad(), batch_statistics_only(r.encoder_k), batch_statistics_only(r.head_k):
        k1, k2 = r.head_k(r.encoder_k(x1)), r.head_k(r.encoder_k(x2))
    negatives = r.queue.negatives()
    want = (info_nce(q1, k2, negatives, r.temperature) + info_nce(q2, k1, negatives, r.temperature)) / 2
    assert torch.isclose(loss, want, atol=1e-5) and int(model.queue.seen) == 24
    assert torch.allclose(model.queue.negatives()[-24:], F.normalize(torch.cat([k2, k1]), dim=1), atol=1e-5)

@pytest.mark.parametrize('splits', [2, 3, 6])
def test_shuffle_bn_puts_every_key_back_in_place(splits):
    "Without batch dependence (GroupNorm, no BatchNorm in the head), splitting and shuffling cannot change the loss."
    def model(s):
        torch.manual_seed(0)
        encoder = SmallCNN(width=8, blocks=2, norm='group')
        return MoCo(encoder, nn.Sequential(nn.Linear(encoder.feature_dim, 16)), MoCoOptions(queue_size=40, bn_splits=s))
    x1, x2 = views()
    plain = model(1)(x1, x2)
    assert torch.isclose(model(splits)(x1, x2, torch.Generator().manual_seed(splits)), plain, atol=1e-6)

@pytest.mark.parametrize('batch, splits', [(10, 4), (7, 3), (9, 4), (5, 2)])
def test_shuffle_bn_with_a_split_that_does_not_divide_the_batch(batch, splits):
    "Exactly `splits` sub-batches of at least 2, so a BatchNorm1d head never sees a sub-batch of one."
    model = tiny_moco(bn_splits=splits)
    seen = []
    model.head_k.register_forward_pre_hook(lambda module, args: seen.append(len(args[0])))
    x1, x2 = torch.rand(batch, 3, 16, 16), torch.rand(batch, 3, 16, 16)
    assert torch.isfinite(model(x1, x2, torch.Generator().manual_seed(0)))
    assert len(seen) == splits and min(seen) >= 2 and sum(seen) == batch and int(model.queue.seen) == batch

def test_shuffle_bn_changes_batchnorm_statistics():
    x1, x2 = views()
    assert not torch.isclose(tiny_moco(bn_splits=1)(x1, x2),
                             tiny_moco(bn_splits=3)(x1, x2, torch.Generator().manual_seed(0)))

def test_moco_state_round_trip(tmp_path):
    model = tiny_moco()
    for s in range(3): model(*views(seed=s))
    torch.save(model.state_dict(), tmp_path / 'moco.pt')
    restored = tiny_moco()
    restored.load_state_dict(torch.load(tmp_path / 'moco.pt'))
    assert int(restored.queue.pointer) == int(model.queue.pointer)
    x1, x2 = views(seed=5)
    assert torch.equal(model(x1, x2), restored(x1, x2))
    assert torch.equal(model.queue.keys, restored.queue.keys)

def test_head_without_out_dim_uses_its_last_linear():
    model = MoCo(nn.Flatten(), nn.Sequential(nn.Linear(12, 7), nn.ReLU(), nn.Linear(7, 5)), MoCoOptions(queue_size=8))
    assert model.queue.dim == 5
    with pytest.raises(ValueError, match='out_dim'): MoCo(nn.Flatten(), nn.ReLU())

@pytest.mark.parametrize('kwargs, error, match', [
    ({'momentum': 1.2}, ValueError, r'\[0, 1\]'),
    ({'momentum': -0.5}, ValueError, r'\[0, 1\]'),
    ({'momentum': True}, TypeError, 'momentum must'),
    ({'momentum': '0.9'}, TypeError, 'momentum must'),
    ({'temperature': 0}, ValueError, 'temperature'),
    ({'temperature': -0.1}, ValueError, 'temperature'),
    ({'temperature': float('nan')}, ValueError, 'temperature'),
    ({'temperature': float('inf')}, ValueError, 'temperature'),
    ({'temperature': True}, TypeError, 'temperature'),
    ({'queue_size': 0}, ValueError, 'size'),
    ({'queue_size': 2.5}, TypeError, 'size'),
    ({'bn_splits': 0}, ValueError, 'bn_splits'),
    ({'bn_splits': 2.0}, TypeError, 'bn_splits'),
    ({'symmetric': 'no'}, TypeError, 'symmetric'),
    ({'symmetric': 1}, TypeError, 'symmetric'),
    ({'seed': 0.5}, TypeError, 'seed'),
])
def test_moco_rejects_bad_settings(kwargs, error, match):
    with pytest.raises(error, match=match): tiny_moco(**kwargs)

def test_moco_rejects_non_modules_and_accepts_a_scalar_tensor_temperature():
    with pytest.raises(TypeError, match='encoder'): MoCo(lambda x: x, nn.Linear(2, 2))
    with pytest.raises(TypeError, match='head'): MoCo(nn.Flatten(), 'head')
    model = tiny_moco(temperature=torch.tensor(0.2), momentum=torch.tensor(0.5))
    assert model.temperature == pytest.approx(0.2) and model.momentum == 0.5 and isinstance(model.temperature, float)
    assert 'momentum=0.5' in repr(model) and 'bn_splits=1' in repr(model)

def test_moco_rejects_bad_views():
    model = tiny_moco(bn_splits=4)
    x1, x2 = views(6)
    before = snapshot(model)
    with pytest.raises(ValueError, match='same shape'): model(x1, x2[:5])
    with pytest.raises(ValueError, match='bn_splits'): model(x1, x2)
    with pytest.raises(TypeError, match='view1 must be a torch.Tensor'): model(x1.tolist(), x2)
    x1, x2 = views(8)
    with pytest.raises(TypeError, match='view2 must be floating point'): model(x1, (x2 * 255).to(torch.uint8))
    with pytest.raises(TypeError, match='float64'): model(x1.double(), x2.double())
    with pytest.raises(ValueError, match='NaN'): model(x1, torch.full_like(x2, float('nan')))
    with pytest.raises(ValueError, match='view1 must be a batch'): model(torch.rand(8), torch.rand(8))
    with pytest.raises(ValueError, match='batch of 0'): model(x1[:0], x2[:0])
    with pytest.raises(TypeError, match='generator'): model(x1, x2, generator=0)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # nothing was half-done

def test_size_one_batch_is_a_clear_error():
    model = tiny_moco()
    x1, x2 = views(1)
    with pytest.raises(ValueError, match='at least 2'): model(x1, x2)

def test_channels_last_and_non_contiguous_views_give_the_same_loss():
    x1, x2 = views()
    plain = tiny_moco()(x1, x2)
    assert torch.isclose(tiny_moco()(x1.to(memory_format=torch.channels_last), x2), plain, atol=1e-5)
    strided = torch.rand(12, 3, 16, 32)[..., ::2]  # a view with a stride of 2 along the width
    assert not strided.is_contiguous()
    assert torch.isclose(tiny_moco()(strided, x2), tiny_moco()(strided.contiguous(), x2), atol=1e-6)

# --- training loop ---------------------------------------------------------------------------------------------------

def test_train_moco_smoke():
    from contrastive_nb.data import make_shapes
    model = tiny_moco(queue_size=30)
    k0, q0 = key_params(model), query_params(model)
    history = train_moco(model, make_shapes(24, size=16, seed=2).images, AugmentationPolicy(size=16), epochs=2,
                         batch_size=8, progress=False)
    assert list(history.columns) == ['epoch', 'step', 'loss'] and len(history) == 6 and history.loss.notna().all()
    assert int(model.queue.seen) == 48
    assert any(not torch.equal(a, b) for a, b in zip(k0, key_params(model)))
    assert any(not torch.equal(a, b) for a, b in zip(q0, query_params(model)))

def test_train_moco_is_reproducible():
    from contrastive_nb.data import make_shapes
    images = make_shapes(16, size=16, seed=2).images
    runs = [train_moco(tiny_moco(bn_splits=2), images, AugmentationPolicy(size=16), epochs=1, batch_size=8, seed=3,
                       progress=False) for _ in range(2)]
    assert runs[0].loss.tolist() == runs[1].loss.tolist()

@pytest.mark.parametrize('kwargs, error, match', [
    ({'batch_size': 4}, ValueError, 'at least 2 × bn_splits'),  # refused before the first step
    ({'batch_size': 64}, ValueError, 'at least batch_size'),
    ({'batch_size': 8.0}, TypeError, 'batch_size'),
    ({'batch_size': 0}, ValueError, 'batch_size'),
    ({'batch_size': 8, 'temperature': 0.2}, TypeError, 'temperature'),
    ({'batch_size': 8, 'epochs': 0}, ValueError, 'epochs'),
    ({'batch_size': 8, 'lr': -1.0}, ValueError, 'lr'),
])
def test_train_moco_rejects_bad_arguments(kwargs, error, match):
    images = torch.rand(16, 3, 16, 16)
    model = tiny_moco(bn_splits=4)
    with pytest.raises(error, match=match): train_moco(model, images, progress=False, **kwargs)
    assert int(model.queue.seen) == 0

@pytest.mark.parametrize('images, error', [(torch.rand(16, 16, 16), ValueError), (torch.rand(0, 3, 16, 16), ValueError),
                                           ([[0.0]], TypeError)])
def test_train_moco_rejects_bad_images(images, error):
    with pytest.raises(error, match='images'): train_moco(tiny_moco(), images, batch_size=8, progress=False)

def test_train_moco_forwards_its_options_and_trains_a_model_left_in_eval_mode():
    from contrastive_nb.data import make_shapes
    images = make_shapes(16, size=16, seed=2).images
    policy = AugmentationPolicy(size=16)
    runs = {seed: train_moco(tiny_moco(), images, policy, epochs=1, batch_size=8, seed=seed, progress=False)
            for seed in (3, 4)}
    assert runs[3].loss.tolist() != runs[4].loss.tolist()  # the seed reached train_method
    slow, fast = tiny_moco().eval(), tiny_moco().eval()  # train_moco switches them to training mode
    q0 = query_params(slow)
    train_moco(slow, images, policy, epochs=1, batch_size=8, lr=1e-9, progress=False)
    train_moco(fast, images, policy, epochs=1, batch_size=8, lr=1e-2, progress=False)
    assert slow.training and int(slow.queue.seen) == 16
    moved = lambda model: max((a - b).abs().max().item() for a, b in zip(query_params(model), q0))
    assert moved(slow) < 1e-6 < 1e-3 < moved(fast)  # lr reached the optimiser

def test_train_moco_needs_a_moco():
    with pytest.raises(TypeError, match='MoCo'): train_moco(nn.Linear(2, 2), torch.rand(16, 3, 16, 16), progress=False)

# --- faults found by probing (issue 23) ---------------------------------------------------------------------------

def test_queue_seed_beyond_what_torch_takes_is_named():
    "seed=2**70 raised 'Overflow when unpacking long long', naming nothing."
    from contrastive_nb.moco import MoCoQueue
    with pytest.raises(ValueError, match='seed'): MoCoQueue(4, 3, seed=2 ** 70)
    assert MoCoQueue(4, 3, seed=2 ** 64 - 1).keys.shape == (4, 3)
