"""P4: the best CPU recipe on Shapes — shape kNN accuracy over 3 seeds, 5 minutes of training each on 2 cores.

    python benchmarks/training_bench.py              # full: 3 seeds of the recipe below (run under the CPU lock)
    python benchmarks/training_bench.py --quick      # tiny sizes, seconds (a smoke run, not a measurement)
    python benchmarks/training_bench.py --set lr=0.002 --set epochs=8    # another recipe
    python benchmarks/training_bench.py --set options.temperature=0.3 --set augment.scale=[0.2,1.0]   # a table's
    python benchmarks/training_bench.py --budget-s 300   # as many epochs as a 10-step timing says fit

Each seed trains `contrastive_nb.training.Trainer` with the recipe below, the best found (benchmarks/NOTES.md):
lesson 03's augmentation policy and τ = 0.2 on 24 px Shapes, a `SmallCNN` of width 16, batch 128, Adam at 3e-3
with 2 warm-up epochs then cosine, 70 epochs (about 275 s on the course's 2-core machine). The 10-step timing of
--budget-s underestimated a batch-128 epoch by about 30 % there, so the recipe fixes its epochs instead. It reports
the kNN accuracy (k = 200) of the encoder's features on the Shapes test split, the training images as the labelled
bank, and the wall-clock seconds of training (data generation and evaluation excluded). The last line of the output
is one JSON object: the recipe, each seed's accuracy and time, their mean and standard error.
"""
import argparse, json, math, platform, statistics, time
from datetime import date

import torch

from contrastive_nb.launch import cpu_threads
from contrastive_nb.training import TrainConfig, Trainer

RECIPE = dict(method='simclr', dataset='shapes', n_train=5000, n_test=1000, val_fraction=0.0,
              augment=dict(size=24, scale=(0.3, 1.0), jitter_strength=1.0, grayscale_p=0.5, blur_p=0.5),
              width=16, blocks=4, batch_size=128, epochs=70, optimizer='adam', lr=3e-3, weight_decay=1e-6,
              schedule='cosine', warmup_epochs=2, options=dict(temperature=0.2), threads=2, knn_every=0, knn_k=200,
              progress=False)
QUICK = dict(n_train=256, n_test=128, augment=dict(size=16), width=8, blocks=3, batch_size=32, epochs=2,
             warmup_epochs=1, threads=1)

def changed(recipe: dict, changes: dict) -> dict:
    "The recipe with `changes`; the augment and options tables are changed key by key, not replaced."
    out = dict(recipe)
    for name, value in changes.items():
        out[name] = {**out[name], **value} if isinstance(value, dict) and isinstance(out.get(name), dict) else value
    return out

def parse_value(text: str):
    "A --set value as the type JSON gives it (numbers, true/false), else a string."
    try: return json.loads(text)
    except json.JSONDecodeError: return text

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help="tiny sizes: a smoke run")
    parser.add_argument('--seeds', type=int, default=3, help="number of seeds (default: 3)")
    parser.add_argument('--set', action='append', default=[], metavar='NAME=VALUE',
                        help="change one setting of the recipe (repeatable)")
    parser.add_argument('--budget-s', type=float, default=0.0,
                        help="choose the epochs so that training takes about this many seconds, from the "
                             "time of 10 calibration steps (default: 0, keep the recipe's epochs)")
    args = parser.parse_args()
    recipe = changed(RECIPE, QUICK if args.quick else {})
    for item in args.set:  # NAME=VALUE, or TABLE.NAME=VALUE for a setting of augment or options
        name, _, value = item.partition('=')
        table, dot, key = name.partition('.')
        value = parse_value(value)
        recipe = changed(recipe, {table: {key: value}} if dot else {name: value})
    if args.budget_s:  # time 10 steps (after 2 warm-up steps), then fill the budget with whole epochs
        probe = Trainer(TrainConfig(**recipe, seed=99))
        with cpu_threads(recipe.get('threads', 0)):
            for _ in range(2): probe.train_step()
            clock = time.perf_counter()
            for _ in range(10): probe.train_step()
        per_step = (time.perf_counter() - clock) / 10
        recipe['epochs'] = max(1, int(0.9 * args.budget_s / (per_step * probe.steps_per_epoch)))
        print(json.dumps({'calibration_s_per_step': round(per_step, 3), 'epochs': recipe['epochs']}), flush=True)
    runs = []
    for seed in range(args.seeds):
        trainer = Trainer(TrainConfig(**recipe, seed=seed))
        clock = time.perf_counter()
        trainer.fit()
        seconds = time.perf_counter() - clock
        runs.append({'seed': seed, 'test_knn': trainer.knn('test'), 'train_seconds': round(seconds, 1),
                     'final_loss': round(trainer.history[-1][2], 4)})
        print(json.dumps(runs[-1]), flush=True)
    accuracies = [r['test_knn'] for r in runs]
    se = statistics.stdev(accuracies) / math.sqrt(len(runs)) if len(runs) > 1 else float('nan')
    print(json.dumps({'date': date.today().isoformat(), 'machine': platform.processor() or platform.machine(),
                      'threads': torch.get_num_threads(), 'recipe': recipe, 'runs': runs,
                      'mean_test_knn': statistics.mean(accuracies), 'se_test_knn': se,
                      'max_train_seconds': max(r['train_seconds'] for r in runs)}))

if __name__ == '__main__':
    main()
