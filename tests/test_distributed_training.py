"""Lesson 09's trainer and the command line on 2 real gloo processes (lesson 10's `simclr_global` plugged in).

In-process checks start 2 processes with `launch` (127.0.0.1, a free port, timeouts on every collective, processes
killed by id); the command-line checks run `torchrun`, its workers killed by their ids."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from conftest import ROOT
from contrastive_nb.infonce import nt_xent
from contrastive_nb.launch import Processes, free_port, launch, world
from contrastive_nb.runs import latest_checkpoint
from contrastive_nb.training import TrainConfig, Trainer

TINY = dict(n_train=64, n_test=16, augment={'size': 16}, width=4, blocks=2, head_hidden=16, embed_dim=8, batch_size=8,
            epochs=1, knn_every=0, progress=False, threads=1, norm='group', method='simclr_global')

# --- workers, run in each of the 2 processes -------------------------------------------------------------------------

def _one_backward(trainer: Trainer) -> tuple:
    "The first step of the loop up to the averaged gradients: this process's views and the gradients."
    loop = trainer.loop
    loop.batch = loop.data.batch(0)
    trainer.optimizer.zero_grad(set_to_none=True)
    loop.loss = trainer.method.loss_backward(loop.batch)
    for cb in loop.callbacks:  # the processes average the gradients here
        if isinstance(cb, Processes): cb.after_backward(loop)
    grads = [p.grad.clone() for p in trainer.method.parameters_to_train()]
    return loop.batch.views, grads, loop.loss.item()

def _trainer_checks() -> dict:
    out = {'world': world()}
    views, grads, loss = _one_backward(Trainer(TrainConfig(**TINY)))
    out['views'], out['grads'], out['loss'] = views, grads, loss
    runs = {}
    for chunk in (0, 3):
        trainer = Trainer(TrainConfig(**{**TINY, 'options': {'grad_cache_chunk': chunk}, 'epochs': 2}))
        assert trainer.method.options.grad_cache_chunk == chunk
        runs[chunk] = {'losses': [trainer.train_step() for _ in range(6)],
                       'weights': {k: v.clone() for k, v in trainer.method.state_dict().items()}}
    out['runs'] = runs
    out['view_state'] = trainer.view_generator.get_state()
    out['local_batch'] = trainer.local_batch
    return out

REFUSED = [  # settings that cannot run in two processes, and what each process must say
    (dict(method='moco', options={'queue_size': 16}), "keeps a queue of keys that each of the 2 processes"),
    (dict(method='memory_bank', options={'k': 8}), "keeps a memory bank"),
    (dict(batch_size=9), r"batch_size \(9\) is the global batch"),
    (dict(batch_size=2), r"batch_size \(2\) is the global batch"),
]

def _refusals() -> list[str]:
    "Each refused setting's error in this process ('' if it was not refused): one start-up for all."
    messages = []
    for changes, _ in REFUSED:
        try: Trainer(TrainConfig(**{**TINY, **changes}))
        except ValueError as e: messages.append(str(e))
        else: messages.append('')
    return messages

@pytest.fixture(scope='module')
def two():
    return launch(_trainer_checks, 2, timeout=120)

def test_the_global_batch_is_split_and_views_differ_per_process(two):
    assert [r['world'] for r in two] == [(2, 0), (2, 1)] and all(r['local_batch'] == 4 for r in two)
    assert not torch.equal(two[0]['view_state'], two[1]['view_state'])  # one augmentation generator per process
    assert not torch.equal(two[0]['views'][0], two[1]['views'][0])

def test_averaged_gradients_equal_one_process_on_the_global_batch(two):
    # the same weights in one process (same seed), NT-Xent of the concatenated views of both processes
    trainer = Trainer(TrainConfig(**TINY))
    method = trainer.method
    v1, v2 = (torch.cat([r['views'][i] for r in two]) for i in range(2))
    z1, z2 = (method.embed(method.encoder, method.head, v) for v in (v1, v2))
    loss = nt_xent(z1, z2, temperature=trainer.config.options.temperature)
    grads = torch.autograd.grad(loss, trainer.method.parameters_to_train())
    assert two[0]['loss'] == pytest.approx(loss.item(), rel=1e-5) and two[1]['loss'] == two[0]['loss']
    for g, a, b in zip(grads, two[0]['grads'], two[1]['grads']):
        assert torch.equal(a, b)  # every process takes the same step
        torch.testing.assert_close(a, g, rtol=1e-4, atol=1e-6)

def test_processes_stay_in_step_and_gradient_caching_gives_the_plain_losses(two):
    for chunk in (0, 3):
        a, b = (r['runs'][chunk] for r in two)
        assert a['losses'] == b['losses']
        for k in a['weights']: assert torch.equal(a['weights'][k], b['weights'][k]), k
    plain, cached = two[0]['runs'][0], two[0]['runs'][3]
    torch.testing.assert_close(torch.tensor(cached['losses']), torch.tensor(plain['losses']), rtol=1e-4, atol=0)
    for k in plain['weights']:
        torch.testing.assert_close(cached['weights'][k], plain['weights'][k], rtol=1e-3, atol=1e-5)

@pytest.fixture(scope='module')
def refusals():
    return launch(_refusals, 2, timeout=120)

@pytest.mark.parametrize('case', range(len(REFUSED)), ids=lambda k: REFUSED[k][1][:24])
def test_what_cannot_run_in_two_processes_is_refused_in_every_process(refusals, case):
    message = REFUSED[case][1]
    for rank, messages in enumerate(refusals):
        assert re.search(message, messages[case]), (rank, messages[case])

def test_gradient_caching_with_batchnorm_is_refused_before_training():
    with pytest.raises(ValueError, match="gradient caching is exact only without BatchNorm"):
        Trainer(TrainConfig(**{**TINY, 'norm': 'batch', 'options': {'grad_cache_chunk': 4}}))

def test_in_one_process_simclr_global_is_simclr():
    losses = {m: [t.train_step() for t in [Trainer(TrainConfig(**{**TINY, 'method': m}))] for _ in range(3)]
              for m in ('simclr', 'simclr_global')}
    assert losses['simclr'] == losses['simclr_global']

# --- torchrun and the command line -----------------------------------------------------------------------------------

CLI = ['--n-train', '200', '--n-test', '16', '--augment.size', '16', '--width', '4', '--blocks', '2',
       '--head-hidden', '16', '--embed-dim', '8', '--batch-size', '16', '--epochs', '3', '--threads', '1',
       '--progress', 'false', '--method', 'simclr_global', '--norm', 'group', '--options.grad-cache-chunk', '3',
       '--checkpoint-every', '4']

def torchrun(*args, cwd) -> subprocess.Popen:
    command = [sys.executable, '-m', 'torch.distributed.run', '--nproc-per-node=2', '--master-addr=127.0.0.1',
               f'--master-port={free_port()}', '-m', 'contrastive_nb.cli', *map(str, args)]
    env = {**os.environ, 'PYTHONPATH': str(ROOT), 'OMP_NUM_THREADS': '1'}
    return subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)

def children(pid: int) -> list[int]:
    "Process ids whose parent is `pid` (torchrun starts its workers in sessions of their own)."
    found = []
    for entry in os.listdir('/proc'):
        try:
            with open(f'/proc/{entry}/stat') as f: fields = f.read().rsplit(')', 1)[1].split()
        except (OSError, IndexError): continue
        if entry.isdigit() and int(fields[1]) == pid: found.append(int(entry))
    return found

def kill_all(proc: subprocess.Popen) -> None:
    "SIGKILL torchrun's workers, then torchrun itself, each by its process id: a machine that dies."
    for pid in children(proc.pid):
        try: os.kill(pid, signal.SIGKILL)
        except ProcessLookupError: pass
    os.killpg(proc.pid, signal.SIGKILL)

def finish(proc: subprocess.Popen, timeout: float = 240) -> tuple[int, str, str]:
    try: out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_all(proc)
        out, err = proc.communicate()
    return proc.returncode, out, err

@pytest.mark.slow
def test_torchrun_trains_writes_once_and_resumes_bit_identically_after_sigkill(tmp_path):
    code, out, err = finish(torchrun('train', *CLI, '--run-dir', 'whole', cwd=tmp_path))
    assert code == 0, err[-3000:]
    report = json.loads(out)  # one report: rank 0 prints, rank 1 does not
    assert report['step'] == 3 * 11 and report['method'] == 'simclr_global'
    assert sorted(p.name for p in (tmp_path / 'whole').iterdir()) == [
        'baselines.json', 'checkpoints', 'config.json', 'config.toml', 'metrics.csv', 'report.json']
    assert os.listdir(tmp_path) == ['whole']
    state = torch.load(latest_checkpoint(tmp_path / 'whole'), weights_only=True)
    assert state['world_size'] == 2 and state['process_rng'].shape[0] == 2

    proc = torchrun('train', *CLI, '--run-dir', 'killed', cwd=tmp_path)
    deadline = time.monotonic() + 240
    while latest_checkpoint(tmp_path / 'killed') is None and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    workers = children(proc.pid)
    assert len(workers) == 2
    kill_all(proc)
    proc.communicate()
    time.sleep(0.5)  # a worker still alive would go on writing checkpoints
    assert not any(os.path.exists(f'/proc/{pid}') and open(f'/proc/{pid}/stat').read().split()[2] != 'Z'
                   for pid in workers)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert not (tmp_path / 'killed' / 'report.json').exists()
    step = torch.load(latest_checkpoint(tmp_path / 'killed'), weights_only=True)['loop']['step']
    assert step < 33

    one = subprocess.run([sys.executable, '-m', 'contrastive_nb.cli', 'train', '--resume', 'killed'], cwd=tmp_path,
                         env={**os.environ, 'PYTHONPATH': str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert one.returncode == 2 and 'written by 2 process(es)' in one.stderr and 'Traceback' not in one.stderr

    code, out, err = finish(torchrun('train', '--resume', 'killed', cwd=tmp_path))
    assert code == 0, err[-3000:]
    whole, resumed = (torch.load(latest_checkpoint(tmp_path / r), weights_only=True)['loop']['method']
                      for r in ('whole', 'killed'))
    assert all(torch.equal(whole[k], resumed[k]) for k in whole), "resumed weights differ from the uninterrupted run"
    losses = lambda run: [line.split(',')[2] for line in (tmp_path / run / 'metrics.csv').read_text().splitlines()]
    assert losses('whole') == losses('killed')
