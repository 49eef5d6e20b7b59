"""Package tests for contrastive_nb.models: SmallCNN, ProjectionHead, resnet18_small."""
import copy

import pytest
import torch
from torch import nn
from torchvision.models import resnet18

from contrastive_nb.models import NORMS, ProjectionHead, SmallCNN, conv_stage, resnet18_small

def n_parameters(model: nn.Module) -> int: return sum(p.numel() for p in model.parameters())

# --- conv_stage ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('norm', NORMS)
def test_conv_stage_keeps_size_and_counts_parameters(norm):
    stage = conv_stage(3, 16, norm)
    out = stage(torch.randn(2, 3, 9, 7))
    assert out.shape == (2, 16, 9, 7) and (out >= 0).all()
    assert n_parameters(stage) == 9 * 3 * 16 + (16 if norm == 'none' else 2 * 16)
    assert (stage[0].bias is None) == (norm != 'none')  # a normalisation's shift makes the bias redundant

def test_conv_stage_rejects_unknown_norm():
    with pytest.raises(ValueError, match='norm must be one of'): conv_stage(3, 8, 'layer')

# --- SmallCNN ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('size', [32, 16, 15, 3, 1])
def test_small_cnn_output_shape_any_size(size):
    enc = SmallCNN()
    assert enc.feature_dim == 256
    assert enc(torch.randn(2, 3, size, size)).shape == (2, 256)

def test_small_cnn_widths_double_and_cap():
    enc = SmallCNN(in_channels=1, width=16, blocks=6, max_width=64)
    convs = [m for m in enc.modules() if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [16, 32, 64, 64, 64, 64] and convs[0].in_channels == 1
    assert enc.feature_dim == 64 and enc(torch.randn(3, 1, 28, 28)).shape == (3, 64)
    assert sum(isinstance(m, nn.MaxPool2d) for m in enc.modules()) == 5  # between stages, not after the last

def test_small_cnn_default_parameter_count():
    widths = [3, 32, 64, 128, 256]
    expected = sum(9 * a * b + 2 * b for a, b in zip(widths, widths[1:]))
    assert n_parameters(SmallCNN()) == expected

@pytest.mark.parametrize('norm,kind', list(zip(NORMS, (nn.BatchNorm2d, nn.GroupNorm, nn.Identity))))
def test_small_cnn_norm_options(norm, kind):
    enc = SmallCNN(norm=norm)
    layers = [stage[1] for stage in enc.features if isinstance(stage, nn.Sequential)]
    assert len(layers) == 4 and all(isinstance(layer, kind) for layer in layers)
    if norm == 'group': assert all(layer.num_groups == 8 for layer in layers)

def test_group_norm_with_channels_not_divisible_by_eight():
    enc = SmallCNN(width=12, blocks=2, norm='group')
    assert [stage[1].num_groups for stage in enc.features if isinstance(stage, nn.Sequential)] == [4, 8]
    assert enc(torch.randn(2, 3, 8, 8)).shape == (2, 24)

@pytest.mark.parametrize('norm', NORMS)
def test_only_batchnorm_mixes_a_batch_in_training_mode(norm):
    torch.manual_seed(0)
    enc = SmallCNN(norm=norm, width=8, blocks=2).train()
    x = torch.rand(6, 3, 12, 12)
    other = torch.cat([x[:1], torch.rand(5, 3, 12, 12)])
    with torch.no_grad(): moved = (enc(x)[0] - enc(other)[0]).abs().max()
    assert (moved > 1e-4) if norm == 'batch' else (moved == 0)

def test_small_cnn_trains():
    torch.manual_seed(0)
    enc = SmallCNN(width=8, blocks=2)
    before = copy.deepcopy(enc.state_dict())
    enc(torch.rand(4, 3, 16, 16)).square().mean().backward()
    torch.optim.SGD(enc.parameters(), lr=0.1).step()
    assert all(p.grad is not None for p in enc.parameters())
    assert any(not torch.equal(before[k], v) for k, v in enc.state_dict().items())

@pytest.mark.parametrize('kwargs,error,match', [
    (dict(norm='layer'), ValueError, 'norm must be one of'), (dict(norm='Batch'), ValueError, 'norm must be one of'),
    (dict(blocks=0), ValueError, r'blocks must lie in \[1, inf\]'), (dict(width=0), ValueError, 'width must'),
    (dict(in_channels=2.5), TypeError, 'in_channels must be an int'), (dict(blocks=True), TypeError, 'blocks must'),
    (dict(width=64, max_width=32), ValueError, 'max_width'), (dict(norm=None), ValueError, 'norm must be one of'),
])
def test_small_cnn_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match): SmallCNN(**kwargs)

@pytest.mark.parametrize('shape,match', [
    ((2, 1, 32, 32), r'x must be images of shape \(N, 3, H, W\)'), ((2, 4, 8, 8), r'\(N, 3, H, W\)'),
    ((3, 32, 32), 'x must have 4 dimensions'), ((2, 3, 4, 4, 4), 'x must have 4 dimensions'),
    ((0, 3, 8, 8), 'N, H, W >= 1'), ((2, 3, 0, 8), 'N, H, W >= 1'),
])
def test_small_cnn_bad_inputs(shape, match):
    with pytest.raises(ValueError, match=match): SmallCNN()(torch.randn(shape))

@pytest.mark.parametrize('dtype,match', [(torch.uint8, r'x.float\(\) / 255'), (torch.int64, r'\.float\(\)'),
                                         (torch.bool, 'floating-point images')])
def test_small_cnn_refuses_integer_images(dtype, match):
    with pytest.raises(TypeError, match=match): SmallCNN()(torch.zeros(2, 3, 8, 8, dtype=dtype))

@pytest.mark.parametrize('bad', [float('nan'), float('inf')])
def test_small_cnn_refuses_non_finite_images(bad):
    x = torch.rand(2, 3, 8, 8)
    x[1, 2, 3, 4] = bad
    with pytest.raises(ValueError, match='x contains NaN or inf'): SmallCNN()(x)

def test_small_cnn_one_pixel_image_in_training_mode():
    "BatchNorm cannot normalise one value per channel: a clear error in training mode, a result in eval mode."
    enc = SmallCNN()
    with pytest.raises(ValueError, match='one image of 1×1 px'): enc.train()(torch.rand(1, 3, 1, 1))
    with pytest.raises(ValueError, match='one image of 8×8 px'): enc.train()(torch.rand(1, 3, 8, 8))  # 1×1 at stage 4
    assert enc.train()(torch.rand(1, 3, 9, 9)).shape == (1, 256)  # 9 px: 2×2 at the last stage
    assert enc.eval()(torch.rand(1, 3, 1, 1)).shape == (1, 256)
    assert SmallCNN(norm='group').train()(torch.rand(1, 3, 1, 1)).shape == (1, 256)

def test_small_cnn_layouts_and_precision():
    "channels_last, non-contiguous and half-precision inputs give the float32 model's result."
    torch.manual_seed(0)
    enc = SmallCNN(width=8, blocks=3).eval()
    x = torch.rand(4, 3, 12, 12)
    with torch.no_grad():
        want = enc(x)
        torch.testing.assert_close(enc(x.to(memory_format=torch.channels_last)), want)
        torch.testing.assert_close(enc(torch.rand(4, 3, 12, 24)[..., ::2].copy_(x)), want)
        torch.testing.assert_close(enc(x.half()), enc(x.half().float()))
        assert enc.double()(x).dtype == torch.float64  # the model's dtype decides

# --- ProjectionHead ------------------------------------------------------------------------------------------------

def test_projection_head_structure_and_shapes():
    head = ProjectionHead(256)
    assert head.out_dim == 128 and head.in_dim == 256
    assert [type(m) for m in head.net] == [nn.Linear, nn.BatchNorm1d, nn.ReLU, nn.Linear]
    assert head.net[0].bias is None and head.net[3].bias is not None
    assert n_parameters(head) == 256 * 256 + 2 * 256 + 256 * 128 + 128
    assert head(torch.randn(5, 256)).shape == (5, 128)
    assert ProjectionHead(64, hidden_dim=32, out_dim=8)(torch.randn(3, 64)).shape == (3, 8)

def test_encoder_and_head_compose():
    enc = SmallCNN(width=8, blocks=3)
    model = nn.Sequential(enc, ProjectionHead(enc.feature_dim, 16, 4))
    assert model(torch.randn(4, 3, 16, 16)).shape == (4, 4)

def test_projection_head_bad_arguments_and_inputs():
    for kwargs in (dict(in_dim=0), dict(in_dim=8, hidden_dim=0), dict(in_dim=8, out_dim=-1)):
        with pytest.raises(ValueError, match=r'dim must lie in \[1, inf\]'): ProjectionHead(**kwargs)
    with pytest.raises(TypeError, match='in_dim must be an int'): ProjectionHead(8.0)
    with pytest.raises(TypeError, match='out_dim must be an int'): ProjectionHead(8, out_dim=True)
    head = ProjectionHead(8)
    with pytest.raises(ValueError, match=r'h must have shape \(N, 8\)'): head(torch.randn(4, 9))
    for shape in ((8,), (2, 4, 8)):
        with pytest.raises(ValueError, match='h must have 2 dimensions'): head(torch.randn(shape))
    with pytest.raises(ValueError, match='h is empty'): head(torch.randn(0, 8))
    with pytest.raises(TypeError, match='h must be floating point'): head(torch.ones(4, 8, dtype=torch.long))
    with pytest.raises(ValueError, match='h contains NaN'): head(torch.full((4, 8), float('nan')))
    with pytest.raises(ValueError, match='h holds one vector'): head.train()(torch.randn(1, 8))
    assert head.eval()(torch.randn(1, 8)).shape == (1, 128)
    with torch.no_grad(): torch.testing.assert_close(head(torch.ones(3, 8).half()), head(torch.ones(3, 8)))

def test_projection_head_norm_option():
    torch.manual_seed(0)
    group, none = ProjectionHead(12, 16, 4, norm='group'), ProjectionHead(12, 16, 4, norm='none')
    assert [type(m) for m in group.net] == [nn.Linear, nn.GroupNorm, nn.ReLU, nn.Linear]
    assert group.net[1].num_groups == 4 and group.net[0].bias is None  # groups of at least 4 values
    assert [type(m) for m in none.net] == [nn.Linear, nn.Identity, nn.ReLU, nn.Linear]
    assert none.net[0].bias is not None  # no normalisation after it: the bias is needed
    assert [ProjectionHead(12, h, 4, norm='group').net[1].num_groups for h in (2, 7, 12, 64, 256)] == [1, 1, 3, 8, 8]
    with pytest.raises(ValueError, match='hidden_dim >= 2'): ProjectionHead(12, 1, norm='group')
    h = torch.randn(6, 12)
    for head in (group, none):  # no batch coupling: a row's output ignores the other rows
        head.train()
        torch.testing.assert_close(head(h)[:1], head(h[:1]))
    batch = ProjectionHead(12, 16, 4)
    assert not torch.allclose(batch.train()(h)[:2], batch(h[:2]))  # BatchNorm couples the rows
    with pytest.raises(ValueError, match='norm must be one of'): ProjectionHead(12, norm='layer')

# --- resnet18_small ------------------------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def resnet(): return resnet18_small()

@pytest.mark.parametrize('size', [32, 16])
def test_resnet18_small_output_shapes(resnet, size):
    resnet.eval()
    with torch.no_grad(): assert resnet(torch.randn(2, 3, size, size)).shape == (2, 512)
    assert resnet.feature_dim == 512

def test_resnet18_small_stem_and_body(resnet):
    assert resnet.conv1.kernel_size == (3, 3) and resnet.conv1.stride == (1, 1) and resnet.conv1.bias is None
    assert isinstance(resnet.maxpool, nn.Identity) and isinstance(resnet.fc, nn.Identity)
    reference = {k: v.shape for k, v in resnet18(weights=None).state_dict().items()
                 if not k.startswith(('conv1', 'fc'))}
    assert {k: v.shape for k, v in resnet.state_dict().items() if k != 'conv1.weight'} == reference
    assert 11_000_000 < n_parameters(resnet) < 11_300_000

def test_resnet18_small_options():
    one = resnet18_small(in_channels=1)
    assert one.conv1.in_channels == 1 and one.eval()(torch.randn(2, 1, 16, 16)).shape == (2, 512)
    gn = resnet18_small(norm='group')
    assert not any(isinstance(m, nn.BatchNorm2d) for m in gn.modules())
    assert all(m.num_groups == 32 for m in gn.modules() if isinstance(m, nn.GroupNorm))
    for kwargs in (dict(norm='none'), dict(in_channels=0)):
        with pytest.raises(ValueError, match='norm must|in_channels must'): resnet18_small(**kwargs)
    with pytest.raises(TypeError, match='in_channels must be an int'): resnet18_small(in_channels=3.0)

def test_resnet18_small_checks_its_input(resnet):
    "The forward pre-hook gives SmallCNN's clear errors instead of torch's, and survives a deep copy."
    resnet.train()
    for model in (resnet, copy.deepcopy(resnet)):
        with pytest.raises(ValueError, match=r'\(N, 3, H, W\)'): model(torch.rand(2, 1, 16, 16))
        with pytest.raises(TypeError, match='255'): model(torch.zeros(2, 3, 16, 16, dtype=torch.uint8))
        with pytest.raises(ValueError, match='one image of 8×8 px'): model(torch.rand(1, 3, 8, 8))
    with torch.no_grad(): assert resnet.eval()(torch.rand(1, 3, 8, 8).half()).shape == (1, 512)
    assert set(resnet.state_dict()) == set(resnet18_small().state_dict())

def test_resnet18_small_is_untrained_and_fresh():
    a, b = resnet18_small(), resnet18_small()
    assert not torch.equal(a.conv1.weight, b.conv1.weight)  # random initialisation, no downloaded weights

# --- on a GPU ------------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
def test_cuda_agrees_with_cpu():
    "The encoders, their input checks (NaN, dtype) and the half-precision cast work the same on a GPU."
    torch.manual_seed(0)
    x = torch.rand(4, 3, 16, 16)
    for model in (SmallCNN(width=8, blocks=3), resnet18_small(), ProjectionHead(48, 16, 8)):
        model.eval()
        inputs = torch.randn(4, 48) if isinstance(model, ProjectionHead) else x
        with torch.no_grad(), torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            on_cpu = model(inputs)
            on_gpu = model.cuda()(inputs.cuda())
            torch.testing.assert_close(on_gpu.cpu(), on_cpu, atol=1e-3, rtol=1e-3)
            assert model(inputs.cuda().half()).dtype == torch.float32  # cast to the weights' dtype
            if inputs.ndim == 4:
                torch.testing.assert_close(model(inputs.cuda().to(memory_format=torch.channels_last)).cpu(),
                                           on_cpu, atol=1e-3, rtol=1e-3)
        bad = inputs.cuda().clone()
        bad.view(-1)[0] = float('nan')
        with pytest.raises(ValueError, match='contains NaN'): model(bad)

# --- faults found by probing (issue 23) ---------------------------------------------------------------------------

@pytest.mark.parametrize('build, shape, name', [
    (lambda: SmallCNN(width=2, blocks=2).eval(), (2, 3, 8, 8), 'x'),
    (lambda: resnet18_small(norm='group').eval(), (1, 3, 4, 4), 'x'),
    (lambda: ProjectionHead(4, 8, 2).eval(), (2, 4), 'h')])
def test_inputs_beyond_the_model_dtype_raise_instead_of_giving_nan(build, shape, name):
    "float64 inputs of 1e300 became inf in the float32 model: SmallCNN and the head returned NaN, silently."
    torch.manual_seed(0)
    model = build()
    x = torch.rand(shape, dtype=torch.float64)
    assert torch.isfinite(model(x)).all()  # in range: cast, as before
    with pytest.raises(ValueError, match=f'{name} has values up to'): model(x * 1e300)
    with pytest.raises(ValueError, match=f'{name} has values up to'): model.half()(x.float() * 1e6)

# --- values_unchecked (issue 24: checks at the door) -----------------------------------------------------------------

def test_values_unchecked_skips_only_the_value_checks():
    "Inside the block: NaN goes through, shapes and dtypes are still refused, the numbers do not change."
    from contrastive_nb.models import values_unchecked
    torch.manual_seed(0)
    net = nn.Sequential(SmallCNN(width=4, blocks=2), ProjectionHead(8, 16, 4))
    x = torch.rand(4, 3, 16, 16)
    expected = net(x)
    nan = torch.full((2, 3, 8, 8), float('nan'))
    with values_unchecked(net) as inside:
        assert inside is net
        assert torch.equal(net(x), expected)
        assert net[0](nan).isnan().all()
        with pytest.raises(TypeError, match='x must be floating-point'): net(x.to(torch.uint8))
        with pytest.raises(ValueError, match=r'shape \(N, 3, H, W\)'): net(x[:, :1])
        with pytest.raises(ValueError, match=r'h must have shape'): net[1](torch.rand(4, 5))
        with values_unchecked(net[0]): pass  # a nested block leaves the switch to the outer one
        assert not net[0].check_values
    assert net[0].check_values and net[1].check_values
    with pytest.raises(ValueError, match='x contains NaN or inf'): net(nan)

def test_values_unchecked_restores_after_an_error_and_reaches_copies():
    from contrastive_nb.models import values_unchecked
    enc = SmallCNN(width=4, blocks=2)
    holder = nn.ModuleDict({'online': enc, 'target': copy.deepcopy(enc)})  # as MoCo's momentum encoder
    with pytest.raises(RuntimeError, match='boom'), values_unchecked(holder):
        assert not holder['online'].check_values and not holder['target'].check_values
        raise RuntimeError('boom')
    assert holder['online'].check_values and holder['target'].check_values
    with pytest.raises(TypeError, match='module must be a torch.nn.Module'): values_unchecked(None)

def test_widening_casts_are_not_value_checked():
    "float16 input to a float32 network cannot overflow, so only the narrowing cast reads the values."
    enc = SmallCNN(width=4, blocks=2).eval()
    x = torch.rand(2, 3, 8, 8)
    assert torch.equal(enc(x.half()), enc(x.half().float()))
    with pytest.raises(ValueError, match='beyond the range'): SmallCNN(width=4, blocks=2).half()(x * 1e6)
