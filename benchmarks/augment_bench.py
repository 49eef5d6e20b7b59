"""Views per second: `augment_batch` on whole batches against torchvision v2 per sample through a DataLoader.

    python benchmarks/augment_bench.py              # full: two views of 4 096 Shapes images at 32×32 (minutes)
    python benchmarks/augment_bench.py --threads 1  # augment_batch on one core, torchvision still on two workers
    python benchmarks/augment_bench.py --quick      # small sizes, seconds (a smoke run, not a measurement)
    python benchmarks/augment_bench.py --compare OLD_AUGMENT_PY   # also time another version, in the same run

Both sides apply the same SimCLR policy (`AugmentationPolicy()`, turned into a per-sample pipeline by
`simclr_transform`) and make two views of every image of a shuffled epoch, in batches of the same size. The
torchvision side is a `Dataset` whose `__getitem__` returns two views, read by a `DataLoader` with 0 and with 2
worker processes (persistent, warmed up: only the epoch is timed); the better of the two is the baseline. The
batched side indexes the shuffled batch and calls `augment_batch` twice. Epochs are repeated with the variants
interleaved, so slow drifts of a shared machine hit every variant alike, and the median epoch is reported. Ratios,
not seconds, are the result. A per-stage profile of `augment_batch` follows (time inside each private step).

On a machine whose cores are shared with other work, torch's intra-op threads wait for each other at every
operation, and `augment_batch` (hundreds of small operations per call) can slow down many times over; `--threads 1`
measures it on one core, where contention costs only its share of the CPU, against torchvision on two
worker processes.
"""
import argparse, importlib.util, json, os, platform, sys, time
from collections import defaultdict
from datetime import date

import torch
from torch.utils.data import DataLoader, Dataset

import contrastive_nb.augment as A
from contrastive_nb.augment import AugmentationPolicy, simclr_transform
from contrastive_nb.data import make_shapes

class TwoViews(Dataset):
    "Two random views of each image, made one image at a time by a per-sample transform."
    def __init__(self, images, transform): self.images, self.transform = images, transform
    def __len__(self): return len(self.images)
    def __getitem__(self, i):
        image = self.images[i]
        return self.transform(image), self.transform(image)

def torchvision_epoch(loader):
    "One epoch of the DataLoader: every image's two views, collated into batches."
    for view1, view2 in loader: pass

def batched_epoch(augment, images, policy, batch_size, generator):
    "One shuffled epoch of two `augment` calls per batch."
    order = torch.randperm(len(images), generator=generator)
    for start in range(0, len(images), batch_size):
        batch = images[order[start:start + batch_size]]
        view1, view2 = augment(batch, policy, generator), augment(batch, policy, generator)

def time_epochs(variants: dict, reps: int) -> dict[str, float]:
    "Median seconds of one epoch of each variant, repetitions interleaved after one warm-up epoch each."
    times = defaultdict(list)
    for rep in range(reps + 1):
        for name, epoch in variants.items():
            start = time.perf_counter()
            epoch()
            if rep: times[name].append(time.perf_counter() - start)
    return {name: sorted(t)[len(t) // 2] for name, t in times.items()}

# The private steps of augment_batch (present and past names), timed where they are called.
STAGES = {'check_image_batch': 'checks', '_image_batch': 'checks', 'sample_crop_boxes': 'crop boxes',
          '_resized_crop': 'crop + flip',
          '_adjust_colour': 'colour jitter', '_rgb_to_hsv': 'to HSV', '_hsv_to_rgb': 'from HSV',
          '_shift_hue': 'hue shift', '_grayscale': 'grayscale', '_luma': 'grayscale', '_gaussian_blur': 'blur'}

def stage_profile(module, images, policy, batch_size: int, reps: int) -> dict[str, float]:
    """Median milliseconds per batch in each step of `module.augment_batch`: a step called inside another counts
    for the outer one, and shows as an indented line ("of which") when it is worth naming."""
    spent, stack = defaultdict(float), []
    def timed(name, fn):
        def wrapper(*args, **kwargs):
            stack.append(name)
            start = time.perf_counter()
            try: return fn(*args, **kwargs)
            finally:
                stack.pop()
                label = STAGES[name] if not stack else f"  of which {STAGES[name]}"
                if len(stack) <= 1 and (not stack or name in ('_rgb_to_hsv', '_hsv_to_rgb', '_shift_hue')):
                    spent[label] += time.perf_counter() - start
        return wrapper
    originals = {name: getattr(module, name) for name in STAGES if hasattr(module, name)}
    g = torch.Generator().manual_seed(0)
    batch = images[:batch_size]
    per_rep = defaultdict(list)
    try:
        for name, fn in originals.items(): setattr(module, name, timed(name, fn))
        for rep in range(reps + 1):
            spent.clear()
            start = time.perf_counter()
            module.augment_batch(batch, policy, g)
            total = time.perf_counter() - start
            if not rep: continue
            for label, s in spent.items(): per_rep[label].append(s * 1e3)
            steps = sum(s for label, s in spent.items() if not label.startswith(' '))
            per_rep['draws and the rest'].append((total - steps) * 1e3)
            per_rep['whole call'].append(total * 1e3)
    finally:
        for name, fn in originals.items(): setattr(module, name, fn)
    # In the order of STAGES, an inner step under its outer one; the rest and the whole call last.
    ranked = sorted(per_rep, key=lambda label: next(
        (i for i, stage in enumerate(STAGES.values()) if label.endswith(stage)), len(STAGES)))
    return {label: sorted(per_rep[label])[len(per_rep[label]) // 2] for label in ranked}

def load_other(path: str):
    "Another copy of contrastive_nb/augment.py (say, an older version from git) as a module, to time it too."
    spec = importlib.util.spec_from_file_location('contrastive_nb._augment_compared', path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)  # its relative imports resolve inside contrastive_nb
    return module

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='small sizes for a smoke run')
    parser.add_argument('--batch-size', type=int, default=256, help='images per batch on both sides')
    parser.add_argument('--compare', metavar='FILE', help='also time the augment_batch of this copy of augment.py '
                        '(e.g. `git show REV:contrastive_nb/augment.py > /tmp/old.py`)')
    parser.add_argument('--threads', type=int, help="torch's CPU threads in this process (default: torch's "
                        "choice); DataLoader workers always use one each")
    args = parser.parse_args()
    if args.threads: torch.set_num_threads(args.threads)
    n, reps, profile_reps = (256, 1, 3) if args.quick else (4096, 5, 30)
    bs = min(args.batch_size, n)
    print(f"{date.today()} | {platform.processor() or platform.machine()} | {torch.get_num_threads()} threads | "
          f"torch {torch.__version__} | load average {os.getloadavg()[0]:.2f} at the start")
    images = make_shapes(n, size=32, seed=0).images
    policy = AugmentationPolicy()
    print(f"policy: {policy!r} (the SimCLR defaults), {n} Shapes images of 32×32, two views each, "
          f"batches of {bs}")

    modules = {'augment_batch': A}
    if args.compare: modules['augment_batch (compared file)'] = load_other(args.compare)
    loaders = {w: DataLoader(TwoViews(images, simclr_transform(policy)), batch_size=bs, shuffle=True,
                             num_workers=w, persistent_workers=w > 0) for w in (0, 2)}
    g = torch.Generator().manual_seed(0)
    variants = {f'torchvision v2 per sample, {w} workers': (lambda loader=loader: torchvision_epoch(loader))
                for w, loader in loaders.items()}
    for name, m in modules.items():
        # The compared module checks its policy with its own class: give it its own copy.
        p = m.AugmentationPolicy()
        variants[name] = lambda m=m, p=p: batched_epoch(m.augment_batch, images, p, bs, g)
    t = time_epochs(variants, reps)
    views = {name: 2 * n / s for name, s in t.items()}
    baseline = max(v for name, v in views.items() if name.startswith('torchvision'))
    print(f"\nviews per second (median epoch of {reps}, variants interleaved):")
    for name, v in views.items():
        print(f"  {name:38s} {v:9.0f} views/s  {t[name]:6.2f} s per epoch  {v / baseline:5.1f} x torchvision")
    ratio = views['augment_batch'] / baseline
    print(f"augment_batch vs the better torchvision loader: {ratio:.1f} x")

    for name, m in modules.items():
        profile = stage_profile(m, images, m.AugmentationPolicy(), bs, profile_reps)
        print(f"\n{name}: per batch of {bs} (median of {profile_reps}, ms):")
        for stage, ms in profile.items(): print(f"  {stage:24s} {ms:8.2f}")
    print(json.dumps({'batched_vs_torchvision': round(ratio, 3), 'batched_views_per_s': round(views['augment_batch']),
                      'torchvision_views_per_s': round(baseline)}))

if __name__ == '__main__': main()
