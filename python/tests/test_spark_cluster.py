"""recordflow.spark under Spark's own speculative execution, on a standalone cluster with
workers on two host names (spark_cluster.py): Spark launches a real speculative copy of a slow
write task on the other host, and the output still holds every row exactly once.

The cluster starts once per pytest run, only when a test here asks for it; the driver runs in
a subprocess (spark_speculation_driver.py) because this process may already hold test_spark's
local SparkContext.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from remote.servers import s3_server  # noqa: E402,F401  (the session's SeaweedFS S3 server)
from spark_cluster import StandaloneCluster  # noqa: E402

import recordflow as rf  # noqa: E402
import recordflow.spark as rfs  # noqa: E402
from recordflow import _core  # noqa: E402

HERE = Path(__file__).resolve().parent
ROWS = 2000
START_TIMEOUT = 120.0  # seconds for the master and both workers to register


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    c = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        c.start(timeout=START_TIMEOUT)  # fails (never skips) when it cannot start
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def speculative_writes(spark_cluster, s3_server, tmp_path_factory):  # noqa: F811
    """One application on the cluster writes two outputs under speculation, a local folder
    and an s3:// folder (one Spark start-up for both). Returns {"local": (out, ends), "s3":
    (out, ends)} with each write stage's task ends from the application's event log."""
    tmp = tmp_path_factory.mktemp("speculation")
    (tmp / "events").mkdir()
    (tmp / "markers").mkdir()
    outs = {"local": str(tmp / "out"),
            "s3": s3_server.url(f"spark-cluster/{os.urandom(4).hex()}")}
    env = {k: v for k, v in s3_server.env.items() if k.startswith("AWS_")}
    cmd = [sys.executable, str(HERE / "spark_speculation_driver.py"), spark_cluster.master_url,
           str(tmp / "events"), str(tmp / "markers"), str(ROWS), json.dumps(env), *outs.values()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    log = glob.glob(str(tmp / "events" / (result["app"] + "*")))
    assert len(log) == 1, log
    stages: dict[int, list[dict]] = {}
    with open(log[0]) as f:
        for line in f:
            e = json.loads(line)
            if e["Event"] == "SparkListenerTaskEnd":
                ti = e["Task Info"]
                stages.setdefault(e["Stage ID"], []).append(
                    {"index": ti["Index"], "attempt": ti["Attempt"], "host": ti["Host"],
                     "speculative": ti["Speculative"], "reason": e["Task End Reason"]["Reason"]})
    # The warm-up job's stage first, then one stage per write, in order.
    write_stages = [stages[k] for k in sorted(stages)][-len(outs):]
    return {kind: (out, ends) for (kind, out), ends in zip(outs.items(), write_stages)}


def _assert_real_speculative_copy(ends: list[dict]) -> None:
    """Spark itself ran a speculative copy of partition 0 on the other host, the copy won,
    and the slow first attempt was killed."""
    by = {(e["index"], e["attempt"]): e for e in ends}
    assert sorted(by) == [(0, 0), (0, 1), (1, 0)], ends
    first, copy = by[(0, 0)], by[(0, 1)]
    assert copy["speculative"] and not first["speculative"]
    assert copy["reason"] == "Success"
    assert first["reason"] == "TaskKilled", first
    assert copy["host"] != first["host"]
    assert {first["host"], copy["host"]} == {"127.0.0.1", "127.0.0.2"}


def _check_ids(records: list[bytes]) -> None:
    ids = [int(rf.Example.parse(r)["i"][0]) for r in records]
    assert sorted(ids) == list(range(ROWS))  # every row, none twice


def test_real_speculative_copy_writes_exactly_once(speculative_writes):
    out, ends = speculative_writes["local"]
    _assert_real_speculative_copy(ends)
    names = sorted(os.listdir(out))
    shards = [n for n in names if n.endswith(".tfrecord")]
    assert len(shards) == 2 and all(n.startswith(("part-00000-", "part-00001-")) for n in shards)
    # No _temporary folder, no attempt file: the killed attempt left nothing behind.
    assert names == sorted(["_SUCCESS", "_manifest.json"] + shards + [n + ".idx" for n in shards]
                           + [n + rfs.META_SUFFIX for n in shards])
    records = [r for n in shards for r in rf.RecordReader(os.path.join(out, n))]
    _check_ids(records)
    manifest = json.load(open(os.path.join(out, "_manifest.json")))
    assert manifest["records"] == ROWS and len(manifest["shards"]) == 2
    for s in manifest["shards"]:
        assert os.path.getsize(os.path.join(out, s["file"])) == s["bytes"]
        assert rf.count_records(os.path.join(out, s["file"])) == s["records"]


def test_real_speculative_copy_writes_exactly_once_s3(speculative_writes, s3_server,  # noqa: F811
                                                      monkeypatch):
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)
    out, ends = speculative_writes["s3"]
    _assert_real_speculative_copy(ends)
    names = sorted(u[len(out) + 1:] for u in _core.list_prefix(out + "/"))
    shards = [n for n in names if n.endswith(".tfrecord")]
    assert len(shards) == 2
    assert names == sorted(["_SUCCESS", "_manifest.json"] + shards + [n + ".idx" for n in shards]
                           + [n + rfs.META_SUFFIX for n in shards])
    _check_ids([r for n in shards for r in rf.RecordReader(out + "/" + n)])
    manifest = json.loads(_core.read_file(out + "/_manifest.json"))
    assert manifest["records"] == ROWS and len(manifest["shards"]) == 2
    for s in manifest["shards"]:
        assert _core.file_size(out + "/" + s["file"]) == s["bytes"]
    # Whatever the killed first attempt uploaded before the commit, the commit aborted it (every
    # open upload of the job): none is left open.
    assert _core.list_uploads(out + "/") == []
