"""Bad-input registry of contrastive_nb.training (read by tests/test_bad_input.py)."""
import shutil
import tempfile
from pathlib import Path

import torch
from test_bad_input import Case, _mod

CONSTANTS = {'DATASETS', 'PRECISIONS', 'OPTIMIZERS', 'SCHEDULES', 'ENCODERS', 'TRAIN_POLICY', 'LARS_SETTINGS',
             'RECIPES', 'RECIPE_FOLDER'}

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

    def registered(table, register):
        def call(name, replace):
            existed = name in table if isinstance(name, str) else True
            try: return register(name, lambda *args: None, replace)
            finally:
                if not existed: table.pop(name, None)
        return call

    def extended(run_dir, epochs):
        "resume() of a fresh copy of the finished run, so that every call extends the same run."
        if run_dir == str(run):
            run_dir = str(_tmp() / 'run')
            shutil.copytree(run, run_dir)
        return t.resume(run_dir, epochs)

    def lars_step(lr, momentum, weight_decay, trust, clip, exclude_bias_norm):
        w, b = torch.nn.Parameter(torch.ones(2, 2)), torch.nn.Parameter(torch.ones(2))
        w.grad, b.grad = torch.full((2, 2), 0.5), torch.full((2,), 0.5)
        t.LARS([w, b], lr, momentum, weight_decay, trust, clip, exclude_bias_norm).step()
        return torch.cat([w.detach().flatten(), b.detach()])

    def with_table(table: str):
        "A TrainConfig with one table's settings as the arguments: each is checked by the table's own class."
        return lambda **values: t.TrainConfig(**{**SETTINGS, table: values})

    return {
        'register_dataset': [Case(registered(t.DATASETS, t.register_dataset),
                                  dict(name='toy_dataset', replace=False))],
        'TrainConfig': [Case(t.TrainConfig, dict(SETTINGS), choices=CHOICES),
                        Case(t.TrainConfig.from_dict, dict(values=dict(SETTINGS)), 'from_dict'),
                        Case(with_table('options'), dict(OPTIONS), 'options'),
                        Case(with_table('augment'), dict(AUGMENT), 'augment'),
                        Case(lambda: t.TrainConfig(**SETTINGS).to_toml(), {}, 'to_toml')],
        'load_datasets': [Case(t.load_datasets, dict(config=config))],
        'lr_factor': [Case(t.lr_factor, dict(step=3, total=10, warmup=2, schedule='cosine'), choices=('schedule',))],
        'LARS': [Case(lars_step, dict(lr=0.1, momentum=0.9, weight_decay=1e-4, trust=1e-3, clip=True,
                                     exclude_bias_norm=False))],
        'Processes': [Case(lambda parameters, world_size: t.Processes(parameters, world_size).world_size,
                           dict(parameters=[torch.nn.Parameter(torch.ones(2))], world_size=2))],
        'Trainer': [Case(t.Trainer, dict(config=config, run_dir=str(_tmp()), datasets=t.load_datasets(config),
                                         monitors={'spread': lambda trainer: 1.0}))],
        'train': [Case(t.train, dict(config=config))],
        'resume': [Case(extended, dict(run_dir=str(run), epochs=2), os_errors=True),
                   Case(lambda log: t.resume(_copy(run), 2, log), dict(log=print), 'log')],
        'read_recipes': [Case(lambda folder: list(t.read_recipes(folder)), dict(folder=str(t.RECIPE_FOLDER)),
                              os_errors=True)],
        'recipe': [Case(t.recipe, dict(name='fast', dataset='shapes'), choices=('dataset', 'name'))],
        'format_seconds': [Case(t.format_seconds, dict(seconds=187.0))],
    }
