#!/usr/bin/env python3
"""The RandAugment ImageNet train pipeline, images/s: recordflow (rf.vision.Compose) against
torchvision.transforms.v2 + PyTorch DataLoader and against NVIDIA DALI (CPU), over the same
TFRecord shards, on the same number of cores.

    python bench/bench_randaugment.py [--threads N] [--runs 3] [--batches 12] [--images 1024]

Pipeline (every contender): read the shards (shuffled) -> decode + RandomResizedCrop(224)
(area 0.08-1, aspect 3/4-4/3) -> RandomHorizontalFlip -> RandAugment(num_ops=2, magnitude=9)
-> float32 scaled to [0, 1] -> Normalize(ImageNet mean, std) -> batches of --batch CHW images.

- recordflow: ``rf.Dataset.from_files(files, shuffle_files=True).interleave().shuffle(B)
  .repeat().batch(batch, drop_remainder=True).map(rf.vision.Compose([RandomResizedCrop(224),
  RandomHorizontalFlip(), RandAugment(2, 9), ToDtype(float32, scale=True), Normalize()]))
  .prefetch()``, the engine capped at --threads threads.
- torchvision: an IterableDataset over the shards (each worker reads its share of every
  shard's records by the .idx offsets), PIL decode (``Image.draft`` is not used: torchvision's
  recipe does not), torchvision.transforms.v2 ``Compose([RandomResizedCrop(224, antialias=True),
  RandomHorizontalFlip(), RandAugment(2, 9), PILToTensor(), ToDtype(float32, scale=True),
  Normalize()])`` on the PIL image (the v2 docs' fast path: geometric and policy ops on PIL /
  uint8, float last), ``DataLoader(batch_size, num_workers=--threads, persistent_workers=True,
  prefetch_factor=4, pin_memory=False)``, torch.set_num_threads(1) per worker (its default).
- DALI (CPU): ``pipeline_def(batch_size, num_threads=--threads, device_id=None)``,
  ``fn.readers.tfrecord`` with the .idx files (random_shuffle), ``fn.decoders.image_random_crop``
  (same area and aspect ranges), ``fn.resize`` 224x224, DALI's own
  ``nvidia.dali.auto_aug.rand_augment.rand_augment(n=2, m=9)``, ``fn.crop_mirror_normalize``
  (coin-flip mirror) to float32 CHW; ``pipe.run()`` per batch.

Each run is a fresh process (this file with --worker); contenders alternate in rotating
order; --warmup batches are excluded; images/s (wall) and CPU-s per 1000 images (the
process and its DataLoader workers) are medians of --runs runs, and the ratios are printed per
peer (> 1: recordflow is faster). The shards (ImageNet-like
photos from recordflow.datasets, JPEG quality 85-97, written by ``recordflow convert`` with
.idx files) are cached under bench/data/randaug-*.

torch and DALI run in --peers-python (default: bench/.venv-peers/bin/python where it exists
and imports them, else this interpreter). The worker imports recordflow only for its own
contender.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZE = 224
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
IMAGE_KEY = "image/encoded"
LABEL_KEY = "image/class/label"
QUALITY = (85, 97)
CONTENDERS = ["recordflow", "torch", "dali"]
LABELS = {"recordflow": "recordflow Compose", "torch": "torchvision v2 + DataLoader",
          "dali": "DALI (CPU) + auto_aug.rand_augment"}


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


# ----------------------------------------------------------------------------- data
def make_data(images: int, shards: int) -> list[str]:
    """ImageNet-like JPEG shards with .idx files, generated once and reused (suite.py's data,
    in a folder of their own per shard count)."""
    import suite
    classes = 10
    m = suite.prepare_data(HERE / "data", classes, max(1, images // classes), shards,
                           tag=f"randaug-s{shards}")
    return [str(Path(m["dir"]) / "shards" / f) for f in m["files"]]


# ----------------------------------------------------------------------------- contenders
def rf_stream(files, batch, threads, shuffle, seed):
    import recordflow as rf
    v = rf.vision
    op = v.Compose([v.RandomResizedCrop(SIZE), v.RandomHorizontalFlip(),
                    v.RandAugment(num_ops=2, magnitude=9), v.ToDtype("float32", scale=True),
                    v.Normalize(MEAN, STD)], layout="CHW", seed=seed)
    ds = (rf.Dataset.from_files(files, shuffle_files=True, seed=seed)
          .interleave()
          .shuffle(shuffle, seed=seed)
          .repeat()
          .batch(batch, drop_remainder=True)
          .map(op)
          .prefetch())
    for b in ds.iterator(max_threads=threads):
        yield b["image"]


def _import_torchvision_v2():
    """torchvision.transforms.v2, also where its compiled ops do not load (torchvision_compat)."""
    sys.path.insert(0, str(HERE.parent / "python" / "tests"))
    from torchvision_compat import ensure_torchvision
    if not ensure_torchvision():
        raise ImportError("torchvision is not installed (scripts/setup.sh --bench)")
    import torchvision.transforms.v2 as T
    return T


def _example_image_label(payload: bytes) -> tuple[bytes, int]:
    """image/encoded and image/class/label of a serialized tf.train.Example (the protobuf wire
    format read directly: the torch contender needs neither TensorFlow nor recordflow)."""
    def varint(b, i):
        shift = result = 0
        while True:
            c = b[i]
            i += 1
            result |= (c & 0x7F) << shift
            if c < 0x80:
                return result, i
            shift += 7

    def fields(b):
        i, n = 0, len(b)
        while i < n:
            key, i = varint(b, i)
            wt = key & 7
            if wt == 2:
                ln, i = varint(b, i)
                yield key >> 3, b[i:i + ln]
                i += ln
            elif wt == 0:
                v, i = varint(b, i)
                yield key >> 3, v
            else:
                raise ValueError(f"unexpected wire type {wt} in an Example")

    image, label = b"", -1
    for f, features in fields(payload):            # Example.features
        for f2, entry in fields(features):          # Features.feature map entries
            name, value = b"", b""
            for f3, v in fields(entry):
                if f3 == 1:
                    name = bytes(v)
                else:
                    value = v
            for kind, lst in fields(value):         # Feature: 1 bytes, 2 float, 3 int64
                if name == IMAGE_KEY.encode() and kind == 1:
                    image = bytes(next(v for _, v in fields(lst)))
                elif name == LABEL_KEY.encode() and kind == 3:
                    for _, packed in fields(lst):
                        label = varint(packed, 0)[0] if isinstance(packed, (bytes, memoryview)) \
                            else packed
    return image, label


def torch_loader(files, batch, threads, shuffle, seed):
    import io

    import numpy as np
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info

    T = _import_torchvision_v2()
    tr = T.Compose([T.RandomResizedCrop(SIZE, antialias=True), T.RandomHorizontalFlip(),
                    T.RandAugment(num_ops=2, magnitude=9), T.PILToTensor(),
                    T.ToDtype(torch.float32, scale=True), T.Normalize(MEAN, STD)])
    index = {f: [tuple(map(int, ln.split())) for ln in open(f + ".idx") if ln.strip()]
             for f in files}

    class Shards(IterableDataset):
        """Every shard in turn, a new order each epoch; each worker reads every nw-th record
        of each shard (by the .idx offsets) through a shuffle buffer of shuffle / nw."""

        def __iter__(self):
            info = get_worker_info()
            wid, nw = (info.id, info.num_workers) if info else (0, 1)
            rng = np.random.default_rng(seed + wid)
            buf = []
            while True:
                order = list(files)
                rng.shuffle(order)
                for f in order:
                    with open(f, "rb") as fh:
                        for off, size in index[f][wid::nw]:
                            fh.seek(off)
                            rec = fh.read(size)
                            (n,) = struct.unpack_from("<Q", rec, 0)
                            buf.append(rec[12:12 + n])
                            if len(buf) >= max(1, shuffle // nw):
                                j = int(rng.integers(len(buf)))
                                buf[j], buf[-1] = buf[-1], buf[j]
                                jpeg, label = _example_image_label(buf.pop())
                                img = Image.open(io.BytesIO(jpeg)).convert("RGB")
                                yield tr(img), label

    return DataLoader(Shards(), batch_size=batch, num_workers=threads, drop_last=True,
                      persistent_workers=True, prefetch_factor=4)


def torch_stream(files, batch, threads, shuffle, seed):
    import torch
    torch.manual_seed(seed)
    for images, _ in torch_loader(files, batch, threads, shuffle, seed):
        yield images


def dali_pipeline(files, batch, threads, shuffle, seed):
    import nvidia.dali.tfrecord as tfrec
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.auto_aug import rand_augment

    @pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=seed,
                  prefetch_queue_depth=2, enable_conditionals=True)
    def pipe():
        inputs = fn.readers.tfrecord(
            path=list(files), index_path=[f + ".idx" for f in files],
            features={IMAGE_KEY: tfrec.FixedLenFeature((), tfrec.string, ""),
                      LABEL_KEY: tfrec.FixedLenFeature([1], tfrec.int64, -1)},
            random_shuffle=True, initial_fill=shuffle, name="Reader")
        images = fn.decoders.image_random_crop(inputs[IMAGE_KEY], device="cpu",
                                               output_type=types.RGB,
                                               random_aspect_ratio=[3 / 4, 4 / 3],
                                               random_area=[0.08, 1.0], num_attempts=10)
        images = fn.resize(images, resize_x=SIZE, resize_y=SIZE)
        images = rand_augment.rand_augment(images, n=2, m=9)
        mirror = fn.random.coin_flip(probability=0.5)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          mean=[m * 255 for m in MEAN],
                                          std=[s * 255 for s in STD], mirror=mirror)
        return images, inputs[LABEL_KEY]

    p = pipe()
    p.build()
    return p


def dali_stream(files, batch, threads, shuffle, seed):
    p = dali_pipeline(files, batch, threads, shuffle, seed)
    while True:
        images, _ = p.run()
        yield images


STREAMS = {"recordflow": rf_stream, "torch": torch_stream, "dali": dali_stream}


def _batch_shape(images) -> tuple:
    if hasattr(images, "shape") and not callable(images.shape):
        return tuple(images.shape)
    return (len(images),) + tuple(images.at(0).shape)  # DALI TensorListCPU


def worker(args) -> None:
    stream = STREAMS[args.worker](args.files, args.batch, args.threads, args.shuffle, args.seed)
    shape = None
    for _ in range(args.warmup):
        shape = _batch_shape(next(stream))
    cpu0, t0 = _tree_cpu(), time.perf_counter()
    n = 0
    for _ in range(args.batches):
        n += _batch_shape(next(stream))[0]
    dt = time.perf_counter() - t0
    cpu = _tree_cpu() - cpu0
    print("RESULT " + json.dumps({"images": n, "seconds": dt, "cpu_seconds": cpu,
                                  "shape": shape}), flush=True)
    os._exit(0)  # DataLoader workers and DALI threads: no orderly teardown needed here


def _tree_cpu() -> float:
    """CPU seconds of this process and its live children (DataLoader workers)."""
    total = 0.0
    pids = [os.getpid()]
    try:
        pids += [int(p) for p in open(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
                 .read().split()]
    except OSError:
        pass
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            st = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            total += (int(st[11]) + int(st[12])) / tick
        except OSError:
            pass
    return total


# ----------------------------------------------------------------------------- driver
def _python_for(contender: str, peers: str | None) -> str:
    if contender == "recordflow":
        return sys.executable
    module = {"torch": "torch", "dali": "nvidia.dali"}[contender]
    for py in ([peers] if peers else []) + [str(HERE / ".venv-peers" / "bin" / "python")]:
        if py and os.path.exists(py) and subprocess.run(
                [py, "-c", f"import {module}"], capture_output=True).returncode == 0:
            return py
    return sys.executable


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=cores(), help="cores for every contender")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=3, help="batches excluded from the timing")
    ap.add_argument("--batches", type=int, default=12, help="timed batches per run")
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--shuffle", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default=",".join(CONTENDERS))
    ap.add_argument("--peers-python", default=None)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--worker", choices=CONTENDERS, help=argparse.SUPPRESS)
    ap.add_argument("--files", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    files = make_data(args.images, args.shards)
    names = [c for c in CONTENDERS if c in args.only.split(",")]
    pythons = {c: _python_for(c, args.peers_python) for c in names}
    print(f"RandAugment train pipeline: {args.threads} threads/workers, batch {args.batch}, "
          f"{args.warmup} warm-up + {args.batches} timed batches, {args.runs} runs, "
          f"{len(files)} shards", flush=True)
    rates: dict[str, list[float]] = {c: [] for c in names}
    cpu: dict[str, list[float]] = {c: [] for c in names}
    errors: dict[str, str] = {}
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    for run in range(args.runs):
        for k in range(len(names)):
            c = names[(run + k) % len(names)]
            if c in errors:
                continue
            cmd = [pythons[c], __file__, "--worker", c, "--threads", str(args.threads),
                   "--batch", str(args.batch), "--warmup", str(args.warmup), "--batches",
                   str(args.batches), "--shuffle", str(args.shuffle), "--seed",
                   str(args.seed + run), "--files", *files]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                                   env=env)
            except subprocess.TimeoutExpired:
                errors[c] = f"timed out after {args.timeout:.0f} s"
                continue
            res = next((json.loads(ln[7:]) for ln in r.stdout.splitlines()
                        if ln.startswith("RESULT ")), None)
            if res is None:
                errors[c] = f"exit {r.returncode}: " + " | ".join(r.stderr.strip().splitlines()[-4:])
                continue
            rates[c].append(res["images"] / res["seconds"])
            cpu[c].append(res["cpu_seconds"] / res["images"] * 1000)
            print(f"  run {run + 1} {c}: {rates[c][-1]:.0f} images/s, shape {res['shape']}",
                  flush=True)
    med = {c: statistics.median(v) for c, v in rates.items() if v}
    mcpu = {c: statistics.median(v) for c, v in cpu.items() if v}
    print(f"\n{'contender':38s} {'images/s':>9s} {'rf / peer':>10s} {'CPU-s/1000 img':>15s} "
          f"{'peer / rf':>10s}")
    for c in names:
        if c not in med:
            print(f"{LABELS[c]:38s} {'-':>9s} {'-':>10s} {'-':>15s} {'-':>10s}  ({errors.get(c)})")
            continue
        peer = c != "recordflow" and "recordflow" in med
        ratio = f"{med['recordflow'] / med[c]:.2f}x" if peer else ""
        cratio = f"{mcpu[c] / mcpu['recordflow']:.2f}x" if peer else ""
        print(f"{LABELS[c]:38s} {med[c]:9.0f} {ratio:>10s} {mcpu[c]:15.1f} {cratio:>10s}"
              f"  (runs: {', '.join(f'{r:.0f}' for r in rates[c])})")
    print("images/s: wall time, all --threads cores; CPU-s/1000 img: CPU time of the process "
          "and its workers (the per-core cost, robust to other load on the machine).")
    for c, e in errors.items():
        print(f"{c}: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
