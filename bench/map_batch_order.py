#!/usr/bin/env python3
"""The order a tf.data user writes against the best order, in one run:

    rf.Dataset...map(rf.vision.imagenet_train(224)).batch(64)     # "map then batch" (tf.data's)
    rf.Dataset...batch(64).map(rf.vision.imagenet_train(224))     # "batch then map" (best)

    python bench/map_batch_order.py [--images 400] [--runs 5] [--batch 64] [--size 224]

Data: an ImageNet-like folder from recordflow.datasets (real photos, ~300-500 px JPEGs), converted
with rf.convert into bench/data/map_batch_order/ (gitignored; reused while its manifest matches);
the files are read once before timing so that they are in the page cache.

Each run consumes one epoch (every batch's image touched) and measures wall time and the
process's CPU time (all threads); runs alternate between the two orders, and the median of each
is reported: images/s, CPU ms per image, and the ratios (map-then-batch / batch-then-map). The
static optimisation pass (docs/pipeline.md) runs map-then-batch as batch-then-map, so the
ratios should be within noise of 1.00 (target: the written order costs < 5%).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import time

import recordflow as rf

HERE = os.path.dirname(os.path.abspath(__file__))


def make_data(images: int, out: str) -> list[str]:
    manifest = os.path.join(out, "manifest.json")
    want = {"images": images, "version": 1}
    if os.path.exists(manifest) and json.load(open(manifest)) == want:
        return sorted(glob.glob(os.path.join(out, "train-*.tfrecord")))
    from recordflow import datasets
    classes = 10
    with tempfile.TemporaryDirectory(prefix="rf-mbo-") as tmp:
        datasets.make_imagenet_like(tmp, classes=classes, images_per_class=-(-images // classes))
        os.makedirs(out, exist_ok=True)
        for old in glob.glob(os.path.join(out, "train-*")):
            os.remove(old)
        rf.convert(tmp, out, shards=4, seed=0, overwrite=True)
    json.dump(want, open(manifest, "w"))
    return sorted(glob.glob(os.path.join(out, "train-*.tfrecord")))


def pipeline(files: list[str], order: str, batch: int, size: int) -> rf.Dataset:
    op = rf.vision.imagenet_train(size, seed=0)
    ds = rf.Dataset.from_files(files).interleave(cycle_length=2).shuffle(256, seed=0)
    if order == "map_batch":
        ds = ds.map(op).batch(batch, drop_remainder=True)
    else:
        ds = ds.batch(batch, drop_remainder=True).map(op)
    return ds.prefetch()


def run_once(ds: rf.Dataset) -> tuple[int, float, float]:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    n = 0
    checksum = 0.0
    for b in ds:
        img = b["image"]
        n += img.shape[0]
        checksum += float(img[0, 0, 0, 0]) + float(img[-1, -1, -1, -1])
    return n, time.perf_counter() - wall0, time.process_time() - cpu0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--images", type=int, default=400)
    p.add_argument("--runs", type=int, default=5, help="runs of each order (>= 3), alternating")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--data", default=os.path.join(HERE, "data", "map_batch_order"))
    args = p.parse_args(argv)
    if args.runs < 3:
        p.error("--runs must be >= 3 (medians)")
    files = make_data(args.images, args.data)
    for f in files:  # into the page cache
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass
    orders = {"map_batch": pipeline(files, "map_batch", args.batch, args.size),
              "batch_map": pipeline(files, "batch_map", args.batch, args.size)}
    for name, ds in orders.items():
        print(f"{name:10s} plan: {ds.describe()}")
    run_once(orders["batch_map"])  # warm-up (thread pool, output buffers), not counted
    results = {k: [] for k in orders}
    for r in range(args.runs):
        for name in (("map_batch", "batch_map") if r % 2 == 0 else ("batch_map", "map_batch")):
            n, wall, cpu = run_once(orders[name])
            results[name].append((n / wall, 1e3 * cpu / n))
            print(f"run {r} {name:10s} {n} images  {n / wall:8.1f} images/s  "
                  f"{1e3 * cpu / n:6.2f} CPU ms/image", file=sys.stderr)
    med = {k: (statistics.median(x for x, _ in v), statistics.median(c for _, c in v))
           for k, v in results.items()}
    print(f"\n{'order':12s} {'images/s':>10s} {'CPU ms/image':>13s}   (median of {args.runs} runs, "
          f"{n} images of {args.size}x{args.size}, batch {args.batch}, {os.cpu_count()} cores)")
    for k in ("map_batch", "batch_map"):
        print(f"{k:12s} {med[k][0]:10.1f} {med[k][1]:13.2f}")
    speed = med["map_batch"][0] / med["batch_map"][0]
    cpu = med["map_batch"][1] / med["batch_map"][1]
    print(f"ratio map_batch / batch_map: images/s {speed:.3f}, CPU per image {cpu:.3f} "
          f"(target: images/s >= 0.95)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
