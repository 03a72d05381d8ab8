"""Schemes recordflow does not serve natively go through fsspec (recordflow/_fsspec.py):
fsspec's memory:// and a custom fsspec class registered under its own protocol. Native threads
call into Python for reads; pipelines with worker threads must not deadlock on the GIL."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from remote.records import (
    check_aborted_writer_leaves_no_object,
    check_glob_global_shuffle_and_checkpoint,
    remote_part_sizes,
)
from remote.records import records as _records
from remote.records import write as _write

import recordflow as rf


class CountingFS(MemoryFileSystem):
    """A custom fsspec class under its own protocol; counts ranged reads (own store)."""

    protocol = "rfcount"
    store: dict = {}
    pseudo_dirs = [""]
    reads = 0

    def cat_file(self, path, start=None, end=None, **kw):
        type(self).reads += 1
        return super().cat_file(path, start=start, end=end, **kw)


fsspec.register_implementation("rfcount", CountingFS, clobber=True)


@pytest.fixture
def mem():
    return f"memory://rf-{uuid.uuid4().hex[:8]}"


def test_memory_round_trip_gzip_and_indexed_reader(mem):
    recs = _records(300, 200)
    _write(f"{mem}/a.tfrecord", recs)
    assert list(rf.RecordReader(f"{mem}/a.tfrecord")) == recs
    _write(f"{mem}/c.tfrecord.gz", recs)
    assert list(rf.RecordReader(f"{mem}/c.tfrecord.gz")) == recs
    _write(f"{mem}/i.tfrecord", recs, index=True)
    r = rf.IndexedRecordReader(f"{mem}/i.tfrecord")
    assert len(r) == 300 and r[299] == recs[299] and r[5] == recs[5]
    # The bytes fsspec holds are the TFRecord file itself.
    fs = fsspec.filesystem("memory")
    assert fs.info(f"{mem}/a.tfrecord")["size"] == 300 * (200 + 16)


def test_missing_object_is_not_found_naming_the_url(mem):
    with pytest.raises(rf.NotFoundError, match="nope.tfrecord"):
        rf.RecordReader(f"{mem}/nope.tfrecord")


def test_unknown_scheme_is_still_an_error():
    with pytest.raises(Exception, match="unsupported URL scheme 'nosuchscheme://'"):
        rf.RecordReader("nosuchscheme://x/y.tfrecord")


def test_writer_raising_leaves_nothing_under_the_path(mem):
    check_aborted_writer_leaves_no_object(f"{mem}/aborted.tfrecord", 50, 1000)
    fs = fsspec.filesystem("memory")
    assert not fs.exists(f"{mem}/aborted.tfrecord")
    assert fs.find(mem) == []  # the temporary object is gone too


@pytest.fixture
def small_parts():
    with remote_part_sizes(256 * 1024, 16 << 20):
        yield


def test_custom_fsspec_class_large_sequential_read_uses_read_ahead(small_parts):
    base = f"rfcount://big-{uuid.uuid4().hex[:6]}"
    recs = _records(2000, 1000, seed=4)  # 2 MB: eight 256 KiB read-ahead parts
    _write(f"{base}/big.tfrecord", recs)
    size = 2000 * (1000 + 16)
    CountingFS.reads = 0
    assert list(rf.RecordReader(f"{base}/big.tfrecord")) == recs
    parts = -(-size // (256 * 1024))
    # Whole parts on the read-ahead threads, each once (not one call per record).
    assert parts <= CountingFS.reads <= parts + 2, CountingFS.reads


def test_from_files_glob_global_shuffle_and_checkpoint(mem):
    check_glob_global_shuffle_and_checkpoint(lambda key: f"{mem}/{key}")


_PIPELINE = textwrap.dedent("""
    import fsspec, recordflow as rf
    recs = {}
    for k in range(8):
        with rf.RecordWriter(f"memory://p/s-{k}.tfrecord") as w:
            for i in range(2000):
                r = bytes([k, i % 256]) * 50
                w.write(r)
    ds = (rf.Dataset.from_files("memory://p/s-*.tfrecord")
          .interleave(cycle_length=4, num_parallel=4)
          .map(lambda r: len(r), num_parallel=4)
          .prefetch(8))
    total = 0
    for epoch in range(3):
        total += sum(ds.iterator(epoch=epoch))
    print(total)
""")


def test_pipeline_threads_reading_through_python_do_not_deadlock():
    # Interleave reads on pool threads that take the GIL for each fsspec call while the main
    # thread iterates and a Python map runs: it must finish (a subprocess, so a deadlock fails
    # by timeout instead of hanging the suite).
    out = subprocess.run([sys.executable, "-c", _PIPELINE], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == str(3 * 8 * 2000 * 100)
