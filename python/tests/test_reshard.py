"""rf.reshard / `recordflow reshard`: records unchanged (TensorFlow reads the shards), the same
multiset, seeded shuffles, a resumed run equal to an uninterrupted one."""

import os

import pytest

import recordflow as rf

tf = pytest.importorskip("tensorflow")


def _payloads(f, n):
    return [b"file%d-record%d:" % (f, i) + bytes((i * 13 + j) % 256 for j in range((i * 31) % 700))
            for i in range(n)]


@pytest.fixture()
def inputs(tmp_path):
    paths, records = [], []
    for f, (n, comp) in enumerate([(37, None), (21, "GZIP"), (0, None), (44, None)]):
        path = str(tmp_path / (f"in-{f}.tfrecord" + (".gz" if comp else "")))
        with rf.RecordWriter(path, compression=comp) as w:
            for r in _payloads(f, n):
                w.write(r)
        paths.append(path)
        records += _payloads(f, n)
    return paths, records


def _tf_read(paths, compression=""):
    ds = tf.data.TFRecordDataset(paths, compression_type=compression)
    return [bytes(x.numpy()) for x in ds]


def test_tensorflow_reads_the_shards_byte_for_byte(inputs, tmp_path):
    paths, records = inputs
    dst = tmp_path / "out"
    summary = rf.reshard(paths, dst, shards=5)
    assert summary["records"] == len(records) == 102
    shards = [str(dst / s["file"]) for s in summary["shards"]]
    assert [os.path.basename(s) for s in shards] == [f"shard-{k:05d}-of-00005.tfrecord" for k in range(5)]
    assert _tf_read(shards) == records  # input order, every byte
    assert [len(_tf_read([s])) for s in shards] == [s["records"] for s in summary["shards"]]
    for s in shards:
        # The .idx is DALI's format: `offset size` per record, as rf.build_index makes it.
        lines = open(s + ".idx").read().split("\n")[:-1]
        assert len(lines) == len(_tf_read([s]))


def test_shuffled_gzip_shards_hold_the_same_multiset(inputs, tmp_path):
    paths, records = inputs
    a = rf.reshard(paths, tmp_path / "a", shards=3, shuffle=True, seed=9, compression="GZIP")
    b = rf.reshard(paths, tmp_path / "b", shards=3, shuffle=True, seed=9, compression="GZIP")
    files_a = [str(tmp_path / "a" / s["file"]) for s in a["shards"]]
    assert all(f.endswith(".tfrecord.gz") for f in files_a)
    got = _tf_read(files_a, "GZIP")
    assert got != records
    assert sorted(got) == sorted(records)
    for s in a["shards"]:
        assert (tmp_path / "a" / s["file"]).read_bytes() == (tmp_path / "b" / s["file"]).read_bytes()
    assert b["records"] == a["records"]


def test_resume_after_an_interruption_matches_an_uninterrupted_run(inputs, tmp_path):
    paths, _ = inputs
    full = rf.reshard(paths, tmp_path / "full", shards=6, shuffle=True, seed=2)
    rf.reshard(paths, tmp_path / "cut", shards=6, shuffle=True, seed=2)
    for s in full["shards"][2:]:
        os.remove(tmp_path / "cut" / s["file"])
    with pytest.raises(rf.AlreadyExistsError, match="--resume"):
        rf.reshard(paths, tmp_path / "cut", shards=6, shuffle=True, seed=2)
    with pytest.raises(rf.FailedPreconditionError):
        rf.reshard(paths, tmp_path / "cut", shards=6, shuffle=True, seed=3, resume=True)
    resumed = rf.reshard(paths, tmp_path / "cut", shards=6, shuffle=True, seed=2, resume=True)
    assert resumed["resumed_shards"] == 2
    assert [s["resumed"] for s in resumed["shards"]] == [True, True] + [False] * 4
    for s in full["shards"]:
        assert (tmp_path / "cut" / s["file"]).read_bytes() == (tmp_path / "full" / s["file"]).read_bytes()


def test_errors_name_the_path(tmp_path):
    with pytest.raises(rf.NotFoundError, match="nope.tfrecord"):
        rf.reshard([str(tmp_path / "nope.tfrecord")], tmp_path / "o", shards=2)
    with pytest.raises(rf.NotFoundError, match="no files match"):
        rf.reshard(str(tmp_path / "none-*.tfrecord"), tmp_path / "o", shards=2)
    with pytest.raises(rf.InvalidArgumentError):
        rf.reshard([str(tmp_path / "x")], tmp_path / "o", shards=2, compression="LZ4")
