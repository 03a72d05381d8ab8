"""Records written to and read back from a URL: the helpers and the checks that every storage
scheme's tests (s3://, gs://, fsspec protocols) share, so each scheme runs the same battery."""
from __future__ import annotations

from typing import Callable

import recordflow as rf


def records(n: int, size: int, seed: int = 0, step: int = 1) -> list[bytes]:
    """n distinct records of `size` bytes, seeded; record i starts at byte seed + i * step."""
    return [bytes([(seed + i * step + j) % 251 for j in range(size)]) for i in range(n)]


def write(url: str, recs: list[bytes], **kw) -> None:
    with rf.RecordWriter(url, **kw) as w:
        for r in recs:
            w.write(r)


def check_round_trip_gzip_and_index(url: Callable[[str], str]) -> None:
    """Plain, GZIP and indexed shards at ``url(key)`` read back exactly."""
    recs = records(500, 300)
    write(url("a.tfrecord"), recs)
    assert list(rf.RecordReader(url("a.tfrecord"))) == recs
    recs = records(50, 1000, seed=3)
    write(url("c.tfrecord.gz"), recs)
    assert list(rf.RecordReader(url("c.tfrecord.gz"))) == recs
    write(url("i.tfrecord"), recs, index=True)
    r = rf.IndexedRecordReader(url("i.tfrecord"))
    assert len(r) == 50
    assert r[37] == recs[37] and r[0] == recs[0]


def check_glob_global_shuffle_and_checkpoint(url: Callable[[str], str]) -> bytes:
    """A glob expands to exactly its shards; a global shuffle over them restores from a
    checkpoint to the same order. Returns the checkpoint (for scheme-specific checks)."""
    shards = {f"g/train-{k}.tfrecord": records(40, 64, seed=k * 100) for k in range(3)}
    for key, recs in shards.items():
        write(url(key), recs, index=True)
    write(url("g/other.tfrecord"), [b"not matched"])
    everything = sorted(r for recs in shards.values() for r in recs)
    ds = rf.Dataset.from_files(url("g/train-*.tfrecord"))
    assert ds.stages[0].expanded_paths() == [url(k) for k in sorted(shards)]
    assert sorted(ds) == everything
    shuffled = ds.global_shuffle(seed=7)
    full = list(shuffled.iterator(epoch=0))
    assert sorted(full) == everything and full != sorted(full)
    it = shuffled.iterator(epoch=0)
    head = [next(it) for _ in range(25)]
    state = it.checkpoint()
    assert head + list(shuffled.restore(state)) == full
    return bytes(state)
