#!/usr/bin/env python3
"""One contender of the image-pipeline suite (bench/suite.py), in a process of its own.

Over 600 lines: one pipeline builder per contender, behind one timing loop.

    python bench/suite_worker.py CONTENDER MODE --files F... [--warmup-batches W] [--batches N]
    python bench/suite_worker.py CONTENDER check --files F... --check-out X.npz

CONTENDER: recordflow | tfdata | torch | dali | spdl | grain | ffcv. MODE: train | eval | check.

Builds the contender's pipeline on the given TFRecord shards (each with FILE.idx), takes the
first batch (time to first batch, from just before the pipeline is built), consumes W warm-up
batches, then times N batches (wall and CPU seconds of this process and all its descendants,
e.g. DataLoader workers), sampling the memory of the whole process tree meanwhile. Prints one
JSON line on stdout. Batches are consumed in each library's native form (NumPy for recordflow,
EagerTensor for tf.data, torch.Tensor for the DataLoader, TensorListCPU for DALI): a training
loop would take them as they come.

This file must not import recordflow at module level: torch and DALI run in a separate
virtualenv (bench/.venv-peers) without it.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import threading
import time

BATCH = 256
SIZE = 224
RESIZE = 256
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
IMAGE_KEY = "image/encoded"
LABEL_KEY = "image/class/label"
CHECK_IMAGES = 8


# ----------------------------------------------------------------------------- process tree
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _tree_pids(root: int) -> list[int]:
    """root and all its descendants (through /proc/PID/task/TID/children)."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def _cpu_of(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime
    except (OSError, IndexError, ValueError):
        return None


def _pss_rss_of(pid: int) -> tuple[int, int]:
    pss = rss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
                elif line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
    except OSError:
        pass
    return pss, rss


# The key of a CPU snapshot that holds minus the monitor's own CPU time: the samples read /proc
# from a thread of the measured process (~1.4% of a core at 0.1 s), which is harness work, not
# the contender's, so cpu_between subtracts it. No process of the tree has pid 0.
MONITOR_KEY = 0


class TreeMonitor:
    """Samples the process tree every `interval` s: peak PSS and RSS summed over the tree, and
    the last CPU time seen of every pid (so a child that exits between two samples still counts
    up to its last sample). Its own sampling CPU time is kept apart (MONITOR_KEY)."""

    def __init__(self, interval: float = 0.1):
        self.interval = interval
        self.root = os.getpid()
        self.peak_pss = self.peak_rss = 0
        self.cpu_seen: dict[int, float] = {}
        self.own_cpu_s = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self) -> None:
        t0 = time.thread_time()
        pss = rss = 0
        cpu = {}
        for pid in _tree_pids(self.root):
            p, r = _pss_rss_of(pid)
            pss += p
            rss += r
            c = _cpu_of(pid)
            if c is not None:
                cpu[pid] = c
        with self._lock:
            self.peak_pss = max(self.peak_pss, pss)
            self.peak_rss = max(self.peak_rss, rss)
            self.cpu_seen.update(cpu)
            self.own_cpu_s += time.thread_time() - t0

    def cpu_snapshot(self) -> dict[int, float]:
        self.sample()
        with self._lock:
            return dict(self.cpu_seen) | {MONITOR_KEY: -self.own_cpu_s}

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def machine_busy() -> float:
    """Busy CPU seconds of the whole machine (all cores) since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (sum(v) - v[3] - v[4]) / _TICK  # all but idle and iowait


def cpu_between(a: dict[int, float], b: dict[int, float]) -> float:
    """CPU seconds of the tree from snapshot a to b, less the monitor's own (MONITOR_KEY)."""
    return sum(v - a.get(pid, 0.0) for pid, v in b.items())


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


# ----------------------------------------------------------------------------- contenders
def rf_stream(files, mode, shuffle, seed=0):
    import recordflow as rf
    if mode == "train":
        ds = (rf.Dataset.from_files(files, shuffle_files=True, seed=seed)
              .interleave()
              .shuffle(shuffle, seed=seed)
              .repeat()
              .batch(BATCH, drop_remainder=True)
              .map(rf.vision.imagenet_train(SIZE, seed=seed))
              .prefetch())
    else:
        ds = (rf.Dataset.from_files(files)
              .interleave()
              .repeat()
              .batch(BATCH, drop_remainder=True)
              .map(rf.vision.imagenet_eval(SIZE, RESIZE))
              .prefetch())
    for b in ds:
        yield b["image"], b["label"]


def tf_stream(files, mode, shuffle, seed=0):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import benchlib
    import tensorflow as tf
    ds = tf.data.Dataset.from_tensor_slices(files)
    if mode == "train":
        ds = ds.shuffle(len(files), seed=seed)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(len(files), 16),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    if mode == "train":
        ds = ds.shuffle(shuffle, seed=seed)
    ds = ds.repeat()
    fn = benchlib.tf_imagenet_train_map(tf, SIZE) if mode == "train" else \
        benchlib.tf_imagenet_eval_map(tf, SIZE, RESIZE)
    ds = (ds.map(fn, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
          .batch(BATCH, drop_remainder=True)
          .prefetch(tf.data.AUTOTUNE))
    for image, label in ds:
        yield image, label


def torch_loader(files, mode, shuffle, seed=0, workers=None):
    import numpy as np
    import torchvision.transforms as T
    from PIL import Image
    from tfrecord.torch.dataset import TFRecordDataset
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info

    if mode == "train":
        tr = T.Compose([T.RandomResizedCrop(SIZE), T.RandomHorizontalFlip(), T.ToTensor(),
                        T.Normalize(MEAN, STD)])
    else:
        tr = T.Compose([T.Resize(RESIZE), T.CenterCrop(SIZE), T.ToTensor(), T.Normalize(MEAN, STD)])

    def transform(rec):
        img = Image.open(io.BytesIO(bytes(rec[IMAGE_KEY]))).convert("RGB")
        return tr(img), int(rec[LABEL_KEY][0])

    description = {IMAGE_KEY: "byte", LABEL_KEY: "int"}

    class Shards(IterableDataset):
        """Every shard in turn (a new order each epoch for training), read with the tfrecord
        package's TFRecordDataset and its .idx file: inside a DataLoader worker the package
        reads only that worker's slice of each file (by the index), so the workers together
        read every record once per epoch."""

        def __iter__(self):
            info = get_worker_info()
            # The same file order in every worker (the seed has no worker id), so that the
            # workers' slices of one file are read at about the same time.
            rng = np.random.default_rng(seed)
            while True:  # infinite: the benchmark takes as many batches as it needs
                order = list(files)
                if mode == "train":
                    rng.shuffle(order)
                for f in order:
                    nw = info.num_workers if info else 1
                    yield from TFRecordDataset(
                        f, f + ".idx", description,
                        shuffle_queue_size=max(1, shuffle // nw) if mode == "train" else None,
                        transform=transform)

    n = workers or cores()
    return DataLoader(Shards(), batch_size=BATCH, num_workers=n, drop_last=True,
                      persistent_workers=True, prefetch_factor=2)


def torch_stream(files, mode, shuffle, seed=0):
    import torch
    torch.manual_seed(seed)
    for image, label in torch_loader(files, mode, shuffle, seed):
        yield image, label


def dali_pipeline(files, mode, shuffle, seed=0, batch=BATCH):
    import nvidia.dali.tfrecord as tfrec
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=batch, num_threads=cores(), device_id=None, seed=seed,
                  prefetch_queue_depth=2)
    def pipe():
        inputs = fn.readers.tfrecord(
            path=list(files), index_path=[f + ".idx" for f in files],
            features={IMAGE_KEY: tfrec.FixedLenFeature((), tfrec.string, ""),
                      LABEL_KEY: tfrec.FixedLenFeature([1], tfrec.int64, -1)},
            random_shuffle=(mode == "train"), initial_fill=shuffle, name="Reader")
        jpegs, labels = inputs[IMAGE_KEY], inputs[LABEL_KEY]
        if mode == "train":
            images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                                   random_aspect_ratio=[3 / 4, 4 / 3],
                                                   random_area=[0.08, 1.0], num_attempts=10)
            images = fn.resize(images, resize_x=SIZE, resize_y=SIZE)
            mirror = fn.random.coin_flip(probability=0.5)
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="HWC",
                                              mean=[m * 255 for m in MEAN],
                                              std=[s * 255 for s in STD], mirror=mirror)
        else:
            images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
            images = fn.resize(images, resize_shorter=RESIZE)
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="HWC",
                                              crop=(SIZE, SIZE), mean=[m * 255 for m in MEAN],
                                              std=[s * 255 for s in STD])
        return images, labels

    p = pipe()
    p.build()
    return p


def dali_stream(files, mode, shuffle, seed=0):
    p = dali_pipeline(files, mode, shuffle, seed)
    while True:
        images, labels = p.run()
        yield images, labels



# ----------------------------------------------------------------------------- Grain
def _read_tfrecord_payloads(path: str):
    """The records of an uncompressed TFRecord file, by its .idx (offset, framed size)."""
    with open(path, "rb") as f, open(path + ".idx") as idx:
        for line in idx:
            if not line.strip():
                continue
            offset, size = (int(x) for x in line.split())
            f.seek(offset + 12)
            yield f.read(size - 16)


def array_record_files(files: list[str]) -> list[str]:
    """The same records converted once to ArrayRecord (group_size:1, Grain's setting for random
    access), beside the TFRecord shards: FILE.arrayrecord."""
    from array_record.python.array_record_module import ArrayRecordWriter
    out = []
    for path in files:
        dst = path + ".arrayrecord"
        if not os.path.exists(dst):
            w = ArrayRecordWriter(dst + ".tmp", "group_size:1")
            for rec in _read_tfrecord_payloads(path):
                w.write(rec)
            w.close()
            os.replace(dst + ".tmp", dst)
        out.append(dst)
    return out


def random_resized_crop_box(w: int, h: int, rng) -> tuple[int, int, int, int]:
    """torchvision RandomResizedCrop's sampling (area 8-100%, log-uniform aspect 3/4-4/3,
    10 attempts, then the whole image clipped to the ratio range)."""
    import math
    area = w * h
    for _ in range(10):
        target = area * rng.uniform(0.08, 1.0)
        ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        cw = int(round(math.sqrt(target * ratio)))
        ch = int(round(math.sqrt(target / ratio)))
        if 0 < cw <= w and 0 < ch <= h:
            return int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1)), cw, ch
    if w / h < 3 / 4:
        cw, ch = w, int(round(w / (3 / 4)))
    elif w / h > 4 / 3:
        ch, cw = h, int(round(h * (4 / 3)))
    else:
        cw, ch = w, h
    return (w - cw) // 2, (h - ch) // 2, cw, ch


def _parse_image_label(serialized: bytes):
    from tensorflow.core.example import example_pb2
    ex = example_pb2.Example.FromString(serialized)
    feat = ex.features.feature
    return feat[IMAGE_KEY].bytes_list.value[0], int(feat[LABEL_KEY].int64_list.value[0])


def _to_normalized(img, box, flip: bool, orig_w: int, orig_h: int):
    import numpy as np
    from PIL import Image
    fx, fy = img.width / orig_w, img.height / orig_h
    x, y, cw, ch = box
    out = img.resize((SIZE, SIZE), Image.BILINEAR, box=(x * fx, y * fy, (x + cw) * fx, (y + ch) * fy))
    if flip:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    a = np.asarray(out, dtype=np.float32) * (1 / 255.0)
    return (a - np.asarray(MEAN, np.float32)) / np.asarray(STD, np.float32)


def _grain_train(serialized, rng):
    """Grain's random_map (rng: a NumPy Generator seeded per record): decode +
    random-resized-crop + flip + normalize (Pillow)."""
    from PIL import Image
    data, label = _parse_image_label(serialized)
    img = Image.open(io.BytesIO(data))
    w, h = img.width, img.height
    box = random_resized_crop_box(w, h, rng)
    scale = min(box[2], box[3]) // SIZE
    if scale >= 2:
        img.draft("RGB", (w // scale, h // scale))
    img = img.convert("RGB")
    return _to_normalized(img, box, rng.uniform() < 0.5, w, h), label


def _grain_eval(serialized):
    from PIL import Image
    data, label = _parse_image_label(serialized)
    img = Image.open(io.BytesIO(data))
    w, h = img.width, img.height
    s = RESIZE / min(w, h)
    cw = ch = SIZE / s  # the center SIZE x SIZE of the resized image, in source pixels
    box = ((w - cw) / 2, (h - ch) / 2, cw, ch)
    if min(w, h) // RESIZE >= 2:
        k = min(w, h) // RESIZE
        img.draft("RGB", (w // k, h // k))
    img = img.convert("RGB")
    return _to_normalized(img, box, False, w, h), label


def _grain_collate(items):
    import numpy as np
    return np.stack([i[0] for i in items]), np.array([i[1] for i in items], np.int64)


def grain_stream(files, mode, shuffle, seed=0):
    """Grain's documented practice: a random-access ArrayRecord source, a global shuffle per
    epoch in the MapDataset, the per-record map and batching in multiprocessing workers
    (mp_prefetch, one per core), read threads for the source."""
    import grain
    from absl import flags
    if not flags.FLAGS.is_parsed():  # Grain's workers read absl flags (a script has no app.run)
        flags.FLAGS.mark_as_parsed()
    src = grain.sources.ArrayRecordDataSource(array_record_files(files))
    ds = grain.MapDataset.source(src)
    if mode == "train":
        ds = ds.shuffle(seed=seed).repeat().random_map(_grain_train, seed=seed)
    else:
        ds = ds.repeat().map(_grain_eval)
    ds = ds.batch(BATCH, drop_remainder=True, batch_fn=_grain_collate)
    it_ds = ds.to_iter_dataset(grain.ReadOptions(num_threads=4, prefetch_buffer_size=2 * BATCH))
    it_ds = it_ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=cores()))
    for image, label in it_ds:
        yield image, label


def spdl_stream(files, mode, shuffle, seed=0):
    """SPDL's practice: a thread-based pipeline (PipelineBuilder): records from a source
    iterator, FFmpeg decode with the crop/scale/flip done in the decoder's filter graph
    (spdl.io.decode_packets(filter_desc=...)) on `cores()` threads, aggregate, then one
    vectorized normalize per batch."""
    import random

    import numpy as np
    import spdl.io
    from spdl.pipeline import PipelineBuilder
    rng = random.Random(seed)

    def source():
        while True:
            order = list(files)
            if mode == "train":
                rng.shuffle(order)
            buf: list = []
            for f in order:
                for rec in _read_tfrecord_payloads(f):
                    if mode != "train":
                        yield rec
                        continue
                    # A shuffle buffer of `shuffle` records, as the other contenders.
                    if len(buf) < shuffle:
                        buf.append(rec)
                        continue
                    k = rng.randrange(len(buf))
                    buf[k], rec = rec, buf[k]
                    yield rec

    def decode(serialized):
        data, label = _parse_image_label(serialized)
        packets = spdl.io.demux_image(data)
        w, h = packets.width, packets.height
        if mode == "train":
            r = np.random.default_rng()
            x, y, cw, ch = random_resized_crop_box(w, h, r)
            filt = f"crop={cw}:{ch}:{x}:{y},scale={SIZE}:{SIZE}:flags=bilinear"
            if r.uniform() < 0.5:
                filt += ",hflip"
        else:
            s = RESIZE / min(w, h)
            rw, rh = max(RESIZE, round(w * s)), max(RESIZE, round(h * s))
            filt = f"scale={rw}:{rh}:flags=bilinear,crop={SIZE}:{SIZE}"
        frames = spdl.io.decode_packets(packets, filter_desc=filt + ",format=rgb24")
        return spdl.io.to_numpy(spdl.io.convert_frames(frames)), label

    mean = np.asarray(MEAN, np.float32) * 255
    inv_std = 1 / (np.asarray(STD, np.float32) * 255)

    def collate(items):
        images = (np.stack([i[0] for i in items]).astype(np.float32) - mean) * inv_std
        return images, np.array([i[1] for i in items], np.int64)

    n = cores()
    pipeline = (PipelineBuilder()
                .add_source(source())
                .pipe(decode, concurrency=n,
                      output_order="completion" if mode == "train" else "input")
                .aggregate(BATCH, drop_last=True)
                .pipe(collate)
                .add_sink(4)
                .build(num_threads=n))
    with pipeline.auto_stop():
        for image, label in pipeline:
            yield image, label


FFCV_JPEG_QUALITY = 90  # FFCV's default and its ImageNet example's setting


def ffcv_beton(files: list[str]) -> str:
    """The same images written once to an FFCV .beton beside the shards (FFCV's DatasetWriter,
    RGBImageField(write_mode="jpg"): FFCV stores JPEG, re-encoding each decoded image at
    FFCV_JPEG_QUALITY; no resize, the images are already ImageNet-sized)."""
    import hashlib

    import numpy as np
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter
    from PIL import Image
    key = hashlib.sha1("\n".join(os.path.abspath(f) for f in files).encode()).hexdigest()[:12]
    dst = os.path.join(os.path.dirname(os.path.abspath(files[0])),
                       f"ffcv-{key}-q{FFCV_JPEG_QUALITY}.beton")
    if os.path.exists(dst):
        return dst
    records = [_parse_image_label(r) for path in files for r in _read_tfrecord_payloads(path)]

    class Source:  # FFCV's writer takes an indexable dataset of tuples, one per field
        def __len__(self):
            return len(records)

        def __getitem__(self, i):
            jpeg, label = records[i]
            return np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB")), label

    writer = DatasetWriter(dst + ".tmp", {
        "image": RGBImageField(write_mode="jpg", jpeg_quality=FFCV_JPEG_QUALITY),
        "label": IntField()}, num_workers=cores())
    writer.from_indexed_dataset(Source())
    os.replace(dst + ".tmp", dst)
    return dst


def ffcv_stream(files, mode, shuffle, seed=0):
    """FFCV's documented ImageNet practice on the CPU: Loader over the .beton (os_cache=True,
    ORDER_RANDOM for train, sequential for eval, num_workers = cores), fused
    RandomResizedCropRGBImageDecoder (scale 0.08-1, ratio 3/4-4/3) + RandomHorizontalFlip +
    NormalizeImage to float32 HWC; eval: CenterCropRGBImageDecoder(224, ratio 224/256). Batches
    arrive as NumPy arrays (no ToTensor: no GPU here)."""
    import numpy as np
    from ffcv.fields.decoders import (
        CenterCropRGBImageDecoder,
        IntDecoder,
        RandomResizedCropRGBImageDecoder,
    )
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import NormalizeImage, RandomHorizontalFlip
    beton = ffcv_beton(files)
    mean = np.array(MEAN) * 255
    std = np.array(STD) * 255
    def image_pipeline():  # fresh each time: the Loader takes the decoder out of the list
        if mode == "train":
            ops = [RandomResizedCropRGBImageDecoder((SIZE, SIZE)), RandomHorizontalFlip()]
        else:
            ops = [CenterCropRGBImageDecoder((SIZE, SIZE), ratio=SIZE / RESIZE)]
        return ops + [NormalizeImage(mean, std, np.float32)]

    order = OrderOption.RANDOM if mode == "train" else OrderOption.SEQUENTIAL
    loader = Loader(beton, batch_size=BATCH, num_workers=cores(), os_cache=True, order=order,
                    seed=seed, drop_last=mode == "train",
                    pipelines={"image": image_pipeline(), "label": [IntDecoder()]})
    if len(loader) == 0:
        raise SystemExit(f"ffcv: {beton} holds fewer than {BATCH} images")
    while True:  # epochs, as a training loop runs them (the Loader reshuffles each pass)
        for images, labels in loader:
            yield images, labels.reshape(-1)  # [B, 1] as IntDecoder gives it


STREAMS = {"recordflow": rf_stream, "tfdata": tf_stream, "torch": torch_stream,
           "dali": dali_stream, "grain": grain_stream,
           "spdl": spdl_stream, "ffcv": ffcv_stream}


def batch_len(images) -> int:
    if hasattr(images, "shape") and not callable(images.shape):
        return int(images.shape[0])
    return len(images)  # DALI TensorListCPU


# ----------------------------------------------------------------------------- check mode
def check(contender: str, files: list[str], out: str) -> dict:
    """Eval outputs of the first CHECK_IMAGES records of files[0] (in file order), and the first
    train batch's shape, dtype and label range, for the suite to compare across contenders."""
    import numpy as np
    first = [files[0]]
    if contender == "recordflow":
        import recordflow as rf
        b = next(iter(rf.Dataset.from_files(first).take(CHECK_IMAGES).batch(CHECK_IMAGES)
                      .map(rf.vision.imagenet_eval(SIZE, RESIZE))))
        ev, evl = np.asarray(b["image"]), np.asarray(b["label"])
    elif contender == "tfdata":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import benchlib
        import tensorflow as tf
        ds = (tf.data.TFRecordDataset(first).take(CHECK_IMAGES)
              .map(benchlib.tf_imagenet_eval_map(tf, SIZE, RESIZE)).batch(CHECK_IMAGES))
        im, lb = next(iter(ds))
        ev, evl = im.numpy(), lb.numpy()
    elif contender == "torch":
        import torchvision.transforms as T
        from PIL import Image
        from tfrecord.torch.dataset import TFRecordDataset
        tr = T.Compose([T.Resize(RESIZE), T.CenterCrop(SIZE), T.ToTensor(), T.Normalize(MEAN, STD)])
        ims, lbs = [], []
        # No index: with one outside a DataLoader worker the package starts at a random record.
        for rec in TFRecordDataset(first[0], None, {IMAGE_KEY: "byte", LABEL_KEY: "int"}):
            img = Image.open(io.BytesIO(bytes(rec[IMAGE_KEY]))).convert("RGB")
            ims.append(tr(img).permute(1, 2, 0).numpy())
            lbs.append(int(rec[LABEL_KEY][0]))
            if len(ims) == CHECK_IMAGES:
                break
        ev, evl = np.stack(ims), np.array(lbs)
    elif contender == "dali":
        p = dali_pipeline(first, "eval", 1, batch=CHECK_IMAGES)
        im, lb = p.run()
        ev, evl = im.as_array(), lb.as_array().reshape(-1)
    elif contender in ("spdl", "grain", "ffcv"):
        images, labels = next(STREAMS[contender](first, "eval", 1))  # file order in eval mode
        ev, evl = np.asarray(images)[:CHECK_IMAGES], np.asarray(labels)[:CHECK_IMAGES]
    else:
        raise SystemExit(f"unknown contender {contender}")

    # First train batch: shape, dtype, label range.
    images, labels = next(STREAMS[contender](files, "train", 512))
    if contender == "dali":
        arr, lab = images.as_array(), labels.as_array().reshape(-1)
    elif contender == "tfdata":
        arr, lab = images.numpy(), labels.numpy()
    elif contender == "torch":
        arr, lab = images.permute(0, 2, 3, 1).numpy(), labels.numpy()
    else:
        arr, lab = np.asarray(images), np.asarray(labels)
    np.savez(out, eval_images=ev.astype(np.float32), eval_labels=evl.astype(np.int64))
    return {"contender": contender, "train_shape": list(arr.shape), "train_dtype": str(arr.dtype),
            "train_label_min": int(lab.min()), "train_label_max": int(lab.max()),
            "train_mean": float(arr.mean()), "train_std": float(arr.std()),
            "eval_shape": list(ev.shape), "eval_labels": [int(x) for x in evl]}


# ----------------------------------------------------------------------------- timing
# Imported before the clock starts: time to first batch is the pipeline's, not the import's.
IMPORTS = {"recordflow": ["recordflow"], "tfdata": ["tensorflow"],
           "torch": ["torch", "torchvision.transforms", "tfrecord.torch.dataset", "PIL.Image"],
           "dali": ["nvidia.dali", "nvidia.dali.fn", "nvidia.dali.tfrecord"],
           "grain": ["grain", "array_record.python.array_record_module", "PIL.Image",
                     "tensorflow.core.example.example_pb2"],
           "spdl": ["spdl.io", "spdl.pipeline", "tensorflow.core.example.example_pb2"],
           "ffcv": ["ffcv.loader", "ffcv.fields.decoders", "ffcv.transforms", "PIL.Image",
                    "tensorflow.core.example.example_pb2"]}


def measure(contender: str, mode: str, files: list[str], warmup: int, batches: int,
            shuffle: int) -> dict:
    import importlib
    ti = time.perf_counter()
    for name in IMPORTS[contender]:
        importlib.import_module(name)
    import_s = time.perf_counter() - ti
    mon = TreeMonitor()
    c0 = mon.cpu_snapshot()
    t0 = time.perf_counter()
    it = STREAMS[contender](files, mode, shuffle)
    images, _ = next(it)
    ttfb = time.perf_counter() - t0
    n_first = batch_len(images)
    for _ in range(warmup):
        next(it)
    c1 = mon.cpu_snapshot()
    m1 = machine_busy()
    load1 = os.getloadavg()[0]
    t1 = time.perf_counter()
    n = 0
    for _ in range(batches):
        images, _ = next(it)
        n += batch_len(images)
    wall = time.perf_counter() - t1
    c2 = mon.cpu_snapshot()
    m2 = machine_busy()
    mon.stop()
    cpu = cpu_between(c1, c2)
    return {"contender": contender, "mode": mode, "images": n, "wall_s": wall,
            "cpu_s": cpu, "others_cores": max(0.0, (m2 - m1 - cpu) / wall),
            "load_avg": load1, "startup_cpu_s": cpu_between(c0, c1),
            "time_to_first_batch_s": ttfb, "import_s": import_s, "first_batch_images": n_first,
            "images_per_s": n / wall, "peak_pss_bytes": mon.peak_pss,
            "peak_rss_bytes": mon.peak_rss, "pids_seen": len(mon.cpu_seen), "cores": cores()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("contender", choices=sorted(STREAMS))
    ap.add_argument("mode", choices=["train", "eval", "check"])
    ap.add_argument("--files", nargs="+", required=True)
    ap.add_argument("--warmup-batches", type=int, default=6)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--shuffle", type=int, default=2048, help="shuffle buffer (records)")
    ap.add_argument("--check-out", help="check mode: where to write the eval outputs (.npz)")
    args = ap.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if args.mode == "check":
        res = check(args.contender, args.files, args.check_out)
    else:
        res = measure(args.contender, args.mode, args.files, args.warmup_batches, args.batches,
                      args.shuffle)
    print("SUITE_RESULT " + json.dumps(res), flush=True)
    # Exit without tearing down pipelines and worker pools politely: the numbers are out.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
