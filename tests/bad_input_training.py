"""Bad-input registry of contrastive_nb.training (read by tests/test_bad_input.py)."""
import shutil
import tempfile
from pathlib import Path

import torch
from test_bad_input import Case, _mod

CONSTANTS = {'PRECISIONS', 'OPTIMIZERS', 'ENCODERS', 'TRAIN_POLICY', 'LARS_SETTINGS'}

AUGMENT = dict(size=8, scale=(0.08, 1.0), ratio=(0.75, 4 / 3), flip_p=0.5, jitter_strength=0.5, jitter_p=0.8,
               grayscale_p=0.2, blur_p=0.5, blur_sigma=(0.1, 2.0))
OPTIONS = dict(temperature=0.5, chunk_size=0)  # SimCLR's
SETTINGS = dict(method='simclr', options=OPTIONS, dataset='shapes', data_root='', n_train=24, n_test=8, data_seed=0,
                val_fraction=0.25, augment=AUGMENT, encoder='small_cnn', width=4, blocks=2, norm='batch',
                head_hidden=8, embed_dim=4, batch_size=6, epochs=1, optimizer='lars', lr=1e-3, weight_decay=1e-6,
                lars_trust=0.02, lars_clip=True, lars_exclude_bias_norm=False,
                schedule='cosine', warmup_epochs=0, device='cpu', precision='float32', channels_last=False,
                compile=False, threads=1, seed=0, knn_every=1, knn_k=5, checkpoint_every=0, progress=False)
CHOICES = ('method', 'dataset', 'encoder', 'norm', 'optimizer', 'schedule', 'device', 'precision')

def _tmp() -> Path: return Path(tempfile.mkdtemp(prefix='bad_input_training_'))

def _copy(run: Path) -> str:
    "A fresh copy of a finished run folder, to extend."
    copy = _tmp() / 'run'
    shutil.copytree(run, copy)
    return str(copy)

def cases():
    t = _mod('training')
    config = t.TrainConfig(**SETTINGS)
    run = _tmp()
    t.train(config, run)

    def extended(run_dir, epochs):
        "resume() of a fresh copy of the finished run, so that every call extends the same run."
        if run_dir == str(run):
            run_dir = str(_tmp() / 'run')
            shutil.copytree(run, run_dir)
        return t.resume(run_dir, epochs)

    def with_table(table: str):
        "A TrainConfig with one table's settings as the arguments: each is checked by the table's own class."
        return lambda **values: t.TrainConfig(**{**SETTINGS, table: values})

    return {
        'TrainConfig': [Case(t.TrainConfig, dict(SETTINGS), choices=CHOICES),
                        Case(t.TrainConfig.from_dict, dict(values=dict(SETTINGS)), 'from_dict'),
                        Case(with_table('options'), dict(OPTIONS), 'options'),
                        Case(with_table('augment'), dict(AUGMENT), 'augment'),
                        Case(lambda: t.TrainConfig(**SETTINGS).to_toml(), {}, 'to_toml')],
        'load_datasets': [Case(t.load_datasets, dict(config=config))],
        'Trainer': [Case(t.Trainer, dict(config=config, run_dir=str(_tmp()), datasets=t.load_datasets(config),
                                         monitors={'spread': lambda trainer: 1.0}))],
        'train': [Case(t.train, dict(config=config))],
        'resume': [Case(extended, dict(run_dir=str(run), epochs=2), os_errors=True),
                   Case(lambda log: t.resume(_copy(run), 2, log), dict(log=print), 'log')],
    }
