#!/usr/bin/env python3
"""Conversion speed: `recordflow convert` against the usual TensorFlow script, same images,
same run.

The images: an ImageNet-like folder from recordflow.datasets (real photos that ship with
scikit-image / scikit-learn / opencv-doc, cropped and rescaled to ImageNet's size spread),
generated once under bench/data/ (gitignored) and reused.

Contenders, each writing train/validation shards with a 10% stratified validation split:
  recordflow (CLI)        `recordflow convert SRC DST --val-fraction 0.1 --shards N` (all cores;
                          fsyncs every shard before publishing it, as by default)
  recordflow --no-sync    the same without fsync (the TF script does not fsync either)
  recordflow (1 thread)   the default with --threads 1
  TF + decode_jpeg        the usual script (as TF models' build_imagenet_data.py): sorted class
                          folders, open().read(), tf.io.decode_jpeg for the dimensions,
                          tf.train.Example per image, tf.io.TFRecordWriter per shard
  TF + PIL header         the same, with PIL.Image.open(...).size instead of decoding (a faster
                          variant of the usual script)
Every run starts with all images in the page cache (one untimed read pass first). Reported:
median wall time of --runs runs (after --warmup), images/s, and rf / TF ratios.

    python bench/bench_convert.py [--classes 20] [--images-per-class 100] [--runs 3]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def find_cli() -> str:
    exe = os.path.join(os.path.dirname(sys.executable), "recordflow")
    return exe if os.path.exists(exe) else (shutil.which("recordflow") or "recordflow")


def warm(src: str) -> int:
    n = 0
    for d, _, files in os.walk(src):
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                n += len(fh.read())
    return n


def tf_script(src: str, dst: str, shards: int, val_shards: int, dims: str) -> int:
    """The usual way: one Python thread, tf.train.Example + tf.io.TFRecordWriter."""
    import tensorflow as tf
    from PIL import Image

    classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    files = []
    for label, name in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(src, name))):
            files.append((os.path.join(src, name, f), label, name))
    rng = random.Random(0)
    by_class: dict[int, list] = {}
    for item in files:
        by_class.setdefault(item[1], []).append(item)
    train, val = [], []
    for label in sorted(by_class):
        items = by_class[label]
        rng.shuffle(items)
        n_val = round(0.1 * len(items))
        val += items[:n_val]
        train += items[n_val:]
    rng.shuffle(train)
    rng.shuffle(val)

    def b(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    def i(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))

    os.makedirs(dst, exist_ok=True)
    written = 0
    for split, items, count in (("train", train, shards), ("validation", val, val_shards)):
        for s in range(count):
            part = items[len(items) * s // count: len(items) * (s + 1) // count]
            path = os.path.join(dst, f"{split}-{s:05d}-of-{count:05d}.tfrecord")
            with tf.io.TFRecordWriter(path) as writer:
                for filename, label, text in part:
                    with open(filename, "rb") as f:
                        data = f.read()
                    if dims == "decode":
                        shape = tf.io.decode_jpeg(data, channels=3).shape
                        height, width = int(shape[0]), int(shape[1])
                    else:
                        width, height = Image.open(io.BytesIO(data)).size
                    example = tf.train.Example(features=tf.train.Features(feature={
                        "image/encoded": b(data),
                        "image/format": b(b"JPEG"),
                        "image/height": i(height),
                        "image/width": i(width),
                        "image/channels": i(3),
                        "image/colorspace": b(b"RGB"),
                        "image/class/label": i(label),
                        "image/class/text": b(text.encode()),
                        "image/filename": b(os.path.basename(filename).encode()),
                    }))
                    writer.write(example.SerializeToString())
                    written += 1
    return written


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--classes", type=int, default=20)
    p.add_argument("--images-per-class", type=int, default=100)
    p.add_argument("--shards", type=int, default=16)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--data-dir", default=os.path.join(HERE, "data"))
    p.add_argument("--out-dir", default=os.path.join(HERE, "out"))
    args = p.parse_args()

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # noqa: F401  (import time is not measured)

    from recordflow import datasets

    src = os.path.join(args.data_dir, f"imagenet-like-{args.classes}x{args.images_per_class}")
    # Beside the folder, not in it: convert lists a file inside it as a skipped input (exit 4).
    marker = src + ".complete.json"
    if not os.path.exists(marker):
        shutil.rmtree(src, ignore_errors=True)
        t = time.perf_counter()
        info = datasets.make_imagenet_like(src, args.classes, args.images_per_class, seed=0)
        with open(marker, "w") as f:
            json.dump({k: info[k] for k in ("images", "bytes")}, f)
        print(f"generated {info['images']} images ({info['bytes'] / 1e6:.1f} MB) in "
              f"{time.perf_counter() - t:.1f} s")
    with open(marker) as f:
        info = json.load(f)
    images, nbytes = info["images"], info["bytes"]
    val_shards = max(1, round(args.shards * 0.1 / 0.9))
    cli = find_cli()
    cpus = os.cpu_count()
    print(f"{images} images, {nbytes / 1e6:.1f} MB ({nbytes / images / 1e3:.0f} KB each), "
          f"{cpus} cores, load average {os.getloadavg()[0]:.2f}")

    def rf_run(threads, sync=True):
        def run(dst):
            cmd = [cli, "convert", src, dst, "--val-fraction", "0.1", "--shards",
                   str(args.shards), "--val-shards", str(val_shards), "--no-progress",
                   "--overwrite"]
            if threads:
                cmd += ["--threads", str(threads)]
            if not sync:
                cmd += ["--no-sync"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(proc.stderr)
            return images
        return run

    contenders = [
        ("recordflow convert (CLI, all cores)", rf_run(0)),
        ("recordflow convert (CLI, all cores, --no-sync)", rf_run(0, sync=False)),
        ("recordflow convert (CLI, --threads 1)", rf_run(1)),
        ("TF script + tf.io.decode_jpeg", lambda dst: tf_script(src, dst, args.shards, val_shards, "decode")),
        ("TF script + PIL header", lambda dst: tf_script(src, dst, args.shards, val_shards, "pil")),
    ]
    results = {}
    for name, fn in contenders:
        times = []
        for r in range(args.warmup + args.runs):
            dst = os.path.join(args.out_dir, "convert")
            shutil.rmtree(dst, ignore_errors=True)
            warm(src)
            t = time.perf_counter()
            n = fn(dst)
            dt = time.perf_counter() - t
            assert n == images, (name, n)
            if r >= args.warmup:
                times.append(dt)
        results[name] = statistics.median(times)
        print(f"  {name:40s} {results[name]:7.2f} s  {images / results[name]:9,.0f} images/s  "
              f"(runs: {', '.join(f'{t:.2f}' for t in times)})")
    rf_all = results[contenders[0][0]]
    print("\n| Contender | Median s | Images/s | MB/s | rf (all cores) speed-up |")
    print("|---|--:|--:|--:|--:|")
    for name, _ in contenders:
        t = results[name]
        print(f"| {name} | {t:.2f} | {images / t:,.0f} | {nbytes / t / 1e6:,.0f} | "
              f"{t / rf_all:.1f}x |")
    shutil.rmtree(os.path.join(args.out_dir, "convert"), ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
