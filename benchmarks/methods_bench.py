"""Every image method at its own recipe (issue 43): test kNN, a linear probe and the baselines, over seeds.

    python benchmarks/methods_bench.py                          # Shapes: every image method, seeds 0 1 2
    python benchmarks/methods_bench.py --methods simsiam byol --seeds 3 4 5
    python benchmarks/methods_bench.py --dataset fashion_mnist  # SimCLR, the four best on Shapes, supervised
    python benchmarks/methods_bench.py --table                  # print the table from the cache, train nothing
    python benchmarks/methods_bench.py --quick                  # tiny sizes (a smoke run, not a measurement)

A run is what `contrastive-nb train --dataset D --method M --recipe best --seed S --threads 2` trains: the settings
come from the same `recipe(name, dataset, method)` (the method's own recipe where it has one, else the dataset's), the
same `Trainer` trains them, one run at a time. Then its frozen encoder is read:
- test kNN: the course's (k = 200, similarity-weighted, the first 4 096 training images as the bank, as the
  CLI's report); kept too against the whole training split (`*_all`), which the table reads on every dataset but
  Shapes (Fashion-MNIST's 54 000 images: 4 096 of them would understate every kNN column);
- linear probe: `evaluate.linear_probe` on the frozen features of the training split, its weight decay chosen on the
  validation split from `PROBE_DECAYS`, scored once on the test split;
- the run's baselines: chance, the untrained encoder (the same seed's weights before the first step) and raw pixels
  under the course's kNN, and raw pixels under a plain majority vote, k chosen on the validation split from 1 to 9.
`supervised` is the same network trained with labels at the same recipe (a reference, as SupCon is: neither is a
candidate for the label-free targets). On Shapes every registered image method runs; on another dataset SimCLR, the
four label-free methods with the best mean test kNN in the Shapes cache, and `supervised`. The recipe is the
dataset's `best` where it has one, else its `default` (Fashion-MNIST's: 3 epochs of the 54 000 training images).

Each run's result is kept in benchmarks/results/methods/ under a hash of its settings and this file's
`CACHE_VERSION`: the table can be completed in parts, and printed again in seconds. Delete a file, or pass
--retrain, to train it again. Mean ± standard error over seeds; "vs simclr" is the paired difference of test kNN
against SimCLR on the same seeds, with its 95 % t-interval. The last line of the output is one JSON object.
"""
import argparse, hashlib, json, math, os, platform, statistics, sys, tempfile, time
from datetime import date
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from contrastive_nb.datasets import RECIPES, recipe  # noqa: E402
from contrastive_nb.evaluate import embed, knn_accuracy, linear_probe  # noqa: E402
from contrastive_nb.experiments import paired_difference  # noqa: E402
from contrastive_nb.methods import BUILTIN_METHODS  # noqa: E402
from contrastive_nb.data import as_float_images  # noqa: E402
from contrastive_nb.training import TrainConfig, Trainer  # noqa: E402

CACHE_VERSION = 1  # bump when what a run measures changes (not its settings: they are hashed)
CACHE = Path(os.environ.get('METHODS_BENCH_CACHE', ROOT / 'benchmarks' / 'results' / 'methods'))  # or elsewhere
SUPERVISED = ('supervised', 'supcon')  # trained with labels: references, not candidates
PROBE_DECAYS = (1e-5, 1e-4, 1e-3, 1e-2)  # the probe's weight decay, chosen on the validation split
VOTE_KS = (1, 3, 5, 7, 9)  # the raw-pixel majority vote's k, chosen on the validation split
QUICK = dict(n_train=160, n_test=64, epochs=1, width=4, blocks=2, batch_size=32, warmup_epochs=0,
             head_hidden=16, embed_dim=16, knn_every=0)

def cpu() -> str:
    "The CPU's model name, as Linux reports it (else the platform's)."
    try: lines = Path('/proc/cpuinfo').read_text().splitlines()
    except OSError: lines = []
    names = [line.split(':', 1)[1].strip() for line in lines if line.startswith('model name')]
    return names[0] if names else platform.processor() or platform.machine()

def settings(dataset: str, method: str, seed: int, name: str, quick: bool, threads: int) -> dict:
    "The run's settings, as the command line builds them from the recipe."
    values = {**recipe(name, dataset, method), 'method': method, 'seed': seed, 'threads': threads,
              'progress': False}
    if quick:
        values.update(QUICK)
        values.setdefault('augment', {})['size'] = 16
    return TrainConfig.from_dict(values).to_dict()

def key_of(values: dict) -> str:
    "The cache key: a hash of the settings that differ from TrainConfig's defaults (not where it runs)."
    defaults = TrainConfig().to_dict()  # a setting added later, at its default, keeps the key
    kept = {k: v for k, v in values.items()
            if k not in ('threads', 'progress', 'device') and v != defaults.get(k)}
    text = json.dumps({'version': CACHE_VERSION, **kept}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]

def default_recipe(dataset: str) -> str:
    "The recipe a dataset is benchmarked at: its `best` where it has one, else its `default`."
    return 'best' if 'best' in RECIPES[dataset] else 'default'

def nearest_pixels(train, query, k: int, chunk: int = 1024) -> torch.Tensor:
    "The `k` training images nearest to each query image in raw pixels (Euclidean), (N, k) rows of `train`."
    bank = as_float_images(train.images).flatten(1)
    q = as_float_images(query.images).flatten(1)
    return torch.cat([torch.cdist(q[i:i + chunk], bank).topk(k, largest=False).indices
                      for i in range(0, len(q), chunk)])  # in chunks: Fashion-MNIST's is 10 000 × 54 000

_VOTES = {}  # the majority vote depends on the data only: once per split settings, not once per run

def data_key(*splits) -> str:
    "The same splits, whichever run loaded them: their sizes and first labels."
    return str([(len(d), d.labels[:64].tolist()) for d in splits])

def majority_vote(train, val, test) -> tuple[float, int]:
    "Raw pixels under a plain k-nearest-neighbour majority vote (Euclidean), k chosen on `val`."
    key = data_key(train, val, test)
    if key in _VOTES: return _VOTES[key]
    nearest = {query: nearest_pixels(train, query, max(VOTE_KS)) for query in (val, test)}
    def accuracy(query, k: int) -> float:
        near = nearest[query][:, :k]
        one_hot = lambda rows: torch.nn.functional.one_hot(train.labels[rows], len(train.classes))  # noqa: E731
        # ties go to the nearest neighbour's class: its vote counts a little more
        votes = one_hot(near).sum(1).float() + 0.5 * one_hot(near[:, 0])
        return (votes.argmax(1) == query.labels).float().mean().item()
    best = max(VOTE_KS, key=lambda k: (accuracy(val, k), -k))
    _VOTES[key] = accuracy(test, best), best
    return _VOTES[key]

_PIXELS = {}  # raw pixels under the course's kNN, whole training split: once per data, as the vote

def whole_split_knn(trainer: Trainer) -> dict[str, float]:
    "Test kNN with the whole training split as the bank (the report's bank is its first 4 096 images)."
    train, test = trainer.data['train'], trainer.data['test']
    key = data_key(train, test)
    if key not in _PIXELS:
        pixels = lambda d: as_float_images(d.images).flatten(1)  # noqa: E731
        _PIXELS[key] = knn_accuracy(pixels(train), train.labels, pixels(test), test.labels, k=trainer.config.knn_k)
    n = len(train)
    return {'test_knn_all': trainer.knn('test', n), 'raw_pixels_knn_all': _PIXELS[key],
            'untrained_knn_all': trainer.knn('test', n, trainer.untrained_encoder())}

def probe(trainer: Trainer) -> tuple[float, float]:
    "Linear probe test accuracy of the frozen encoder, its weight decay chosen on the validation split."
    data = trainer.data
    features = {k: embed(trainer.encoder, data[k].images, device=trainer.device) for k in data}
    fit = lambda query, wd: linear_probe(features['train'], data['train'].labels, features[query],
                                         data[query].labels, weight_decay=wd)
    decay = max(PROBE_DECAYS, key=lambda wd: (fit('val', wd), wd))
    return fit('test', decay), decay

def run(values: dict, folder: Path) -> dict:
    "Train one run, then measure it."
    config = TrainConfig.from_dict(values)
    trainer = Trainer(config, folder / key_of(values))
    start = time.perf_counter()
    trainer.fit()
    report = trainer.report()
    probe_acc, decay = probe(trainer)
    vote, k = majority_vote(*(trainer.data[s] for s in ('train', 'val', 'test')))
    return {'method': config.method, 'dataset': config.dataset, 'seed': config.seed,
            'views': config.views, 'steps': report['step'], 'training_s': report['seconds'],
            'wall_s': round(time.perf_counter() - start, 1), 'val_knn': report['val_knn'],
            'test_knn': report['test_knn'],
            'probe': probe_acc, 'probe_decay': decay, 'pixels_vote': vote, 'pixels_vote_k': k,
            **report['baselines'], **whole_split_knn(trainer), 'settings': values, 'cpu': cpu(),
            'threads': config.threads, 'torch': torch.__version__, 'date': str(date.today())}

def result(dataset: str, method: str, seed: int, args, folder: Path) -> dict | None:
    "The cached result of a run, or a new one (None: not cached and --table)."
    values = settings(dataset, method, seed, args.recipe, args.quick, args.threads)
    path = (Path(folder) if args.quick else CACHE) / f"{dataset}-{method}-{seed}-{key_of(values)}.json"
    if path.is_file() and not args.retrain: return json.loads(path.read_text())
    if args.table: return None
    print(f"# training {method} on {dataset}, seed {seed}", file=sys.stderr, flush=True)
    found = run(values, Path(folder))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(found, indent=1) + '\n')
    return found

def cached(dataset: str = 'shapes', seeds=(0, 1, 2), name: str | None = None, threads: int = 2,
           methods=None) -> dict[str, list[dict]]:
    "What the cache holds for the current recipes: method -> its runs (a run of older settings is not read)."
    args = argparse.Namespace(recipe=name or default_recipe(dataset), quick=False, threads=threads,
                              retrain=False, table=True)
    return {m: [r for s in seeds if (r := result(dataset, m, s, args, CACHE)) is not None]
            for m in methods or methods_of(dataset)}

def best_label_free(n: int = 4, seeds=(0, 1, 2)) -> list[str]:
    "The `n` label-free methods with the best mean test kNN in the Shapes cache (SimCLR and its copies aside)."
    runs = cached('shapes', seeds, methods=[m for m in BUILTIN_METHODS if m not in SUPERVISED])
    means = {m: statistics.fmean(r['test_knn'] for r in rs) for m, rs in runs.items()
             if len(rs) == len(seeds) and m not in ('simclr', 'simclr_global')}
    return sorted(means, key=means.get, reverse=True)[:n]

def methods_of(dataset: str) -> list[str]:
    "The benchmark's methods on a dataset: all of them on Shapes; elsewhere SimCLR, the four best, supervised."
    if dataset == 'shapes': return list(BUILTIN_METHODS)  # in lesson order
    return ['simclr', *best_label_free(4), 'supervised']

def figure(rows: dict[str, list[dict]], path=None):
    "Test kNN against training seconds, one point per method (mean ± standard error over seeds)."
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    everyone = [r for runs in rows.values() for r in runs]
    for label, key, style in (('untrained encoder', 'untrained_knn', ':'),
                              ('raw pixels (kNN)', 'raw_pixels_knn', '--')):
        ax.axhline(statistics.fmean(r[key] for r in everyone), color='grey', linestyle=style, label=label)
    for method, runs in rows.items():
        if not runs: continue
        y = [r['test_knn'] for r in runs]
        se = statistics.stdev(y) / math.sqrt(len(y)) if len(y) > 1 else 0.0
        x = statistics.fmean(r['training_s'] for r in runs)
        marker = 's' if method in SUPERVISED else 'o'
        ax.errorbar(x, statistics.fmean(y), yerr=se, fmt=marker, capsize=3)
        ax.annotate(method, (x, statistics.fmean(y)), textcoords='offset points', xytext=(5, 3), fontsize=8)
    ax.set_xlabel('training seconds (mean over seeds)')
    ax.set_ylabel('test kNN accuracy')
    ax.legend(loc='lower right', fontsize=8)
    fig.tight_layout()
    if path is not None: fig.savefig(path)
    return fig

def mean_se(values: list[float]) -> str:
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.3f} ± {se:.3f}"

COLUMNS = ('test_knn', 'probe', 'untrained_knn', 'raw_pixels_knn', 'pixels_vote')
KNN = ('test_knn', 'untrained_knn', 'raw_pixels_knn')  # with `whole_bank`: their *_all twins

def table(rows: dict[str, list[dict]], whole_bank: bool = False) -> list[str]:
    "The markdown table: one row per method, mean ± standard error over its seeds."
    lines = ["| method | seeds | steps | training s | test kNN | gain over untrained | linear probe | untrained "
             "| raw pixels (kNN) | raw pixels (vote) | vs simclr (paired, 95 %) |", "|---" * 11 + "|"]
    if whole_bank:  # kNN against the whole training split, not the report's first 4 096 images
        rows = {m: [{**r, **{k: r[f'{k}_all'] for k in KNN}} for r in runs] for m, runs in rows.items()}
    reference = {r['seed']: r['test_knn'] for r in rows.get('simclr', [])}
    for method, runs in rows.items():
        if not runs: continue
        paired = [(r['test_knn'], reference[r['seed']]) for r in runs if r['seed'] in reference]
        versus = '—'
        if method != 'simclr' and len(paired) > 1:
            d = paired_difference([a for a, _ in paired], [b for _, b in paired])
            versus = f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"
        name = f"{method} (labels)" if method in SUPERVISED else method
        cells = [mean_se([r[c] for r in runs]) for c in COLUMNS]
        gain = mean_se([r['test_knn'] - r['untrained_knn'] for r in runs])
        lines.append(f"| {name} | {' '.join(str(r['seed']) for r in runs)} | {runs[0]['steps']} | "
                     f"{statistics.fmean(r['training_s'] for r in runs):.0f} | {cells[0]} | {gain} | "
                     f"{' | '.join(cells[1:])} | {versus} |")
    return lines

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--dataset', default='shapes')
    parser.add_argument('--recipe', default=None, help="each method's own recipe of this name, else the dataset's "
                        "(default: the dataset's best, else its default)")
    parser.add_argument('--methods', nargs='+', default=None,
                        help="default: every registered image method on Shapes; SimCLR, the four best, supervised")
    parser.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2])
    parser.add_argument('--threads', type=int, default=2, help="CPU threads of each run (printed with the table)")
    parser.add_argument('--table', action='store_true', help="print what the cache holds; train nothing")
    parser.add_argument('--retrain', action='store_true', help="train again, over the cached results")
    parser.add_argument('--quick', action='store_true', help="tiny sizes, one seed, nothing cached")
    args = parser.parse_args()
    args.recipe = args.recipe or default_recipe(args.dataset)
    methods = args.methods or methods_of(args.dataset)
    seeds = args.seeds[:1] if args.quick else args.seeds
    torch.set_num_threads(args.threads)
    print(f"# {date.today()}, {cpu()}, torch {torch.__version__}, "
          f"{args.dataset}, recipe {args.recipe}{' (--quick: not a measurement)' if args.quick else ''}")
    rows = {}
    with tempfile.TemporaryDirectory() as folder:
        for method in methods:
            found = [result(args.dataset, method, s, args, Path(folder)) for s in seeds]
            rows[method] = [r for r in found if r is not None]
    threads = sorted({r.get('threads', args.threads) for runs in rows.values() for r in runs})
    print(f"# the runs: {' or '.join(map(str, threads)) or args.threads} thread(s) each")
    print('\n'.join(table(rows, whole_bank=args.dataset != 'shapes')))
    print(json.dumps({'dataset': args.dataset, 'recipe': args.recipe, 'seeds': seeds, 'quick': args.quick,
                      'runs': {m: [{k: v for k, v in r.items() if k != 'settings'} for r in runs]
                               for m, runs in rows.items()}}))

if __name__ == '__main__':
    main()
