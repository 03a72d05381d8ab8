"""``rf.convert`` and ``rf.extract``: datasets into sharded TFRecords, and back.

``rf.convert(src, dst, ...)`` with ``src`` a path (an image folder with one sub-folder per class,
or a ``.csv`` / ``.jsonl`` manifest) runs the native converter (the engine behind
``recordflow convert``): parallel, deterministic, resumable. With ``src`` an iterable of dicts,
a dict of equal-length NumPy arrays, or an ``(images, labels)`` pair, records are built with
``rf.Example`` and written with ``rf.RecordWriter``, split and sharded the same way.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from recordflow import _core
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
    return _convert_python(src, os.fspath(dst), val_fraction=val_fraction, seed=seed,
                           shards=shards, val_shards=val_shards, shuffle=shuffle,
                           compression=compression, index=index, label_offset=label_offset,
                           quality=quality, class_names=class_names, overwrite=overwrite)


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


def _features(row: Mapping[str, Any], label_offset: int, quality: int,
              class_names: list[str] | None) -> tuple[dict, list[int]]:
    """The Example features of one row, and its labels (without offset) for stratification.
    "image" (encoded bytes, or a uint8 HxW[xC] array, JPEG-encoded) and "label" map to the
    ImageNet keys; other keys are stored as they are."""
    features = {k: v for k, v in row.items() if k not in ("image", "label", "filename")}
    labels: list[int] = []
    if "image" in row:
        image = row["image"]
        if isinstance(image, np.ndarray):
            if image.dtype != np.uint8:
                raise TypeError("image arrays must be uint8 HxW or HxWxC")
            image = encode_jpeg(np.ascontiguousarray(image), quality)
        elif isinstance(image, (bytearray, memoryview)):
            image = bytes(image)
        info = probe_image(image)
        features.update({
            "image/encoded": image,
            "image/format": info["format"],
            "image/height": info["height"],
            "image/width": info["width"],
            "image/channels": info["channels"],
            "image/colorspace": "RGB" if info["colorspace"] in ("YCbCr", "RGB") else info["colorspace"],
        })
    if "label" in row:
        labels = _labels_of(row["label"])
        features["image/class/label"] = [l + label_offset for l in labels]
        if class_names is not None:
            features["image/class/text"] = [class_names[l] for l in labels]
    if "filename" in row:
        features["image/filename"] = row["filename"]
    return features, labels


def _convert_python(src, dst, *, val_fraction, seed, shards, val_shards, shuffle, compression,
                    index, label_offset, quality, class_names, overwrite) -> dict:
    from recordflow import RecordWriter  # the package's writer: temp file + rename, .idx

    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    start = time.perf_counter()
    os.makedirs(dst, exist_ok=True)
    existing = [f for f in os.listdir(dst) if f.startswith(("train-", "validation-"))]
    if existing and not overwrite:
        raise FileExistsError(f"{dst!r} already holds shards ({existing[0]}, ...); pass "
                              "overwrite=True to replace them")
    for f in existing:
        os.remove(os.path.join(dst, f))
    records: list[bytes] = []
    groups: dict[int, list[int]] = {}
    for i, row in enumerate(_rows(src)):
        if not isinstance(row, Mapping):
            raise TypeError(f"item {i} is a {type(row).__name__}, expected a dict")
        features, labels = _features(row, label_offset, quality, class_names)
        records.append(Example(features).serialize())
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
    shards = shards or 1
    if val_shards is None:
        val_shards = max(1, round(shards * val_fraction / (1 - val_fraction)))
    ext = {None: "", "": "", "GZIP": ".gz", "ZLIB": ".zz"}[compression.upper() if compression else compression]
    summary: dict[str, Any] = {"destination": dst, "inputs": len(records), "records": 0,
                               "splits": {}, "skipped": [], "skipped_count": 0}
    for split, items, count in (("train", train, shards), ("validation", validation, val_shards)):
        if split == "validation" and val_fraction == 0:
            continue
        split_info = {"records": len(items), "bytes": 0, "shards": []}
        for s in range(count):
            name = f"{split}-{s:05d}-of-{count:05d}.tfrecord{ext}"
            part = items[len(items) * s // count: len(items) * (s + 1) // count]
            path = os.path.join(dst, name)
            with RecordWriter(path, compression=compression,
                              index=index and not ext) as w:
                for i in part:
                    w.write(records[i])
            size = os.path.getsize(path)
            split_info["bytes"] += size
            split_info["shards"].append({"file": name, "records": len(part), "bytes": size})
        summary["splits"][split] = split_info
        summary["records"] += len(items)
    if class_names is not None:
        with open(os.path.join(dst, "labels.txt"), "w") as f:
            f.writelines(name + "\n" for name in class_names)
    summary["seconds"] = time.perf_counter() - start
    return summary
