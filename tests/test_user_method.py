"""A method of the user's own, in a file outside the package: it trains through the Trainer and the command line,
lists and checks its options, survives a SIGKILL with a bit-identical resume, and refuses to resume from an edited
file."""
import json
import subprocess
import sys
import shlex

import pytest
import torch

from conftest import ROOT
from test_cli import cli, env, train_until_killed
from contrastive_nb.runs import latest_checkpoint
from contrastive_nb.training import TrainConfig, Trainer

EXAMPLE = ROOT / 'examples' / 'align_uniform.py'  # the README's example
METHOD = EXAMPLE.read_text()

TINY = ['--n-train', '200', '--n-test', '16', '--augment.size', '16', '--width', '8', '--blocks', '2',
        '--head-hidden', '16', '--embed-dim', '8', '--batch-size', '16', '--epochs', '4', '--threads', '1',
        '--progress', 'false', '--knn-every', '2', '--checkpoint-every', '7']

@pytest.fixture
def method_file(tmp_path):
    path = tmp_path / 'align_uniform.py'
    path.write_text(METHOD)
    return path

def test_a_method_from_a_file_trains_through_the_trainer(method_file):
    config = TrainConfig(method=f'{method_file}:AlignUniform', options={'weight': 0.5}, n_train=40, n_test=16,
                         augment={'size': 16}, width=4, blocks=2, head_hidden=16, embed_dim=8, batch_size=8,
                         epochs=1, knn_every=0, progress=False)
    trainer = Trainer(config)
    assert type(trainer.method).__name__ == 'AlignUniform' and trainer.method.options.weight == pytest.approx(0.5)
    before = [p.detach().clone() for p in trainer.method.parameters_to_train()]
    losses = [trainer.train_step() for _ in range(3)]
    assert all(torch.isfinite(torch.tensor(losses))) and len(set(losses)) == 3
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.method.parameters_to_train()))
    state = trainer.state_dict()
    assert state['method_file']['path'] == str(method_file.resolve()) and len(state['method_file']['sha256']) == 64
    with pytest.raises(ValueError, match='weight must be at least 0'):
        TrainConfig(method=f'{method_file}:AlignUniform', options={'weight': -1.0})
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['temperature'\] for AlignUniformOptions"):
        TrainConfig(method=f'{method_file}:AlignUniform', options={'temperature': 0.1})

@pytest.mark.slow
def test_help_lists_the_file_methods_options_and_bad_values_stop_in_one_line(method_file, tmp_path):
    out = cli('train', '--method', f'{method_file.name}:AlignUniform', '--help', cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = ' '.join(out.stdout.split())
    assert '--options.weight FLOAT weight of the uniformity term (default: 1.0)' in text
    assert '--options.t FLOAT' in text and '--options.temperature' not in text
    out = cli('train', '--method', f'{method_file.name}:AlignUniform', '--options.weight', '-2', *TINY,
              '--run-dir', 'bad', cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        'contrastive-nb train: error: weight must be at least 0, got -2.0']  # its own check
    assert not (tmp_path / 'bad').exists()  # refused before any work
    out = cli('train', '--method', 'missing.py:AlignUniform', cwd=tmp_path)
    assert out.returncode == 2 and 'method file missing.py does not exist' in out.stderr

@pytest.mark.slow
def test_sigkill_then_resume_is_bit_identical_and_an_edited_file_is_refused(method_file, tmp_path):
    args = ['--method', f'{method_file.name}:AlignUniform', '--options.weight', '0.5', *TINY]
    out = cli('train', *args, '--run-dir', 'whole', cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    train_until_killed(args, 'killed', tmp_path)
    state = torch.load(latest_checkpoint(tmp_path / 'killed'), weights_only=True)
    assert state['loop']['step'] < 40 and state['method_file']['path'] == str(method_file.resolve())
    assert json.loads((tmp_path / 'killed' / 'config.json').read_text())['options'] == {'weight': 0.5, 't': 2.0}
    method_file.write_text(METHOD.replace('weight: float = 1.0', 'weight: float = 2.0'))  # edited since
    out = cli('train', '--resume', 'killed', cwd=tmp_path)
    assert out.returncode == 2 and 'has changed since the run was trained' in out.stderr
    method_file.write_text(METHOD)  # restored: the run goes on
    out = cli('train', '--resume', 'killed', cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    weights = lambda run: torch.load(latest_checkpoint(tmp_path / run), weights_only=True)['loop']['method']
    whole, resumed = weights('whole'), weights('killed')
    assert whole.keys() == resumed.keys() and all(torch.equal(whole[k], resumed[k]) for k in whole)

@pytest.mark.slow
def test_the_readme_command_line_trains_the_example(tmp_path):
    "The README's own line, as a user would type it in a clone, with a tiny run's settings after it."
    line = next(l.split('#')[0] for l in (ROOT / 'README.md').read_text().splitlines()
                if 'contrastive-nb train' in l and ':AlignUniform' in l)
    words = shlex.split(line)
    assert words[:2] == ['contrastive-nb', 'train'] and 'examples/align_uniform.py:AlignUniform' in words
    out = subprocess.run([sys.executable, '-m', 'contrastive_nb.cli', *words[1:], *TINY[:-4], '--epochs', '1',
                          '--run-dir', str(tmp_path / 'run')], cwd=ROOT, env=env(), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report['method'] == 'examples/align_uniform.py:AlignUniform' and report['step'] == 180 // 16

# --- issue 41: a method file that exits or raises while it is imported ---------------------------------------------

from contrastive_nb.cli import main
from contrastive_nb.methods import method_spec

@pytest.mark.parametrize('body,words', [
    ('import sys\n\nsys.exit(3)\n', 'exits when imported (sys.exit(3), at line 3)'),
    ('exit()\n', 'exits when imported (sys.exit(None), at line 1)'),
    ('raise SystemExit("usage: method.py")\n', "exits when imported (sys.exit('usage: method.py'), at line 1)"),
    ('x = 1\nraise RuntimeError("no GPU here\\nsecond line")\n',
     'fails when run: RuntimeError: no GPU here (at line 2)'),
    ('import no_such_module_41\n', "ModuleNotFoundError: No module named 'no_such_module_41'"),
    ('raise GeneratorExit\n', 'fails when run: GeneratorExit (at line 1)'),  # no message: no empty ': '
])
def test_a_method_file_that_exits_or_raises_on_import_is_one_line_naming_it(tmp_path, capsys, monkeypatch,
                                                                            body, words):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'method.py').write_text(body)
    with pytest.raises(ValueError, match='method file method.py') as info: method_spec('method.py:Mine')
    assert words in str(info.value) and '\n' not in str(info.value)
    code = main(['train', '--method', 'method.py:Mine'])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().splitlines() == [f'contrastive-nb train: error: {info.value}']

def test_a_ctrl_c_while_a_method_file_is_imported_goes_through_and_leaves_no_half_module(tmp_path):
    (tmp_path / 'slow.py').write_text('class Mine: pass\nraise KeyboardInterrupt\n')
    for _ in range(2):  # the second time runs the file again: not a half-made module without its method
        with pytest.raises(KeyboardInterrupt): method_spec(f'{tmp_path}/slow.py:Mine')

# --- issue 41, a hostile user's method files: each refused in one line before (or at) its first step ---------------

HEAD = 'import torch\nfrom contrastive_nb.methods import TwoViewMethod\n'
TINY_ONE = [*TINY[:-4], '--epochs', '1']

@pytest.mark.parametrize('body,words', [
    ('class Mine:\n    pass\n', 'must be a ContrastiveMethod class (a subclass of'),  # was: Mine() takes no arguments
    ('class Mine(TwoViewMethod):\n    Options = dict\n', 'its Options must be a MethodOptions dataclass'),
    ('class Mine(TwoViewMethod):\n    pass\n', 'defines no loss: a TwoViewMethod defines pair_loss'),  # was a traceback
    ('class Mine(TwoViewMethod):\n    def __init__(self):\n        super().__init__()\n',
     'must be built as builder(encoder, head, options, setup)'),
    ('class Mine(TwoViewMethod):\n    def pair_loss(self, z1, z2, batch): return (z1 - z2).pow(2)\n',
     "Mine's loss must be one number computed from the networks (a scalar tensor with a gradient), got shape (16, 8)"),
    ('class Mine(TwoViewMethod):\n'
     '    def pair_loss(self, z1, z2, batch): return torch.tensor(1.0, requires_grad=True)\n',
     "reaches none of the parameters it trains"),  # was: trained nothing, silently
    ('class Mine(TwoViewMethod):\n    def pair_loss(self, z1, z2, batch): return (z1 - z2).sum() * float("nan")\n',
     "the loss is nan at step 0: lower lr, or check the loss of Mine"),  # was a FloatingPointError traceback
])
def test_a_hostile_method_file_is_one_line_not_a_traceback(tmp_path, capsys, monkeypatch, body, words):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'mine.py').write_text(HEAD + body)
    code = main(['train', '--method', 'mine.py:Mine', *TINY_ONE, '--run-dir', 'run'])
    err = capsys.readouterr().err
    assert code == 2 and words in err and 'Traceback' not in err, err
    assert err.strip().splitlines()[-1].startswith('contrastive-nb')
    assert 'half' not in err and 'float16' not in err  # a float32 run is not told to leave float16

def test_a_file_methods_default_run_folder_is_under_runs_named_by_its_stem_and_class(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'sub').mkdir()
    (tmp_path / 'sub' / 'align_uniform.py').write_text(METHOD)
    method = f"{tmp_path / 'sub' / 'align_uniform.py'}:AlignUniform"  # an absolute path
    assert main(['train', '--method', method, *TINY_ONE]) == 0, capsys.readouterr().err
    capsys.readouterr()
    runs = list((tmp_path / 'runs').iterdir())
    assert len(runs) == 1 and runs[0].name.startswith('align_uniform.AlignUniform-shapes-'), runs
    assert sorted(p.name for p in (tmp_path / 'sub').iterdir()) == ['align_uniform.py']  # nothing beside the file

def test_a_relative_method_file_name_means_the_file_in_the_current_folder(tmp_path, monkeypatch):
    "method_spec kept the first file read under a name: another folder's file of that name was never read."
    for folder, weight in (('a', '1.0'), ('b', '3.0')):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / 'align_uniform.py').write_text(METHOD.replace('weight: float = 1.0',
                                                                           f'weight: float = {weight}'))
    for folder, weight in (('a', 1.0), ('b', 3.0), ('a', 1.0)):
        monkeypatch.chdir(tmp_path / folder)
        spec = method_spec('align_uniform.py:AlignUniform')
        assert spec.options().weight == weight and spec.source == str(tmp_path / folder / 'align_uniform.py')

def test_evaluate_reads_a_file_methods_run_and_refuses_it_once_the_file_is_edited(method_file, tmp_path, capsys):
    from contrastive_nb.cli import main
    from contrastive_nb.training import train
    config = TrainConfig(method=f'{method_file}:AlignUniform', n_train=40, n_test=16, augment={'size': 16}, width=4,
                         blocks=2, head_hidden=16, embed_dim=8, batch_size=8, epochs=1, knn_every=0, progress=False)
    train(config, tmp_path / 'run')
    assert main(['evaluate', str(tmp_path / 'run'), '--device', 'cpu']) == 0  # the file as it was trained
    report = json.loads((tmp_path / 'run' / 'evaluation.json').read_text())
    assert report['checkpoint'] == str(latest_checkpoint(tmp_path / 'run')) and report['step'] > 0
    capsys.readouterr()
    method_file.write_text(METHOD.replace('weight: float = 1.0', 'weight: float = 2.0'))
    assert main(['evaluate', str(tmp_path / 'run'), '--device', 'cpu']) == 2
    err = capsys.readouterr().err
    assert 'has changed since the run was trained (sha256 ' in err and 'restore it' in err, err
