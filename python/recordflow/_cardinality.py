"""Cardinality of a Dataset description: how many elements one pass yields, without reading data.

Per-file record counts come from, in order: a count given by the caller, the file's ``.idx``
index (one line per record; trusted only when its last entry ends exactly at the end of the
file, so a stale index is ignored), the ``summary.json`` that ``recordflow convert`` writes
beside its shards (trusted only when the shard's recorded byte size equals the file's), and,
only when ``scan=True``, a native count of the file (framing and CRCs, no parsing). Counts are
cached per (path, size, mtime) of the file, its index and the summary.
"""

from __future__ import annotations

import json
import os

from recordflow import stages as st

INFINITE = -1
UNKNOWN = -2

# Stages that keep every element (one out per one in).
_KEEPS = (st.Interleave, st.GlobalShuffle, st.Shuffle, st.Cache, st.Prefetch, st.Parse, st.Map)

_cache: dict[tuple, int] = {}


def _stat(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def _stat_key(path: str):
    """The file's and its count sources' (size, mtime): a change to any of them recounts."""
    st = os.stat(path)
    summary = os.path.join(os.path.dirname(os.path.abspath(path)), "summary.json")
    return (path, st.st_size, st.st_mtime_ns, _stat(path + ".idx"), _stat(summary))


def _from_index(path: str, size: int) -> int | None:
    idx = path + ".idx"
    try:
        with open(idx, "rb") as f:
            data = f.read()
    except OSError:
        return None
    lines = data.split(b"\n")
    if lines and lines[-1].strip() == b"":
        lines.pop()
    if not lines:
        return 0 if size == 0 else None
    try:
        offset, framed = (int(v) for v in lines[-1].split())
    except ValueError:
        return None
    return len(lines) if offset + framed == size else None


def _from_summary(path: str, size: int) -> int | None:
    summary = os.path.join(os.path.dirname(os.path.abspath(path)), "summary.json")
    try:
        with open(summary, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    name = os.path.basename(path)
    for split in (doc.get("splits") or {}).values():
        for shard in split.get("shards", ()):
            if shard.get("file") == name and shard.get("bytes") == size and "records" in shard:
                return int(shard["records"])
    return None


def file_records(path: str, compression: str | None = None, scan: bool = False,
                 on_corruption: str = "raise") -> int | None:
    """Records in one TFRecord file, or None when unknown without reading it (scan=False) or
    when the file cannot be read."""
    try:
        # The policy and compression are part of the key: a count taken under "raise" (from
        # the .idx) is not the count under "skip", which drops damaged records.
        key = _stat_key(path) + (compression, on_corruption)
    except OSError:
        return None
    if key in _cache:
        return _cache[key]
    size = key[1]
    n = None
    if on_corruption == "raise":
        n = _from_index(path, size)
        if n is None:
            n = _from_summary(path, size)
    if n is None and scan:
        from recordflow import _core
        n = int(_core.count_records(path, compression, on_corruption=on_corruption))
    if n is not None:
        _cache[key] = n
    return n


def source_records(source, files: list[str] | None = None, scan: bool = False,
                   counts: dict | None = None) -> int:
    """Records of a source stage (rf.stages.Files / Records); ``files``: the Files' paths
    (expanded, maybe a file shard of them)."""
    if isinstance(source, st.Records):
        return len(source.records)
    total = 0
    for p in files:
        n = counts.get(p) if counts else None
        if n is None:
            # A corrupt record skipped under on_corruption="skip" is not in the pass: only a
            # scan under the same policy counts it right.
            n = file_records(p, source.compression, scan, source.on_corruption)
        if n is None:
            return UNKNOWN
        total += n
    return total


def cardinality(stages: tuple, scan: bool = False, counts: dict | None = None) -> int:
    """Elements of one pass of a Dataset of ``stages`` (Dataset.stages): a count, INFINITE
    or UNKNOWN."""
    source, ops = stages[0], tuple(stages[1:])
    files = None
    if isinstance(source, st.Files):
        try:
            files = source.expanded_paths()
        except Exception:  # a pattern matching nothing: iterating reports it
            return UNKNOWN
        if ops and isinstance(ops[0], st.Shard):  # directly on the files: a file shard
            files = files[ops[0].index::ops[0].num_shards]
            ops = ops[1:]
    n = source_records(source, files, scan, counts)
    for op in ops:
        n = _after(op, n)
    return n


def _after(op, n: int) -> int:
    if isinstance(op, _KEEPS):
        return n
    if isinstance(op, st.NativeMap):
        return UNKNOWN if n >= 0 and op.op.drops_records else n
    if isinstance(op, st.Filter):
        return UNKNOWN
    if isinstance(op, st.Repeat):
        if n == 0:
            return 0
        if op.count < 0:
            return INFINITE if n != UNKNOWN else UNKNOWN
        return n * op.count if n >= 0 else n
    if isinstance(op, st.Take):
        if op.count < 0:
            return n
        if n == INFINITE:
            return op.count
        return min(n, op.count) if n >= 0 else (0 if op.count == 0 else UNKNOWN)
    if isinstance(op, st.Skip):
        if n < 0:
            return n
        return max(0, n - op.count)
    if isinstance(op, st.Shard):
        if n < 0:
            return n
        return max(0, (n - op.index + op.num_shards - 1) // op.num_shards)
    if isinstance(op, st.Batch):
        if n < 0:
            return n
        return n // op.batch_size if op.drop_remainder else (n + op.batch_size - 1) // op.batch_size
    return UNKNOWN


