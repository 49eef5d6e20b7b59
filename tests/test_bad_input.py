"""Every public function and class of every module on bad input (issue 10).

The contract: a call either raises TypeError or ValueError (or the course's DatasetNotFoundError) with a message that
names the argument, or returns a finite result of the right shape; never a NaN or inf, never a RuntimeError,
IndexError or AttributeError from deep inside torch. A boolean mask or a negative index where indices are expected,
NaN where a number is expected, a bool where a number is expected must be refused.

How: `REGISTRY` maps every public name to a builder of valid calls (`Case`: a function and valid keyword arguments).
Generic mutators corrupt one argument at a time, chosen from its kind (a float tensor, an image batch, indices,
labels, an int, a number, a choice...); hypothesis picks which argument and which corruption. `test_registry_covers`
fails when a module gains a public name without an entry.

To list every failing (name, argument, corruption) at once: `python tests/test_bad_input.py [OUT.md]`.
"""
from __future__ import annotations

import contextlib, dataclasses, importlib, importlib.util, inspect, math, sys, tempfile, warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # the exhaustive runner below needs no hypothesis
    given = None

MODULES = ('data', 'pairs', 'augment', 'similarity', 'infonce', 'temperature', 'memory_bank', 'moco', 'models',
           'evaluate', 'selfcheck', 'hard_negatives', 'debiased', 'training', 'cli', 'distributed', 'text',
           'clip', 'methods', 'launch', 'experiments', 'without_negatives', 'loop', 'runs', 'compat',
           'optim', 'datasets', 'pretrained')

# --- valid calls ------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Case:
    "One valid call `fn(**args)` and what its arguments are."
    fn: Callable
    args: dict[str, Any]
    label: str = ''  # which call of the name this is (a method, a variant)
    fixed: tuple[str, ...] = ()  # arguments not corrupted (callables that must stay callables, ...)
    indices: tuple[str, ...] = ()  # integer tensors that index something: negatives, masks and floats are refused
    choices: tuple[str, ...] = ()  # strings from a fixed set
    nan_ok: tuple[str, ...] = ()  # tensors in which NaN is a legitimate value
    aliases: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)  # other names a message may use
    deterministic: bool = True  # same arguments, same result: layout changes must not change it
    os_errors: bool = False  # file-system arguments: OSError (file not found) is a clear error too

def gen(seed: int = 0) -> torch.Generator: return torch.Generator().manual_seed(seed)

def images(n: int = 4, size: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, 3, size, size, generator=gen(seed))

def feats(n: int = 6, d: int = 4, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, d, generator=gen(seed))

def unit(n: int = 6, d: int = 4, seed: int = 0) -> torch.Tensor:
    x = feats(n, d, seed)
    return x / x.norm(dim=1, keepdim=True)

def _tmp() -> Path: return Path(tempfile.mkdtemp(prefix='bad_input_'))

def _mod(name: str):
    return importlib.import_module(f'contrastive_nb.{name}')

def _small_policy():
    return _mod('augment').AugmentationPolicy(size=8)

def _encoder_head():
    torch.manual_seed(0)
    models = _mod('models')
    encoder = models.SmallCNN(width=4, blocks=2, norm='group')
    return encoder, models.ProjectionHead(encoder.feature_dim, 8, 4)

def _dataset():
    return _mod('data').ImageDataset(images(4), torch.tensor([0, 1, 0, 1]), ('a', 'b'))

def _data():
    d = _mod('data')
    factors = d.make_shapes(3, size=8).factors
    cifar = _tmp()
    d.write_cifar10_fixture(cifar, per_batch=2)
    stl = _tmp()
    d.write_stl10_fixture(stl, n=2)
    fashion = d.write_fashion_mnist_fixture(_tmp(), n=2)
    return {
        'as_float_images': [Case(d.as_float_images, dict(images=images()))],
        'ImageDataset': [Case(d.ImageDataset, dict(images=images(), labels=torch.tensor([0, 1, 0, 1]),
                                                    classes=('a', 'b'))),
                         Case(lambda index: _dataset().subset(index), dict(index=torch.tensor([0, 2])),
                              'subset', indices=('index',), aliases={'index': ('mask',)}),
                         Case(lambda i: _dataset()[i], dict(i=1), '__getitem__')],
        'render_shapes': [Case(d.render_shapes, dict(factors=factors, size=8, noise=0.0, seed=0, supersample=2,
                                                    chunk=2))],
        'make_shapes': [Case(d.make_shapes, dict(n=3, size=8, seed=0, scale_range=(0.2, 0.34), background_max=0.35,
                                                noise=0.03, supersample=2, chunk=2))],
        'show_grid': [Case(_closing(d.show_grid), dict(images=images(3), titles=['a', 'b', 'c'], ncols=2, scale=1.0))],
        'make_moving_shapes': [Case(d.make_moving_shapes, dict(n_sequences=2, n_frames=3, size=8, speed=0.04,
                                                              spin=0.15, seed=0, noise=0.03))],
        'load_digits': [Case(d.load_digits, {})],
        'tickets_path': [Case(d.tickets_path, {})],
        'load_tickets': [Case(d.load_tickets, dict(path=str(d.tickets_path())), os_errors=True)],
        'split_tickets': [Case(d.split_tickets, dict(df=d.load_tickets(), test_frac=0.25, seed=0))],
        'default_data_root': [Case(d.default_data_root, {})],
        'load_cifar10': [Case(d.load_cifar10, dict(root=cifar, train=True, download=False), os_errors=True)],
        'load_stl10': [Case(d.load_stl10, dict(root=stl, split='train', download=False), choices=('split',),
                            os_errors=True)],
        'write_cifar10_fixture': [Case(lambda per_batch, seed: d.write_cifar10_fixture(_tmp(), per_batch, seed),
                                       dict(per_batch=2, seed=0))],
        'write_stl10_fixture': [Case(lambda n, seed: d.write_stl10_fixture(_tmp(), n, seed), dict(n=2, seed=0))],
        'read_idx': [Case(d.read_idx, dict(path=fashion / 'train-labels-idx1-ubyte.gz', ndim=1), os_errors=True)],
        'load_fashion_mnist': [Case(d.load_fashion_mnist, dict(root=fashion, train=True), os_errors=True)],
        'write_fashion_mnist_fixture': [Case(lambda n, seed: d.write_fashion_mnist_fixture(_tmp(), n, seed),
                                             dict(n=2, seed=0))],
    }

def _closing(show):
    "`show_grid` without leaking figures."
    def call(**kwargs):
        import matplotlib.pyplot as plt
        figure = show(**kwargs)
        plt.close('all')
        return figure
    return call

def _pairs():
    p = _mod('pairs')
    text = 'My app crashes when I open a note from my email account.'
    factors = _mod('data').make_shapes(3, size=8).factors
    return {
        'pair_masks': [Case(p.pair_masks, dict(ids=torch.tensor([0, 0, 1, 1, 2])))],
        'instance_ids': [Case(p.instance_ids, dict(n=3, n_views=2))],
        'MultiViewDataset': [Case(p.MultiViewDataset, dict(dataset=_dataset(), transform=lambda x: x.flip(-1),
                                                           n_views=2), fixed=('transform',)),
                             Case(lambda i: p.MultiViewDataset(_dataset(), lambda x: x.flip(-1), 2)[i], dict(i=1),
                                  '__getitem__')],
        # A pure reshape: values (NaN included) pass through untouched.
        'flatten_views': [Case(p.flatten_views, dict(views=torch.rand(3, 2, 3, 4, 4, generator=gen(3))),
                               nan_ok=('views',))],
        'delete_words': [Case(p.delete_words, dict(text=text, p=0.2, rng=0))],
        'check_synonyms': [Case(p.check_synonyms, dict(synonyms={'refund': ('money back',)}))],
        'replace_synonyms': [Case(p.replace_synonyms, dict(text=text, p=0.5, rng=0))],
        'mask_span': [Case(p.mask_span, dict(text=text, fraction=0.15, rng=0, mask='[MASK]'))],
        'ticket_view': [Case(p.ticket_view, dict(text=text, rng=0))],
        'temporal_pair_masks': [Case(p.temporal_pair_masks, dict(times=torch.tensor([0.0, 1.0, 2.0, 0.0, 1.0]),
                                                                 window=1.5,
                                                                 sequence_ids=torch.tensor([0, 0, 0, 1, 1])))],
        'position_phrase': [Case(p.position_phrase, dict(x=0.2, y=0.7))],
        'shape_captions': [Case(p.shape_captions, dict(factors=factors))],
        'expected_false_negatives': [Case(p.expected_false_negatives, dict(batch_size=8, n_classes=4, n_views=2,
                                                                         dataset_size=100))],
    }

def _augment():
    a = _mod('augment')
    boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.1, 0.2, 0.6, 0.9], [0.5, 0.5, 1.0, 1.0], [0.0, 0.3, 0.4, 0.7]])
    masks = torch.zeros(4, 8, 8)
    masks[:, 2:6, 2:6] = 1.0
    return {
        'AugmentationPolicy': [Case(a.AugmentationPolicy, dict(size=8, scale=(0.08, 1.0), ratio=(0.75, 4 / 3),
                                                               flip_p=0.5, jitter_strength=0.5, jitter_p=0.8,
                                                               grayscale_p=0.2, blur_p=0.5, blur_sigma=(0.1, 2.0)))],
        'simclr_transform': [Case(a.simclr_transform, dict(policy=_small_policy()))],
        'sample_crop_boxes': [Case(a.sample_crop_boxes, dict(n=4, scale=(0.08, 1.0), ratio=(0.75, 4 / 3),
                                                             generator=gen(), tries=10), deterministic=False)],
        'resized_crop': [Case(a.resized_crop, dict(images=images(), boxes=boxes, size=6,
                                                   flip=torch.tensor([True, False, True, False])))],
        'grayscale': [Case(a.grayscale, dict(images=images()))],
        'adjust_colour': [Case(a.adjust_colour, dict(images=images(), brightness=torch.full((4,), 1.2),
                                                     contrast=torch.full((4,), 0.8), saturation=torch.full((4,), 1.1),
                                                     hue=torch.full((4,), 0.05)))],
        'gaussian_blur': [Case(a.gaussian_blur, dict(images=images(), sigma=torch.full((4,), 1.0), kernel_size=3))],
        'augment_batch': [Case(a.augment_batch, dict(images=images(), policy=_small_policy(), generator=gen()),
                               deterministic=False),
                          # A loop's fast path: shapes and dtypes checked, values not (NaN in, NaN out).
                          Case(lambda images: a.augment_batch(images, _small_policy(), gen(), check_values=False),
                               dict(images=images()), 'values unchecked', nan_ok=('images',),
                               deterministic=False)],
        'object_kept': [Case(a.object_kept, dict(masks=masks, boxes=boxes))],
    }

def _similarity():
    s = _mod('similarity')
    return {
        'l2_normalize': [Case(s.l2_normalize, dict(x=feats()))],
        'cosine_similarity': [Case(s.cosine_similarity, dict(a=feats(), b=feats(seed=1)))],
        'similarity_matrix': [Case(s.similarity_matrix, dict(a=feats(), b=feats(5, seed=1)))],
        'alignment': [Case(s.alignment, dict(x=unit(), y=unit(seed=1), alpha=2.0))],
        'uniformity': [Case(s.uniformity, dict(x=unit(), t=2.0))],
    }

def _infonce():
    i = _mod('infonce')

    def pair_loss(v1, v2, generator):
        encoder, head = _SHARED['simclr']
        return i.nt_xent(head(encoder(v1)), head(encoder(v2)), 0.5)

    def train_on_pairs(images, epochs, batch_size, lr, weight_decay, seed):
        encoder, head = _SHARED['simclr'] = _encoder_head()
        params = [*encoder.parameters(), *head.parameters()]
        return i.train_on_pairs(pair_loss, params, images, _small_policy(), epochs=epochs, batch_size=batch_size,
                                lr=lr, weight_decay=weight_decay, seed=seed, progress=False)

    def train_simclr(images, epochs, batch_size, temperature, lr, seed):
        encoder, head = _encoder_head()
        return i.train_simclr(encoder, head, images, _small_policy(), epochs=epochs, batch_size=batch_size,
                              temperature=temperature, lr=lr, seed=seed, progress=False)

    training = dict(images=images(8), epochs=1, batch_size=4, lr=1e-3, seed=0)
    return {
        'info_nce': [Case(i.info_nce, dict(query=feats(), positive=feats(seed=1), negatives=feats(5, seed=2),
                                           temperature=0.1, reduction='mean', chunk_size=2), choices=('reduction',)),
                     Case(i.info_nce, dict(query=feats(), positive=feats(seed=1),
                                           negatives=torch.randn(6, 3, 4, generator=gen(2))), 'per-query')],
        'nt_xent': [Case(i.nt_xent, dict(z1=feats(), z2=feats(seed=1), temperature=0.5, reduction='mean',
                                         chunk_size=3), choices=('reduction',))],
        'floor_at_zero': [Case(i.floor_at_zero, dict(loss=feats(6, 1).squeeze(1)), nan_ok=('loss',))],
        'train_on_pairs': [Case(train_on_pairs, {**training, 'weight_decay': 1e-6}, aliases={'images': ('view',)})],
        'train_simclr': [Case(train_simclr, {**training, 'temperature': 0.5})],
        'SimCLROptions': [Case(i.SimCLROptions, dict(temperature=0.5, chunk_size=2))],
        'SimCLR': [Case(lambda encoder, temperature, chunk_size:
                        i.SimCLR(encoder, _encoder_head()[1], i.SimCLROptions(temperature, chunk_size)),
                        dict(encoder=_encoder_head()[0], temperature=0.5, chunk_size=2)),
                   Case(lambda view1, view2: _method_loss(i.SimCLR(*_encoder_head()), [view1, view2]),
                        dict(view1=images(), view2=images(seed=1)), 'loss', aliases=_VIEW_ALIASES)],
        'train_method': [Case(lambda images, epochs, batch_size, lr, seed:
                              i.train_method(i.SimCLR(*_encoder_head()), images, _small_policy(), epochs, batch_size,
                                             lr, seed=seed, progress=False),
                              dict(images=images(8), epochs=1, batch_size=4, lr=1e-3, seed=0),
                              aliases={'images': ('view',)})],
        'PairLoss': [Case(lambda view1, view2: _method_loss(i.PairLoss(pair_loss, _pair_parameters()), [view1, view2]),
                          dict(view1=images(), view2=images(seed=1)), 'loss', aliases=_VIEW_ALIASES)],
    }

_VIEW_ALIASES = {'view1': ('views', 'view', 'x', 'z1', 'z2', 'h'), 'view2': ('views', 'view', 'x', 'z1', 'z2', 'h')}

def _method_loss(method, views: list, indices=None):
    "A method's loss on one batch of 4 sources, through the `methods` protocol."
    batch = _mod('methods').Batch(views, torch.arange(4) if indices is None else indices,
                                  torch.tensor([0, 1, 0, 1]), gen())
    return method.loss(batch)

# a method's step checks nothing itself (the trainer checked the batch): its building blocks name what they got
_BANK_ALIASES = {'view': ('x', 'h', 'query'), 'indices': ('positive', 'query')}

def _pair_parameters():
    encoder, head = _SHARED['simclr'] = _encoder_head()
    return [*encoder.parameters(), *head.parameters()]

_SHARED: dict[str, Any] = {}

def _temperature():
    t = _mod('temperature')
    sims = torch.tensor([[0.9, 0.5, 0.1, -0.2], [0.3, 0.2, 0.8, 0.0]])
    return {
        'negative_gradient_shares': [Case(t.negative_gradient_shares, dict(similarities=sims, temperature=0.1))],
        'simclr_states': [Case(lambda images, epochs, batch_size, temperature, lr, seed:
                               t.simclr_states(*_encoder_head(), images, _small_policy(), epochs, batch_size,
                                               temperature, lr, seed),
                               dict(images=images(8), epochs=2, batch_size=4, temperature=0.5, lr=1e-3, seed=0),
                               aliases={'images': ('view',)}, deterministic=False)],
        'LearnableTemperature': [Case(t.LearnableTemperature, dict(init=0.07, max_scale=100.0, min_scale=1.0)),
                                 Case(lambda similarities: t.LearnableTemperature()(similarities),
                                      dict(similarities=sims), 'forward')],
    }

def _memory_bank():
    m = _mod('memory_bank')

    def bank():
        return m.MemoryBank(8, 4, momentum=0.5, seed=0)

    def train(images, k, epochs, batch_size, temperature, lr):
        encoder, head = _encoder_head()
        return m.train_memory_bank(encoder, head, images, m.MemoryBank(8, 4), k=k, policy=_small_policy(),
                                   epochs=epochs, batch_size=batch_size, temperature=temperature, lr=lr,
                                   progress=False)

    def setup(n_train, batch_size, embed_dim):
        return _mod('methods').MethodSetup(n_train=n_train, batch_size=batch_size, embed_dim=embed_dim)

    def method(negatives='shared'):
        return m.MemoryBankMethod(*_encoder_head(), m.MemoryBankOptions(k=3, negatives=negatives), setup(8, 4, 4))

    def after_step(method, view):
        _method_loss(method, [view]).backward()
        method.after_step()
        return method.bank.memory

    return {
        'momentum_blend': [Case(m.momentum_blend, dict(rows=unit(), new=unit(seed=1), momentum=0.5))],
        'merge_duplicates': [Case(m.merge_duplicates, dict(indices=torch.tensor([0, 3, 0, 5, 1, 3]), embeddings=unit()),
                                  indices=('indices',))],
        'negative_indices': [Case(m.negative_indices, dict(indices=torch.tensor([0, 3, 5]), size=8, k=3,
                                                          generator=gen(), replacement=False),
                                  indices=('indices',), deterministic=False)],
        'shared_negative_indices': [Case(m.shared_negative_indices, dict(indices=torch.tensor([0, 3, 5]), size=8,
                                                                        k=3, generator=gen()),
                                         indices=('indices',), deterministic=False)],
        'MemoryBank': [Case(m.MemoryBank, dict(size=8, dim=4, momentum=0.5, seed=0)),
                       Case(lambda indices: bank()(indices), dict(indices=torch.tensor([0, 7, 2])), 'forward',
                            indices=('indices',)),
                       Case(lambda indices, embeddings: bank().update(indices, embeddings),
                            dict(indices=torch.tensor([0, 7, 2]), embeddings=unit(3)), 'update', indices=('indices',)),
                       Case(lambda indices, k: bank().sample_negatives(indices, k, gen()),
                            dict(indices=torch.tensor([0, 7, 2]), k=3), 'sample_negatives', indices=('indices',),
                            deterministic=False),
                       Case(lambda indices, k: bank().sample_shared_negatives(indices, k, gen()),
                            dict(indices=torch.tensor([0, 7, 2]), k=3), 'sample_shared_negatives',
                            indices=('indices',), deterministic=False)],
        'train_memory_bank': [Case(train, dict(images=images(8), k=3, epochs=1, batch_size=4, temperature=0.1,
                                               lr=1e-3))],
        'MemoryBankOptions': [Case(m.MemoryBankOptions, dict(temperature=0.1, k=3, momentum=0.5, negatives='shared'),
                                   choices=('negatives',))],
        'MemoryBankMethod': [Case(lambda view, indices, negatives: _method_loss(method(negatives), [view], indices),
                                  dict(view=images(), indices=torch.tensor([0, 7, 2, 5]), negatives='per-query'),
                                  'loss', indices=('indices',), choices=('negatives',), aliases=_BANK_ALIASES),
                             Case(lambda view: after_step(method(), view), dict(view=images()), 'after_step',
                                  aliases=_BANK_ALIASES),
                             Case(lambda n_train, batch_size, embed_dim, k:
                                  m.MemoryBankMethod(*_encoder_head(), m.MemoryBankOptions(k=k),
                                                     setup(n_train, batch_size, embed_dim)).bank.memory,
                                  dict(n_train=8, batch_size=4, embed_dim=4, k=3), 'a bank from setup')],
    }

def _moco():
    mo = _mod('moco')

    def model(**options):
        encoder, head = _encoder_head()
        return mo.MoCo(encoder, head, mo.MoCoOptions(**{'queue_size': 8, 'temperature': 0.1, **options}))

    def momentum_update(m):
        online, target = _encoder_head()[1], _encoder_head()[1]
        return mo.momentum_update(online, target, m, buffers='ema')

    def statistics_only(module):
        with mo.batch_statistics_only(module): return module(torch.randn(4, 3))

    return {
        'MoCoQueue': [Case(mo.MoCoQueue, dict(size=8, dim=4, seed=0)),
                      Case(lambda keys: mo.MoCoQueue(8, 4).enqueue(keys), dict(keys=unit(3)), 'enqueue')],
        'momentum_update': [Case(momentum_update, dict(m=0.9))],
        'batch_statistics_only': [Case(statistics_only, dict(module=nn.BatchNorm1d(3)))],
        'MoCo': [Case(lambda batch_size, seed, queue_size, bn_splits:
                      mo.MoCo(*_encoder_head(), mo.MoCoOptions(queue_size=queue_size, bn_splits=bn_splits),
                              _mod('methods').MethodSetup(n_train=8, batch_size=batch_size, embed_dim=4,
                                                          seed=seed)).queue.negatives(),
                      dict(batch_size=4, seed=0, queue_size=8, bn_splits=2)),
                 Case(lambda view1, view2: model()(view1, view2, gen()), dict(view1=images(4), view2=images(4, seed=1)),
                      'forward', aliases={'view1': ('views',), 'view2': ('views',)}),
                 Case(lambda view1, view2: _method_loss(model(), [view1, view2]),
                      dict(view1=images(4), view2=images(4, seed=1)), 'loss',
                      aliases={'view1': ('views',), 'view2': ('views',)})],
        'MoCoOptions': [Case(mo.MoCoOptions, dict(temperature=0.1, queue_size=8, momentum=0.99, symmetric=False,
                                                  bn_splits=2))],
        'train_moco': [Case(lambda images, epochs, batch_size: mo.train_moco(model(), images, _small_policy(),
                                                                           epochs=epochs, batch_size=batch_size,
                                                                           progress=False),
                            dict(images=images(8), epochs=1, batch_size=4))],
    }

def _models():
    m = _mod('models')
    return {
        'conv_stage': [Case(m.conv_stage, dict(c_in=3, c_out=4, norm='batch'), choices=('norm',))],
        'SmallCNN': [Case(m.SmallCNN, dict(in_channels=3, width=4, blocks=2, norm='batch', max_width=8),
                          choices=('norm',)),
                     Case(lambda x: _seeded(m.SmallCNN, width=4, blocks=2).eval()(x), dict(x=images()),
                          'forward (eval)'),
                     Case(lambda x: _seeded(m.SmallCNN, width=4, blocks=2).train()(x), dict(x=images()),
                          'forward (train)')],
        'ProjectionHead': [Case(m.ProjectionHead, dict(in_dim=4, hidden_dim=8, out_dim=2)),
                           Case(lambda h: _seeded(m.ProjectionHead, 4, 8, 2).train()(h), dict(h=feats()), 'forward')],
        'resnet18_small': [Case(m.resnet18_small, dict(in_channels=3, norm='group'), choices=('norm',)),
                           Case(lambda x: _RESNET.eval()(x), dict(x=images(2)), 'forward')],
        # Inside `values_unchecked` a network checks shapes and dtypes, not values: NaN in, NaN out, by design
        # (a loop's loss check catches it).
        'values_unchecked': [Case(lambda module: _unchecked(module, images()),
                                  dict(module=_seeded(m.SmallCNN, width=4, blocks=2))),
                             Case(lambda x: _unchecked(_seeded(m.SmallCNN, width=4, blocks=2).train(), x),
                                  dict(x=images()), 'SmallCNN forward', nan_ok=('x',)),
                             Case(lambda h: _unchecked(_seeded(m.ProjectionHead, 4, 8, 2).train(), h),
                                  dict(h=feats()), 'ProjectionHead forward', nan_ok=('h',)),
                             Case(lambda x: _unchecked(_RESNET.eval(), x), dict(x=images(2)), 'resnet forward',
                                  nan_ok=('x',))],
    }

def _unchecked(module, x):
    "`module(x)` inside `values_unchecked(module)`."
    with _mod('models').values_unchecked(module) as net: return net(x)

def _seeded(cls, *args, **kwargs):
    "A module built from a fixed seed, so two calls give the same weights."
    torch.manual_seed(0)
    return cls(*args, **kwargs)

_RESNET_CACHE: list = []
class _LazyResnet:
    def __getattr__(self, name):
        if not _RESNET_CACHE: _RESNET_CACHE.append(_mod('models').resnet18_small())
        return getattr(_RESNET_CACHE[0], name)
_RESNET = _LazyResnet()

def _evaluate():
    e = _mod('evaluate')
    net = _seeded(_mod('models').SmallCNN, width=2, blocks=2)
    labels = torch.tensor([0, 1, 2, 0, 1, 2])
    return {
        'embed': [Case(e.embed, dict(model=net, images=images(), batch_size=3, device='cpu'),
                       aliases={'images': ('x',)})],  # the model's own error names its input
        'knn_predict': [Case(e.knn_predict, dict(train_features=feats(), train_labels=labels,
                                                 query_features=feats(3, seed=1), k=3, temperature=0.07,
                                                 num_classes=4, exclude_self=False, chunk_size=2))],
        'knn_accuracy': [Case(e.knn_accuracy, dict(train_features=feats(), train_labels=labels,
                                                   query_features=feats(3, seed=1), query_labels=labels[:3], k=3,
                                                   temperature=0.07, chunk_size=2))],
        'linear_probe': [Case(e.linear_probe, dict(train_features=feats(), train_labels=labels,
                                                   test_features=feats(3, seed=1), test_labels=labels[:3], epochs=3,
                                                   lr=0.01, weight_decay=1e-4, batch_size=4, seed=0))],
        'first_relevant_rank': [Case(e.first_relevant_rank,
                                     dict(scores=feats(3, 5), relevant=torch.tensor([0, 1, 2])[:, None]
                                          == torch.tensor([0, 1, 2, 0, 1])[None, :]))],
        'rank_of_positive': [Case(e.rank_of_positive, dict(scores=feats(3, 5), positive=torch.tensor([0, 4, 2])),
                                  indices=('positive',))],
        'ranking_metrics': [Case(e.ranking_metrics, dict(ranks=torch.tensor([1, 3, 12]), ks=(1, 5)))],
        'ndcg_at_k': [Case(e.ndcg_at_k, dict(scores=feats(3, 5), gains=torch.eye(3, 5) * 2, k=3))],
        'average_precision': [Case(e.average_precision, dict(scores=feats(3, 5),
                                                             relevant=torch.eye(3, 5) > 0))],
        'retrieval_metrics': [Case(e.retrieval_metrics, dict(queries=feats(3), keys=feats(5, seed=1),
                                                             positive=torch.tensor([0, 4, 2]), chunk_size=2,
                                                             ks=(1, 3)),
                                   indices=('positive',))],
        'normalized_std': [Case(e.normalized_std, dict(z=feats()))],
        'effective_rank': [Case(e.effective_rank, dict(z=feats(), eps=1e-7))],
        'covariance_spectrum': [Case(e.covariance_spectrum, dict(z=feats()))],
    }

def _selfcheck():
    s = _mod('selfcheck')
    make = lambda seed: (torch.randn(3 + seed, 4, generator=gen(seed)),)
    mean = lambda x: x.mean(1)
    return {
        'describe': [Case(s.describe, dict(args=(torch.ones(2, 3), 0.5, 'text')))],
        'compare': [Case(s.compare, dict(got=torch.ones(3), want=torch.ones(3) + 1e-3, atol=1e-5, rtol=1e-4),
                         nan_ok=('got', 'want'))],
        'check': [Case(s.check, dict(yours=mean, reference=mean, make_inputs=make, trials=2, atol=1e-5, rtol=1e-4,
                                     hint='average'))],
    }

BUILDERS = {'data': _data, 'pairs': _pairs, 'augment': _augment, 'similarity': _similarity, 'infonce': _infonce,
            'temperature': _temperature, 'memory_bank': _memory_bank, 'moco': _moco, 'models': _models,
            'evaluate': _evaluate, 'selfcheck': _selfcheck}

# Public names that are constants, type aliases or exception types: nothing to call.
CONSTANTS = {'data': {'SHAPE_NAMES', 'COLOURS', 'TICKET_COLUMNS', 'CIFAR10_CLASSES', 'STL10_CLASSES',
                      'DatasetNotFoundError', 'DatasetFormatError', 'FASHION_MNIST_CLASSES', 'FASHION_MNIST_ROOT'},
             'pairs': {'TICKET_SYNONYMS'}, 'infonce': {'REDUCTIONS'}, 'moco': {'BUFFER_POLICIES'},
             'models': {'NORMS'}, 'augment': {'Interval'}}

def _parts(module: str) -> list[Callable[[], dict[str, list[Case]]]]:
    "Lessons 00-06: the entries above, and their building blocks' in tests/bad_input_building_blocks.py."
    import bad_input_building_blocks as blocks  # it imports this file: imported when first needed
    return [BUILDERS[module]] + ([blocks.BLOCKS[module]] if module in blocks.BLOCKS else [])

def builder(module: str) -> Callable[[], dict[str, list[Case]]]:
    "The registry of one module: above for lessons 00-06, `tests/bad_input_<module>.py` (its `cases`) for later ones."
    if module in BUILDERS:
        parts = _parts(module)
        return lambda: {name: found for part in parts for name, found in part().items()}
    try: return importlib.import_module(f'bad_input_{module}').cases
    except ModuleNotFoundError as e:
        raise AssertionError(f"contrastive_nb.{module} has no bad-input registry: write "
                             f"tests/bad_input_{module}.py with a function cases()") from e

def constants(module: str) -> set[str]:
    "Public names of the module with nothing to call; a later lesson's file lists them as `CONSTANTS`."
    if module in BUILDERS: return CONSTANTS.get(module, set())
    try: plugin = importlib.import_module(f'bad_input_{module}')
    except ImportError: return set()  # the registry test then names the missing file
    return set(getattr(plugin, 'CONSTANTS', set()))

def module_exists(name: str) -> bool: return importlib.util.find_spec(f'contrastive_nb.{name}') is not None

_CASES: dict[str, dict[str, list[Case]]] = {}
def cases(module: str) -> dict[str, list[Case]]:
    if module not in _CASES:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            _CASES[module] = builder(module)()
    return _CASES[module]

# --- corruptions -------------------------------------------------------------------------------------------------

ERROR, EITHER, SAME = 'must raise', 'error or a finite result', 'error or the same result'
MISMATCHES = {'empty', 'one row', 'one row fewer', 'one entry', 'one entry fewer', 'one fewer'}

def _set_first(x: torch.Tensor, value) -> torch.Tensor:
    x = x.clone()
    x.view(-1)[0] = value
    return x

def _noncontiguous(x: torch.Tensor) -> torch.Tensor:
    "The same values in a non-contiguous layout (every other element of a wider tensor)."
    wide = torch.zeros(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype)
    wide[..., ::2] = x
    return wide[..., ::2]

def float_mutations(x: torch.Tensor, nan_ok: bool) -> dict[str, tuple[Any, str]]:
    out = {'NaN': (_set_first(x, math.nan), EITHER if nan_ok else ERROR), 'inf': (_set_first(x, math.inf), EITHER),
           'empty': (x[:0], EITHER), 'one row': (x[:1], EITHER), 'one row fewer': (x[:-1], EITHER),
           'extra leading dimension': (x[None], EITHER), 'integer dtype': ((x * 4).round().long(), EITHER),
           'float16': (x.half(), EITHER), 'bool': (x > 0, EITHER), 'list': (x.tolist(), EITHER),
           'zero row': (_set_first(x[None], 0).squeeze(0) if x.ndim == 1 else torch.cat([0 * x[:1], x[1:]]), EITHER)}
    if x.ndim >= 2: out['first row only (one dimension fewer)'] = (x[0], EITHER)
    if x.ndim >= 1 and x.shape[-1] > 0: out['non-contiguous'] = (_noncontiguous(x), SAME)
    if x.ndim == 4:
        out['channels_last'] = (x.to(memory_format=torch.channels_last), SAME)
        if x.shape[1] == 3:
            out['uint8 pixels'] = ((x.clamp(0, 1) * 255).to(torch.uint8), EITHER)
            out['1 channel'] = (x[:, :1], EITHER)
            out['4 channels'] = (torch.cat([x, x[:, :1]], 1), EITHER)
    return out

def int_tensor_mutations(x: torch.Tensor, is_index: bool) -> dict[str, tuple[Any, str]]:
    index_rule = ERROR if is_index else EITHER
    out = {'negative entry': (_set_first(x, -1), index_rule), 'entry far out of range': (_set_first(x, 10_000), EITHER),
           'boolean mask': (x > x.min(), ERROR), 'float dtype': (x.double(), index_rule), 'empty': (x[:0], EITHER),
           'one entry': (x[:1], EITHER), 'one entry fewer': (x[:-1], EITHER), 'extra dimension': (x[None], EITHER),
           'non-contiguous': (_noncontiguous(x), SAME), 'list': (x.tolist(), EITHER)}
    return out

def bool_tensor_mutations(x: torch.Tensor) -> dict[str, tuple[Any, str]]:
    return {'int 0/1': (x.long(), EITHER), 'float 0/1': (x.float(), EITHER), 'one fewer': (x[:-1], EITHER),
            'empty': (x[:0], EITHER)}

def int_mutations(v: int) -> dict[str, tuple[Any, str]]:
    return {'0': (0, EITHER), '-1': (-1, EITHER), 'True (a bool)': (True, ERROR), '2.5 (a float)': (2.5, ERROR),
            'NaN': (math.nan, ERROR), 'a string': (str(v), ERROR)}

def number_mutations(v: float) -> dict[str, tuple[Any, str]]:
    return {'0': (0.0, EITHER), '-1': (-1.0, EITHER), 'NaN': (math.nan, ERROR), 'inf': (math.inf, EITHER),
            '-inf': (-math.inf, EITHER), 'True (a bool)': (True, ERROR), 'a string': (str(v), ERROR)}

def tuple_mutations(v: tuple) -> dict[str, tuple[Any, str]]:
    return {'NaN inside': ((math.nan, *v[1:]), ERROR), 'reversed': (tuple(reversed(v)), EITHER),
            'one element': (v[:1], EITHER), 'negative inside': ((-1.0, *v[1:]), EITHER),
            'bool inside': ((True, *v[1:]), ERROR), 'a string': ('0.1, 1.0', ERROR)}

def mutations(case: Case, name: str) -> dict[str, tuple[Any, str]]:
    "The corruptions of argument `name` of `case`, each with what the call must then do."
    v = case.args[name]
    if name in case.fixed: return {}
    if isinstance(v, torch.Tensor):
        if v.is_floating_point(): return float_mutations(v, name in case.nan_ok)
        if v.dtype == torch.bool: return bool_tensor_mutations(v)
        return int_tensor_mutations(v, name in case.indices)
    if isinstance(v, bool): return {}
    if isinstance(v, int): return int_mutations(v)
    if isinstance(v, float): return number_mutations(v)
    if isinstance(v, tuple) and v and all(isinstance(e, (int, float)) and not isinstance(e, bool) for e in v):
        return tuple_mutations(v)
    if isinstance(v, str):
        if name in case.choices: return {'unknown choice': ('bogus', ERROR), 'None': (None, ERROR), '1': (1, ERROR)}
        return {'empty string': ('', EITHER), 'an int': (1, ERROR)}
    return {'None': (None, EITHER), 'a string': ('bogus', ERROR)}

# --- the contract ------------------------------------------------------------------------------------------------

def _course_errors() -> tuple[type, ...]:
    errors: tuple[type, ...] = (TypeError, ValueError)
    with contextlib.suppress(Exception): errors += (_mod('data').DatasetNotFoundError,)
    return errors

def non_finite(result, where: str = 'result') -> str | None:
    "Where `result` holds NaN or inf (tensors, numbers, containers, tables, a module's parameters), else None."
    if isinstance(result, torch.Tensor):
        if (result.is_floating_point() or result.is_complex()) and not torch.isfinite(result).all():
            return f"{where} holds NaN or inf"
        return None
    if isinstance(result, float): return None if math.isfinite(result) else f"{where} = {result}"
    if isinstance(result, dict): items = result.items()
    elif isinstance(result, (list, tuple)): items = enumerate(result)
    elif isinstance(result, pd.DataFrame):
        numbers = result.select_dtypes('number')
        return None if np.isfinite(numbers.to_numpy(dtype=float)).all() else f"{where} has NaN or inf in a column"
    elif isinstance(result, nn.Module):
        items = ((k, v) for k, v in result.state_dict().items())
    else: return None
    for key, value in items:
        why = non_finite(value, f"{where}[{key!r}]")
        if why: return why
    return None

def _same(a, b) -> str | None:
    "Why two results differ (tensors, numbers, containers), or None."
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape: return f"shape {tuple(a.shape)} instead of {tuple(b.shape)}"
        try: torch.testing.assert_close(a.float(), b.float(), atol=1e-4, rtol=1e-4)
        except AssertionError as e: return str(e).splitlines()[0]
        return None
    if isinstance(a, float) and isinstance(b, float): return None if math.isclose(a, b, abs_tol=1e-6) else f"{a} != {b}"
    if isinstance(a, dict) and isinstance(b, dict):
        return next((why for k in b if (why := _same(a.get(k), b[k]))), None)
    return None

def run(case: Case, name: str | None = None, corruption: str | None = None) -> str | None:
    "Call the case, with argument `name` corrupted as `corruption`; why the contract is broken, or None."
    args = dict(case.args)
    rule = EITHER
    if name is not None:
        args[name], rule = mutations(case, name)[corruption]
    errors = _course_errors() + ((OSError,) if case.os_errors else ())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            result = case.fn(**args)
    except errors as e:
        if name is None: return f"the valid call raised {type(e).__name__}: {e}"
        if isinstance(e, OSError) or type(e).__name__ == 'DatasetNotFoundError':
            return None  # their messages name the missing path
        allowed = {name, *case.aliases.get(name, ())}
        if corruption in MISMATCHES:  # a batch of another length than its partners: the message may name either
            allowed |= {k for k, v in case.args.items() if isinstance(v, torch.Tensor)}
        if not any(a in str(e) for a in allowed):
            return f"{type(e).__name__} does not name {name!r}: {str(e)[:200]}"
        return None
    except Exception as e:
        return f"raised {type(e).__name__} (not TypeError/ValueError): {str(e)[:200]}"
    if rule == ERROR: return f"returned {_short(result)} instead of raising"
    if name in case.nan_ok and corruption in ('NaN', 'inf'): return None  # values pass through by design
    why = non_finite(result)
    if why: return why
    if rule == SAME and case.deterministic:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            why = _same(result, case.fn(**case.args))
        if why: return f"a different result than the same values in the usual layout: {why}"
    return None

def _short(result) -> str:
    if isinstance(result, torch.Tensor): return f"a tensor of shape {tuple(result.shape)}, {result.dtype}"
    text = repr(result)
    return text if len(text) < 80 else text[:77] + '...'

# --- the tests ---------------------------------------------------------------------------------------------------

PRESENT = [m for m in MODULES if module_exists(m)]

def _registered(module: str) -> set[str]:
    "Names with an entry, without building the cases (for the coverage test)."
    parts = _parts(module) if module in BUILDERS else [builder(module)]
    source = ''.join(inspect.getsource(part) for part in parts)
    return {n for n in _mod(module).__all__ if f"'{n}'" in source} | constants(module)

@pytest.mark.parametrize('module', PRESENT)
def test_registry_covers_every_public_name(module):
    mod = _mod(module)  # a module that fails to import fails here
    missing = set(mod.__all__) - _registered(module)
    assert not missing, f"contrastive_nb.{module} has public names without a bad-input entry: {sorted(missing)}"

def _public(module: str) -> list[str]:
    "The module's public names; a module that fails to import gives one entry that fails in every test."
    try: return list(_mod(module).__all__)
    except Exception: return ['<import>']

def _all_cases():
    out = []
    for module in PRESENT:
        for name in _public(module):
            if name in constants(module): continue
            out.append(pytest.param(module, name, id=f'{module}.{name}'))
    return out

SLOW = {'Trainer', 'train', 'resume', 'main', 'train_on_pairs', 'train_simclr', 'simclr_states', 'train_memory_bank',
        'train_moco', 'load_digits', 'make_moving_shapes',
        'load_cifar10', 'load_stl10', 'write_cifar10_fixture', 'write_stl10_fixture', 'resnet18_small',
        'load_fashion_mnist', 'write_fashion_mnist_fixture',
        'linear_probe', 'show_grid', 'split_tickets', 'load_tickets', 'make_shapes', 'render_shapes'}

@pytest.mark.parametrize('module,name', _all_cases())
def test_valid_calls_work(module, name):
    "Every registered call works on valid input (so a corruption's failure is the corruption's)."
    if name == '<import>': _mod(module)
    for case in cases(module)[name]:
        why = run(case)
        assert why is None, f"{module}.{name} {case.label}: {why}"

if given is not None:
    @pytest.mark.parametrize('module,name', _all_cases())
    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(data=st.data())
    def test_bad_input(module, name, data):
        if name == '<import>': _mod(module)
        builds = cases(module)[name]
        case = data.draw(st.sampled_from(builds), label='call')
        corruptible = [a for a in case.args if mutations(case, a)]
        if not corruptible: return
        if name in SLOW and data.draw(st.integers(0, 3), label='skip some slow examples'): return
        arg = data.draw(st.sampled_from(corruptible), label='argument')
        corruption = data.draw(st.sampled_from(sorted(mutations(case, arg))), label='corruption')
        why = run(case, arg, corruption)
        assert why is None, f"{module}.{name}{' ' + case.label if case.label else ''}({arg}: {corruption}): {why}"

# --- every corruption at once, for the findings file ----------------------------------------------------------------

def findings() -> list[tuple[str, str, str, str]]:
    "(call, argument, corruption, what happened) for every broken case."
    out = []
    for module in MODULES:
        if not module_exists(module):
            continue
        try: names = _mod(module).__all__
        except Exception as e:
            out.append((f'{module} (import)', '', '', f"{type(e).__name__}: {e}"))
            continue
        missing = set(names) - _registered(module)
        if missing: out.append((module, '', '', f"no registry entry for {sorted(missing)}"))
        try: built = cases(module)
        except Exception as e:
            out.append((f'{module} (registry)', '', '', f"building the valid calls raised {type(e).__name__}: {e}"))
            continue
        for name in names:
            for case in built.get(name, []):
                call = f"{module}.{name}{' ' + case.label if case.label else ''}"
                why = run(case)
                if why:
                    out.append((call, '(valid call)', '', why))
                    continue
                for arg in case.args:
                    for corruption in mutations(case, arg):
                        why = run(case, arg, corruption)
                        if why: out.append((call, arg, corruption, why))
    return out

if __name__ == '__main__':
    rows = findings()
    lines = ['| call | argument | corruption | what happened |', '|---|---|---|---|']
    lines += [f"| `{c}` | {a} | {k} | {w.replace('|', '/').replace(chr(10), ' ')} |" for c, a, k, w in rows]
    text = '\n'.join(lines) + '\n'
    if len(sys.argv) > 1: Path(sys.argv[1]).write_text(text)
    print(text)
    print(f"{len(rows)} broken cases")
