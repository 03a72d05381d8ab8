"""The read path's request counts on s3:// through the fault proxy in front of SeaweedFS: small
objects cost one request, global shuffle coalesces its reads into few large GETs. Every record is
compared with what was written (and, for global shuffle, with the order on local files)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

import recordflow as rf


def _records(n: int, size: int, seed: int = 0) -> list[bytes]:
    return [bytes([(seed + i * 7 + j) % 251 for j in range(size)]) for i in range(n)]


@pytest.fixture
def s3(s3_server, monkeypatch):
    for k, v in s3_server.env.items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)
    s3_server.prefix = f"rp-{uuid.uuid4().hex[:8]}"
    return s3_server


def _write(url: str, recs: list[bytes]) -> None:
    with rf.RecordWriter(url) as w:
        for r in recs:
            w.write(r)


def _run(code: str, args: list[str], proxy) -> object:
    """Runs `code` in a fresh process whose S3 endpoint is the proxy; returns its JSON output."""
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, **proxy.env))
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


_READ = """
import hashlib, json, sys, recordflow as rf
recs = list(rf.Dataset.from_files(sys.argv[1:]))
print(json.dumps([len(recs), hashlib.sha256(b"".join(recs)).hexdigest()]))
"""


@pytest.mark.parametrize("n,size", [(20, 1000), (1000, 3000)])  # 20 KB and 3 MB objects
def test_object_smaller_than_a_part_is_read_with_one_request(s3, fault_proxy, n, size):
    # One ranged GET at open brings size, ETag and (for an object under open_read_size) all
    # bytes; a larger object under one part (8 MiB) takes one more GET for the rest, started
    # at once. No HEAD, and never one GET per reader buffer.
    import hashlib
    recs = _records(n, size)
    url = s3.url(f"{s3.prefix}/small.tfrecord")
    _write(url, recs)
    fault_proxy.reset()
    got = _run(_READ, [url], fault_proxy)
    assert got == [n, hashlib.sha256(b"".join(recs)).hexdigest()]
    st = fault_proxy.stats()
    assert st["by_method"].get("HEAD", 0) == 0, st["targets"]
    assert st["requests"] == (1 if n * (size + 16) <= 256 << 10 else 2), st["targets"]


def test_several_objects_each_cost_at_most_two_requests(s3, fault_proxy):
    import hashlib
    urls, all_recs = [], []
    for i in range(4):
        recs = _records(300, 5000, seed=i)  # 1.5 MB each
        url = s3.url(f"{s3.prefix}/part-{i}.tfrecord")
        _write(url, recs)
        urls.append(url)
        all_recs += recs
    fault_proxy.reset()
    got = _run(_READ, urls, fault_proxy)
    assert got == [len(all_recs), hashlib.sha256(b"".join(all_recs)).hexdigest()]
    assert fault_proxy.stats()["requests"] <= 2 * len(urls), fault_proxy.stats()["targets"]


_SHUFFLE = """
import hashlib, json, sys, recordflow as rf
seed, paths = int(sys.argv[1]), sys.argv[2:]
recs = list(rf.Dataset.from_files(paths).global_shuffle(seed=seed))
print(json.dumps([hashlib.sha256(r).hexdigest()[:16] for r in recs]))
"""


def test_global_shuffle_over_s3_coalesces_reads_and_keeps_the_local_order(s3, fault_proxy,
                                                                          tmp_path):
    # 4 objects x 500 records: one GET per record would be 2000 requests. The window's records
    # are read in merged ranges: a handful of GETs, and exactly the order of the same files
    # read locally with the same seed.
    local, urls, total = [], [], 0
    for i in range(4):
        recs = _records(500, 1500 + 100 * i, seed=i)
        p = tmp_path / f"s-{i}.tfrecord"
        _write(str(p), recs)
        url = s3.url(f"{s3.prefix}/s-{i}.tfrecord")
        _write(url, recs)
        local.append(str(p))
        urls.append(url)
        total += len(recs)
    want = _run(_SHUFFLE, ["7", *local], fault_proxy)
    fault_proxy.reset()
    got = _run(_SHUFFLE, ["7", *urls], fault_proxy)
    assert len(got) == total and got == want
    st = fault_proxy.stats()
    # Per object: open (1 GET) and .idx probes/reads, then the records in a few ranged GETs.
    assert st["requests"] <= 10 * len(urls), st["targets"]
    assert st["by_method"].get("GET", 0) < total / 20, st


_MEMORY = """
import json, sys, recordflow as rf
ds = rf.Dataset.from_files(sys.argv[1:])
it = ds.iterator(memory_budget=1 << 30)
n = sum(1 for _ in it)
m = it.stats()["memory"]
print(json.dumps([n, m["stages"]["record readers"]["peak"], m["peak"]]))
"""


def test_read_ahead_is_charged_to_the_memory_budget(s3, fault_proxy):
    # A 20 MB object is read in 8 MiB parts, up to 4 at once: that read-ahead memory is charged
    # to the iterator's memory account (stage "record readers"), not only the 256 KiB buffer.
    recs = _records(2000, 10_000)
    url = s3.url(f"{s3.prefix}/big.tfrecord")
    _write(url, recs)
    n, readers_peak, total_peak = _run(_MEMORY, [url], fault_proxy)
    assert n == len(recs)
    assert readers_peak >= 8 << 20, readers_peak
    assert total_peak >= readers_peak
    assert readers_peak <= 4 * (8 << 20) + (2 << 20), readers_peak


def test_part_size_grows_to_16_mib_at_high_latency(s3, fault_proxy):
    # At 150 ms first-byte latency a 8 MiB part spends a large share of its time waiting: parts
    # grow to 16 MiB (9 x latency x throughput, capped), so a 40 MB object is the open GET and
    # 3 part GETs instead of 5.
    recs = _records(4000, 10_000)  # 40 MB
    url = s3.url(f"{s3.prefix}/slow.tfrecord")
    _write(url, recs)
    fault_proxy.reset()
    fault_proxy.configure(latency_ms=150)
    got = _run(_READ, [url], fault_proxy)
    assert got[0] == len(recs)
    size = len(recs) * (10_000 + 16)
    st = fault_proxy.stats()
    assert st["requests"] == 1 + -(-size // (16 << 20)), st["targets"]
