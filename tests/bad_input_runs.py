"""Bad-input registry of the run folders tools page (contrastive_nb.runs): checkpoints, random states, the folder."""
import shutil
import tempfile
from pathlib import Path

import torch
from test_bad_input import Case, gen, _mod

CONSTANTS = {'CHECKPOINT_FORMAT', 'CheckpointError', 'RUNTIME_SETTINGS'}

def _tmp() -> Path: return Path(tempfile.mkdtemp(prefix='bad_input_runs_'))

def cases():
    r = _mod('runs')
    run = _tmp()  # a run folder with two checkpoints and its settings
    for step in (2, 4):
        r.save_in_run(run, {'loop': {}, 'step': step, 'format': r.CHECKPOINT_FORMAT}, step)
    r.write_text(run / 'config.json', '{"lr": 0.1, "device": "cpu"}')
    checkpoint = str(r.latest_checkpoint(run))
    kept, values = _tmp(), {'chance': 0.25}  # a folder with its baselines
    r.write_baselines(kept, {'seed': 0}, values)

    def saved_in_copy(run_dir, state, step):
        "save_in_run into a fresh copy of the run, so that every call sees the same folder."
        if run_dir == str(run):
            run_dir = _tmp() / 'run'
            shutil.copytree(run, run_dir)
        return r.save_in_run(run_dir, state, step).name

    def restored(state, generator):
        r.set_random_state(state, generator)
        return torch.rand(2, generator=generator)

    return {
        'save_checkpoint': [Case(r.save_checkpoint, dict(state={'model': {}, 'step': 1}, path=str(_tmp() / 'c.pt')),
                                 os_errors=True)],
        'load_checkpoint': [Case(r.load_checkpoint, dict(path=checkpoint), os_errors=True,
                                 aliases={'path': ('checkpoint',)})],
        'latest_checkpoint': [Case(r.latest_checkpoint, dict(run_dir=str(run)), os_errors=True)],
        'load_latest_checkpoint': [Case(r.load_latest_checkpoint, dict(run_dir=str(run), purpose='evaluate'),
                                        os_errors=True, choices=('purpose',))],
        'save_in_run': [Case(saved_in_copy, dict(run_dir=str(run), state={'loop': {}, 'step': 6}, step=6),
                             os_errors=True, fixed=('state',))],
        'random_state': [Case(lambda generator: r.random_state(generator)['generator'], dict(generator=gen()))],
        'set_random_state': [Case(restored, dict(state=r.random_state(gen()), generator=gen(1)),
                                  fixed=('state',), deterministic=False)],
        'setting_differences': [Case(r.setting_differences, dict(saved={'lr': 0.1, 'device': 'cpu'},
                                                                 values={'lr': 0.2}, defaults={'wd': 0.0}))],
        'saved_settings': [Case(r.saved_settings, dict(run_dir=str(run)), os_errors=True)],
        'check_same_run': [Case(r.check_same_run, dict(run_dir=str(run), settings={'lr': 0.1}, defaults=None),
                                os_errors=True, aliases={'settings': ('already holds a run',)})],
        'check_run_dir': [Case(r.check_run_dir, dict(run_dir=str(run), new=False), os_errors=True)],
        'write_text': [Case(lambda path, text: r.write_text(path, text), dict(path=str(_tmp() / 'a.txt'), text='x'),
                            os_errors=True)],
        'remove_leftovers': [Case(r.remove_leftovers, dict(run_dir=str(run)), os_errors=True)],
        'write_baselines': [Case(r.write_baselines, dict(run_dir=str(kept), settings={'seed': 0}, values=values),
                                 os_errors=True)],
        'settings_toml': [Case(r.settings_toml, dict(values={'lr': 0.1, 'augment': {'scale': (0.2, 1.0)}}))],
        'check_method_file': [Case(r.check_method_file, dict(saved={'path': 'm.py', 'sha256': 'a'},
                                                             now={'path': 'm.py', 'sha256': 'a'}))],
        'read_baselines': [Case(r.read_baselines, dict(run_dir=str(kept), settings={'seed': 0}, names=('chance',)),
                                os_errors=True)],
    }
