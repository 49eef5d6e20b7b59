"""Package tests for contrastive_nb.evaluate: embed, weighted kNN, linear probe, retrieval and graded metrics,
collapse measures."""
import math

import pytest
import torch
from torch import nn

from contrastive_nb.evaluate import (covariance_spectrum, effective_rank, embed, first_relevant_rank, knn_accuracy,
                                    knn_predict, linear_probe, normalized_std, rank_of_positive, ranking_metrics,
                                    retrieval_metrics, ndcg_at_k, average_precision)

def gen(seed: int) -> torch.Generator: return torch.Generator().manual_seed(seed)

# --- embed ---------------------------------------------------------------------------------------------------------

@pytest.fixture
def net():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    model.train()(torch.rand(16, 3, 8, 8))  # running statistics that differ from the batch statistics
    return model

@pytest.mark.parametrize('batch_size', [1, 3, 10, 512])
def test_embed_matches_a_direct_forward_pass_in_eval_mode(net, batch_size):
    images = torch.rand(10, 3, 8, 8, generator=gen(1))
    with torch.no_grad(): direct = net.eval()(images)
    net.train()
    features = embed(net, images, batch_size=batch_size)
    assert features.shape == (10, 4) and features.dtype == torch.float32 and features.device.type == 'cpu'
    assert not features.requires_grad
    torch.testing.assert_close(features, direct)

def test_embed_restores_every_module_mode(net):
    images = torch.rand(5, 3, 8, 8)
    net.train(); embed(net, images)
    assert all(m.training for m in net.modules())
    net.eval(); embed(net, images)
    assert not any(m.training for m in net.modules())
    net.train(); net[1].eval(); embed(net, images)  # a frozen BatchNorm inside a training model
    assert [m.training for m in net] == [True, False, True, True, True] and net.training

def test_embed_restores_mode_when_the_model_raises(net):
    net.train()
    with pytest.raises(RuntimeError): embed(net, torch.rand(4, 5, 8, 8))
    assert all(m.training for m in net.modules())

def test_embed_does_not_build_a_graph(net):
    seen = []
    net.register_forward_hook(lambda m, i, o: seen.append((torch.is_grad_enabled(), m.training)))
    embed(net, torch.rand(4, 3, 8, 8), batch_size=2)
    assert seen == [(False, False), (False, False)]

def test_embed_scales_uint8_and_flattens(net):
    u8 = torch.randint(0, 256, (6, 3, 8, 8), dtype=torch.uint8, generator=gen(2))
    with torch.no_grad(): direct = net.eval()(u8.float() / 255)
    torch.testing.assert_close(embed(net, u8, batch_size=4), direct)
    pixels = torch.rand(6, 3, 4, 4)
    assert torch.equal(embed(nn.Flatten(), pixels), pixels.flatten(1))
    assert embed(nn.Identity(), pixels).shape == (6, 48)  # feature maps are flattened

def test_embed_casts_floating_inputs_to_the_model_dtype():
    model = nn.Linear(4, 2).double()
    out = embed(model, torch.rand(3, 4))
    assert out.dtype == torch.float32 and out.shape == (3, 2)

@pytest.mark.parametrize('call,error,match', [
    (lambda net, x: embed(net, x[:0]), ValueError, 'images is empty'),
    (lambda net, x: embed(net, x[0, 0, 0]), ValueError, r'images must be a batch \(N, ...\)'),
    (lambda net, x: embed(net, x, batch_size=0), ValueError, 'batch_size must lie in'),
    (lambda net, x: embed(net, x, batch_size=True), TypeError, 'batch_size must be an int'),
    (lambda net, x: embed(nn.Flatten(0), x), ValueError, 'must return a'),
    (lambda net, x: embed(net, x.numpy()), TypeError, 'torch.Tensor'),
    (lambda net, x: embed(lambda b: b, x), TypeError, 'model must be a torch.nn.Module'),
    (lambda net, x: embed(net, x.long()), TypeError, 'images must be floating point or uint8'),
    (lambda net, x: embed(net, x > 0.5), TypeError, 'images must be floating point or uint8'),
    (lambda net, x: embed(net, x.index_fill(0, torch.tensor([2]), float('nan'))), ValueError, 'images contains NaN'),
    (lambda net, x: embed(net, x, device='gpu7'), ValueError, "device 'gpu7'"),
    (lambda net, x: embed(net, x, device=0.5), TypeError, 'device must be'),
])
def test_embed_bad_inputs(net, call, error, match):
    with pytest.raises(error, match=match): call(net, torch.rand(4, 3, 8, 8))

def test_embed_refuses_non_finite_features():
    "A model that returns NaN (diverged weights) is reported, not passed on to the kNN or the probe."
    model = nn.Linear(4, 2)
    with torch.no_grad(): model.weight[1, 0] = float('nan')
    with pytest.raises(ValueError, match='NaN or inf features .* image 0'): embed(model, torch.rand(3, 4))

def test_embed_layouts():
    "channels_last and non-contiguous images give the same features as contiguous ones."
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten())
    x = torch.rand(5, 3, 6, 6)
    want = embed(model, x)
    torch.testing.assert_close(embed(model, x.to(memory_format=torch.channels_last)), want)
    torch.testing.assert_close(embed(model, torch.rand(5, 3, 6, 12)[..., ::2].copy_(x), batch_size=2), want)

# --- knn_predict ---------------------------------------------------------------------------------------------------

def knn_by_hand(train_x, train_y, query_x, k, tau, num_classes, exclude_self=False):
    "The definition: sort by cosine, add exp(s / tau) to each of the k nearest's class; ties to the smaller class."
    preds = []
    for i, q in enumerate(query_x):
        sims = []
        for j, (x, y) in enumerate(zip(train_x, train_y)):
            if exclude_self and i == j: continue
            cos = float(q @ x) / math.sqrt(float(q @ q) * float(x @ x))
            sims.append((cos, int(y)))
        totals = [0.0] * num_classes
        for s, y in sorted(sims, reverse=True)[:k]: totals[y] += math.exp(s / tau)
        preds.append(max(range(num_classes), key=lambda c: (totals[c], -c)))
    return torch.tensor(preds)

@pytest.fixture(scope='module')
def data():
    g = gen(0)
    return (torch.randn(60, 6, generator=g, dtype=torch.float64), torch.randint(5, (60,), generator=g),
            torch.randn(17, 6, generator=g, dtype=torch.float64))

@pytest.mark.parametrize('k,tau', [(1, 0.07), (3, 0.07), (10, 0.5), (25, 0.1), (59, 1.0), (500, 0.2)])
def test_knn_matches_brute_force(data, k, tau):
    tx, ty, qx = data
    assert torch.equal(knn_predict(tx, ty, qx, k, tau), knn_by_hand(tx, ty, qx, k, tau, 5))

@pytest.mark.parametrize('k,tau', [(1, 0.07), (4, 0.07), (30, 0.3)])
def test_knn_exclude_self_matches_brute_force(data, k, tau):
    tx, ty, _ = data
    assert torch.equal(knn_predict(tx, ty, tx, k, tau, exclude_self=True), knn_by_hand(tx, ty, tx, k, tau, 5, True))

def test_knn_k1_is_the_nearest_neighbour(data):
    tx, ty, qx = data
    cos = (qx / qx.norm(dim=1, keepdim=True)) @ (tx / tx.norm(dim=1, keepdim=True)).T
    assert torch.equal(knn_predict(tx, ty, qx, k=1), ty[cos.argmax(1)])

def test_knn_exclude_self_removes_the_self_vote(data):
    tx, ty, _ = data
    assert torch.equal(knn_predict(tx, ty, tx, k=1), ty)  # every point is its own nearest neighbour
    cos = (tx / tx.norm(dim=1, keepdim=True)) @ (tx / tx.norm(dim=1, keepdim=True)).T
    assert torch.equal(knn_predict(tx, ty, tx, k=1, exclude_self=True), ty[cos.fill_diagonal_(-2).argmax(1)])

def test_knn_exclude_self_with_duplicate_points():
    "A duplicate of a point is a different training point and still votes; only the point itself is excluded."
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    y = torch.tensor([0, 1, 1])
    assert knn_predict(x, y, x, k=1, exclude_self=True).tolist()[:2] == [1, 0]

@pytest.mark.parametrize('chunk_size', [1, 2, 5, 16, 17, 10_000])
def test_knn_chunking_does_not_change_results(data, chunk_size):
    tx, ty, qx = data
    assert torch.equal(knn_predict(tx, ty, qx, 7, chunk_size=chunk_size), knn_predict(tx, ty, qx, 7))
    assert torch.equal(knn_predict(tx, ty, tx, 7, exclude_self=True, chunk_size=chunk_size),
                       knn_predict(tx, ty, tx, 7, exclude_self=True))

def test_knn_k_is_clamped(data):
    tx, ty, qx = data
    assert torch.equal(knn_predict(tx, ty, qx, k=10_000), knn_predict(tx, ty, qx, k=60))
    assert torch.equal(knn_predict(tx[:2], ty[:2], tx[:2], k=10, exclude_self=True), ty[[1, 0]])

@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_knn_small_temperature_does_not_overflow(data, dtype):
    "exp(1 / 1e-4) overflows even float64; the vote, divided by its largest weight, is the nearest neighbour's class."
    tx, ty, qx = data
    cos = (qx / qx.norm(dim=1, keepdim=True)) @ (tx / tx.norm(dim=1, keepdim=True)).T
    assert torch.equal(knn_predict(tx.to(dtype), ty, qx.to(dtype), k=20, temperature=1e-4), ty[cos.argmax(1)])

def test_knn_is_scale_invariant_and_dtype_mixing(data):
    tx, ty, qx = data
    expected = knn_predict(tx, ty, qx, k=9)
    assert torch.equal(knn_predict(1e3 * tx, ty, 1e-3 * qx, k=9), expected)
    assert torch.equal(knn_predict(tx.float(), ty, qx, k=9), expected)

def test_knn_num_classes_and_ties():
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    assert knn_predict(x, torch.tensor([3, 1]), x[:1], k=2).item() == 1  # equal votes: the smaller class
    assert knn_predict(x, torch.tensor([0, 0]), x[:1], num_classes=4).item() == 0

def test_knn_accuracy(data):
    tx, ty, qx = data
    pred = knn_predict(tx, ty, qx, k=5)
    assert knn_accuracy(tx, ty, qx, pred, k=5) == 1.0
    assert knn_accuracy(tx, ty, qx, (pred + 1) % 5, k=5) == 0.0
    half = pred.clone(); half[:8] = (half[:8] + 1) % 5
    assert knn_accuracy(tx, ty, qx, half, k=5) == pytest.approx(9 / 17)
    assert isinstance(knn_accuracy(tx, ty, qx, pred), float)

@pytest.mark.parametrize('call,error,match', [
    (lambda tx, ty, qx: knn_predict(tx, ty[:10], qx), ValueError, r'train_labels must have shape \(60,\)'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx, k=0), ValueError, r'k must lie in \[1, inf\]'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx, k=2.5), TypeError, 'k must be an int'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx, k=True), TypeError, 'k must be an int'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx, temperature=0), ValueError, r'temperature must be .*\(0, inf\)'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx, temperature=-0.1), ValueError, 'temperature must be'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx, temperature=float('nan')), ValueError, 'temperature must be'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx, temperature=float('inf')), ValueError, 'temperature must be'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx, temperature=True), TypeError, 'temperature must be'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx, exclude_self=1), TypeError, 'exclude_self must be True or False'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx, num_classes=0), ValueError, 'num_classes must lie in'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx[0]), ValueError, 'query_features must have 2 dimensions'),
    (lambda tx, ty, qx: knn_predict(tx[None], ty, qx), ValueError, 'train_features must have 2 dimensions'),
    (lambda tx, ty, qx: knn_predict(tx[:0], ty[:0], qx), ValueError, 'train_features is empty'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx[:0]), ValueError, 'query_features is empty'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx.index_fill(0, torch.tensor([3]), math.nan)), ValueError,
     'query_features contains NaN'),
    (lambda tx, ty, qx: knn_predict(tx.index_fill(0, torch.tensor([3]), math.inf), ty, qx), ValueError,
     'train_features contains NaN or inf'),
    (lambda tx, ty, qx: knn_predict(tx, ty > 2, qx), TypeError, 'boolean mask'),
    (lambda tx, ty, qx: knn_predict(tx, ty[:, None], qx), ValueError, 'train_labels must have 1 dimension'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx[:, :3]), ValueError, 'same number of features'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx, exclude_self=True), ValueError, 'exclude_self=True means'),
    (lambda tx, ty, qx: knn_predict(tx[:1], ty[:1], tx[:1], exclude_self=True), ValueError, 'at least two'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx, num_classes=4), ValueError, 'num_classes is 4'),
    (lambda tx, ty, qx: knn_predict(tx, ty - 1, qx), ValueError, 'non-negative'),
    (lambda tx, ty, qx: knn_predict(tx, ty, qx, chunk_size=0), ValueError, 'chunk_size'),
    (lambda tx, ty, qx: knn_predict(tx, ty.double(), qx), TypeError, 'train_labels must have an integer dtype'),
    (lambda tx, ty, qx: knn_predict(tx.long(), ty, qx), TypeError, 'floating point'),
    (lambda tx, ty, qx: knn_predict(tx.numpy(), ty, qx), TypeError, 'torch.Tensor'),
    (lambda tx, ty, qx: knn_accuracy(tx, ty, qx, ty), ValueError, r'query_labels must have shape \(17,\)'),
    (lambda tx, ty, qx: knn_predict(torch.cat([tx, torch.zeros(1, 6, dtype=tx.dtype)]), torch.cat([ty, ty[:1]]), qx),
     ValueError, 'train_features: .*zero vector'),
])
def test_knn_bad_inputs(data, call, error, match):
    with pytest.raises(error, match=match): call(*data)

# --- linear_probe --------------------------------------------------------------------------------------------------

def separable(n: int, seed: int, d: int = 20, classes: int = 3, margin: float = 1.0):
    "Classes are the argmax of a fixed linear map (with a margin); feature scales span a factor of 1000."
    w = torch.randn(d, classes, generator=gen(99))
    x = torch.randn(4 * n, d, generator=gen(seed))
    top2 = (x @ w).topk(2, dim=1).values
    x = x[top2[:, 0] - top2[:, 1] > margin][:n]
    assert len(x) == n
    return x * torch.logspace(-1.5, 1.5, d), (x @ w).argmax(1)

@pytest.fixture(scope='module')
def probe_data(): return (*separable(600, 0), *separable(300, 1))

def test_linear_probe_separates_separable_data(probe_data):
    assert linear_probe(*probe_data) >= 0.99

def test_linear_probe_is_deterministic(probe_data):
    torch.manual_seed(1); a = linear_probe(*probe_data, epochs=10)
    torch.manual_seed(2); b = linear_probe(*probe_data, epochs=10)
    state = torch.random.get_rng_state()
    with torch.no_grad(): c = linear_probe(*probe_data, epochs=10)
    assert a == b == c
    assert torch.equal(torch.random.get_rng_state(), state)  # the global random state is not touched

def test_linear_probe_seed_changes_only_the_batch_order(probe_data):
    a, b = linear_probe(*probe_data, epochs=3, seed=0), linear_probe(*probe_data, epochs=3, seed=1)
    assert 0.8 < a <= 1 and 0.8 < b <= 1
    tx, ty, vx, vy = probe_data  # a single full batch has no order: every seed gives the same probe
    assert (linear_probe(tx, ty, vx, vy, epochs=3, batch_size=600, seed=0)
            == linear_probe(tx, ty, vx, vy, epochs=3, batch_size=600, seed=5))

def test_linear_probe_uses_train_statistics_only(probe_data):
    "Shifting and scaling the features (train and test alike) changes nothing: the probe sees standardised features."
    tx, ty, vx, vy = probe_data
    shift, scale = torch.randn(tx.shape[1], generator=gen(3)), torch.rand(tx.shape[1], generator=gen(4)) + 0.5
    a = linear_probe(tx, ty, vx, vy, epochs=5)
    b = linear_probe(tx * scale + shift, ty, vx * scale + shift, vy, epochs=5)
    assert abs(a - b) < 0.01

def test_linear_probe_constant_feature_and_random_labels(probe_data):
    tx, ty, vx, vy = probe_data
    with_const = linear_probe(torch.cat([tx, torch.ones(len(tx), 1)], 1), ty,
                              torch.cat([vx, torch.ones(len(vx), 1)], 1), vy, epochs=5)
    assert math.isfinite(with_const) and with_const > 0.8
    noise = linear_probe(tx, torch.randint(3, (600,), generator=gen(5)), vx, torch.randint(3, (300,), generator=gen(6)),
                         epochs=5)
    assert noise < 0.5

def test_linear_probe_test_labels_beyond_train_classes():
    # A test label the training set never has (2) gets an output, never predicted: its logit is only pushed down.
    # Two classes far apart decide the rest by a wide margin (trained on one class only, the direction of the
    # probe's weights would come from the rounding of a mean of standardised features: thread-dependent).
    noise = 0.1 * torch.randn(40, 4, generator=gen(7))
    x = noise + torch.tensor([3.0, 0, 0, 0]) * torch.arange(40).remainder(2).mul(2).sub(1)[:, None]
    y = torch.arange(40).remainder(2)  # class 1 at +3, class 0 at -3 on the first feature
    test_labels = torch.tensor([0, 0, 1, 1, 2])  # the last point sits with class 1 but is labelled 2
    test = torch.tensor([[-3.0, 0, 0, 0], [-3.0, 0, 0, 0], [3.0, 0, 0, 0], [3.0, 0, 0, 0], [3.0, 0, 0, 0]])
    assert linear_probe(x, y, test, test_labels, epochs=20) == pytest.approx(0.8)

@pytest.mark.parametrize('kwargs,error,match', [
    (dict(train_labels=torch.zeros(10, dtype=torch.long)), ValueError, r'train_labels must have shape \(600,\)'),
    (dict(test_labels=torch.zeros(10, dtype=torch.long)), ValueError, r'test_labels must have shape \(300,\)'),
    (dict(test_features=torch.randn(300, 5)), ValueError, 'same number of features'),
    (dict(train_features=torch.randn(600)), ValueError, 'train_features must have 2 dimensions'),
    (dict(lr=1e38), ValueError, r'lr must be a finite number in \(0, 1e\+06\]'),
    (dict(weight_decay=1e300), ValueError, 'weight_decay must be'),
    (dict(epochs=0), ValueError, 'epochs'), (dict(lr=0.0), ValueError, r'lr must be .*\(0, 1e\+06\]'),
    (dict(weight_decay=-1.0), ValueError, 'weight_decay'), (dict(batch_size=0), ValueError, 'batch_size'),
    (dict(train_labels=torch.zeros(600)), TypeError, 'train_labels must have an integer dtype'),
    (dict(train_labels=torch.zeros(600, dtype=torch.bool)), TypeError, 'boolean mask'),
    (dict(epochs=2.0), TypeError, 'epochs must be an int'), (dict(batch_size=True), TypeError, 'batch_size'),
    (dict(lr=float('nan')), ValueError, 'lr must be'), (dict(lr=float('inf')), ValueError, 'lr must be'),
    (dict(weight_decay=float('nan')), ValueError, 'weight_decay'), (dict(lr='0.1'), TypeError, 'lr must be'),
    (dict(seed=-1), ValueError, 'seed must lie in'), (dict(seed=0.5), TypeError, 'seed must be an int'),
    (dict(test_features=torch.full((300, 20), math.nan)), ValueError, 'test_features contains NaN'),
    (dict(train_features=torch.zeros(0, 20), train_labels=torch.zeros(0, dtype=torch.long)), ValueError,
     'train_features is empty'),
    (dict(train_features=torch.ones(600, 20, dtype=torch.long)), TypeError, 'train_features must be floating'),
])
def test_linear_probe_bad_inputs(probe_data, kwargs, error, match):
    args = dict(zip(('train_features', 'train_labels', 'test_features', 'test_labels'), probe_data)) | kwargs
    with pytest.raises(error, match=match): linear_probe(**args)

def test_linear_probe_refuses_nan_features(probe_data):
    "NaN features used to give an accuracy (every prediction class 0); now they are refused by name."
    tx, ty, vx, vy = probe_data
    bad = tx.clone()
    bad[5, 3] = math.nan
    with pytest.raises(ValueError, match=r'train_features contains NaN or inf \(the first at index \(5, 3\)\)'):
        linear_probe(bad, ty, vx, vy, epochs=1)

def test_linear_probe_reports_features_that_overflow_when_standardised(probe_data):
    """Features of 1e38 fit float32 but their mean does not: it was inf, the standardised features NaN, and the
    message blamed lr ('the probe diverged'); now the features are named before training. With finite standardised
    features and lr <= 1e6 no divergence was found (lr=1e6 with weight_decay=1e6, batch_size=1): the check stays."""
    tx, ty, vx, vy = probe_data
    with pytest.raises(ValueError, match='train_features overflow float32 once standardised'):
        linear_probe(tx * 1e36, ty, vx, vy, epochs=2, lr=1e6)

def test_linear_probe_standardises_tiny_and_offset_features(probe_data):
    """Without standardisation, Adam's steps of about lr cannot reach the weights that features of scale 1e-4
    need within a few epochs, and an offset of 1e4 makes every step overshoot: both fall towards chance."""
    tx, ty, vx, vy = probe_data
    scale, reference = tx.std(0), linear_probe(tx, ty, vx, vy, epochs=20)
    assert reference > 0.95
    assert abs(linear_probe(1e-4 * tx / scale, ty, 1e-4 * vx / scale, vy, epochs=20) - reference) < 0.02
    assert abs(linear_probe(tx / scale + 1e4, ty, vx / scale + 1e4, vy, epochs=20) - reference) < 0.02

def test_linear_probe_standardises_test_features_with_train_statistics(probe_data):
    """A test set shifted along the class boundary must be scored with the training mean (the shift stays and
    costs accuracy); standardising it with its own mean would hide the shift."""
    tx, ty, vx, vy = probe_data
    direction = torch.randn(tx.shape[1], 3, generator=gen(99))[:, 0] * torch.logspace(-1.5, 1.5, tx.shape[1])
    shifted = vx + 10 * direction / direction.norm() * tx.std(0).norm()
    assert linear_probe(tx, ty, shifted, vy, epochs=5) < 0.7 < linear_probe(tx, ty, vx, vy, epochs=5)

# --- retrieval -----------------------------------------------------------------------------------------------------

def test_retrieval_hand_computed_example():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    k = torch.tensor([[1.0, 0.0], [1.0, 0.2], [0.1, 1.0], [1.0, 1.0]])
    # cosines of query 1 with keys: 0, 0.196, 0.995, 0.707 -> its positive (key 1) ranks 3rd
    pos = torch.tensor([0, 1, 3])
    m = retrieval_metrics(q, k, pos)
    assert m == {'recall@1': 2 / 3, 'recall@5': 1.0, 'MRR': pytest.approx(7 / 9), 'mean_rank': pytest.approx(5 / 3)}
    # by default key i is query i's positive: query 2's key 2 (cosine 0.774) is beaten by keys 1 and 3
    assert retrieval_metrics(q, k) == {'recall@1': 1 / 3, 'recall@5': 1.0, 'MRR': pytest.approx(5 / 9),
                                       'mean_rank': pytest.approx((1 + 3 + 3) / 3)}

def test_retrieval_ties_are_pessimistic():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    k = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0]])  # key 2 ties query 0's positive exactly
    assert rank_of_positive(q @ k.T / k.norm(dim=1), torch.tensor([0, 1])).tolist() == [2, 1]
    assert retrieval_metrics(q, k)['mean_rank'] == 1.5
    assert retrieval_metrics(torch.ones(3, 4), torch.ones(5, 4)) == {'recall@1': 0.0, 'recall@5': 1.0,
                                                                     'MRR': pytest.approx(0.2), 'mean_rank': 5.0}

def brute_force_ranks(queries, keys, positive):
    "Sort every key by cosine (float64) and find the positive's 1-based position."
    qn, kn = queries / queries.norm(dim=1, keepdim=True), keys / keys.norm(dim=1, keepdim=True)
    ranks = []
    for i, p in enumerate(positive):
        order = sorted(range(len(keys)), key=lambda j: -float(qn[i] @ kn[j]))
        ranks.append(order.index(int(p)) + 1)
    return torch.tensor(ranks, dtype=torch.float64)

@pytest.mark.parametrize('seed,chunk_size', [(0, 1024), (1, 1), (2, 7)])
def test_retrieval_matches_brute_force(seed, chunk_size):
    g = gen(seed)
    q, k = torch.randn(40, 5, generator=g, dtype=torch.float64), torch.randn(55, 5, generator=g, dtype=torch.float64)
    pos = torch.randint(55, (40,), generator=g)
    ranks = brute_force_ranks(q, k, pos)
    m = retrieval_metrics(q, k, pos, chunk_size=chunk_size)
    assert m['recall@1'] == pytest.approx((ranks == 1).double().mean().item())
    assert m['recall@5'] == pytest.approx((ranks <= 5).double().mean().item())
    assert m['MRR'] == pytest.approx((1 / ranks).mean().item())
    assert m['mean_rank'] == pytest.approx(ranks.mean().item())
    diag = brute_force_ranks(q, k, torch.arange(40))
    assert retrieval_metrics(q, k)['mean_rank'] == pytest.approx(diag.mean().item())

def test_retrieval_identity_and_random_baseline():
    x = torch.randn(200, 16, generator=gen(3))
    assert retrieval_metrics(x, x) == {'recall@1': 1.0, 'recall@5': 1.0, 'MRR': 1.0, 'mean_rank': 1.0}
    m = retrieval_metrics(x, torch.randn(200, 16, generator=gen(4)))
    assert 70 < m['mean_rank'] < 130  # random keys: about (K + 1) / 2

# --- first relevant rank, ranking metrics -------------------------------------------------------------------------

def rank_by_sorting(scores, relevant):
    "Brute force: sort one row (ties: irrelevant first), the 1-based place of the first relevant document."
    ranks = []
    for row, rel in zip(scores.tolist(), relevant.tolist()):
        order = sorted(range(len(row)), key=lambda j: (-row[j], rel[j]))
        ranks.append(1 + next(n for n, j in enumerate(order) if rel[j]))
    return ranks

@pytest.mark.parametrize('seed', [0, 1, 2])
def test_first_relevant_rank_against_sorting_with_many_ties(seed):
    g = gen(seed)
    scores = torch.randint(0, 5, (40, 25), generator=g).double()
    q, c = torch.randint(0, 6, (40,), generator=g), torch.arange(25) % 6
    relevant = q[:, None] == c[None, :]
    ranks = first_relevant_rank(scores, relevant)
    assert ranks.dtype == torch.int64 and ranks.tolist() == rank_by_sorting(scores, relevant)
    assert first_relevant_rank(scores.long(), relevant).tolist() == ranks.tolist()  # integer scores too
    m = ranking_metrics(ranks, ks=(1, 3, 10))
    for k in (1, 3, 10):
        assert math.isclose(m[f'recall@{k}'], sum(r <= k for r in ranks.tolist()) / 40)
    assert math.isclose(m['MRR'], sum(1 / r for r in ranks.tolist()) / 40)
    assert math.isclose(m['mean_rank'], sum(ranks.tolist()) / 40)

def test_first_relevant_rank_ties_count_against_the_query():
    scores = torch.tensor([[0.5, 0.5, 0.1, 0.5], [2.0, 1.0, 1.0, 0.0]])
    assert first_relevant_rank(scores, torch.tensor([[False, True, False, False],
                                                     [False, False, True, False]])).tolist() == [3, 3]
    # relevant documents tied with each other do not push each other down
    assert first_relevant_rank(scores, torch.tensor([[True, True, False, True],
                                                     [False, True, True, False]])).tolist() == [1, 2]
    # a collapsed scorer: every query gets the worst rank its irrelevant documents allow
    flat = torch.zeros(3, 6)
    assert first_relevant_rank(flat, torch.eye(3, 6, dtype=torch.bool)).tolist() == [6, 6, 6]
    # one True per row is rank_of_positive
    assert rank_of_positive(scores, torch.tensor([1, 2])).tolist() == [3, 3]

def test_first_relevant_rank_infinite_scores_and_no_queries():
    inf = torch.tensor([[math.inf, 0.0, math.inf], [-math.inf, -math.inf, 0.0]])
    rel = torch.tensor([[False, False, True], [True, False, False]])
    assert first_relevant_rank(inf, rel).tolist() == [2, 3]
    assert first_relevant_rank(torch.zeros(0, 4), torch.zeros(0, 4, dtype=torch.bool)).shape == (0,)

@pytest.mark.parametrize('call,error,match', [
    (lambda s, r: first_relevant_rank(s, r.long()), TypeError, 'relevant must be a boolean mask'),
    (lambda s, r: first_relevant_rank(s, r[:2]), ValueError, r'relevant must have the shape of scores, \(3, 4\)'),
    (lambda s, r: first_relevant_rank(s, r & False), ValueError, r'relevant\[0\] is all False'),
    (lambda s, r: first_relevant_rank(s.index_fill(0, torch.tensor([1]), math.nan), r), ValueError, 'NaN'),
    (lambda s, r: first_relevant_rank(s > 0, r), TypeError, 'scores must be real'),
    (lambda s, r: first_relevant_rank(s[0], r), ValueError, 'scores must have 2 dimensions'),
    (lambda s, r: first_relevant_rank(s.tolist(), r), TypeError, 'scores must be a torch.Tensor'),
    (lambda s, r: first_relevant_rank(s[:, :0], r[:, :0]), ValueError, 'scores has no keys'),
    (lambda s, r: ranking_metrics(torch.tensor([0, 1])), ValueError, 'ranks start at 1'),
    (lambda s, r: ranking_metrics(torch.tensor([1.0])), TypeError, 'ranks must have an integer dtype'),
    (lambda s, r: ranking_metrics(torch.tensor([], dtype=torch.long)), ValueError, 'ranks is empty'),
    (lambda s, r: ranking_metrics(torch.tensor([1]), ks=5), TypeError, 'ks must be a non-empty tuple'),
    (lambda s, r: ranking_metrics(torch.tensor([1]), ks=()), TypeError, 'ks must be a non-empty tuple'),
    (lambda s, r: ranking_metrics(torch.tensor([1]), ks=(1, 0)), ValueError, 'ks'),
    (lambda s, r: retrieval_metrics(torch.randn(3, 2), torch.randn(3, 2), ks='1'), TypeError, 'ks must be'),
])
def test_ranking_bad_inputs(call, error, match):
    s = torch.randn(3, 4, generator=gen(6))
    r = torch.eye(3, 4, dtype=torch.bool)
    with pytest.raises(error, match=match): call(s, r)

def test_ranking_metrics_cutoffs_and_retrieval_ks():
    m = ranking_metrics(torch.tensor([1, 3, 12, 2]), ks=[2, 20])  # a list works too
    assert m == {'recall@2': 0.5, 'recall@20': 1.0, 'MRR': pytest.approx((1 + 1 / 3 + 1 / 12 + 1 / 2) / 4),
                 'mean_rank': 4.5}
    q, k = torch.randn(6, 3, generator=gen(9)), torch.randn(8, 3, generator=gen(10))
    ranks = rank_of_positive(q @ k.T / k.norm(dim=1), torch.arange(6))
    assert retrieval_metrics(q, k, ks=(1, 2, 8)) == pytest.approx(ranking_metrics(ranks, (1, 2, 8)))

def test_rank_of_positive_refuses_nan():
    with pytest.raises(ValueError, match='NaN'):
        rank_of_positive(torch.tensor([[float('nan'), 1.0]]), torch.tensor([0]))

@pytest.mark.parametrize('call,match', [
    (lambda q, k, p: retrieval_metrics(q, k[:10]), 'only 10 keys'),
    (lambda q, k, p: retrieval_metrics(q, k, p[:5]), r'positive must have shape \(20,\)'),
    (lambda q, k, p: retrieval_metrics(q, k, p + 30), r'positive must lie in \[0, 29\] for 30 rows'),
    (lambda q, k, p: retrieval_metrics(q, k, p - 50), 'negatives are refused'),
    (lambda q, k, p: retrieval_metrics(q, k[:, :2], p), 'same number of features'),
    (lambda q, k, p: retrieval_metrics(q[0], k, p), 'queries must have 2 dimensions'),
    (lambda q, k, p: retrieval_metrics(q[:0], k, p[:0]), 'queries is empty'),
    (lambda q, k, p: retrieval_metrics(q.index_fill(0, torch.tensor([1]), math.nan), k, p), 'queries contains NaN'),
    (lambda q, k, p: retrieval_metrics(q, torch.zeros(30, 4), p), 'keys: .*zero vector'),
    (lambda q, k, p: retrieval_metrics(q, k, p, chunk_size=0), 'chunk_size'),
])
def test_retrieval_bad_inputs(call, match):
    g = gen(5)
    q, k, p = torch.randn(20, 4, generator=g), torch.randn(30, 4, generator=g), torch.randint(30, (20,), generator=g)
    with pytest.raises(ValueError, match=match): call(q, k, p)

def test_retrieval_and_rank_type_errors():
    q, k = torch.randn(4, 3), torch.randn(6, 3)
    with pytest.raises(TypeError, match='boolean mask'): retrieval_metrics(q, k, torch.ones(4, dtype=torch.bool))
    with pytest.raises(TypeError, match='positive must have an integer dtype'): retrieval_metrics(q, k, torch.zeros(4))
    with pytest.raises(TypeError, match='queries must be floating point'): retrieval_metrics(q.long(), k)
    with pytest.raises(TypeError, match='chunk_size must be an int'): retrieval_metrics(q, k, chunk_size=1.0)
    with pytest.raises(TypeError, match='scores must be real'):
        rank_of_positive(torch.ones(2, 3) > 0, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match='positive must lie in'):
        rank_of_positive(torch.ones(2, 3), torch.tensor([0, -1]))
    with pytest.raises(ValueError, match=r'positive must have shape \(2,\)'):
        rank_of_positive(torch.ones(2, 3), torch.tensor([0]))
    with pytest.raises(ValueError, match='scores must have 2 dimensions'):
        rank_of_positive(torch.ones(3), torch.tensor([0]))

def test_rank_of_positive_integer_and_infinite_scores():
    "Integer scores rank like floats; inf is a legitimate (largest) score and ranks first, ties pessimistic."
    scores = torch.tensor([[3, 1, 2], [0, 5, 5]])
    assert rank_of_positive(scores, torch.tensor([2, 1])).tolist() == [2, 2]
    inf = torch.tensor([[math.inf, 0.0, math.inf], [-math.inf, 1.0, 0.0]])
    assert rank_of_positive(inf, torch.tensor([0, 0])).tolist() == [2, 3]

def test_half_precision_features_give_the_float32_result(data):
    tx, ty, qx = (t.float() if t.is_floating_point() else t for t in data)
    assert torch.equal(knn_predict(tx.half(), ty, qx.half(), k=7),
                       knn_predict(tx.half().float(), ty, qx.half().float(), k=7))
    q, k = tx[:20], tx[20:50]
    assert retrieval_metrics(q.half(), k.half()) == retrieval_metrics(q.half().float(), k.half().float())
    ty_nc = torch.stack([ty, ty], 1)[:, 0]  # non-contiguous labels
    assert not ty_nc.is_contiguous() and torch.equal(knn_predict(tx, ty_nc, qx, k=7), knn_predict(tx, ty, qx, k=7))

# --- on a GPU ------------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
def test_cuda_agrees_with_cpu(data, probe_data):
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4))
    images = torch.rand(10, 3, 8, 8, generator=gen(8))
    on_cpu = embed(model, images, batch_size=3)
    on_gpu = embed(model.cuda(), images, batch_size=3)  # batches follow the model; features come back to the CPU
    assert on_gpu.device.type == 'cpu'
    torch.testing.assert_close(on_gpu, on_cpu, atol=1e-3, rtol=1e-3)
    tx, ty, qx = data
    assert torch.equal(knn_predict(tx.cuda(), ty.cuda(), qx.cuda(), 7, chunk_size=5).cpu(), knn_predict(tx, ty, qx, 7))
    assert torch.equal(knn_predict(tx.cuda(), ty, tx.cuda(), 7, exclude_self=True).cpu(),
                       knn_predict(tx, ty, tx, 7, exclude_self=True))
    assert linear_probe(*(t.cuda() for t in probe_data)) >= 0.99
    q, k = tx[:20], tx[20:50]
    assert retrieval_metrics(q.cuda(), k.cuda(), chunk_size=7) == pytest.approx(retrieval_metrics(q, k))

@pytest.mark.parametrize('output', [lambda x: x.flatten(1).mean(1), lambda x: x.flatten(1)[:1], lambda x: [x]])
def test_embed_refuses_a_model_that_does_not_return_one_row_per_image(output):
    "One number per image, too few rows, or not a tensor: a clear error, never an IndexError from flatten."
    class Odd(nn.Module):
        def forward(self, x): return output(x)
    with pytest.raises(ValueError, match=r'must return a \(batch, \.\.\.\) tensor'):
        embed(Odd(), torch.rand(3, 3, 4, 4), batch_size=3)

# --- faults found by probing (issue 23) ---------------------------------------------------------------------------

def test_knn_and_probe_cost_no_memory_for_a_stray_huge_label(probe_data):
    "A label of 10**9 (or num_classes=10**12) made knn allocate a (Q, 10**12) vote table and the probe 10**9 outputs."
    x, y, x_test, y_test = probe_data
    huge = 10 ** 9
    far = torch.where(y == 2, huge, y)  # class 2 renamed 10**9: the same problem with a gap in the labels
    far_test = torch.where(y_test == 2, huge, y_test)
    predicted = knn_predict(x, y, x_test, k=20)
    assert torch.equal(knn_predict(x, far, x_test, k=20), torch.where(predicted == 2, huge, predicted))
    assert torch.equal(knn_predict(x, y, x_test, k=20, num_classes=10 ** 12), predicted)
    same = linear_probe(x, y, x_test, y_test, epochs=3)
    assert math.isclose(linear_probe(x, far, x_test, far_test, epochs=3), same, abs_tol=1e-9)

def test_linear_probe_seed_beyond_what_torch_takes_is_named(probe_data):
    "seed=2**70 raised 'Overflow when unpacking long long', naming nothing."
    x, y, x_test, y_test = probe_data
    with pytest.raises(ValueError, match='seed'): linear_probe(x, y, x_test, y_test, epochs=1, seed=2 ** 70)

@pytest.mark.parametrize('name', ['train_features', 'test_features'])
def test_linear_probe_refuses_float64_features_beyond_float32_before_training(probe_data, name):
    """float64 features of 1e300 became inf in the probe's float32 and were reported as
    'the probe diverged ... smaller lr'."""
    args = dict(zip(('train_features', 'train_labels', 'test_features', 'test_labels'), probe_data))
    args[name] = args[name].double() * 1e300
    with pytest.raises(ValueError, match=rf"{name} holds values up to .*e\+30\d, beyond float32's range"):
        linear_probe(**args, epochs=1)
    args[name] = args[name] / 1e300  # float64 within float32's range: trained as before
    assert linear_probe(**args) >= 0.99

def test_linear_probe_refuses_features_whose_standardisation_overflows_float32():
    "Each value fits float32 but their sum does not: the mean was inf, and the probe 'diverged'."
    x = torch.tensor([[3e38, 1.0], [2e38, 2.0], [3e38, 0.0], [1e38, 5.0]])
    y = torch.tensor([0, 1, 0, 1])
    with pytest.raises(ValueError, match='train_features overflow float32 once standardised'):
        linear_probe(x, y, torch.ones(4, 2), y, epochs=1)
    tiny = torch.tensor([[1e-30], [2e-30], [1e-30], [2e-30]])  # test points 1e60 deviations away
    with pytest.raises(ValueError, match='test_features lie too many training standard deviations'):
        linear_probe(tiny, y, torch.full((4, 1), 1e30), y, epochs=1)

@pytest.mark.skipif(torch.cuda.is_available(), reason='needs a machine without a CUDA GPU')
def test_embed_names_a_cuda_device_on_a_machine_without_one(net):
    "device='cuda:7' without a GPU raised torch's 'Found no NVIDIA driver' from the first copy."
    with pytest.raises(ValueError, match=r"device 'cuda:7' is not available: torch finds no CUDA GPU"):
        embed(net, torch.rand(2, 3, 8, 8), device='cuda:7')
    assert torch.allclose(embed(net, torch.rand(2, 3, 8, 8), device='cpu'), embed(net, torch.rand(2, 3, 8, 8)), atol=1)

def test_embed_names_a_cuda_index_beyond_the_gpus(net, monkeypatch):
    "cuda:7 on a machine with one GPU: the index is named, with the ones that exist."
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 1)
    with pytest.raises(ValueError,
                       match=r"device 'cuda:7' does not exist: torch finds 1 CUDA GPU\(s\), cuda:0 to cuda:0"):
        embed(net, torch.rand(2, 3, 8, 8), device=torch.device('cuda', 7))

def test_embed_names_an_unavailable_device_of_another_kind(net):
    if torch.backends.mps.is_available(): pytest.skip('MPS is available here')
    with pytest.raises(ValueError, match="device 'mps' is not available"):
        embed(net, torch.rand(2, 3, 8, 8), device='mps')

def test_rank_of_positive_with_no_keys_says_so():
    "Zero keys gave 'positive must lie in [0, -1] for 0 rows'."
    with pytest.raises(ValueError, match=r'scores has no keys \(shape \(2, 0\)\): there is nothing to rank'):
        rank_of_positive(torch.zeros(2, 0), torch.zeros(2, dtype=torch.long))
    # no queries: nothing to do
    assert rank_of_positive(torch.zeros(0, 0), torch.zeros(0, dtype=torch.long)).shape == (0,)

# --- collapse measures ---------------------------------------------------------------------------------------------

def test_effective_rank_of_known_singular_values():
    "Singular values 3, 2, 1: p = 1/2, 1/3, 1/6, and the rank is exp of their entropy (RankMe, with its ε)."
    z = torch.diag(torch.tensor([3.0, 2.0, 1.0]))
    p = [0.5 + 1e-7, 1 / 3 + 1e-7, 1 / 6 + 1e-7]
    assert effective_rank(z) == pytest.approx(math.exp(-sum(x * math.log(x) for x in p)), rel=1e-12)
    assert effective_rank(z, eps=0) == pytest.approx(math.exp(-sum(x * math.log(x) for x in (1 / 2, 1 / 3, 1 / 6))))

def test_effective_rank_ignores_rotations_and_row_order():
    g = gen(5)
    z = (torch.randn(30, 6, generator=g, dtype=torch.float64)
         * torch.tensor([5.0, 3, 1, 1, 0.1, 0.01], dtype=torch.float64))
    rotation = torch.linalg.qr(torch.randn(6, 6, generator=g, dtype=torch.float64))[0]
    rank = effective_rank(z)
    assert 1 < rank < 6
    assert effective_rank(z @ rotation) == pytest.approx(rank, rel=1e-9)
    assert effective_rank(z[torch.randperm(30, generator=g)]) == pytest.approx(rank, rel=1e-9)

def test_normalized_std_by_hand():
    "Rows (1, 0) and (0, 1): each column holds 1 and 0, whose sample standard deviation is 1/sqrt(2)."
    assert normalized_std(torch.tensor([[2.0, 0.0], [0.0, 5.0]])) == pytest.approx(1 / math.sqrt(2))

@pytest.mark.parametrize('d', [4, 16, 64])
def test_normalized_std_of_spread_directions_is_one_over_sqrt_d(d):
    z = torch.randn(20_000, d, generator=gen(d))
    assert normalized_std(z) == pytest.approx(1 / math.sqrt(d), rel=0.03)

def test_covariance_spectrum_by_hand():
    "Columns (1, -1, 0, 0) and (0, 0, 2, -2): mean 0, variances 2/4 and 8/4, no covariance."
    z = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 2.0], [0.0, -2.0]])
    assert covariance_spectrum(z).tolist() == pytest.approx([2.0, 0.5])
    assert covariance_spectrum(z + 7).tolist() == pytest.approx([2.0, 0.5])  # centred
    assert covariance_spectrum(3 * z).tolist() == pytest.approx([18.0, 4.5])

def test_collapse_measures_take_any_float_tensor_and_keep_its_graph_alone():
    z = torch.randn(12, 3, generator=gen(2), requires_grad=True)
    for x in (z, z.half(), z.bfloat16()):
        assert 1 < effective_rank(x) <= 3 and 0 < normalized_std(x) < 1
        assert covariance_spectrum(x).shape == (3,)
    assert z.grad is None

@pytest.mark.parametrize('bad, match', [(torch.ones(1, 3), 'at least 2 rows'), (torch.ones(3), '2 dimensions'),
                                        (torch.ones(3, 0), 'at least 2 rows and 1 column'),
                                        (torch.tensor([[1.0, float('inf')], [0.0, 1.0]]), 'NaN or inf')])
def test_collapse_measures_refuse_what_cannot_be_measured(bad, match):
    for fn in (normalized_std, effective_rank, covariance_spectrum):
        with pytest.raises(ValueError, match=match): fn(bad)
    with pytest.raises(TypeError, match='z must be floating point'): effective_rank(torch.ones(3, 3, dtype=torch.long))

# --- graded metrics: nDCG@k and average precision ----------------------------------------------------------------

def graded_by_sorting(scores, gains, k):
    "nDCG@k (linear gains) and AP (gain > 0 relevant) of each row, sorted by (-score, gain): ties against."
    ndcg, ap = [], []
    for row, g in zip(scores.tolist(), gains.tolist()):
        order = sorted(range(len(row)), key=lambda j: (-row[j], g[j]))
        dcg = lambda gs: sum(x / math.log2(r + 2) for r, x in enumerate(gs[:k]))
        ndcg.append(dcg([g[j] for j in order]) / dcg(sorted(g, reverse=True)))
        hits = [g[j] > 0 for j in order]
        ap.append(sum(sum(hits[:r + 1]) / (r + 1) for r, h in enumerate(hits) if h) / sum(hits))
    return torch.tensor(ndcg, dtype=torch.float64), torch.tensor(ap, dtype=torch.float64)

def graded_data(seed: int, integer_scores: bool):
    g = gen(seed)
    scores = (torch.randint(0, 4, (30, 20), generator=g).double() if integer_scores
              else torch.randn(30, 20, generator=g, dtype=torch.float64))
    gains = torch.randint(0, 3, (30, 20), generator=g).double() * (torch.rand(30, 20, generator=g) < 0.3)
    gains[:, 3] += 1  # every query has something relevant
    return scores, gains

@pytest.mark.parametrize('seed', [0, 1, 2])
@pytest.mark.parametrize('k', [1, 3, 10, 20, 50])
def test_ndcg_and_ap_against_sorting_with_many_ties(seed, k):
    scores, gains = graded_data(seed, integer_scores=True)
    want_ndcg, want_ap = graded_by_sorting(scores, gains, k)
    assert torch.allclose(ndcg_at_k(scores, gains, k), want_ndcg, atol=1e-12)
    assert torch.allclose(average_precision(scores, gains > 0), want_ap, atol=1e-12)
    assert torch.allclose(ndcg_at_k(scores.long(), gains.long(), k), want_ndcg, atol=1e-12)  # integers

@pytest.mark.parametrize('seed', [0, 1])
def test_ndcg_and_ap_against_scikit_learn_without_ties(seed):
    metrics = pytest.importorskip('sklearn.metrics')
    scores, gains = graded_data(seed, integer_scores=False)
    for k in (1, 5, 10, 20):
        want = metrics.ndcg_score(gains.numpy(), scores.numpy(), k=k)
        assert abs(ndcg_at_k(scores, gains, k).mean().item() - want) < 1e-12
    ap = average_precision(scores, gains > 0)
    for i in range(len(scores)):
        assert abs(ap[i].item() - metrics.average_precision_score((gains[i] > 0).numpy(), scores[i].numpy())) < 1e-12

def test_ndcg_and_ap_by_hand_with_ties():
    s, g = torch.tensor([[0.5, 0.5, 0.1, 0.9]]), torch.tensor([[2.0, 0.0, 1.0, 0.0]])
    # order: doc 3 (0), then the tie {0, 1} with the irrelevant doc 1 first, then doc 2 (1)
    dcg = 0 + 0 + 2 / math.log2(4) + 1 / math.log2(5)
    ideal = 2 + 1 / math.log2(3)
    assert ndcg_at_k(s, g, 4).item() == pytest.approx(dcg / ideal)
    assert ndcg_at_k(s, g, 2).item() == 0.0
    assert ndcg_at_k(s, g, 3).item() == pytest.approx((2 / math.log2(4)) / ideal)
    assert average_precision(s, g > 0).item() == pytest.approx((1 / 3 + 2 / 4) / 2)
    # relevant documents tied with each other: the lower gain goes first
    s2, g2 = torch.tensor([[1.0, 1.0, 0.0]]), torch.tensor([[2.0, 1.0, 0.0]])
    assert ndcg_at_k(s2, g2, 1).item() == pytest.approx(1 / 2)
    assert average_precision(s2, g2 > 0).item() == 1.0
    # a collapsed scorer gets the worst order: nDCG of the reversed ideal order
    flat = torch.zeros(1, 4)
    g3 = torch.tensor([[0.0, 1.0, 2.0, 0.0]])
    assert ndcg_at_k(flat, g3, 4).item() == pytest.approx((1 / math.log2(4) + 2 / math.log2(5))
                                                          / (2 + 1 / math.log2(3)))
    # bool gains are 0/1 gains; the first relevant document of AP is first_relevant_rank's
    assert torch.allclose(ndcg_at_k(s, g > 0, 4), ndcg_at_k(s, (g > 0).double(), 4))

def test_ndcg_and_ap_perfect_order_infinite_scores_and_no_queries():
    g = torch.tensor([[0.0, 1.0, 2.0]])
    assert ndcg_at_k(g.clone(), g, 10).item() == pytest.approx(1.0)
    assert average_precision(g.clone(), g > 0).item() == 1.0
    inf = torch.tensor([[math.inf, -math.inf, math.inf]])
    assert average_precision(inf, g > 0).item() == pytest.approx((1 / 2 + 0) / 2 + 2 / 3 / 2)
    assert ndcg_at_k(torch.zeros(0, 3), torch.zeros(0, 3)).shape == (0,)
    assert average_precision(torch.zeros(0, 3), torch.zeros(0, 3, dtype=torch.bool)).shape == (0,)

@pytest.mark.parametrize('call,error,match', [
    (lambda s, g: ndcg_at_k(s, -g), ValueError, 'gains must be finite and >= 0'),
    (lambda s, g: ndcg_at_k(s, g * math.nan), ValueError, 'gains must be finite'),
    (lambda s, g: ndcg_at_k(s, g * 0), ValueError, r'gains\[0\] has nothing relevant'),
    (lambda s, g: ndcg_at_k(s, g[:2]), ValueError, r'gains must have the shape of scores, \(3, 4\)'),
    (lambda s, g: ndcg_at_k(s, g, k=0), ValueError, 'k must lie in'),
    (lambda s, g: ndcg_at_k(s, g, k=2.0), TypeError, 'k must be an int'),
    (lambda s, g: ndcg_at_k(s, g.tolist()), TypeError, 'gains must be a torch.Tensor'),
    (lambda s, g: ndcg_at_k(s, g.to(torch.complex64)), TypeError, 'gains must be real'),
    (lambda s, g: ndcg_at_k(s * math.nan, g), ValueError, 'NaN'),
    (lambda s, g: average_precision(s, g), TypeError, 'relevant must be a boolean mask'),
    (lambda s, g: average_precision(s, g[:, :2] > 0), ValueError, 'relevant must have the shape'),
    (lambda s, g: average_precision(s, g < 0), ValueError, r'relevant\[0\] has nothing relevant'),
    (lambda s, g: average_precision(s[0], g > 0), ValueError, 'scores must have 2 dimensions'),
])
def test_graded_metrics_bad_inputs(call, error, match):
    s = torch.randn(3, 4, generator=gen(6))
    g = torch.eye(3, 4) * 2
    with pytest.raises(error, match=match): call(s, g)
