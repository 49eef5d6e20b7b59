"""Gradient caching against the plain large-batch step: time and peak memory per step, ratios in one run.

    python benchmarks/gradcache_bench.py            # full: batch 4096 sources (8192 images), 16 px (a few minutes)
    python benchmarks/gradcache_bench.py --quick    # batch 256, seconds (a smoke run, not a measurement)

Each arm (the plain step, and `grad_cache_step` with each chunk size) runs in a fresh process of its own
(`contrastive_nb.distributed.launch` with one process), so that its peak memory is its own: the growth of the
process's resident-memory high-water mark over its steps. The model is the course's SmallCNN (width 16, 3 stages,
GroupNorm) with a GroupNorm projection head; the loss is NT-Xent (dense in the plain step; in the cached one chunked
by 1024 anchors, so that its 2B x 2B matrix stays bounded too); one warm-up step, then the timed steps (median).
Targets (issue 14): at batch 4096 the cached step's peak memory at most a quarter of the plain step's, and its time
at most 1.5x (sentence-transformers reports its cached losses 2-2.4x slower than the plain ones).
"""
import argparse, json, platform, statistics
from datetime import date

import torch

from contrastive_nb.distributed import grad_cache_benchmark
from contrastive_nb.launch import launch

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help="small sizes: a smoke run")
    parser.add_argument('--batch', type=int, default=4096, help="sources per step (default: 4096)")
    parser.add_argument('--chunks', type=int, nargs='+', default=[256, 1024], help="chunk sizes of the cached arms")
    parser.add_argument('--steps', type=int, default=3, help="timed steps per arm (default: 3)")
    parser.add_argument('--threads', type=int, default=2, help="torch threads per arm (default: 2)")
    args = parser.parse_args()
    batch, chunks, steps = (256, [64], 1) if args.quick else (args.batch, args.chunks, args.steps)
    print(f"{date.today()} | {platform.processor() or platform.machine()} | {args.threads} threads | "
          f"torch {torch.__version__} | batch {batch} sources, 16 px, SmallCNN(16, 3 stages, GroupNorm)")
    arms = {}
    for chunk in (None, *chunks):
        name = 'plain' if chunk is None else f'cached_{chunk}'
        r = launch(grad_cache_benchmark, 1, args=(batch, chunk), kwargs=dict(steps=steps), timeout=1800,
                   threads=args.threads)[0]
        arms[name] = {'seconds': statistics.median(r['seconds']), 'peak_mib': r['peak MiB'], 'loss': r['loss']}
        print(f"  {name:14s} {arms[name]['seconds']:7.2f} s/step   peak +{arms[name]['peak_mib']:8.1f} MiB   "
              f"loss {r['loss']:.6f}", flush=True)
    plain = arms['plain']
    ratios = {}
    for name, a in arms.items():
        if name == 'plain': continue
        ratios[f'{name}_time_vs_plain'] = round(a['seconds'] / plain['seconds'], 3)
        ratios[f'{name}_memory_vs_plain'] = round(a['peak_mib'] / max(plain['peak_mib'], 1e-9), 3)
    print(json.dumps(ratios))

if __name__ == '__main__':
    main()
