"""Fashion-MNIST label efficiency (issues 27 and 43): what pretraining buys when labels are few, against two controls.

    python benchmarks/fashion_bench.py                   # seeds 0 1 2: the best label-free method on Shapes pretrains
    python benchmarks/fashion_bench.py --method simclr --seeds 0 1
    python benchmarks/fashion_bench.py --quick           # tiny sizes, seconds (a smoke run, not a measurement)

Data: Debian's dataset-fashion-mnist (or --data-root); the validation split (10 %) is carved from the 60 000 training
images by lesson 09's `load_datasets`; the 10 000 test images are scored once per arm, at the end. Every arm of a seed
starts from the same weights (the run's untrained encoder).

One encoder per seed is pretrained at Fashion-MNIST's recipe (what `contrastive-nb train --dataset fashion_mnist
--method M` trains: 3 epochs of the 54 000 training images, batch 128, 1 263 steps), then frozen. M defaults to the
label-free method with the best mean test kNN in the Shapes cache of `methods_bench.py`: chosen before any Fashion-MNIST
result, so Fashion's test split chooses nothing. With 1 %, 10 % and 100 % of the training labels (class-balanced, drawn
once per seed), three arms:
- a linear probe on the pretrained encoder's frozen features;
- the same probe on the untrained encoder's frozen features: without this control a probe − scratch gap could be the
  probe's doing (a linear model on 540 labels against a CNN on 540 labels), not the pretraining's;
- the network (the untrained encoder plus a linear head) trained from scratch on the same labels with the same views,
  at 1 % and 10 % (with every label it is the methods benchmark's `supervised` row): its learning rate and weight
  decay from `SCRATCH_GRID`, its length from the four checkpoints of each run (a quarter, half, three quarters and all
  of `SCRATCH_EPOCHS`), all chosen on the validation split; the grid was fixed before the run.
The probes' weight decay is chosen on the validation split from `PROBE_DECAYS`. Verdicts come from paired per-seed
differences and their 95 % t-interval (`contrastive_nb.experiments`). The last line of the output is one JSON object.
"""
import argparse, copy, json, math, platform, statistics, sys, tempfile, time
from datetime import date
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / 'benchmarks'))
from contrastive_nb.augment import augment_batch  # noqa: E402
from contrastive_nb.data import FASHION_MNIST_ROOT, as_float_images, write_fashion_mnist_fixture  # noqa: E402
from contrastive_nb.evaluate import embed, knn_accuracy, linear_probe  # noqa: E402
from contrastive_nb.experiments import paired_difference  # noqa: E402
from contrastive_nb.datasets import recipe  # noqa: E402
from contrastive_nb.optim import lr_factor  # noqa: E402
from contrastive_nb.training import TrainConfig, Trainer, load_datasets  # noqa: E402
from methods_bench import best_label_free  # noqa: E402

FRACTIONS = (0.01, 0.1, 1.0)
SCRATCH_EPOCHS = {0.01: 60, 0.1: 15}  # 1 %: 4 steps an epoch, 240 steps; 10 %: 42 steps an epoch, 630 steps
SCRATCH_GRID = [(lr, wd) for lr in (1e-3, 3e-3, 1e-2) for wd in (1e-6, 1e-3)]  # Adam's rate, L2 weight decay
PROBE_EPOCHS = {0.01: 200, 0.1: 60, 1.0: 20}  # passes over the frozen features of each subset
PROBE_DECAYS = (1e-5, 1e-4, 1e-3, 1e-2)  # chosen on the validation split
QUICK = dict(n_train=700, n_test=200, width=4, blocks=2, head_hidden=16, embed_dim=8, batch_size=32,
             warmup_epochs=0, knn_every=0)

def config_for(seed: int, args) -> TrainConfig:
    "Fashion-MNIST's recipe for the method, with this seed (and tiny sizes with --quick)."
    values = {**recipe('default', 'fashion_mnist', args.method), 'method': args.method, 'seed': seed,
              'epochs': args.pretrain_epochs, 'progress': False, 'knn_every': 0, 'data_root': args.data_root}
    if args.quick: values.update(QUICK)
    return TrainConfig.from_dict(values)

def balanced_subset(labels: torch.Tensor, fraction: float, seed: int) -> torch.Tensor:
    "Row numbers of `fraction` of each class's rows, drawn once per seed (all rows at 1.0)."
    if fraction >= 1: return torch.arange(len(labels))
    rng = np.random.default_rng(seed)
    rows = [rng.permutation(np.flatnonzero(labels.numpy() == k))[:max(1, round(fraction * int((labels == k).sum())))]
            for k in range(int(labels.max()) + 1)]
    return torch.as_tensor(np.sort(np.concatenate(rows)))

def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    return (embed(model, images).argmax(1) == labels).double().mean().item()

def train_classifier(encoder: nn.Module, data: dict, rows: torch.Tensor, epochs: int, config: TrainConfig,
                     seed: int, lr: float, weight_decay: float) -> dict:
    """The encoder plus a linear head trained with labels on `rows` of the training split (the recipe's views and
    schedule, Adam at `lr`); of four evenly spaced checkpoints, the one best on the validation split."""
    train, n_classes = data['train'], len(data['train'].classes)
    model = nn.Sequential(copy.deepcopy(encoder), nn.Linear(encoder.feature_dim, n_classes))
    images, labels = train.images[rows], train.labels[rows]
    batch = min(config.batch_size, len(rows))
    per_epoch = len(rows) // batch
    total = epochs * per_epoch
    warmup = min(config.warmup_epochs * per_epoch, total - 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(min(s, total - 1), total, warmup))
    generator = torch.Generator().manual_seed(seed)
    checks = {round(total * q / 4) for q in range(1, 5)}
    best, step = (-1.0, None, 0), 0
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(rows), generator=generator)
        for b in range(per_epoch):
            idx = order[b * batch:(b + 1) * batch]
            views = augment_batch(images[idx], config.augment, generator)
            loss = F.cross_entropy(model(views), labels[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            step += 1
            if step in checks:
                val = accuracy(model, data['val'].images, data['val'].labels)
                if val > best[0]: best = (val, copy.deepcopy(model.state_dict()), step)
                model.train()
    model.load_state_dict(best[1])
    return {'val_acc': best[0], 'steps': best[2], 'model': model}

def from_scratch(encoder: nn.Module, data: dict, rows: torch.Tensor, epochs: int, config: TrainConfig,
                 seed: int) -> dict:
    "The from-scratch arm: every (lr, weight decay) of SCRATCH_GRID, the best on the validation split scored on test."
    start, tried = time.perf_counter(), {}
    for lr, wd in SCRATCH_GRID:
        tried[(lr, wd)] = train_classifier(encoder, data, rows, epochs, config, seed, lr, wd)
    (lr, wd), chosen = max(tried.items(), key=lambda item: item[1]['val_acc'])
    return {'lr': lr, 'weight_decay': wd, 'steps': chosen['steps'], 'of_steps': epochs * (len(rows) //
            min(config.batch_size, len(rows))), 'val_acc': chosen['val_acc'],
            'test_acc': accuracy(chosen['model'], data['test'].images, data['test'].labels),
            'val_by_setting': {f'{lr:g},{wd:g}': round(r['val_acc'], 4) for (lr, wd), r in tried.items()},
            'n_labels': len(rows), 'seconds': round(time.perf_counter() - start, 1)}

def probe(features: dict, labels: dict, rows: torch.Tensor, fraction: float, seed: int) -> dict:
    "A linear probe on the frozen features of `rows`: weight decay chosen on validation, then scored on test."
    fit = features['train'][rows], labels['train'][rows]
    kwargs = dict(epochs=PROBE_EPOCHS[fraction], seed=seed)
    on_val = {wd: linear_probe(*fit, features['val'], labels['val'], weight_decay=wd, **kwargs) for wd in PROBE_DECAYS}
    wd = max(on_val, key=on_val.get)
    return {'weight_decay': wd, 'val_acc': on_val[wd],
            'test_acc': linear_probe(*fit, features['test'], labels['test'], weight_decay=wd, **kwargs)}

def knn(features: dict, labels: dict) -> float:
    "The course's kNN (k = 200, τ = 0.07): test queries against the whole training split."
    return knn_accuracy(features['train'], labels['train'], features['test'], labels['test'], k=200)

def one_seed(seed: int, args, data: dict) -> dict:
    config = config_for(seed, args)
    start = time.perf_counter()
    trainer = Trainer(config, datasets=data)
    untrained = trainer.untrained_encoder()
    trainer.fit()
    pretrain_s = time.perf_counter() - start
    labels = {s: data[s].labels for s in data}
    pretrained = {s: embed(trainer.encoder, data[s].images) for s in data}
    untrained_f = {s: embed(untrained, data[s].images) for s in data}
    result = {'seed': seed, 'method': config.method, 'steps': trainer.step, 'pretrain_s': round(pretrain_s, 1),
              'pretrained_knn': knn(pretrained, labels), 'untrained_knn': knn(untrained_f, labels),
              'probe': {}, 'untrained_probe': {}, 'scratch': {}}
    for fraction in FRACTIONS:
        rows = balanced_subset(labels['train'], fraction, seed)
        result['probe'][fraction] = {**probe(pretrained, labels, rows, fraction, seed), 'n_labels': len(rows)}
        result['untrained_probe'][fraction] = probe(untrained_f, labels, rows, fraction, seed)
        if fraction in SCRATCH_EPOCHS:
            result['scratch'][fraction] = from_scratch(untrained, data, rows, SCRATCH_EPOCHS[fraction], config, seed)
    print(f"# seed {seed}: {json.dumps(result)}", flush=True)
    return result

def load(args) -> dict:
    "The splits of the recipe's run (with --quick: the first images of whatever is there, or a fixture)."
    if args.quick and not args.data_root and not (FASHION_MNIST_ROOT / 't10k-labels-idx1-ubyte.gz').is_file():
        args.data_root = str(write_fashion_mnist_fixture(tempfile.mkdtemp(prefix='fashion_bench_'), n=700))
    return load_datasets(config_for(0, args))

def interval(a: list, b: list) -> str:
    return format(paired_difference(a, b), '.3f') if len(a) > 1 else f"{a[0] - b[0]:+.3f} (one seed)"

def mean_se(values: list) -> str:
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.3f} ± {se:.3f}"

def difference(a: list, b: list) -> dict:
    return paired_difference(a, b).__dict__ if len(a) > 1 else {'mean': a[0] - b[0]}

def report(runs: list, raw_knn: float) -> dict:
    "The tables of the notes, and the summary of the JSON line."
    col = lambda f: [f(r) for r in runs]  # noqa: E731
    method, pretrained = runs[0]['method'], col(lambda r: r['pretrained_knn'])
    print(f"\n| kNN (k = 200, the whole training split) | test accuracy |\n|---|---|\n| raw pixels | {raw_knn:.3f} |\n"
          f"| untrained encoder | {mean_se(col(lambda r: r['untrained_knn']))} |\n"
          f"| {method} ({runs[0]['steps']} steps) | {mean_se(pretrained)} |")
    print(f"\n| labels | n | probe on {method} | probe on untrained | from scratch (grid on val) | probe − scratch "
          f"| probe − untrained probe |\n|---|---|---|---|---|---|---|")
    summary = {'method': method, 'raw_knn': raw_knn, 'pretrained_knn': pretrained, 'probe_minus_scratch': {},
               'probe_minus_untrained_probe': {}}
    for f in FRACTIONS:
        p, u = col(lambda r: r['probe'][f]['test_acc']), col(lambda r: r['untrained_probe'][f]['test_acc'])
        s = col(lambda r: r['scratch'][f]['test_acc']) if f in SCRATCH_EPOCHS else None
        summary['probe_minus_untrained_probe'][f] = difference(p, u)
        if s is not None: summary['probe_minus_scratch'][f] = difference(p, s)
        print(f"| {f:.0%} | {runs[0]['probe'][f]['n_labels']} | {mean_se(p)} | {mean_se(u)} | "
              f"{mean_se(s) if s else '(methods benchmark)'} | {interval(p, s) if s else '—'} | {interval(p, u)} |")
    return summary

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--method', default=None, help="the pretraining (default: the best label-free method of "
                        "the Shapes benchmark's cache, else simclr)")
    parser.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2])
    parser.add_argument('--pretrain-epochs', type=int, default=recipe('default', 'fashion_mnist')['epochs'])
    parser.add_argument('--data-root', default='', help="folder of the four files (default: Debian's)")
    parser.add_argument('--quick', action='store_true', help="tiny sizes: checks the script runs")
    args = parser.parse_args()
    args.method = args.method or (best_label_free(1) or ['simclr'])[0]
    if args.quick:
        args.seeds, args.pretrain_epochs = args.seeds[:2], 1
        SCRATCH_EPOCHS.update({0.01: 2, 0.1: 2})
        SCRATCH_GRID[2:] = []  # two settings: the choice on validation still runs
        PROBE_EPOCHS.update({0.01: 5, 0.1: 5, 1.0: 5})
    print(f"# {date.today()}, {platform.machine()}, {platform.processor() or 'cpu'}, {torch.get_num_threads()} "
          f"threads, torch {torch.__version__}, pretraining: {args.method}"
          f"{' (--quick: not a measurement)' if args.quick else ''}", flush=True)
    start = time.perf_counter()
    data = load(args)
    pixels = {s: as_float_images(data[s].images[:, :1]).flatten(1) for s in ('train', 'test')}
    raw_knn = knn(pixels, {s: data[s].labels for s in data})
    print(f"# splits {({s: len(d) for s, d in data.items()})}; raw-pixel kNN {raw_knn:.4f}", flush=True)
    runs = [one_seed(seed, args, data) for seed in args.seeds]
    summary = report(runs, raw_knn)
    print(f"\n# {time.perf_counter() - start:.0f} s in all")
    print(json.dumps({'seeds': args.seeds, 'quick': args.quick, 'method': args.method, 'runs': runs,
                      'summary': summary, 'seconds': round(time.perf_counter() - start, 1)}))

if __name__ == '__main__':
    main()
