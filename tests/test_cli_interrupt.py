"""Ctrl-C during `contrastive-nb train` (issue 23): a real process gets SIGINT after its first checkpoint, prints one
line with the step it reached and the command that goes on (not a traceback), and that command ends with the weights
of a run never interrupted, bit for bit."""
import signal
import subprocess
import sys
import time

import pytest
import torch

from test_cli import TINY, cli, env, final_weights
from contrastive_nb.training import latest_checkpoint

@pytest.mark.slow
def test_sigint_prints_where_it_stopped_and_the_command_that_goes_on(tmp_path):
    # 180 training images at a batch of 16: 11 steps per epoch, 44 in all; a checkpoint every 3 steps
    args = [*TINY, '--n-train', '200', '--batch-size', '16', '--epochs', '4', '--checkpoint-every', '3']
    assert cli('train', *args, '--run-dir', 'whole', cwd=tmp_path).returncode == 0
    proc = subprocess.Popen([sys.executable, '-m', 'contrastive_nb.cli', 'train', *args, '--run-dir', 'stopped'],
                            cwd=tmp_path, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while latest_checkpoint(tmp_path / 'stopped') is None and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, err)
    assert 'Traceback' not in err and out == ''
    line = err.strip().splitlines()[-1]  # after the 'training ... in stopped' line
    assert line.startswith('contrastive-nb train: interrupted at step ') and line.endswith(' of 44; it goes on '
        f'from its checkpoint {latest_checkpoint(tmp_path / "stopped").name} with: contrastive-nb train --resume stopped')
    assert not (tmp_path / 'stopped' / 'report.json').exists() and not list(tmp_path.rglob('*.tmp'))
    command = line.split(' with: ')[1].split()
    assert command[:2] == ['contrastive-nb', 'train']
    assert cli(*command[1:], cwd=tmp_path).returncode == 0
    whole, resumed = final_weights(tmp_path / 'whole'), final_weights(tmp_path / 'stopped')
    assert all(torch.equal(whole[k], resumed[k]) for k in whole), "resumed weights differ from the uninterrupted run"

def test_an_interrupt_before_any_checkpoint_says_to_start_again(tmp_path, capsys, monkeypatch):
    from contrastive_nb import training
    from contrastive_nb.cli import main
    def interrupted(self): raise KeyboardInterrupt
    monkeypatch.setattr(training.Trainer, 'train_step', interrupted)
    monkeypatch.chdir(tmp_path)
    assert main(['train', *TINY, '--run-dir', 'r']) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == 'contrastive-nb train: interrupted at step 0 of 12, before any checkpoint: start the run again'
