"""URLs wherever a path is accepted: s3:// and http(s):// through the real loopback servers
(servers.py) and the fault proxy. Every record is compared with what was written."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import recordflow as rf
from remote.records import (
    check_aborted_writer_leaves_no_object,
    check_cli_count_cat_verify_index,
    check_glob_global_shuffle_and_checkpoint,
    check_read_through_fault_proxy,
    check_round_trip_gzip_and_index,
    remote_part_sizes,
)
from remote.records import records as _records
from remote.records import write as _write


def _url(s3, key: str) -> str:
    return s3.url(f"{s3.prefix}/{key}")


def test_s3_round_trip_gzip_and_indexed_reader(s3):
    check_round_trip_gzip_and_index(lambda key: _url(s3, key))


def test_s3_missing_object_is_not_found_and_wrong_secret_is_permission_denied(s3, monkeypatch):
    with pytest.raises(rf.NotFoundError, match="nope.tfrecord"):
        rf.RecordReader(_url(s3, "nope.tfrecord"))
    _write(_url(s3, "p.tfrecord"), [b"x"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "definitely-wrong-secret")
    with pytest.raises(rf.errors.PermissionDeniedError) as e:
        rf.RecordReader(_url(s3, "p.tfrecord"))
    assert "definitely-wrong-secret" not in str(e.value)


def test_s3_glob_from_files_global_shuffle_and_checkpoint(s3):
    state = check_glob_global_shuffle_and_checkpoint(lambda key: _url(s3, key))
    assert os.environ["AWS_SECRET_ACCESS_KEY"].encode() not in state


def test_s3_cache_to_a_bucket(s3):
    recs = _records(30, 20)
    _write(_url(s3, "src.tfrecord"), recs)
    ds = rf.Dataset.from_files(_url(s3, "src.tfrecord")).cache(_url(s3, "cache/c.tfrecord"))
    assert list(ds) == recs
    assert list(rf.RecordReader(_url(s3, "cache/c.tfrecord"))) == recs
    assert list(ds) == recs  # from the cache now


def test_s3_writer_closed_by_an_exception_leaves_no_object(s3):
    # 20 MiB: a multipart upload was started.
    check_aborted_writer_leaves_no_object(_url(s3, "aborted.tfrecord"), 20, 1 << 20)


def test_http_ranged_reads(http_server):
    recs = _records(300, 500, seed=5)
    local = Path(http_server.env["RF_TEST_HTTP_ROOT"]) / "h.tfrecord"
    local.parent.mkdir(parents=True, exist_ok=True)
    _write(str(local), recs, index=True)
    url = http_server.url("h.tfrecord")
    assert list(rf.RecordReader(url)) == recs
    assert rf.IndexedRecordReader(url)[299] == recs[299]
    with pytest.raises(rf.NotFoundError):
        rf.RecordReader(http_server.url("missing.tfrecord"))


def test_cli_count_cat_verify_index_on_s3(s3):
    check_cli_count_cat_verify_index(_url(s3, "cli.tfrecord"), _url(s3, "missing.tfrecord"))


@pytest.mark.parametrize("fault", [
    dict(fail_count=2, fail_status=503),
    dict(fail_count=2, fail_status=429),          # S3's SlowDown body
    dict(drop_after_bytes=150_000, drop_count=2),  # connection cut mid-response, twice
])
def test_retries_through_the_fault_proxy_lose_and_duplicate_nothing(s3, fault_proxy, fault):
    # A 1.2 MB object read through a proxy that answers 503 / 429 or cuts the connection
    # mid-body: the reader retries (resuming at the byte it reached) and every record arrives
    # once, in order, its CRC checked. A subprocess, so the endpoint is the proxy's from the start.
    check_read_through_fault_proxy(_url(s3, "faults.tfrecord"), fault_proxy, fault_proxy.env,
                                   dict(match_method="GET", **fault))


def test_s3_object_overwritten_mid_read_fails_naming_url_and_offset_never_mixing(s3):
    # One open reader; the object is overwritten after its first records were read. Every
    # ranged GET after the open carries If-Match with the ETag of the open GET, so SeaweedFS
    # answers 412 and the reader fails naming the URL and byte offset, instead of returning
    # bytes of the new object after those of the old one.
    from recordflow import _core
    old, new = _records(600, 20_000, seed=1), _records(600, 20_000, seed=2)  # 12 MB each
    url = _url(s3, "overwritten.tfrecord")
    _write(url, old)
    # Small, fixed parts: the read-ahead window (4 parts) cannot hold the object before the
    # overwrite, so later parts are fetched after it.
    saved_max = _core._set_remote_part_size_max(0)
    try:
        with remote_part_sizes(64 << 10, 16 << 20):
            reader = rf.RecordReader(url, buffer_size=64 << 10)
            got = [next(reader) for _ in range(3)]
            _write(url, new)
            with pytest.raises(rf.FailedPreconditionError) as e:
                for r in reader:
                    got.append(r)
    finally:
        _core._set_remote_part_size_max(saved_max)
    msg = str(e.value)
    assert url in msg and "changed while it was read" in msg and "at byte" in msg, msg
    assert got == old[:len(got)]  # only bytes of the old object, never a mix
    assert len(got) < len(old)
    assert list(rf.RecordReader(url)) == new  # a fresh open reads the new object


def test_s3_deferred_completion_publishes_only_when_completed(s3):
    """RecordWriter(defer_completion=True): close() uploads every part but leaves the uploads
    open (nothing under the keys); complete_upload makes the object appear whole, abort_upload
    removes the upload; a writer dropped before close() leaves no upload."""
    from recordflow import _core
    with remote_part_sizes(8 << 20, 5 << 20):  # 5 MiB: the S3 minimum part size
        url = _url(s3, "deferred/part-0.tfrecord")
        recs = [os.urandom(1 << 20) for _ in range(7)]  # two parts
        with rf.RecordWriter(url, index=True, defer_completion=True) as w:
            for r in recs:
                w.write(r)
        data_up, index_up = w.pending_uploads
        assert data_up["url"] == url and index_up["url"] == url + ".idx"
        assert len(data_up["etags"]) == 2 and data_up["size"] == sum(len(r) + 16 for r in recs)
        assert _core.file_size(url) is None and _core.file_size(url + ".idx") is None
        prefix = _url(s3, "deferred/")
        assert sorted(u for u, _ in _core.list_uploads(prefix)) == [url, url + ".idx"]
        _core.complete_upload(data_up["url"], data_up["upload_id"], data_up["etags"])
        assert _core.file_size(url) == data_up["size"]
        assert list(rf.RecordReader(url)) == recs
        _core.abort_upload(index_up["url"], index_up["upload_id"])
        _core.abort_upload(index_up["url"], index_up["upload_id"])  # unknown upload: OK
        assert _core.file_size(url + ".idx") is None
        assert _core.list_uploads(prefix) == []
        # An empty file is one empty part.
        empty = _url(s3, "deferred/empty.tfrecord")
        with rf.RecordWriter(empty, defer_completion=True) as w:
            pass
        (up,) = w.pending_uploads
        _core.complete_upload(up["url"], up["upload_id"], up["etags"])
        assert _core.file_size(empty) == 0
        # A writer that fails mid-write aborts the parts it uploaded.
        with pytest.raises(RuntimeError):
            with rf.RecordWriter(_url(s3, "deferred/b.tfrecord"), defer_completion=True) as w:
                w.write(os.urandom(6 << 20))  # one part is up
                raise RuntimeError("task dies")
        assert _core.list_uploads(prefix) == []
        assert _core.file_size(_url(s3, "deferred/b.tfrecord")) is None


def test_deferred_completion_refused_for_local_paths(tmp_path):
    with pytest.raises(rf.Error, match="deferred completion"):
        rf.RecordWriter(str(tmp_path / "a.tfrecord"), defer_completion=True)
