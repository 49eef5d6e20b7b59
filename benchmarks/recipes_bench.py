"""The CPU recipes of `contrastive-nb train` (lesson 09's RECIPES): how long each takes and what its test kNN is,
beside chance, raw pixels and the untrained encoder, over seeds (issue 28: a default run that learns in minutes).

    python benchmarks/recipes_bench.py                        # every CPU recipe of Shapes; seeds 0 1 2
    python benchmarks/recipes_bench.py --recipes shapes:fast --seeds 0 1
    python benchmarks/recipes_bench.py --quick                # tiny sizes, seconds (a smoke run, not a measurement)

Each run is the command line in a process of its own, as a user types it (`python -m contrastive_nb.cli train
--dataset D --recipe R --seed S --threads 2 --progress false`), one at a time. "wall" is the whole command, start-up,
data and baselines included; "training" is the report's own `seconds` (the loop, its kNN checks and checkpoints).
Mean ± standard error over seeds. The last line of the output is one JSON object.
"""
import argparse, json, math, platform, statistics, subprocess, sys, tempfile, time
from datetime import date
from pathlib import Path

import torch

CPU_RECIPES = ('shapes:default', 'shapes:fast', 'shapes:best')
QUICK = ['--n-train', '96', '--n-test', '32', '--epochs', '1', '--width', '4', '--blocks', '2', '--batch-size', '16',
         '--augment.size', '16', '--warmup-epochs', '0', '--head-hidden', '16', '--embed-dim', '8']

def run_recipe(dataset: str, name: str, seed: int, folder: Path, extra: list[str]) -> dict:
    "One run of the command line; its report, with the wall-clock seconds of the whole command."
    run_dir = folder / f"{dataset}-{name}-{seed}"
    command = [sys.executable, '-m', 'contrastive_nb.cli', 'train', '--dataset', dataset, '--recipe', name,
               '--seed', str(seed), '--threads', '2', '--progress', 'false', '--run-dir', str(run_dir), *extra]
    start = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if out.returncode != 0: sys.exit(f"{' '.join(command)} failed:\n{out.stderr[-3000:]}")
    report = json.loads((run_dir / 'report.json').read_text())
    return {'seed': seed, 'wall_s': round(wall, 1), 'training_s': report['seconds'], 'steps': report['step'],
            'test_knn': report['test_knn'], **report['baselines']}

def mean_se(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0)

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--recipes', nargs='+', default=list(CPU_RECIPES), metavar='DATASET:NAME')
    parser.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2])
    parser.add_argument('--quick', action='store_true', help="tiny sizes, one seed: checks the script runs")
    args = parser.parse_args()
    seeds, extra = ([args.seeds[0]], QUICK) if args.quick else (args.seeds, [])
    print(f"# {date.today()}, {platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}"
          f"{' (--quick: not a measurement)' if args.quick else ''}")
    print("| recipe | steps | wall s | training s | test kNN | chance | raw pixels | untrained encoder | gain |")
    print("|---|---|---|---|---|---|---|---|---|")
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for item in args.recipes:
            dataset, _, name = item.partition(':')
            runs = [run_recipe(dataset, name, s, Path(folder), extra) for s in seeds]
            summary = {key: mean_se([r[key] for r in runs]) for key in
                       ('wall_s', 'training_s', 'test_knn', 'chance', 'raw_pixels_knn', 'untrained_knn')}
            summary['gain'] = mean_se([r['test_knn'] - r['untrained_knn'] for r in runs])
            results[item] = {'runs': runs, **{k: list(v) for k, v in summary.items()}}
            cells = [f"{summary[k][0]:.0f} ± {summary[k][1]:.0f}" for k in ('wall_s', 'training_s')]
            cells += [f"{summary[k][0]:.3f} ± {summary[k][1]:.3f}" for k in
                      ('test_knn', 'chance', 'raw_pixels_knn', 'untrained_knn', 'gain')]
            print(f"| {item} | {runs[0]['steps']} | " + ' | '.join(cells) + ' |', flush=True)
    print(json.dumps({'seeds': seeds, 'quick': args.quick, 'recipes': results}))

if __name__ == '__main__':
    main()
