"""The local shard cache (cache_dir=, RECORDFLOW_CACHE_DIR) against SeaweedFS through the fault
proxy, whose counters show which requests reached the store: a warm epoch makes no GET, a
changed object is fetched again, the size limit evicts the least recently used entry and is
never exceeded, damaged entries are never served, processes share one folder safely, and
checkpoints restore with the cache."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

import recordflow as rf
from recordflow import _core
from remote.records import cli as _cli
from remote.records import records, remote_part_sizes, write_shards
from remote.records import write as _write


def _records(n: int, size: int, seed: int = 0) -> list[bytes]:
    return records(n, size, seed, step=7)


@pytest.fixture
def s3p(s3, fault_proxy, monkeypatch):
    """The s3 fixture (credentials, a fresh key prefix) through the fault proxy, so its counters
    see every request; the process-wide cache is switched off again after the test."""
    for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.setenv(k, fault_proxy.env[k])
    before = _core.shard_cache()
    yield s3
    _core.set_shard_cache("", before[1])
    if before[0]:
        _core.set_shard_cache(*before)


def _entries(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.name.endswith(".shard"))


def _delta(after: dict, before: dict) -> dict:
    return {k: after[k] - before[k] for k in after}


def _gets(proxy) -> int:
    return proxy.stats()["by_method"].get("GET", 0)


def test_warm_epoch_makes_no_data_gets(s3p, fault_proxy, tmp_path):
    urls, all_recs = write_shards(lambda i: s3p.url(f"{s3p.prefix}/part-{i}.tfrecord"), 3,
                                  200, 1000, step=7)
    cache = tmp_path / "cache"
    ds = rf.Dataset.from_files(urls, cache_dir=str(cache), cache_size="1G")
    fault_proxy.reset()
    assert list(ds) == all_recs
    cold = ds.stats()["cache"]
    assert cold["misses"] >= 3 and cold["bytes_fetched"] >= sum(len(r) + 16 for r in all_recs)
    assert _gets(fault_proxy) >= 3
    assert len(_entries(cache)) == 3

    fault_proxy.reset()
    assert list(ds) == all_recs
    warm = _delta(ds.stats()["cache"], cold)
    st = fault_proxy.stats()
    assert st["by_method"].get("GET", 0) == 0, st["targets"]
    assert st["by_method"].get("HEAD", 0) == 3, st["targets"]  # the validation: one per file
    assert warm["hits"] == 3 and warm["misses"] == 0 and warm["bytes_fetched"] == 0

    # Another process on the same folder (configured by the environment) is warm too.
    fault_proxy.reset()
    code = ("import hashlib, json, sys, recordflow as rf\n"
            "recs = list(rf.Dataset.from_files(sys.argv[1:]))\n"
            "print(json.dumps([len(recs), hashlib.sha256(b''.join(recs)).hexdigest()]))\n")
    out = subprocess.run([sys.executable, "-c", code, *urls], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, RECORDFLOW_CACHE_DIR=str(cache),
                                               RECORDFLOW_CACHE_SIZE="1G"))
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == [len(all_recs),
                                      hashlib.sha256(b"".join(all_recs)).hexdigest()]
    assert _gets(fault_proxy) == 0, fault_proxy.stats()["targets"]


def test_overwritten_object_is_fetched_again_never_served_stale(s3p, fault_proxy, tmp_path):
    url = s3p.url(f"{s3p.prefix}/a.tfrecord")
    old, new = _records(50, 500, seed=1), _records(70, 400, seed=2)
    _write(url, old)
    cache = tmp_path / "cache"
    assert list(rf.RecordReader(url, cache_dir=str(cache))) == old
    before = _core.shard_cache_stats()
    _write(url, new)
    fault_proxy.reset()
    assert list(rf.RecordReader(url)) == new
    d = _delta(_core.shard_cache_stats(), before)
    assert d["misses"] == 1 and d["hits"] == 0 and d["invalidated"] == 1
    assert _gets(fault_proxy) >= 1
    assert len(_entries(cache)) == 1  # the old version is gone from the folder


def test_size_limit_evicts_least_recently_used_and_is_never_exceeded(s3p, fault_proxy, tmp_path):
    urls = []
    for i in range(4):
        url = s3p.url(f"{s3p.prefix}/s-{i}.tfrecord")
        _write(url, _records(100, 1000, seed=i))  # 101,600 bytes each
        urls.append(url)
    size = 101_600
    limit = 2 * size + 1000  # two entries fit, three do not
    cache = tmp_path / "cache"

    def read(i: int) -> dict:
        before = _core.shard_cache_stats()
        assert list(rf.RecordReader(urls[i], cache_dir=str(cache), cache_size=limit)) == \
            _records(100, 1000, seed=i)
        total = sum(p.stat().st_size for p in _entries(cache))
        assert total <= limit, (total, limit)
        return _delta(_core.shard_cache_stats(), before)

    assert read(0)["misses"] == 1
    assert read(1)["misses"] == 1
    assert read(0)["hits"] == 1  # 0 is now the most recently used
    d = read(2)
    assert d["misses"] == 1 and d["evictions"] == 1
    assert read(0)["hits"] == 1  # kept
    assert read(1)["misses"] == 1  # 1 was evicted (least recently used)
    # An object larger than the whole cache is read directly, not cached.
    big = s3p.url(f"{s3p.prefix}/big.tfrecord")
    _write(big, _records(300, 1000, seed=9))
    before = _core.shard_cache_stats()
    assert list(rf.RecordReader(big, cache_dir=str(cache), cache_size=limit)) == \
        _records(300, 1000, seed=9)
    assert _delta(_core.shard_cache_stats(), before)["bypassed"] == 1
    assert sum(p.stat().st_size for p in _entries(cache)) <= limit


def test_truncated_entry_is_detected_and_fetched_again(s3p, fault_proxy, tmp_path):
    url = s3p.url(f"{s3p.prefix}/t.tfrecord")
    recs = _records(100, 900)
    _write(url, recs)
    cache = tmp_path / "cache"
    assert list(rf.RecordReader(url, cache_dir=str(cache))) == recs
    (entry,) = _entries(cache)
    os.truncate(entry, entry.stat().st_size // 2)
    before = _core.shard_cache_stats()
    fault_proxy.reset()
    assert list(rf.RecordReader(url)) == recs
    d = _delta(_core.shard_cache_stats(), before)
    assert d["invalidated"] == 1 and d["misses"] == 1 and d["hits"] == 0
    assert _gets(fault_proxy) >= 1
    assert entry.stat().st_size == sum(len(r) + 16 for r in recs)


def test_damaged_bytes_in_an_entry_fail_the_crc_naming_the_url(s3p, tmp_path):
    url = s3p.url(f"{s3p.prefix}/c.tfrecord")
    _write(url, _records(20, 300))
    cache = tmp_path / "cache"
    assert len(list(rf.RecordReader(url, cache_dir=str(cache)))) == 20
    (entry,) = _entries(cache)
    data = bytearray(entry.read_bytes())
    data[16 + 5 * 316 + 100] ^= 0xFF  # a payload byte of record 5
    entry.write_bytes(bytes(data))
    with pytest.raises(rf.DataLossError) as e:
        list(rf.RecordReader(url))
    assert url in str(e.value) and "record index 5" in str(e.value)


def test_leftover_temporary_file_is_never_served_and_is_cleaned(s3p, tmp_path):
    url = s3p.url(f"{s3p.prefix}/crash.tfrecord")
    recs = _records(30, 200)
    _write(url, recs)
    cache = tmp_path / "cache"
    cache.mkdir()
    # What a process killed mid-fill leaves: a temporary file of a dead pid.
    orphan = cache / "0123456789abcdef-0123456789abcdef-6480.shard.tmp-999999-deadbeef"
    orphan.write_bytes(b"\0" * 100)
    assert list(rf.RecordReader(url, cache_dir=str(cache))) == recs
    assert not orphan.exists()
    assert not [p for p in cache.iterdir() if ".tmp-" in p.name]


_FILL = """
import hashlib, json, sys, recordflow as rf
from recordflow import _core
recs = list(rf.RecordReader(sys.argv[1], cache_dir=sys.argv[2]))
print(json.dumps([len(recs), hashlib.sha256(b"".join(recs)).hexdigest(),
                  _core.shard_cache_stats()]))
"""


def test_two_processes_filling_the_same_shard_get_correct_data(s3p, fault_proxy, tmp_path):
    url = s3p.url(f"{s3p.prefix}/shared.tfrecord")
    recs = _records(2000, 1000)  # 2 MB
    _write(url, recs)
    want = [len(recs), hashlib.sha256(b"".join(recs)).hexdigest()]
    cache = tmp_path / "cache"
    rf_part = 256 << 10
    fault_proxy.configure(latency_ms=20)
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, "-c",
                               f"from recordflow import _core; _core._set_remote_part_sizes("
                               f"{rf_part}, 16 << 20)\n" + _FILL, url, str(cache)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        outs.append(json.loads(out))
    for got in outs:
        assert got[:2] == want
    assert sum(o[2]["misses"] for o in outs) == 1  # one fetched, the other waited and read it
    assert sum(o[2]["hits"] for o in outs) == 1
    assert [p.stat().st_size for p in _entries(cache)] == [sum(len(r) + 16 for r in recs)]
    assert not [p for p in cache.iterdir() if ".tmp-" in p.name]


def test_checkpoint_restores_with_the_cache(s3p, fault_proxy, tmp_path):
    urls, all_recs = write_shards(lambda i: s3p.url(f"{s3p.prefix}/ck-{i}.tfrecord"), 2,
                                  100, 700, step=7)
    cache = tmp_path / "cache"
    ds = rf.Dataset.from_files(urls, cache_dir=str(cache)).shuffle(50, seed=3)
    it = ds.iterator()
    head = [next(it) for _ in range(60)]
    state = it.checkpoint()
    rest = list(it)
    fault_proxy.reset()
    ds2 = rf.Dataset.from_files(urls, cache_dir=str(cache)).shuffle(50, seed=3)
    assert list(ds2.restore(state)) == rest
    assert _gets(fault_proxy) == 0, fault_proxy.stats()["targets"]
    assert sorted(head + rest) == sorted(all_recs)


def test_object_changed_while_filling_is_not_committed(s3p, fault_proxy, tmp_path):
    url = s3p.url(f"{s3p.prefix}/moving.tfrecord")
    old, new = _records(2000, 1000, seed=1), _records(1500, 1000, seed=2)
    _write(url, old)
    cache = tmp_path / "cache"
    try:
        with remote_part_sizes(256 << 10, 16 << 20):
            fault_proxy.configure(latency_ms=50, match_method="GET")
            # Overwrite after the fill has started (its first GETs are slowed down).
            t = threading.Timer(0.12, lambda: _write(url, new))
            t.start()
            got = list(rf.RecordReader(url, cache_dir=str(cache)))
            t.join()
    finally:
        fault_proxy.reset()
    assert got in (old, new)  # one version, never a mix
    # Whatever was committed is the object as it is now: a fresh read gives `new`.
    assert list(rf.RecordReader(url)) == new
    entries = _entries(cache)
    assert len(entries) == 1 and entries[0].stat().st_size == sum(len(r) + 16 for r in new)
    assert not [p for p in cache.iterdir() if ".tmp-" in p.name]


def test_cache_options_are_checked(tmp_path):
    with pytest.raises(rf.InvalidArgumentError):
        rf.Dataset.from_files("x.tfrecord", cache_dir=str(tmp_path), cache_size="lots")
    with pytest.raises(rf.InvalidArgumentError):
        rf.Dataset.from_files("x.tfrecord", cache_dir=str(tmp_path), cache_size=0)
    with pytest.raises(TypeError):
        rf.Dataset.from_files("x.tfrecord", cache_dir=str(tmp_path), cache_size=1.5)
    ds = rf.Dataset.from_files("x.tfrecord").with_options(cache_dir=str(tmp_path),
                                                          cache_size="2G")
    assert ds.options["cache_dir"] == str(tmp_path) and ds.options["cache_size"] == "2G"
    assert ds.shuffle(10).options["cache_dir"] == str(tmp_path)  # derived datasets keep it
    assert _core.parse_byte_size("20G") == 20 << 30
    assert _core.parse_byte_size("512M") == 512 << 20
    assert _core.parse_byte_size("1000") == 1000


def test_cli_cache_dir_serves_the_second_run_without_gets(s3p, fault_proxy, tmp_path):
    url = s3p.url(f"{s3p.prefix}/cli.tfrecord")
    _write(url, _records(40, 100))
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECORDFLOW_CACHE")}
    for cmd in (["count", url], ["verify", url], ["cat", url]):
        fault_proxy.reset()
        r = subprocess.run([_cli(), *cmd, "--cache-dir", str(cache), "--cache-size", "64M"],
                           env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (cmd, r.stderr)
        if cmd[0] == "count":
            assert "40" in r.stdout
            assert _gets(fault_proxy) >= 1  # the cold run fetched the object
        else:
            assert _gets(fault_proxy) == 0, (cmd, fault_proxy.stats()["targets"])
    assert len(_entries(cache)) == 1
    r = subprocess.run([_cli(), "count", url, "--cache-dir", str(cache), "--cache-size", "lots"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not a byte size" in r.stderr


@pytest.mark.parametrize("kind", ["gcs", "http"])
def test_gs_and_http_objects_are_cached_and_revalidated(kind, request, monkeypatch, tmp_path):
    server = request.getfixturevalue(f"{kind}_server")
    if kind == "gcs":
        for k in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_OAUTH_ACCESS_TOKEN",
                  "GCS_ENDPOINT_URL", "GCS_HMAC_ACCESS_KEY_ID", "GCS_HMAC_SECRET"):
            monkeypatch.delenv(k, raising=False)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.endpoint)
    before_cache = _core.shard_cache()
    key = f"sc-{uuid.uuid4().hex[:8]}/x.tfrecord"

    def put(recs: list[bytes]) -> None:
        local = tmp_path / "src.tfrecord"
        _write(str(local), recs)
        server.put(key, local.read_bytes())

    old, new = _records(40, 300, seed=1), _records(55, 200, seed=2)
    cache = tmp_path / "cache"
    try:
        put(old)
        url = server.url(key)
        s0 = _core.shard_cache_stats()
        assert list(rf.RecordReader(url, cache_dir=str(cache))) == old
        assert list(rf.RecordReader(url)) == old
        d = _delta(_core.shard_cache_stats(), s0)
        assert d["misses"] == 1 and d["hits"] == 1, d
        put(new)
        assert list(rf.RecordReader(url)) == new
        d = _delta(_core.shard_cache_stats(), s0)
        assert d["misses"] == 2 and d["invalidated"] == 1, d
        assert len(_entries(cache)) == 1
    finally:
        _core.set_shard_cache("", before_cache[1])
        if before_cache[0]:
            _core.set_shard_cache(*before_cache)
