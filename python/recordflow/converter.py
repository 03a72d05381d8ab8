"""``rf.convert`` and ``rf.extract``: datasets into sharded TFRecords, and back.

``rf.convert(src, dst, ...)`` with ``src`` a path (an image folder with one sub-folder per class,
or a ``.csv`` / ``.jsonl`` manifest) runs the native converter (the engine behind
``recordflow convert``): parallel, deterministic, resumable. With ``src`` an iterable of dicts,
a dict of equal-length NumPy arrays, or an ``(images, labels)`` pair, records are built with
rows handed to the same native converter (an input source of Python items): each row is
spooled to a file beside ``dst`` as it comes (memory holds a few numbers per record, not the
records), then the native planner splits, shuffles and shards them and its workers check and
re-encode the images as for files. Either way the returned dict is the one written to
``dst/summary.json``.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any, Callable, Iterable, Iterator, Mapping

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

    Python inputs honour every option but these, which raise ``ValueError``: ``resume`` (an
    iterable cannot be re-read from where a run stopped) and the manifest columns. An image
    that cannot be used (not an image, corrupt, over ``max_pixels``) is skipped and listed as
    ``{"path": "item <i>", "reason": ...}``, or with ``strict`` raises its ``rf.Error``.
    ``overwrite`` writes beside ``dst`` and swaps the new output in when it is complete.
    """
    options = dict(val_fraction=val_fraction, seed=seed, shuffle=shuffle, index=index,
                   label_offset=label_offset, non_jpeg=non_jpeg, resize_shorter=resize_shorter,
                   quality=quality, force_rgb=force_rgb, exif_orientation=exif_orientation,
                   verify=verify, max_pixels=max_pixels, image_column=image_column,
                   label_column=label_column, label_separator=label_separator, strict=strict,
                   resume=resume, overwrite=overwrite, num_threads=num_threads, sync=sync,
                   compression=compression)
    if shards is not None:
        options["shards"] = shards
    if val_shards is not None:
        options["val_shards"] = val_shards
    if shard_size is not None:
        options["shard_size"] = shard_size
    if isinstance(src, (str, os.PathLike)):
        if class_names is not None:
            raise TypeError("class_names applies to Python inputs; folders and manifests name "
                            "their classes themselves")
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
    return _convert_python(src, os.fspath(dst), options=options, shards=shards,
                           val_shards=val_shards, shard_size=shard_size,
                           class_names=class_names, progress=progress)


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


def _items(src: Any, class_names: list[str] | None,
           quality: int) -> Iterator[tuple[bytes | None, list[int], bytes, bool]]:
    """Each row as the native input source takes it: (encoded image or None, labels without
    the offset, a serialized Example of the other features, whether the image was encoded here
    from a uint8 array)."""
    for i, row in enumerate(_rows(src)):
        if not isinstance(row, Mapping):
            raise TypeError(f"item {i} is a {type(row).__name__}, expected a dict")
        extra = {k: v for k, v in row.items() if k not in ("image", "label", "filename")}
        if "filename" in row:
            extra["image/filename"] = row["filename"]
        image = row.get("image")
        transcoded = False
        if isinstance(image, np.ndarray):
            if image.dtype != np.uint8:
                raise TypeError("image arrays must be uint8 HxW or HxWxC")
            image = encode_jpeg(np.ascontiguousarray(image), quality)
            transcoded = True
        elif isinstance(image, (bytearray, memoryview)):
            image = bytes(image)
        elif image is not None and not isinstance(image, bytes):
            raise TypeError(f"item {i}: image is a {type(image).__name__}; expected encoded "
                            "bytes or a uint8 array")
        labels = _labels_of(row.get("label"))
        if class_names is not None:
            for label in labels:
                if not 0 <= label < len(class_names):
                    raise ValueError(f"item {i}: label {label} has no name in class_names "
                                     f"({len(class_names)} names)")
        yield image, labels, Example(extra).serialize(), transcoded


_spools = itertools.count()


def _spool_path(dst: str) -> str:
    """Beside ``dst`` (same file system as the output, which needs the space anyway); in the
    temporary folder for a URL destination."""
    if "://" in dst:
        import tempfile
        folder, base = tempfile.gettempdir(), "rf-convert"
    else:
        real = os.path.abspath(dst)
        folder, base = os.path.dirname(real), os.path.basename(real)
        os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f".{base}.rf-spool-{os.getpid()}-{next(_spools)}")


def _convert_python(src, dst, *, options, shards, val_shards, shard_size, class_names,
                    progress) -> dict:
    """Python inputs through the native converter; the checks here are the ones the native
    options cannot express (0 means "by size" there) or that must fail before ``src`` is
    consumed."""
    if not 0.0 <= options["val_fraction"] < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {options['val_fraction']}")
    for name, value in (("shards", shards), ("val_shards", val_shards),
                        ("shard_size", shard_size)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if shards is not None and shard_size is not None:
        raise ValueError("shards and shard_size exclude each other")
    if not 1 <= options["quality"] <= 100:
        raise ValueError(f"quality must be 1..100, got {options['quality']}")
    if options["resize_shorter"] < 0:
        raise ValueError("resize_shorter must be >= 0")
    if options["num_threads"] < 0:
        raise ValueError("num_threads must be >= 0")
    name = f"<{type(src).__name__}>"
    return json.loads(_core._convert_items(
        _items(src, class_names, options["quality"]), dst, options, _spool_path(dst), name,
        list(class_names) if class_names is not None else None, progress))
