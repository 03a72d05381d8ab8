"""recordflow's Python API for TFRecord files: round trips, errors, atomic writes, indexes."""

import gzip
import os
import sys
import warnings
from pathlib import Path

import pytest

import recordflow as rf

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "testdata" / "golden"))
from tfrecord_ref import frame  # noqa: E402  (TFRecord framing independent of recordflow's writer)

PAYLOADS = [b"", b"a", b"hello world", bytes(range(256)), b"x" * 70000]


@pytest.mark.parametrize("compression", [None, "", "GZIP", "gzip", "ZLIB"])
def test_round_trip(tmp_path, compression):
    path = tmp_path / "data.tfrecord"
    with rf.RecordWriter(path, compression) as w:
        for p in PAYLOADS:
            w.write(p)
        assert w.records_written == len(PAYLOADS)
    assert list(rf.RecordReader(path, compression)) == PAYLOADS
    assert rf.count_records(path, compression) == len(PAYLOADS)


def test_uncompressed_bytes_are_the_framing(tmp_path):
    path = tmp_path / "a.tfrecord"
    with rf.RecordWriter(str(path)) as w:
        for p in PAYLOADS:
            w.write(p)
    assert path.read_bytes() == frame(PAYLOADS)


def test_extension_selects_compression(tmp_path):
    gz = tmp_path / "a.tfrecord.gz"
    with rf.RecordWriter(gz) as w:
        w.write(b"compressed")
    assert gzip.decompress(gz.read_bytes()) == frame([b"compressed"])
    assert list(rf.RecordReader(gz)) == [b"compressed"]


def test_accepts_bytes_like_and_str(tmp_path):
    path = tmp_path / "a.tfrecord"
    with rf.RecordWriter(path) as w:
        w.write(bytearray(b"ba"))
        w.write(memoryview(b"mv"))
        w.write("unicode é")
        with pytest.raises(TypeError):
            w.write(12)
    assert list(rf.RecordReader(path)) == [b"ba", b"mv", "unicode é".encode()]


def test_read_batch(tmp_path):
    path = tmp_path / "a.tfrecord"
    with rf.RecordWriter(path) as w:
        for i in range(1000):
            w.write(str(i).encode())
    r = rf.RecordReader(path)
    first = r.read_batch(300)
    rest = r.read_batch(10_000)
    assert r.read_batch(5) == []
    assert [int(x) for x in first + rest] == list(range(1000))
    assert r.records_read == 1000


def test_file_appears_only_on_close(tmp_path):
    path = tmp_path / "a.tfrecord"
    w = rf.RecordWriter(path)
    w.write(b"x")
    w.flush()
    assert not path.exists()
    w.close()
    assert path.exists()
    w.close()  # idempotent
    with pytest.raises(rf.FailedPreconditionError):
        w.write(b"y")
    assert os.listdir(tmp_path) == ["a.tfrecord"]


def test_exception_in_with_block_discards_file(tmp_path):
    path = tmp_path / "a.tfrecord"
    with pytest.raises(KeyError):
        with rf.RecordWriter(path) as w:
            w.write(b"x")
            raise KeyError("boom")
    assert os.listdir(tmp_path) == []


def test_unclosed_writer_is_discarded_with_warning(tmp_path):
    path = tmp_path / "a.tfrecord"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = rf.RecordWriter(path)
        w.write(b"x")
        del w
    assert not path.exists()
    assert any(issubclass(c.category, ResourceWarning) for c in caught)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(rf.NotFoundError) as e:
        rf.RecordReader(tmp_path / "nope.tfrecord")
    assert "nope.tfrecord" in str(e.value)
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, rf.Error)
    with pytest.raises(FileNotFoundError):
        rf.RecordWriter(tmp_path / "no" / "such" / "dir.tfrecord")


def test_bad_arguments(tmp_path):
    with pytest.raises(rf.InvalidArgumentError):
        rf.RecordWriter(tmp_path / "a", compression="LZ4")
    with pytest.raises(ValueError):
        rf.RecordReader(tmp_path / "a", on_corruption="ignore")
    with pytest.raises(ValueError):
        rf.RecordWriter(tmp_path / "a.gz", index=True)


def test_corruption_raise_names_path_offset_and_index(tmp_path):
    data = bytearray(frame([b"first", b"b" * 1000, b"third"]))
    data[21 + 12 + 500] ^= 0x01  # payload of record 1, which starts at byte 21
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(bytes(data))
    reader = rf.RecordReader(path)
    assert next(reader) == b"first"
    with pytest.raises(rf.DataLossError) as e:
        next(reader)
    msg = str(e.value)
    assert "bad.tfrecord" in msg and "byte offset 21" in msg and "record index 1" in msg
    assert isinstance(e.value, OSError)


def test_corruption_skip_counts(tmp_path):
    data = bytearray(frame([b"first", b"b" * 1000, b"third"]))
    data[21 + 3] ^= 0x01  # the length of record 1: resynchronise at record 2
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(bytes(data))
    reader = rf.RecordReader(path, on_corruption="skip")
    assert list(reader) == [b"first", b"third"]
    assert reader.skipped_records == 1
    assert reader.skipped_bytes == 1016
    (event,) = reader.corruption_events
    assert event["offset"] == 21 and event["record_index"] == 1
    assert "length CRC" in event["reason"]


def test_read_batch_keeps_records_before_an_error(tmp_path):
    data = frame([b"a", b"b", b"c"])[:-3]  # truncated last record
    path = tmp_path / "t.tfrecord"
    path.write_bytes(data)
    r = rf.RecordReader(path)
    assert r.read_batch(10) == [b"a", b"b"]
    with pytest.raises(rf.DataLossError, match="truncated"):
        r.read_batch(10)


def test_gzip_hint_when_compression_not_given(tmp_path):
    path = tmp_path / "data.tfrecord"  # gzip bytes without a .gz name
    path.write_bytes(gzip.compress(frame([b"x"])))
    with pytest.raises(rf.DataLossError, match='compression="GZIP"'):
        list(rf.RecordReader(path))
    assert list(rf.RecordReader(path, "GZIP")) == [b"x"]


def test_index_and_random_access(tmp_path):
    path = tmp_path / "a.tfrecord"
    payloads = [bytes([i]) * i for i in range(50)]
    with rf.RecordWriter(path, index=True) as w:
        for p in payloads:
            w.write(p)
    lines = (tmp_path / "a.tfrecord.idx").read_text().splitlines()
    assert lines[:3] == ["0 16", "16 17", "33 18"]
    assert rf.build_index(path) == [tuple(map(int, l.split())) for l in lines]
    os.remove(tmp_path / "a.tfrecord.idx")
    assert rf.write_index(path) == 50
    ix = rf.IndexedRecordReader(path)
    assert len(ix) == 50
    assert ix[7] == payloads[7] and ix[-1] == payloads[-1]
    with pytest.raises(IndexError):
        ix[50]


def test_reading_releases_the_gil(tmp_path):
    from gil_check import progress_during

    path = tmp_path / "big.tfrecord"
    with rf.RecordWriter(path) as w:
        for _ in range(400):
            w.write(b"z" * 100_000)
    # Each call is ~40 MB of CRC checks in one native call.
    assert progress_during(lambda: rf.count_records(path)) > 10


def test_crc32c():
    assert rf.crc32c(b"123456789") == 0xE3069283
    assert rf.crc32c(b"6789", rf.crc32c(b"12345")) == 0xE3069283
    assert rf.crc32c_backend() in ("isal", "sse42", "portable")
