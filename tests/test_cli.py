"""The command line through real subprocesses: --help, a tiny run, a SIGKILL mid-epoch then --resume with bit-identical
weights, a corrupt checkpoint, and bad settings refused with one clear line before any work."""
import dataclasses
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import ROOT
from contrastive_nb.cli import build_parser, main, option_help, read_config_file
from contrastive_nb.methods import method_names, method_spec
from contrastive_nb.runs import latest_checkpoint
from contrastive_nb.training import TRAIN_POLICY, TrainConfig

TINY = ['--n-train', '60', '--n-test', '16', '--augment.size', '16', '--width', '4', '--blocks', '2',
        '--head-hidden', '16', '--embed-dim', '8', '--batch-size', '8', '--epochs', '2', '--threads', '1',
        '--progress', 'false']

def env() -> dict:
    return {**os.environ, 'PYTHONPATH': str(ROOT), 'OMP_NUM_THREADS': '1'}

def cli(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'contrastive_nb.cli', *map(str, args)], cwd=cwd, env=env(),
                          capture_output=True, text=True, timeout=300)

def final_weights(run_dir) -> dict:
    return torch.load(latest_checkpoint(run_dir), weights_only=True)['loop']['method']

def train_until_killed(args: list, run_dir: str, cwd) -> None:
    "`contrastive-nb train ARGS --run-dir RUN_DIR` in a process SIGKILLed as soon as its first checkpoint exists."
    proc = subprocess.Popen([sys.executable, '-m', 'contrastive_nb.cli', 'train', *args, '--run-dir', run_dir],
                            cwd=cwd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while latest_checkpoint(cwd / run_dir) is None and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"

@pytest.mark.slow
def test_version(tmp_path):
    from contrastive_nb import __version__
    out = cli('--version', cwd=tmp_path)
    assert out.returncode == 0 and out.stdout == f"contrastive-nb {__version__}\n"

def test_help_lists_every_setting_with_its_default(tmp_path):
    def shows_defaults(text: str, settings: list[tuple[str, object]]) -> None:
        for option, default in settings:
            assert option in text, option
            default = str(default).lower() if isinstance(default, bool) else repr(default)
            # its help entry: not the usage's [--x X], nor another option's help that mentions it
            entry = re.search(rf'(?<!\[){re.escape(option)} (INT|FLOAT|TEXT|BOOL)\b', text)
            assert entry, option
            after = text[entry.start():]
            assert f"(default: {default})" in after[:400], f"{option} does not show its default {default}"
    def flag(name: str, table: str = '') -> str: return '--' + (f'{table}.' if table else '') + name.replace('_', '-')
    out = cli('train', '--help', cwd=tmp_path)
    assert out.returncode == 0
    text = ' '.join(out.stdout.split())  # argparse wraps lines
    tables = ('augment', 'options')  # not options themselves: one option per setting of each
    shows_defaults(text, [(flag(f.name), f.default) for f in dataclasses.fields(TrainConfig) if f.name not in tables])
    shows_defaults(text, [(flag(f.name, 'augment'), getattr(TRAIN_POLICY, f.name))
                          for f in dataclasses.fields(TRAIN_POLICY)])
    assert "(default: (0.3, 1.0))" in text  # a tuple: lesson 03's crops of Shapes
    shows_defaults(text, list({flag(k, 'options'): v for k, v in method_spec('simclr').options().to_dict().items()}
                              .items()))
    for word in ('--config', '--resume', '--run-dir'): assert word in text
    assert ', '.join(method_names()) in text  # every method by name
    assert option_help()['method'].startswith('a registered method')
    assert '--options.queue-size' not in text  # another method's option
    moco = ' '.join(cli('train', '--method', 'moco', '--help', cwd=tmp_path).stdout.split())
    shows_defaults(moco, [(flag(k, 'options'), v) for k, v in method_spec('moco').options().to_dict().items()])
    assert "options of method 'moco'" in moco and '--options.chunk-size' not in moco
    top = cli('--help', cwd=tmp_path).stdout
    assert 'train' in top and 'evaluate' in top

@pytest.mark.slow
def test_a_tiny_run_writes_its_folder_and_evaluate_reads_it(tmp_path):
    out = cli('train', *TINY, '--method', 'moco', '--options.queue-size', '16', '--run-dir', 'run', cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    run = tmp_path / 'run'
    written = {'config.json', 'config.toml', 'metrics.csv', 'checkpoints', 'report.json'}
    assert {p.name for p in run.iterdir()} >= written
    assert report == json.loads((run / 'report.json').read_text()) and report['step'] == 12
    saved = json.loads((run / 'config.json').read_text())
    assert saved['method'] == 'moco' and saved['options']['queue_size'] == 16 and saved['augment']['size'] == 16
    assert len((run / 'metrics.csv').read_text().splitlines()) == 13
    out = cli('evaluate', 'run', '--device', 'cpu', cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    evaluation = json.loads(out.stdout)
    assert evaluation['test_knn'] == pytest.approx(report['test_knn'])
    assert evaluation['val_knn'] == pytest.approx(report['val_knn'])

@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_gives_bit_identical_weights(tmp_path):
    # 200 images: 160 train at a batch of 16 = 10 steps per epoch; checkpoints every 7 steps are all mid-epoch
    args = [*TINY, '--n-train', '200', '--width', '8', '--batch-size', '16', '--epochs', '4',
            '--checkpoint-every', '7', '--knn-every', '2']
    assert cli('train', *args, '--run-dir', 'whole', cwd=tmp_path).returncode == 0
    train_until_killed(args, 'killed', tmp_path)
    state = torch.load(latest_checkpoint(tmp_path / 'killed'), weights_only=True)
    assert state['loop']['step'] % 10 != 0 and state['loop']['step'] < 40  # killed mid-epoch, mid-run
    assert not (tmp_path / 'killed' / 'report.json').exists()
    out = cli('train', '--resume', 'killed', cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    whole, resumed = final_weights(tmp_path / 'whole'), final_weights(tmp_path / 'killed')
    assert whole.keys() == resumed.keys()
    assert all(torch.equal(whole[k], resumed[k]) for k in whole), "resumed weights differ from the uninterrupted run"
    losses = lambda run: [line.split(',')[2] for line in (tmp_path / run / 'metrics.csv').read_text().splitlines()]
    assert losses('whole') == losses('killed')

@pytest.mark.slow
def test_a_truncated_checkpoint_is_named_and_the_previous_one_still_resumes(tmp_path):
    assert cli('train', *TINY, '--checkpoint-every', '5', '--run-dir', 'run', cwd=tmp_path).returncode == 0
    newest = latest_checkpoint(tmp_path / 'run')
    newest.write_bytes(newest.read_bytes()[:2048])
    out = cli('train', '--resume', 'run', cwd=tmp_path)
    assert out.returncode == 2 and 'Traceback' not in out.stderr
    assert newest.name in out.stderr and 'step-00000010.pt is intact' in out.stderr
    newest.rename(tmp_path / 'damaged.pt')
    out = cli('train', '--resume', 'run', cwd=tmp_path)  # from step 10 to the end again
    assert out.returncode == 0, out.stderr

BAD_SETTINGS = [
    (['--method', 'dino'], "method must be one of"),
    (['--batch-size', '1'], "batch_size must be at least 2"),
    (['--dataset', 'cifar10', '--data-root', 'no/such/folder'], "CIFAR-10 was not found"),
    (['--options.temperature', '0'], "temperature must be a finite number in (0"),
    (['--method', 'moco', '--options.symmetric', 'true', '--options.bn-splits', '0'], "bn_splits"),
    (['--augment.scale', '0.5', '2.0'], "scale[1]"),
]

@pytest.mark.slow
def test_a_bad_setting_fails_in_one_line_from_the_shell(tmp_path):
    "The command as a user types it (one case: the rest run in-process, below, through the same `main`)."
    args, message = BAD_SETTINGS[0]
    out = cli('train', *args, '--run-dir', 'run', cwd=tmp_path)
    assert out.returncode == 2 and message in out.stderr
    assert 'Traceback' not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / 'run').exists()

# --- in-process: the same parser and errors, faster --------------------------------------------------------------

def run_main(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err

@pytest.mark.parametrize('args,message', BAD_SETTINGS)
def test_bad_settings_fail_in_one_line_before_any_work(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, 'train', *args, '--run-dir', 'run')
    assert code == 2 and message in err
    assert 'Traceback' not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / 'run').exists()

@pytest.mark.parametrize('toml,message', [
    ('[options]\ntemperature = 0.0\n', 'temperature must be a finite number in (0'),
    ('[options]\ntemperature = -1\n', 'temperature'),
    ('[options]\nqueue_size = 16\n', "unknown setting(s) ['queue_size'] for SimCLROptions; its settings are"),
    ('method = "moco"\n[options]\nk = 16\n', "unknown setting(s) ['k'] for MoCoOptions"),
    ('method = "moco"\n[options]\nsymmetric = 1\n', "symmetric must be True or False"),
    ('options = 0.5\n', 'options must be a SimCLROptions'),
    ('[augment]\nscale = [0.5]\n', 'scale must be a (low, high) pair'),
    ('[augment]\nsise = 16\n', "unknown setting(s) ['sise'] for AugmentationPolicy"),
    ('temperature = 0.2\n', "unknown setting(s) ['temperature']"),  # the flat names of before are refused
    ('image_size = 16\n', "unknown setting(s) ['image_size']"),
    ('batch_size = "big"\n', 'batch_size must be an int'),
    ('epochs = 2.5\n', 'epochs must be an int'),
    ('dataset = "imagenet"\n', 'dataset must be one of'),
    ('learning_rate = 0.1\n', "unknown setting(s) ['learning_rate']"),
    ('batch_size = \n', 'is not valid TOML'),
])
def test_bad_config_files_give_one_clear_error(tmp_path, capsys, monkeypatch, toml, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'c.toml').write_text(toml)
    code, _, err = run_main(capsys, 'train', '--config', 'c.toml')
    assert code == 2 and message in err and not (tmp_path / 'runs').exists()
    assert len(err.strip().splitlines()) == 1, err

def test_a_methods_unknown_option_or_bad_value_on_the_command_line_is_refused_before_any_work(
        tmp_path, capsys, monkeypatch):
    from contrastive_nb import training
    def boom(config): raise AssertionError('the data was loaded before the error')
    monkeypatch.setattr(training, 'load_datasets', boom)
    monkeypatch.chdir(tmp_path)
    for args, message in [(['--options.temperature', '-1'], 'temperature must be a finite number in (0'),
                          (['--method', 'memory_bank', '--options.k', '0'], 'k must lie in [1'),
                          (['--method', 'hcl', '--options.beta', 'nan'], 'beta must be a finite number'),
                          (['--augment.blur-p', '1.5'], 'blur_p')]:
        code, _, err = run_main(capsys, 'train', *args)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (args, err)
        assert err.startswith('contrastive-nb train: error: ')
    # another method's option, or a typo: argparse's usage line and its error, exit 2
    for args, unknown in [(['--options.queue-size', '16'], '--options.queue-size 16'),
                          (['--method', 'moco', '--options.k', '16'], '--options.k 16'),
                          (['--image-size', '16'], '--image-size 16')]:
        with pytest.raises(SystemExit) as info: main(['train', *args])
        err = capsys.readouterr().err
        assert info.value.code == 2 and f'unrecognized arguments: {unknown}' in err, err
        assert 'Traceback' not in err and len(err.strip().splitlines()) <= 2
    code, _, err = run_main(capsys, 'train', '--method', 'dino', '--options.temperature', '0.1')
    assert code == 2 and 'method must be one of' in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / 'runs').exists()

def test_options_override_the_config_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'c.toml').write_text('method = "debiased"\nepochs = 3\nlr = 1\n[options]\ntemperature = 0.3\n'
                                     'tau_plus = 0.2\n[augment]\nblur_p = 0.0\nsize = 8\n')
    code, out, err = run_main(capsys, 'train', '--config', 'c.toml', *TINY, '--options.tau-plus', '0.15',
                              '--augment.scale', '0.2', '0.9', '--run-dir', 'r')
    assert code == 0, err
    saved = json.loads((tmp_path / 'r' / 'config.json').read_text())
    assert saved['method'] == 'debiased' and saved['epochs'] == 2 and saved['lr'] == 1.0
    # table by table: the file's other settings of [options] and [augment] stay, the options' win
    assert saved['options'] == {'temperature': 0.3, 'tau_plus': 0.15}
    assert (saved['augment']['blur_p'], saved['augment']['size'], saved['augment']['scale']) == (0.0, 16, [0.2, 0.9])
    assert read_config_file(tmp_path / 'r' / 'config.toml') == saved  # the saved TOML reads back
    code, _, err = run_main(capsys, 'train', *TINY, '--run-dir', 'r')
    assert code == 2 and 'already holds a run' in err
    code, _, err = run_main(capsys, 'train', '--resume', 'r', '--lr', '0.5')
    assert code == 2 and '--resume continues a run with its saved settings' in err and "['lr']" in err

def test_missing_config_and_run_folders(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, 'train', '--config', 'none.toml')
    assert code == 2 and 'none.toml does not exist' in err
    code, _, err = run_main(capsys, 'evaluate', 'nowhere')
    assert code == 2 and 'holds no checkpoint' in err
    code, _, err = run_main(capsys, 'train', '--resume', 'nowhere')
    assert code == 2 and 'holds no checkpoint' in err

def test_toml_on_python_310_is_read_with_tomli(tmp_path):
    "Python 3.10 has no tomllib: the package (its recipes) and --config read TOML with tomli."
    import tomllib  # stands in for tomli, which has the same interface
    (tmp_path / 'c.toml').write_text('epochs = 3\n')
    code = ("import sys, tomllib; sys.modules['tomli'] = tomllib; sys.modules['tomllib'] = None\n"
            "from contrastive_nb.cli import read_config_file\n"
            "from contrastive_nb.datasets import RECIPES\n"
            f"print(read_config_file({str(tmp_path / 'c.toml')!r}), sorted(RECIPES))")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("{'epochs': 3} ['")
    requires = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['dependencies']
    assert any(r.startswith('tomli') and "python_version < '3.11'" in r for r in requires)

def test_bool_options_and_a_wrong_type_on_the_command_line(capsys):
    parser = build_parser()
    assert parser.parse_args(['train', '--channels-last', 'yes']).channels_last is True
    with pytest.raises(SystemExit) as info: parser.parse_args(['train', '--channels-last', 'maybe'])
    assert info.value.code == 2 and 'expected true or false' in capsys.readouterr().err
    args = build_parser('moco').parse_args(['train', '--options.symmetric', 'yes', '--options.queue-size', '32',
                                            '--augment.scale', '0.1', '0.8'])
    assert vars(args)['options.symmetric'] is True and vars(args)['options.queue_size'] == 32
    assert vars(args)['augment.scale'] == [0.1, 0.8]
    for bad, why in [(['--options.queue-size', '1.5'], "invalid int value: '1.5'"),
                     (['--augment.scale', '0.1'], 'expected 2 arguments')]:
        with pytest.raises(SystemExit) as info: build_parser('moco').parse_args(['train', *bad])
        assert info.value.code == 2 and why in capsys.readouterr().err

# --- issue 23: damaged checkpoints, mixed run folders, bad output folders, binary config files ------------------

def test_a_flipped_bit_is_refused_by_resume_and_evaluate_naming_the_intact_one(tmp_path, capsys, monkeypatch):
    from test_training import flip_a_bit
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, 'train', *TINY, '--checkpoint-every', '5', '--run-dir', 'run')
    assert code == 0, err
    newest = latest_checkpoint(tmp_path / 'run')
    flip_a_bit(newest)
    for command in (['train', '--resume', 'run'], ['evaluate', 'run', '--device', 'cpu']):
        code, _, err = run_main(capsys, *command)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert f'{newest.name} is damaged' in err and 'CRC-32' in err and 'step-00000010.pt is intact' in err

def test_a_new_run_in_a_used_folder_gives_the_python_error(tmp_path, capsys, monkeypatch):
    from contrastive_nb.training import train
    monkeypatch.chdir(tmp_path)
    assert run_main(capsys, 'train', *TINY, '--run-dir', 'r')[0] == 0
    code, _, err = run_main(capsys, 'train', *TINY, '--lr', '0.01', '--run-dir', 'r')
    with pytest.raises(ValueError) as info: train(TrainConfig(), 'r')
    assert code == 2 and err.strip() == f'contrastive-nb train: error: {info.value}'
    assert 'already holds a run' in err

def test_resume_refuses_an_edited_config_json_naming_the_setting(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_main(capsys, 'train', *TINY, '--run-dir', 'r')[0] == 0
    saved = tmp_path / 'r' / 'config.json'
    values = json.loads(saved.read_text())
    saved.write_text(json.dumps({**values, 'options': {**values['options'], 'temperature': 0.5}}))
    code, _, err = run_main(capsys, 'train', '--resume', 'r')
    assert code == 2 and 'differ in options.temperature (0.5 vs 0.2)' in err and len(err.strip().splitlines()) == 1

@pytest.mark.parametrize('where,message', [('file', 'is a file, not a folder'),
                                           ('file/run', 'which is a file, not a folder')])
def test_a_bad_run_dir_fails_in_one_line_before_any_work(tmp_path, capsys, monkeypatch, where, message):
    from contrastive_nb import training
    def boom(config): raise AssertionError('the data was loaded before the error')
    monkeypatch.setattr(training, 'load_datasets', boom)
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'file').write_text('')
    code, _, err = run_main(capsys, 'train', *TINY, '--run-dir', where)
    assert code == 2 and message in err and f'run_dir {where} ' in err and len(err.strip().splitlines()) == 1

@pytest.mark.parametrize('name', ['c.toml', 'c.json'])
def test_a_binary_config_file_says_it_is_not_a_text_file(tmp_path, capsys, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_bytes(b'\x80\x02}q\x00(X\x05\x00\x00\x00model')  # the start of a pickle
    code, _, err = run_main(capsys, 'train', '--config', name)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f'config file {name} is not a TOML or JSON text file' in err and "codec can't decode" not in err

def test_resume_of_a_finished_run_says_so_and_epochs_extends_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_main(capsys, 'train', *TINY, '--run-dir', 'r')[0] == 0
    code, _, err = run_main(capsys, 'train', '--resume', 'r')
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert 'r holds a finished run (2 epochs)' in err and 'contrastive-nb train --resume r --epochs N' in err
    code, out, err = run_main(capsys, 'train', '--resume', 'r', '--epochs', '3')
    assert code == 0, err
    report = json.loads(out)
    assert report['step'] == 18 and report['segments'] == [[0, 2], [2, 3]]
    assert report == json.loads((tmp_path / 'r' / 'report.json').read_text())

def test_resume_with_a_config_file_or_run_dir_names_what_was_given(tmp_path, capsys, monkeypatch):
    # --resume refuses --config and --run-dir too, and its message names the one given
    monkeypatch.chdir(tmp_path)
    for extra in (['--config', 'c.toml'], ['--run-dir', 'elsewhere']):
        code, _, err = run_main(capsys, 'train', '--resume', 'r', *extra)
        assert code == 2 and f"(got ['{extra[1]}'])" in err, err

def test_evaluate_checks_its_run_folder_first(tmp_path, capsys, monkeypatch):
    # evaluate writes evaluation.json into RUN_DIR: a file there is refused as such, in one line
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'file').write_text('')
    code, _, err = run_main(capsys, 'evaluate', 'file')
    assert code == 2 and 'is a file, not a folder' in err and len(err.strip().splitlines()) == 1

def test_evaluate_reports_the_step_and_loss_of_its_checkpoint(tmp_path, capsys, monkeypatch):
    # evaluate restores the checkpoint's step and loss history, not only its weights
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_main(capsys, 'train', *TINY, '--run-dir', 'r')
    trained = json.loads(out)
    code, out, err = run_main(capsys, 'evaluate', 'r', '--device', 'cpu')
    evaluated = json.loads(out)
    assert code == 0 and evaluated['step'] == trained['step'] > 0, err
    assert math.isclose(evaluated['final_loss'], trained['final_loss'], rel_tol=1e-6)

# --- Fashion-MNIST (issue 27): its own default recipe, no other option needed ---------------------------------------

from contrastive_nb.data import FASHION_MNIST_ROOT, write_fashion_mnist_fixture
from contrastive_nb.datasets import recipe

HAVE_FASHION = (FASHION_MNIST_ROOT / 't10k-labels-idx1-ubyte.gz').is_file()

def check_fashion_run(run, out, n_train: int, n_test: int) -> None:
    "The run used Fashion-MNIST's default recipe (only the sizes changed) and finished with a report."
    assert out.returncode == 0, out.stderr
    saved = json.loads((run / 'config.json').read_text())
    expected = TrainConfig.from_dict({**recipe('default', 'fashion_mnist'), 'n_train': n_train, 'n_test': n_test})
    assert {k: v for k, v in saved.items() if k not in ('data_root', 'progress', 'threads')} == \
        {k: v for k, v in expected.to_dict().items() if k not in ('data_root', 'progress', 'threads')}
    assert saved['augment']['size'] == 28 and saved['augment']['grayscale_p'] == 0
    report = json.loads(out.stdout)
    assert report['step'] == 3 and 0 <= report['test_knn'] <= 1  # 3 epochs of one batch of 128
    assert 'training simclr on fashion_mnist' in out.stderr and 'raw pixels' in out.stderr

def test_fashion_mnist_from_a_folder_with_its_default_recipe(tmp_path):
    root = write_fashion_mnist_fixture(tmp_path / 'data', n=150)
    out = cli('train', '--dataset', 'fashion_mnist', '--data-root', root, '--run-dir', 'run', '--threads', '1',
              '--progress', 'false', cwd=tmp_path)
    check_fashion_run(tmp_path / 'run', out, n_train=0, n_test=0)  # all 150 of the fixture

@pytest.mark.skipif(not HAVE_FASHION, reason='Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)')
def test_fashion_mnist_from_debians_package_with_no_other_option_than_its_size(tmp_path):
    out = cli('train', '--dataset', 'fashion_mnist', '--n-train', '150', '--n-test', '64', '--run-dir', 'run',
              '--threads', '1', '--progress', 'false', cwd=tmp_path)
    check_fashion_run(tmp_path / 'run', out, n_train=150, n_test=64)

def test_fashion_mnist_missing_is_one_line_that_says_how_to_get_it(tmp_path):
    out = cli('train', '--dataset', 'fashion_mnist', '--data-root', tmp_path, '--progress', 'false', cwd=tmp_path)
    assert out.returncode == 2 and 'Traceback' not in out.stderr
    assert 'apt-get install dataset-fashion-mnist' in out.stderr and len(out.stderr.strip().splitlines()) == 1

def test_other_datasets_start_from_trainconfigs_defaults_without_recipe(tmp_path):
    out = cli('train', *TINY, '--dataset', 'digits', '--run-dir', 'run', cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    saved = json.loads((tmp_path / 'run' / 'config.json').read_text())
    assert saved['lr'] == TrainConfig.lr and saved['schedule'] == 'constant' and saved['augment']['scale'] == list(
        TRAIN_POLICY.scale)

# --- issue 41: recipes that take their method's options, a warm-up that fits, lambda_, checked baselines ---------

from contrastive_nb import cli as cli_module

@pytest.fixture
def built(monkeypatch):
    "The TrainConfig `train` would train, caught before any data is read (cifar10's is not on this machine)."
    made = []
    def catch(config, run_dir):
        made.append(config)
        raise ValueError('caught before any work')
    monkeypatch.setattr(cli_module, 'Trainer', catch)
    return made

def test_a_recipes_method_takes_its_options_after_recipe(tmp_path, capsys, monkeypatch, built):
    monkeypatch.chdir(tmp_path)
    argv = ['train', '--dataset', 'cifar10', '--recipe', 'lightly-moco', '--options.queue-size', '1024']
    assert vars(build_parser('moco').parse_args(argv))['options.queue_size'] == 1024
    code, _, err = run_main(capsys, *argv, '--data-root', 'data')
    assert code == 2 and 'caught before any work' in err, err
    config, = built
    assert config.method == 'moco' and config.options.queue_size == 1024
    assert config.options.momentum == 0.99 and config.batch_size == 512  # the recipe's other settings stay
    # the dataset from a --config file; --method over the recipe's (simclr has no queue)
    (tmp_path / 'c.toml').write_text('dataset = "cifar10"\ndata_root = "data"\n')
    assert run_main(capsys, 'train', '--config', 'c.toml', '--recipe', 'lightly-moco',
                    '--options.queue-size', '64')[0] == 2
    assert built[-1].options.queue_size == 64
    with pytest.raises(SystemExit):
        main(['train', '--dataset', 'cifar10', '--recipe', 'lightly-moco', '--method', 'simclr',
              '--options.queue-size', '64'])
    assert 'unrecognized arguments: --options.queue-size 64' in capsys.readouterr().err

def test_a_methods_own_recipe_comes_before_the_datasets(tmp_path, capsys, monkeypatch, built):
    "--method M --recipe best reads shapes/M.toml's best where M has one, else shapes.toml's; its options too."
    monkeypatch.chdir(tmp_path)
    for argv in (['--method', 'simsiam'], ['--method', 'hcl'], []):
        assert run_main(capsys, 'train', *argv, '--recipe', 'best')[0] == 2
    own, shared, simclr = built
    assert own == TrainConfig.from_dict(recipe('best', 'shapes', 'simsiam')) != TrainConfig.from_dict(
        {**recipe('best'), 'method': 'simsiam'})
    assert own.options.projector_bn and own.optimizer == 'sgd'  # SimSiam's own, not SimCLR's Adam
    assert shared == TrainConfig.from_dict({**recipe('best'), 'method': 'hcl'}) and shared.optimizer == 'adam'
    assert simclr == TrainConfig.from_dict(recipe('best', 'shapes', 'simclr'))
    # METHOD/NAME names the method's recipe whatever --method says; the option over the recipe's
    assert run_main(capsys, 'train', '--recipe', 'simsiam/best', '--options.projector-bn', 'false')[0] == 2
    assert built[-1].method == 'simsiam' and not built[-1].options.projector_bn and built[-1].lr == own.lr
    code, _, err = run_main(capsys, 'train', '--dataset', 'cifar10', '--method', 'simclr', '--recipe',
                            'lightly-moco')
    assert code == 2 and "'lightly-moco' is the recipe of moco" in err and len(err.strip().splitlines()) == 1

def test_a_recipe_of_another_dataset_or_of_none_is_named_before_its_options(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, 'train', '--recipe', 'lightly-moco', '--options.queue-size', '1024')
    assert code == 2 and "'lightly-moco' is a recipe of cifar10" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_main(capsys, 'train', '--dataset', 'digits', '--recipe', 'fast')
    assert code == 2 and "dataset 'digits' has no recipes" in err and len(err.strip().splitlines()) == 1

def test_a_recipes_warm_up_is_scaled_to_a_shorter_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = write_fashion_mnist_fixture(tmp_path / 'data', n=150)
    code, out, err = run_main(capsys, 'train', '--dataset', 'fashion_mnist', '--data-root', root, '--epochs', '1',
                              '--threads', '1', '--progress', 'false', '--run-dir', 'r')
    assert code == 0, err
    saved = json.loads((tmp_path / 'r' / 'config.json').read_text())
    assert saved['epochs'] == 1 and saved['warmup_epochs'] == 0 and json.loads(out)['step'] == 1
    assert err.splitlines()[0] == ("recipe default: warmup_epochs 0, not the recipe's 1: its 1 of 3 epochs, "
                                   "scaled to 1 (--warmup-epochs N sets it)")
    # warmup_epochs given too: the user's own, and the error names the flag
    code, _, err = run_main(capsys, 'train', '--dataset', 'fashion_mnist', '--data-root', root, '--epochs', '1',
                            '--warmup-epochs', '1', '--run-dir', 'r2')
    assert code == 2 and 'warmup_epochs (1) must be fewer than epochs (1)' in err and '--warmup-epochs' in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / 'r2').exists()

def test_a_warm_up_keeps_the_recipes_share_of_the_run(tmp_path, capsys, monkeypatch, built):
    monkeypatch.chdir(tmp_path)
    assert recipe('solo-learn-simclr', 'cifar10')['warmup_epochs'] == 10  # of 1000 epochs
    def scaled(*options):
        code, _, err = run_main(capsys, 'train', '--dataset', 'cifar10', '--recipe', 'solo-learn-simclr',
                                '--data-root', 'data', *options)
        assert code == 2 and 'caught before any work' in err, err
        return built[-1].warmup_epochs, 'scaled to' in err
    assert [scaled('--epochs', str(e))[0] for e in (1, 2, 100, 150, 999)] == [0, 1, 1, 2, 10]
    assert scaled('--epochs', '5') == (1, True)  # and said
    assert scaled('--epochs', '1000') == scaled('--epochs', '2000') == (10, False)  # not a shorter run
    assert scaled('--epochs', '5', '--warmup-epochs', '3') == (3, False)  # the user's own

def test_barlow_twins_lambda_is_its_own_name_on_the_command_line(tmp_path, capsys, monkeypatch, built):
    monkeypatch.chdir(tmp_path)
    parser = build_parser('barlow_twins')
    for flag in ('--options.lambda_', '--options.lambda-', '--options.lambda'):
        assert vars(parser.parse_args(['train', flag, '0.01']))['options.lambda_'] == 0.01, flag
    train_help = parser._subparsers._group_actions[0].choices['train'].format_help()
    assert '--options.lambda_ FLOAT' in train_help and '--options.lambda-' not in train_help
    assert run_main(capsys, 'train', '--method', 'barlow_twins', '--options.lambda_', '0.02')[0] == 2
    assert built[-1].options.lambda_ == 0.02

def test_evaluate_measures_an_edited_baselines_json_again(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, 'train', *TINY, '--run-dir', 'r')
    assert code == 0, err
    measured = json.loads(out)['baselines']
    path = tmp_path / 'r' / 'baselines.json'
    saved = json.loads(path.read_text())
    assert len(saved['sha256']) == 64
    edited = 1.0 if measured['untrained_knn'] < 0.9 else 0.0  # plausible, and not what was measured
    path.write_text(json.dumps({**saved, 'test': {**saved['test'], 'untrained_knn': edited}}))
    code, out, err = run_main(capsys, 'evaluate', 'r', '--device', 'cpu')
    assert code == 0, err
    assert json.loads(out)['baselines']['untrained_knn'] == pytest.approx(measured['untrained_knn'])
    assert json.loads(path.read_text())['test'] == pytest.approx(measured)  # measured again, and written again

@pytest.mark.parametrize('option', ['--resume', '--config', '--run-dir'])
def test_an_empty_path_is_refused_not_read_as_none_given(tmp_path, capsys, monkeypatch, option):
    "`--resume ''` (an unset shell variable) started a new full-size default run instead of resuming."
    from contrastive_nb import training
    def boom(config): raise AssertionError('a run started')
    monkeypatch.setattr(training, 'load_datasets', boom)
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, 'train', option, '')
    assert code == 2 and err.strip() == f'contrastive-nb train: error: {option} needs a path, got an empty one'

def test_a_warm_up_as_long_as_the_default_run_names_the_flags(tmp_path, capsys, monkeypatch):
    "warmup_epochs alone (no epochs anywhere): the error names --warmup-epochs and --epochs, as with both given."
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'c.toml').write_text('warmup_epochs = 10\n')
    for args in (['--warmup-epochs', '10'], ['--config', 'c.toml']):
        code, _, err = run_main(capsys, 'train', *args)
        assert code == 2 and err.strip() == ('contrastive-nb train: error: warmup_epochs (10) must be fewer than '
                                             'epochs (10): give a smaller --warmup-epochs, or more --epochs'), err

def test_a_methods_tuple_options_of_text_ints_or_none_are_typed_as_their_items(tmp_path, monkeypatch):
    "An empty tuple default broke the whole parser (argparse's nargs=0); a tuple of text was read as floats."
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'tup.py').write_text(
        'import dataclasses\nfrom contrastive_nb.methods import MethodOptions, TwoViewMethod\n'
        '@dataclasses.dataclass(frozen=True)\nclass O(MethodOptions):\n'
        "    names: tuple = ('a', 'b') # names\n    empty: tuple = () # nothing\n    steps: tuple = (1, 2) # steps\n"
        'class Mine(TwoViewMethod):\n    Options = O\n'
        '    def pair_loss(self, z1, z2, batch): return (z1 - z2).pow(2).mean()\n')
    args = vars(build_parser('tup.py:Mine').parse_args(['train', '--options.names', 'x', 'y', '--options.empty', '1',
                                                         '2', '3', '--options.steps', '4', '5']))
    read = (args['options.names'], args['options.empty'], args['options.steps'])
    assert read == (['x', 'y'], [1.0, 2.0, 3.0], [4, 5])
    assert all(type(v) is int for v in args['options.steps'])
    text = ' '.join(build_parser('tup.py:Mine')._subparsers._group_actions[0].choices['train'].format_help().split())
    assert '--options.names TEXT TEXT' in text and '--options.steps INT INT' in text

# --- issue 41, mutation testing of cli.py: what evaluate restores, who prints, which command joins torchrun ----------

def test_evaluate_restores_the_checkpoints_weights_and_clock_and_prints_indented_json(tmp_path, capsys, monkeypatch):
    "A deleted load_state_dict evaluated the untrained encoder; a deleted seconds reported 0."
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, 'train', *TINY, '--run-dir', 'r')
    assert code == 0, err
    trained = json.loads(out)
    assert out.startswith('{\n "method": ')  # indented one space, as the README shows
    checkpoint = latest_checkpoint(tmp_path / 'r')  # a clock that reads more than 0 on a fast machine
    state = torch.load(checkpoint, weights_only=True)
    torch.save({**state, 'loop': {**state['loop'], 'seconds': 12.34}}, checkpoint)
    seen = []
    report = cli_module.Trainer.report
    def spy(self):
        seen.append({k: v.clone() for k, v in self.method.state_dict().items()})
        return report(self)
    monkeypatch.setattr(cli_module.Trainer, 'report', spy)
    code, out, err = run_main(capsys, 'evaluate', 'r', '--device', 'cpu')
    assert code == 0, err
    saved = final_weights(tmp_path / 'r')
    assert seen and all(torch.equal(seen[-1][k], saved[k]) for k in saved)
    evaluated = json.loads(out)
    assert evaluated['seconds'] == 12.3
    assert evaluated['test_knn'] == pytest.approx(trained['test_knn'])

def test_an_interrupted_train_says_where_it_stopped_and_how_to_go_on(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    def stop(args): raise KeyboardInterrupt('at step 3 of 10')
    monkeypatch.setattr(cli_module, '_train', stop)
    code, out, err = run_main(capsys, 'train')
    assert code == 130 and out == '' and err.strip() == (
        'contrastive-nb train: interrupted at step 3 of 10, before any checkpoint: start the run again')

def test_only_train_joins_torchrun_and_a_peer_that_left_is_exit_1(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    calls = []
    monkeypatch.setattr(cli_module, '_join_torchrun', lambda: calls.append(1) or False)
    assert run_main(capsys, 'evaluate', 'missing')[0] == 2 and calls == []
    assert run_main(capsys, 'train', '--resume', '')[0] == 2 and calls == [1]
    # a process of a torchrun group whose peer is gone: exit 1, one line, the group left
    left = []
    monkeypatch.setattr(cli_module, '_join_torchrun', lambda: True)
    monkeypatch.setattr(cli_module.signal, 'signal', lambda *a: None)
    monkeypatch.setattr(cli_module.dist, 'destroy_process_group', lambda: left.append(1))
    def peer_gone(args): raise RuntimeError('Connection closed by peer')
    monkeypatch.setattr(cli_module, '_train', peer_gone)
    code, _, err = run_main(capsys, 'train')
    assert code == 1 and 'another process of the run stopped' in err and left == [1]

def test_a_command_is_required(capsys):
    with pytest.raises(SystemExit) as e: main([])
    assert e.value.code == 2 and 'required: COMMAND' in capsys.readouterr().err

def test_an_interrupted_resume_names_the_checkpoint_it_goes_on_from(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli_module, 'latest_checkpoint', lambda run: tmp_path / run / 'step_000010.pt')
    def stop(args): raise KeyboardInterrupt('at step 12 of 40')
    monkeypatch.setattr(cli_module, '_train', stop)
    code, _, err = run_main(capsys, 'train', '--resume', 'r')
    assert code == 130 and err.strip() == ('contrastive-nb train: interrupted at step 12 of 40; it goes on from its '
                                           'checkpoint step_000010.pt with: contrastive-nb train --resume r')

def test_an_interrupted_train_without_run_dir_names_the_folder_it_made(tmp_path, capsys, monkeypatch):
    "The default folder, runs/simclr-shapes-<time>, is only known once made: the resume command must name it."
    from contrastive_nb.loop import Loop
    monkeypatch.chdir(tmp_path)
    step = Loop.one_step
    def stop_at_5(self):
        if self.step == 5: raise KeyboardInterrupt
        return step(self)
    monkeypatch.setattr(Loop, 'one_step', stop_at_5)
    code, _, err = run_main(capsys, 'train', *TINY, '--checkpoint-every', '3')
    [run] = (tmp_path / 'runs').iterdir()
    assert code == 130 and run.name.startswith('simclr-shapes-')
    assert err.strip().endswith(f"it goes on from its checkpoint {latest_checkpoint(run).name} with: "
                                f"contrastive-nb train --resume {Path('runs') / run.name}"), err

def test_zero_epochs_is_refused_as_such_not_as_a_warm_up_too_long(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, 'train', '--epochs', '0', '--warmup-epochs', '0')
    assert code == 2 and err.strip() == 'contrastive-nb train: error: epochs must lie in [1, inf], got 0', err

@pytest.mark.parametrize('args', [['--meth', 'moco', '--options.queue-size', '32'], ['--meth', 'moco'],
                                  ['--rec', 'lightly-moco'], ['--opt', 'adamw']])
def test_abbreviated_options_are_refused_by_both_passes(tmp_path, capsys, monkeypatch, args):
    # the first pass (which method's options to offer) reads no abbreviations: the second must not either, or
    # `--meth moco` trains MoCo with SimCLR's options offered, and `--rec` names a recipe the first pass never saw
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info: main(['train', *args])
    err = capsys.readouterr().err
    assert info.value.code == 2 and f"contrastive-nb train: error: unrecognized arguments: {' '.join(args)}" in err
    assert not (tmp_path / 'runs').exists()
    with pytest.raises(SystemExit): build_parser('moco').parse_args(['train', *args[:2]])
    assert vars(build_parser('moco').parse_args(['train', '--method=moco']))['method'] == 'moco'  # '=' stays

def test_errors_of_a_command_carry_its_name(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, 'train', '--method', 'dino')  # the first pass's error
    assert code == 2 and err.startswith('contrastive-nb train: error: method must be one of'), err
    for argv, line in [(['train', '--image-size', '16'], 'contrastive-nb train: error: unrecognized arguments: '
                                                          '--image-size 16'),
                       (['train', '--lr', 'x'], "contrastive-nb train: error: argument --lr: invalid float value: 'x'"),
                       (['evaluate', 'r', '--method', 'dino'], 'contrastive-nb evaluate: error: unrecognized '
                                                               'arguments: --method dino')]:
        with pytest.raises(SystemExit) as info: main(argv)
        err = capsys.readouterr().err
        # argparse's usage line (train's short one, not its hundred settings) and the error
        assert info.value.code == 2 and err.strip().splitlines()[1:] == [line], err
        assert err.startswith(f'usage: contrastive-nb {argv[0]} [-h]') and len(err.strip().splitlines()) == 2, err

@pytest.mark.parametrize('size', ['10000000', str(2 ** 62)])  # 72 PB of images (no machine's), then a size overflow
def test_settings_too_large_for_memory_are_one_line_not_a_traceback(tmp_path, capsys, monkeypatch, size):
    monkeypatch.chdir(tmp_path)
    args = list(TINY)
    args[args.index('--augment.size') + 1] = size
    code, _, err = run_main(capsys, 'train', *args, '--run-dir', 'r')
    assert code == 2 and err.startswith('contrastive-nb train: error: out of memory (') and '--augment.size' in err, err
    assert len(err.strip().splitlines()) == 1 and 'Traceback' not in err

def test_out_of_memory_anywhere_is_one_line_and_another_runtime_error_stays_a_traceback(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for error in (torch.cuda.OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 GiB'), MemoryError()):
        def oom(args, error=error): raise error
        monkeypatch.setattr(cli_module, '_train', oom)
        monkeypatch.setattr(cli_module, '_evaluate', oom)
        code, _, err = run_main(capsys, 'train')
        assert code == 2 and err.startswith('contrastive-nb train: error: out of memory (') and '--n-train' in err
        assert len(err.strip().splitlines()) == 1, err
        code, _, err = run_main(capsys, 'evaluate', 'r')
        assert code == 2 and err.startswith('contrastive-nb evaluate: error: out of memory (') and '--device' in err
    def bug(args): raise RuntimeError('a bug of the trainer')
    monkeypatch.setattr(cli_module, '_train', bug)
    with pytest.raises(RuntimeError, match='a bug'): main(['train'])

def test_an_integer_beyond_torchs_64_bits_is_refused_by_the_parser(capsys):
    for option, value in [('--n-train', 10 ** 23), ('--augment.size', 2 ** 63), ('--options.chunk-size', 2 ** 63),
                          ('--seed', 2 ** 64)]:
        with pytest.raises(SystemExit) as info: main(['train', option, str(value)])
        err = capsys.readouterr().err
        assert info.value.code == 2 and f"argument {option}: {value} does not fit in torch's 64-bit integers" in err
        assert len(err.strip().splitlines()) == 2, err
    args = vars(build_parser().parse_args(['train', '--seed', str(2 ** 64 - 1), '--n-train', str(2 ** 63 - 1)]))
    assert args['seed'] == 2 ** 64 - 1 and args['n_train'] == 2 ** 63 - 1  # seeds take all of SEED_MAX
    # the lowest 64-bit integer reaches the settings' own check; one below it is the parser's to refuse
    assert build_parser().parse_args(['train', '--n-train', str(-2 ** 63)]).n_train == -2 ** 63
    with pytest.raises(SystemExit): main(['train', '--n-train', str(-2 ** 63 - 1)])
    assert f"from {-2 ** 63} to {2 ** 63 - 1}" in capsys.readouterr().err

def test_resume_refuses_device_and_threads_but_says_where_they_are_read_and_that_works(tmp_path, capsys, monkeypatch):
    # resume(run_dir, epochs, log) takes no settings: where a run goes on is the folder's config.json (lesson 09)
    monkeypatch.chdir(tmp_path)
    assert run_main(capsys, 'train', *TINY, '--run-dir', 'r')[0] == 0
    code, _, err = run_main(capsys, 'train', '--resume', 'r', '--device', 'cpu', '--threads', '2', '--epochs', '3')
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.strip().endswith(f"(got ['device', 'threads']); where it runs (device, threads) is read from "
                                f"{os.path.join('r', 'config.json')}: change it there"), err
    code, _, err = run_main(capsys, 'train', '--resume', 'r', '--lr', '0.5')  # what it learns: no such advice
    assert code == 2 and 'config.json' not in err
    saved = json.loads((tmp_path / 'r' / 'config.json').read_text())
    (tmp_path / 'r' / 'config.json').write_text(json.dumps({**saved, 'device': 'cpu', 'threads': 2}))
    code, out, err = run_main(capsys, 'train', '--resume', 'r', '--epochs', '3')
    assert code == 0 and json.loads(out)['step'] == 18, err
