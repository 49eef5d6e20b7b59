"""Host synchronisations per SimCLR `Trainer.train_step`, and the speed of a short fixed-step run (issue 24).

    OMP_NUM_THREADS=2 python benchmarks/host_sync_bench.py              # the trainer as it is
    OMP_NUM_THREADS=2 python benchmarks/host_sync_bench.py --fast-path  # its step with value checks off

A host synchronisation is a read of a tensor's values by Python (`item`, `tolist`, `bool`, `nonzero`, `float`, `int`):
on a GPU each one waits for every queued kernel. The script counts the reads made from the package's own code
during one step (after a warm-up step), leaving out those that are on the CPU by design (augment draws its random
parameters there) and torch's own (the optimiser's step counter), then times `--steps` steps of SimCLR on 32 px
Shapes at batch 64, best of `--repeats`, and prints views per second (two views per source). `--fast-path` runs
each step as the trainer would with the checks at the door: `augment_batch(..., check_values=False)` and the step
inside `models.values_unchecked(method)`. The last line is one JSON object.
"""
import argparse, collections, contextlib, functools, json, platform, sys, time
from datetime import date
from pathlib import Path

import torch

import contrastive_nb.training as training
from contrastive_nb.training import TrainConfig, Trainer

READS = ('item', 'tolist', '__bool__', 'nonzero', '__float__', '__int__', '__index__')
PACKAGE = str(Path(training.__file__).parent)
CPU_BY_DESIGN = {('augment.py', '_chosen')}  # draws of the CPU generator: never on the device

@contextlib.contextmanager
def counting_reads():
    "Count value reads made from the package's code, by (file, function) of the caller."
    counts, saved = collections.Counter(), {name: getattr(torch.Tensor, name) for name in READS}
    def wrap(name):
        original = saved[name]
        def counted(self, *args, **kwargs):
            code = sys._getframe(1).f_code
            site = (Path(code.co_filename).name, code.co_name)
            if code.co_filename.startswith(PACKAGE) and site not in CPU_BY_DESIGN: counts[site] += 1
            return original(self, *args, **kwargs)
        return counted
    for name in READS: setattr(torch.Tensor, name, wrap(name))
    try: yield counts
    finally:
        for name, original in saved.items(): setattr(torch.Tensor, name, original)

@contextlib.contextmanager
def fast_path(trainer):
    "The trainer's step with the checks at the door: no value checks in augment_batch or the networks."
    from contrastive_nb.models import values_unchecked
    plain = training.augment_batch
    training.augment_batch = functools.partial(plain, check_values=False)
    try:
        with values_unchecked(trainer.method): yield
    finally: training.augment_batch = plain

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, default=30)
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--fast-path', action='store_true', help="value checks off inside the step")
    args = parser.parse_args()
    config = TrainConfig(n_train=64 * (args.steps + 2), n_test=16, augment={'size': 32}, width=4,
                         blocks=2, head_hidden=16, embed_dim=8, batch_size=64, epochs=1, progress=False)
    path = fast_path if args.fast_path else lambda trainer: contextlib.nullcontext()
    trainer = Trainer(config)
    with path(trainer):
        trainer.train_step()
        with counting_reads() as counts: trainer.train_step()
    print(json.dumps({'syncs_per_step': sum(counts.values()),
                      'by_site': {f'{f}:{fn}': n for (f, fn), n in sorted(counts.items())}}), flush=True)
    seconds = []
    for _ in range(args.repeats):
        trainer = Trainer(config)
        with path(trainer):
            for _ in range(2): trainer.train_step()  # warm-up
            clock = time.perf_counter()
            for _ in range(args.steps): trainer.train_step()
            seconds.append(time.perf_counter() - clock)
    best = min(seconds)
    print(json.dumps({'date': date.today().isoformat(), 'machine': platform.processor() or platform.machine(),
                      'threads': torch.get_num_threads(), 'fast_path': args.fast_path, 'steps': args.steps,
                      'syncs_per_step': sum(counts.values()), 'seconds': [round(s, 3) for s in seconds],
                      'views_per_s_best': round(2 * 64 * args.steps / best, 1)}))

if __name__ == '__main__':
    main()
