"""Records written to and read back from a URL: the helpers and the checks that every storage
scheme's tests (s3://, gs://, fsspec protocols) share, so each scheme runs the same battery."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

import recordflow as rf


def records(n: int, size: int, seed: int = 0, step: int = 1) -> list[bytes]:
    """n distinct records of `size` bytes, seeded; record i starts at byte seed + i * step."""
    return [bytes([(seed + i * step + j) % 251 for j in range(size)]) for i in range(n)]


def write(url: str, recs: list[bytes], **kw) -> None:
    with rf.RecordWriter(url, **kw) as w:
        for r in recs:
            w.write(r)


def write_shards(url: Callable[[int], str], shards: int, n: int, size: int,
                 step: int = 1) -> tuple[list[str], list[bytes]]:
    """Shard i (`n` records of `size` bytes, seeded with i) at ``url(i)``; returns the shards'
    URLs and all their records, shard after shard."""
    urls, all_recs = [], []
    for i in range(shards):
        recs = records(n, size, seed=i, step=step)
        write(url(i), recs)
        urls.append(url(i))
        all_recs += recs
    return urls, all_recs


def cli() -> str:
    """The `recordflow` command under test: RF_TEST_CLI (another build of it, e.g. an older
    one), else the one installed beside this Python, else the one on PATH."""
    if os.environ.get("RF_TEST_CLI"):
        return os.environ["RF_TEST_CLI"]
    exe = Path(sys.executable).with_name("recordflow")
    return str(exe) if exe.exists() else "recordflow"


@contextlib.contextmanager
def remote_part_sizes(part_size: int, upload_part_size: int):
    """Remote reads in `part_size` ranges and uploads in `upload_part_size` parts inside the
    block (small parts make a few MB span many requests); the previous sizes after it."""
    from recordflow import _core
    old = _core._set_remote_part_sizes(part_size, upload_part_size)
    try:
        yield
    finally:
        _core._set_remote_part_sizes(*old)


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


def check_aborted_writer_leaves_no_object(url: str, n: int, size: int) -> None:
    """A writer closed by an exception after `n` records of `size` bytes (enough for a
    multipart upload or upload session) publishes nothing at `url`."""
    with pytest.raises(RuntimeError):
        with rf.RecordWriter(url) as w:
            for r in records(n, size):
                w.write(r)
            raise RuntimeError("boom")
    with pytest.raises(rf.NotFoundError):
        rf.RecordReader(url)


def check_cli_count_cat_verify_index(url: str, missing_url: str) -> None:
    """The CLI's count, verify, index and cat on 25 records at `url`; the .idx `index` wrote
    there serves an indexed reader; count of `missing_url` fails naming it."""
    write(url, records(25, 10))
    out = subprocess.run([cli(), "count", url], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "25" in out.stdout
    for cmd in (["verify", url], ["index", url], ["cat", url]):
        r = subprocess.run([cli(), *cmd], capture_output=True, timeout=60)
        assert r.returncode == 0, (cmd, r.stderr)
    assert len(rf.IndexedRecordReader(url)) == 25
    missing = subprocess.run([cli(), "count", missing_url], capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode != 0 and missing_url.rsplit("/", 1)[1] in missing.stderr


_READ_ALL = """
import sys, recordflow as rf
recs = list(rf.RecordReader(sys.argv[1]))
sys.stdout.write(repr([len(recs), sum(len(r) for r in recs), recs[0][:4], recs[-1][:4]]))
"""


def check_read_through_fault_proxy(url: str, proxy, env: dict, fault: dict) -> None:
    """A 1.2 MB object read in a fresh process (`env`: its endpoint is the proxy's from the
    start) while `proxy` injects `fault` twice (two failed answers or two connections cut
    mid-body): every record arrives once, in order, its CRC checked."""
    recs = records(400, 3000)
    write(url, recs)
    proxy.configure(**fault)
    out = subprocess.run([sys.executable, "-c", _READ_ALL, url], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, **env))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == repr([400, 400 * 3000, recs[0][:4], recs[-1][:4]])
    stats = proxy.stats()
    assert (stats["failed"] if "fail_count" in fault else stats["dropped"]) == 2, stats
