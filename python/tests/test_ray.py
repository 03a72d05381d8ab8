"""recordflow.ray on a real local Ray cluster (127.0.0.1, 2 CPUs, started once per session)."""

import json
import os
import sys
import uuid

import numpy as np
import pyarrow as pa
import pytest
import ray  # scripts/setup.sh --test installs ray[data]
from remote.servers import s3_server  # noqa: F401

import recordflow as rf

N = 2000


@pytest.fixture(scope="session")
def cluster():
    import ray.cloudpickle

    # The test's sink subclass runs in Ray workers, which do not have this folder on their path.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False, configure_logging=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    yield ray
    ray.shutdown()


def _table(n=N):
    ids = np.arange(n, dtype=np.int64)
    return pa.table({
        "id": ids,
        "label": pa.array((ids % 7).astype(np.int32)),
        "vec": pa.array([[float(i), float(i) / 2, -1.5] for i in range(n)],
                        pa.list_(pa.float32())),
        "payload": pa.array([b"\x00\xff" + str(i).encode() for i in range(n)], pa.binary()),
        "text": pa.array([f"row {i}" for i in range(n)], pa.string()),
        "flag": pa.array([i % 2 == 0 for i in range(n)]),
        "maybe": pa.array([None if i % 3 == 0 else i * 10 for i in range(n)], pa.int64()),
        "tags": pa.array([[b"a"] * (i % 3) for i in range(n)], pa.list_(pa.binary())),
    })


def _sorted(ds_or_table, key="id"):
    t = ds_or_table if isinstance(ds_or_table, pa.Table) else pa.concat_tables(
        [pa.Table.from_pandas(b, preserve_index=False) if not isinstance(b, pa.Table) else b
         for b in ds_or_table.iter_batches(batch_format="pyarrow", batch_size=None)])
    return t.sort_by(key)


def _shards(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".tfrecord"))


def _ds(table, blocks=4):
    return ray.data.from_arrow(table).repartition(blocks)


def test_import_recordflow_does_not_import_ray():
    import subprocess
    code = "import recordflow, sys; assert 'ray' not in sys.modules; recordflow.ray; assert 'ray' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_example_round_trip_every_type(cluster, tmp_path):
    t = _table()
    out = str(tmp_path / "out")
    rf.ray.write(_ds(t), out)
    assert len(_shards(out)) == 4
    for f in _shards(out):  # every shard has its index and its sidecar
        assert os.path.isfile(os.path.join(out, f + ".idx"))
        assert os.path.isfile(os.path.join(out, f + ".meta.json"))
    assert os.path.isfile(os.path.join(out, "_SUCCESS"))
    assert not os.path.exists(os.path.join(out, "_temporary"))
    manifest = json.load(open(os.path.join(out, "_manifest.json")))
    assert manifest["records"] == N and len(manifest["shards"]) == 4
    got = _sorted(rf.ray.read(out))
    want = t.cast(pa.schema([f.with_nullable(True) for f in t.schema]))
    assert got.schema.names == sorted(t.schema.names) or set(got.schema.names) == set(t.schema.names)
    for name in t.schema.names:
        assert got[name].to_pylist() == want[name].to_pylist(), name
        assert got.schema.field(name).type == t.schema.field(name).type, name


def test_sequence_example_and_byte_array_round_trip(cluster, tmp_path):
    n = 300
    seq = pa.table({
        "id": np.arange(n, dtype=np.int64),
        "frames": pa.array([[[i, i + 1], [], [7]] for i in range(n)], pa.list_(pa.list_(pa.int64()))),
        "words": pa.array([[[b"x" * (i % 4)]] for i in range(n)], pa.list_(pa.list_(pa.binary()))),
        "scores": pa.array([[[0.5 * i]] * (i % 3) for i in range(n)],
                           pa.list_(pa.list_(pa.float32()))),
    })
    out = str(tmp_path / "seq")
    rf.ray.write(_ds(seq, 3), out, record_type="SequenceExample")
    got = _sorted(rf.ray.read(out, record_type="SequenceExample"))
    for name in seq.schema.names:
        assert got[name].to_pylist() == seq[name].to_pylist(), name
    # Each record is a real tf.train.SequenceExample.
    first = next(iter(rf.RecordReader(os.path.join(out, _shards(out)[0]))))
    context, lists = rf.parse_single_sequence_example(
        first, context_features={"id": rf.FixedLenFeature([], "int64")},
        sequence_features={"frames": rf.VarLenFeature("int64")})
    assert int(context["id"]) in range(n)

    raw = pa.table({"byteArray": pa.array([os.urandom(i % 50) + b"!" for i in range(n)], pa.binary())})
    out = str(tmp_path / "raw")
    rf.ray.write(_ds(raw, 2), out, record_type="ByteArray", compression="GZIP")
    assert all(f.endswith(".tfrecord.gz") for f in os.listdir(out) if f.startswith("part-")
               and not f.endswith(".json"))
    got = rf.ray.read(out + "/*.tfrecord.gz", record_type="ByteArray").take_all()
    assert sorted(r["byteArray"] for r in got) == sorted(raw["byteArray"].to_pylist())


def test_tensor_columns_are_written_flattened(cluster, tmp_path):
    # Ray turns NumPy batches into tensor extension columns; they become list features
    # holding the row's values in row-major order (as tf.io.serialize_tensor's users flatten).
    ds = ray.data.range(64, override_num_blocks=2).map_batches(
        lambda b: {"id": b["id"], "img": np.arange(6, dtype=np.float32)[None, :].reshape(1, 2, 3)
                   * b["id"][:, None, None].astype(np.float32)})
    out = str(tmp_path / "tensor")
    rf.ray.write(ds, out)
    got = _sorted(rf.ray.read(out))
    assert got["id"].to_pylist() == list(range(64))
    assert got["img"].to_pylist()[5] == [0.0, 5.0, 10.0, 15.0, 20.0, 25.0]


def test_tensorflow_parses_written_files(cluster, tmp_path):
    tf = pytest.importorskip("tensorflow")
    t = _table(500)
    out = str(tmp_path / "tf")
    rf.ray.write(_ds(t, 2), out)
    files = [os.path.join(out, f) for f in _shards(out)]
    spec = {"id": tf.io.FixedLenFeature([], tf.int64), "label": tf.io.FixedLenFeature([], tf.int64),
            "vec": tf.io.FixedLenFeature([3], tf.float32),
            "payload": tf.io.FixedLenFeature([], tf.string),
            "text": tf.io.FixedLenFeature([], tf.string),
            "maybe": tf.io.VarLenFeature(tf.int64), "tags": tf.io.VarLenFeature(tf.string)}
    rows = {}
    for batch in tf.data.TFRecordDataset(files).batch(128):
        p = tf.io.parse_example(batch, spec)
        maybe = tf.sparse.to_dense(p["maybe"], default_value=-1).numpy()
        tags = tf.sparse.to_dense(p["tags"], default_value=b"").numpy()
        for j, i in enumerate(p["id"].numpy()):
            rows[int(i)] = (int(p["label"].numpy()[j]), p["vec"].numpy()[j].tolist(),
                            p["payload"].numpy()[j], p["text"].numpy()[j].decode(),
                            [int(x) for x in maybe[j] if x != -1], [x for x in tags[j] if x])
    assert sorted(rows) == list(range(500))
    for i in range(500):
        assert rows[i] == (i % 7, [float(i), i / 2, -1.5], b"\x00\xff" + str(i).encode(),
                           f"row {i}", [] if i % 3 == 0 else [i * 10], [b"a"] * (i % 3))


class _FlakySink(rf.ray.RecordflowDatasink):
    """Task 1's first attempt writes its whole shard, then its worker process dies."""

    def __init__(self, *a, marker, crash, **kw):
        super().__init__(*a, **kw)
        self.marker, self.crash = marker, crash

    def write(self, blocks, ctx):
        result = super().write(blocks, ctx)
        if ctx.task_idx == 1 and (self.crash == "always" or not os.path.exists(self.marker)):
            open(self.marker, "w").close()
            if self.crash == "always":
                raise RuntimeError("recordflow test: write task fails on purpose")
            os._exit(1)  # the worker dies after writing: Ray retries the task (max_retries)
        return result


def test_retried_write_task_commits_exactly_once(cluster, tmp_path):
    t = _table()
    out = str(tmp_path / "retry")
    marker = str(tmp_path / "crashed")
    sink = _FlakySink(out, marker=marker, crash="once")
    _ds(t).write_datasink(sink, ray_remote_args={"max_retries": 2})
    assert os.path.exists(marker)  # the first attempt did die
    assert len(_shards(out)) == 4
    assert not os.path.exists(os.path.join(out, "_temporary"))  # the dead attempt's shard is gone
    got = _sorted(rf.ray.read(out))
    assert got["id"].to_pylist() == list(range(N))  # no row lost, none twice
    assert json.load(open(os.path.join(out, "_manifest.json")))["records"] == N


def test_task_reported_twice_commits_once(cluster, tmp_path):
    # Ray re-executes a finished task when its output is lost (lineage reconstruction): the
    # driver can then see two results for one task index, each with its own file.
    from ray.data._internal.execution.interfaces import TaskContext
    from ray.data.datasource import WriteResult
    out = str(tmp_path / "twice")
    sink = rf.ray.RecordflowDatasink(out)
    t = _table(50)
    results = [sink.write([t.slice(0, 25)], TaskContext(task_idx=0, op_name="w")),
               sink.write([t.slice(0, 25)], TaskContext(task_idx=0, op_name="w")),
               sink.write([t.slice(25)], TaskContext(task_idx=1, op_name="w"))]
    assert results[0]["temp"] != results[1]["temp"]
    sink.on_write_complete(WriteResult(75, 0, results))
    assert len(_shards(out)) == 2
    ids = sorted(int(rf.Example.parse(x)["id"][0])
                 for f in _shards(out) for x in rf.RecordReader(os.path.join(out, f)))
    assert ids == list(range(50))  # each row once
    assert json.load(open(os.path.join(out, "_manifest.json")))["records"] == 50
    assert not os.path.exists(os.path.join(out, "_temporary"))


def test_failed_write_job_leaves_nothing(cluster, tmp_path):
    out = str(tmp_path / "failed")
    sink = _FlakySink(out, marker=str(tmp_path / "m"), crash="always")
    with pytest.raises(Exception, match="fails on purpose"):
        _ds(_table()).write_datasink(sink, ray_remote_args={"max_retries": 0})
    assert os.listdir(out) == []


def test_one_big_indexed_file_is_read_by_several_tasks(cluster, tmp_path):
    path = str(tmp_path / "big.tfrecord")
    n = 10_000
    with rf.RecordWriter(path, index=True) as w:
        for i in range(n):
            w.write(rf.Example({"id": i, "x": [float(i)] * 2}).serialize())
    source = rf.ray.RecordflowDatasource(path)
    pieces = source.plan(4)
    assert [(s, c) for _, s, c in pieces] == [(0, 2500), (2500, 2500), (5000, 2500), (7500, 2500)]
    ds = rf.ray.read(path, override_num_blocks=4).materialize()
    assert ds.num_blocks() >= 4
    got = _sorted(ds)
    assert got["id"].to_pylist() == list(range(n))
    assert got["x"].to_pylist()[1234] == [1234.0, 1234.0]
    # Without an index the file is one piece, read whole.
    os.remove(path + ".idx")
    assert [(s, c) for _, s, c in rf.ray.RecordflowDatasource(path).plan(4)] == [(0, -1)]
    assert rf.ray.read(path).count() == n


def test_corrupt_record_raises_or_is_skipped(cluster, tmp_path):
    path = str(tmp_path / "c.tfrecord")
    with rf.RecordWriter(path) as w:
        for i in range(10):
            w.write(rf.Example({"id": i}).serialize())
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(path, "wb").write(bytes(data))
    schema = pa.schema([pa.field("id", pa.int64())])
    with pytest.raises(Exception, match="c.tfrecord"):
        rf.ray.read(path, schema=schema).take_all()
    got = rf.ray.read(path, schema=schema, on_corruption="skip").take_all()
    assert 0 < len(got) < 10


def test_save_modes(cluster, tmp_path):
    out = str(tmp_path / "modes")
    small = _table(100)
    rf.ray.write(_ds(small, 2), out)
    with pytest.raises(rf.AlreadyExistsError, match="modes"):
        rf.ray.write(_ds(small, 2), out)  # errorifexists is the default
    with pytest.raises(rf.AlreadyExistsError):
        rf.ray.write(_ds(small, 2), out, mode="error")
    before = sorted(os.listdir(out))
    rf.ray.write(_ds(_table(7), 1), out, mode="ignore")
    assert sorted(os.listdir(out)) == before
    rf.ray.write(_ds(small, 2), out, mode="append")
    assert len(_shards(out)) == 4 and rf.ray.read(out).count() == 200
    assert json.load(open(os.path.join(out, "_manifest.json")))["records"] == 200
    rf.ray.write(_ds(_table(7), 1), out, mode="overwrite")
    assert len(_shards(out)) == 1 and rf.ray.read(out).count() == 7
    assert not os.path.exists(os.path.join(out, "_temporary"))
    with pytest.raises(ValueError, match="mode"):
        rf.ray.write(_ds(small, 1), str(tmp_path / "x"), mode="replace")


def test_s3_round_trip(cluster, s3_server, monkeypatch):  # noqa: F811
    env = {k: v for k, v in s3_server.env.items() if k.startswith("AWS_")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    url = s3_server.url(f"ray-{uuid.uuid4().hex[:8]}/out")
    t = _table(1000)
    remote = {"runtime_env": {"env_vars": env}}  # the workers started before the server
    rf.ray.write(_ds(t, 2), url, ray_remote_args=remote)
    got = _sorted(rf.ray.read(url, runtime_env=remote["runtime_env"], override_num_blocks=4))
    assert got["id"].to_pylist() == list(range(1000))
    assert got["vec"].to_pylist() == t["vec"].to_pylist()
    src = rf.ray.RecordflowDatasource(url)
    assert len(src.files) == 2 and all(f.startswith("s3://") for f in src.files)
    assert all(c == 500 for c in src.counts.values())  # the .idx files were promoted too
    assert len(src.plan(4)) == 4
    with pytest.raises(rf.AlreadyExistsError):
        rf.ray.write(_ds(t, 1), url)
    import pyarrow.fs as pafs
    fs, p = rf.ray._fs(url)
    names = sorted(i.base_name for i in fs.get_file_info(pafs.FileSelector(p)))
    assert "_SUCCESS" in names and "_manifest.json" in names and "_temporary" not in names


def test_sidecar_schema_is_sparks_and_back():
    # The sidecar carries a Spark schema, so recordflow.spark reads rf.ray's folders with exact
    # types (and rf.ray reads Spark's).
    from pyspark.sql import types as T

    from recordflow import _arrow_io as aio
    from recordflow.spark import _arrow_schema
    t = _table(1)
    spark_schema = T.StructType.fromJson(aio.spark_json_from_arrow(t.schema))
    assert [f.dataType.simpleString() for f in spark_schema.fields] == [
        "bigint", "int", "array<float>", "binary", "string", "boolean", "bigint", "array<binary>"]
    back = aio.arrow_from_spark_json(spark_schema.jsonValue())
    assert [f.type for f in back] == [f.type for f in _arrow_schema(spark_schema)]
    assert [f.type for f in back] == [f.type for f in t.schema]
