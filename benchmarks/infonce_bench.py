"""Time and memory of the course's NT-Xent against the floor and the textbook formulation, measured in one run.

    python benchmarks/infonce_bench.py            # full: 2N = 4096 speed, 2N = 65536 chunked memory (a few minutes)
    python benchmarks/infonce_bench.py --quick    # small sizes, seconds (a smoke run, not a measurement)

The floor is the bare similarity matrix product forward + backward: any NT-Xent must compute at least that. It is
timed two ways: backward from `.sum()` (autograd then multiplies by an expanded matrix of ones, which costs a pass of
its own) and backward from a precomputed dense gradient (exactly three matrix products, the stricter floor, used for
the ratios). All times are medians over interleaved repetitions, so slow drifts of a shared machine hit every variant
alike. Ratios, not seconds, are the result. Peak memory is measured in a fresh subprocess (peak resident set size
growth).
"""
import argparse, json, platform, subprocess, sys, time
from datetime import date

import torch
import torch.nn.functional as F

from contrastive_nb.infonce import nt_xent

def floor_from_sum(z1, z2):
    z = torch.cat([z1, z2])
    (z @ z.t()).sum().backward()

def floor(z1, z2, gradient):
    "Three matrix products: z @ z.T forward, and its two backward products against a dense incoming gradient."
    z = torch.cat([z1, z2])
    (z @ z.t()).backward(gradient)

def with_backward(loss):
    return lambda z1, z2: loss(z1, z2).backward()

def cross_entropy_nt_xent(z1, z2, temperature=0.5):
    "The textbook way: normalise, full logits, mask the diagonal, F.cross_entropy."
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    n = len(z1)
    logits = (z @ z.t() / temperature).masked_fill(torch.eye(2 * n, dtype=torch.bool), float('-inf'))
    return F.cross_entropy(logits, torch.arange(2 * n).roll(n))

def third_party():
    "Popular libraries' NT-Xent, when installed (they are not dependencies of the course)."
    found = {}
    try:
        from lightly.loss import NTXentLoss
        found['lightly NTXentLoss'] = NTXentLoss(temperature=0.5)
    except ImportError: pass
    try:
        from pytorch_metric_learning.losses import NTXentLoss as PML
        loss = PML(temperature=0.5)
        def pml(z1, z2):
            labels = torch.arange(len(z1)).repeat(2)
            return loss(torch.cat([z1, z2]), labels)
        found['pytorch-metric-learning NTXentLoss'] = pml
    except ImportError: pass
    return found

def time_variants(variants: dict, n: int, d: int, reps: int) -> dict[str, float | str]:
    """Median seconds of forward + backward for each variant, repetitions interleaved; the error message of one that
    fails."""
    g = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(n, d, generator=g), torch.randn(n, d, generator=g)
    times, failed = {name: [] for name in variants}, {}
    for rep in range(reps + 1):
        for name, fn in variants.items():
            if name in failed: continue
            a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
            start = time.perf_counter()
            try: fn(a, b)
            except RuntimeError as e:  # e.g. an allocation larger than the machine
                failed[name] = str(e).splitlines()[0][:170]
                continue
            if rep: times[name].append(time.perf_counter() - start)  # repetition 0 warms up
    return {name: failed.get(name) or sorted(t)[len(t) // 2] for name, t in times.items()}

def peak_memory(n2: int, d: int, chunk_size) -> float:
    "Peak resident-memory growth in GiB of one NT-Xent forward + backward at 2N = n2, in a fresh process (Linux)."
    # Importing torch can peak higher than the loss itself, so the high-water mark is reset (Linux: clear_refs 5)
    # just before the measured call, and the growth over the resident size at that moment is reported.
    code = f"""
import torch
from contrastive_nb.infonce import nt_xent
def status(key): return int(next(l for l in open('/proc/self/status') if l.startswith(key)).split()[1])
z1, z2 = torch.randn({n2 // 2}, {d}, requires_grad=True), torch.randn({n2 // 2}, {d}, requires_grad=True)
nt_xent(z1[:4], z2[:4], chunk_size={chunk_size!r}).backward()  # warm up allocators and kernels
open('/proc/self/clear_refs', 'w').write('5')
before = status('VmRSS')
nt_xent(z1, z2, 0.5, chunk_size={chunk_size!r}).backward()
print((status('VmHWM') - before) / 2**20)
"""
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='small sizes for a smoke run')
    args = parser.parse_args()
    speed_n2, big_n2, compare_n2, reps = (512, 4096, 1024, 3) if args.quick else (4096, 65536, 16384, 15)
    d = 128
    print(f"{date.today()} | {platform.processor() or platform.machine()} | {torch.get_num_threads()} threads | "
          f"torch {torch.__version__}")

    gradient = torch.randn(speed_n2, speed_n2, generator=torch.Generator().manual_seed(1))
    variants = {'floor (matmul fwd+bwd)': lambda a, b: floor(a, b, gradient),
                'floor, backward from .sum()': floor_from_sum,
                'nt_xent (dense)': with_backward(nt_xent),
                'nt_xent (dense), tau 0.1': with_backward(lambda a, b: nt_xent(a, b, 0.1)),
                'nt_xent (dense), tau 0.01': with_backward(lambda a, b: nt_xent(a, b, 0.01)),
                'nt_xent (chunk 1024)': with_backward(lambda a, b: nt_xent(a, b, chunk_size=1024)),
                'cross-entropy over masked logits': with_backward(cross_entropy_nt_xent),
                **{name: with_backward(loss) for name, loss in third_party().items()}}
    t = time_variants(variants, speed_n2 // 2, d, reps)
    base = t['floor (matmul fwd+bwd)']
    print(f"\nspeed at 2N = {speed_n2}, D = {d} (median of {reps}):")
    for name, s in t.items():
        print(f"  {name:36s} failed: {s}" if isinstance(s, str)
              else f"  {name:36s} {s * 1e3:8.1f} ms   {s / base:5.2f} x floor")

    t2 = time_variants({'dense': with_backward(nt_xent),
                        'chunked': with_backward(lambda a, b: nt_xent(a, b, chunk_size=1024))},
                       compare_n2 // 2, d, max(2, reps // 2))
    print(f"\nchunked (1024 rows) vs dense at 2N = {compare_n2}: {t2['chunked'] / t2['dense']:.2f} x")

    dense_gib = big_n2 ** 2 * 4 / 2**30
    peak = peak_memory(big_n2, d, 1024)
    print(f"\nmemory at 2N = {big_n2}, D = {d}: dense logits alone would take {dense_gib:.1f} GiB; "
          f"chunked forward + backward peak {peak:.2f} GiB")
    print(json.dumps({'nt_xent_vs_floor': round(t['nt_xent (dense)'] / base, 3),
                      'chunked_vs_dense': round(t2['chunked'] / t2['dense'], 3), 'chunked_peak_gib': round(peak, 3)}))

if __name__ == '__main__': main()
