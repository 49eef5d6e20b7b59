"""Package tests for contrastive_nb.training: the config's checks, equality with the lessons' loops, every method,
checkpoints (atomic, complete, readable with weights_only) and exact in-process resume."""
import copy
import dataclasses
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import ROOT
from contrastive_nb import training
from contrastive_nb.augment import AugmentationPolicy
from contrastive_nb.data import DatasetNotFoundError, write_cifar10_fixture, write_stl10_fixture
from contrastive_nb.infonce import SimCLROptions, train_simclr
from contrastive_nb.memory_bank import train_memory_bank
from contrastive_nb.moco import MoCo, MoCoOptions, train_moco
from contrastive_nb.loop import Callback, Loop
from contrastive_nb.methods import (
    BUILTIN_METHODS, METHODS, Batch, ContrastiveMethod, MethodOptions, TwoViewMethod, method_names, method_spec,
    register_method)
from contrastive_nb.launch import cpu_threads, select_device
from contrastive_nb.runs import (CHECKPOINT_FORMAT, CheckpointError, latest_checkpoint, load_checkpoint,
                                 load_latest_checkpoint, save_checkpoint, write_text)
from contrastive_nb.datasets import DATASETS
from contrastive_nb.optim import LARS, lr_factor
from contrastive_nb.training import TrainConfig, Trainer, load_datasets, resume, train

@pytest.fixture(autouse=True)
def one_thread():
    with cpu_threads(1): yield

def tiny(**changes) -> TrainConfig:
    "A run of a few steps on 16 px Shapes with a 4-channel CNN (the supervised head: a score per class)."
    embed_dim = 10 if changes.get('method') == 'supervised' else 8
    base = dict(n_train=40, n_test=16, augment={'size': 16}, width=4, blocks=2, head_hidden=16, embed_dim=embed_dim,
                batch_size=8, epochs=2, knn_every=0, val_fraction=0.2, progress=False)
    return TrainConfig(**{**base, **changes})

# options that fit a run of 40 images, 8 per batch (the defaults' queue and bank are larger than the data)
SMALL = {'memory_bank': {'k': 16}, 'moco': {'queue_size': 16}, 'xbm': {'memory_size': 16}}

def small(method: str, **options) -> dict:
    "The method's options for a tiny run, with `options` changed."
    return {**SMALL.get(method, {}), **options}

def losses(trainer: Trainer) -> list[float]: return [row[2] for row in trainer.history]

def weights(module) -> dict: return {k: v.clone() for k, v in module.state_dict().items()}

def same_weights(a: dict, b: dict) -> bool: return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

# --- the lessons' loops, step for step ------------------------------------------------------------------------------

def test_simclr_equals_train_simclr():
    trainer = Trainer(tiny(method='simclr', options={'temperature': 0.3}))
    encoder, head = copy.deepcopy(trainer.method.encoder), copy.deepcopy(trainer.method.head)
    trainer.fit()
    ref = train_simclr(encoder, head, trainer.images, trainer.policy, epochs=2, batch_size=8, temperature=0.3,
                       lr=1e-3, weight_decay=1e-6, seed=0, progress=False)
    assert losses(trainer) == ref.loss.tolist() and len(ref) == 8
    assert same_weights(weights(trainer.method.encoder), weights(encoder))

def test_moco_equals_train_moco_with_shuffle_bn():
    trainer = Trainer(tiny(method='moco', options=dict(queue_size=24, bn_splits=2, momentum=0.9, temperature=0.3)))
    assert isinstance(trainer.method, MoCo)  # the method is the lesson's model itself
    assert (trainer.method.momentum, trainer.method.temperature, trainer.method.bn_splits) == (0.9, 0.3, 2)
    assert len(trainer.method.queue.keys) == 24
    model = copy.deepcopy(trainer.method)
    trainer.fit()
    ref = train_moco(model, trainer.images, trainer.policy, epochs=2, batch_size=8, seed=0, progress=False)
    assert losses(trainer) == ref.loss.tolist()
    assert same_weights(weights(trainer.method), weights(model))  # key side and queue too

def test_memory_bank_equals_train_memory_bank():
    trainer = Trainer(tiny(method='memory_bank', options=dict(k=16, temperature=0.1, momentum=0.3)))
    assert trainer.method.bank.momentum == pytest.approx(0.3)
    encoder, head, bank = (copy.deepcopy(m) for m in (trainer.method.encoder, trainer.method.head,
                                                      trainer.method.bank))
    trainer.fit()
    ref = train_memory_bank(encoder, head, trainer.images, bank, k=16, policy=trainer.policy, epochs=2,
                            batch_size=8, temperature=0.1, seed=0, progress=False)
    assert losses(trainer) == ref.loss.tolist()
    assert torch.equal(trainer.method.bank.memory, bank.memory)

def test_another_seed_gives_other_losses():
    assert losses(train(tiny(seed=1))) != losses(train(tiny(seed=0)))

# --- every method ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('method', method_names())
def test_every_method_trains(method):
    config = tiny(method=method, options=small(method))
    trainer = Trainer(config)
    before = weights(trainer.encoder)
    report = trainer.fit()
    assert len(trainer.history) == 8 and all(math.isfinite(x) for x in losses(trainer))
    assert not same_weights(before, weights(trainer.encoder))
    assert 0 <= report['val_knn'] <= 1 and 0 <= report['test_knn'] <= 1

# every option of every built-in method away from its default (the memory bank's k fits 40 images)
CHANGED = {'simclr': dict(temperature=0.3, chunk_size=3),
           'memory_bank': dict(temperature=0.3, k=12, momentum=0.3, negatives='per-query'),
           'moco': dict(temperature=0.3, queue_size=16, momentum=0.9, symmetric=True, bn_splits=2),
           'hard_negative': dict(temperature=0.3, weight=0.7, num_hard=3),
           'importance_weighted': dict(temperature=0.3, beta=0.5),
           'xbm': dict(temperature=0.3, weight=0.7, num_hard=3, memory_size=16),
           'debiased': dict(temperature=0.3, tau_plus=0.2),
           'hcl': dict(temperature=0.3, tau_plus=0.2, beta=0.5),
           'supcon': dict(temperature=0.3),
           'decoupled': dict(temperature=0.3),
           'false_negative': dict(temperature=0.3, mode='attract', flag='labels', k=2),
           'supervised': dict(),  # no settings of its own
           'simclr_global': dict(temperature=0.3, grad_cache_chunk=4, chunk_size=3, gather='no_grad'),
           'simsiam': dict(predictor_hidden=6, predictor=False, stop_gradient=False, fixed_predictor_lr=False,
                           projector_bn=True),
           'byol': dict(predictor_hidden=12, base_momentum=0.9, final_momentum=0.95),
           'barlow_twins': dict(lambda_=0.02),
           'vicreg': dict(invariance=20.0, variance=15.0, covariance=2.0, gamma=0.8)}

def test_changed_options_cover_every_option_of_every_built_in_method():
    assert sorted(CHANGED) == sorted(BUILTIN_METHODS)
    for name, changes in CHANGED.items():
        defaults = method_spec(name).options().to_dict()
        assert sorted(changes) == sorted(defaults), name
        assert all(changes[k] != defaults[k] for k in changes), name

def lesson_loss(name: str, method, batch: Batch, options: dict) -> torch.Tensor:
    "The loss of the lesson that teaches `name`, with the lesson's own functions, the modules of `method`."
    from contrastive_nb.debiased import (debiased_nt_xent, decoupled_nt_xent, detect_false_negatives,
                                         false_negative_loss, hcl_loss, supcon_loss)
    from contrastive_nb.pairs import pair_masks
    from contrastive_nb.distributed import global_nt_xent
    from contrastive_nb.hard_negatives import hard_negative_loss, importance_weighted_nt_xent, in_batch_negatives
    from contrastive_nb.infonce import info_nce, nt_xent
    from contrastive_nb.without_negatives import barlow_twins_loss, byol_loss, simsiam_loss, vicreg_loss
    o, views, g = types.SimpleNamespace(**options), batch.views, batch.generator
    if name == 'moco':  # lesson 06's model is its own loss
        assert (method.temperature, method.momentum, method.symmetric, method.bn_splits, len(method.queue.keys)) == (
            o.temperature, o.momentum, o.symmetric, o.bn_splits, o.queue_size)
        return method(views[0], views[1], g)
    if name == 'memory_bank':  # lesson 05's step: read the bank before it is written
        bank, rows = method.bank, batch.indices
        query = method.head(method.encoder(views[0]))
        draw = bank.sample_shared_negatives if o.negatives == 'shared' else bank.sample_negatives
        return info_nce(query, bank(rows), draw(rows, o.k, g), o.temperature)
    if name == 'supervised': return F.cross_entropy(method.head(method.encoder(views[0])), batch.labels)
    z1, z2 = (method.head(method.encoder(v)) for v in views)
    if name == 'simclr': return nt_xent(z1, z2, temperature=o.temperature, chunk_size=o.chunk_size)
    if name == 'simclr_global': return global_nt_xent(z1, z2, o.temperature, o.chunk_size)
    if name == 'hard_negative':
        return hard_negative_loss(*in_batch_negatives(z1, z2), o.temperature, o.weight, o.num_hard)
    if name == 'importance_weighted': return importance_weighted_nt_xent(z1, z2, o.temperature, o.beta)
    if name == 'xbm':  # lesson 07's order: the memory as the step found it, then the batch goes in
        query, positive, in_batch = in_batch_negatives(z1, z2)
        memory = method.memory.negatives().expand(len(query), -1, -1)
        return hard_negative_loss(query, positive, torch.cat([in_batch, memory], 1), o.temperature, o.weight,
                                  o.num_hard)
    if name == 'debiased': return debiased_nt_xent(z1, z2, o.temperature, o.tau_plus)
    if name == 'hcl': return hcl_loss(z1, z2, o.temperature, o.tau_plus, o.beta)
    if name == 'supcon': return supcon_loss(torch.cat([z1, z2]), torch.cat([batch.labels] * 2), o.temperature)
    if name == 'decoupled': return decoupled_nt_xent(z1, z2, o.temperature)
    if name == 'false_negative':
        flagged = pair_masks(batch.labels)[0] if o.flag == 'labels' else detect_false_negatives(z1, z2, o.k)
        return false_negative_loss(z1, z2, flagged, o.temperature, o.mode)
    if name == 'simsiam':  # lesson 13's: the predictor of each embedding against the other's
        if o.projector_bn:  # Chen & He's projector: the head, then a BatchNorm without affine
            z1, z2 = (F.batch_norm(method.head[0](method.encoder(v)), None, None, training=True) for v in views)
        return simsiam_loss(method.predictor(z1), z1, method.predictor(z2), z2, o.stop_gradient)
    if name == 'byol':  # against the target's projections of the other view
        t1, t2 = (method.target_head(method.target_encoder(v)) for v in views)
        return byol_loss(method.predictor(z1), t1, method.predictor(z2), t2)
    if name == 'barlow_twins': return barlow_twins_loss(z1, z2, o.lambda_)
    if name == 'vicreg': return vicreg_loss(z1, z2, o.invariance, o.variance, o.covariance, o.gamma)
    raise AssertionError(f"no lesson loss for {name!r}: add it here")

@pytest.mark.parametrize('method', sorted(BUILTIN_METHODS))
def test_every_built_in_methods_first_loss_is_its_lessons_loss_on_the_same_batch(method, monkeypatch):
    options = {**CHANGED[method], 'grad_cache_chunk': 0} if method == 'simclr_global' else CHANGED[method]
    trainer = Trainer(tiny(method=method, options=options))
    assert trainer.config.options.to_dict() == options
    before = copy.deepcopy(trainer.method)  # the method as the first step finds it
    seen = []
    original = trainer.method.loss_backward
    def spy(batch, scale):
        generator = torch.Generator()
        generator.set_state(batch.generator.get_state())  # what the method draws from, from here
        seen.append(Batch([v.clone() for v in batch.views], batch.indices.clone(), batch.labels.clone(),
                          generator))
        return original(batch, scale)
    monkeypatch.setattr(trainer.method, 'loss_backward', spy)
    loss = trainer.train_step()
    assert len(seen) == 1 and len(seen[0].views) == trainer.method.n_views
    assert loss == lesson_loss(method, before, seen[0], options).item()

def test_schedule_warmup_then_cosine():
    assert [lr_factor(s, 10, 2) for s in (0, 1)] == [0.5, 1.0]
    assert lr_factor(2, 10, 2) == 1.0 and lr_factor(6, 10, 2) == pytest.approx(0.5)
    assert lr_factor(9, 10, 2) == pytest.approx(0.5 * (1 + math.cos(math.pi * 7 / 8)))
    assert lr_factor(5, 10, 0, 'constant') == 1.0 and lr_factor(0, 10, 4, 'constant') == 0.25
    trainer = train(tiny(schedule='cosine', warmup_epochs=1, lr=0.01))
    lrs = [row[3] for row in trainer.history]
    assert lrs[:4] == pytest.approx([0.0025, 0.005, 0.0075, 0.01]) and lrs[4] == pytest.approx(0.01)
    assert lrs[-1] == pytest.approx(0.01 * 0.5 * (1 + math.cos(math.pi * 3 / 4)))

def test_lars_scales_each_weight_step_by_the_trust_ratio():
    w = torch.nn.Parameter(torch.full((2, 2), 3.0))
    b = torch.nn.Parameter(torch.ones(2))
    opt = LARS([w, b], lr=1.0, momentum=0.0, weight_decay=0.0, trust=0.01)
    w.grad, b.grad = torch.full((2, 2), 100.0), torch.full((2,), 100.0)
    opt.step()
    # ‖w‖ = 6, ‖g‖ = 200: the step is 0.01 · 6/200 · g = 0.03 per entry; the bias takes the plain step
    assert torch.allclose(w, torch.full((2, 2), 2.97)) and torch.allclose(b, torch.full((2,), -99.0))

def _one_lars_step(grad: float, **knobs) -> tuple[torch.Tensor, torch.Tensor]:
    "A 2×2 weight of 3s and a bias of 1s after one LARS step (lr 0.4, no momentum, λ = 1e-4)."
    w, b = torch.nn.Parameter(torch.full((2, 2), 3.0)), torch.nn.Parameter(torch.ones(2))
    w.grad, b.grad = torch.full((2, 2), grad), torch.full((2,), grad)
    LARS([w, b], lr=0.4, momentum=0.0, weight_decay=1e-4, **knobs).step()
    return w.detach(), b.detach()

def test_lars_clip_makes_each_layers_rate_the_ratio_capped_at_lr():
    # a small gradient: the ratio 0.02 · 6 / ‖g + λw‖ = 46 exceeds lr, so the clipped step is lr · (g + λw)
    d = 1e-3 + 1e-4 * 3.0
    ratio = 0.02 * 6.0 / (2 * d)
    clipped, _ = _one_lars_step(1e-3, trust=0.02, clip=True)
    free, _ = _one_lars_step(1e-3, trust=0.02)
    assert torch.allclose(3.0 - clipped, torch.full((2, 2), 0.4 * d), rtol=2e-3)
    assert torch.allclose(3.0 - free, torch.full((2, 2), 0.4 * ratio * d), rtol=1e-3)
    # a large gradient: the ratio 0.02 · 6 / ‖g + λw‖ = 0.06 is below lr, and it is the rate by itself
    # (no lr factor)
    d, ratio = 1.0 + 1e-4 * 3.0, 0.02 * 6.0 / (2 * (1.0 + 1e-4 * 3.0))
    assert torch.allclose(3.0 - _one_lars_step(1.0, trust=0.02, clip=True)[0], torch.full((2, 2), ratio * d))
    assert torch.allclose(3.0 - _one_lars_step(1.0, trust=0.02)[0], torch.full((2, 2), 0.4 * ratio * d))

def test_lars_clip_reads_the_scheduled_rate_of_its_group():
    "The cap is the group's current lr (what the schedule set), not the lr it was made with."
    w = torch.nn.Parameter(torch.ones(2, 2))
    opt = LARS([w], lr=0.4, momentum=0.0, trust=0.02, clip=True)
    opt.param_groups[0]['lr'] = 0.1
    w.grad = torch.full((2, 2), 0.01)  # the ratio 0.02 · 2 / 0.02 = 2 exceeds both rates
    opt.step()
    assert torch.allclose(1.0 - w.detach(), torch.full((2, 2), 0.1 * 0.01), rtol=1e-3)

def test_lars_biases_and_norms_are_excluded_unless_asked():
    _, plain = _one_lars_step(1.0, trust=0.02)
    _, included = _one_lars_step(1.0, trust=0.02, exclude_bias_norm=False)
    assert torch.allclose(1.0 - plain, torch.full((2,), 0.4))  # plain SGD, no decay
    # included: decay, then the ratio 0.02 · ‖b‖ / ‖g + λb‖ = 0.02 / (1 + 1e-4)
    assert torch.allclose(1.0 - included, torch.full((2,), 0.4 * 0.02), rtol=1e-4)
    # with no weight decay and no ratio an excluded bias moves by exactly lr · g; decay alone would move it more
    w, b = torch.nn.Parameter(torch.ones(2, 2)), torch.nn.Parameter(torch.ones(2))
    w.grad, b.grad = torch.ones(2, 2), torch.ones(2)
    LARS([w, b], lr=0.5, momentum=0.0, weight_decay=0.1).step()
    assert torch.allclose(b.detach(), torch.full((2,), 0.5))

def test_the_lars_settings_reach_the_optimiser_and_change_the_run():
    config = dict(optimizer='lars', lr=0.01, weight_decay=1e-4)
    trainer = Trainer(tiny(**config, lars_trust=0.02, lars_clip=True, lars_exclude_bias_norm=False))
    group = trainer.optimizer.param_groups[0]
    assert (group['trust'], group['clip'], group['exclude_bias_norm']) == (0.02, True, False)
    assert Trainer(tiny(**config)).optimizer.param_groups[0]['trust'] == 1e-3  # the default: You et al.'s
    base = train(tiny(**config, lars_trust=0.02))
    for changed in (dict(lars_trust=0.05), dict(lars_clip=True), dict(lars_exclude_bias_norm=False)):
        other = train(tiny(**config, **{'lars_trust': 0.02, **changed}))  # each knob alone changes the run
        assert not same_weights(weights(base.method), weights(other.method)), changed

def test_a_checkpoint_saved_before_the_lars_settings_existed_loads_with_their_defaults(tmp_path):
    trainer = Trainer(tiny(), tmp_path)
    trainer.fit()
    state = load_checkpoint(latest_checkpoint(tmp_path))
    for name in training.LARS_SETTINGS: del state['config'][name]
    save_checkpoint(state, latest_checkpoint(tmp_path))
    Trainer(tiny()).load_state_dict(state)  # the older run ran with the defaults: the same settings
    with pytest.raises(CheckpointError, match=r'lars_trust \(0.001 vs 0.02\)'):
        Trainer(tiny(optimizer='lars', lars_trust=0.02)).load_state_dict(state)
    saved = json.loads((tmp_path / 'config.json').read_text())
    for name in training.LARS_SETTINGS: del saved[name]
    (tmp_path / 'config.json').write_text(json.dumps(saved))
    assert resume(tmp_path, epochs=4).step == 4 * trainer.steps_per_epoch  # config.json without them too

def test_every_setting_has_a_meaning_on_its_line():
    "Lesson 09's settings table and `contrastive-nb train --help` read each field's comment: none may be missing."
    import inspect, re
    meaning = dict(re.findall(r'^    (\w+): [^=]+= .*?# (.+)$', inspect.getsource(TrainConfig), flags=re.MULTILINE))
    assert [f.name for f in dataclasses.fields(TrainConfig) if not meaning.get(f.name, '').strip()] == []
    from contrastive_nb.cli import option_help
    assert option_help(TrainConfig) == meaning  # the command line reads the same comments

@pytest.mark.parametrize('optimizer', ['adamw', 'sgd', 'lars'])
def test_other_optimisers_train(optimizer):
    trainer = train(tiny(optimizer=optimizer, lr=0.05 if optimizer != 'adamw' else 1e-3))
    assert all(math.isfinite(x) for x in losses(trainer))

@pytest.mark.parametrize('precision', ['bfloat16', 'float16'])
def test_half_precision_on_cpu(precision):
    trainer = train(tiny(precision=precision))
    assert all(math.isfinite(x) for x in losses(trainer))
    assert trainer.loop.scaler.is_enabled() == (precision == 'float16')
    full = train(tiny())
    assert losses(trainer)[0] == pytest.approx(losses(full)[0], rel=0.05)  # same run, rounder numbers

def test_channels_last_gives_the_same_losses_up_to_rounding():
    a, b = train(tiny(channels_last=True)), train(tiny())
    assert losses(a) == pytest.approx(losses(b), rel=1e-4)
    assert a.encoder.features[0][0].weight.is_contiguous(memory_format=torch.channels_last)

def test_chunked_loss_gives_the_same_losses_up_to_rounding():
    assert losses(train(tiny(options={'chunk_size': 3}))) == pytest.approx(losses(train(tiny())), rel=1e-5)

def test_cpu_threads_restores_the_setting():
    before = torch.get_num_threads()
    with cpu_threads(1): assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    train(tiny(threads=1))
    assert torch.get_num_threads() == before

def test_select_device():
    assert select_device('cpu') == torch.device('cpu')
    assert select_device('auto').type in ('cpu', 'cuda', 'mps')
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="'cuda' is not available"): select_device('cuda')

@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_bfloat16_channels_last_run():
    trainer = train(tiny(device='cuda', precision='bfloat16', channels_last=True))
    assert trainer.images.is_cuda and all(math.isfinite(x) for x in losses(trainer))

# --- extension points ------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ToyOptions(MethodOptions):
    "A user's method's own settings, checked by their class."
    weight: float = 1.0 # scale of the loss

    def __post_init__(self):
        if isinstance(self.weight, bool) or not isinstance(self.weight, (int, float)) or not self.weight > 0:
            raise ValueError(f"weight must be a positive number, got {self.weight!r}")
        self._store(weight=float(self.weight))

class ToyAlignment(TwoViewMethod):
    "Pull the two views together (no negatives): a method written outside the package."
    Options = ToyOptions
    calls: list = []

    def pair_loss(self, z1, z2, batch):
        ToyAlignment.calls.append((len(z1), len(batch.labels)))
        return self.options.weight * (z1 - z2).pow(2).mean()

def test_a_registered_method_is_trained_by_name_with_its_own_options():
    ToyAlignment.calls = []
    assert register_method('toy_alignment', ToyAlignment) is ToyAlignment  # a TwoViewMethod builds itself
    try:
        assert METHODS['toy_alignment'].options is ToyOptions  # taken from ToyAlignment.Options
        register_method('toy_alignment', ToyAlignment)  # the same builder again (a cell run twice): fine
        other = lambda encoder, head, options, setup: ToyAlignment(encoder, head, options, setup)
        with pytest.raises(ValueError, match="method 'toy_alignment' is already registered"):
            register_method('toy_alignment', other, ToyOptions)
        trainer = train(tiny(method='toy_alignment', options={'weight': 2.0}))
        assert isinstance(trainer.method, ToyAlignment) and trainer.method.options == ToyOptions(weight=2.0)
        assert ToyAlignment.calls == [(8, 8)] * 8 and all(math.isfinite(x) for x in losses(trainer))
        with pytest.raises(ValueError, match=r"unknown setting\(s\) \['wieght'\] for ToyOptions"):
            tiny(method='toy_alignment', options={'wieght': 2.0})
        with pytest.raises(ValueError, match='weight must be a positive number'):
            tiny(method='toy_alignment', options={'weight': -1.0})
    finally:
        del METHODS['toy_alignment']
    with pytest.raises(ValueError, match='method must be one of'): tiny(method='toy_alignment')

def test_a_builder_gets_its_options_and_the_run_it_builds_for():
    seen = []
    def build(encoder, head, options, setup):
        seen.append((options, setup))
        return ToyAlignment(encoder, head, options, setup)
    register_method('toy_built', build, ToyOptions)
    try: Trainer(tiny(method='toy_built', options={'weight': 3.0}, seed=7))
    finally: del METHODS['toy_built']
    [(options, setup)] = seen
    assert options == ToyOptions(weight=3.0)
    assert (setup.n_train, setup.batch_size, setup.embed_dim, setup.seed, setup.world_size) == (32, 8, 8, 7, 1)

def test_a_builder_must_return_a_contrastive_method():
    register_method('broken', lambda *args: torch.nn.Linear(2, 2))
    try:
        with pytest.raises(TypeError, match='not a ContrastiveMethod'): Trainer(tiny(method='broken'))
    finally: del METHODS['broken']
    assert issubclass(TwoViewMethod, ContrastiveMethod)

def test_registering_refuses_a_built_in_name_bad_names_and_options_that_are_not_a_dataclass(monkeypatch):
    monkeypatch.delitem(METHODS, 'simclr', raising=False)  # as before lesson 03 is imported
    with pytest.raises(ValueError, match="'simclr' is the name of the course's own method"):
        register_method('simclr', ToyAlignment)
    assert 'simclr' not in METHODS
    monkeypatch.undo()
    method_spec('simclr')  # the lesson's own registration, back: the same message
    with pytest.raises(ValueError, match="'simclr' is the name of the course's own method"):
        register_method('simclr', ToyAlignment)
    with pytest.raises(ValueError, match='a method name must be a word'): register_method('my method', ToyAlignment)
    with pytest.raises(TypeError, match='options must be a MethodOptions dataclass'):
        register_method('toy_dict', ToyAlignment, dict)
    assert 'toy_dict' not in METHODS

# --- the trainer below the methods ----------------------------------------------------------------------------

def test_the_lazy_table_of_built_in_methods_agrees_with_the_lessons_registrations():
    import importlib, pkgutil
    import contrastive_nb
    for module in pkgutil.iter_modules(contrastive_nb.__path__):  # every module: a lesson may register anywhere
        if module.name != '_modidx': importlib.import_module(f'contrastive_nb.{module.name}')
    for name, (module, qualname) in BUILTIN_METHODS.items():
        spec = METHODS[name]
        assert (spec.builder.__module__, spec.builder.__qualname__) == (module, qualname), name
        assert getattr(importlib.import_module(module), qualname) is spec.builder, name
    ours = {n for n, spec in METHODS.items() if spec.builder.__module__.startswith('contrastive_nb.')}
    assert ours == set(BUILTIN_METHODS), "a lesson registers a method the lazy table lacks (or the reverse)"
    assert set(BUILTIN_METHODS) <= set(method_names())

def test_a_built_in_method_is_found_by_name_in_a_fresh_process_without_importing_its_lesson():
    code = ("import sys; from contrastive_nb.training import TrainConfig; "
            "assert 'contrastive_nb.distributed' not in sys.modules; "
            "c = TrainConfig(method='simclr_global', options={'grad_cache_chunk': 4}); "
            "assert type(c.options).__name__ == 'GlobalSimCLROptions' and c.options.grad_cache_chunk == 4; "
            "assert 'contrastive_nb.distributed' in sys.modules")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, 'PYTHONPATH': str(ROOT)})
    assert out.returncode == 0, out.stderr

def test_training_imports_no_lesson_module():
    import ast
    tree = ast.parse((ROOT / 'contrastive_nb' / 'training.py').read_text())
    ours = set()
    for node in ast.walk(tree):  # every import, also one inside a function
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            ours |= {node.module} if node.module else {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or '').startswith('contrastive_nb'):
            ours.add(node.module.partition('.')[2] or next(a.name for a in node.names))
        elif isinstance(node, ast.Import):
            ours |= {a.name.partition('.')[2] for a in node.names if a.name.startswith('contrastive_nb.')}
        elif isinstance(node, ast.Call) and getattr(node.func, 'attr', None) == 'import_module':
            ours.add('<import_module>')
    assert ours <= {'_checks', 'augment', 'compat', 'data', 'datasets', 'evaluate', 'launch', 'loop', 'methods',
                    'models', 'optim', 'runs'}, sorted(ours)
    assert {'augment', 'loop', 'methods'} <= ours  # the parse found the imports

# --- config -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('changes,error,match', [
    (dict(method='dino'), ValueError, 'method must be one of'),
    (dict(dataset='imagenet'), ValueError, 'dataset must be one of'),
    (dict(batch_size=1), ValueError, 'batch_size must be at least 2'),
    (dict(options={'temperature': 0.0}), ValueError, 'temperature'),
    (dict(options={'temperature': -0.5}), ValueError, 'temperature'),
    (dict(batch_size='256'), TypeError, 'batch_size must be an int'),
    (dict(batch_size=2.5), TypeError, 'batch_size must be an int'),
    (dict(epochs=True), TypeError, 'epochs must be an int'),
    (dict(lr='fast'), TypeError, 'lr must be a real number'),
    (dict(channels_last=1), TypeError, 'channels_last must be True or False'),
    (dict(precision='float8'), ValueError, 'precision must be one of'),
    (dict(device='tpu'), ValueError, 'device must be one of'),
    (dict(epochs=0), ValueError, 'epochs'),
    (dict(lr=math.nan), ValueError, 'lr'),
    (dict(val_fraction=1.0), ValueError, 'val_fraction'),
    (dict(warmup_epochs=2), ValueError, 'warmup_epochs'),
    (dict(dataset='cifar10'), ValueError, 'needs data_root'),
    (dict(method='debiased', options={'tau_plus': 1.0}), ValueError, 'tau_plus'),
    (dict(threads=-1), ValueError, 'threads'),
    (dict(optimizer='lars', lars_trust=0.0), ValueError, 'lars_trust'),
    (dict(optimizer='lars', lars_clip=1), TypeError, 'lars_clip'),
    (dict(lars_trust=0.02), ValueError, r"lars_trust set with optimizer 'adam'"),
    (dict(optimizer='sgd', lars_clip=True, lars_exclude_bias_norm=False), ValueError,
     r"lars_clip, lars_exclude_bias_norm set with optimizer 'sgd'"),
    # a method's own options, checked by its options class
    (dict(options={'queue_size': 16}), ValueError,
     r"unknown setting\(s\) \['queue_size'\] for SimCLROptions; its settings are \['temperature', 'chunk_size'\]"),
    (dict(method='moco', options={'k': 16}), ValueError, r"unknown setting\(s\) \['k'\] for MoCoOptions"),
    (dict(options={'temperature': 'warm'}), TypeError, 'temperature must be a real number'),
    (dict(method='moco', options={'symmetric': 1}), TypeError, 'symmetric must be True or False'),
    (dict(method='memory_bank', options={'k': 0}), ValueError, 'k must lie in'),
    (dict(method='hcl', options={'beta': math.nan}), ValueError, 'beta'),
    (dict(method='simclr_global', options={'grad_cache_chunk': -1}), ValueError, 'grad_cache_chunk'),
    (dict(method='hard_negative', options={'weight': 1.5}), ValueError, 'weight'),
    (dict(options=MoCoOptions()), TypeError, r"options must be a SimCLROptions \(the settings of method 'simclr'\)"),
    (dict(options='fast'), TypeError, 'options must be a SimCLROptions'),
    # the augmentation, checked by AugmentationPolicy
    (dict(augment={'sise': 16}), ValueError, r"unknown setting\(s\) \['sise'\] for AugmentationPolicy"),
    (dict(augment={'scale': (1.5, 1.0)}), ValueError, r'scale\[0\]'),
    (dict(augment='big'), TypeError, 'augment must be an AugmentationPolicy or a dict'),
])
def test_bad_settings_are_refused_when_the_config_is_made(changes, error, match):
    with pytest.raises(error, match=match): tiny(**changes)

def test_a_config_is_frozen_and_its_tables_are_the_parts_own_classes():
    config = tiny(method='moco', options={'queue_size': 16}, augment={'size': 16, 'scale': [0.08, 1.0]})
    with pytest.raises(dataclasses.FrozenInstanceError): config.lr = 0.1
    assert isinstance(config.options, MoCoOptions) and config.options.queue_size == 16
    assert config.options.temperature == MoCoOptions().temperature  # a missing key keeps its default
    assert isinstance(config.augment, AugmentationPolicy) and config.augment.scale == (0.08, 1.0)  # a tuple again
    assert config.augment == dataclasses.replace(training.TRAIN_POLICY, size=16, scale=(0.08, 1.0))
    assert tiny(options=None).options == SimCLROptions() == tiny(options={}).options
    policy = AugmentationPolicy(size=16, blur_p=0.0)
    assert tiny(augment=policy).augment is policy  # a whole policy is taken as it is

@pytest.mark.parametrize('method', sorted(BUILTIN_METHODS))
def test_config_round_trips_through_dict_json_and_toml(method):
    import tomllib
    config = tiny(method=method, options=CHANGED[method], augment={'scale': (0.15, 0.9), 'blur_sigma': (0.2, 1.5)},
                  lr=1, channels_last=True)
    assert isinstance(config.lr, float)  # an int where a float is expected is converted
    assert config.augment.scale == (0.15, 0.9) and config.options.to_dict() == CHANGED[method]
    values = config.to_dict()
    assert values['options'] == CHANGED[method] and values['augment']['scale'] == [0.15, 0.9]  # tables, lists
    assert TrainConfig.from_dict(json.loads(json.dumps(values))) == config
    text = config.to_toml()
    assert '\n[options]\n' in text and '\n[augment]\n' in text and 'scale = [0.15, 0.9]' in text
    assert tomllib.loads(text) == json.loads(json.dumps(values))
    back = TrainConfig.from_dict(tomllib.loads(text))
    assert back == config and type(back.options) is type(config.options) and back.augment.scale == (0.15, 0.9)
    # TOML has no null: options=None is saved as the defaults' table, and a missing table means the defaults
    default = tiny(method=method, options=None)
    assert TrainConfig.from_dict(tomllib.loads(default.to_toml())) == default
    assert TrainConfig.from_dict({k: v for k, v in default.to_dict().items() if k != 'options'}) == default

def test_from_dict_refuses_unknown_keys_at_every_level():
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['learning_rate'\]"):
        TrainConfig.from_dict({'learning_rate': 0.1})
    with pytest.raises(ValueError, match=r"\['queue_size'\] for SimCLROptions"):
        TrainConfig.from_dict({'options': {'queue_size': 16}})
    with pytest.raises(ValueError, match=r"\['image_size'\] for AugmentationPolicy"):
        TrainConfig.from_dict({'augment': {'image_size': 16}})
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['image_size'\]"):  # the old flat names are gone
        TrainConfig.from_dict({'image_size': 16})

def test_missing_dataset_files_raise_before_training(tmp_path):
    with pytest.raises(DatasetNotFoundError, match='not found'):
        Trainer(tiny(dataset='cifar10', data_root=str(tmp_path / 'nowhere')))

def test_memory_bank_needs_enough_rows_outside_the_batch():
    # 32 training images, 8 per batch: at most 24 rows outside a batch
    with pytest.raises(ValueError, match=r'k \(25\) must be at most n_train − batch_size = 24'):
        Trainer(tiny(method='memory_bank', options={'k': 25}))
    assert len(Trainer(tiny(method='memory_bank', options={'k': 24})).method.bank) == 32

def test_moco_needs_two_sources_in_each_shuffle_bn_split():
    with pytest.raises(ValueError, match=r'batch_size \(8\) must be at least 2 × bn_splits = 10'):
        Trainer(tiny(method='moco', options={'queue_size': 16, 'bn_splits': 5}))
    assert Trainer(tiny(method='moco', options={'queue_size': 16, 'bn_splits': 4})).method.bn_splits == 4

# --- datasets ---------------------------------------------------------------------------------------------------------

def test_validation_split_is_carved_from_training_data_by_data_seed():
    a, b = load_datasets(tiny(seed=5)), load_datasets(tiny(seed=6))
    assert (len(a['train']), len(a['val']), len(a['test'])) == (32, 8, 16)
    assert torch.equal(a['val'].images, b['val'].images)  # the training seed does not move the split
    c = load_datasets(tiny(data_seed=1))
    assert not torch.equal(a['val'].images, c['val'].images)
    train_rows = {tuple(x.flatten()[:20].tolist()) for x in a['train'].images}
    assert not any(tuple(x.flatten()[:20].tolist()) in train_rows for x in a['val'].images)
    assert not any(torch.equal(x, y) for x in a['test'].images[:4] for y in a['train'].images)

def test_digits_become_three_channels():
    data = load_datasets(tiny(dataset='digits', n_train=0, n_test=0))
    assert data['train'].images.shape[1:] == (3, 8, 8) and len(data['test']) == 360
    assert len(data['train']) + len(data['val']) == 1797 - 360
    assert train(tiny(dataset='digits', augment={'size': 8}, blocks=2)).history

def test_cifar10_and_stl10_from_folders_in_torchvision_format(tmp_path):
    write_cifar10_fixture(tmp_path, per_batch=4)
    data = load_datasets(tiny(dataset='cifar10', data_root=str(tmp_path), n_train=0, n_test=0, batch_size=4))
    assert len(data['train']) + len(data['val']) == 20 and data['test'].images.shape == (4, 3, 32, 32)
    write_stl10_fixture(tmp_path, n=10)
    data = load_datasets(tiny(dataset='stl10', data_root=str(tmp_path), n_train=0, n_test=0, batch_size=4))
    assert data['train'].images.shape[1:] == (3, 96, 96) and len(data['test']) == 10

def test_knn_monitor_runs_on_the_validation_split(tmp_path):
    trainer = Trainer(tiny(knn_every=1), tmp_path)
    trainer.fit()
    assert [row[:2] for row in trainer.monitor] == [(0, 4), (1, 8)]
    lines = (tmp_path / 'metrics.csv').read_text().splitlines()
    assert lines[0] == 'epoch,step,loss,lr,images_per_s,val_knn' and len(lines) == 9
    assert lines[4].split(',')[-1] != '' and lines[3].split(',')[-1] == ''
    report = json.loads((tmp_path / 'report.json').read_text())
    assert set(report) >= {'val_knn', 'test_knn', 'final_loss'}

# --- checkpoints --------------------------------------------------------------------------------------------------

def test_checkpoint_holds_everything_as_plain_values(tmp_path):
    trainer = Trainer(tiny(method='moco', options={'queue_size': 16}), tmp_path)
    trainer.fit()
    state = torch.load(latest_checkpoint(tmp_path), weights_only=True)
    assert set(state) == {'format', 'config', 'method_file', 'world_size', 'process_rng', 'epoch', 'rng', 'loop'}
    loop = state['loop']
    assert set(loop) == {'step', 'epochs', 'seconds', 'method', 'optimizers', 'scaler', 'data', 'callbacks'}
    assert {'metrics', 'schedule', 'knn'} <= set(loop['callbacks']) and 'order' in loop['data']
    assert state['format'] == CHECKPOINT_FORMAT == 3 and state['method_file'] is None  # a built-in method
    assert set(state['rng']) == {'torch', 'cuda', 'generator', 'numpy', 'python'}
    assert any(k.startswith('encoder_k.') for k in loop['method'])  # the key encoder
    assert 'queue.keys' in loop['method'] and state['config'] == trainer.config.to_dict()
    assert state['config']['options']['queue_size'] == 16 and state['config']['augment']['size'] == 16
    assert loop['step'] == 8 and json.loads((tmp_path / 'config.json').read_text()) == state['config']
    assert not list(tmp_path.rglob('*.tmp'))

def test_only_the_two_newest_checkpoints_are_kept(tmp_path):
    Trainer(tiny(checkpoint_every=3), tmp_path).fit()
    names = [p.name for p in sorted((tmp_path / 'checkpoints').glob('*.pt'))]
    assert names == ['step-00000006.pt', 'step-00000008.pt']

def test_rng_states_are_restored():
    trainer = Trainer(tiny())
    state = trainer.state_dict()
    draws = lambda: (torch.rand(3), torch.rand(3, generator=trainer.generator), np.random.rand(2), random.random())
    expected = draws()
    draws()
    trainer.load_state_dict(state)
    got = draws()
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    assert np.array_equal(got[2], expected[2]) and got[3] == expected[3]

@pytest.mark.parametrize('method', ['simclr', 'moco', 'memory_bank'])
def test_resume_after_a_crash_mid_epoch_is_exact(tmp_path, method, monkeypatch):
    config = tiny(method=method, epochs=3, checkpoint_every=3, options=small(method), knn_every=1,
                  schedule='cosine', warmup_epochs=1)
    full = Trainer(config, tmp_path / 'full')
    full.fit()
    crash_at = 7
    class Crash(Callback):
        def before_step(self, loop):
            if loop.step == crash_at: raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt): Trainer(config, tmp_path / 'crashed', callbacks=[Crash()]).fit()
    assert latest_checkpoint(tmp_path / 'crashed').name == 'step-00000006.pt'  # mid-epoch: 4 steps per epoch
    resumed = resume(tmp_path / 'crashed')
    assert same_weights(weights(resumed.method), weights(full.method))
    assert losses(resumed) == losses(full) and resumed.monitor == full.monitor

def test_a_truncated_checkpoint_gives_a_clear_error_and_the_previous_one_loads(tmp_path):
    Trainer(tiny(checkpoint_every=2), tmp_path).fit()
    newest = latest_checkpoint(tmp_path)
    newest.write_bytes(newest.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match=newest.name) as info: load_checkpoint(newest)
    assert 'truncated' in str(info.value)
    with pytest.raises(CheckpointError, match='step-00000006.pt is intact'): resume(tmp_path)
    previous = tmp_path / 'checkpoints' / 'step-00000006.pt'
    assert load_checkpoint(previous)['loop']['step'] == 6

def test_save_checkpoint_replaces_atomically(tmp_path, monkeypatch):
    path = tmp_path / 'c.pt'
    save_checkpoint({'model': {}, 'step': 1}, path)
    def fail(*args, **kwargs): raise OSError('disk full')
    monkeypatch.setattr(torch, 'save', fail)
    with pytest.raises(OSError): save_checkpoint({'model': {}, 'step': 2}, path)
    assert load_checkpoint(path)['step'] == 1  # a failed write leaves the old file whole
    with pytest.raises(CheckpointError, match='not a checkpoint'):
        monkeypatch.undo()
        torch.save({'weights': 1}, tmp_path / 'other.pt')
        load_checkpoint(tmp_path / 'other.pt')

def test_a_checkpoint_of_other_settings_is_refused(tmp_path):
    Trainer(tiny(), tmp_path).fit()
    other = Trainer(tiny(lr=0.01))
    with pytest.raises(CheckpointError, match='other settings'):
        other.load_state_dict(load_checkpoint(latest_checkpoint(tmp_path)))
    other = Trainer(tiny(options={'temperature': 0.3}, augment={'size': 16, 'blur_p': 0.0}))
    with pytest.raises(CheckpointError, match=r"augment.blur_p \(0.5 vs 0.0\), options.temperature \(0.2 vs 0.3\)"):
        other.load_state_dict(load_checkpoint(latest_checkpoint(tmp_path)))  # the tables' settings are named

def test_a_checkpoint_of_another_format_is_refused_naming_the_format(tmp_path):
    train(tiny(), tmp_path)
    newest = latest_checkpoint(tmp_path)
    state = load_checkpoint(newest)
    del state['format']  # the flat settings of format 1 had no 'format' key
    save_checkpoint(state, newest)
    for read in (resume, lambda run: load_latest_checkpoint(run, 'evaluate')):
        with pytest.raises(CheckpointError, match=rf'{newest.name} is a checkpoint of format 1; this trainer reads '
                                                   rf'format {CHECKPOINT_FORMAT}'):
            read(tmp_path)
    save_checkpoint({**state, 'format': 2}, newest)  # the last format before the loop's state was apart
    with pytest.raises(CheckpointError, match=r'is a checkpoint of format 2; .*\(the state of the loop and of each'):
        resume(tmp_path)
    save_checkpoint({**state, 'format': CHECKPOINT_FORMAT + 1}, newest)
    with pytest.raises(CheckpointError, match=f'is a checkpoint of format {CHECKPOINT_FORMAT + 1}'): resume(tmp_path)

@pytest.mark.slow
def test_training_benchmark_runs_and_reports(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / 'benchmarks' / 'training_bench.py'), '--quick', '--seeds', '2'],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(result['runs']) == 2 and 0 <= result['mean_test_knn'] <= 1 and result['recipe']['method'] == 'simclr'

# --- checkpoints you can trust (issue 23) ---------------------------------------------------------------------

def flip_a_bit(path) -> None:
    "Flip one bit in the middle of the checkpoint's largest tensor (a weight), as a bad disk would."
    with zipfile.ZipFile(path) as archive:
        storages = [r for r in archive.infolist() if '/data/' in r.filename]  # tensors, not the pickle
        record = max(storages, key=lambda r: r.file_size)
    data = bytearray(path.read_bytes())
    name_len, extra_len = struct.unpack('<HH', data[record.header_offset + 26:record.header_offset + 30])
    data[record.header_offset + 30 + name_len + extra_len + record.file_size // 2] ^= 0x10
    path.write_bytes(data)

def test_a_flipped_bit_in_a_weight_is_refused_and_the_newest_intact_checkpoint_named(tmp_path):
    Trainer(tiny(checkpoint_every=2), tmp_path).fit()
    newest, previous = (tmp_path / 'checkpoints' / f'step-0000000{s}.pt' for s in (8, 6))
    flip_a_bit(newest)
    assert torch.load(newest, weights_only=True)['loop']['step'] == 8  # torch.load alone takes the damaged weights
    with pytest.raises(CheckpointError, match=r'step-00000008\.pt is damaged: its record .* fails its CRC-32'):
        load_checkpoint(newest)
    with pytest.raises(CheckpointError, match=r'step-00000006\.pt is intact'): resume(tmp_path)
    flip_a_bit(previous)  # the hint must come from reading the file, not from its being there
    with pytest.raises(CheckpointError, match='no older checkpoint of the run is intact') as info: resume(tmp_path)
    assert 'step-00000008.pt' in str(info.value) and 'step-00000006.pt' not in str(info.value)

def test_latest_checkpoint_and_the_clean_up_order_steps_as_numbers(tmp_path):
    trainer = Trainer(tiny(), tmp_path)
    for step in (99_999_999, 100_000_000, 100_000_001):
        trainer.loop.step = step
        trainer.checkpoint()
    names = sorted(p.name for p in (tmp_path / 'checkpoints').iterdir())
    assert names == ['step-100000000.pt', 'step-100000001.pt']  # the two newest steps, not the two last names
    assert latest_checkpoint(tmp_path).name == 'step-100000001.pt'
    (tmp_path / 'checkpoints' / 'step-99999999.pt').write_bytes(b'')
    (tmp_path / 'checkpoints' / 'step-latest.pt').write_bytes(b'')  # not a step: ignored
    assert latest_checkpoint(tmp_path).name == 'step-100000001.pt'

@pytest.mark.parametrize('error', [OSError('disk full'), KeyboardInterrupt()])
def test_a_failed_or_interrupted_save_leaves_no_temporary_file(tmp_path, monkeypatch, error):
    path = tmp_path / 'c.pt'
    save_checkpoint({'model': {}, 'step': 1}, path)
    def half_then_fail(state, f):
        f.write(b'PK\x03\x04 half a checkpoint')
        raise error
    monkeypatch.setattr(torch, 'save', half_then_fail)
    with pytest.raises(type(error)): save_checkpoint({'model': {}, 'step': 2}, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['c.pt']
    monkeypatch.undo()
    assert load_checkpoint(path)['step'] == 1

def test_a_run_removes_the_temporary_files_a_killed_save_left_before_its_first_save(tmp_path, monkeypatch):
    # a SIGKILL during a save runs no clean-up: its half-written .step-*.pt.tmp would stay in the folder forever
    crash_at(monkeypatch, 5)
    with pytest.raises(KeyboardInterrupt): train(tiny(checkpoint_every=2), tmp_path)
    monkeypatch.undo()
    checkpoints = tmp_path / 'checkpoints'
    left = [checkpoints / '.step-00000006.pt.tmp', tmp_path / '.metrics.csv.tmp', tmp_path / '.config.json.tmp']
    for p in left: p.write_bytes(b'PK\x03\x04 half a file')
    others = [checkpoints / 'notes.tmp', checkpoints / '.step-latest.pt.tmp', tmp_path / 'mine.tmp']  # not the run's
    for p in others: p.write_text('kept')
    crash_at(monkeypatch, 5)  # interrupted again before its first save: the leftovers are already gone
    with pytest.raises(KeyboardInterrupt): resume(tmp_path)
    monkeypatch.undo()
    assert not any(p.exists() for p in left) and all(p.read_text() == 'kept' for p in others)
    assert sorted(p.name for p in checkpoints.glob('step-*.pt')) == ['step-00000002.pt', 'step-00000004.pt']
    assert resume(tmp_path).step == 8
    fresh = tmp_path / 'fresh'  # a new run in a folder that holds only a killed save's file
    (fresh / 'checkpoints').mkdir(parents=True)
    (fresh / 'checkpoints' / '.step-00000002.pt.tmp').write_bytes(b'PK\x03\x04')
    crash_at(monkeypatch, 0)
    with pytest.raises(KeyboardInterrupt): train(tiny(), fresh)
    assert not list(fresh.rglob('*.tmp'))

# --- one run per folder (issue 23) -------------------------------------------------------------------------------

def test_a_new_run_is_refused_in_a_folder_that_holds_another(tmp_path):
    train(tiny(epochs=3), tmp_path)  # 12 steps: names above any of the 8-step run below
    before = sorted(p.name for p in (tmp_path / 'checkpoints').iterdir())
    with pytest.raises(ValueError, match='already holds a run') as info: train(tiny(lr=0.01), tmp_path)
    assert f'--resume {tmp_path}' in str(info.value)
    with pytest.raises(ValueError, match='already holds a run'): Trainer(tiny(lr=0.01), tmp_path).fit()
    with pytest.raises(ValueError, match='already holds a run'): Trainer(tiny(epochs=3), tmp_path).fit()
    assert sorted(p.name for p in (tmp_path / 'checkpoints').iterdir()) == before
    assert json.loads((tmp_path / 'config.json').read_text())['epochs'] == 3

def crash_at(monkeypatch, step: int) -> None:
    "Every loop started after this raises KeyboardInterrupt as it starts step `step`."
    original = Loop.one_step
    def crashing(self):
        if self.step == step: raise KeyboardInterrupt
        return original(self)
    monkeypatch.setattr(Loop, 'one_step', crashing)

def test_resume_refuses_a_config_json_that_differs_from_its_checkpoint(tmp_path, monkeypatch):
    crash_at(monkeypatch, 5)
    with pytest.raises(KeyboardInterrupt): train(tiny(), tmp_path)
    monkeypatch.undo()
    saved = tmp_path / 'config.json'
    edited = {**json.loads(saved.read_text()), 'lr': 0.01, 'epochs': 3}
    saved.write_text(json.dumps(edited))
    with pytest.raises(ValueError, match=r'differ in epochs \(3 vs 2\), lr \(0.01 vs 0.001\)'): resume(tmp_path)
    assert json.loads(saved.read_text()) == edited  # not rewritten
    saved.write_text(json.dumps({**edited, 'lr': 0.001, 'epochs': 2, 'progress': True}))  # runtime only
    resumed = resume(tmp_path)
    assert resumed.step == 8 and resumed.config.progress is True

def test_the_settings_are_written_with_the_first_checkpoint_atomically(tmp_path, monkeypatch):
    crash_at(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt): train(tiny(checkpoint_every=3), tmp_path)
    assert not (tmp_path / 'config.json').exists()  # no checkpoint, no settings: nothing pretends to be a run
    monkeypatch.undo()
    train(tiny(lr=0.01), tmp_path)  # a folder without checkpoints takes a new run
    assert json.loads((tmp_path / 'config.json').read_text())['lr'] == 0.01
    def half_then_fail(self, text, *args, **kwargs):
        with open(self, 'w') as f: f.write(text[:10])
        raise OSError('disk full')
    monkeypatch.setattr(Path, 'write_text', half_then_fail)
    with pytest.raises(OSError): write_text(tmp_path / 'config.json', '{"lr": 1}')
    monkeypatch.undo()
    assert json.loads((tmp_path / 'config.json').read_text())['lr'] == 0.01
    assert not list(tmp_path.glob('.*.tmp'))

# --- the run folder and the datasets, checked at the door (issue 23) -----------------------------------------

@pytest.fixture
def no_work(monkeypatch):
    "Loading data fails the test: the error must come first."
    def boom(config): raise AssertionError('the data was loaded before the error')
    monkeypatch.setattr(training, 'load_datasets', boom)

def test_a_run_dir_that_is_or_lies_under_a_file_is_refused_before_any_work(tmp_path, no_work):
    (tmp_path / 'file').write_text('')
    for make in (lambda d: Trainer(tiny(), d), lambda d: train(tiny(), d), resume):
        with pytest.raises(ValueError, match=r'run_dir .*file is a file, not a folder'): make(tmp_path / 'file')
        with pytest.raises(ValueError, match=r'lies under .*file, which is a file'): make(tmp_path / 'file' / 'run')

def test_a_run_dir_that_cannot_be_written_is_refused_before_any_work(tmp_path, monkeypatch, no_work):
    locked = tmp_path / 'locked'
    locked.mkdir()
    access = os.access
    monkeypatch.setattr(os, 'access', lambda p, mode, **kw: Path(p) != locked and access(p, mode, **kw))
    for run_dir in (locked, locked / 'run' / 'deeper'):
        with pytest.raises(ValueError, match=r'cannot be written: this user may not write in .*locked'):
            Trainer(tiny(), run_dir)
    with pytest.raises(ValueError, match='cannot be written'): resume(locked)

@pytest.mark.parametrize('change,error,match', [
    (lambda d: {'train': d['train'], 'test': d['test']}, ValueError, r"datasets lacks the split\(s\) \['val'\]"),
    (lambda d: {**d, 'train': d['train'].images}, TypeError,
     r"datasets\['train'\] must be an ImageDataset, got Tensor"),
    (lambda d: {**d, 'train': d['train'].subset(slice(0, 7))}, ValueError,
     r"datasets\['train'\] holds 7 images: fewer than one batch \(batch_size = 8\)"),
    (lambda d: [d['train'], d['val'], d['test']], TypeError, 'datasets must be a dict'),
])
def test_bad_datasets_are_refused_at_the_door(change, error, match):
    data = load_datasets(tiny())
    with pytest.raises(error, match=match): Trainer(tiny(), datasets=change(data))

def test_own_datasets_train_with_an_empty_validation_split_and_grey_images():
    data = load_datasets(tiny())
    grey = {k: type(d)(d.images[:, :1], d.labels, d.classes) for k, d in data.items()}
    trainer = Trainer(tiny(), datasets={**grey, 'val': grey['val'].subset(slice(0, 0))})
    report = trainer.fit()
    assert trainer.images.shape[1] == 3 and report['val_knn'] is None and 0 <= report['test_knn'] <= 1

# --- a finished run says so, and is extended only when asked (issue 23) -----------------------------------------

def test_resuming_a_finished_run_says_it_is_finished_and_how_to_extend_it(tmp_path, no_work):
    (tmp_path / 'checkpoints').mkdir()
    state = {'format': CHECKPOINT_FORMAT, 'model': {}, 'step': 8, 'epoch': 2,
             'config': tiny(warmup_epochs=1).to_dict()}
    save_checkpoint(state, tmp_path / 'checkpoints' / 'step-00000008.pt')
    with pytest.raises(ValueError, match=r'holds a finished run \(2 epochs\): .*--resume .* --epochs N, or '
                                         r'resume\(run_dir, epochs=N\), with N > 3'):
        resume(tmp_path)
    with pytest.raises(ValueError, match=r"epochs must be more than the run's 2 \+ warmup_epochs \(1\)"):
        resume(tmp_path, epochs=3)
    with pytest.raises(TypeError, match='epochs must be an int'): resume(tmp_path, epochs=4.0)
    save_checkpoint({**state, 'step': 6, 'epoch': 1}, tmp_path / 'checkpoints' / 'step-00000008.pt')
    with pytest.raises(ValueError, match='epochs extends a finished run, and .* is at epoch 1 of 2'):
        resume(tmp_path, epochs=4)

def test_an_extension_is_a_new_warm_up_and_cosine_segment_from_the_base_rate(tmp_path):
    config = tiny(schedule='cosine', warmup_epochs=1, lr=0.01)
    first = train(config, tmp_path)
    extended = resume(tmp_path, epochs=4)
    lrs = [row[3] for row in extended.history]
    assert lrs[:8] == [row[3] for row in first.history]  # the first segment untouched
    assert lrs[8:12] == pytest.approx([0.0025, 0.005, 0.0075, 0.01])  # warm-up again, from the base rate
    assert lrs[12] == pytest.approx(0.01) and lrs[15] == pytest.approx(0.01 * 0.5 * (1 + math.cos(math.pi * 3 / 4)))
    report = json.loads((tmp_path / 'report.json').read_text())
    assert report['step'] == 16 and report['segments'] == [[0, 2], [2, 4]]
    assert json.loads((tmp_path / 'config.json').read_text())['epochs'] == 4
    assert load_checkpoint(latest_checkpoint(tmp_path))['loop']['callbacks']['schedule']['segments'] == [2, 4]
    with pytest.raises(ValueError, match=r"finished run \(4 epochs\)"): resume(tmp_path)

def test_an_extension_interrupted_mid_segment_resumes_bit_identically(tmp_path, monkeypatch):
    config = tiny(schedule='cosine', warmup_epochs=1, checkpoint_every=3, knn_every=1)
    train(config, tmp_path / 'whole')
    shutil.copytree(tmp_path / 'whole', tmp_path / 'crashed')
    whole = resume(tmp_path / 'whole', epochs=4)
    crash_at(monkeypatch, 13)
    with pytest.raises(KeyboardInterrupt): resume(tmp_path / 'crashed', epochs=4)
    monkeypatch.undo()
    assert latest_checkpoint(tmp_path / 'crashed').name == 'step-00000012.pt'
    resumed = resume(tmp_path / 'crashed')  # within the second segment: no epochs needed
    assert same_weights(weights(resumed.method), weights(whole.method))
    assert losses(resumed) == losses(whole)
    assert [r[3] for r in resumed.history] == [r[3] for r in whole.history] and resumed.monitor == whole.monitor

# --- monitors -------------------------------------------------------------------------------------------------------

def test_monitors_are_recorded_each_epoch_in_metrics_checkpoints_and_the_report(tmp_path):
    import csv
    seen = []
    def spread(trainer) -> float:
        seen.append(trainer.step)
        return float(trainer.step) / 10
    trainer = Trainer(tiny(epochs=3, knn_every=1), tmp_path / 'run', monitors={'spread': spread})
    report = trainer.fit()
    per_epoch = trainer.steps_per_epoch
    assert seen == [per_epoch, 2 * per_epoch, 3 * per_epoch]  # once at the end of each epoch
    assert report['monitors'] == {'spread': 3 * per_epoch / 10}
    rows = list(csv.DictReader(open(tmp_path / 'run' / 'metrics.csv')))
    marked = [(int(r['step']), float(r['spread'])) for r in rows if r['spread']]
    assert marked == [(s - 1, s / 10) for s in seen]  # on the epoch's last step, as val_knn
    state = torch.load(latest_checkpoint(tmp_path / 'run'), weights_only=True)
    assert [v for _, _, v in state['loop']['callbacks']['monitors']['rows']] == [{'spread': s / 10} for s in seen]

def test_bad_monitors_are_refused_with_a_clear_error():
    with pytest.raises(TypeError, match='monitors must be a dict'): Trainer(tiny(), monitors=[len])
    with pytest.raises(TypeError, match='monitors must map names'): Trainer(tiny(), monitors={'a b': len})
    with pytest.raises(TypeError, match="monitor 'bad' must return a number, got str"):
        Trainer(tiny(epochs=1), monitors={'bad': lambda t: 'high'}).fit()

def test_a_monitor_may_return_a_one_element_tensor():
    "A one-element tensor is read as its number (guards numel() == 1); a longer one is refused."
    trainer = Trainer(tiny(epochs=1), monitors={'t': lambda t: torch.tensor([0.25])})
    assert math.isclose(trainer.fit()['monitors']['t'], 0.25)
    with pytest.raises(TypeError, match="monitor 'v' must return a number, got Tensor"):
        Trainer(tiny(epochs=1), monitors={'v': lambda t: torch.ones(2)}).fit()

def test_a_global_batch_of_two_trains_in_one_process():
    "Two sources per process are enough (guards batch_size < 2 * world_size, not <=)."
    trainer = Trainer(tiny(batch_size=2, epochs=1))
    assert trainer.local_batch == 2 and math.isfinite(trainer.train_step())

def test_a_checkpoint_written_outside_fit_brings_the_settings(tmp_path):
    "checkpoint() before any fit writes config.json and config.toml (guards _settings_to_write)."
    trainer = Trainer(tiny(), tmp_path)
    trainer.checkpoint()
    saved = json.loads((tmp_path / 'config.json').read_text())
    assert saved == json.loads(json.dumps(trainer.config.to_dict()))
    assert (tmp_path / 'config.toml').is_file()

def test_a_config_json_that_is_not_json_is_named(tmp_path):
    "resume says the folder's config.json is not JSON (guards the message's 'is not')."
    train(tiny(epochs=1), tmp_path)
    (tmp_path / 'config.json').write_bytes(b'\x80 not json')
    with pytest.raises(ValueError, match=r'config\.json is not a JSON table of settings'):
        resume(tmp_path)

def test_a_state_without_world_size_is_read_as_one_process():
    "A state without world_size is one process's (guards the default 1 of state.get)."
    trainer = Trainer(tiny())
    trainer.train_step()
    state = trainer.state_dict()
    del state['world_size']
    other = Trainer(tiny())
    other.load_state_dict(state)
    assert other.step == 1

# --- Fashion-MNIST (issue 27) ----------------------------------------------------------------------------------------

from contrastive_nb.augment import augment_batch
from contrastive_nb.data import FASHION_MNIST_ROOT, load_fashion_mnist, write_fashion_mnist_fixture
from contrastive_nb.datasets import RECIPES, recipe
from contrastive_nb.training import TRAIN_POLICY

def test_fashion_mnist_is_registered_and_split_like_the_others(tmp_path):
    root = str(write_fashion_mnist_fixture(tmp_path, n=50, seed=2))
    splits = load_datasets(tiny(dataset='fashion_mnist', data_root=root, n_train=0, n_test=0, val_fraction=0.2))
    assert 'fashion_mnist' in DATASETS and [len(splits[s]) for s in ('train', 'val', 'test')] == [40, 10, 50]
    raw_train, raw_test = load_fashion_mnist(root), load_fashion_mnist(root, train=False)
    for name in ('train', 'val'):  # carved from the training file, grey repeated on three channels
        ds = splits[name]
        assert ds.images.shape[1:] == (3, 28, 28) and ds.name == 'fashion_mnist'
        assert torch.equal(ds.images[:, 1], ds.images[:, 0]) and torch.equal(ds.images[:, 2], ds.images[:, 0])
    both = torch.cat([splits['train'].images[:, 0], splits['val'].images[:, 0]])
    assert sorted(map(bytes, both.numpy())) == sorted(map(bytes, raw_train.images[:, 0].numpy()))  # a partition
    assert torch.equal(splits['test'].images[:, 0], raw_test.images[:, 0]) and torch.equal(splits['test'].labels,
                                                                                         raw_test.labels)
    first = load_datasets(tiny(dataset='fashion_mnist', data_root=root, n_train=20, n_test=7, val_fraction=0.2))
    assert torch.equal(first['test'].images[:, 0], raw_test.images[:7, 0]) and len(first['train']) == 16
    assert list(splits['test'].classes)[0] == 'T-shirt/top'

def test_fashion_mnist_needs_no_data_root_and_explains_a_missing_one(tmp_path):
    config = tiny(dataset='fashion_mnist')  # valid without data_root: the Debian folder is the default
    assert config.data_root == ''
    with pytest.raises(DatasetNotFoundError, match='apt-get install dataset-fashion-mnist'):
        Trainer(tiny(dataset='fashion_mnist', data_root=str(tmp_path)))

def test_fashion_mnist_default_recipe_is_a_grey_policy_at_28_px():
    config = TrainConfig.from_dict(recipe('default', 'fashion_mnist'))
    policy = config.augment
    assert config.dataset == 'fashion_mnist' and policy.size == 28 and config.n_train == 0 and config.n_test == 0
    assert policy.scale[0] < TRAIN_POLICY.scale[0] and policy.flip_p == 0.5  # re-tuned crops, flips
    assert policy.grayscale_p == 0 and policy.blur_p == 0 and policy.jitter_strength > 0 and policy.jitter_p > 0
    grey = torch.rand(64, 1, 28, 28, generator=torch.Generator().manual_seed(0)).expand(-1, 3, -1, -1)
    views = augment_batch(grey, policy, torch.Generator().manual_seed(1))
    # brightness and contrast change the pixels; no hue or saturation shift: views stay grey
    assert views.shape == (64, 3, 28, 28) and not torch.allclose(views, grey)
    torch.testing.assert_close(views[:, 0], views[:, 1], atol=1e-5, rtol=0)
    torch.testing.assert_close(views[:, 0], views[:, 2], atol=1e-5, rtol=0)
    for dataset in ('cifar10', 'stl10'): assert 'default' not in RECIPES[dataset]  # their runs are unchanged
    assert RECIPES['shapes']['default'] == {}

def test_fashion_mnist_run_resumes_bit_for_bit_after_a_crash(tmp_path, monkeypatch):
    root = str(write_fashion_mnist_fixture(tmp_path / 'data', n=40))
    policy = {**recipe('default', 'fashion_mnist')['augment'], 'size': 16}
    config = tiny(dataset='fashion_mnist', data_root=root, augment=policy, epochs=2, checkpoint_every=2)
    full = Trainer(config, tmp_path / 'full')
    full.fit()
    crash_at(monkeypatch, 5)
    with pytest.raises(KeyboardInterrupt): Trainer(config, tmp_path / 'crashed').fit()
    monkeypatch.undo()
    resumed = resume(tmp_path / 'crashed')
    assert same_weights(weights(resumed.method), weights(full.method)) and losses(resumed) == losses(full)
    assert all(math.isfinite(v) for v in losses(full)) and 0 <= full.report()['test_knn'] <= 1

def test_raw_pixel_baseline_reads_uint8_images_as_floats(tmp_path):
    "The report's raw-pixel kNN raised 'query_features must be floating point' on uint8 datasets (CIFAR-10, STL-10)."
    from contrastive_nb.data import as_float_images
    from contrastive_nb.evaluate import knn_accuracy
    write_cifar10_fixture(tmp_path, per_batch=10)
    trainer = Trainer(tiny(dataset='cifar10', data_root=str(tmp_path), knn_k=5))
    assert trainer.data['train'].images.dtype == torch.uint8
    bank, test = trainer.data['train'], trainer.data['test']
    expected = knn_accuracy(as_float_images(bank.images).flatten(1), bank.labels,
                            as_float_images(test.images).flatten(1), test.labels, k=5)
    assert trainer.baselines()['raw_pixels_knn'] == pytest.approx(expected)

# --- issue 41: a path-like data_root, and baselines.json checked by its SHA-256 ------------------------------------

def test_data_root_may_be_any_path_like_and_is_saved_as_text(tmp_path):
    root = write_fashion_mnist_fixture(tmp_path / 'data', n=40)  # a Path
    config = tiny(dataset='fashion_mnist', data_root=root, n_train=0, n_test=0)
    assert config.data_root == str(root) and isinstance(config.data_root, str)
    assert TrainConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert len(Trainer(config).data['test']) == 40
    with pytest.raises(TypeError, match='data_root must be a string or a path, got bytes'):
        tiny(data_root=bytes(root))

@pytest.mark.parametrize('name', ['embed_dim', 'head_hidden', 'n_train', 'warmup_epochs'])
def test_a_count_beyond_torchs_64_bits_is_refused_by_name_from_python_and_from_a_dict(name):
    "embed_dim=2**70 reached torch.empty: 'Overflow when unpacking long long', in C++'s words."
    for make in (lambda: tiny(**{name: 2 ** 70}), lambda: TrainConfig.from_dict({name: 2 ** 70})):
        with pytest.raises(ValueError, match=f"{name} must fit in torch's 64-bit integers"): make()
    config = tiny(seed=2 ** 64 - 1, data_seed=2 ** 64 - 1)  # a seed takes all of torch's range
    assert config.seed == config.data_seed == 2 ** 64 - 1
    with pytest.raises(ValueError, match=r'seed must lie in \[0, 18446744073709551615\]'): tiny(seed=2 ** 64)

def test_an_edited_baselines_json_is_measured_again_not_trusted(tmp_path):
    config = tiny(epochs=1)
    measured = train(config, tmp_path).baselines()
    path = tmp_path / 'baselines.json'
    saved = json.loads(path.read_text())
    edited = 1.0 if measured['untrained_knn'] < 0.9 else 0.0  # plausible, and not what was measured
    for damage in ({**saved, 'test': {**saved['test'], 'untrained_knn': edited}},  # a number typed in
                   {**saved, 'test': {**saved['test'], 'untrained_knn': edited}, 'sha256': '0' * 64},
                   {k: v for k, v in saved.items() if k != 'sha256'}):  # a file from before the checksum
        path.write_text(json.dumps(damage))
        assert Trainer(config, tmp_path).baselines() == pytest.approx(measured), damage
        reads = Trainer(config, tmp_path)
        reads._measure_context = None  # written again with its checksum: now read, not measured
        assert reads.baselines() == pytest.approx(measured)
