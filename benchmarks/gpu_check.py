"""One call that checks and measures every CUDA path of the course on one GPU, and writes what it found as JSON.

    python3 benchmarks/gpu_check.py                   # on a GPU machine: every section, about 5 minutes
    python3 benchmarks/gpu_check.py --only ladder     # one section again (repeatable: --only env --only nccl)
    python3 benchmarks/gpu_check.py --dry-run         # the same code paths on the CPU at tiny sizes (a test runs it)

Runs from a checkout with nothing installed: `PYTHONPATH=. python3 benchmarks/gpu_check.py` (the script also puts
the repository on `sys.path` itself), with whatever torch the machine has (a GPU image may carry an older one than
the course's pins; a section that needs something newer says so and is skipped). No network, no downloads: the
images are Shapes, generated on the spot.

Sections, in order (each one's result is written to the JSON file as soon as it ends, so a run that is cut short
keeps what it measured):
- env: torch, CUDA and the card.
- parity: CUDA against the CPU on the same inputs, TF32 off for float32: augmentation, NT-Xent and InfoNCE forward
  and backward, and a few trainer steps; then bfloat16 autocast and float16 with the gradient scaler against float32
  with per-dtype tolerances.
- layout: channels_last against the default layout (trainer losses).
- compile: `torch.compile` of the encoder against eager mode (trainer losses).
- nccl: a process group of world size 1 on NCCL (one GPU cannot hold two NCCL ranks; the two-process tests stay on
  gloo): an all-reduce, and trainer steps inside the group.
- ladder: SimCLR throughput, ResNet-18 at 32 px, batch 512: float32 with augmentation on the CPU → bfloat16 autocast
  → + channels_last → + compile → + augmentation on the GPU, in source images per second (two views each) and peak
  GPU memory. (Target, an estimate: at least 20 000 source images per second on one H200.)
"""
from __future__ import annotations

import argparse, contextlib, datetime, json, math, os, platform, socket, sys, time, traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout, when nothing is installed

import torch

SECTIONS = ('env', 'parity', 'layout', 'compile', 'nccl', 'ladder')
TOLERANCES = {  # (rtol, atol) of a GPU result against the CPU's or float32's
    'float32': (1e-4, 1e-5), 'bfloat16': (5e-2, 5e-2), 'float16': (2e-2, 2e-2),
    'trainer': (2e-3, 2e-3),  # a few optimiser steps: convolution algorithms differ between devices
}

class Sizes:
    "How big each check is: the real sizes on a GPU, tiny ones for --dry-run on the CPU."
    def __init__(self, dry_run: bool):
        self.images, self.image_size, self.width = (64, 16, 8) if dry_run else (2048, 32, 32)
        self.steps = 2 if dry_run else 5
        self.ladder_batch, self.ladder_size = (8, 16) if dry_run else (512, 32)
        self.ladder_warmup, self.ladder_steps = (1, 2) if dry_run else (5, 20)

# --- helpers ---------------------------------------------------------------------------------------------------

def close(a: torch.Tensor, b: torch.Tensor, kind: str) -> dict:
    "How far `a` is from `b` (b the reference), and whether that is within `kind`'s tolerance."
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    rtol, atol = TOLERANCES[kind]
    err = (a - b).abs()
    ok = bool(torch.isfinite(a).all()) and bool((err <= atol + rtol * b.abs()).all())
    return {'ok': ok, 'max_abs_err': float(err.max()), 'max_ref': float(b.abs().max()), 'tolerance': kind}

@contextlib.contextmanager
def no_tf32():
    "True float32 matrix products on the GPU, so that they can be compared with the CPU's."
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try: yield
    finally: torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved

def sync(device: torch.device) -> None:
    if device.type == 'cuda': torch.cuda.synchronize(device)

_LOSSES: dict[tuple, torch.Tensor] = {}  # one run per setting, shared by the sections that compare with it

def trainer_losses(device: str, sizes: Sizes, fresh: bool = False, **settings) -> torch.Tensor:
    "The losses of the first few trainer steps of a small SimCLR run on Shapes (TF32 off)."
    key = (device, tuple(sorted(settings.items())))
    if key in _LOSSES and not fresh: return _LOSSES[key]
    from contrastive_nb.training import TrainConfig, Trainer
    config = TrainConfig(method='simclr', dataset='shapes', n_train=sizes.images, n_test=32, val_fraction=0.0,
                         augment={'size': sizes.image_size}, width=sizes.width, blocks=3, batch_size=32, epochs=1,
                         knn_every=0, progress=False, device=device, seed=0, **settings)
    trainer = Trainer(config)
    with no_tf32():
        _LOSSES[key] = torch.tensor([trainer.train_step() for _ in range(sizes.steps)])
    return _LOSSES[key]

def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]

# --- sections --------------------------------------------------------------------------------------------------

def env(device: torch.device, sizes: Sizes) -> dict:
    out = {'torch': torch.__version__, 'python': platform.python_version(), 'device': str(device),
           'cuda_available': torch.cuda.is_available(), 'date': datetime.date.today().isoformat()}
    if device.type == 'cuda':
        p = torch.cuda.get_device_properties(device)
        out.update(card=p.name, capability=f"{p.major}.{p.minor}", memory_gib=round(p.total_memory / 2 ** 30, 1),
                   cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                   bf16_supported=torch.cuda.is_bf16_supported())
    import contrastive_nb.training  # noqa: F401  (the package imports with this torch)
    return out

def parity(device: torch.device, sizes: Sizes) -> dict:
    from contrastive_nb.augment import AugmentationPolicy, augment_batch
    from contrastive_nb.data import make_shapes
    from contrastive_nb.infonce import info_nce, nt_xent
    out = {}
    images = make_shapes(64, size=sizes.image_size, seed=0).images
    policy = AugmentationPolicy(size=sizes.image_size)
    with no_tf32():
        on_cpu = augment_batch(images, policy, torch.Generator().manual_seed(1))
        on_device = augment_batch(images.to(device), policy, torch.Generator().manual_seed(1))
        out['augment_batch'] = close(on_device, on_cpu, 'float32')
        g = torch.Generator().manual_seed(2)
        z1, z2, negatives = (torch.randn(256, 128, generator=g) for _ in range(3))
        for name, loss in {'nt_xent': lambda a, b, n: nt_xent(a, b, 0.2),
                           'info_nce': lambda a, b, n: info_nce(a, b, n, 0.1),
                           'nt_xent_chunked': lambda a, b, n: nt_xent(a, b, 0.2, chunk_size=64)}.items():
            values, grads = [], []
            for d in (torch.device('cpu'), device):
                a, b = z1.to(d).requires_grad_(), z2.to(d)
                value = loss(a, b, negatives.to(d))
                value.backward()
                values.append(value), grads.append(a.grad)
            out[name] = {'value': close(values[1], values[0], 'float32'),
                         'grad': close(grads[1], grads[0], 'float32')}
        reference = trainer_losses('cpu', sizes)
        out['trainer_float32'] = close(trainer_losses(str(device), sizes), reference, 'trainer')
    half = ('bfloat16', 'float16') if device.type == 'cuda' else ('bfloat16',)  # fp16 autocast: GPUs only
    float32 = trainer_losses(str(device), sizes)
    for dtype in half:
        out[f'trainer_{dtype}'] = close(trainer_losses(str(device), sizes, precision=dtype), float32, dtype)
    return out

def layout(device: torch.device, sizes: Sizes) -> dict:
    with no_tf32():
        plain = trainer_losses(str(device), sizes)
        return {'channels_last': close(trainer_losses(str(device), sizes, channels_last=True), plain, 'trainer')}

def compiled(device: torch.device, sizes: Sizes) -> dict:
    if not hasattr(torch, 'compile'): return {'skipped': f'torch {torch.__version__} has no torch.compile'}
    if device.type == 'cpu':  # minutes of inductor on 2 cores; tests/test_training_compile.py runs this path
        return {'skipped': 'the dry run does not compile (tests/test_training_compile.py covers the CPU)'}
    with no_tf32():
        eager = trainer_losses(str(device), sizes)
        start = time.perf_counter()
        losses = trainer_losses(str(device), sizes, compile=True)
        return {'compile': close(losses, eager, 'trainer'), 'seconds_with_compilation': time.perf_counter() - start}

def nccl(device: torch.device, sizes: Sizes) -> dict:
    import torch.distributed as dist
    from contrastive_nb.launch import world
    backend = 'nccl' if device.type == 'cuda' else 'gloo'  # --dry-run: the same calls on gloo
    if not dist.is_available() or (backend == 'nccl' and not dist.is_nccl_available()):
        return {'skipped': f'torch.distributed with {backend} is not available'}
    dist.init_process_group(backend, init_method=f'tcp://127.0.0.1:{free_port()}', rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))
    try:
        x = torch.arange(4.0, device=device)
        dist.all_reduce(x)
        losses = trainer_losses(str(device), sizes, fresh=True)  # inside the group this time
        return {'backend': backend, 'world': list(world()), 'all_reduce_ok': bool((x.cpu() == torch.arange(4.0)).all()),
                'trainer_losses_finite': bool(torch.isfinite(losses).all())}
    finally:
        dist.destroy_process_group()

RUNGS = [  # (name, precision, channels_last, compile, augmentation on the device)
    ('float32, CPU augmentation', torch.float32, False, False, False),
    ('+ bf16 autocast', torch.bfloat16, False, False, False),
    ('+ channels_last', torch.bfloat16, True, False, False),
    ('+ compile', torch.bfloat16, True, True, False),
    ('+ augmentation on the GPU', torch.bfloat16, True, True, True),
]

def rung(device: torch.device, sizes: Sizes, dtype, channels_last: bool, compile: bool, on_device: bool) -> dict:
    "Source images per second and peak memory of SimCLR steps with one set of speed-ups."
    from contrastive_nb.augment import AugmentationPolicy, augment_batch
    from contrastive_nb.data import make_shapes
    from contrastive_nb.infonce import nt_xent
    from contrastive_nb.models import ProjectionHead, SmallCNN, resnet18_small
    torch.manual_seed(0)
    encoder = resnet18_small() if device.type == 'cuda' else SmallCNN(width=8, blocks=3)  # dry run: small
    model = torch.nn.Sequential(encoder, ProjectionHead(encoder.feature_dim, 512, 128)).to(device)
    if channels_last: model = model.to(memory_format=torch.channels_last)
    step_model = torch.compile(model) if compile and device.type == 'cuda' else model  # dry run: eager
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    images = make_shapes(4 * sizes.ladder_batch, size=sizes.ladder_size, seed=0).images
    if on_device: images = images.to(device)
    policy, generator = AugmentationPolicy(size=sizes.ladder_size), torch.Generator().manual_seed(0)
    autocast = (torch.autocast(device.type, dtype=dtype) if dtype != torch.float32 else contextlib.nullcontext())

    def step(i: int) -> None:
        batch = images[(i % 4) * sizes.ladder_batch:(i % 4 + 1) * sizes.ladder_batch]
        views = [augment_batch(batch, policy, generator).to(device, non_blocking=True) for _ in range(2)]
        if channels_last: views = [v.contiguous(memory_format=torch.channels_last) for v in views]
        with autocast:
            z = step_model(torch.cat(views))
        loss = nt_xent(*z.float().chunk(2), 0.2)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for i in range(sizes.ladder_warmup): step(i)  # compilation and cuDNN's autotuning happen here
    sync(device)
    if device.type == 'cuda': torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    for i in range(sizes.ladder_steps): step(i)
    sync(device)
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated(device) / 2 ** 30 if device.type == 'cuda' else None
    return {'source_images_per_s': sizes.ladder_batch * sizes.ladder_steps / seconds, 'peak_gib': peak,
            'batch': sizes.ladder_batch, 'image_size': sizes.ladder_size, 'timed_steps': sizes.ladder_steps}

def ladder(device: torch.device, sizes: Sizes) -> dict:
    out = {}
    for name, dtype, channels_last, compile, on_device in RUNGS:
        try: out[name] = rung(device, sizes, dtype, channels_last, compile, on_device)
        except Exception as e: out[name] = {'error': f'{type(e).__name__}: {e}'[:500]}
    return out

RUN = {'env': env, 'parity': parity, 'layout': layout, 'compile': compiled, 'nccl': nccl, 'ladder': ladder}

# --- the run -----------------------------------------------------------------------------------------------------

def write(path: Path, results: dict) -> None:
    "Write the results so far through a temporary file: a cut-short run leaves a whole JSON file."
    tmp = path.with_name(f'.{path.name}.tmp')
    tmp.write_text(json.dumps(results, indent=1, default=str) + '\n')
    os.replace(tmp, path)

def verdict(value) -> bool:
    "False if any check inside `value` has ok = False or an error."
    if isinstance(value, dict):
        if value.get('ok') is False or 'error' in value: return False
        return all(verdict(v) for v in value.values())
    return True

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--dry-run', action='store_true', help="the same code paths on the CPU at tiny sizes")
    parser.add_argument('--only', action='append', choices=SECTIONS, help="run only this section (repeatable)")
    default_out = Path(os.environ.get('OUT', '.')) / 'gpu_check.json'
    parser.add_argument('--out', type=Path, default=default_out, help=f"the JSON file (default: {default_out})")
    args = parser.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; use --dry-run to run the same code paths on the CPU", file=sys.stderr)
        return 2
    device = torch.device('cpu' if args.dry_run else 'cuda')
    sizes, results = Sizes(args.dry_run), {'dry_run': args.dry_run, 'sections': {}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for name in args.only or SECTIONS:
        start = time.perf_counter()
        try: result = RUN[name](device, sizes)
        except Exception as e:
            result = {'error': f'{type(e).__name__}: {e}'[:500], 'traceback': traceback.format_exc()[-2000:]}
        result['seconds'] = round(time.perf_counter() - start, 2)
        results['sections'][name] = result
        write(args.out, results)
        print(f"{name}: {'ok' if verdict(result) else 'FAILED'} ({result['seconds']} s)", flush=True)
    results['ok'] = all(verdict(r) for r in results['sections'].values())
    write(args.out, results)
    print(json.dumps(results['sections'].get('ladder', {}), default=str))
    return 0 if results['ok'] else 1

if __name__ == '__main__':
    sys.exit(main())
