"""rf.keras.PyDataset covers every record once per epoch by random access; rf.tf.to_tf_dataset
round-trips values with a proper output_signature; rf.jax shards per process and hands
batches to jax.device_put / make_array_from_process_local_data."""

import os

import numpy as np
import pytest
from test_frameworks import SPEC, all_ids, write_files

import recordflow as rf

COUNTS = [23, 0, 40, 11]


def batch_ids(ds):
    return [int(i) for k in range(len(ds)) for i in ds[k][1]]


def test_keras_pydataset_covers_every_record_once_per_epoch(tmp_path):
    keras = pytest.importorskip("keras")
    import recordflow.keras as rfk

    files = write_files(tmp_path, COUNTS)
    os.remove(files[3] + ".idx")  # one file without an index: built in memory
    ds = rfk.PyDataset(str(tmp_path / "part-*.tfrecord"), {"id": SPEC["id"], "v": SPEC["v"]},
                       batch_size=8, x="v", y="id", seed=1)
    assert isinstance(ds, keras.utils.PyDataset)
    assert len(ds) == -(-sum(COUNTS) // 8) and ds.num_records == sum(COUNTS)
    epochs = []
    for _ in range(3):
        ids = batch_ids(ds)
        assert sorted(ids) == all_ids(COUNTS) and len(ids) == len(set(ids))
        epochs.append(ids)
        ds.on_epoch_end()
    assert epochs[0] != epochs[1] != epochs[2]
    x, y = ds[-1]
    assert len(y) == sum(COUNTS) % 8 and x.ndim == 2  # VarLen padded for Keras
    with pytest.raises(IndexError):
        ds[len(ds)]
    ordered = rfk.PyDataset(files, {"id": SPEC["id"]}, batch_size=5, x="id", shuffle=False,
                            drop_remainder=True)
    assert len(ordered) == sum(COUNTS) // 5
    assert [int(i) for k in range(len(ordered)) for i in ordered[k][0]] == \
        all_ids(COUNTS)[:len(ordered) * 5]
    # Random access reads the same bytes as the stream.
    direct = rf.parse_example([r for p in files for r in rf.RecordReader(p)], SPEC)
    np.testing.assert_array_equal(ordered[2][0], direct["id"][10:15])


def test_keras_fit_runs_on_pydataset_with_workers(tmp_path):
    keras = pytest.importorskip("keras")
    import recordflow.keras as rfk

    path = str(tmp_path / "xy.tfrecord")
    rng = np.random.default_rng(0)
    with rf.RecordWriter(path, index=True) as w:
        for _ in range(256):
            x = rng.normal(size=4).astype(np.float32)
            w.write(rf.Example({"x": x, "y": np.float32(x.sum())}).serialize())
    spec = {"x": rf.FixedLen([4], "float32"), "y": rf.FixedLen([], "float32")}
    ds = rfk.PyDataset(path, spec, batch_size=32, x="x", y="y", workers=2)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    history = model.fit(ds, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert ds.epoch >= 3  # on_epoch_end after every epoch (Keras may call it once more at the end)


def test_to_tf_dataset_round_trips_values(tmp_path):
    tf = pytest.importorskip("tensorflow")
    import recordflow.tf as rftf

    files = write_files(tmp_path, COUNTS)
    ds = rf.Dataset.from_files(files).batch(6, drop_remainder=True).parse(SPEC)
    tfds = rftf.to_tf_dataset(ds)
    sig = tfds.element_spec
    assert sig["id"] == tf.TensorSpec([6], tf.int64)
    assert sig["name"] == tf.TensorSpec([6], tf.string)
    assert isinstance(sig["v"], tf.RaggedTensorSpec) and sig["v"].shape.as_list() == [6, None]
    ours = list(ds)
    theirs = list(tfds)
    assert len(theirs) == len(ours) == sum(COUNTS) // 6
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a["id"], b["id"].numpy())
        assert list(a["name"]) == list(b["name"].numpy())
        assert a["v"].to_list() == b["v"].to_list()
    # Another pass is another recordflow iterator; tf.data stages compose.
    total = tfds.map(lambda e: tf.reduce_sum(e["id"])).reduce(np.int64(0), lambda s, x: s + x)
    assert int(total) == sum(all_ids(COUNTS)[:len(ours) * 6])
    # Unbatched, unparsed, and Python-mapped pipelines.
    one = rftf.to_tf_dataset(rf.Dataset.from_files(files).parse(SPEC))
    assert one.element_spec["id"] == tf.TensorSpec([], tf.int64)
    assert [int(e["id"]) for e in one.take(3)] == [0, 1, 2]
    raw = rftf.to_tf_dataset(rf.Dataset.from_files(files).batch(4))
    assert raw.element_spec == tf.TensorSpec([None], tf.string)
    assert list(next(iter(raw)).numpy()) == [r for r in rf.RecordReader(files[0])][:4]
    mapped = rf.Dataset.from_files(files).batch(4).parse({"id": SPEC["id"]}).map(
        lambda b: {"twice": b["id"] * 2})
    m = rftf.to_tf_dataset(mapped)
    assert m.element_spec["twice"].dtype == tf.int64
    assert next(iter(m))["twice"].numpy().tolist() == [0, 2, 4, 6]


def test_jax_process_shards_and_global_arrays(tmp_path):
    jax = pytest.importorskip("jax")
    import recordflow.jax as rfj

    files = write_files(tmp_path, COUNTS)
    ds = rf.Dataset.from_files(files, shuffle_files=True).shuffle(30).batch(5).parse(SPEC)
    seen = []
    for p in range(3):  # three simulated processes
        for batch in rfj.loader(ds, epoch=2, process_index=p, process_count=3):
            assert "name" not in batch  # bytes dropped: no jax dtype
            seen += batch["id"].tolist()
            assert batch["v"].ndim == 2  # padded
    assert sorted(seen) == all_ids(COUNTS)
    # One process (this one): global arrays over its devices.
    sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    batches = list(rfj.loader(ds, sharding, keys=["id", "v"]))
    assert all(isinstance(b["id"], jax.Array) for b in batches)
    assert sorted(int(i) for b in batches for i in np.asarray(b["id"])) == all_ids(COUNTS)
    first = next(rfj.loader(ds, keys=["id", "name"]))
    assert first["name"].dtype == object  # kept when asked for
    assert rfj.process_shard(ds).stages == rf.sharding.ShardingPlan().apply(ds).stages


def test_jax_dlpack_shares_memory_where_jax_allows(tmp_path):
    pytest.importorskip("jax")
    import recordflow.jax as rfj

    files = write_files(tmp_path, [40])
    batch = next(iter(rf.Dataset.from_files(files).batch(40).parse({"v": SPEC["v"]})))
    values = batch["v"].values  # float32, a view of recordflow's buffer
    converted = rfj.to_jax({"v": values})["v"]
    np.testing.assert_array_equal(np.asarray(converted), values)
    # JAX's CPU client aliases 64-byte aligned buffers of a dtype it enables and copies others.
    aligned = values.ctypes.data % 64 == 0
    assert (converted.unsafe_buffer_pointer() == values.ctypes.data) == aligned
    buf = np.zeros(256 + 64, np.uint8)
    off = (-buf.ctypes.data) % 64
    view = buf[off:off + 256].view(np.float32)
    assert rfj.to_jax(view).unsafe_buffer_pointer() == view.ctypes.data
