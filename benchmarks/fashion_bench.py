"""Fashion-MNIST (issue 27): what SimCLR pretraining buys on real images, and when labels are few.

    python benchmarks/fashion_bench.py                   # full size: seeds 0 1 2, the CLI's default recipe
    python benchmarks/fashion_bench.py --seeds 0 1 --pretrain-epochs 5
    python benchmarks/fashion_bench.py --quick           # tiny sizes, seconds (a smoke run, not a measurement)

Data: Debian's dataset-fashion-mnist (or --data-root); the validation split (10 %) is carved from the 60 000 training
images by lesson 09's `load_datasets`, the 10 000 test images are read once per arm, at the end. Every arm shares the
seeds, and each seed's networks start from the same weights (the run's untrained encoder).

1. SimCLR with a fixed budget (`contrastive-nb train --dataset fashion_mnist`'s default recipe: 3 epochs of the 54 000
   training images, batch 128, 1 263 steps) against raw-pixel kNN (the course's kNN, k = 200, the whole training split
   as the bank) and against the same network (encoder plus a linear head) trained with all labels for the same steps,
   the same views (one per image), the same optimiser and schedule.
2. Label efficiency: one pretrained encoder per seed, frozen and reused by every probe; linear probes on 1 %, 10 % and
   100 % of the training labels (class-balanced subsets, fixed per seed) against that network trained from scratch
   on the same labels with the same augmentation, for epochs fixed here in advance (`SCRATCH_EPOCHS`; at 100 % it is
   the arm of part 1). The probe's weight decay is chosen on the validation split, and so is the from-scratch
   network's checkpoint (the best of four evenly spaced ones); the test split is never used to choose anything.

Verdicts come from paired per-seed differences and their 95 % t-interval (`contrastive_nb.experiments`). The last line
of the output is one JSON object.
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
from contrastive_nb.augment import augment_batch  # noqa: E402
from contrastive_nb.data import FASHION_MNIST_ROOT, as_float_images, write_fashion_mnist_fixture  # noqa: E402
from contrastive_nb.evaluate import embed, knn_accuracy, linear_probe  # noqa: E402
from contrastive_nb.experiments import paired_difference  # noqa: E402
from contrastive_nb.datasets import recipe  # noqa: E402
from contrastive_nb.optim import lr_factor  # noqa: E402
from contrastive_nb.training import TrainConfig, Trainer, load_datasets  # noqa: E402

FRACTIONS = (0.01, 0.1, 1.0)
SCRATCH_EPOCHS = {0.01: 60, 0.1: 15}  # 1 %: 4 steps an epoch; 10 %: 42; 100 %: the pretraining's epochs
PROBE_EPOCHS = {0.01: 200, 0.1: 60, 1.0: 20}  # passes over the frozen features of each subset
PROBE_DECAYS = (1e-5, 1e-4, 1e-3, 1e-2)  # chosen on the validation split
QUICK = dict(n_train=700, n_test=200, width=4, blocks=2, head_hidden=16, embed_dim=8, batch_size=32,
             warmup_epochs=0, knn_every=0)

def config_for(seed: int, args) -> TrainConfig:
    "The CLI's default Fashion-MNIST recipe, with this seed (and tiny sizes with --quick)."
    values = {**recipe('default', 'fashion_mnist'), 'seed': seed, 'epochs': args.pretrain_epochs,
              'progress': False, 'knn_every': 0, 'data_root': args.data_root}
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
                     seed: int) -> dict:
    """The encoder plus a linear head trained with labels on `rows` of the training split: SimCLR's views, optimiser and
    schedule; the checkpoint with the best validation accuracy (of four) is scored on the test split."""
    train, n_classes = data['train'], len(data['train'].classes)
    model = nn.Sequential(copy.deepcopy(encoder), nn.Linear(encoder.feature_dim, n_classes))
    images, labels = train.images[rows], train.labels[rows]
    batch = min(config.batch_size, len(rows))
    per_epoch = len(rows) // batch
    total = epochs * per_epoch
    warmup = min(config.warmup_epochs * per_epoch, total - 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(min(s, total - 1), total, warmup))
    generator = torch.Generator().manual_seed(seed)
    checks = {round(total * q / 4) for q in range(1, 5)}
    best, step = (-1.0, None), 0
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
                if val > best[0]: best = (val, copy.deepcopy(model.state_dict()))
                model.train()
    model.load_state_dict(best[1])
    return {'val_acc': best[0], 'test_acc': accuracy(model, data['test'].images, data['test'].labels),
            'steps': total, 'model': model}

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
    simclr = {s: embed(trainer.encoder, data[s].images) for s in data}
    untrained_f = {s: embed(untrained, data[s].images) for s in ('train', 'test')}
    result = {'seed': seed, 'steps': trainer.step, 'pretrain_s': round(pretrain_s, 1),
              'simclr_knn': knn(simclr, labels), 'untrained_knn': knn(untrained_f, labels), 'probe': {},
              'scratch': {}}
    for fraction in FRACTIONS:
        rows = balanced_subset(labels['train'], fraction, seed)
        result['probe'][fraction] = probe(simclr, labels, rows, fraction, seed)
        epochs = SCRATCH_EPOCHS.get(fraction, config.epochs)
        start = time.perf_counter()
        scratch = train_classifier(untrained, data, rows, epochs, config, seed)
        model = scratch.pop('model')
        result['scratch'][fraction] = {**scratch, 'n_labels': len(rows), 'epochs': epochs,
                                       'seconds': round(time.perf_counter() - start, 1)}
        if fraction == 1.0:  # part 1's arm: the same network with every label, for the same steps
            supervised = {s: embed(model[0], data[s].images) for s in ('train', 'test')}
            result['supervised_knn'] = knn(supervised, labels)
    print(f"# seed {seed}: {json.dumps(result)}", flush=True)
    return result

def load(args) -> dict:
    "The splits of the CLI's default run (with --quick: the first images of whatever is there, or a fixture)."
    if args.quick and not args.data_root and not (FASHION_MNIST_ROOT / 't10k-labels-idx1-ubyte.gz').is_file():
        args.data_root = str(write_fashion_mnist_fixture(tempfile.mkdtemp(prefix='fashion_bench_'), n=700))
    return load_datasets(config_for(0, args))

def interval(a: list, b: list) -> str:
    return format(paired_difference(a, b), '.3f') if len(a) > 1 else f"{a[0] - b[0]:+.3f} (one seed)"

def mean_se(values: list) -> str:
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.3f} ± {se:.3f}"

def report(runs: list, raw_knn: float) -> dict:
    "The tables of the notes, and the summary of the JSON line."
    col = lambda f: [f(r) for r in runs]  # noqa: E731
    simclr, sup_acc = col(lambda r: r['simclr_knn']), col(lambda r: r['scratch'][1.0]['test_acc'])
    print(f"\n| arm ({runs[0]['steps']} steps where trained) | test accuracy (mean ± se over seeds) |\n|---|---|")
    rows = {'raw-pixel kNN': [raw_knn] * len(runs), 'untrained encoder, kNN': col(lambda r: r['untrained_knn']),
            'SimCLR encoder, kNN': simclr, 'SimCLR encoder, linear probe (100 % labels)':
                col(lambda r: r['probe'][1.0]['test_acc']),
            'supervised network (same steps), its classifier': sup_acc,
            'supervised network (same steps), kNN of its features': col(lambda r: r['supervised_knn'])}
    for name, values in rows.items(): print(f"| {name} | {mean_se(values)} |")
    print("\n| paired difference | mean [95 % interval] |\n|---|---|")
    diffs = {'SimCLR kNN − raw-pixel kNN': (simclr, rows['raw-pixel kNN']),
             'SimCLR kNN − untrained kNN': (simclr, rows['untrained encoder, kNN']),
             'SimCLR kNN − supervised kNN': (simclr, rows['supervised network (same steps), kNN of its features'])}
    for name, (a, b) in diffs.items(): print(f"| {name} | {interval(a, b)} |")
    print("\n| labels | n | probe on SimCLR (test) | from scratch (test) | probe − scratch |\n|---|---|---|---|---|")
    efficiency = {}
    for f in FRACTIONS:
        p, s = col(lambda r: r['probe'][f]['test_acc']), col(lambda r: r['scratch'][f]['test_acc'])
        efficiency[f] = paired_difference(p, s).__dict__ if len(runs) > 1 else {'mean': p[0] - s[0]}
        print(f"| {f:.0%} | {runs[0]['scratch'][f]['n_labels']} | {mean_se(p)} | {mean_se(s)} | {interval(p, s)} |")
    return {'raw_knn': raw_knn, 'simclr_knn': simclr, 'supervised_acc': sup_acc, 'probe_minus_scratch': efficiency}

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2])
    parser.add_argument('--pretrain-epochs', type=int, default=recipe('default', 'fashion_mnist')['epochs'])
    parser.add_argument('--data-root', default='', help="folder of the four files (default: Debian's)")
    parser.add_argument('--quick', action='store_true', help="tiny sizes: checks the script runs")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.pretrain_epochs = args.seeds[:2], 1
        SCRATCH_EPOCHS.update({0.01: 2, 0.1: 2})
        PROBE_EPOCHS.update({0.01: 5, 0.1: 5, 1.0: 5})
    print(f"# {date.today()}, {platform.machine()}, {platform.processor() or 'cpu'}, {torch.get_num_threads()} "
          f"threads, torch {torch.__version__}{' (--quick: not a measurement)' if args.quick else ''}", flush=True)
    start = time.perf_counter()
    data = load(args)
    pixels = {s: as_float_images(data[s].images[:, :1]).flatten(1) for s in ('train', 'test')}
    raw_knn = knn(pixels, {s: data[s].labels for s in data})
    print(f"# splits {({s: len(d) for s, d in data.items()})}; raw-pixel kNN {raw_knn:.4f}", flush=True)
    runs = [one_seed(seed, args, data) for seed in args.seeds]
    summary = report(runs, raw_knn)
    print(f"\n# {time.perf_counter() - start:.0f} s in all")
    print(json.dumps({'seeds': args.seeds, 'quick': args.quick, 'runs': runs, 'summary': summary,
                      'seconds': round(time.perf_counter() - start, 1)}))

if __name__ == '__main__':
    main()
