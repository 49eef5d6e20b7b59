"""Package tests for contrastive_nb.augment: the policy, crop boxes, colour, blur, augment_batch, object_kept."""
import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from torchvision.transforms import RandomResizedCrop, v2

from contrastive_nb.augment import (AugmentationPolicy, adjust_colour, augment_batch, gaussian_blur, grayscale,
                                    object_kept, resized_crop, sample_crop_boxes, simclr_transform)
from contrastive_nb.data import make_shapes

FAST = settings(max_examples=40, deadline=None)

@pytest.fixture(scope='module')
def shapes(): return make_shapes(64, size=32, seed=11)

# --- the policy -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('kwargs, error', [
    (dict(scale=(0.5, 0.2)), ValueError), (dict(scale=(0.0, 1.0)), ValueError), (dict(scale=(0.5, 1.2)), ValueError),
    (dict(ratio=(2.0, 1.0)), ValueError), (dict(ratio=(0.0, 1.0)), ValueError), (dict(flip_p=1.5), ValueError),
    (dict(blur_p=-0.1), ValueError), (dict(jitter_strength=3.0), ValueError),
    (dict(jitter_strength=float('nan')), ValueError),
    (dict(blur_sigma=(0.0, 1.0)), ValueError), (dict(size=0), ValueError), (dict(scale=(0.1, 0.5, 0.9)), ValueError),
    (dict(size=32.0), TypeError), (dict(size=True), TypeError), (dict(flip_p=True), TypeError),
    (dict(scale=0.5), TypeError), (dict(scale='ab'), TypeError), (dict(jitter_p='0.5'), TypeError)])
def test_policy_rejects_bad_settings(kwargs, error):
    with pytest.raises(error): AugmentationPolicy(**kwargs)

def test_policy_is_a_frozen_dataclass():
    policy = AugmentationPolicy()
    assert dataclasses.is_dataclass(policy)
    with pytest.raises(dataclasses.FrozenInstanceError): policy.size = 64
    with pytest.raises(AttributeError): policy.size = 64  # FrozenInstanceError is an AttributeError
    bigger = policy.replace(size=96, scale=[0.2, 1.0])
    assert bigger.size == 96 and bigger.scale == (0.2, 1.0) and isinstance(bigger.scale, tuple)
    assert bigger.blur_kernel == 9 and policy.size == 32
    assert policy == AugmentationPolicy() and hash(policy) == hash(AugmentationPolicy()) and bigger != policy
    assert dataclasses.replace(policy, flip_p=0.0).flip_p == 0.0
    with pytest.raises(ValueError): policy.replace(flip_p=2)
    assert {policy: 1}[AugmentationPolicy()] == 1  # usable as a dictionary key

@pytest.mark.parametrize('size, kernel', [(8, 3), (32, 3), (40, 5), (64, 7), (96, 9), (100, 11)])
def test_blur_kernel_is_odd_and_about_a_tenth(size, kernel):
    assert AugmentationPolicy(size=size).blur_kernel == kernel

def test_simclr_transform_follows_the_policy(shapes):
    p = AugmentationPolicy(size=24, jitter_strength=1.0)
    t = simclr_transform(p)
    crop, flip, jitter, gray, blur = t.transforms
    assert tuple(crop.size) == (24, 24) and list(crop.scale) == [0.08, 1.0] and flip.p == 0.5
    assert jitter.p == 0.8 and np.allclose(jitter.transforms[0].brightness, (0.2, 1.8))
    assert np.allclose(jitter.transforms[0].hue, (-0.2, 0.2)) and gray.p == 0.2 and blur.p == 0.5
    torch.manual_seed(0)
    assert t(shapes.images[0]).shape == (3, 24, 24)
    with pytest.raises(TypeError): simclr_transform({'size': 32})

# --- crop boxes -----------------------------------------------------------------------------------------------------

def test_crop_boxes_follow_the_policy():
    boxes = sample_crop_boxes(20_000, (0.2, 0.6), (0.5, 2.0), torch.Generator().manual_seed(0))
    w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    assert (boxes >= 0).all() and (boxes <= 1 + 1e-6).all()
    assert (w * h).min() >= 0.2 - 1e-5 and (w * h).max() <= 0.6 + 1e-5
    assert (w / h).min() >= 0.5 - 1e-4 and (w / h).max() <= 2.0 + 1e-4
    # The area is uniform over its range: its mean is the midpoint; the log aspect ratio is centred on 0.
    assert abs((w * h).mean() - 0.4) < 0.01 and abs(torch.log(w / h).mean()) < 0.02
    # The position is uniform over where the box fits: the centres spread evenly around the middle.
    assert abs(((boxes[:, 0] + boxes[:, 2]) / 2).mean() - 0.5) < 0.01

@pytest.mark.parametrize('ratio', [(4.0, 5.0), (0.2, 0.25), (2.5, 3.0), (0.3, 0.4)])
@pytest.mark.parametrize('side', [60, 100, 101])
def test_fallback_is_torchvisions_central_crop(ratio, side):
    "When no try fits, the box is the central crop torchvision's get_params returns, up to its pixel rounding."
    ours = sample_crop_boxes(4, (0.99, 1.0), ratio, torch.Generator().manual_seed(1), tries=1)
    torch.manual_seed(0)
    top, left, height, width = RandomResizedCrop.get_params(torch.zeros(1, side, side), [0.99, 1.0], list(ratio))
    theirs = torch.tensor([left, top, left + width, top + height], dtype=torch.float32) / side
    assert (ours - theirs).abs().max() <= 1 / side + 1e-6, (ours[0], theirs)
    assert torch.equal(ours[0], ours[-1])  # the fallback is deterministic: no position is drawn

def test_fallback_needs_every_try_to_fail():
    # Area 1 fits only as a square: ratio (1, 1) always fits, even with one try.
    boxes = sample_crop_boxes(100, (1.0, 1.0), (1.0, 1.0), torch.Generator().manual_seed(0), tries=1)
    assert torch.allclose(boxes, torch.tensor([0., 0., 1., 1.]).expand(100, 4))

def test_crop_boxes_are_reproducible_and_use_the_generator():
    a = sample_crop_boxes(50, generator=torch.Generator().manual_seed(3))
    b = sample_crop_boxes(50, generator=torch.Generator().manual_seed(3))
    c = sample_crop_boxes(50, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert sample_crop_boxes(0).shape == (0, 4)

@pytest.mark.parametrize('call, error', [
    (lambda: sample_crop_boxes(-1), ValueError), (lambda: sample_crop_boxes(2.0), TypeError),
    (lambda: sample_crop_boxes(2, (0.5, 0.1)), ValueError), (lambda: sample_crop_boxes(2, ratio=(0, 1)), ValueError),
    (lambda: sample_crop_boxes(2, tries=0), ValueError), (lambda: sample_crop_boxes(2, generator=0), TypeError),
    (lambda: sample_crop_boxes(2, (float('nan'), 1.0)), ValueError)])
def test_crop_boxes_reject_bad_arguments(call, error):
    with pytest.raises(error): call()

def test_a_ratio_of_zero_is_refused_by_name():
    # ratio's lower bound is open: (0, 1) gets the check's message, not math.log's domain error
    with pytest.raises(ValueError, match='ratio'):
        sample_crop_boxes(2, ratio=(0.0, 1.0))

# --- resized crop ---------------------------------------------------------------------------------------------------

def test_resized_crop_identity_flip_and_block():
    img = torch.rand(2, 3, 12, 12)
    whole = torch.tensor([[0.0, 0.0, 1.0, 1.0]] * 2)
    assert torch.allclose(resized_crop(img, whole, 12), img, atol=1e-6)
    assert torch.allclose(resized_crop(img, whole, 12, torch.tensor([True, True])), img.flip(-1), atol=1e-6)
    block = torch.tensor([[0.5, 0.0, 1.0, 0.5]] * 2)
    assert torch.allclose(resized_crop(img, block, 6), img[:, :, :6, 6:], atol=1e-6)
    # Only the flagged image is mirrored.
    mixed = resized_crop(img, whole, 12, torch.tensor([True, False]))
    assert torch.allclose(mixed[0], img[0].flip(-1), atol=1e-6) and torch.allclose(mixed[1], img[1], atol=1e-6)

def test_resized_crop_matches_torchvision_inside_the_border():
    img = torch.rand(3, 3, 16, 16)
    ours = resized_crop(img, torch.tensor([[2 / 16, 4 / 16, 10 / 16, 12 / 16]]).expand(3, 4), 16)
    tv = v2.functional.resized_crop(img, top=4, left=2, height=8, width=8, size=[16, 16], antialias=False)
    assert torch.allclose(ours[..., 1:-1, 1:-1], tv[..., 1:-1, 1:-1], atol=1e-5)

def test_resized_crop_handles_layouts_and_dtypes():
    img = torch.rand(2, 3, 12, 12)
    boxes = torch.tensor([[0.1, 0.2, 0.7, 0.9], [0.0, 0.0, 0.5, 0.5]])
    ref = resized_crop(img, boxes, 8)
    assert torch.allclose(resized_crop(img.to(memory_format=torch.channels_last), boxes, 8), ref, atol=1e-6)
    assert torch.allclose(resized_crop(img.transpose(2, 3).contiguous().transpose(2, 3), boxes, 8), ref, atol=1e-6)
    assert resized_crop(img.half(), boxes, 8).dtype == torch.float32
    assert torch.allclose(resized_crop(img.double(), boxes.double(), 8).float(), ref, atol=1e-6)
    uint8 = (img * 255).round().to(torch.uint8)
    assert torch.allclose(resized_crop(uint8, boxes, 8), resized_crop(uint8.float() / 255, boxes, 8), atol=1e-6)

@pytest.mark.parametrize('call, error', [
    (lambda i, b: resized_crop(i, b[:1], 12), ValueError), (lambda i, b: resized_crop(i, b.long(), 12), TypeError),
    (lambda i, b: resized_crop(i, b.flip(1), 12), ValueError), (lambda i, b: resized_crop(i, b, 0), ValueError),
    (lambda i, b: resized_crop(i, b * float('nan'), 12), ValueError),
    (lambda i, b: resized_crop(i, b, 12, torch.tensor([1, 0])), TypeError),
    (lambda i, b: resized_crop(i, b, 12, torch.tensor([True])), ValueError),
    (lambda i, b: resized_crop(i[0], b, 12), ValueError), (lambda i, b: resized_crop(i.numpy(), b, 12), TypeError),
    (lambda i, b: resized_crop(i[:0], b[:0], 12), ValueError)])
def test_resized_crop_rejects_bad_input(call, error):
    with pytest.raises(error): call(torch.rand(2, 3, 12, 12), torch.tensor([[0.0, 0.0, 1.0, 1.0]] * 2))

# --- colour ---------------------------------------------------------------------------------------------------------

def _torchvision_colour(image, b, c, s, h):
    out = v2.functional.adjust_brightness(image, b)
    out = v2.functional.adjust_contrast(out, c)
    out = v2.functional.adjust_saturation(out, s)
    return v2.functional.adjust_hue(out, h)

@FAST
@given(st.integers(0, 10_000))
def test_adjust_colour_matches_torchvision(seed):
    g = torch.Generator().manual_seed(seed)
    images = torch.rand(4, 3, 6, 6, generator=g)
    b, c, s = (torch.rand(4, generator=g) * 2 for _ in range(3))
    h = torch.rand(4, generator=g) - 0.5
    ours = adjust_colour(images, b, c, s, h)
    for i in range(4):
        assert torch.allclose(ours[i],
                              _torchvision_colour(images[i], b[i].item(), c[i].item(), s[i].item(), h[i].item()),
                              atol=1e-5)

@pytest.mark.parametrize('which', range(4))
def test_each_colour_factor_alone_matches_torchvision(which):
    "One factor at a time, the others neutral: a swapped or mis-scaled factor fails here."
    images = torch.rand(5, 3, 7, 7, generator=torch.Generator().manual_seed(which))
    values = torch.tensor([0.3, 0.7, 1.0, 1.4, 1.9]) if which < 3 else torch.tensor([-0.4, -0.1, 0.0, 0.15, 0.5])
    factors = [torch.ones(5), torch.ones(5), torch.ones(5), torch.zeros(5)]
    factors[which] = values
    ours = adjust_colour(images, *factors)
    for i in range(5):
        ref = _torchvision_colour(images[i], *(f[i].item() for f in factors))
        assert torch.allclose(ours[i], ref, atol=1e-5)

def test_adjust_colour_identity_grayscale_and_scalars():
    images = torch.rand(3, 3, 5, 5)
    ones = torch.ones(3)
    assert torch.allclose(adjust_colour(images, ones, ones, ones, torch.zeros(3)), images, atol=1e-6)
    assert torch.allclose(adjust_colour(images, ones, ones, torch.zeros(3), torch.zeros(3)), grayscale(images),
                          atol=1e-6)
    # A number applies to every image.
    assert torch.allclose(adjust_colour(images, 0.5, 1.0, 1.0, 0.0),
                          adjust_colour(images, 0.5 * ones, ones, ones, 0 * ones))
    assert torch.allclose(grayscale(images)[:, 0], v2.functional.rgb_to_grayscale(images)[:, 0], atol=1e-6)

@pytest.mark.parametrize('call, error', [
    (lambda x: adjust_colour(x, 1.0, 1.0, 1.0, 0.7), ValueError),
    (lambda x: adjust_colour(x, -0.1, 1.0, 1.0, 0.0), ValueError),
    (lambda x: adjust_colour(x, torch.ones(3), 1.0, 1.0, 0.0), ValueError),
    (lambda x: adjust_colour(x, torch.ones(2, dtype=torch.long), 1.0, 1.0, 0.0), TypeError),
    (lambda x: adjust_colour(x, float('nan'), 1.0, 1.0, 0.0), ValueError),
    (lambda x: adjust_colour(x, True, 1.0, 1.0, 0.0), TypeError),
    (lambda x: adjust_colour(x[:, :1], 1.0, 1.0, 1.0, 0.0), ValueError),
    (lambda x: adjust_colour(x * 2, 1.0, 1.0, 1.0, 0.0), ValueError),
    (lambda x: grayscale(x[:, :2]), ValueError)])
def test_colour_rejects_bad_input(call, error):
    with pytest.raises(error): call(torch.rand(2, 3, 5, 5))

# --- blur -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('kernel', [3, 5, 7])
def test_gaussian_blur_matches_torchvision(kernel):
    images, sigma = torch.rand(5, 3, 10, 10), torch.tensor([0.1, 0.7, 1.0, 1.9, 2.5])
    ours = gaussian_blur(images, sigma, kernel)
    for i in range(5):
        assert torch.allclose(ours[i], v2.functional.gaussian_blur(images[i], [kernel, kernel], [sigma[i].item()] * 2),
                              atol=1e-5)

def test_gaussian_blur_channels_last_and_single_channel():
    images, sigma = torch.rand(3, 1, 9, 9), torch.tensor([0.5, 1.0, 2.0])
    ref = gaussian_blur(images, sigma, 5)
    assert ref.shape == (3, 1, 9, 9)
    rgb = torch.rand(3, 3, 9, 9)
    assert torch.allclose(gaussian_blur(rgb.to(memory_format=torch.channels_last), sigma, 5),
                          gaussian_blur(rgb, sigma, 5), atol=1e-6)

@pytest.mark.parametrize('kernel, sigma, error', [
    (0, torch.ones(1), ValueError), (2, torch.ones(1), ValueError), (4, torch.ones(1), ValueError),
    (21, torch.ones(1), ValueError), (3.0, torch.ones(1), TypeError), (3, torch.zeros(1), ValueError),
    (3, torch.ones(2), ValueError), (3, torch.tensor([float('nan')]), ValueError)])
def test_gaussian_blur_rejects_bad_arguments(kernel, sigma, error):
    with pytest.raises(error): gaussian_blur(torch.rand(1, 3, 10, 10), sigma, kernel)

def test_gaussian_blur_takes_values_outside_the_unit_range():
    # any finite values (e.g. normalised images): the blur is linear, so it commutes with 3x − 1
    images, sigma = torch.rand(2, 3, 9, 9), torch.tensor([0.5, 1.5])
    shifted = gaussian_blur(images * 3 - 1, sigma, 5)
    assert torch.allclose(shifted, gaussian_blur(images, sigma, 5) * 3 - 1, atol=1e-5)

# --- augment_batch --------------------------------------------------------------------------------------------------

def _replayed_views(images, policy, seed):
    "The views augment_batch should make: its draws replayed in order, each step applied by torchvision per image."
    g = torch.Generator().manual_seed(seed)
    n, s = len(images), policy.jitter_strength
    boxes = sample_crop_boxes(n, policy.scale, policy.ratio, g)
    flip = torch.rand(n, generator=g) < policy.flip_p
    out = resized_crop(images, boxes, policy.size, flip=flip)
    low, high = max(0.0, 1 - 0.8 * s), 1 + 0.8 * s
    factors = [low + (high - low) * torch.rand(n, generator=g) for _ in range(3)]
    factors.append(-0.2 * s + 0.4 * s * torch.rand(n, generator=g))
    sigma = policy.blur_sigma[0] + (policy.blur_sigma[1] - policy.blur_sigma[0]) * torch.rand(n, generator=g)
    jitter, gray, blur = (torch.rand(n, generator=g) < p for p in (policy.jitter_p, policy.grayscale_p, policy.blur_p))
    views = []
    for i in range(n):
        v = out[i]
        if jitter[i]: v = _torchvision_colour(v, *(f[i].item() for f in factors))
        if gray[i]: v = v2.functional.rgb_to_grayscale(v, num_output_channels=3)
        k = policy.blur_kernel
        if blur[i]: v = v2.functional.gaussian_blur(v, [k, k], [sigma[i].item()] * 2)
        views.append(v.clamp(0, 1))
    return torch.stack(views)

@pytest.mark.parametrize('policy', [AugmentationPolicy(), AugmentationPolicy(jitter_strength=1.0, size=24),
                                    AugmentationPolicy(jitter_p=1.0, grayscale_p=0.5, blur_p=1.0, scale=(0.3, 0.6))])
def test_augment_batch_is_the_policy_applied_per_image(shapes, policy):
    "Replaying the draws and applying torchvision's operations image by image gives the same views."
    ours = augment_batch(shapes.images[:24], policy, torch.Generator().manual_seed(5))
    assert torch.allclose(ours, _replayed_views(shapes.images[:24], policy, 5), atol=1e-4)

def test_augment_batch_draws_independent_parameters_per_image(shapes):
    copies = shapes.images[:1].expand(32, -1, -1, -1)
    out = augment_batch(copies, AugmentationPolicy(), torch.Generator().manual_seed(0))
    assert all(not torch.equal(out[i], out[j]) for i in range(32) for j in range(i))

@pytest.mark.parametrize('field', ['flip_p', 'grayscale_p', 'jitter_p', 'blur_p'])
@pytest.mark.parametrize('p', [0.25, 0.5])
def test_each_random_step_happens_per_image_with_its_probability(shapes, field, p):
    "With one step on at probability p, about that share of many copies is changed, not all or none."
    off = dict(scale=(1.0, 1.0), ratio=(1.0, 1.0), flip_p=0.0, jitter_p=0.0, grayscale_p=0.0, blur_p=0.0)
    policy = AugmentationPolicy(**{**off, field: p}, jitter_strength=1.0, blur_sigma=(1.0, 2.0))
    image = shapes.images[3:4]
    out = augment_batch(image.expand(2000, -1, -1, -1), policy, torch.Generator().manual_seed(1))
    changed = (out - image).abs().flatten(1).amax(1) > 1e-4
    assert abs(changed.float().mean() - p) < 0.04

def test_a_step_that_is_off_changes_nothing(shapes):
    off = AugmentationPolicy(scale=(1.0, 1.0), ratio=(1.0, 1.0), flip_p=0.0, jitter_p=0.0, grayscale_p=0.0, blur_p=0.0)
    assert torch.allclose(augment_batch(shapes.images[:8], off, torch.Generator().manual_seed(0)), shapes.images[:8],
                          atol=1e-6)
    flip = off.replace(flip_p=1.0)
    assert torch.allclose(augment_batch(shapes.images[:8], flip), shapes.images[:8].flip(-1), atol=1e-6)
    gray = off.replace(grayscale_p=1.0)
    assert torch.allclose(augment_batch(shapes.images[:8], gray), grayscale(shapes.images[:8]), atol=1e-6)

@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.float16, torch.uint8])
@pytest.mark.parametrize('size', [16, 32, 48])
def test_augment_batch_shapes_and_ranges(shapes, dtype, size):
    images = ((shapes.images[:10] * 255).round().to(torch.uint8) if dtype == torch.uint8
              else shapes.images[:10].to(dtype))
    out = augment_batch(images, AugmentationPolicy(size=size, jitter_strength=1.0), torch.Generator().manual_seed(3))
    assert out.shape == (10, 3, size, size) and out.is_floating_point() and torch.isfinite(out).all()
    assert out.min() >= 0 and out.max() <= 1

def test_augment_batch_layouts_give_the_same_views(shapes):
    images = shapes.images[:8]
    ref = augment_batch(images, AugmentationPolicy(), torch.Generator().manual_seed(2))
    for variant in (images.to(memory_format=torch.channels_last), images.transpose(2, 3).contiguous().transpose(2, 3)):
        assert torch.allclose(augment_batch(variant, AugmentationPolicy(), torch.Generator().manual_seed(2)), ref,
                              atol=1e-6)
    one = augment_batch(images[:1], AugmentationPolicy(), torch.Generator().manual_seed(2))
    assert one.shape == (1, 3, 32, 32)

def test_augment_batch_is_deterministic_under_a_generator(shapes):
    a = augment_batch(shapes.images[:8], AugmentationPolicy(), torch.Generator().manual_seed(5))
    b = augment_batch(shapes.images[:8], AugmentationPolicy(), torch.Generator().manual_seed(5))
    c = augment_batch(shapes.images[:8], AugmentationPolicy(), torch.Generator().manual_seed(6))
    assert torch.equal(a, b) and not torch.equal(a, c)

# The lessons' committed outputs were made with the implementation before the speed-up (issue 13, P3). Views
# depend on the draws (their number, shapes and order) and on the arithmetic; these two tests pin both.
_RECORDED = {  # (views * probe).sum over the pixels, per image and channel, recorded with that implementation
    'default': [[5.5904, 6.3459, 8.1372], [8.5935, 6.1674, 6.899], [8.1936, 10.1287, 8.0989],
                [10.6184, 7.5442, 10.6715], [9.0018, 9.0018, 9.0018], [7.0838, 10.4098, 9.0116]],
    'every step': [[-0.0236, 0.089, 0.3986], [1.2701, -0.0689, -0.3605], [0.6302, 0.4243, 1.3937],
                   [1.3751, -0.982, 1.6555], [0.136, 0.136, 0.136], [0.6425, 0.8599, 0.3664]]}

@pytest.mark.parametrize('name, policy', [
    ('default', AugmentationPolicy(size=16)),
    ('every step', AugmentationPolicy(size=12, scale=(0.3, 0.9), jitter_p=1.0, grayscale_p=0.5, blur_p=1.0,
                                      jitter_strength=1.0))])
def test_augment_batch_gives_the_views_recorded_before_the_speed_up(name, policy):
    g = torch.Generator().manual_seed(0)
    images, probe = torch.rand(6, 3, 16, 16, generator=g), torch.randn(16, 16, generator=g)
    views = augment_batch(images, policy, torch.Generator().manual_seed(1))
    projected = (views * probe[:policy.size, :policy.size]).sum((-2, -1))
    torch.testing.assert_close(projected, torch.tensor(_RECORDED[name]), atol=2e-4, rtol=0)

def _documented_draws(n: int, generator):
    "augment_batch's draws, in order: crop areas and log aspect ratios (n, 10 tries), crop x and y, flip, "
    "brightness, contrast, saturation, hue, blur sigma, then whether to jitter, grey and blur."
    for shape in [(n, 10), (n, 10)] + [(n,)] * 11: torch.rand(shape, generator=generator)

@pytest.mark.parametrize('n', [1, 37])
def test_augment_batch_consumes_the_generator_as_documented(shapes, n):
    g, replay = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    augment_batch(shapes.images[:n], AugmentationPolicy(), g)
    _documented_draws(n, replay)
    assert torch.equal(g.get_state(), replay.get_state())
    # Without a generator, torch's global one is advanced the same way.
    torch.manual_seed(3)
    augment_batch(shapes.images[:n], AugmentationPolicy(blur_p=0.0))
    after = torch.get_rng_state()
    torch.manual_seed(3)
    _documented_draws(n, None)
    assert torch.equal(after, torch.get_rng_state())

def test_augment_batch_and_adjust_colour_leave_their_input_alone(shapes):
    "The colour steps work in place on a copy: the caller's images never change."
    images = shapes.images[:16].clone()
    augment_batch(images, AugmentationPolicy(jitter_p=1.0, grayscale_p=0.5, blur_p=1.0),
                  torch.Generator().manual_seed(0))
    adjust_colour(images, 1.5, 0.5, 0.5, 0.3)
    assert torch.equal(images, shapes.images[:16])

@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')
def test_augment_batch_on_gpu_matches_cpu(shapes):
    cpu = augment_batch(shapes.images[:16], AugmentationPolicy(), torch.Generator().manual_seed(7))
    gpu = augment_batch(shapes.images[:16].cuda(), AugmentationPolicy(), torch.Generator().manual_seed(7))
    assert gpu.device.type == 'cuda' and torch.allclose(gpu.cpu(), cpu, atol=1e-4)

@pytest.mark.parametrize('bad, error', [
    (torch.rand(3, 32, 32), ValueError), (torch.rand(2, 1, 32, 32), ValueError), (torch.rand(2, 4, 32, 32), ValueError),
    (torch.rand(2, 32, 32, 3), ValueError), (torch.randint(0, 3, (2, 3, 8, 8)), TypeError),
    (torch.rand(2, 3, 8, 8) > 0.5, TypeError), (np.zeros((2, 3, 8, 8)), TypeError),
    (torch.rand(0, 3, 8, 8), ValueError),
    (torch.full((2, 3, 8, 8), float('nan')), ValueError), (torch.randn(2, 3, 8, 8) * 3, ValueError),
    (torch.rand(2, 3, 0, 8), ValueError)])
def test_augment_batch_rejects_bad_images(bad, error):
    with pytest.raises(error): augment_batch(bad)

def test_an_empty_batch_is_called_empty():
    # no images at all gets the empty-batch message; "no pixels" is for images of size zero
    with pytest.raises(ValueError, match='images is empty'):
        augment_batch(torch.rand(0, 3, 8, 8))

def test_augment_batch_rejects_bad_policy_and_generator():
    with pytest.raises(TypeError): augment_batch(torch.rand(2, 3, 8, 8), {'size': 8})
    with pytest.raises(TypeError): augment_batch(torch.rand(2, 3, 8, 8), generator=np.random.default_rng(0))

# --- object_kept ----------------------------------------------------------------------------------------------------

def test_object_kept_by_hand_and_by_brute_force(shapes):
    masks = shapes.masks[:20]
    assert torch.allclose(object_kept(masks, torch.tensor([[0.0, 0.0, 1.0, 1.0]] * 20)), torch.ones(20))
    boxes = sample_crop_boxes(20, generator=torch.Generator().manual_seed(1))
    fine = masks.repeat_interleave(8, 1).repeat_interleave(8, 2)
    c = (torch.arange(256) + 0.5) / 256
    in_x = (c >= boxes[:, :1]) & (c <= boxes[:, 2:3])
    in_y = (c >= boxes[:, 1:2]) & (c <= boxes[:, 3:4])
    brute = (fine * in_y[:, :, None] * in_x[:, None, :]).sum((1, 2)) / fine.sum((1, 2))
    assert torch.allclose(object_kept(masks, boxes), brute, atol=0.02)

def test_object_kept_counts_cut_pixels_in_proportion():
    m = torch.zeros(1, 4, 4)
    m[0, 1, 1] = 1.0  # one pixel covering x in [0.25, 0.5), y in [0.25, 0.5)
    half = object_kept(m, torch.tensor([[0.375, 0.0, 1.0, 1.0]]))
    quarter = object_kept(m, torch.tensor([[0.375, 0.375, 1.0, 1.0]]))
    assert torch.allclose(half, torch.tensor([0.5])) and torch.allclose(quarter, torch.tensor([0.25]))

@pytest.mark.parametrize('masks, boxes, error', [
    (torch.zeros(1, 4, 4), torch.tensor([[0.0, 0.0, 1.0, 1.0]]), ValueError),
    (-torch.ones(1, 4, 4), torch.tensor([[0.0, 0.0, 1.0, 1.0]]), ValueError),
    (torch.ones(1, 4, 4, dtype=torch.long), torch.tensor([[0.0, 0.0, 1.0, 1.0]]), TypeError),
    (torch.ones(4, 4), torch.tensor([[0.0, 0.0, 1.0, 1.0]]), ValueError),
    (torch.ones(2, 4, 4), torch.tensor([[0.0, 0.0, 1.0, 1.0]]), ValueError),
    (torch.full((1, 4, 4), float('nan')), torch.tensor([[0.0, 0.0, 1.0, 1.0]]), ValueError)])
def test_object_kept_rejects_bad_input(masks, boxes, error):
    with pytest.raises(error): object_kept(masks, boxes)

def test_channels_last_images_get_the_permute_hint():
    "An (N, H, W, C) batch is named for what it is, with the call that fixes it (found by the mutation pass)."
    from contrastive_nb.augment import augment_batch
    for batch in (2, 4):  # 4 images: the batch size is a channel count, the hint still reads dimension 1
        with pytest.raises(ValueError, match=r'channels look last: use images\.permute\(0, 3, 1, 2\)'):
            augment_batch(torch.rand(batch, 8, 8, 3), AugmentationPolicy(size=8))

# --- faults found by probing (issue 23) ---------------------------------------------------------------------------

@pytest.mark.parametrize('sigma', [1e-300, 1e-50])
def test_blur_with_a_sigma_that_underflows_is_the_identity_not_nan(sigma):
    "A float64 σ of 1e-300 became 0 in float32: 0 / 0 at the centre tap made every pixel NaN, silently."
    images = torch.rand(3, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    out = gaussian_blur(images, torch.full((3,), sigma, dtype=torch.float64), 3)
    torch.testing.assert_close(out, images)

def test_object_kept_sums_half_precision_masks_in_float32_and_refuses_fractions_above_one():
    "A 256×256 float16 mask summed past 65 504: NaN for the whole box, 0 (not 0.5) for half of it, silently."
    masks = torch.ones(2, 256, 256, dtype=torch.float16)
    boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.5, 1.0]])
    kept = object_kept(masks, boxes)
    assert kept.dtype == torch.float16
    torch.testing.assert_close(kept.float(), torch.tensor([1.0, 0.5]))
    with pytest.raises(ValueError, match='at most 1'): object_kept(masks.float() * 1e38, boxes)

def test_augment_batch_check_values_false_is_the_same_views_without_the_value_check(shapes):
    "The trainer's fast path (issue 24): identical views; shapes and dtypes still checked; values not."
    policy = AugmentationPolicy()
    checked = augment_batch(shapes.images[:16], policy, torch.Generator().manual_seed(2))
    fast = augment_batch(shapes.images[:16], policy, torch.Generator().manual_seed(2), check_values=False)
    assert torch.equal(fast, checked)
    pixels = (shapes.images[:4] * 255).round().to(torch.uint8)
    assert torch.equal(augment_batch(pixels, policy, torch.Generator().manual_seed(3), check_values=False),
                       augment_batch(pixels, policy, torch.Generator().manual_seed(3)))
    with pytest.raises(ValueError, match='must lie in'): augment_batch(shapes.images[:4] * 2)
    assert augment_batch(shapes.images[:4] * 2, policy, check_values=False).shape == (4, 3, 32, 32)
    with pytest.raises(ValueError, match='channels look last'):
        augment_batch(torch.rand(4, 32, 32, 3), check_values=False)
    with pytest.raises(TypeError, match='check_values must be True or False'):
        augment_batch(shapes.images[:4], check_values='no')
