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

INFINITE = -1
UNKNOWN = -2

# Stages of the record stream (before parse/map/batch) that keep every record.
_KEEPS = ("interleave", "global_shuffle", "shuffle", "cache", "prefetch", "parse", "map")

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


def source_records(source: tuple, files: list[str] | None = None, scan: bool = False,
                   counts: dict | None = None) -> int:
    """Records of a Dataset source (``files`` overrides the source's list)."""
    if source[0] != "files":
        return len(source[1])
    total = 0
    for p in files:
        n = counts.get(p) if counts else None
        if n is None:
            # A corrupt record skipped under on_corruption="skip" is not in the pass: only a
            # scan under the same policy counts it right.
            n = file_records(p, source[2], scan, source[5])
        if n is None:
            return UNKNOWN
        total += n
    return total


def cardinality(source: tuple, ops: tuple, scan: bool = False, counts: dict | None = None) -> int:
    """Elements of one pass of Dataset(source, ops): a count, INFINITE or UNKNOWN."""
    files = None
    if source[0] == "files":
        from recordflow.dataset import _expand
        try:
            files = _expand(source[1])
        except Exception:  # a pattern matching nothing: iterating reports it
            return UNKNOWN
        if ops and ops[0][0] == "shard":  # directly on the files: a file shard
            files = files[ops[0][2]::ops[0][1]]
            ops = ops[1:]
    n = source_records(source, files, scan, counts)
    for op in ops:
        n = _after(op, n)
    return n


def _after(op: tuple, n: int) -> int:
    name = op[0]
    if name in _KEEPS:
        return n
    if name == "native_map":
        return UNKNOWN if n >= 0 and op[1]._drops_records() else n
    if name == "filter":
        return UNKNOWN
    if name == "repeat":
        count = op[1]
        if n == 0:
            return 0
        if count < 0:
            return INFINITE if n != UNKNOWN else UNKNOWN
        return n * count if n >= 0 else n
    if name == "take":
        count = op[1]
        if count < 0:
            return n
        if n == INFINITE:
            return count
        return min(n, count) if n >= 0 else (0 if count == 0 else UNKNOWN)
    if name == "skip":
        count = op[1]
        if n < 0:
            return n
        return 0 if count < 0 else max(0, n - count)
    if name == "shard":
        num, index = op[1], op[2]
        if n < 0:
            return n
        return max(0, (n - index + num - 1) // num)
    if name == "batch":
        size, drop = op[1], op[2]
        if n < 0:
            return n
        return n // size if drop else (n + size - 1) // size
    return UNKNOWN
