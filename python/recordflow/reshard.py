"""rf.reshard: TFRecord files -> N shards with the same records (``recordflow reshard``)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from recordflow import _core

__all__ = ["reshard"]


def reshard(files: str | os.PathLike | Sequence[str | os.PathLike], dst: str | os.PathLike, *,
            shards: int, shuffle: bool = False, seed: int = 0, compression: str | None = None,
            input_compression: str | None = None, prefix: str = "shard", index: bool = True,
            resume: bool = False, sync: bool = True) -> dict:
    """Writes the records of ``files`` (paths and glob patterns, in order), unchanged and
    CRC-checked, into ``dst/<prefix>-00000-of-0000N.tfrecord`` (``.gz``/``.zz`` with
    ``compression``) with ``.idx`` files (uncompressed shards). ``shuffle`` puts them in a
    ``seed``-ed random order across the shards (else input order); ``resume`` keeps the whole
    shards of an interrupted run and writes the rest, giving the bytes of an uninterrupted run.
    Returns the summary (records, bytes, per-shard records and bytes). Same as
    ``recordflow reshard`` (docs/cli.md)."""
    # Glob patterns are expanded by the engine (sorted matches, NotFound naming a pattern that
    # matches nothing), as from_files' are.
    paths = [os.fspath(files)] if isinstance(files, (str, os.PathLike)) else [os.fspath(f) for f in files]
    if isinstance(shards, bool) or not isinstance(shards, int):
        raise TypeError("shards must be an int")
    text = _core.reshard(paths, os.fspath(dst), shards, bool(shuffle), int(seed),
                         compression or "", input_compression, str(prefix), bool(index),
                         bool(resume), bool(sync))
    return json.loads(text)
