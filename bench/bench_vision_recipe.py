"""Images/s of rf.vision.imagenet_train (and an equivalent rf.vision.Compose recipe) on a small
in-memory JPEG set: a quick check that the preset, built from composable ops, stays as fast.

    python bench/bench_vision_recipe.py [--images 512] [--runs 3]

Prints the median of --runs timed epochs (one warm-up epoch first) per op.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time

import numpy as np
from PIL import Image

import recordflow as rf


def _images(n: int, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        w, h = (500, 375) if i % 2 else (375, 500)
        # Smooth gradients plus noise: JPEG sizes close to photos (~40-60 KB).
        y, x = np.mgrid[0:h, 0:w]
        base = np.stack([(x * 255 // w), (y * 255 // h), ((x + y) * 255 // (w + h))], -1)
        img = np.clip(base + rng.normal(0, 20, (h, w, 3)), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, "JPEG", quality=90)
        out.append(rf.Example({"image/encoded": buf.getvalue(),
                               "image/class/label": i % 1000}).serialize())
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--compose", action="store_true", help="also time the Compose recipe")
    args = ap.parse_args()
    records = _images(args.images)
    ops = {"imagenet_train": lambda: rf.vision.imagenet_train(224, seed=0)}
    if args.compose and hasattr(rf.vision, "Compose"):
        v = rf.vision
        ops["Compose(RRC, flip, ToDtype, Normalize)"] = lambda: v.Compose(
            [v.RandomResizedCrop(224), v.RandomHorizontalFlip(), v.ToDtype("float32", scale=True),
             v.Normalize(rf.vision.IMAGENET_MEAN, rf.vision.IMAGENET_STD)], layout="HWC", seed=0)
    for name, make in ops.items():
        ds = rf.Dataset.from_records(records).batch(args.batch).map(make())
        for _ in ds:  # warm-up epoch
            pass
        rates = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            n = sum(int(b["image"].shape[0]) for b in ds)
            rates.append(n / (time.perf_counter() - t0))
        print(f"{name}: {statistics.median(rates):.0f} images/s (median of {args.runs}: "
              + ", ".join(f"{r:.0f}" for r in rates) + ")")


if __name__ == "__main__":
    main()
