"""Ctrl-C during `contrastive-nb train` (issue 23): a real process gets SIGINT after its first checkpoint, prints one
line with the step it reached and the command that goes on (not a traceback), and that command ends with the weights
of a run never interrupted, bit for bit. Under a real two-process torchrun, Ctrl-C reaches the agent's process group;
the agent passes it on to its workers and the run ends the same way: one line, from rank 0."""
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from test_cli import TINY, cli, env, final_weights
from test_distributed_training import children
from contrastive_nb.launch import free_port
from contrastive_nb.runs import latest_checkpoint

@pytest.mark.slow
def test_sigint_prints_where_it_stopped_and_the_command_that_goes_on(tmp_path):
    # 180 training images at a batch of 16: 11 steps per epoch, 440 in all; a checkpoint every 3 steps. The steps
    # after the first checkpoint are the window for the signal: with 44 (and even 132) a fast CPU (1 thread: ~3 500
    # images/s) finished the run before the signal landed, on a loaded machine.
    args = [*TINY, '--n-train', '200', '--batch-size', '16', '--epochs', '40', '--checkpoint-every', '3']
    assert cli('train', *args, '--run-dir', 'whole', cwd=tmp_path).returncode == 0
    # SIGINT at its default in the child, as in a terminal: an ignored SIGINT is inherited across exec, and Python
    # then installs no KeyboardInterrupt handler (something earlier in the full suite left pytest ignoring it).
    proc = subprocess.Popen([sys.executable, '-m', 'contrastive_nb.cli', 'train', *args, '--run-dir', 'stopped'],
                            cwd=tmp_path, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 240
    while latest_checkpoint(tmp_path / 'stopped') is None and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, err)
    assert 'Traceback' not in err and out == ''
    line = err.strip().splitlines()[-1]  # after the 'training ... in stopped' line
    assert line.startswith('contrastive-nb train: interrupted at step ') and line.endswith(' of 440; it goes on '
        f'from its checkpoint {latest_checkpoint(tmp_path / "stopped").name} with: '
        'contrastive-nb train --resume stopped')
    assert not (tmp_path / 'stopped' / 'report.json').exists() and not list(tmp_path.rglob('*.tmp'))
    command = line.split(' with: ')[1].split()
    assert command[:2] == ['contrastive-nb', 'train']
    assert cli(*command[1:], cwd=tmp_path).returncode == 0
    whole, resumed = final_weights(tmp_path / 'whole'), final_weights(tmp_path / 'stopped')
    assert all(torch.equal(whole[k], resumed[k]) for k in whole), "resumed weights differ from the uninterrupted run"

def test_an_interrupt_before_any_checkpoint_says_to_start_again(tmp_path, capsys, monkeypatch):
    from contrastive_nb.cli import main
    from contrastive_nb.loop import Loop
    def interrupted(self): raise KeyboardInterrupt
    monkeypatch.setattr(Loop, 'one_step', interrupted)
    monkeypatch.chdir(tmp_path)
    assert main(['train', *TINY, '--run-dir', 'r']) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == 'contrastive-nb train: interrupted at step 0 of 12, before any checkpoint: start the run again'

# --- Ctrl-C to torchrun: the agent forwards it to its 2 workers (issue 23) ------------------------------------------

TWO = ['--n-train', '200', '--n-test', '16', '--augment.size', '16', '--width', '4', '--blocks', '2', '--head-hidden',
       '16', '--embed-dim', '8', '--batch-size', '16', '--epochs', '3', '--threads', '1', '--progress', 'false',
       '--method', 'simclr_global', '--norm', 'group', '--checkpoint-every', '4']  # 11 steps per epoch, 33 in all

def torchrun_env() -> dict:
    "torchrun's rendezvous on 127.0.0.1 at a free port, through its PET_ variables: the command line stays as printed."
    return {**env(), 'PET_MASTER_ADDR': '127.0.0.1', 'PET_MASTER_PORT': str(free_port())}

def start_torchrun(*args, cwd) -> subprocess.Popen:
    "`torchrun ARGS` in a session (and so a process group) of its own, as a shell starts a foreground job."
    torchrun = Path(sys.executable).with_name('torchrun')
    launcher = [str(torchrun)] if torchrun.is_file() else [sys.executable, '-m', 'torch.distributed.run']
    return subprocess.Popen([*launcher, *map(str, args)], cwd=cwd, env=torchrun_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)

def alive(pid: int) -> bool:
    try:
        with open(f'/proc/{pid}/stat') as f: return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError: return False

def stop(proc: subprocess.Popen, workers: list[int]) -> None:
    "SIGKILL whatever is left of one torchrun: its workers by their ids, then its own process group."
    for pid in {*workers, *children(proc.pid)}:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError): os.kill(pid, signal.SIGKILL)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError): os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired): proc.communicate(timeout=30)

def run_torchrun(*args, cwd, timeout: float = 300) -> tuple[int, str, str]:
    proc = start_torchrun(*args, cwd=cwd)
    try: out, err = proc.communicate(timeout=timeout)
    finally: stop(proc, [])
    return proc.returncode, out, err

def wait_for_first_checkpoint(proc, run_dir) -> list[int]:
    "The pids of the two workers, once the run has written its first checkpoint (within 240 s)."
    deadline = time.monotonic() + 240
    while latest_checkpoint(run_dir) is None and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    workers = children(proc.pid)
    assert proc.poll() is None and len(workers) == 2, "the run ended before the interrupt, or has no 2 workers"
    return workers

@pytest.mark.slow
def test_ctrl_c_to_torchrun_prints_one_line_from_rank_0_and_its_command_goes_on_bit_identically(tmp_path):
    code, out, err = run_torchrun('--nproc-per-node', '2', '-m', 'contrastive_nb.cli', 'train', *TWO,
                                  '--run-dir', 'whole', cwd=tmp_path)
    assert code == 0, err[-3000:]
    proc, workers = start_torchrun('--nproc-per-node', '2', '-m', 'contrastive_nb.cli', 'train', *TWO,
                                   '--run-dir', 'stopped', cwd=tmp_path), []
    try:
        workers = wait_for_first_checkpoint(proc, tmp_path / 'stopped')
        # Ctrl-C in a terminal: SIGINT to the foreground process group, torchrun's (its workers have sessions of
        # their own; the agent passes the signal on to them)
        os.killpg(os.getpgid(proc.pid), signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        time.sleep(0.5)
        assert not any(alive(pid) for pid in workers), "a worker outlived the interrupted torchrun"
    finally:
        stop(proc, workers)
    assert proc.returncode != 0 and out == ''  # no report: rank 0 prints one only when the run is done
    newest = latest_checkpoint(tmp_path / 'stopped')
    lines = [line for line in err.splitlines() if 'interrupted' in line]
    assert len(lines) == 1, err[-3000:]  # rank 0's, not one per worker
    step = re.fullmatch(r'contrastive-nb train: interrupted at step (\d+) of 33; it goes on from its checkpoint '
                        rf'{newest.name} with: torchrun --nproc-per-node 2 -m contrastive_nb\.cli train --resume '
                        r'stopped', lines[0])
    assert step and int(step[1]) >= int(newest.stem.removeprefix('step-')), lines[0]
    # the one traceback is torchrun's own: its agent re-raises the signal it got (torch.distributed.run's @record);
    # none comes from a worker (a gloo error of a worker whose peer left, a KeyboardInterrupt in the clean-up)
    tracebacks = err.split('Traceback (most recent call last):')[1:]
    assert len(tracebacks) <= 1, err[-3000:]
    assert all(t.strip().endswith(f'SignalException: Process {proc.pid} got signal: {int(signal.SIGINT)}')
               for t in tracebacks), err[-3000:]
    assert not re.search(r'RuntimeError|DistBackendError|KeyboardInterrupt', err), err[-3000:]
    assert not (tmp_path / 'stopped' / 'report.json').exists() and not list(tmp_path.rglob('*.tmp'))

    command = lines[0].split(' with: ')[1].split()
    assert command[0] == 'torchrun'
    code, out, err = run_torchrun(*command[1:], cwd=tmp_path)
    assert code == 0, err[-3000:]
    assert json.loads(out)['step'] == 33  # one report, rank 0's
    whole, resumed = final_weights(tmp_path / 'whole'), final_weights(tmp_path / 'stopped')
    assert all(torch.equal(whole[k], resumed[k]) for k in whole), "resumed weights differ from the uninterrupted run"
    losses = lambda run: [line.split(',')[2] for line in (tmp_path / run / 'metrics.csv').read_text().splitlines()]
    assert losses('whole') == losses('stopped')

def rank_of(pid: int) -> int:
    with open(f'/proc/{pid}/environ', 'rb') as f:
        return int(dict(v.split(b'=', 1) for v in f.read().split(b'\0') if b'=' in v)[b'RANK'])

@pytest.mark.slow
def test_a_worker_stopped_alone_leaves_one_line_from_rank_0_not_a_gloo_traceback(tmp_path):
    # rank 1 interrupted by itself (a kill -INT of its pid): rank 0's next collective fails on the closed connection
    proc, workers = start_torchrun('--nproc-per-node', '2', '-m', 'contrastive_nb.cli', 'train', *TWO,
                                   '--run-dir', 'alone', cwd=tmp_path), []
    try:
        workers = wait_for_first_checkpoint(proc, tmp_path / 'alone')
        os.kill(next(pid for pid in workers if rank_of(pid) == 1), signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        stop(proc, workers)
    assert proc.returncode != 0 and out == ''
    lines = [line for line in err.splitlines() if line.startswith('contrastive-nb train:')]
    assert lines == ['contrastive-nb train: another process of the run stopped, so this one cannot go on; it goes on '
                     f'from its checkpoint {latest_checkpoint(tmp_path / "alone").name} with: torchrun '
                     '--nproc-per-node 2 -m contrastive_nb.cli train --resume alone'], err[-3000:]
    assert not re.search(r'\[rank\d\]|RuntimeError|Connection closed', err), err[-3000:]  # no worker's traceback
    assert err.count('Traceback') == 1 and 'ChildFailedError' in err  # torchrun's own: a worker failed
