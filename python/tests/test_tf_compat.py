"""Differential tests: TensorFlow itself against recordflow, in both directions.

TensorFlow writes, recordflow reads; recordflow writes, TensorFlow (tf.data) reads; the
uncompressed bytes of both writers are identical, and the GZIP/ZLIB streams of both decompress
to those same bytes. Every test runs for no compression, GZIP and ZLIB.

TensorFlow is a test dependency that CI installs; the importorskip below is only a fallback for
machines without it.
"""

from __future__ import annotations

import gzip
import os
import random
import struct
import zlib

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

import recordflow as rf  # noqa: E402  (after the TensorFlow fallback on purpose)

COMPRESSIONS = [None, "GZIP", "ZLIB"]
TF_TYPE = {None: "", "GZIP": "GZIP", "ZLIB": "ZLIB"}
EXTENSION = {None: ".tfrecord", "GZIP": ".tfrecord.gz", "ZLIB": ".tfrecord.zz"}
# The same names as a user might spell them: recordflow takes any case, as TensorFlow's docs say.
OTHER_SPELLING = {None: "", "GZIP": "gzip", "ZLIB": "Zlib"}


def _mixed_payloads() -> list[bytes]:
    rng = random.Random(20240611)
    edge_sizes = [0, 1, 2, 3, 7, 8, 11, 12, 13, 15, 16, 17, 31, 255, 256, 1000, 4095, 4096, 4097]
    payloads = [rng.randbytes(n) for n in edge_sizes]
    payloads.append(bytes(range(256)))
    # Mostly small records with a few up to ~70 KB: a typical stream of Examples.
    for _ in range(300):
        n = rng.randrange(70_000) if rng.random() < 0.03 else rng.randrange(600)
        payloads.append(rng.randbytes(n))
    return payloads


# Each case is a function so that no 5 MB payload lives in module globals.
CASES = {
    "empty_payloads": lambda: [b""] * 5,
    "one_byte": lambda: [bytes([i]) for i in range(256)],
    "mixed": _mixed_payloads,
    "five_mb": lambda: [b"head", random.Random(5).randbytes(5 << 20), b"", b"tail"],
    "zero_records": lambda: [],
}


@pytest.fixture(params=COMPRESSIONS, ids=lambda c: c or "NONE")
def compression(request):
    return request.param


@pytest.fixture(params=list(CASES), ids=list(CASES))
def payloads(request):
    return CASES[request.param]()


# ---- TensorFlow and format helpers ----------------------------------------------------------

def tf_write(path, payloads, compression, flush_every=None):
    options = tf.io.TFRecordOptions(compression_type=TF_TYPE[compression])
    with tf.io.TFRecordWriter(str(path), options) as writer:
        for i, p in enumerate(payloads, 1):
            writer.write(p)
            if flush_every and i % flush_every == 0:
                writer.flush()


def tf_read(path, compression):
    ds = tf.data.TFRecordDataset(str(path), compression_type=TF_TYPE[compression])
    return list(ds.as_numpy_iterator())


def rf_write(path, payloads, compression, flush_every=None, **kwargs):
    with rf.RecordWriter(str(path), compression, **kwargs) as writer:
        for i, p in enumerate(payloads, 1):
            writer.write(p)
            if flush_every and i % flush_every == 0:
                writer.flush()


def rf_read(path, compression):
    return list(rf.RecordReader(str(path), compression))


def rf_read_batches(path, compression, n=7):
    reader = rf.RecordReader(str(path), compression)
    out = []
    while True:
        batch = reader.read_batch(n)
        assert len(batch) <= n
        out.extend(batch)
        if len(batch) < n:
            return out


def decompressed(path, compression) -> bytes:
    data = path.read_bytes()
    if compression == "GZIP":
        return gzip.decompress(data)
    if compression == "ZLIB":
        return zlib.decompress(data)
    return data


def expected_index(payloads) -> str:
    lines, offset = [], 0
    for p in payloads:
        lines.append(f"{offset} {16 + len(p)}\n")
        offset += 16 + len(p)
    return "".join(lines)


def assert_same_records(got, want):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert type(g) is bytes, f"record {i} is {type(g).__name__}, not bytes"
        assert g == w, f"record {i} differs (got {len(g)} bytes, want {len(w)})"


# ---- TensorFlow writes, recordflow reads ----------------------------------------------------

def test_tf_writes_recordflow_reads(tmp_path, compression, payloads):
    path = tmp_path / ("tf" + EXTENSION[compression])
    tf_write(path, payloads, compression)
    assert_same_records(rf_read(path, compression), payloads)
    assert_same_records(rf_read(path, OTHER_SPELLING[compression]), payloads)
    assert_same_records(rf_read(path, None), payloads)  # compression from the extension
    assert_same_records(rf_read_batches(path, compression), payloads)


def test_tf_writes_without_extension(tmp_path, compression):
    # Only the explicit option says what the bytes are.
    payloads = _mixed_payloads()[:40]
    path = tmp_path / "tf-records.bin"
    tf_write(path, payloads, compression)
    assert_same_records(rf_read(path, compression), payloads)


# ---- recordflow writes, TensorFlow reads ----------------------------------------------------

def test_recordflow_writes_tf_reads(tmp_path, compression, payloads):
    path = tmp_path / ("rf" + EXTENSION[compression])
    rf_write(path, payloads, compression)
    assert_same_records(tf_read(path, compression), payloads)
    assert_same_records(rf_read(path, compression), payloads)


@pytest.mark.parametrize("level", [0, 1, 9])
def test_recordflow_compression_levels_tf_reads(tmp_path, compression, level):
    payloads = _mixed_payloads()
    path = tmp_path / ("rf" + EXTENSION[compression])
    rf_write(path, payloads, compression, compression_level=level)
    assert_same_records(tf_read(path, compression), payloads)


# ---- the bytes themselves -------------------------------------------------------------------

def test_same_record_stream_as_tf(tmp_path, compression, payloads):
    """Byte-identical files, compressed ones included (same zlib settings as TensorFlow's:
    default level, memLevel 9, one stream per file)."""
    tf_path = tmp_path / ("tf" + EXTENSION[compression])
    rf_path = tmp_path / ("rf" + EXTENSION[compression])
    tf_write(tf_path, payloads, compression)
    rf_write(rf_path, payloads, compression)
    tf_stream = decompressed(tf_path, compression)
    assert decompressed(rf_path, compression) == tf_stream
    assert rf_path.read_bytes() == tf_path.read_bytes()
    assert len(tf_stream) == sum(16 + len(p) for p in payloads)


def test_uncompressed_index_matches_tf_framing(tmp_path, payloads):
    tf_path = tmp_path / "tf.tfrecord"
    rf_path = tmp_path / "rf.tfrecord"
    tf_write(tf_path, payloads, None)
    rf_write(rf_path, payloads, None, index=True)
    assert rf_path.read_bytes() == tf_path.read_bytes()
    index = (tmp_path / "rf.tfrecord.idx").read_text()
    assert index == expected_index(payloads)
    # Each index line points at a header in TensorFlow's file that holds the indexed length.
    data = tf_path.read_bytes()
    for line in index.splitlines():
        offset, size = map(int, line.split())
        (length,) = struct.unpack_from("<Q", data, offset)
        assert 16 + length == size


# ---- flushing -------------------------------------------------------------------------------

@pytest.mark.parametrize("flush_every", [1, 3, 50])
def test_tf_flushed_chunks_recordflow_reads(tmp_path, compression, flush_every):
    # TFRecordWriter.flush() sync-flushes the deflate stream: one stream, many flush points.
    payloads = _mixed_payloads()
    path = tmp_path / ("tf-flushed" + EXTENSION[compression])
    tf_write(path, payloads, compression, flush_every=flush_every)
    assert_same_records(rf_read(path, compression), payloads)
    assert_same_records(rf_read_batches(path, compression, n=5), payloads)


@pytest.mark.parametrize("flush_every", [1, 50])
def test_recordflow_flushed_chunks_tf_reads(tmp_path, compression, flush_every):
    payloads = _mixed_payloads()
    path = tmp_path / ("rf-flushed" + EXTENSION[compression])
    rf_write(path, payloads, compression, flush_every=flush_every)
    assert_same_records(tf_read(path, compression), payloads)
    # Flush points change the compressed bytes, never the record stream inside them.
    reference = tmp_path / "reference.tfrecord"
    tf_write(reference, payloads, None)
    assert decompressed(path, compression) == reference.read_bytes()


# ---- truncation -----------------------------------------------------------------------------

def _truncated_rf_file(tmp_path, compression):
    """A recordflow file whose last record is cut short, for every compression.

    A few bytes off an uncompressed file cut the last payload's CRC. A GZIP/ZLIB stream ends in
    a 4-8 byte checksum trailer, so it loses 64 bytes: the trailer and the end of the last
    (incompressible) record.
    """
    payloads = _mixed_payloads()[:50] + [random.Random(7).randbytes(2000)]
    path = tmp_path / ("truncated" + EXTENSION[compression])
    rf_write(path, payloads, compression)
    data = path.read_bytes()
    cut = 3 if compression is None else 64
    path.write_bytes(data[:-cut])
    return path, payloads


def test_truncated_file_fails_in_tf_and_recordflow(tmp_path, compression):
    path, payloads = _truncated_rf_file(tmp_path, compression)

    tf_records = []
    with pytest.raises(tf.errors.DataLossError):
        for record in tf.data.TFRecordDataset(str(path), compression_type=TF_TYPE[compression]):
            tf_records.append(record.numpy())
    assert tf_records == payloads[:len(tf_records)]

    rf_records = []
    with pytest.raises(rf.DataLossError) as info:
        for record in rf.RecordReader(str(path), compression):
            rf_records.append(record)
    # Everything before the damage comes through intact, in both.
    assert rf_records == payloads[:len(rf_records)]
    assert len(rf_records) >= len(payloads) - 1
    assert str(path) in str(info.value)
    assert isinstance(info.value, rf.Error)
    assert isinstance(info.value, OSError)


@pytest.mark.parametrize("compression", [None, "GZIP", "ZLIB"], ids=["NONE", "GZIP", "ZLIB"])
def test_truncated_file_error_names_path_and_offset(tmp_path, compression):
    path, _ = _truncated_rf_file(tmp_path, compression)
    with pytest.raises(rf.DataLossError) as info:
        for _ in rf.RecordReader(str(path), compression):
            pass
    message = str(info.value)
    assert str(path) in message
    assert "offset" in message


def test_compressed_trailer_loss_is_not_silent(tmp_path):
    # A GZIP file that lost only its CRC32 + size trailer still holds every record, and tf.data
    # (2.21) reads it without complaint. recordflow never hides corruption: it raises.
    payloads = _mixed_payloads()[:20]
    path = tmp_path / "trailer.tfrecord.gz"
    rf_write(path, payloads, "GZIP")
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(rf.DataLossError):
        rf_read(path, "GZIP")
