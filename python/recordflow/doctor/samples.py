"""Variants measured on a sample of the files rewritten in a temporary directory (file
layout, cache, pre-resized images), against the same sample as it is."""

from __future__ import annotations

import os
import re

import numpy as np

from recordflow import stages as _st
from recordflow.dataset import Dataset
from recordflow.doctor.measure import (
    _measure_alone,
    _ops,
    _run_alone,
    _source_compression,
    _source_paths,
    _with_ops,
)
from recordflow.doctor.rules import _Rec, error_name, reshard_command


def _is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _remote_origin(paths: list[str]) -> str | None:
    """The origin ("s3://bucket") of the first URL in ``paths``; None when all are local."""
    for p in paths:
        if _is_url(p):
            scheme, rest = p.split("://", 1)
            return f"{scheme}://{rest.split('/', 1)[0]}"
    return None


def _vision_target(op: _st.NativeMap) -> int | None:
    """The shorter side a pre-resize at conversion should keep for a vision preset map."""
    desc = repr(op.op)
    m = re.search(r"imagenet_eval\((\d+), (\d+)\)", desc)
    if m:
        return int(m.group(2))
    m = re.search(r"imagenet_train\((\d+)\)", desc)
    if m:
        return round(int(m.group(1)) * 256 / 224)
    return None


def _image_sizes(ds: Dataset, key: str = "image/encoded", samples: int = 16) -> list | None:
    """(width, height) of the first images of the first file (headers only)."""
    from recordflow import Example, RecordReader, probe_image
    paths = _source_paths(ds)
    if not paths:
        return None
    pixels = []
    try:
        for record in RecordReader(paths[0], _source_compression(ds)):
            image = Example.parse(record).get(key)
            if isinstance(image, list):
                image = image[0] if image else None
            if isinstance(image, (bytes, bytearray)):
                info = probe_image(bytes(image))
                pixels.append((info["width"], info["height"]))
            if len(pixels) >= samples:
                break
    except Exception:  # an estimate only: never fail the report over it
        return None
    if not pixels:
        return None
    return pixels


def _sample_pipeline(ds: Dataset, paths: list[str], compression: str | None) -> Dataset:
    """``ds``'s transformations over the sample files ``paths``: a file-level shard is dropped
    (it would empty a one-file sample) and a repeat added when there is none, so that the
    sample runs as long as the timing needs."""
    ops = list(_ops(ds))
    while ops and isinstance(ops[0], _st.Shard):
        ops.pop(0)
    if not any(isinstance(op, _st.Repeat) for op in ops):
        ops.insert(0, _st.Repeat(-1))
    if not isinstance(ds.stages[0], _st.Files):
        raise ValueError("not a Dataset of files")
    files = ds.stages[0].replace(paths=tuple(str(p) for p in paths), compression=compression)
    return ds.with_stages((files,) + tuple(ops))


def _file_layout_variants(ds: Dataset, paths: list[str], compressed: bool, seconds: float,
                          sid: str, log) -> list[dict]:
    """Measures, on a sample of the files rewritten in a temporary directory, what storing
    them uncompressed and storing them as one larger file would change. Both variants and
    their baseline run the same transformations on the same records."""
    import tempfile

    from recordflow import RecordReader, RecordWriter
    recs: list[dict] = []
    many = len(paths) > 1
    if not (compressed or many):
        return recs
    sizes = [os.path.getsize(p) for p in paths if os.path.exists(p)]
    mean = sum(sizes) / max(len(sizes), 1)
    small = many and mean < 32 << 20
    if not (compressed or small):
        return recs
    total_bytes = float(sum(sizes))
    keep = "GZIP" if compressed else None
    if seconds <= 0:  # try_variants=False: the rules' advice, without numbers
        if compressed:
            # Without a sample the inflated size is unknown: at least the compressed size.
            cmd, _ = reshard_command(paths, total_bytes)
            recs.append(_Rec.make("uncompressed_files", sid,
                                  f"store the records uncompressed: {cmd}",
                                  "Compressed TFRecords cost an inflate of every byte.",
                                  command=cmd))
        if small:
            cmd, n = reshard_command(paths, total_bytes, keep)
            recs.append(_Rec.make("fewer_larger_files", sid,
                                  f"fewer, larger files (now {len(paths)} of {mean / 2**20:.1f} MiB; "
                                  f"{n} of about {total_bytes / n / 2**20:.0f} MiB): {cmd}",
                                  "Each file costs an open and a read-ahead restart.",
                                  command=cmd))
        return recs
    compression = _source_compression(ds)
    out_compression = "GZIP" if compressed else ""
    sample, records, total, sample_file_bytes = [], [], 0, 0
    try:
        for path in paths[:16]:
            file_records = list(RecordReader(path, compression))
            sample.append(path)
            records.append(file_records)
            total += sum(len(r) for r in file_records)
            # A URL has no local size: its uncompressed framing is 16 bytes per record.
            sample_file_bytes += (os.path.getsize(path) if not _is_url(path)
                                  else sum(len(r) + 16 for r in file_records))
            if total > 32 << 20:
                break
    except Exception as e:  # an unreadable file fails the baseline too; report, don't crash
        return [_Rec.make("uncompressed_files" if compressed else "fewer_larger_files", sid,
                          "rewrite the files", "", error=f"{error_name(e)}: {e}")]
    with tempfile.TemporaryDirectory(prefix="rf-doctor-") as tmp:
        log(f"trying file layouts on a sample of {len(sample)} file(s), {total / 2**20:.1f} MiB ...")
        try:
            base = _run_alone(_sample_pipeline(ds, sample, compression), seconds)["elements_per_s"]
        except Exception as e:
            return [_Rec.make("uncompressed_files" if compressed else "fewer_larger_files", sid,
                              "rewrite the files", "", error=f"{error_name(e)}: {e}")]
        detail_tail = (f" Measured on a sample ({len(sample)} file(s), {total / 2**20:.1f} MiB of "
                       "records) rewritten that way, against the same sample as it is.")
        # Uncompressed size of all the files, from the sample's ratio (framing: 16 bytes/record).
        framed = total + 16 * sum(len(r) for r in records)
        plain_bytes = total_bytes * framed / max(sample_file_bytes, 1)
        if compressed:
            plain = []
            for i, file_records in enumerate(records):
                path = os.path.join(tmp, f"plain-{i:05d}.tfrecord")
                with RecordWriter(path) as w:
                    for r in file_records:
                        w.write(r)
                plain.append(path)
            cmd, _ = reshard_command(paths, plain_bytes)
            recs.append(_measure_alone(
                "uncompressed", _sample_pipeline(ds, plain, ""), base, seconds,
                "uncompressed_files", sid,
                f"store the records uncompressed: {cmd}",
                "Compressed TFRecords cost an inflate of every byte on the reading thread."
                + detail_tail, log, command=cmd))
        if small:
            path = os.path.join(tmp, "joined.tfrecord" + (".gz" if compressed else ""))
            with RecordWriter(path, compression=out_compression or None) as w:
                for file_records in records:
                    for r in file_records:
                        w.write(r)
            cmd, n = reshard_command(paths, total_bytes, keep)
            recs.append(_measure_alone(
                "fewer_larger", _sample_pipeline(ds, [path], out_compression), base, seconds,
                "fewer_larger_files", sid,
                f"fewer, larger files (now {len(paths)} files of {mean / 2**20:.1f} MiB on average; "
                f"{n} of about {total_bytes / n / 2**20:.0f} MiB): {cmd}",
                "Each file costs an open, a read-ahead restart and (compressed) a new inflater. "
                "recordflow reshard copies the records unchanged (CRC-checked), with .idx files."
                + detail_tail, log, command=cmd))
    return recs


def _cache_variant(ds: Dataset, paths: list[str], stages: list[dict], seconds: float, sid: str,
                   log) -> dict:
    """.cache() before the first repeat, measured on a sample of the files (the first epoch
    of a sample is short, so the timing sees mostly cached epochs)."""
    title = "cache the records after the first epoch: .cache() before .repeat() (or .cache(path))"
    total = sum(os.path.getsize(p) for p in paths if os.path.exists(p))
    detail = (f"Later epochs then skip reading (and inflating); the files hold {total / 2**20:.0f} "
              "MiB (compressed size), which .cache() keeps in memory and .cache(path) on a local disk.")
    if seconds <= 0 or not paths:
        return _Rec.make("cache", sid, title, detail)
    sample, size = [], 0
    for p in paths[:16]:
        sample.append(p)
        size += os.path.getsize(p) if os.path.exists(p) else 0
        if size > 16 << 20:
            break
    compression = _source_compression(ds)
    base_ds = _sample_pipeline(ds, sample, compression)
    ops = list(_ops(base_ds))
    first_repeat = next(i for i, op in enumerate(ops) if isinstance(op, _st.Repeat))
    ops.insert(first_repeat, _st.Cache(""))
    log(f"trying: .cache() on a sample of {len(sample)} file(s) ...")
    try:
        base = _run_alone(base_ds, seconds)["elements_per_s"]
    except Exception as e:
        return _Rec.make("cache", sid, title, detail, error=f"{error_name(e)}: {e}")
    rec = _measure_alone("cache", _with_ops(base_ds, ops), base, seconds, "cache", sid, title,
                         detail + f" Measured on a sample of {len(sample)} file(s) against the "
                         "same sample uncached.", lambda m: None)
    return rec


def _pre_resize_variant(ds: Dataset, target: int, seconds: float, sid: str, title: str,
                        detail: str, log, key: str = "image/encoded") -> dict | None:
    """Measures pre-resizing on a sample: up to 128 records re-encoded with the shorter side at
    ``target`` (as convert --resize-shorter does: resize, JPEG quality 95), against the same
    records as they are, both uncompressed in one file. None when it cannot be tried."""
    import tempfile

    from recordflow import Example, RecordReader, RecordWriter, encode_jpeg, vision
    paths = _source_paths(ds)
    if not paths or seconds <= 0:
        return None
    original, resized = [], []
    try:
        for path in paths:
            for record in RecordReader(path, _source_compression(ds)):
                features = Example.parse(record)
                image = features.get(key)
                if not isinstance(image, list) or not image:
                    return None
                pixels = vision.decode_image(image[0])
                h, w = pixels.shape[:2]
                if min(h, w) > target:
                    nh, nw = round(h * target / min(h, w)), round(w * target / min(h, w))
                    pixels = vision.resize(pixels, (nh, nw))
                    features[key] = [encode_jpeg(np.ascontiguousarray(pixels), 95)]
                    if "image/height" in features:
                        features["image/height"] = [nh]
                    if "image/width" in features:
                        features["image/width"] = [nw]
                original.append(record)
                resized.append(Example(features).serialize())
                if len(original) >= 128:
                    break
            if len(original) >= 128:
                break
    except Exception:  # not images this code can rewrite: fall back to the estimate
        return None
    with tempfile.TemporaryDirectory(prefix="rf-doctor-") as tmp:
        files = []
        for name, records in (("original", original), ("resized", resized)):
            path = os.path.join(tmp, f"{name}.tfrecord")
            with RecordWriter(path) as w:
                for r in records:
                    w.write(r)
            files.append(path)
        log(f"trying: pre-resized images on a sample of {len(original)} records ...")
        try:
            base = _run_alone(_sample_pipeline(ds, files[:1], ""), seconds)["elements_per_s"]
        except Exception as e:
            return _Rec.make("pre_resize", sid, title, detail, error=f"{error_name(e)}: {e}")
        return _measure_alone("pre_resize", _sample_pipeline(ds, files[1:], ""), base, seconds,
                              "pre_resize", sid, title,
                              detail + f" Measured on a sample of {len(original)} records "
                              "re-encoded that way, against the same records as they are.",
                              lambda m: None)
