"""``rf.convert`` and ``rf.extract``: datasets into sharded TFRecords, and back.

``rf.convert(src, dst, ...)`` with ``src`` a path (an image folder with one sub-folder per class,
or a ``.csv`` / ``.jsonl`` manifest) runs the native converter (the engine behind
``recordflow convert``): parallel, deterministic, resumable. With ``src`` an iterable of dicts,
a dict of equal-length NumPy arrays, or an ``(images, labels)`` pair, records are built with
``rf.Example`` (each image checked and re-encoded by the native code, as for files), spooled to
a file as they come (memory holds a few numbers per record, not the records), then split,
sharded and written with ``rf.RecordWriter``. Either way the returned dict is the one written to
``dst/summary.json``, with the same keys.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import shutil
import time
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from recordflow import _core
from recordflow import errors as _errors
from recordflow.example import Example

__all__ = ["convert", "extract", "probe_image", "encode_jpeg"]

probe_image = _core.probe_image
encode_jpeg = _core.encode_jpeg


def convert(src: Any, dst: str | os.PathLike, *, val_fraction: float = 0.0, seed: int = 0,
            shards: int | None = None, val_shards: int | None = None,
            shard_size: int | None = None, shuffle: bool = True, compression: str | None = None,
            index: bool = True, label_offset: int = 0, non_jpeg: str = "transcode",
            resize_shorter: int = 0, quality: int = 95, force_rgb: bool = False,
            exif_orientation: bool = False, verify: str = "structure",
            max_pixels: int = 1 << 28, image_column: str = "", label_column: str = "",
            label_separator: str = "", strict: bool = False, resume: bool = False,
            overwrite: bool = False, num_threads: int = 0, sync: bool = True,
            class_names: list[str] | None = None,
            progress: Callable[[int, int, int, int, float], None] | None = None) -> dict:
    """Converts ``src`` into ``dst/train-00000-of-0000N.tfrecord`` (and ``validation-...``),
    ``.idx`` files, ``labels.txt`` and ``summary.json``; returns the summary dict (records per
    split and class, bytes, seconds, and ``skipped``: every input not used, with the reason).

    Options mirror ``recordflow convert`` (see docs/cli.md): ``val_fraction`` (stratified per
    class, seeded by ``seed``), ``shards`` / ``val_shards`` or ``shard_size`` bytes,
    ``shuffle`` across shards, ``compression`` ("GZIP"/"ZLIB"), ``label_offset`` (1 for TF
    models' 1-based labels), ``non_jpeg`` ("transcode" or "keep"), ``resize_shorter`` with
    ``quality``, ``force_rgb``, ``exif_orientation``, ``verify`` ("header", "structure",
    "decode"), ``max_pixels``, manifest columns, ``strict``, ``resume``, ``overwrite``.
    ``progress(done, total, skipped, bytes_out, seconds)`` is called about every 100 ms.
    ``class_names`` applies to Python inputs only (names for integer labels).

    Python inputs honour every option but these, which raise ``ValueError``: ``resume`` (an
    iterable cannot be re-read from where a run stopped) and the manifest columns. An image
    that cannot be used (not an image, corrupt, over ``max_pixels``) is skipped and listed as
    ``{"path": "item <i>", "reason": ...}``, or with ``strict`` raises its ``rf.Error``.
    ``overwrite`` writes beside ``dst`` and swaps the new output in when it is complete.
    """
    if isinstance(src, (str, os.PathLike)):
        if class_names is not None:
            raise TypeError("class_names applies to Python inputs; folders and manifests name "
                            "their classes themselves")
        options = dict(val_fraction=val_fraction, seed=seed, shuffle=shuffle, index=index,
                       label_offset=label_offset, non_jpeg=non_jpeg,
                       resize_shorter=resize_shorter, quality=quality, force_rgb=force_rgb,
                       exif_orientation=exif_orientation, verify=verify,
                       max_pixels=max_pixels, image_column=image_column,
                       label_column=label_column, label_separator=label_separator,
                       strict=strict, resume=resume, overwrite=overwrite,
                       num_threads=num_threads, sync=sync, compression=compression)
        if shards is not None:
            options["shards"] = shards
        if val_shards is not None:
            options["val_shards"] = val_shards
        if shard_size is not None:
            options["shard_size"] = shard_size
        return json.loads(_core._convert(os.fspath(src), os.fspath(dst), options, progress))
    if resume:
        raise ValueError("resume applies to folder and manifest sources: a Python iterable "
                         "cannot be re-read from where an interrupted run stopped; convert "
                         "again with overwrite=True")
    for name, value in (("image_column", image_column), ("label_column", label_column),
                        ("label_separator", label_separator)):
        if value:
            raise ValueError(f"{name} applies to manifest sources (.csv/.jsonl), not to "
                             "Python inputs")
    return _convert_python(
        src, os.fspath(dst), val_fraction=val_fraction, seed=seed, shards=shards,
        val_shards=val_shards, shard_size=shard_size, shuffle=shuffle, compression=compression,
        index=index, label_offset=label_offset, class_names=class_names, strict=strict,
        overwrite=overwrite, num_threads=num_threads, sync=sync, progress=progress,
        image_options=dict(non_jpeg=non_jpeg, resize_shorter=resize_shorter, quality=quality,
                           force_rgb=force_rgb, exif_orientation=exif_orientation,
                           verify=verify, max_pixels=max_pixels))


def extract(files: str | os.PathLike | Iterable[str | os.PathLike], out_dir: str | os.PathLike,
            *, compression: str | None = None, overwrite: bool = False,
            labels_csv: str = "labels.csv") -> dict:
    """Writes the images of image Examples as ``out_dir/<class>/<file name>`` plus
    ``out_dir/labels.csv`` (path,label,class). Names come from ``image/class/text`` and
    ``image/filename``, reduced to single safe path components: nothing stored in a record
    can make it write outside ``out_dir``. Returns {"records", "images", "bytes", "skipped"}.
    """
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    return json.loads(_core._extract([os.fspath(f) for f in files], os.fspath(out_dir),
                                     compression, overwrite, labels_csv))


# ---- Python inputs ---------------------------------------------------------------------------

def _rows(src: Any) -> Iterable[Mapping[str, Any]]:
    if isinstance(src, tuple) and len(src) == 2 and isinstance(src[0], np.ndarray):
        images, labels = src
        if len(images) != len(labels):
            raise ValueError(f"images and labels differ in length: {len(images)} vs {len(labels)}")
        return ({"image": images[i], "label": labels[i]} for i in range(len(images)))
    if isinstance(src, Mapping):
        lengths = {k: len(v) for k, v in src.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"arrays differ in length: {lengths}")
        n = next(iter(lengths.values()), 0)
        return ({k: v[i] for k, v in src.items()} for i in range(n))
    return src


def _labels_of(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, np.ndarray):
        return [int(v) for v in value.reshape(-1)]
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value]
    return [int(value)]


_OUTPUT_NAME = re.compile(r"(train|validation)-[0-9]{5}-of-[0-9]{5}\.tfrecord(\.gz|\.zz)?(\.idx)?")
_STATE_DIR = ".recordflow-convert"


def _is_conversion_entry(name: str) -> bool:
    return bool(_OUTPUT_NAME.fullmatch(name)) or name in (_STATE_DIR, "labels.txt",
                                                          "summary.json")


def _holds_conversion(dst: str) -> bool:
    if not os.path.isdir(dst):
        return False
    return any(_OUTPUT_NAME.fullmatch(n) or n in (_STATE_DIR, "summary.json")
               for n in os.listdir(dst))


def _image_features(image: Any, image_options: dict, stats: dict) -> dict:
    """The ImageNet image keys of one row's "image" (encoded bytes, or a uint8 HxW[xC] array,
    JPEG-encoded at ``quality``), checked and re-encoded as the native converter does."""
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8:
            raise TypeError("image arrays must be uint8 HxW or HxWxC")
        image = encode_jpeg(np.ascontiguousarray(image), image_options["quality"])
        stats["transcoded"] = True
    elif isinstance(image, (bytearray, memoryview)):
        image = bytes(image)
    elif not isinstance(image, bytes):
        raise TypeError(f"image is a {type(image).__name__}; expected encoded bytes or a uint8 "
                        "array")
    stats["input_bytes"] = len(image)
    p = _core._prepare_image(image, image_options)
    stats["transcoded"] = stats.get("transcoded", False) or p["transcoded"]
    return {
        "image/encoded": p["encoded"],
        "image/format": p["format"],
        "image/height": p["height"],
        "image/width": p["width"],
        "image/channels": p["channels"],
        "image/colorspace": p["colorspace"],
    }


def _record_of(row: Any, i: int, label_offset: int, class_names: list[str] | None,
               image_options: dict) -> tuple[bytes, list[int], dict]:
    """One row -> (serialized Example, labels without offset, stats)."""
    if not isinstance(row, Mapping):
        raise TypeError(f"item {i} is a {type(row).__name__}, expected a dict")
    features = {k: v for k, v in row.items() if k not in ("image", "label", "filename")}
    stats: dict = {}
    labels: list[int] = []
    if "image" in row:
        features.update(_image_features(row["image"], image_options, stats))
    if "label" in row:
        labels = _labels_of(row["label"])
        features["image/class/label"] = [l + label_offset for l in labels]
        if class_names is not None:
            for l in labels:
                if not 0 <= l < len(class_names):
                    raise ValueError(f"item {i}: label {l} has no name in class_names "
                                     f"({len(class_names)} names)")
            features["image/class/text"] = [class_names[l] for l in labels]
    if "filename" in row:
        features["image/filename"] = row["filename"]
    return Example(features).serialize(), labels, stats


def _cut(items: list[int], count: int, sizes, by_bytes: bool) -> list[list[int]]:
    """As the native plan: equal counts, or about equal bytes (each record goes where the
    middle of its byte range falls)."""
    n = len(items)
    if not by_bytes:
        return [items[n * s // count: n * (s + 1) // count] for s in range(count)]
    total = sum(sizes[i] + 1 for i in items)
    out: list[list[int]] = [[] for _ in range(count)]
    before = 0
    for i in items:
        size = sizes[i] + 1
        s = int((before + size / 2) * count / total) if total else 0
        out[min(max(s, 0), count - 1)].append(i)
        before += size
    return out


def _convert_python(src, dst, *, val_fraction, seed, shards, val_shards, shard_size, shuffle,
                    compression, index, label_offset, class_names, strict, overwrite,
                    num_threads, sync, progress, image_options) -> dict:
    """Python inputs: records are built (images checked/re-encoded by the native code) and
    spooled to a file as they come, so memory holds a few numbers per record, not records;
    then split, shuffled and written to shards like the native converter. Returns the same
    summary dict as a folder conversion, also written to ``summary.json``."""
    from concurrent.futures import ThreadPoolExecutor

    from recordflow import RecordWriter  # the package's writer: temp file + rename, .idx

    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    for name, value in (("shards", shards), ("val_shards", val_shards),
                        ("shard_size", shard_size)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if shards is not None and shard_size is not None:
        raise ValueError("shards and shard_size exclude each other")
    if not 1 <= image_options["quality"] <= 100:
        raise ValueError(f"quality must be 1..100, got {image_options['quality']}")
    if image_options["resize_shorter"] < 0:
        raise ValueError("resize_shorter must be >= 0")
    if image_options["non_jpeg"] not in ("transcode", "keep"):
        raise ValueError("non_jpeg must be 'transcode' or 'keep'")
    if image_options["verify"] not in ("header", "structure", "decode"):
        raise ValueError("verify must be 'header', 'structure' or 'decode'")
    comp = (compression or "").upper()
    if comp not in ("", "NONE", "GZIP", "ZLIB"):
        raise ValueError(f"compression must be None, 'GZIP' or 'ZLIB', got {compression!r}")
    ext = {"": "", "NONE": "", "GZIP": ".gz", "ZLIB": ".zz"}[comp]
    if num_threads < 0:
        raise ValueError("num_threads must be >= 0")
    start = time.perf_counter()

    os.makedirs(dst, exist_ok=True)
    holds = _holds_conversion(dst)
    if holds and not overwrite:
        raise FileExistsError(f"{dst!r} already holds converted shards; pass overwrite=True "
                              "to replace them")
    # Overwrite: written beside DST and swapped in when complete, as the native converter does.
    real = os.path.realpath(dst)
    out = (os.path.join(os.path.dirname(real), f".{os.path.basename(real)}.rf-new-{os.getpid()}")
           if holds else dst)
    if holds:
        shutil.rmtree(out, ignore_errors=True)
        os.mkdir(out)
    try:
        summary = _write_python(src, out, dst, val_fraction, seed, shards, val_shards,
                                shard_size, shuffle, compression, ext, index, label_offset,
                                class_names, strict, num_threads, sync, progress,
                                image_options, start, ThreadPoolExecutor, RecordWriter)
    except BaseException:
        if holds:
            shutil.rmtree(out, ignore_errors=True)
        raise
    if holds:
        old = out + ".old"
        os.rename(real, old)
        os.rename(out, real)
        for name in os.listdir(old):
            if not _is_conversion_entry(name) and ".tmp-" not in name:
                os.rename(os.path.join(old, name), os.path.join(real, name))
        shutil.rmtree(old, ignore_errors=True)
    return summary


def _write_python(src, out, dst, val_fraction, seed, shards, val_shards, shard_size, shuffle,
                  compression, ext, index, label_offset, class_names, strict, num_threads,
                  sync, progress, image_options, start, ThreadPoolExecutor, RecordWriter):
    state = os.path.join(out, _STATE_DIR)
    os.makedirs(state, exist_ok=True)
    spool_path = os.path.join(state, f"python-input-{os.getpid()}.spool")
    offsets: list[int] = []
    sizes: list[int] = []
    labels_of: list[tuple[int, ...]] = []
    skipped: list[dict] = []
    transcoded = input_bytes = 0
    total = len(src[0]) if isinstance(src, tuple) else (
        len(next(iter(src.values()), [])) if isinstance(src, Mapping) else
        (len(src) if hasattr(src, "__len__") else 0))
    done = spooled = 0
    last_report = time.perf_counter()

    def report():
        progress(done, total, len(skipped), spooled, time.perf_counter() - start)

    threads = num_threads or os.cpu_count() or 1
    window = max(1, threads * 4)  # rows in flight: bounded

    def build(pair):
        i, row = pair
        try:
            return _record_of(row, i, label_offset, class_names, image_options), None
        except _errors.Error as e:  # the image could not be used: skipped unless strict
            return None, e

    pool = ThreadPoolExecutor(threads) if threads > 1 else None
    try:
        with open(spool_path, "wb") as spool:
            it = iter(enumerate(_rows(src)))
            while True:
                chunk = list(itertools.islice(it, window))
                if not chunk:
                    break
                results = pool.map(build, chunk) if pool else map(build, chunk)
                for (i, _), (built, error) in zip(chunk, results):
                    done += 1
                    if error is not None:
                        if strict:
                            raise type(error)(f"strict: item {i}: {error}") from error
                        skipped.append({"path": f"item {i}", "reason": f"{error.code}: {error}"})
                        continue
                    record, labels, stats = built
                    offsets.append(spool.tell())
                    sizes.append(len(record))
                    labels_of.append(tuple(labels))
                    spool.write(record)
                    spooled += len(record)
                    transcoded += bool(stats.get("transcoded"))
                    input_bytes += stats.get("input_bytes", 0)
                    if progress is not None and time.perf_counter() - last_report >= 0.1:
                        last_report = time.perf_counter()
                        report()
    finally:
        if pool:
            pool.shutdown()

    # Split (stratified by first label, seeded) and shuffle, as before.
    groups: dict[int, list[int]] = {}
    for i, labels in enumerate(labels_of):
        groups.setdefault(labels[0] if labels else -1, []).append(i)
    rng = random.Random(seed)
    train: list[int] = []
    validation: list[int] = []
    for key in sorted(groups):
        members = groups[key]
        rng.shuffle(members)
        n_val = int(round(val_fraction * len(members)))
        validation += members[:n_val]
        train += members[n_val:]
    train.sort()
    validation.sort()
    if shuffle:
        rng.shuffle(train)
        rng.shuffle(validation)
    by_bytes = shards is None
    size_target = shard_size or (128 << 20)

    def count_by_size(items):
        need = -(-sum(sizes[i] for i in items) // size_target)
        return int(min(max(need, 1), max(len(items), 1)))

    train_count = count_by_size(train) if by_bytes else shards
    if val_shards is None:
        val_count = (count_by_size(validation) if by_bytes
                     else max(1, round(shards * val_fraction / (1 - val_fraction))))
    else:
        val_count = val_shards
    names = list(class_names) if class_names is not None else []
    splits: dict[str, Any] = {}
    records = output_bytes = 0
    fd = os.open(spool_path, os.O_RDONLY)
    try:
        for split, items, count in (("train", train, train_count),
                                    ("validation", validation, val_count)):
            if split == "validation" and val_fraction == 0:
                continue
            info = {"records": 0, "bytes": 0, "per_class": {}, "shards": []}
            per_class = [0] * len(names)
            cut = _cut(items, count, sizes, by_bytes and (split == "train" or val_shards is None))
            for s, part in enumerate(cut):
                name = f"{split}-{s:05d}-of-{count:05d}.tfrecord{ext}"
                path = os.path.join(out, name)
                with RecordWriter(path, compression=compression, index=index and not ext,
                                  sync=sync) as w:
                    for i in part:
                        w.write(os.pread(fd, sizes[i], offsets[i]))
                        for l in labels_of[i]:
                            if 0 <= l < len(per_class):
                                per_class[l] += 1
                size = os.path.getsize(path)
                info["records"] += len(part)
                info["bytes"] += size
                info["shards"].append({"file": name, "records": len(part), "bytes": size,
                                       "resumed": False})
            info["per_class"] = dict(zip(names, per_class))
            info = {"records": info["records"], "bytes": info["bytes"],
                    "per_class": info["per_class"], "shards": info["shards"]}
            splits[split] = info
            records += info["records"]
            output_bytes += info["bytes"]
    finally:
        os.close(fd)
        os.remove(spool_path)
    if class_names is not None:
        with open(os.path.join(out, "labels.txt"), "w") as f:
            f.writelines(name + "\n" for name in class_names)
    seconds = time.perf_counter() - start
    if progress is not None:
        report()
    # The keys and order of ConvertSummary::ToJson (the native converter's summary.json).
    summary = {
        "source": f"<{type(src).__name__}>",
        "destination": dst,
        "num_classes": len(names),
        "classes": names,
        "label_offset": label_offset,
        "inputs": done,
        "records": records,
        "skipped_count": len(skipped),
        "transcoded": transcoded,
        "input_bytes": input_bytes,
        "output_bytes": output_bytes,
        "resumed_shards": 0,
        "seconds": seconds,
        "images_per_second": records / seconds if seconds > 0 else 0.0,
        "splits": splits,
        "skipped": skipped,
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        f.write(json.dumps(summary) + "\n")
    return summary
