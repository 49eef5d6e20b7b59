"""Package tests for contrastive_nb.training: the config's checks, equality with the lessons' loops, every method,
checkpoints (atomic, complete, readable with weights_only) and exact in-process resume."""
import copy
import json
import math
import random
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import ROOT
from contrastive_nb.data import DatasetNotFoundError, write_cifar10_fixture, write_stl10_fixture
from contrastive_nb.infonce import train_simclr
from contrastive_nb.memory_bank import train_memory_bank
from contrastive_nb.moco import train_moco
from contrastive_nb.training import (
    DATASETS, LARS, METHODS, CheckpointError, ContrastiveMethod, TrainConfig, Trainer, TwoViewMethod, cpu_threads,
    latest_checkpoint, load_checkpoint, load_datasets, lr_factor, register_method, resume, save_checkpoint,
    select_device, train)

@pytest.fixture(autouse=True)
def one_thread():
    with cpu_threads(1): yield

def tiny(**changes) -> TrainConfig:
    "A run of a few steps on 16 px Shapes with a 4-channel CNN."
    base = dict(n_train=40, n_test=16, image_size=16, width=4, blocks=2, head_hidden=16, embed_dim=8,
                batch_size=8, epochs=2, knn_every=0, val_fraction=0.2, progress=False)
    return TrainConfig(**{**base, **changes})

def losses(trainer: Trainer) -> list[float]: return [row[2] for row in trainer.history]

def weights(module) -> dict: return {k: v.clone() for k, v in module.state_dict().items()}

def same_weights(a: dict, b: dict) -> bool: return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

# --- the lessons' loops, step for step ------------------------------------------------------------------------------

def test_simclr_equals_train_simclr():
    trainer = Trainer(tiny(method='simclr', temperature=0.3))
    encoder, head = copy.deepcopy(trainer.method.encoder), copy.deepcopy(trainer.method.head)
    trainer.fit()
    ref = train_simclr(encoder, head, trainer.images, trainer.policy, epochs=2, batch_size=8, temperature=0.3,
                       lr=1e-3, weight_decay=1e-6, seed=0, progress=False)
    assert losses(trainer) == ref.loss.tolist() and len(ref) == 8
    assert same_weights(weights(trainer.method.encoder), weights(encoder))

def test_moco_equals_train_moco_with_shuffle_bn():
    trainer = Trainer(tiny(method='moco', queue_size=24, bn_splits=2, moco_momentum=0.9, temperature=0.2))
    model = copy.deepcopy(trainer.method.model)
    trainer.fit()
    ref = train_moco(model, trainer.images, trainer.policy, epochs=2, batch_size=8, seed=0, progress=False)
    assert losses(trainer) == ref.loss.tolist()
    assert same_weights(weights(trainer.method.model), weights(model))  # key side and queue too

def test_memory_bank_equals_train_memory_bank():
    trainer = Trainer(tiny(method='memory_bank', bank_k=16, temperature=0.1, bank_momentum=0.3))
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

@pytest.mark.parametrize('method', sorted(METHODS))
def test_every_method_trains(method):
    config = tiny(method=method, bank_k=16, queue_size=16, temperature=0.2)
    trainer = Trainer(config)
    before = weights(trainer.encoder)
    report = trainer.fit()
    assert len(trainer.history) == 8 and all(math.isfinite(x) for x in losses(trainer))
    assert not same_weights(before, weights(trainer.encoder))
    assert 0 <= report['val_knn'] <= 1 and 0 <= report['test_knn'] <= 1

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

@pytest.mark.parametrize('optimizer', ['adamw', 'sgd', 'lars'])
def test_other_optimisers_train(optimizer):
    trainer = train(tiny(optimizer=optimizer, lr=0.05 if optimizer != 'adamw' else 1e-3))
    assert all(math.isfinite(x) for x in losses(trainer))

@pytest.mark.parametrize('precision', ['bfloat16', 'float16'])
def test_half_precision_on_cpu(precision):
    trainer = train(tiny(precision=precision))
    assert all(math.isfinite(x) for x in losses(trainer))
    assert trainer.scaler.is_enabled() == (precision == 'float16')
    full = train(tiny())
    assert losses(trainer)[0] == pytest.approx(losses(full)[0], rel=0.05)  # same run, rounder numbers

def test_channels_last_gives_the_same_losses_up_to_rounding():
    a, b = train(tiny(channels_last=True)), train(tiny())
    assert losses(a) == pytest.approx(losses(b), rel=1e-4)
    assert a.encoder.features[0][0].weight.is_contiguous(memory_format=torch.channels_last)

def test_chunked_loss_gives_the_same_losses_up_to_rounding():
    assert losses(train(tiny(chunk_size=3))) == pytest.approx(losses(train(tiny())), rel=1e-5)

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

def test_a_registered_method_is_trained_by_name():
    calls = []
    def build(config, encoder, head, n_train):
        def pair_loss(z1, z2, labels):
            calls.append(len(z1))
            return (z1 - z2).pow(2).mean()
        return TwoViewMethod(encoder, head, pair_loss)
    register_method('toy_alignment', build)
    try:
        with pytest.raises(ValueError, match='already registered'): register_method('toy_alignment', build)
        train(tiny(method='toy_alignment'))
        assert calls == [8] * 8
    finally:
        del METHODS['toy_alignment']
    with pytest.raises(ValueError, match='method must be one of'): tiny(method='toy_alignment')

def test_a_builder_must_return_a_contrastive_method():
    register_method('broken', lambda *args: torch.nn.Linear(2, 2))
    try:
        with pytest.raises(TypeError, match='not a ContrastiveMethod'): Trainer(tiny(method='broken'))
    finally: del METHODS['broken']
    assert issubclass(TwoViewMethod, ContrastiveMethod)

# --- config -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('changes,error,match', [
    (dict(method='simsiam'), ValueError, 'method must be one of'),
    (dict(dataset='imagenet'), ValueError, 'dataset must be one of'),
    (dict(batch_size=1), ValueError, 'batch_size must be at least 2'),
    (dict(temperature=0.0), ValueError, 'temperature'),
    (dict(temperature=-0.5), ValueError, 'temperature'),
    (dict(batch_size='256'), TypeError, 'batch_size must be an int'),
    (dict(batch_size=2.5), TypeError, 'batch_size must be an int'),
    (dict(epochs=True), TypeError, 'epochs must be an int'),
    (dict(lr='fast'), TypeError, 'lr must be a real number'),
    (dict(channels_last=1), TypeError, 'channels_last must be true or false'),
    (dict(precision='float8'), ValueError, 'precision must be one of'),
    (dict(device='tpu'), ValueError, 'device must be one of'),
    (dict(epochs=0), ValueError, 'epochs'),
    (dict(lr=math.nan), ValueError, 'lr'),
    (dict(val_fraction=1.0), ValueError, 'val_fraction'),
    (dict(warmup_epochs=2), ValueError, 'warmup_epochs'),
    (dict(method='moco', bn_splits=8), ValueError, 'bn_splits'),
    (dict(dataset='cifar10'), ValueError, 'needs data_root'),
    (dict(tau_plus=1.0), ValueError, 'tau_plus'),
    (dict(threads=-1), ValueError, 'threads'),
])
def test_bad_settings_are_refused_when_the_config_is_made(changes, error, match):
    with pytest.raises(error, match=match): tiny(**changes)

def test_config_round_trips_through_dict_json_and_toml(tmp_path):
    import tomllib
    config = tiny(method='hcl', lr=1, channels_last=True)
    assert isinstance(config.lr, float)  # an int where a float is expected is converted
    assert TrainConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert TrainConfig.from_dict(tomllib.loads(config.to_toml())) == config
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['learning_rate'\]"):
        TrainConfig.from_dict({'learning_rate': 0.1})

def test_missing_dataset_files_raise_before_training(tmp_path):
    with pytest.raises(DatasetNotFoundError, match='not found'):
        Trainer(tiny(dataset='cifar10', data_root=str(tmp_path / 'nowhere')))

def test_memory_bank_needs_enough_rows_outside_the_batch():
    with pytest.raises(ValueError, match='bank_k'): Trainer(tiny(method='memory_bank', bank_k=100))

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
    assert train(tiny(dataset='digits', image_size=8, blocks=2)).history

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
    trainer = Trainer(tiny(method='moco', queue_size=16), tmp_path)
    trainer.fit()
    state = torch.load(latest_checkpoint(tmp_path), weights_only=True)
    assert set(state) >= {'model', 'optimizer', 'scheduler', 'scaler', 'rng', 'step', 'epoch', 'config', 'order'}
    assert set(state['rng']) == {'torch', 'cuda', 'generator', 'numpy', 'python'}
    assert any(k.startswith('model.encoder_k.') for k in state['model'])  # the key encoder
    assert 'model.queue.keys' in state['model'] and state['config'] == trainer.config.to_dict()
    assert state['step'] == 8 and json.loads((tmp_path / 'config.json').read_text()) == state['config']
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
    config = tiny(method=method, epochs=3, checkpoint_every=3, bank_k=16, queue_size=16, knn_every=1,
                  schedule='cosine', warmup_epochs=1)
    full = Trainer(config, tmp_path / 'full')
    full.fit()
    crash_at = 7
    original = Trainer.train_step
    def crashing(self):
        if self.step == crash_at: raise KeyboardInterrupt
        return original(self)
    monkeypatch.setattr(Trainer, 'train_step', crashing)
    with pytest.raises(KeyboardInterrupt): Trainer(config, tmp_path / 'crashed').fit()
    monkeypatch.setattr(Trainer, 'train_step', original)
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
    assert load_checkpoint(previous)['step'] == 6

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

@pytest.mark.slow
def test_training_benchmark_runs_and_reports(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / 'benchmarks' / 'training_bench.py'), '--quick', '--seeds', '2'],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(result['runs']) == 2 and 0 <= result['mean_test_knn'] <= 1 and result['recipe']['method'] == 'simclr'
