"""rf.Dataset: order, cardinality, sharding, shuffling, checkpoints, errors, Python stages, and
the same elements as tf.data on the same files."""

import os
import threading
import time

import numpy as np
import pytest
from id_files import all_ids, write_id_files
from id_files import ids as ids_of

import recordflow as rf

SPEC = {
    "id": rf.FixedLen([], "int64"),
    "name": rf.FixedLen([], "bytes"),
    "v": rf.VarLen("float32"),
}


def write_files(tmp_path, counts, suffix=".tfrecord"):
    return write_id_files(tmp_path, counts, suffix=suffix, index=suffix == ".tfrecord",
                          features=lambda f, i: {"name": f"f{f}r{i}",
                                                 "v": np.arange(i % 4, dtype=np.float32)})


COUNTS = [40, 0, 75, 33]


@pytest.fixture()
def files(tmp_path):
    return write_files(tmp_path, COUNTS)


def test_records_in_file_order_and_cardinality(files, tmp_path):
    ds = rf.Dataset.from_files(str(tmp_path / "part-*.tfrecord"))
    records = list(ds)
    expected = [r for p in files for r in rf.RecordReader(p)]
    assert records == expected
    assert ids_of(ds.repeat(2)) == all_ids(COUNTS) * 2
    assert ids_of(ds.skip(10).take(5)) == all_ids(COUNTS)[10:15]
    with pytest.raises(rf.NotFoundError):
        list(rf.Dataset.from_files(str(tmp_path / "nothing-*.tfrecord")))


def test_batch_parse_equals_parse_example(files):
    ds = rf.Dataset.from_files(files).batch(16).parse(SPEC)
    batches = list(ds)
    records = [r for p in files for r in rf.RecordReader(p)]
    assert [len(b["id"]) for b in batches] == [16] * 9 + [4]
    for k, b in enumerate(batches):
        ref = rf.parse_example(records[16 * k:16 * (k + 1)], SPEC)
        np.testing.assert_array_equal(b["id"], ref["id"])
        assert list(b["name"]) == list(ref["name"])
        assert b["v"].to_list() == ref["v"].to_list()
    # One record at a time: no batch dimension.
    first = next(iter(rf.Dataset.from_files(files).parse(SPEC)))
    assert first["id"] == 0 and first["name"] == b"f0r0" and first["v"].tolist() == []
    assert len(list(rf.Dataset.from_files(files).batch(16, drop_remainder=True))) == 9


def test_shards_are_disjoint_and_complete(files):
    for by_file in (True, False):
        seen = []
        for i in range(3):
            ds = rf.Dataset.from_files(files)
            ds = ds.shard(3, i) if by_file else ds.take(10**9).shard(3, i)
            seen += ids_of(ds)
        assert sorted(seen) == all_ids(COUNTS)


def test_shuffle_seeded_and_reshuffled_each_epoch(files):
    ds = rf.Dataset.from_files(files).shuffle(200, seed=3)
    a, b = ids_of(ds), ids_of(ds)
    # Each iteration of the Dataset is a new order (reshuffle_each_iteration), the same in
    # every run: a fresh Dataset repeats both.
    assert a != b and sorted(b) == all_ids(COUNTS)
    fresh = rf.Dataset.from_files(files).shuffle(200, seed=3)
    assert ids_of(fresh) == a and ids_of(fresh) == b
    assert a != all_ids(COUNTS) and sorted(a) == all_ids(COUNTS)
    two = ids_of(ds.repeat(2))
    n = len(a)
    assert sorted(two[:n]) == sorted(two[n:]) and two[:n] != two[n:]
    g = ids_of(rf.Dataset.from_files(files).global_shuffle(seed=5).repeat(2))
    assert sorted(g[:n]) == all_ids(COUNTS) and sorted(g[n:]) == all_ids(COUNTS) and g[:n] != g[n:]


@pytest.mark.parametrize("pipeline", ["plain", "shuffle_repeat", "interleave", "global", "batch_parse",
                                      "python_map"])
def test_checkpoint_restore_continues_exactly(files, pipeline):
    ds = rf.Dataset.from_files(files)
    ds = {
        "plain": ds,
        "shuffle_repeat": ds.shuffle(30, seed=1).repeat(3),
        "interleave": ds.interleave(cycle_length=2, block_length=3, num_parallel=2),
        "global": ds.global_shuffle(seed=2).repeat(2),
        "batch_parse": ds.shuffle(50, seed=4).batch(7).parse(SPEC).prefetch(2),
        "python_map": ds.parse(SPEC).map(lambda e: int(e["id"]) + 1),
    }[pipeline]
    full = [repr(x) for x in ds]
    for k in (0, 1, len(full) // 2, len(full) - 1, len(full)):
        it = ds.iterator(epoch=0)  # the iteration `full` ran
        head = [repr(next(it)) for _ in range(k)]
        state = it.checkpoint()
        it.close()
        rest = [repr(x) for x in ds.restore(state)]
        assert head + rest == full, f"checkpoint after {k}"


def test_checkpoint_rejects_other_pipelines_and_keeps_python_batching(files):
    ds = rf.Dataset.from_files(files)
    it = ds.iterator()
    next(it)
    state = it.checkpoint()
    with pytest.raises(rf.InvalidArgumentError):
        ds.take(3).restore(state)
    # A batch after a Python callable runs as a chain node: it checkpoints too.
    mapped = ds.map(lambda r: r, workers="inline").batch(2)
    it2 = mapped.iterator(epoch=0)
    first = next(it2)
    state2 = it2.checkpoint()
    rest = list(mapped.restore(state2))
    assert [list(b) for b in [first] + rest] == [list(b) for b in mapped.iterator(epoch=0)]
    assert len(rest) > 0


def test_python_map_filter_and_batch_after_them(files):
    ds = (rf.Dataset.from_files(files).parse(SPEC)
          .map(lambda e: {"id2": e["id"] * 2}, num_parallel=3)
          .filter(lambda e: e["id2"] % 3 == 0)
          .batch(5))
    batches = list(ds)
    got = [int(x) for b in batches for x in b["id2"]]
    assert got == [2 * i for i in all_ids(COUNTS) if (2 * i) % 3 == 0]
    assert all(b["id2"].shape == (5,) for b in batches[:-1])


def test_errors_reach_the_consumer_in_order(files, tmp_path):
    bad = str(tmp_path / "part-002.tfrecord")
    with open(bad, "r+b") as f:
        f.seek(30)
        f.write(b"\xff")
    got = []
    with pytest.raises(rf.DataLossError, match="part-002") as e:
        for r in rf.Dataset.from_files(files):
            got.append(r)
    assert "offset" in str(e.value)
    assert len(got) >= 40  # file 0 arrived before the error
    skipped = list(rf.Dataset.from_files(files, on_corruption="skip"))
    assert 40 + 33 <= len(skipped) < sum(COUNTS)
    with pytest.raises(rf.SchemaError, match="'missing'"):
        list(rf.Dataset.from_files(files).batch(4).parse({"missing": rf.FixedLen([], "int64")}))


def test_early_exit_stops_threads_promptly(files):
    before = threading.active_count()
    for _ in range(20):
        ds = rf.Dataset.from_files(files).interleave(cycle_length=3, num_parallel=3).repeat().batch(8).parse(SPEC)
        it = ds.iterator()
        next(it)
        t0 = time.perf_counter()
        it.close()
        assert time.perf_counter() - t0 < 2.0
        del it
    assert threading.active_count() <= before + 1


def test_closed_iterator_raises_instead_of_crashing(files):
    ds = rf.Dataset.from_files(files).batch(10)
    it = ds.iterator()
    next(it)
    it.close()
    for call in (it.stats, it.checkpoint, ds.stats):
        with pytest.raises(rf.FailedPreconditionError, match="closed"):
            call()
    assert list(it) == []  # a closed iterator is exhausted


def test_stats_report(files):
    ds = rf.Dataset.from_files(files).batch(10).parse(SPEC)
    n = sum(1 for _ in ds)
    s = ds.stats()
    assert s["elements_delivered"] == n
    assert s["stages"][0]["elements"] == sum(COUNTS)
    assert "consumer waited" in s["report"]
    # Wall time stops at the end of the stream: reading stats later gives the same rates.
    time.sleep(0.2)
    assert ds.stats()["wall_seconds"] == s["wall_seconds"] < 0.2 + s["wall_seconds"]


def test_stats_memory_account(files):
    ds = rf.Dataset.from_files(files).shuffle(1000, seed=3).batch(10).parse(SPEC)
    it = ds.iterator(memory_budget=8 << 20)
    n = sum(len(b["id"]) for b in it)
    assert n == sum(COUNTS)
    m = it.stats()["memory"]
    assert m["budget"] == 8 << 20
    assert m["held"] == 0  # everything released at the end of the stream
    assert sum(COUNTS) * 8 <= m["stages"]["shuffle"]["peak"] <= m["peak"] <= m["budget"]
    assert set(m["stages"]) == {"shuffle", "interleave read-ahead", "cache", "executor",
                                "record readers"}
    # The open file's reader was counted (its buffer: the file's size, under 1 MiB here) and
    # released when the file ended.
    assert 0 < m["stages"]["record readers"]["peak"] <= max(os.path.getsize(f) for f in files) + 4096
    assert m["stages"]["record readers"]["held"] == 0
    assert "memory: held" in it.stats()["report"]
    # A shuffle buffer over the budget: a clear error naming the stage, not unbounded growth.
    with pytest.raises(rf.ResourceExhaustedError, match="shuffle.*memory_budget"):
        list(ds.iterator(memory_budget=1024))


def test_same_elements_as_tf_data(files):
    tf = pytest.importorskip("tensorflow")
    tf_spec = {"id": tf.io.FixedLenFeature([], tf.int64), "name": tf.io.FixedLenFeature([], tf.string),
               "v": tf.io.RaggedFeature(tf.float32)}
    # Interleave: the same round-robin block order as tf.data's deterministic interleave.
    ours = rf.Dataset.from_files(files).interleave(cycle_length=2, block_length=3).batch(8).parse(SPEC)
    theirs = (tf.data.Dataset.from_tensor_slices(files)
              .interleave(tf.data.TFRecordDataset, cycle_length=2, block_length=3)
              .batch(8).map(lambda x: tf.io.parse_example(x, tf_spec)))
    n = 0
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a["id"], b["id"].numpy())
        assert list(a["name"]) == list(b["name"].numpy())
        assert a["v"].to_list() == [list(r) for r in b["v"].numpy()]
        n += 1
    assert n == (sum(COUNTS) + 7) // 8
    # take / skip / shard / repeat cardinalities match.
    for build_rf, build_tf in [
        (lambda d: d.skip(7).take(50), lambda d: d.skip(7).take(50)),
        (lambda d: d.repeat(2).shard(4, 1), lambda d: d.repeat(2).shard(4, 1)),
    ]:
        a = ids_of(build_rf(rf.Dataset.from_files(files)))
        b = [int(tf.io.parse_single_example(x, tf_spec)["id"]) for x in build_tf(tf.data.TFRecordDataset(files))]
        assert a == b
