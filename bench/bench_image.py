#!/usr/bin/env python3
"""Image ops and presets: images/s per core against Pillow, OpenCV and TensorFlow.

Run pinned to one core for per-core numbers:

    taskset -c 0 python bench/bench_image.py [--images 200] [--append docs/benchmarks.md]

Same JPEGs for every contender (generated from scikit-image's photographs, Pillow-encoded at
quality 98, shorter side 300-500, ~100 KiB mean), same crops (torchvision's RandomResizedCrop
sampling from one seed) where a crop is taken. "bare full decode" is recordflow's own
libjpeg-turbo full decode (rf.vision.decode_image: ISLOW IDCT, fancy upsampling, RGB out), the
physical reference: Pillow's decode (same library, Pillow's bundled build) is listed beside it.
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import platform
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import benchlib  # noqa: E402
from PIL import Image  # noqa: E402

import recordflow as rf  # noqa: E402

MEAN = np.array(rf.vision.IMAGENET_MEAN, np.float32)
STD = np.array(rf.vision.IMAGENET_STD, np.float32)


def make_images(n: int, seed: int = 0, quality: int = 98) -> list[bytes]:
    from skimage import data
    names = ["astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "hubble_deep_field",
             "retina", "cat"]
    photos = []
    for name in names:
        try:
            a = getattr(data, name)()
        except Exception:
            continue
        if a.ndim == 3 and a.shape[2] >= 3:
            photos.append(np.ascontiguousarray(a[..., :3]))
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        src = Image.fromarray(photos[i % len(photos)])
        short = int(rng.integers(300, 501))
        w, h = src.size
        # A random crop of 70-100% of the photo, rescaled to the chosen shorter side.
        f = rng.uniform(0.7, 1.0)
        cw, ch = int(w * f), int(h * f)
        x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        im = src.crop((x, y, x + cw, y + ch))
        if rng.random() < 0.5:
            im = im.transpose(Image.FLIP_LEFT_RIGHT)
        s = short / min(im.size)
        im = im.resize((max(1, round(im.size[0] * s)), max(1, round(im.size[1] * s))), Image.BICUBIC)
        b = io.BytesIO()
        im.save(b, "JPEG", quality=quality)
        out.append(b.getvalue())
    return out


def rate(fn, items, repeat: int = 1) -> float:
    fn(items[:8])  # warm up
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn(items)
        best = min(best, time.perf_counter() - t)
    return len(items) / best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=200)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--quality", type=int, default=98,
                    help="JPEG quality (98: ~100 KiB per image, close to ImageNet's ~110 KB)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--append", default=None, help="append a markdown section to this file")
    args = ap.parse_args()
    size = args.size
    jpegs = make_images(args.images, quality=args.quality)
    dims = [Image.open(io.BytesIO(j)).size for j in jpegs]
    crops = []
    for k, (w, h) in enumerate(dims):
        crops.append(tuple(int(v) for v in rf.vision.random_resized_crop_params(w, h, 1, seed=k)[0]))
    flips = [k % 2 == 0 for k in range(len(jpegs))]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    mean_kb = np.mean([len(j) for j in jpegs]) / 1024
    print(f"{len(jpegs)} JPEGs, mean {mean_kb:.0f} KiB, {np.mean([min(d) for d in dims]):.0f} px "
          f"mean shorter side; {cores} core(s) allowed; rf kernels: {rf.vision.kernel_backend()}")
    decoded = [rf.vision.decode_image(j) for j in jpegs]
    rows = []  # (group, contender, images/s)

    def add(group, name, fn, items):
        r = rate(fn, items, args.repeat)
        rows.append((group, name, r))
        print(f"  {group:<26} {name:<46} {r:8.1f} img/s")

    idx = list(range(len(jpegs)))

    # ---- decode
    add("full decode", "recordflow (libjpeg-turbo) [bare reference]",
        lambda ii: [rf.vision.decode_image(jpegs[i]) for i in ii], idx)
    add("full decode", "Pillow", lambda ii: [np.asarray(Image.open(io.BytesIO(jpegs[i])).convert("RGB")) for i in ii], idx)
    try:
        import cv2
        cv2.setNumThreads(1)
        bufs = [np.frombuffer(j, np.uint8) for j in jpegs]
        add("full decode", "OpenCV imdecode", lambda ii: [cv2.imdecode(bufs[i], cv2.IMREAD_COLOR) for i in ii], idx)
    except ImportError:
        cv2 = None
        print("  (OpenCV not installed)")
    try:
        import tensorflow as tf
        tf.config.threading.set_inter_op_parallelism_threads(1)
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tjs = [tf.constant(j) for j in jpegs]
        dec = tf.function(lambda b: tf.io.decode_jpeg(b, channels=3))
        add("full decode", "TensorFlow decode_jpeg", lambda ii: [dec(tjs[i]) for i in ii], idx)
    except ImportError:
        tf = None
        print("  (TensorFlow not installed)")

    # ---- fused crop decode (the same RandomResizedCrop boxes)
    add("crop decode (RRC)", "recordflow fused (crop + DCT scale)",
        lambda ii: [rf.vision.decode_region(jpegs[i], crops[i], (size, size)) for i in ii], idx)
    add("crop decode (RRC)", "recordflow fused, no DCT scaling",
        lambda ii: [rf.vision.decode_region(jpegs[i], crops[i], (size, size), dct_scaling=False) for i in ii], idx)
    if tf is not None:
        tcrops = [tf.constant([c[1], c[0], c[3], c[2]]) for c in crops]
        dac = tf.function(lambda b, c: tf.image.decode_and_crop_jpeg(b, c, channels=3))
        add("crop decode (RRC)", "TensorFlow decode_and_crop_jpeg", lambda ii: [dac(tjs[i], tcrops[i]) for i in ii], idx)

    # ---- resize of decoded images to size x size (bilinear, antialiased)
    add("resize bilinear", "recordflow", lambda ii: [rf.vision.resize(decoded[i], (size, size)) for i in ii], idx)
    pil_imgs = [Image.fromarray(d) for d in decoded]
    add("resize bilinear", "Pillow BILINEAR", lambda ii: [pil_imgs[i].resize((size, size), Image.BILINEAR) for i in ii], idx)
    if cv2 is not None:
        add("resize bilinear", "OpenCV INTER_LINEAR (no antialias)",
            lambda ii: [cv2.resize(decoded[i], (size, size), interpolation=cv2.INTER_LINEAR) for i in ii], idx)
        add("resize area", "OpenCV INTER_AREA", lambda ii: [cv2.resize(decoded[i], (size, size), interpolation=cv2.INTER_AREA) for i in ii], idx)
    add("resize area", "recordflow", lambda ii: [rf.vision.resize(decoded[i], (size, size), "area") for i in ii], idx)
    if tf is not None:
        tds = [tf.constant(d) for d in decoded]
        rs = tf.function(lambda x: tf.image.resize(x, (size, size), antialias=True),
                         input_signature=[tf.TensorSpec([None, None, 3], tf.uint8)])
        add("resize bilinear", "TensorFlow resize(antialias=True)", lambda ii: [rs(tds[i]) for i in ii], idx)
    small = [np.asarray(Image.fromarray(d).resize((size, size))) for d in decoded]
    add("flip", "recordflow", lambda ii: [rf.vision.flip_left_right(small[i]) for i in ii], idx)
    add("flip", "NumPy copy of a[:, ::-1]", lambda ii: [np.ascontiguousarray(small[i][:, ::-1]) for i in ii], idx)
    add("normalize f32", "recordflow", lambda ii: [rf.vision.normalize(small[i]) for i in ii], idx)
    add("normalize f32", "NumPy", lambda ii: [(small[i].astype(np.float32) / 255 - MEAN) / STD for i in ii], idx)

    # ---- train preset: decode + RandomResizedCrop + resize + flip + normalize, batches of 32
    records = [rf.Example({"image/encoded": j, "image/class/label": k}).serialize() for k, j in enumerate(jpegs)]

    def rf_preset(op):
        def run(ii):
            n = 0
            for b in rf.Dataset.from_records([records[i] for i in ii]).batch(32).map(op):
                n += len(b["label"])
            assert n == len(ii)
        return run

    add("train preset", "recordflow imagenet_train (pipeline, batch 32)", rf_preset(rf.vision.imagenet_train(size, seed=0)), idx)

    def pil_train(ii):
        for i in ii:
            x, y, w, h = crops[i]
            im = Image.open(io.BytesIO(jpegs[i])).convert("RGB").crop((x, y, x + w, y + h)).resize((size, size), Image.BILINEAR)
            if flips[i]:
                im = im.transpose(Image.FLIP_LEFT_RIGHT)
            (np.asarray(im, np.float32) / 255 - MEAN) / STD

    add("train preset", "Pillow (torchvision-style)", pil_train, idx)
    if cv2 is not None:
        def cv_train(ii):
            for i in ii:
                x, y, w, h = crops[i]
                a = cv2.imdecode(bufs[i], cv2.IMREAD_COLOR)[y:y + h, x:x + w]
                a = cv2.resize(a, (size, size), interpolation=cv2.INTER_AREA if w > size else cv2.INTER_LINEAR)
                if flips[i]:
                    a = cv2.flip(a, 1)
                (cv2.cvtColor(a, cv2.COLOR_BGR2RGB).astype(np.float32) / 255 - MEAN) / STD
        add("train preset", "OpenCV imdecode + crop + resize", cv_train, idx)
    if tf is not None:
        def tf_map(b, c, f):
            img = tf.image.decode_and_crop_jpeg(b, c, channels=3)
            img = tf.image.resize(img, (size, size), antialias=True)
            img = tf.cond(f, lambda: tf.image.flip_left_right(img), lambda: img)
            return (img / 255.0 - MEAN) / STD

        cropv = np.array([[c[1], c[0], c[3], c[2]] for c in crops], np.int32)

        def tf_train(ii):
            ii = list(ii)
            ds = tf.data.Dataset.from_tensor_slices(([jpegs[i] for i in ii], cropv[ii], [flips[i] for i in ii]))
            ds = ds.map(tf_map, num_parallel_calls=1).batch(32)
            for _ in ds:
                pass
        add("train preset", "TensorFlow decode_and_crop_jpeg (tf.data)", tf_train, idx)

    # ---- eval preset: shorter side 256, center crop 224, normalize
    add("eval preset", "recordflow imagenet_eval (pipeline, batch 32)", rf_preset(rf.vision.imagenet_eval(size, 256)), idx)

    def pil_eval(ii):
        for i in ii:
            im = Image.open(io.BytesIO(jpegs[i])).convert("RGB")
            w, h = im.size
            s = 256 / min(w, h)
            im = im.resize((max(256, int(w * s)), max(256, int(h * s))), Image.BILINEAR)
            w, h = im.size
            l, t = round((w - size) / 2), round((h - size) / 2)
            (np.asarray(im.crop((l, t, l + size, t + size)), np.float32) / 255 - MEAN) / STD

    add("eval preset", "Pillow (torchvision-style)", pil_eval, idx)
    if tf is not None:
        def tf_eval_map(b):
            return benchlib.tf_decode_eval(tf, b, size, 256)

        def tf_eval(ii):
            ds = tf.data.Dataset.from_tensor_slices([jpegs[i] for i in ii]).map(tf_eval_map, num_parallel_calls=1).batch(32)
            for _ in ds:
                pass
        add("eval preset", "TensorFlow decode_jpeg + resize + crop (tf.data)", tf_eval, idx)

    # ---- ratios
    by = {(g, n): r for g, n, r in rows}
    bare = by[("full decode", "recordflow (libjpeg-turbo) [bare reference]")]
    train = by[("train preset", "recordflow imagenet_train (pipeline, batch 32)")]
    lines = []
    lines.append("| Group | Contender | images/s per core | recordflow / contender |")
    lines.append("|---|---|---:|---:|")
    ours = {}
    for g, n, r in rows:
        if n.startswith("recordflow"):
            ours.setdefault(g, r)  # the first recordflow row of a group is the one compared
    for g, n, r in rows:
        ratio = "" if n.startswith("recordflow") else f"{ours.get(g, float('nan')) / r:.2f}x"
        lines.append(f"| {g} | {n} | {r:.1f} | {ratio} |")
    print()
    print("\n".join(lines))
    targets = [f"train preset / bare full decode of the same images: {train / bare:.2f}x (target >= 0.9x)"]
    tf_key = ("train preset", "TensorFlow decode_and_crop_jpeg (tf.data)")
    if tf_key in by:
        targets.append(f"train preset / TensorFlow's fused decode_and_crop_jpeg path: {train / by[tf_key]:.2f}x (target >= 1.5x)")
    print("\n".join(targets))
    if args.append:
        with open(args.append, "a") as f:
            f.write("\n## Image ops\n\n")
            f.write(f"{datetime.date.today().isoformat()}, `taskset -c 0 python bench/bench_image.py "
                    f"--images {args.images}` ({platform.processor() or platform.machine()}, "
                    f"{cores} core allowed, recordflow kernels: {rf.vision.kernel_backend()}). "
                    f"{len(jpegs)} JPEGs from scikit-image photographs (Pillow quality {args.quality}, mean "
                    f"{mean_kb:.0f} KiB, shorter side 300-500); crops: torchvision RandomResizedCrop "
                    f"sampling, the same boxes for every contender; output {size}x{size}. "
                    "Per-image Python calls for single ops (the call overhead is included); presets "
                    "run as pipelines with batch 32 (recordflow's Dataset, tf.data with "
                    "num_parallel_calls=1). Bare full decode = recordflow's own libjpeg-turbo full "
                    "decode (ISLOW, fancy upsampling, RGB).\n\n")
            f.write("\n".join(lines) + "\n\n")
            f.write("\n".join(f"- {t}" for t in targets) + "\n")


if __name__ == "__main__":
    main()
