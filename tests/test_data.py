"""Package tests for contrastive_nb.data: Shapes, digits, tickets, the CIFAR-10/STL-10 loaders."""
import math, pickle

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch.utils.data import DataLoader

from contrastive_nb.data import (COLOURS, SHAPE_NAMES, TICKET_COLUMNS, DatasetNotFoundError, ImageDataset,
                                 as_float_images, load_cifar10, load_digits, load_stl10, load_tickets,
                                 make_moving_shapes, make_shapes, render_shapes, show_grid, split_tickets,
                                 write_cifar10_fixture, write_stl10_fixture)

@pytest.fixture(scope='module')
def shapes(): return make_shapes(600, size=32, seed=7)

# --- Shapes -----------------------------------------------------------------------------------------------------

def test_shapes_deterministic_per_seed():
    a, b, c = make_shapes(50, seed=3), make_shapes(50, seed=3), make_shapes(50, seed=4)
    assert torch.equal(a.images, b.images) and torch.equal(a.masks, b.masks) and a.factors.equals(b.factors)
    assert not torch.equal(a.images, c.images)

def test_shapes_result_does_not_depend_on_chunking():
    assert torch.equal(make_shapes(70, seed=1, chunk=16).images, make_shapes(70, seed=1, chunk=512).images)

def test_shapes_dtypes_and_ranges(shapes):
    assert shapes.images.shape == (600, 3, 32, 32) and shapes.images.dtype == torch.float32
    assert 0 <= shapes.images.min() and shapes.images.max() <= 1
    assert shapes.masks.shape == (600, 32, 32) and 0 <= shapes.masks.min() and shapes.masks.max() <= 1
    assert shapes.labels.dtype == torch.long and shapes.labels.min() >= 0 and shapes.labels.max() < len(SHAPE_NAMES)
    assert shapes.classes == list(SHAPE_NAMES)
    f = shapes.factors
    assert list(f.columns) == ['shape', 'shape_name', 'colour', 'colour_name', 'x', 'y', 'scale', 'rotation',
                               'background']
    assert f.scale.between(0.20, 0.34).all() and f.rotation.between(0, 2 * math.pi).all()
    assert f.background.between(0, 0.35).all()
    assert ((f.x - f.scale) >= 0).all() and ((f.x + f.scale) <= 1).all() and ((f.y - f.scale) >= 0).all()

def test_shape_labels_match_factor_table(shapes):
    f = shapes.factors
    assert (f['shape'].values == shapes.labels.numpy()).all()
    assert (f.shape_name.values == np.array(SHAPE_NAMES)[f['shape'].values]).all()
    assert (f.colour_name.values == np.array(list(COLOURS))[f.colour.values]).all()

def test_mask_lies_within_the_recorded_disc(shapes):
    "Every covered pixel is within the object's radius (plus one pixel) of its recorded centre."
    n, h, w = shapes.masks.shape
    ys, xs = torch.meshgrid((torch.arange(h) + 0.5) / h, (torch.arange(w) + 0.5) / w, indexing='ij')
    f = shapes.factors
    x, y, s = (torch.tensor(f[c].values, dtype=torch.float32)[:, None, None] for c in ('x', 'y', 'scale'))
    dist = torch.sqrt((xs - x) ** 2 + (ys - y) ** 2)
    assert (shapes.masks[dist > s + 1.5 / h] == 0).all()
    assert (shapes.masks.sum((1, 2)) > 10).all()  # every object is visible

def test_object_and_background_pixels_carry_their_factors(shapes):
    inside, outside = shapes.masks > 0.999, shapes.masks < 0.001
    rgb = torch.tensor(list(COLOURS.values()))[torch.tensor(shapes.factors.colour.values)]
    obj = (shapes.images * inside[:, None]).sum((2, 3)) / inside.sum((1, 2))[:, None]
    bg = (shapes.images * outside[:, None]).sum((2, 3)) / outside.sum((1, 2))[:, None]
    assert (obj - rgb).abs().max() < 0.02
    # clamping the noise at 0 lifts the mean of a black background by at most noise·φ(0) ≈ 0.012
    assert (bg - torch.tensor(shapes.factors.background.values, dtype=torch.float32)[:, None]).abs().max() < 0.02

def test_factors_are_resolution_independent():
    small, large = make_shapes(12, size=16, seed=5), make_shapes(12, size=64, seed=5)
    assert small.factors.equals(large.factors)
    down = torch.nn.functional.avg_pool2d(large.masks[:, None], 4)[:, 0]
    assert (down - small.masks).abs().mean() < 0.02

@pytest.mark.parametrize('kwargs, error, message', [
    (dict(n=0), ValueError, 'n must'), (dict(size=4), ValueError, 'size must be at least 8'),
    (dict(scale_range=(0.3, 0.6)), ValueError, 'scale_range'),
    (dict(scale_range=(0.3, 0.2)), ValueError, 'scale_range'),
    (dict(scale_range=(0.1, 0.2, 0.3)), ValueError, 'scale_range'), (dict(scale_range=0.2), TypeError, 'scale_range'),
    (dict(n=True), TypeError, 'n must'), (dict(n=4.0), TypeError, 'n must'), (dict(size=32.0), TypeError, 'size'),
    (dict(seed=1.5), TypeError, 'seed'), (dict(noise=-0.1), ValueError, 'noise'),
    (dict(noise=float('nan')), ValueError, 'noise'),
    (dict(background_max=1.5), ValueError, 'background_max'), (dict(supersample=0), ValueError, 'supersample'),
    (dict(chunk=0), ValueError, 'chunk')])
def test_make_shapes_rejects_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message): make_shapes(**{'n': 4, **kwargs})

# --- rendering chosen factors, and clips ----------------------------------------------------------------------------

def test_make_shapes_is_draw_factors_then_render():
    ref = make_shapes(40, size=24, seed=2, noise=0.0)
    redrawn = render_shapes(ref.factors, size=24)
    assert torch.equal(redrawn.images, ref.images) and torch.equal(redrawn.masks, ref.masks)
    assert torch.equal(redrawn.labels, ref.labels) and redrawn.factors.equals(ref.factors)
    # With noise, the same generator stream continues after the factor draws.
    noisy = make_shapes(40, size=24, seed=2)
    assert not torch.equal(noisy.images, ref.images) and torch.equal(noisy.masks, ref.masks)

def test_render_shapes_does_not_depend_on_chunking():
    f = make_shapes(70, seed=3).factors
    assert torch.equal(render_shapes(f, noise=0.05, seed=1, chunk=16).images,
                       render_shapes(f, noise=0.05, seed=1, chunk=512).images)

def test_render_shapes_draws_a_chosen_scene():
    table = pd.DataFrame({'shape_name': ['circle'], 'colour_name': ['red'], 'x': [0.5], 'y': [0.25],
                          'scale': [0.2], 'rotation': [0.0], 'background': [0.1]})
    ds = render_shapes(table, size=32)
    assert ds.labels.tolist() == [0] and ds.factors.colour.tolist() == [0]
    m = ds.masks[0]
    ys, xs = torch.meshgrid((torch.arange(32) + 0.5) / 32, (torch.arange(32) + 0.5) / 32, indexing='ij')
    assert abs((m * xs).sum() / m.sum() - 0.5) < 0.01 and abs((m * ys).sum() / m.sum() - 0.25) < 0.01
    assert torch.allclose(ds.images[0, :, 16, 16], torch.tensor([0.10, 0.10, 0.10]), atol=1e-6)  # background
    assert torch.allclose(ds.images[0, :, 8, 16], torch.tensor([0.90, 0.10, 0.10]), atol=1e-6)  # the red circle
    assert len(render_shapes(table.iloc[:0])) == 0

@pytest.mark.parametrize('change, error', [
    (lambda f: f.assign(colour_name='mauve'), ValueError), (lambda f: f.drop(columns='rotation'), ValueError),
    (lambda f: f.assign(x=float('nan')), ValueError), (lambda f: f.assign(scale=0.0), ValueError),
    (lambda f: f.assign(y='top'), TypeError), (lambda f: f.to_dict(), TypeError)])
def test_render_shapes_rejects_bad_factors(change, error):
    with pytest.raises(error): render_shapes(change(make_shapes(4, seed=0).factors))

def test_render_shapes_rejects_bad_options():
    f = make_shapes(4, seed=0).factors
    for kwargs, error in ((dict(size=0), ValueError), (dict(size=8.0), TypeError), (dict(noise=-1.0), ValueError),
                          (dict(seed=0.5), TypeError), (dict(chunk=0), ValueError)):
        with pytest.raises(error): render_shapes(f, **kwargs)

def test_moving_shapes_move_within_the_image_and_keep_their_identity():
    clips = make_moving_shapes(n_sequences=6, n_frames=20, speed=0.05, seed=4)
    f = clips.factors
    assert len(clips) == 120 and f.sequence.tolist() == [s for s in range(6) for _ in range(20)]
    assert f.time.tolist() == list(range(20)) * 6
    for c in ('x', 'y'): assert ((f[c] - f.scale) >= -1e-6).all() and ((f[c] + f.scale) <= 1 + 1e-6).all()
    assert (f.groupby('sequence')[['shape_name', 'colour_name', 'scale', 'background']].nunique() == 1).all().all()
    step = np.hypot(f.x.diff(), f.y.diff())[f.time > 0]
    assert (step <= 0.05 + 1e-5).all() and step.mean() > 0.03
    turn = f.rotation.diff()[f.time > 0]
    assert np.allclose(turn, 0.15, atol=1e-5)
    assert torch.equal(make_moving_shapes(2, 3, seed=1).images, make_moving_shapes(2, 3, seed=1).images)

@pytest.mark.parametrize('kwargs, error', [(dict(n_sequences=0), ValueError), (dict(n_frames=0), ValueError),
                                           (dict(n_sequences=2.0), TypeError), (dict(speed=-0.1), ValueError),
                                           (dict(spin=float('inf')), ValueError), (dict(seed='a'), TypeError)])
def test_moving_shapes_reject_bad_arguments(kwargs, error):
    with pytest.raises(error): make_moving_shapes(**{'n_sequences': 2, 'n_frames': 3, **kwargs})

# --- the common interface ---------------------------------------------------------------------------------------

def test_image_dataset_items_and_loader(shapes):
    x, y = shapes[3]
    assert x.shape == (3, 32, 32) and x.dtype == torch.float32 and int(y) == int(shapes.labels[3])
    xb, yb = next(iter(DataLoader(shapes, batch_size=16)))
    assert xb.shape == (16, 3, 32, 32) and yb.dtype == torch.long

def test_subset_keeps_factors_and_masks_aligned(shapes):
    sub = shapes.subset([5, 1, 9])
    assert torch.equal(sub.images, shapes.images[[5, 1, 9]]) and torch.equal(sub.masks, shapes.masks[[5, 1, 9]])
    assert sub.factors.x.tolist() == shapes.factors.x.iloc[[5, 1, 9]].tolist() and list(sub.factors.index) == [0, 1, 2]

def test_subset_takes_a_boolean_mask_as_a_mask(shapes):
    "labels >= 2 selects those rows; read as integers it would silently give rows 0 and 1."
    mask = shapes.labels >= 2
    sub = shapes.subset(mask)
    assert len(sub) == int(mask.sum()) and (sub.labels >= 2).all()
    assert (torch.equal(sub.images, shapes.images[mask])
            and sub.factors.x.tolist() == shapes.factors.x[mask.numpy()].tolist())
    assert len(shapes.subset(mask.numpy())) == len(sub)  # a numpy mask too
    assert len(shapes.subset(torch.zeros(len(shapes), dtype=torch.bool))) == 0

@pytest.mark.parametrize('index, error', [
    (torch.tensor([True, False]), ValueError), (torch.tensor([0, 600]), ValueError), (torch.tensor([-1]), ValueError),
    (torch.tensor([0.0, 1.0]), TypeError), (torch.tensor([[0, 1]]), ValueError), ([0.5], TypeError)])
def test_subset_rejects_bad_indices(shapes, index, error):
    with pytest.raises(error): shapes.subset(index)

def test_subset_accepts_numpy_lists_and_empty(shapes):
    assert len(shapes.subset(np.array([1, 2]))) == 2 and len(shapes.subset([])) == 0
    assert shapes.subset(torch.tensor([3, 3], dtype=torch.int32)).labels.tolist() == [int(shapes.labels[3])] * 2

def test_uint8_images_become_floats_in_unit_range():
    raw = torch.tensor([[[[0, 255], [128, 1]]]], dtype=torch.uint8)
    assert torch.allclose(as_float_images(raw), raw.float() / 255)
    x, _ = ImageDataset(raw, torch.tensor([0]), ['a'])[0]
    assert x.dtype == torch.float32 and x.max() == 1

@pytest.mark.parametrize('images, labels, error', [
    (torch.rand(4, 8, 8), torch.arange(4), ValueError), (torch.rand(4, 1, 8, 8), torch.arange(3), ValueError),
    (torch.zeros(4, 1, 8, 8, dtype=torch.int32), torch.arange(4), TypeError),
    (torch.rand(4, 1, 8, 8), torch.tensor([0.0, 1.0, 2.0, 3.0]), TypeError),
    (torch.rand(4, 1, 8, 8), torch.tensor([True, False, True, False]), TypeError),
    (torch.rand(4, 1, 8, 8), torch.tensor([0, 1, 2, 4]), ValueError),
    (torch.rand(4, 1, 8, 8), torch.tensor([0, 1, 2, -2]), ValueError),
    (torch.rand(4, 1, 8, 8) * float('nan'), torch.arange(4), ValueError),
    (torch.rand(4, 1, 8, 8) * 2, torch.arange(4), ValueError),
    (np.zeros((4, 1, 8, 8)), torch.arange(4), TypeError)])
def test_image_dataset_rejects_inconsistent_inputs(images, labels, error):
    with pytest.raises(error): ImageDataset(images, labels, list('abcd'))

def test_image_dataset_checks_factors_masks_and_classes():
    images = torch.rand(2, 3, 4, 4)
    with pytest.raises(TypeError): ImageDataset(images, [0, 1], 'ab')
    with pytest.raises(TypeError): ImageDataset(images, [0, 1], ['a', 'b'], factors={'x': [1, 2]})
    with pytest.raises(ValueError): ImageDataset(images, [0, 1], ['a', 'b'], factors=pd.DataFrame({'x': [1]}))
    with pytest.raises(ValueError): ImageDataset(images, [0, 1], ['a', 'b'], masks=torch.rand(2, 4, 5))
    with pytest.raises(TypeError): ImageDataset(images, [0, 1], ['a', 'b'], masks=torch.ones(2, 4, 4, dtype=torch.long))
    ds = ImageDataset(images.to(memory_format=torch.channels_last), np.array([0, -1]), ['a', 'b'])
    assert torch.equal(ds[0][0], images[0]) and ds.labels.tolist() == [0, -1]

@pytest.mark.parametrize('dtype', [torch.int16, torch.int32, torch.int64, torch.bool])
def test_as_float_images_refuses_integers_without_a_scale(dtype):
    with pytest.raises(TypeError): as_float_images(torch.zeros(1, 3, 2, 2, dtype=dtype))

def test_getitem_takes_only_int_indices(shapes):
    assert torch.equal(shapes[np.int64(3)][0], shapes[3][0]) and torch.equal(shapes[-1][0], shapes[len(shapes) - 1][0])
    for bad in (True, 2.5, float('nan')):
        with pytest.raises(TypeError): shapes[bad]
    with pytest.raises(IndexError): shapes[len(shapes)]  # what iteration relies on

def test_load_tickets_names_a_bad_path():
    with pytest.raises(TypeError, match='path'): load_tickets(3)

def test_as_float_images_refuses_values_outside_the_unit_range():
    for bad in (torch.tensor([[[[float("nan")]]]]), torch.tensor([[[[float("inf")]]]])):
        with pytest.raises(ValueError): as_float_images(bad)

def test_as_float_images_keeps_floats_and_upcasts_half():
    x = torch.rand(1, 3, 2, 2)
    assert torch.equal(as_float_images(x), x) and as_float_images(x.half()).dtype == torch.float32
    with pytest.raises(TypeError): as_float_images(x.numpy())

def test_show_grid_checks_its_input():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig = show_grid(torch.rand(3, 1, 8, 8), ['a', 'b', 'c'], ncols=2)
    assert len(fig.axes) == 4
    plt.close(fig)
    with pytest.raises(ValueError): show_grid(torch.rand(3, 3, 8, 8), ['a', 'b'])
    with pytest.raises(ValueError): show_grid(torch.rand(3, 2, 8, 8))
    with pytest.raises(ValueError): show_grid(torch.rand(3, 8, 8))
    with pytest.raises(ValueError): show_grid(torch.rand(3, 3, 8, 8), ncols=0)

def test_digits():
    d = load_digits()
    assert d.images.shape == (1797, 1, 8, 8) and d.images.min() == 0 and d.images.max() == 1
    assert sorted(d.labels.unique().tolist()) == list(range(10))

# --- support tickets --------------------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def tickets(): return load_tickets()

def test_tickets_file_meets_its_datasheet(tickets):
    assert list(tickets.columns) == list(TICKET_COLUMNS)
    assert len(tickets) >= 300 and tickets.intent.nunique() >= 15
    assert tickets.ticket_id.is_unique and not tickets.text.duplicated().any() and (tickets.text.str.len() > 0).all()
    per_problem = tickets.groupby('problem_id').agg(n=('text', 'size'), intents=('intent', 'nunique'))
    assert (per_problem.n >= 3).all() and (per_problem.intents == 1).all()

@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), test_frac=st.floats(0.05, 0.95))
def test_ticket_split_never_leaks_a_problem(tickets, seed, test_frac):
    train, test = split_tickets(tickets, test_frac=test_frac, seed=seed)
    assert not set(train.problem_id) & set(test.problem_id)
    assert (len(train) + len(test) == len(tickets)
            and set(train.ticket_id) | set(test.ticket_id) == set(tickets.ticket_id))
    multi = tickets.groupby('intent').problem_id.nunique().loc[lambda s: s >= 2].index
    assert set(multi) <= set(train.intent) and set(multi) <= set(test.intent)

def test_ticket_split_is_deterministic_and_sized(tickets):
    a, b = split_tickets(tickets, seed=1), split_tickets(tickets, seed=1)
    assert a[1].equals(b[1]) and not a[1].equals(split_tickets(tickets, seed=2)[1])
    assert 0.15 < a[1].problem_id.nunique() / tickets.problem_id.nunique() < 0.35

@pytest.mark.parametrize('kwargs, error', [(dict(test_frac=0), ValueError), (dict(test_frac=1.0), ValueError),
                                           (dict(test_frac=float('nan')), ValueError),
                                           (dict(test_frac='0.2'), TypeError),
                                           (dict(seed=-1), ValueError), (dict(seed=0.5), TypeError)])
def test_ticket_split_rejects_bad_arguments(tickets, kwargs, error):
    with pytest.raises(error): split_tickets(tickets, **kwargs)

def test_ticket_split_checks_the_table(tickets):
    with pytest.raises(TypeError): split_tickets(tickets.to_dict())
    with pytest.raises(ValueError, match='lacks'): split_tickets(tickets.drop(columns='intent'))

def test_load_tickets_names_missing_columns(tmp_path):
    bad = tmp_path / 'bad.csv'
    pd.DataFrame({'text': ['hi']}).to_csv(bad, index=False)
    with pytest.raises(ValueError, match='lacks the columns'): load_tickets(bad)

# --- CIFAR-10 / STL-10 ------------------------------------------------------------------------------------------

def test_cifar10_reads_the_pickle_format(tmp_path):
    folder = write_cifar10_fixture(tmp_path, per_batch=3, seed=1)
    train, test = load_cifar10(tmp_path), load_cifar10(tmp_path, train=False)
    assert train.images.shape == (15, 3, 32, 32) and train.images.dtype == torch.uint8 and len(test) == 3
    with open(folder / 'data_batch_2', 'rb') as f: batch = pickle.load(f, encoding='latin1')
    row = batch['data'][0]  # 1024 red values, then green, then blue, each row-major
    img = train.images[3]
    assert (img[0, 0, 0] == row[0] and img[0, 1, 0] == row[32] and img[1, 0, 0] == row[1024]
            and img[2, 31, 31] == row[3071])
    assert train.labels[3] == batch['labels'][0] and train.classes[0] == 'airplane'
    x, _ = train[0]
    assert x.dtype == torch.float32 and 0 <= x.min() and x.max() <= 1

def test_cifar10_reads_bytes_keys_as_the_python2_originals_have(tmp_path):
    folder = write_cifar10_fixture(tmp_path, per_batch=2)
    for name in ['data_batch_1', 'test_batch']:
        with open(folder / name, 'rb') as f: d = pickle.load(f)
        with open(folder / name, 'wb') as f: pickle.dump({k.encode(): v for k, v in d.items()}, f)
    assert len(load_cifar10(tmp_path, train=False)) == 2

def test_stl10_reads_the_column_major_binaries(tmp_path):
    folder = write_stl10_fixture(tmp_path, n=3, seed=2)
    train = load_stl10(tmp_path)
    raw = np.fromfile(folder / 'train_X.bin', dtype=np.uint8).reshape(3, 3, 96, 96)  # (N, C, W, H) on disk
    assert torch.equal(train.images, torch.from_numpy(raw.transpose(0, 1, 3, 2).copy()))
    labels = np.fromfile(folder / 'train_y.bin', dtype=np.uint8)
    assert train.labels.tolist() == (labels.astype(int) - 1).tolist() and train.classes[2] == 'car'
    unlabeled = load_stl10(tmp_path, split='unlabeled')
    assert len(unlabeled) == 3 and (unlabeled.labels == -1).all()

@pytest.mark.parametrize('loader, folder', [(load_cifar10, 'cifar-10-batches-py'), (load_stl10, 'stl10_binary')])
def test_missing_benchmark_explains_how_to_get_it(tmp_path, loader, folder):
    with pytest.raises(DatasetNotFoundError) as e: loader(tmp_path)
    message = str(e.value)
    assert str(tmp_path / folder) in message and 'download=True' in message and 'https://' in message
    assert isinstance(e.value, FileNotFoundError)

def test_default_root_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv('CONTRASTIVE_NB_DATA', str(tmp_path))
    with pytest.raises(DatasetNotFoundError, match=str(tmp_path)): load_cifar10()

def test_incomplete_cifar_names_the_missing_batch(tmp_path):
    folder = write_cifar10_fixture(tmp_path)
    (folder / 'data_batch_4').unlink()
    with pytest.raises(DatasetNotFoundError, match='data_batch_4'): load_cifar10(tmp_path)

def test_failed_download_is_explained(tmp_path, monkeypatch):
    import torchvision.datasets
    def offline(*args, **kwargs): raise OSError('network is unreachable')
    monkeypatch.setattr(torchvision.datasets, 'CIFAR10', offline)
    with pytest.raises(DatasetNotFoundError, match='network is unreachable'): load_cifar10(tmp_path, download=True)

def test_stl10_rejects_unknown_split(tmp_path):
    with pytest.raises(ValueError, match="split must be"): load_stl10(tmp_path, split='validation')

@pytest.mark.parametrize('call', [lambda p: write_cifar10_fixture(p, per_batch=0),
                                  lambda p: write_stl10_fixture(p, n=0),
                                  lambda p: write_cifar10_fixture(p, seed=-1)])
def test_fixture_writers_reject_bad_sizes(tmp_path, call):
    with pytest.raises(ValueError): call(tmp_path)

# --- faults found by probing (issue 23) ---------------------------------------------------------------------------

def test_image_dataset_compares_narrow_label_dtypes_in_int64():
    "uint8 labels were refused with 'must lie in [0, 1] ... got [0, 1]' (-1 wrapped to 255); int8 bounds wrapped too."
    images = torch.rand(2, 1, 4, 4)
    ds = ImageDataset(images, torch.tensor([0, 1], dtype=torch.uint8), ['a', 'b'])
    assert ds.labels.tolist() == [0, 1] and ds.labels.dtype == torch.long
    many = [str(i) for i in range(300)]  # a bound of 300 is 44 in int8: label 100 was refused
    assert ImageDataset(images, torch.tensor([0, 100], dtype=torch.int8), many).labels.tolist() == [0, 100]
    with pytest.raises(ValueError, match='labels'):
        ImageDataset(images, torch.tensor([0, 2], dtype=torch.uint8), ['a', 'b'])

def test_loaders_refuse_non_bool_flags_and_non_path_roots(tmp_path):
    "train='no' silently loaded the training batches (a truthy string), download='no' would have downloaded."
    write_cifar10_fixture(tmp_path, per_batch=2)
    write_stl10_fixture(tmp_path, n=2)
    with pytest.raises(TypeError, match='train'): load_cifar10(tmp_path, train='no')
    with pytest.raises(TypeError, match='download'): load_cifar10(tmp_path, download='no')
    with pytest.raises(TypeError, match='download'): load_stl10(tmp_path, download=1)
    with pytest.raises(TypeError, match='root'): load_cifar10(3)
    with pytest.raises(TypeError, match='root'): load_stl10(3)
    assert len(load_cifar10(str(tmp_path), train=np.bool_(False))) == 2

@pytest.fixture(scope='module')
def three_hundred():
    "300 images: more rows than uint8 or int8 can count."
    return ImageDataset(torch.rand(300, 1, 2, 2), torch.arange(300) % 3, list('abc'))

def test_subset_compares_bounds_in_int64_and_refuses_uint8(three_hundred):
    "int16 300 was compared in its own dtype; uint8 250 was refused (300 wraps to 44) or read as numbers, not a mask."
    with pytest.raises(ValueError, match=r'index must lie in \[0, 299\]'):
        three_hundred.subset(torch.tensor([300], dtype=torch.int16))
    with pytest.raises(TypeError, match='index must hold int64.*uint8.*mask'):
        three_hundred.subset(torch.tensor([250], dtype=torch.uint8))
    assert three_hundred.subset(torch.tensor([250], dtype=torch.int16)).labels.tolist() == [250 % 3]
    assert three_hundred.subset(np.array([250], dtype=np.uint8)).labels.tolist() == [250 % 3]  # numpy: no mask reading
    with pytest.raises(ValueError, match='index must lie'):
        three_hundred.subset(np.array([2 ** 64 - 1], dtype=np.uint64))

def test_subset_takes_negative_step_slices(three_hundred):
    "slice(None, None, -1) raised torch's 'step must be greater than zero'."
    rev = three_hundred.subset(slice(None, None, -1))
    assert (torch.equal(rev.images, three_hundred.images.flip(0))
            and rev.labels.tolist() == three_hundred.labels.tolist()[::-1])
    assert three_hundred.subset(slice(-3, None, -100)).labels.tolist() == three_hundred.labels.tolist()[-3::-100]
    assert len(three_hundred.subset(slice(5, 1))) == 0 and len(three_hundred.subset(slice(400, 500))) == 0
    assert torch.equal(three_hundred.subset(slice(10, 20, 3)).images, three_hundred.images[10:20:3])

@pytest.mark.parametrize('index, error', [
    ({1, 2}, TypeError), (None, TypeError), ('1', TypeError), ((i for i in range(2)), TypeError), (3, TypeError),
    (slice(0.5, 2), TypeError), (slice(None, None, 0), ValueError), ([[0], [1, 2]], ValueError),
    (np.array([1 + 2j]), TypeError), (['1'], TypeError)])
def test_subset_names_index_for_what_it_cannot_read(three_hundred, index, error):
    "sets, None, strings and generators raised numpy's 'can't convert np.ndarray of type numpy.object_'."
    with pytest.raises(error, match='index must'): three_hundred.subset(index)

def test_subset_still_reads_series_and_ranges(three_hundred):
    mask = pd.Series(three_hundred.labels.numpy() == 0)
    assert len(three_hundred.subset(mask)) == 100 and three_hundred.subset(range(3)).labels.tolist() == [0, 1, 2]
    assert three_hundred.subset((4, 5)).labels.tolist() == [1, 2] and len(three_hundred.subset(torch.tensor([]))) == 0

@pytest.mark.parametrize('change, message', [
    (lambda f: f.assign(background=5.0), "'background' is a grey level in \\[0, 1\\]"),
    (lambda f: f.assign(background=-1.0), "'background' is a grey level in \\[0, 1\\]"),
    (lambda f: f.assign(rotation=1e300), "'rotation' has values beyond float32's range"),
    (lambda f: f.assign(x=-1e39), "'x' has values beyond float32's range"),
    (lambda f: pd.concat([f, f[['x']]], axis=1), r"duplicate columns \['x'\]")])
def test_render_shapes_refuses_factors_it_would_silently_clamp_or_lose(change, message):
    "background 5.0 was clamped to an all-white image, rotation 1e300 (inf in float32) made every object vanish, and a "
    "duplicated column raised a RuntimeError about tensor sizes."
    with pytest.raises(ValueError, match=message): render_shapes(change(make_shapes(4, seed=0).factors))

def test_render_shapes_keeps_edge_factors_that_are_valid():
    f = make_shapes(4, seed=0, noise=0.0).factors
    white = render_shapes(f.assign(background=1.0))
    assert torch.allclose(white.images[white.masks[:, None].expand(-1, 3, -1, -1) == 0], torch.tensor(1.0))
    assert len(render_shapes(f.assign(rotation=3e38))) == 4 and len(render_shapes(f.iloc[:0])) == 0

def test_render_shapes_needs_a_cpu_generator():
    "A generator on another device raised torch's 'Expected a 'cpu' device type for generator'."
    class OnAnotherDevice(torch.Generator):
        device = torch.device('cuda', 0)  # stands in for torch.Generator('cuda'), which needs a GPU
    with pytest.raises(ValueError, match='seed must be a CPU generator.*cuda:0'):
        render_shapes(make_shapes(2, seed=0).factors, noise=0.1, seed=OnAnotherDevice())
    g = torch.Generator().manual_seed(3)
    assert torch.equal(render_shapes(make_shapes(2, seed=0).factors, noise=0.1, seed=g).images,
                       render_shapes(make_shapes(2, seed=0).factors, noise=0.1, seed=3).images)

@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a GPU for a CUDA generator')
def test_render_shapes_refuses_a_real_cuda_generator():
    with pytest.raises(ValueError, match='seed must be a CPU generator'):
        render_shapes(make_shapes(2, seed=0).factors, seed=torch.Generator('cuda'))

@pytest.mark.parametrize('value', [7.0, -0.5, 255.0, float('nan'), float('inf')])
def test_as_float_images_refuses_floats_outside_the_unit_range(value):
    "A float image of 7.0 came back unchanged, though the function promises [0, 1]."
    for dtype in (torch.float32, torch.float16):
        with pytest.raises(ValueError, match=r'images must lie in \[0, 1\]'):
            as_float_images(torch.full((1, 3, 2, 2), value, dtype=dtype))

def test_as_float_images_allows_a_rounding_hair_outside():
    x = torch.tensor([[[[1.0005, -0.0005]]]])
    assert torch.equal(as_float_images(x), x) and torch.equal(as_float_images(x.bfloat16()), x.bfloat16().float())

@pytest.mark.parametrize('value', [float('nan'), 1.5, -0.2, float('inf')])
def test_image_dataset_refuses_masks_outside_the_unit_range(value):
    "Masks are coverage fractions: NaN, 1.5 or -0.2 were accepted."
    masks = torch.rand(2, 4, 4)
    masks[1, 2, 3] = value
    with pytest.raises(ValueError, match=r'masks must lie in \[0, 1\]'):
        ImageDataset(torch.rand(2, 3, 4, 4), [0, 1], ['a', 'b'], masks=masks)
    assert ImageDataset(torch.rand(2, 3, 4, 4), [0, 1], ['a', 'b'],
                        masks=masks.nan_to_num().clamp(0, 1)).masks.shape == (2, 4, 4)

@pytest.mark.parametrize('content, what', [(b'', 'it is empty'),
                                           (b'ticket_id,text\n1,\xff\xfe\xfa\n', 'not UTF-8 text'),
                                           (pickle.dumps(list(range(100))), 'not UTF-8 text'),
                                           (bytes(range(256)) * 4, 'not a CSV')])
def test_load_tickets_names_an_unreadable_file(tmp_path, content, what):
    "An empty file raised pandas' EmptyDataError and a binary one UnicodeDecodeError, neither naming the path."
    path = tmp_path / 'tickets.csv'
    path.write_bytes(content)
    with pytest.raises(ValueError, match=what) as e: load_tickets(path)
    assert str(path) in str(e.value) and 'ticket_id' in str(e.value)

@pytest.mark.parametrize('writer', [write_cifar10_fixture, write_stl10_fixture])
@pytest.mark.parametrize('root', [3, None, ['a']])
def test_fixture_writers_name_a_bad_folder(writer, root):
    "write_cifar10_fixture(3) raised pathlib's 'argument should be a str or an os.PathLike object', naming nothing."
    with pytest.raises(TypeError, match='root must be a str or a Path'): writer(root)

# --- Fashion-MNIST (issue 27) ---------------------------------------------------------------------------------------

import gzip, struct

from torchvision.datasets.mnist import read_image_file, read_label_file

from contrastive_nb.data import (FASHION_MNIST_CLASSES, FASHION_MNIST_ROOT, DatasetFormatError, load_fashion_mnist,
                                 read_idx, write_fashion_mnist_fixture)

FASHION_FILES = {True: ('train-images-idx3-ubyte', 'train-labels-idx1-ubyte'),
                 False: ('t10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte')}
HAVE_FASHION = all((FASHION_MNIST_ROOT / f'{n}.gz').is_file() for pair in FASHION_FILES.values() for n in pair)

def torchvision_reads(folder, train: bool, out):
    "torchvision's own IDX readers on uncompressed copies of the split's two files: (images, labels)."
    images, labels = FASHION_FILES[train]
    for name in (images, labels):
        (out / name).write_bytes(gzip.decompress((folder / f'{name}.gz').read_bytes()))
    return read_image_file(str(out / images)), read_label_file(str(out / labels))

def idx_file(values: np.ndarray, type_code: int = 0x08) -> bytes:
    "An IDX file written by hand, independently of the course's writer."
    return bytes([0, 0, type_code, values.ndim]) + struct.pack(f'>{values.ndim}I', *values.shape) + values.tobytes()

@pytest.mark.parametrize('train', [True, False])
@pytest.mark.parametrize('n, seed', [(1, 0), (7, 3)])
def test_fashion_mnist_fixture_reads_as_torchvision_reads_it(tmp_path, train, n, seed):
    folder = write_fashion_mnist_fixture(tmp_path / 'fm', n=n, seed=seed)
    ds = load_fashion_mnist(folder, train=train)
    images, labels = torchvision_reads(folder, train, tmp_path)
    assert ds.images.shape == (n, 1, 28, 28) and ds.images.dtype == torch.uint8 and ds.name == 'fashion_mnist'
    assert torch.equal(ds.images[:, 0], images) and torch.equal(ds.labels, labels) and ds.labels.dtype == torch.long
    assert ds.classes == list(FASHION_MNIST_CLASSES) == list(__import__('torchvision').datasets.FashionMNIST.classes)

def test_fashion_mnist_splits_differ_and_seeds_differ(tmp_path):
    a, b = (write_fashion_mnist_fixture(tmp_path / 'a', n=3, seed=0),
            write_fashion_mnist_fixture(tmp_path / 'b', n=3, seed=1))
    assert not torch.equal(load_fashion_mnist(a).images, load_fashion_mnist(a, train=False).images)
    assert not torch.equal(load_fashion_mnist(a).images, load_fashion_mnist(b).images)

@pytest.mark.skipif(not HAVE_FASHION, reason=f'Fashion-MNIST is not installed in {FASHION_MNIST_ROOT} '
                                             '(apt-get install dataset-fashion-mnist)')
def test_real_fashion_mnist_reads_as_torchvision_reads_it(tmp_path):
    for train, n in ((True, 60_000), (False, 10_000)):
        ds = load_fashion_mnist(train=train)
        images, labels = torchvision_reads(FASHION_MNIST_ROOT, train, tmp_path)
        assert ds.images.shape == (n, 1, 28, 28)
        assert torch.equal(ds.images[:, 0], images) and torch.equal(ds.labels, labels)
        assert (torch.bincount(ds.labels, minlength=10) == n // 10).all()  # balanced classes

def test_fashion_mnist_reads_uncompressed_files_too(tmp_path):
    folder = write_fashion_mnist_fixture(tmp_path / 'fm', n=4)
    gzipped = load_fashion_mnist(folder, train=False)
    torchvision_reads(folder, False, tmp_path)  # leaves the uncompressed t10k files in tmp_path
    plain = load_fashion_mnist(tmp_path, train=False)
    assert torch.equal(plain.images, gzipped.images) and torch.equal(plain.labels, gzipped.labels)

def test_missing_fashion_mnist_says_how_to_get_it(tmp_path):
    with pytest.raises(DatasetNotFoundError) as e: load_fashion_mnist(tmp_path)
    message = str(e.value)
    for words in (str(tmp_path), 'train-images-idx3-ubyte.gz', 'train-labels-idx1-ubyte.gz',
                  'apt-get install dataset-fashion-mnist', 'github.com/zalandoresearch/fashion-mnist', 'data_root'):
        assert words in message, words
    (tmp_path / 'train-images-idx3-ubyte.gz').write_bytes(b'')  # one of two: the other is named
    with pytest.raises(DatasetNotFoundError, match='train-labels-idx1-ubyte.gz missing'): load_fashion_mnist(tmp_path)
    with pytest.raises(DatasetNotFoundError, match='t10k-images'): load_fashion_mnist(tmp_path, train=False)

def test_read_idx_reads_a_hand_written_file(tmp_path):
    values = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    (tmp_path / 'x').write_bytes(idx_file(values))
    (tmp_path / 'x.gz').write_bytes(gzip.compress(idx_file(values)))
    for name in ('x', 'x.gz'):
        got = read_idx(tmp_path / name, 3)
        assert got.dtype == np.uint8 and got.shape == (2, 3, 4) and (got == values).all()
    got[0, 0, 0] = 9  # a writable copy
    empty = np.zeros((0, 28, 28), np.uint8)
    (tmp_path / 'e').write_bytes(idx_file(empty))
    assert read_idx(tmp_path / 'e', 3).shape == (0, 28, 28)

def _damaged(values):
    good = idx_file(values)
    return {'a byte short': (good[:-1], 'holds 23 values after its header, which promises 2 × 3 × 4 = 24'),
            'a byte long': (good + b'\0', 'holds 25 values'),
            'cut in the header': (good[:10], 'cut short inside its header'),
            'gzip cut short': (gzip.compress(good)[:-10], 'damaged gzip file'),
            'gzip damaged inside': (gzip.compress(good)[:12] + b'\xff' * 20 + gzip.compress(good)[32:], 'damaged gzip'),
            'int32 type': (idx_file(values, 0x0c),
                           'not an IDX file of unsigned bytes: its magic number is 00000c03, expected 00000803'),
            'empty': (b'', 'magic number is missing'),
            'text': (b'hello world, not an IDX file', 'not an IDX file'),
            'two dimensions': (idx_file(values[0]), 'has 2 dimensions, expected 3')}

@pytest.mark.parametrize('case', list(_damaged(np.zeros((2, 3, 4), np.uint8))))
def test_read_idx_names_a_damaged_file(tmp_path, case):
    data, message = _damaged(np.arange(24, dtype=np.uint8).reshape(2, 3, 4))[case]
    path = tmp_path / 'damaged-file.gz'
    path.write_bytes(data)
    with pytest.raises(DatasetFormatError, match=message) as e: read_idx(path, 3)
    assert str(path) in str(e.value) and isinstance(e.value, ValueError)

@pytest.mark.parametrize('which', ['images', 'labels'])
def test_truncated_fashion_mnist_file_is_named_by_the_loader(tmp_path, which):
    folder = write_fashion_mnist_fixture(tmp_path, n=3)
    path = folder / f"train-{which}-idx{3 if which == 'images' else 1}-ubyte.gz"
    path.write_bytes(path.read_bytes()[:-12])
    with pytest.raises(DatasetFormatError, match=str(path)): load_fashion_mnist(folder)
    assert len(load_fashion_mnist(folder, train=False)) == 3  # the other split is intact

def test_fashion_mnist_files_that_do_not_belong_together(tmp_path):
    folder = write_fashion_mnist_fixture(tmp_path, n=3)
    labels = folder / 'train-labels-idx1-ubyte.gz'
    labels.write_bytes(gzip.compress(idx_file(np.array([0, 1], np.uint8))))
    with pytest.raises(DatasetFormatError, match='3 images but .*2 labels'): load_fashion_mnist(folder)
    labels.write_bytes(gzip.compress(idx_file(np.array([0, 10, 2], np.uint8))))
    with pytest.raises(DatasetFormatError, match='label 10'): load_fashion_mnist(folder)

def test_fashion_mnist_images_of_another_size_are_named(tmp_path):
    folder = write_fashion_mnist_fixture(tmp_path, n=3)
    images = folder / 'train-images-idx3-ubyte.gz'
    images.write_bytes(gzip.compress(idx_file(np.zeros((3, 10, 10), np.uint8))))  # a valid IDX file, 10 × 10
    with pytest.raises(DatasetFormatError, match='images of 10 × 10 pixels; Fashion-MNIST.s are 28 × 28') as e:
        load_fashion_mnist(folder)
    assert str(images) in str(e.value)
    assert len(load_fashion_mnist(folder, train=False)) == 3  # the other split is intact

def test_fashion_mnist_without_images_or_in_a_file_is_named(tmp_path):
    folder = write_fashion_mnist_fixture(tmp_path / 'fm', n=3)
    for name, shape in (('train-images-idx3-ubyte.gz', (0, 28, 28)), ('train-labels-idx1-ubyte.gz', (0,))):
        (folder / name).write_bytes(gzip.compress(idx_file(np.zeros(shape, np.uint8))))
    with pytest.raises(DatasetFormatError, match='train-images-idx3-ubyte.gz holds no images'):
        load_fashion_mnist(folder)
    a_file = tmp_path / 'notes.txt'
    a_file.write_text('not a folder')
    with pytest.raises(DatasetNotFoundError, match='root .*notes.txt is a file: give the folder'):
        load_fashion_mnist(a_file)
    with pytest.raises(DatasetNotFoundError, match='fm is not a file'): read_idx(folder, 1)

def test_load_fashion_mnist_rejects_bad_arguments(tmp_path):
    write_fashion_mnist_fixture(tmp_path, n=2)
    with pytest.raises(TypeError, match='root'): load_fashion_mnist(3)
    with pytest.raises(TypeError, match='train'): load_fashion_mnist(tmp_path, train='no')
    with pytest.raises(TypeError, match='path'): read_idx(3, 1)
    with pytest.raises(ValueError, match='ndim'): read_idx(tmp_path / 'train-labels-idx1-ubyte.gz', 0)
    with pytest.raises(ValueError, match='n must'): write_fashion_mnist_fixture(tmp_path, n=0)
    with pytest.raises(TypeError, match='root must be a str or a Path'): write_fashion_mnist_fixture(None)
    assert len(load_fashion_mnist(str(tmp_path), train=np.bool_(False))) == 2
