"""tf.data's other transformations on rf.Dataset (unbatch, padded_batch, zip, concatenate,
flat_map, enumerate, take_while, ignore_errors, as_numpy_iterator, sample/choose_from_datasets,
cache after a map): the same elements as tf.data on the same inputs, checkpoint and restore
mid-stream, and the cache's reuse, budget and atomic finalization."""

import os

import numpy as np
import pytest

import recordflow as rf

tf = pytest.importorskip("tensorflow")

SPEC = {"id": rf.FixedLen([], "int64"), "name": rf.FixedLen([], "bytes"),
        "v": rf.VarLen("float32")}
TF_SPEC = {"id": tf.io.FixedLenFeature([], tf.int64), "name": tf.io.FixedLenFeature([], tf.string),
           "v": tf.io.VarLenFeature(tf.float32)}
N = 50


@pytest.fixture()
def path(tmp_path):
    p = str(tmp_path / "data.tfrecord")
    with rf.RecordWriter(p) as w:
        for i in range(N):
            w.write(rf.Example({"id": i, "name": f"r{i}",
                                "v": np.arange(i % 5, dtype=np.float32)}).serialize())
    return p


def tf_parsed(path):
    def parse(x):
        e = tf.io.parse_single_example(x, TF_SPEC)
        e["v"] = tf.sparse.to_dense(e["v"])
        return e
    return tf.data.TFRecordDataset(path).map(parse)


def same(a, b):
    """Elements equal, structure and values (tf's as NumPy)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (a, b)
        for k in a:
            same(a[k], b[k])
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            same(x, y)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def same_all(rf_ds, tf_ds):
    a, b = list(rf_ds), list(tf_ds.as_numpy_iterator())
    assert len(a) == len(b)
    for x, y in zip(a, b):
        same(x, y)
    return a


# ---------------------------------------------------------------- tf.data as the oracle
def test_unbatch_matches_tf(path):
    ds = rf.Dataset.from_files(path).parse(SPEC).batch(7).unbatch()
    got = list(ds)
    want = list(tf_parsed(path).as_numpy_iterator())
    assert len(got) == N
    for g, w in zip(got, want):
        assert g["id"] == w["id"] and g["name"] == w["name"]
        np.testing.assert_array_equal(g["v"], w["v"])  # a VarLen column's rows
    same_all(rf.Dataset.range(10).batch(4).unbatch(),
             tf.data.Dataset.range(10).batch(4).unbatch())


def test_padded_batch_matches_tf(path):
    same_all(rf.Dataset.range(10).map(lambda x: np.arange(x % 4)).padded_batch(3),
             tf.data.Dataset.range(10).map(lambda x: tf.range(x % 4)).padded_batch(3))
    same_all(rf.Dataset.range(10).map(lambda x: np.arange(x % 4)).padded_batch(
                 3, padded_shapes=[5], padding_values=np.int64(-1), drop_remainder=True),
             tf.data.Dataset.range(10).map(lambda x: tf.range(x % 4)).padded_batch(
                 3, padded_shapes=[5], padding_values=np.int64(-1), drop_remainder=True))
    # a dict of a scalar, a string and a VarLen column; per-component shapes and values
    rf_ds = rf.Dataset.from_files(path).parse(SPEC).padded_batch(
        4, padded_shapes={"id": [], "name": [], "v": [None]},
        padding_values={"id": np.int64(0), "name": b"", "v": np.float32(-2)})
    tf_ds = tf_parsed(path).padded_batch(
        4, padded_shapes={"id": [], "name": [], "v": [None]},
        padding_values={"id": np.int64(0), "name": "", "v": np.float32(-2)})
    got = same_all(rf_ds, tf_ds)
    assert got[0]["v"].shape == (4, 3)
    with pytest.raises(rf.errors.InvalidArgumentError, match=r"\['v'\].*larger than"):
        list(rf.Dataset.from_files(path).parse(SPEC).padded_batch(8, {"id": [], "name": [],
                                                                     "v": [2]}))


def test_enumerate_take_while_match_tf(path):
    same_all(rf.Dataset.range(3, 12).enumerate(start=5), tf.data.Dataset.range(3, 12).enumerate(5))
    same_all(rf.Dataset.range(10).take_while(lambda x: x < 6),
             tf.data.Dataset.range(10).take_while(lambda x: x < 6))
    ids = [int(e["id"]) for e in rf.Dataset.from_files(path).parse(SPEC)
           .take_while(lambda e: e["id"] != 17)]
    assert ids == list(range(17))


def test_zip_concatenate_flat_map_match_tf(path):
    a, b, c = rf.Dataset.range(5), rf.Dataset.range(10, 18), rf.Dataset.from_files(path).parse(SPEC)
    ta, tb, tc = tf.data.Dataset.range(5), tf.data.Dataset.range(10, 18), tf_parsed(path)
    same_all(rf.Dataset.zip(a, b), tf.data.Dataset.zip(ta, tb))
    got = same_all(rf.Dataset.zip({"x": a, "yz": (b, c.map(lambda e: e["id"]))}),
                   tf.data.Dataset.zip({"x": ta, "yz": (tb, tc.map(lambda e: e["id"]))}))
    assert len(got) == 5
    same_all(a.concatenate(b).concatenate(a), ta.concatenate(tb).concatenate(ta))
    same_all(c.map(lambda e: e["id"]).take(7).concatenate(b),
             tc.map(lambda e: e["id"]).take(7).concatenate(tb))
    same_all(rf.Dataset.range(6).flat_map(lambda x: rf.Dataset.range(x).map(lambda y: y * 10 + x)),
             tf.data.Dataset.range(6).flat_map(lambda x: tf.data.Dataset.range(x).map(
                 lambda y: y * 10 + x)))
    # flat_map over records: each record's VarLen values as elements
    same_all(c.flat_map(lambda e: rf.Dataset.range(len(e["v"])).map(lambda i: e["v"][i])),
             tc.flat_map(lambda e: tf.data.Dataset.from_tensor_slices(e["v"])))


def test_choose_from_datasets_matches_tf():
    choice = [0, 1, 2, 1, 1, 0, 2, 2, 2, 0, 1]
    inputs = [rf.Dataset.range(0, 3), rf.Dataset.range(100, 110), rf.Dataset.range(200, 210)]
    tf_inputs = [tf.data.Dataset.range(0, 3), tf.data.Dataset.range(100, 110),
                 tf.data.Dataset.range(200, 210)]
    choice_rf = rf.Dataset.range(len(choice)).map(lambda i: np.int64(choice[i]))
    choice_tf = tf.data.Dataset.from_tensor_slices(np.array(choice, dtype=np.int64))
    for stop in (True, False):
        same_all(rf.Dataset.choose_from_datasets(inputs, choice_rf, stop_on_empty_dataset=stop),
                 tf.data.Dataset.choose_from_datasets(tf_inputs, choice_tf,
                                                      stop_on_empty_dataset=stop))
    with pytest.raises(rf.errors.InvalidArgumentError, match="choice 3 is out of range"):
        list(rf.Dataset.choose_from_datasets(inputs, rf.Dataset.range(3, 4)))


# ---------------------------------------------------------------- sample_from_datasets
def test_sample_from_datasets_deterministic_and_weighted():
    big = 10 ** 9
    ins = [rf.Dataset.range(0, big), rf.Dataset.range(big, 2 * big), rf.Dataset.range(2 * big, 3 * big)]

    def draws(seed, n=6000):
        ds = rf.Dataset.sample_from_datasets(ins, weights=[0.1, 0.3, 0.6], seed=seed)
        it = iter(ds)
        return [int(next(it)) for _ in range(n)]

    a, b, c = draws(7), draws(7), draws(8)
    assert a == b and a != c
    frac = np.bincount([x // big for x in a], minlength=3) / len(a)
    np.testing.assert_allclose(frac, [0.1, 0.3, 0.6], atol=0.025)
    # every input's elements in their order
    for k in range(3):
        mine = [x for x in a if x // big == k]
        assert mine == list(range(k * big, k * big + len(mine)))
    # a new iteration of the same Dataset draws anew; iteration k is the same in every run
    ds = rf.Dataset.sample_from_datasets([rf.Dataset.range(50), rf.Dataset.range(100, 150)], seed=3)
    e0, e1 = list(ds), list(ds)
    assert e0 != e1 and sorted(e0) == sorted(e1) == list(range(50)) + list(range(100, 150))
    assert list(ds.iterator(epoch=1)) == e1


def test_sample_from_datasets_stop_on_empty():
    ins = [rf.Dataset.range(5), rf.Dataset.range(100, 200)]
    out = [int(x) for x in rf.Dataset.sample_from_datasets(ins, seed=1,
                                                           stop_on_empty_dataset=True)]
    assert sum(1 for x in out if x < 5) == 5 and len(out) < 105
    # the first input ran out: the next draw of it ended the dataset, no element after
    full = [int(x) for x in rf.Dataset.sample_from_datasets(ins, seed=1)]
    assert sorted(full) == list(range(5)) + list(range(100, 200))
    with pytest.raises(rf.errors.InvalidArgumentError, match="weights"):
        rf.Dataset.sample_from_datasets(ins, weights=[1, -1])
    with pytest.raises(rf.errors.InvalidArgumentError, match="2 weights for 3"):
        rf.Dataset.sample_from_datasets(ins + [ins[0]], weights=[1, 1])


# ---------------------------------------------------------------- ignore_errors, numpy
def test_ignore_errors_counted():
    def f(x):
        if x % 4 == 1:
            raise ValueError(f"bad {x}")
        return x * 2

    ds = rf.Dataset.range(20).map(f).ignore_errors(log_warning=True)
    it = ds.iterator()
    assert [int(x) for x in it] == [2 * x for x in range(20) if x % 4 != 1]
    assert it.errors_ignored == 5
    assert ds.stats()["errors_ignored"] == 5
    with pytest.raises(ValueError, match="bad 1"):
        list(rf.Dataset.range(20).map(f))
    # errors in a parallel map are ignored the same way, in order
    it = rf.Dataset.range(20).map(f, num_parallel=3).ignore_errors().iterator()
    assert [int(x) for x in it] == [2 * x for x in range(20) if x % 4 != 1]
    assert it.errors_ignored == 5


def test_ignore_errors_does_not_swallow_engine_errors(tmp_path):
    p = str(tmp_path / "bad.tfrecord")
    with rf.RecordWriter(p) as w:
        for i in range(5):
            w.write(b"x" * 20)
    with open(p, "r+b") as f:  # corrupt the third record's payload
        f.seek(2 * 36 + 14)
        f.write(b"\xff")
    with pytest.raises(rf.errors.DataLossError):
        list(rf.Dataset.from_files(p).map(lambda r: r).ignore_errors())


def test_as_numpy_iterator_converts_tensors():
    out = list(rf.Dataset.range(4).map(lambda x: {"t": tf.constant([x, x]), "n": x})
               .as_numpy_iterator())
    assert all(isinstance(e["t"], np.ndarray) for e in out)
    np.testing.assert_array_equal(out[3]["t"], [3, 3])


# ---------------------------------------------------------------- checkpoints
def pipelines(path, tmp_path):
    files = rf.Dataset.from_files(path)
    parsed = files.shuffle(16, seed=5).parse(SPEC)
    return {
        "unbatch": parsed.batch(7).unbatch(),
        "padded_batch": parsed.map(lambda e: e["v"]).padded_batch(3),
        "enumerate": parsed.map(lambda e: e["id"]).enumerate(3),
        "take_while": files.parse(SPEC).take_while(lambda e: e["id"] < 30),
        "ignore_errors": rf.Dataset.range(30).map(lambda x: 1 // int(x % 3)).ignore_errors(),
        "zip": rf.Dataset.zip((parsed, rf.Dataset.range(100).batch(2).unbatch())),
        "concatenate": rf.Dataset.range(6).concatenate(parsed.map(lambda e: e["id"])),
        "flat_map": rf.Dataset.range(8).flat_map(lambda x: rf.Dataset.range(x).enumerate()),
        "sample": rf.Dataset.sample_from_datasets(
            [parsed.map(lambda e: e["id"]), rf.Dataset.range(100, 130)], [0.3, 0.7], seed=2),
        "choose": rf.Dataset.choose_from_datasets(
            [parsed, files.parse(SPEC).batch(3).unbatch()],
            rf.Dataset.range(40).map(lambda i: np.int64(i % 3 == 0))),
        "cache_memory": parsed.map(lambda e: e["id"] * 2).cache(),
        "cache_take": parsed.map(lambda e: e["id"] * 2).cache().take(40),
        "cache_file": parsed.map(lambda e: e["id"] * 2).cache(str(tmp_path / "c")),
        "shuffle_repeat": parsed.map(lambda e: e["id"]).cache().shuffle(8, seed=4).repeat(3),
        "shard": rf.Dataset.zip(parsed, rf.Dataset.range(60)).shard(3, 1),
    }


@pytest.mark.parametrize("name", [
    "unbatch", "padded_batch", "enumerate", "take_while", "ignore_errors", "zip", "concatenate",
    "flat_map", "sample", "choose", "cache_memory", "cache_take", "cache_file", "shuffle_repeat",
    "shard"])
def test_checkpoint_restore_mid_stream(path, tmp_path, name):
    ds = pipelines(path, tmp_path)[name]
    for epoch in range(2):  # the caches: filling, then serving
        full = list(ds.iterator(epoch=epoch))
        assert len(full) >= 4
        for k in (1, len(full) // 3, len(full) - 1):
            it = ds.iterator(epoch=epoch)
            head = [next(it) for _ in range(k)]
            state = it.checkpoint()
            tail = list(it)
            for x, y in zip(head + tail, full):
                same(x, y)
            restored = ds.restore(state)
            again = list(restored)
            assert len(again) == len(tail)
            for x, y in zip(again, tail):
                same(x, y)
            # a fresh Dataset object from the same stages restores too
            for x, y in zip(ds.with_stages(ds.stages).restore(state), tail):
                same(x, y)


def test_checkpoint_through_a_parallel_map_window(path):
    calls = []
    ds = (rf.Dataset.from_files(path).shuffle(10, seed=1).parse(SPEC)
          .map(lambda e: calls.append(1) or e["id"] * 3, num_parallel=3).enumerate())
    full = [(int(i), int(x)) for i, x in ds.iterator(epoch=0)]
    it = ds.iterator(epoch=0)
    head = [(int(i), int(x)) for i, x in (next(it) for _ in range(7))]
    state = it.checkpoint()  # 6 inputs in flight at most: they are in the state
    assert head == full[:7]
    rest = [(int(i), int(x)) for i, x in ds.restore(state)]
    assert head + rest == full
    assert [(int(i), int(x)) for i, x in it] == full[7:]


# ---------------------------------------------------------------- cache after map
def test_memory_cache_serves_later_epochs_without_the_map(path):
    calls = []
    ds = (rf.Dataset.from_files(path).parse(SPEC)
          .map(lambda e: calls.append(1) or {"id": e["id"], "v2": e["v"] * 2}).cache())
    it = iter(ds)  # a partial first pass keeps nothing: the next pass runs the map again
    for _ in range(10):
        next(it)
    it.close()
    calls.clear()
    first = list(ds)
    assert len(calls) == N
    second = list(ds)
    assert len(calls) == N  # served from the cache: the map did not run again
    for x, y in zip(first, second):
        same(x, y)
    assert len(second) == N


def test_memory_cache_budget_is_a_clear_error(path):
    ds = rf.Dataset.from_files(path).parse(SPEC).map(lambda e: np.zeros(1000)).cache()
    with pytest.raises(rf.errors.ResourceExhaustedError, match="memory_budget.*cache\\(path\\)"):
        list(ds.iterator(memory_budget=20_000))
    assert len(list(ds.iterator(memory_budget=1 << 20))) == N  # a big enough budget


def test_file_cache_atomic_and_reused(path, tmp_path):
    cdir = tmp_path / "cache"
    calls = []

    def make():
        return rf.Dataset.from_files(path).parse(SPEC).map(
            lambda e: calls.append(1) or {"id": e["id"], "v": e["v"], "name": e["name"]}
        ).cache(str(cdir))

    it = make().iterator()  # a partial first pass: no cache, no leftover
    for _ in range(10):
        next(it)
    it.close()
    assert not os.path.exists(cdir / "elements.rfcache")
    assert [f for f in os.listdir(cdir) if ".tmp-" in f] == [] if cdir.exists() else True
    first = list(make())
    assert os.path.exists(cdir / "elements.rfcache")
    n = len(calls)
    second = list(make())  # another Dataset object, same directory: read from the files
    assert len(calls) == n
    assert len(second) == N
    for x, y in zip(first, second):
        same(x, y)
    # a damaged cache file is an error naming it, not wrong data
    with open(cdir / "elements.rfcache", "r+b") as f:
        f.truncate(os.path.getsize(cdir / "elements.rfcache") - 3)
    with pytest.raises(rf.errors.InvalidArgumentError, match="elements.rfcache: truncated"):
        list(make())


def test_cardinality_of_new_stages():
    r = rf.Dataset.range(10)
    assert r.cardinality() == 10
    assert rf.Dataset.zip(r, rf.Dataset.range(4)).cardinality() == 4
    assert r.concatenate(r).cardinality() == 20
    assert r.padded_batch(3).cardinality() == 4
    assert r.enumerate().cardinality() == 10
    assert r.batch(2).unbatch().cardinality() == rf.UNKNOWN
    assert r.take_while(lambda x: True).cardinality() == rf.UNKNOWN


def test_damaged_or_foreign_checkpoint_is_refused():
    ds = rf.Dataset.range(10).batch(3).unbatch()
    it = ds.iterator()
    next(it)
    state = it.checkpoint()
    for i in range(0, len(state), 7):  # a flipped bit anywhere: refused, never restored
        bad = bytearray(state)
        bad[i] ^= 0x01
        with pytest.raises((rf.errors.DataLossError, rf.errors.InvalidArgumentError)):
            ds.restore(bytes(bad))
    native = rf.Dataset.from_records([b"a", b"b"])
    it = native.iterator()
    with pytest.raises(rf.errors.InvalidArgumentError, match="not from an iterator"):
        ds.restore(it.checkpoint())


def test_shuffle_and_repeat_after_a_cached_map(path):
    calls = []

    def make():
        return (rf.Dataset.from_files(path).parse(SPEC)
                .map(lambda e: calls.append(1) or e["id"]).cache()
                .shuffle(20, seed=9).batch(5).repeat(3))

    ds = make()
    out = [b.tolist() for b in ds]
    assert len(calls) == N  # the map ran in the first repetition only
    epochs = [sum(out[k * 10:(k + 1) * 10], []) for k in range(3)]
    assert len(out) == 30 and all(sorted(e) == list(range(N)) for e in epochs)
    assert epochs[0] != epochs[1] != epochs[2] and epochs[0] != list(range(N))
    assert [b.tolist() for b in make()] == out  # the same for the same seed
    same_all(rf.Dataset.range(5).map(lambda x: x * 3).repeat(3),
             tf.data.Dataset.range(5).map(lambda x: x * 3).repeat(3))
    assert list(rf.Dataset.range(0).map(lambda x: x).repeat()) == []  # empty forever: empty
    with pytest.raises(rf.errors.ResourceExhaustedError, match="shuffle.*memory_budget"):
        list(rf.Dataset.range(100).map(lambda x: np.zeros(100)).shuffle(50).iterator(
            memory_budget=10_000))


def test_shard_after_a_python_source_matches_tf():
    same_all(rf.Dataset.zip(rf.Dataset.range(20), rf.Dataset.range(5, 30)).shard(3, 2),
             tf.data.Dataset.zip(tf.data.Dataset.range(20), tf.data.Dataset.range(5, 30)).shard(3, 2))
    shards = [[int(x) for x in rf.Dataset.range(17).map(lambda x: x).shard(4, i)] for i in range(4)]
    assert sorted(sum(shards, [])) == list(range(17))  # disjoint and complete


def test_python_batch_of_different_shapes_names_padded_batch():
    with pytest.raises(rf.errors.InvalidArgumentError, match="different shapes.*padded_batch"):
        list(rf.Dataset.range(4).map(lambda x: np.arange(x)).enumerate().batch(4))


def test_describe_and_repr_of_python_sources():
    ds = rf.Dataset.zip(rf.Dataset.range(3), rf.Dataset.range(3)).enumerate()
    assert ds.describe() == "python zip -> python enumerate"
    assert "python unbatch" in rf.Dataset.from_records([b"a"]).batch(1).unbatch().describe()
    assert repr(ds).startswith("rf.Dataset(python zip")
