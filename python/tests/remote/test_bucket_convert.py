"""convert / extract / reshard / index / doctor with bucket URLs as source and destination,
against the real loopback servers (SeaweedFS S3, GCS emulator, fault proxy). Outputs are
compared byte for byte with the same command run on local folders."""
from __future__ import annotations

import base64
import io
import json
import os
import signal
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import recordflow as rf

from . import sigv4
from .records import cli as _cli
from .records import write as _write
from .servers import ACCESS_KEY, SECRET_KEY

Image = pytest.importorskip("PIL.Image")

CLASSES = ("cat", "dog", "eel")


def _run(*args, env=None, check=0, timeout=120):
    proc = subprocess.run([_cli(), *map(str, args)], env=env or dict(os.environ),
                          capture_output=True, text=True, timeout=timeout)
    if check is not None:
        assert proc.returncode == check, f"{args}: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def _jpeg(rng, w=48, h=40) -> bytes:
    arr = rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=85)
    return buf.getvalue()


def _tree(per_class: int, seed: int = 0) -> dict[str, bytes]:
    rng = np.random.default_rng(seed)
    return {f"{c}/{i:03d}.jpg": _jpeg(rng) for c in CLASSES for i in range(per_class)}


def _write_local(root: Path, tree: dict[str, bytes]) -> None:
    for rel, data in tree.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def _local_outputs(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir())
            if p.name.startswith(("train-", "validation-"))}


# ---- raw object access (no recordflow code in the check) -----------------------------------

def _s3_get(srv, key: str) -> bytes:
    st, _, body = sigv4.request(srv.endpoint, "GET", f"/{srv.bucket}/{key}",
                                access_key=ACCESS_KEY, secret_key=SECRET_KEY)
    assert st == 200, f"GET {key}: {st}"
    return body


def _s3_put(srv, key: str, data: bytes) -> None:
    srv.put(key, data)


def _s3_keys(srv, prefix: str) -> list[str]:
    st, _, body = sigv4.request(srv.endpoint, "GET", f"/{srv.bucket}",
                                access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                                query={"list-type": "2", "prefix": prefix})
    assert st == 200, body
    keys = [el.text for el in ET.fromstring(body).iter() if el.tag.endswith("}Key")]
    return sorted(keys)


def _s3_outputs(srv, prefix: str) -> dict[str, bytes]:
    out = {}
    for key in _s3_keys(srv, prefix + "/"):
        name = key[len(prefix) + 1:]
        if name.startswith(("train-", "validation-")):
            out[name] = _s3_get(srv, key)
    return out


def _gcs_keys(srv, prefix: str) -> list[str]:
    url = (f"{srv.endpoint}/storage/v1/b/{srv.bucket}/o?prefix="
           + urllib.parse.quote(prefix, safe=""))
    with urllib.request.urlopen(url, timeout=30) as r:
        return sorted(item["name"] for item in json.load(r).get("items", []))


def _gcs_get(srv, key: str) -> bytes:
    url = (f"{srv.endpoint}/storage/v1/b/{srv.bucket}/o/" + urllib.parse.quote(key, safe="")
           + "?alt=media")
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


CONVERT_FLAGS = ("--shards", 4, "--val-fraction", 0.25, "--seed", 7, "--no-progress",
                 "--threads", 2)


@pytest.fixture
def reference(tmp_path):
    """A local image tree, the same tree's local conversion (the expected bytes)."""
    tree = _tree(per_class=6)
    src = tmp_path / "images"
    _write_local(src, tree)
    out = tmp_path / "local-out"
    _run("convert", src, out, *CONVERT_FLAGS)
    return tree, src, _local_outputs(out)


# ---- 1. convert ------------------------------------------------------------------------------

def test_convert_bucket_prefix_to_bucket_is_byte_identical_to_local(s3, reference):
    tree, _, expected = reference
    for rel, data in tree.items():
        s3.put(f"{s3.prefix}/images/{rel}", data)
    s3.put(f"{s3.prefix}/images/README.txt", b"not an image: listed as skipped")
    dst = s3.url(f"{s3.prefix}/out")
    # Exit 4: done, with skipped inputs listed in the summary.
    proc = _run("convert", s3.url(f"{s3.prefix}/images"), dst, *CONVERT_FLAGS, "--json", check=4)
    summary = json.loads(proc.stdout)
    assert summary["records"] == len(tree)
    assert summary["destination"] == dst
    assert any(s["reason"] == "not in a class folder" for s in summary["skipped"])
    got = _s3_outputs(s3, f"{s3.prefix}/out")
    assert sorted(got) == sorted(expected) and len(expected) == 10  # 5 shards + 5 .idx
    for name in expected:
        assert got[name] == expected[name], name
    keys = _s3_keys(s3, f"{s3.prefix}/out/")
    for side in ("labels.txt", "summary.json", ".recordflow-convert/plan.json"):
        assert f"{s3.prefix}/out/{side}" in keys
    assert _s3_get(s3, f"{s3.prefix}/out/labels.txt") == b"cat\ndog\neel\n"
    # The shards read back through recordflow too.
    assert rf.Dataset.from_files(dst + "/train-*.tfrecord").cardinality() != 0


def test_convert_local_to_bucket_and_manifest_in_bucket(s3, reference):
    tree, src, expected = reference
    dst = s3.url(f"{s3.prefix}/fromlocal")
    _run("convert", src, dst + "/", *CONVERT_FLAGS)  # a trailing '/' names the same prefix
    assert _s3_outputs(s3, f"{s3.prefix}/fromlocal") == expected
    # A manifest in the bucket: relative keys resolve against its prefix, absolute URLs as is.
    for rel, data in tree.items():
        s3.put(f"{s3.prefix}/m/{rel}", data)
    rows = ["image,label"]
    for i, rel in enumerate(sorted(tree)):
        path = rel if i % 2 else s3.url(f"{s3.prefix}/m/{rel}")
        rows.append(f"{path},{rel.split('/')[0]}")
    s3.put(f"{s3.prefix}/m/list.csv", ("\n".join(rows) + "\n").encode())
    out = _run("convert", s3.url(f"{s3.prefix}/m/list.csv"), s3.url(f"{s3.prefix}/mout"),
               "--shards", 2, "--no-progress", "--json")
    summary = json.loads(out.stdout)
    assert summary["records"] == len(tree) and summary["skipped_count"] == 0
    recs = list(rf.RecordReader(s3.url(f"{s3.prefix}/mout/train-00000-of-00002.tfrecord")))
    recs += list(rf.RecordReader(s3.url(f"{s3.prefix}/mout/train-00001-of-00002.tfrecord")))
    encoded = sorted(rf.Example.parse(r)["image/encoded"][0] for r in recs)
    assert encoded == sorted(tree.values())


def test_convert_to_gcs_is_byte_identical_to_local(gcs, reference):
    tree, src, expected = reference
    for rel, data in tree.items():
        gcs.put(f"{gcs.prefix}/images/{rel}", data)
    _run("convert", f"gs://{gcs.bucket}/{gcs.prefix}/images", f"gs://{gcs.bucket}/{gcs.prefix}/o",
         *CONVERT_FLAGS)
    names = [k for k in _gcs_keys(gcs, f"{gcs.prefix}/o/")
             if k.count("/") == 2 and k.rsplit("/", 1)[1].startswith(("train-", "validation-"))]
    assert sorted(k.rsplit("/", 1)[1] for k in names) == sorted(expected)
    for k in names:
        assert _gcs_get(gcs, k) == expected[k.rsplit("/", 1)[1]], k


def test_convert_to_bucket_killed_mid_run_leaves_no_half_object_and_resumes(
        s3, fault_proxy, tmp_path):
    tree = _tree(per_class=16, seed=3)
    src = tmp_path / "images"
    _write_local(src, tree)
    flags = ("--shards", 8, "--val-fraction", 0.25, "--seed", 11, "--no-progress",
             "--threads", 1)
    _run("convert", src, tmp_path / "ref", *flags)
    expected = _local_outputs(tmp_path / "ref")
    prefix = f"{s3.prefix}/killed"
    dst = s3.url(prefix)
    # Slow requests through the proxy, so the kill lands between shards' uploads.
    fault_proxy.configure(latency_ms=40)
    env = dict(os.environ, **fault_proxy.env)
    proc = subprocess.Popen([_cli(), "convert", str(src), dst, *map(str, flags)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    state = f"{prefix}/.recordflow-convert/"
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            done = [k for k in _s3_keys(s3, state) if k.endswith(".tfrecord.json")]
            if len(done) >= 2:
                break
            assert proc.poll() is None, "convert finished before it could be killed"
            time.sleep(0.02)
        else:
            pytest.fail("no shard was published within 60 s")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    fault_proxy.reset()
    partial = _s3_outputs(s3, prefix)
    assert 0 < len(partial) < len(expected), sorted(partial)
    # Whatever exists under a final key is complete: byte-identical to the clean local run.
    for name, data in partial.items():
        assert data == expected[name], f"{name}: half-written object under its final key"
    # A published shard whose bytes changed since (same size, other ETag) is rewritten too.
    victim = sorted(n for n in partial if n.endswith(".tfrecord"))[0]
    damaged = bytearray(partial[victim])
    damaged[-1] ^= 0xFF
    _s3_put(s3, f"{prefix}/{victim}", bytes(damaged))
    out = _run("convert", src, dst, *flags, "--resume", "--json")
    summary = json.loads(out.stdout)
    assert 1 <= summary["resumed_shards"] < 10
    assert all(not s["resumed"] for s in summary["splits"]["train"]["shards"]
               if s["file"] == victim)
    assert _s3_outputs(s3, prefix) == expected
    # Without --resume an existing conversion is refused, with --overwrite replaced.
    assert _run("convert", src, dst, *flags, check=None).returncode != 0
    _run("convert", src, dst, *flags, "--overwrite")
    assert _s3_outputs(s3, prefix) == expected


# ---- 2. extract, reshard, index, count, cat, verify, inspect -------------------------------

def test_extract_from_bucket_to_bucket_matches_local(s3, reference, tmp_path):
    tree, src, _ = reference
    conv = s3.url(f"{s3.prefix}/conv")
    _run("convert", src, conv, "--shards", 2, "--no-progress")
    shards = [f"{conv}/train-00000-of-00002.tfrecord", f"{conv}/train-00001-of-00002.tfrecord"]
    _run("extract", *shards, tmp_path / "local-x")
    out = s3.url(f"{s3.prefix}/x")
    summary = json.loads(_run("extract", *shards, out + "/", "--json").stdout)
    assert summary["images"] == len(tree)
    local = {p.relative_to(tmp_path / "local-x").as_posix(): p.read_bytes()
             for p in (tmp_path / "local-x").rglob("*") if p.is_file()}
    remote = {k[len(f"{s3.prefix}/x/"):]: _s3_get(s3, k) for k in _s3_keys(s3, f"{s3.prefix}/x/")}
    assert remote == local
    assert {k: v for k, v in remote.items() if k != "labels.csv"} == tree
    # Again without --overwrite: existing objects are kept, the new copies get -1 names.
    _run("extract", shards[0], out)
    keys = _s3_keys(s3, f"{s3.prefix}/x/")
    assert any(k.endswith("-1.jpg") for k in keys)
    assert {k[len(f"{s3.prefix}/x/"):] for k in keys} >= set(tree)


def test_reshard_between_buckets_and_local_is_identical(s3, gcs, tmp_path):
    recs = [bytes([i % 251]) * (50 + i) for i in range(120)]
    inputs = [s3.url(f"{s3.prefix}/in/part-{i}.tfrecord") for i in range(3)]
    for i, url in enumerate(inputs):
        _write(url, recs[i * 40:(i + 1) * 40])
    local_in = tmp_path / "in"
    local_in.mkdir()
    for i in range(3):
        _write(str(local_in / f"part-{i}.tfrecord"), recs[i * 40:(i + 1) * 40])
    flags = ("--shards", 4, "--shuffle", "--seed", 5)
    _run("reshard", *sorted(local_in.glob("*.tfrecord")), tmp_path / "out", *flags)
    expected = {p.name: p.read_bytes() for p in sorted((tmp_path / "out").glob("shard-*"))}
    assert len(expected) == 8  # 4 shards + 4 .idx
    # An s3:// glob as input, s3:// destination.
    dst = s3.url(f"{s3.prefix}/re")
    summary = json.loads(_run("reshard", s3.url(f"{s3.prefix}/in/part-*.tfrecord"), dst, *flags,
                              "--json").stdout)
    assert summary["records"] == 120
    got = {k.rsplit("/", 1)[1]: _s3_get(s3, k) for k in _s3_keys(s3, f"{s3.prefix}/re/shard-")}
    assert got == expected
    # Resume over a complete result rewrites nothing; a plain re-run is refused.
    summary = json.loads(_run("reshard", *inputs, dst, *flags, "--resume", "--json").stdout)
    assert summary["resumed_shards"] == 4 and summary["records_this_run"] == 0
    assert _run("reshard", *inputs, dst, *flags, check=None).returncode == 1
    # gs:// destination from s3:// inputs.
    gdst = f"gs://{gcs.bucket}/{gcs.prefix}/re"
    _run("reshard", *inputs, gdst, *flags)
    got = {k.rsplit("/", 1)[1]: _gcs_get(gcs, k)
           for k in _gcs_keys(gcs, f"{gcs.prefix}/re/shard-")}
    assert got == expected


def test_every_reading_command_takes_s3_and_gs_urls(s3, gcs):
    recs = [rf.Example({"x": [i], "name": f"r{i}"}).serialize() for i in range(30)]
    urls = [s3.url(f"{s3.prefix}/r/a-{i}.tfrecord") for i in range(2)]
    for url in urls:
        _write(url, recs)
    pattern = s3.url(f"{s3.prefix}/r/a-*.tfrecord")
    count = json.loads(_run("count", pattern, "--json").stdout)
    assert json.dumps(count).count("30") >= 2 and "60" in json.dumps(count)
    cat = subprocess.run([_cli(), "cat", urls[0]], capture_output=True, timeout=60)
    assert cat.returncode == 0, cat.stderr
    assert cat.stdout.split() == [base64.b64encode(r) for r in recs]
    _run("verify", pattern)
    inspect = _run("inspect", pattern, "--json").stdout
    assert '"x"' in inspect and '"name"' in inspect
    # index writes the .idx next to the remote shard.
    _run("index", urls[0])
    idx = _s3_get(s3, f"{s3.prefix}/r/a-0.tfrecord.idx").decode().splitlines()
    assert len(idx) == 30 and idx[0].startswith("0 ")
    g = f"gs://{gcs.bucket}/{gcs.prefix}/r/a.tfrecord"
    _write(g, recs)
    assert "30" in _run("count", g).stdout
    _run("verify", g)
    _run("index", g)
    assert len(_gcs_get(gcs, f"{gcs.prefix}/r/a.tfrecord.idx").decode().splitlines()) == 30
    assert '"x"' in _run("inspect", f"gs://{gcs.bucket}/{gcs.prefix}/r/*.tfrecord",
                         "--json").stdout


# ---- 3. doctor -------------------------------------------------------------------------------

def _doctor_shards(s3) -> str:
    recs = [rf.Example({"x": [i], "y": [float(i)]}).serialize() for i in range(400)]
    for i in range(2):
        _write(s3.url(f"{s3.prefix}/d/p-{i}.tfrecord"), recs)
    return s3.url(f"{s3.prefix}/d/p-*.tfrecord")


def test_cli_doctor_on_s3_names_remote_read(s3):
    pattern = _doctor_shards(s3)
    out = _run("doctor", pattern, "--preset", "records", "--seconds", 0.3, "--no-variants",
               "--json", "--quiet", "--batch", 32, timeout=120)
    report = json.loads(out.stdout)
    read = [s for s in report["stages"] if s["id"] == "read"]
    assert read and read[0]["name"].startswith(f"remote read from s3://{s3.bucket}"), read
    assert read[0]["elements"] > 0
    # A single missing object: NotFound naming the URL, exit 1.
    missing = s3.url(f"{s3.prefix}/d/nope.tfrecord")
    proc = _run("doctor", missing, "--seconds", 0.3, "--quiet", check=1)
    assert "NotFound" in proc.stderr and missing in proc.stderr


def test_python_doctor_on_s3_dataset(s3):
    from recordflow.doctor import diagnose

    ds = rf.Dataset.from_files(_doctor_shards(s3)).batch(32)
    report = diagnose(ds, seconds=0.3, try_variants=False)
    stages = report.to_dict()["stages"]
    read = [s for s in stages if s["id"] == "read"]
    assert read[0]["name"].startswith(f"remote read from s3://{s3.bucket}"), read
    assert read[0]["elements"] > 0


# ---- 4. errors -------------------------------------------------------------------------------

def test_convert_missing_bucket_or_prefix_is_not_found_naming_the_url(s3, reference):
    _, src, _ = reference
    missing_src = s3.url(f"{s3.prefix}/no-such-images")
    proc = _run("convert", missing_src, s3.url(f"{s3.prefix}/o"), "--shards", 1, check=1)
    assert "NotFound" in proc.stderr and missing_src in proc.stderr
    proc = _run("convert", src, "s3://rf-no-such-bucket/out", "--shards", 1, check=1)
    assert "NotFound" in proc.stderr and "s3://rf-no-such-bucket/out" in proc.stderr
    manifest = s3.url(f"{s3.prefix}/none.csv")
    proc = _run("convert", manifest, s3.url(f"{s3.prefix}/o"), "--shards", 1, check=1)
    assert "NotFound" in proc.stderr and manifest in proc.stderr
    proc = _run("extract", s3.url(f"{s3.prefix}/none.tfrecord"), s3.url(f"{s3.prefix}/x"),
                check=1)
    assert "NotFound" in proc.stderr and f"{s3.prefix}/none.tfrecord" in proc.stderr


def test_convert_with_a_wrong_secret_is_permission_denied_naming_the_url(s3, reference):
    _, src, _ = reference
    dst = s3.url(f"{s3.prefix}/denied")
    env = dict(os.environ, AWS_SECRET_ACCESS_KEY="definitely-wrong-secret")
    proc = _run("convert", src, dst, "--shards", 1, env=env, check=1)
    assert "PermissionDenied" in proc.stderr and dst in proc.stderr, proc.stderr
    assert "definitely-wrong-secret" not in proc.stderr
    assert _s3_keys(s3, f"{s3.prefix}/denied") == []


def test_convert_upload_faults_are_retried_or_fail_cleanly(s3, fault_proxy, reference):
    _, src, expected = reference
    env = dict(os.environ, **fault_proxy.env)
    # Transient: 503s and dropped connections on uploads are retried; the output is exact.
    fault_proxy.configure(fail_status=503, fail_count=3, match_method="PUT")
    _run("convert", src, s3.url(f"{s3.prefix}/flaky"), *CONVERT_FLAGS, env=env)
    assert fault_proxy.stats()["failed"] == 3
    fault_proxy.reset()
    assert _s3_outputs(s3, f"{s3.prefix}/flaky") == expected
    # Persistent: every upload fails; a clear error naming the object, and no object at all.
    fault_proxy.reset()
    fault_proxy.configure(fail_status=503, fail_count=10**6, match_method="PUT")
    start = time.monotonic()
    proc = _run("convert", src, s3.url(f"{s3.prefix}/down"), *CONVERT_FLAGS, env=env, check=1,
                timeout=180)
    assert f"s3://{s3.bucket}/{s3.prefix}/down/" in proc.stderr, proc.stderr
    assert "503" in proc.stderr or "Unavailable" in proc.stderr, proc.stderr
    assert time.monotonic() - start < 120
    fault_proxy.reset()
    assert _s3_outputs(s3, f"{s3.prefix}/down") == {}


def test_python_convert_and_extract_take_urls(s3, gcs, reference):
    tree, _, expected = reference
    for rel, data in tree.items():
        s3.put(f"{s3.prefix}/py/{rel}", data)
    summary = rf.convert(s3.url(f"{s3.prefix}/py"), f"gs://{gcs.bucket}/{gcs.prefix}/py",
                         shards=4, val_fraction=0.25, seed=7, num_threads=2)
    assert summary["records"] == len(tree)
    for name, data in expected.items():
        assert _gcs_get(gcs, f"{gcs.prefix}/py/{name}") == data, name
    shards = [f"gs://{gcs.bucket}/{gcs.prefix}/py/{n}" for n in sorted(expected)
              if n.endswith(".tfrecord")]
    out = rf.extract(shards, s3.url(f"{s3.prefix}/pyx"))
    assert out["images"] == len(tree)
    for rel, data in tree.items():
        assert _s3_get(s3, f"{s3.prefix}/pyx/{rel}") == data, rel


def test_convert_manifest_served_over_http(http_server, reference, tmp_path):
    tree, src, _ = reference
    prefix = f"b-{uuid.uuid4().hex[:8]}"
    for rel, data in tree.items():
        http_server.put(f"{prefix}/{rel}", data)
    rows = ["image,label"] + [f"{rel},{rel.split('/')[0]}" for rel in sorted(tree)]
    http_server.put(f"{prefix}/list.csv", ("\n".join(rows) + "\n").encode())
    local_manifest = src / "list.csv"
    local_manifest.write_text("\n".join(rows) + "\n")
    _run("convert", local_manifest, tmp_path / "m-local", "--shards", 2, "--seed", 3,
         "--no-progress")
    _run("convert", http_server.url(f"{prefix}/list.csv"), tmp_path / "m-http", "--shards", 2,
         "--seed", 3, "--no-progress")
    expected = _local_outputs(tmp_path / "m-local")
    assert expected and _local_outputs(tmp_path / "m-http") == expected
    # An image folder needs a listing, which HTTP has not: a clear error, not a crash.
    proc = _run("convert", http_server.url(prefix), tmp_path / "f-http", "--shards", 1, check=1)
    assert "Unimplemented" in proc.stderr and http_server.url(prefix) in proc.stderr
