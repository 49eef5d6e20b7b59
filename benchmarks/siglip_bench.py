"""SigLIP's sigmoid loss against CLIP's softmax loss at batches 16, 64 and 512 on Shapes captions (issue 29).

    python benchmarks/siglip_bench.py              # full size: 3 seeds, every arm (see --estimate for its cost)
    python benchmarks/siglip_bench.py --estimate   # times a few steps of each arm; prints the full size's cost
    python benchmarks/siglip_bench.py --quick      # tiny sizes, seconds (a smoke run, not a measurement)

The claim (Zhai et al. 2023): the sigmoid loss beats the softmax at small batches (the paper's smallest are hundreds
to a few thousand) and the gap closes at large batch. Batches 16 and 64 lie below the paper's range: there this
script extrapolates. Arms share seeds, data, model, views and templates: CLIP (`clip_loss`, learnable tau from 0.07)
and SigLIP (`siglip_loss`, learnable t' = log 10, b = -10) at every batch; SigLIP with the prior-matching bias
b = -log(B - 1) (open_clip #650) at the smallest and the largest batch only. Equal examples seen (the same epochs,
so fewer steps at a larger batch) and one fixed learning rate across batch sizes. Duplicate captions follow one rule
in both losses: left out of the negatives by their caption ids. Scores on the test images: zero-shot accuracy for
shape, colour and position, and image-to-caption recall@1. Verdicts: SigLIP - CLIP per seed, the mean and its 95 %
t-interval (`paired_difference`); CLIP - an untrained model of the seed says whether the reference learned.
The last line of the output is one JSON object.
"""
import argparse, json, platform, sys, time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from contrastive_nb.clip import (CLIP, SigLIP, SigLIPOptions, TinyCLIP, caption_ids, class_embeddings,
                                 class_prompts, crop_views, describe, factor_labels, prior_bias, recall_at_k,
                                 zero_shot_predict)
from contrastive_nb.data import make_shapes
from contrastive_nb.evaluate import embed
from contrastive_nb.experiments import paired_difference
from contrastive_nb.infonce import train_method
from contrastive_nb.methods import Batch

FULL = ('colour', 'shape', 'position')
FACTORS = ('shape', 'colour', 'position')

def arms(batches: list[int]) -> list[tuple[str, int]]:
    "(loss, batch) of every arm: both losses at every batch; the prior-bias arm at the extremes."
    out = [(loss, b) for b in batches for loss in ('clip', 'siglip')]
    return out + [('siglip, prior bias', b) for b in sorted({batches[0], batches[-1]})]

def train(loss: str, batch: int, data, epochs: int, lr: float, seed: int, width: int) -> tuple[TinyCLIP, float]:
    "One run: the arm's method over `epochs` passes of crop views and their captions; the model and its seconds."
    torch.manual_seed(seed)
    model = TinyCLIP(width=width, blocks=3, embed_dim=64)
    method = (CLIP(model) if loss == 'clip' else  # the library's SigLIP: t' and b are its parameters
              SigLIP(model, SigLIPOptions(bias=prior_bias(batch) if loss == 'siglip, prior bias' else -10.0)))
    rng = np.random.default_rng(seed)
    def draw(index: torch.Tensor, generator: torch.Generator) -> Batch:
        images, rows = crop_views(data.images[index], data.factors.iloc[index.numpy()], generator=generator)
        return Batch([images], index, caption_ids(rows, FULL), generator, texts=describe(rows, FULL, rng=rng))
    start = time.perf_counter()
    train_method(method, data.images, epochs=epochs, batch_size=batch, lr=lr, weight_decay=1e-5, seed=seed,
                 progress=False, draw=draw)
    return model.eval(), time.perf_counter() - start

def scores(model: TinyCLIP, test) -> dict[str, float]:
    "Zero-shot accuracy per factor and image-to-caption recall@1 on the test images."
    z = embed(model.image_tower, test.images)
    out = {f"zero-shot {f}": (zero_shot_predict(z, class_embeddings(model, class_prompts(f)))
                              == factor_labels(test.factors, f)).double().mean().item() for f in FACTORS}
    ids = caption_ids(test.factors, FULL)
    with torch.no_grad(): captions = model.encode_text(describe(test.factors, FULL, rng=123)).float()
    out['recall@1 image->text'] = recall_at_k(z.float(), captions, ids, ids, (1,))[1]
    return out

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    parser.add_argument('--batches', type=int, nargs='+', default=[16, 64, 512])
    parser.add_argument('--n-train', type=int, default=4096)
    parser.add_argument('--n-test', type=int, default=1000)
    parser.add_argument('--epochs', type=int, default=10)
    parser.add_argument('--lr', type=float, default=2e-3)
    parser.add_argument('--width', type=int, default=16)
    parser.add_argument('--quick', action='store_true', help='tiny sizes: a smoke run, seconds')
    parser.add_argument('--estimate', action='store_true', help='time a few steps of every arm; run nothing else')
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.quick:
        args.seeds, args.batches, args.n_train, args.n_test, args.epochs, args.width = [0, 1], [8, 16], 64, 64, 1, 4
    if args.estimate: return estimate(args)
    train_set, test = make_shapes(args.n_train, size=16, seed=0), make_shapes(args.n_test, size=16, seed=1)
    results, seconds = {}, 0.0
    for seed in args.seeds:
        torch.manual_seed(seed)  # the reference: did the arms learn? (an untrained model of the seed)
        results['untrained', 0, seed] = scores(TinyCLIP(width=args.width, blocks=3, embed_dim=64).eval(), test)
        for loss, batch in arms(args.batches):
            model, s = train(loss, batch, train_set, args.epochs, args.lr, seed, args.width)
            seconds += s
            results[loss, batch, seed] = scores(model, test)
            print(f"seed {seed} {loss:20s} batch {batch:4d}: {s:6.1f} s  "
                  + '  '.join(f"{k} {v:.3f}" for k, v in results[loss, batch, seed].items()), flush=True)
    verdicts = {}
    for loss, batch in arms(args.batches):
        if len(args.seeds) < 2: continue
        base = ('untrained', 0) if loss == 'clip' else ('clip', batch)  # clip: did it learn?
        for metric in results[loss, batch, args.seeds[0]]:
            d = paired_difference([results[loss, batch, s][metric] for s in args.seeds],
                                  [results[(*base, s)][metric] for s in args.seeds])
            name = f"{loss} - {base[0]}, batch {batch}, {metric}"
            verdicts[name] = f"{d:.3f}"
            print(f"{name:60s} {d:.3f}")
    print(json.dumps({'machine': platform.processor() or platform.machine(), 'training_s': round(seconds, 1),
                      'verdicts': verdicts,
                      'results': {f"{l}|{b}|{s}": r for (l, b, s), r in results.items()}}))

def estimate(args) -> None:
    "Time `probe` steps of every arm at full width; scale to the full run's steps, arms and seeds."
    probe = 4 if args.quick else 20
    cost = {}
    for loss, batch in arms(args.batches):
        data = make_shapes(probe * batch, size=16, seed=0)
        _, s = train(loss, batch, data, 1, args.lr, 0, args.width)
        full_steps = args.epochs * (args.n_train // batch)
        cost[f"{loss}|{batch}"] = round(s / probe * full_steps * len(args.seeds), 1)
        print(f"{loss:20s} batch {batch:4d}: {s / probe * 1000:7.1f} ms/step, {full_steps} steps x "
              f"{len(args.seeds)} seeds = {cost[f'{loss}|{batch}']:.0f} s", flush=True)
    total = sum(cost.values())
    print(f"training alone at full size: about {total:.0f} s ({total / 60:.1f} min) on this machine, one thread")
    print(json.dumps({'estimate_s': round(total, 1), 'per_arm_s': cost}))

if __name__ == '__main__': main()
