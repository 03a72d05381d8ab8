"""recordflow.spark: the Spark 4 data source (read / write), its commit protocol and
distributed conversion, checked with TensorFlow's own parsers and readers.

One SparkSession (local[2,4]: two cores, up to 4 attempts per task, driver on 127.0.0.1, UI
off) serves the whole file; a second one (local[1]) runs in a subprocess for the
executor-count comparison of rfs.convert.

Over 600 lines: every test shares that one session (Spark's start-up is the cost to pay once);
the standalone-cluster speculation tests are in test_spark_cluster.py.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pyspark = pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import types as T  # noqa: E402
from remote.servers import gcs_server, s3_server  # noqa: E402,F401  (the session's servers)

import recordflow as rf  # noqa: E402
import recordflow.spark as rfs  # noqa: E402
from recordflow import _core  # noqa: E402

SESSION_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.python.worker.reuse": "true",
}


def _session(master: str) -> SparkSession:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    b = SparkSession.builder.master(master).appName("recordflow-test")
    for k, v in SESSION_CONF.items():
        b = b.config(k, v)
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    return s


@pytest.fixture(scope="session")
def skip_log(tmp_path_factory):
    # Python workers inherit the environment the JVM started with: set before the session.
    d = tmp_path_factory.mktemp("skips")
    os.environ["RECORDFLOW_SPARK_SKIP_LOG"] = str(d)
    return d


@pytest.fixture(scope="session")
def s3_env(request):
    """The S3 server's environment, or None when it cannot start (its tests then fail or skip
    through the s3_server fixture itself; the other Spark tests still run)."""
    try:
        return dict(request.getfixturevalue("s3_server").env)
    except (pytest.skip.Exception, pytest.fail.Exception):
        return None


@pytest.fixture(scope="session")
def gcs_env(request):
    """The GCS emulator's environment (JSON API, no credentials), or None as s3_env."""
    try:
        return {"STORAGE_EMULATOR_HOST": request.getfixturevalue("gcs_server").endpoint}
    except (pytest.skip.Exception, pytest.fail.Exception):
        return None


@pytest.fixture(scope="session")
def spark(skip_log, s3_env, gcs_env):
    # Python workers inherit the environment the JVM started with, so the S3 and GCS settings
    # are in it for the session's start only; the driver (this process) gets them per test.
    saved = dict(os.environ)
    os.environ.update(s3_env or {})
    os.environ.update(gcs_env or {})
    try:
        s = _session("local[2,4]")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    rfs.register(s)
    yield s
    s.stop()


@pytest.fixture
def s3(spark, s3_server, monkeypatch, request):  # noqa: F811 (the fixture imported above)
    """A fresh s3:// folder on the session's server, with the driver's S3 environment."""
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)
    return s3_server.url(f"spark/{request.node.name}-{os.urandom(4).hex()}")


@pytest.fixture
def gs(spark, gcs_server, monkeypatch, request):  # noqa: F811 (the fixture imported above)
    """A fresh gs:// folder on the session's GCS emulator (JSON API), driver environment set."""
    for k in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_OAUTH_ACCESS_TOKEN", "GCS_ENDPOINT_URL",
              "GCS_HMAC_ACCESS_KEY_ID", "GCS_HMAC_SECRET"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_server.endpoint)
    return gcs_server.url(f"spark/{request.node.name}-{os.urandom(4).hex()}")


def _s3_names(folder: str) -> list[str]:
    return sorted(u[len(folder) + 1:] for u in _core.list_prefix(folder + "/"))


def _s3_records(folder: str) -> list[bytes]:
    out = []
    for u in _core.list_prefix(folder + "/"):
        if u.rsplit("/", 1)[-1].startswith("part-") and u.endswith(".tfrecord"):
            out.extend(rf.RecordReader(u))
    return out


@pytest.fixture(scope="session")
def tf():
    return pytest.importorskip("tensorflow")


ALL_TYPES = T.StructType([
    T.StructField("long", T.LongType()),
    T.StructField("int", T.IntegerType()),
    T.StructField("short", T.ShortType()),
    T.StructField("byte", T.ByteType()),
    T.StructField("bool", T.BooleanType()),
    T.StructField("float", T.FloatType()),
    T.StructField("double", T.DoubleType()),
    T.StructField("binary", T.BinaryType()),
    T.StructField("string", T.StringType()),
    T.StructField("longs", T.ArrayType(T.LongType())),
    T.StructField("floats", T.ArrayType(T.FloatType())),
    T.StructField("binaries", T.ArrayType(T.BinaryType())),
    T.StructField("strings", T.ArrayType(T.StringType())),
])

# Bytes that are not UTF-8 and would not survive a trip through strings.
RAW = bytes(range(256))


def _all_type_rows(n: int) -> list[tuple]:
    rows = []
    for i in range(n):
        if i % 7 == 3:
            rows.append(tuple([None] * len(ALL_TYPES.fields)))  # every feature absent
            continue
        rows.append((
            (1 << 40) + i, -i, i % 100, -(i % 100), i % 2 == 0, i * 0.5, i * 0.25,
            RAW[i % 256:] + b"\x00", f"héllo {i}",
            list(range(i % 4)), [float(j) / 4 for j in range(i % 3)],
            [RAW[:j] for j in range(i % 3)], [f"s{j}ü" for j in range(i % 3)],
        ))
    return rows


def _records(folder: str) -> list[bytes]:
    out = []
    for f in sorted(glob.glob(os.path.join(folder, "part-*.tfrecord*"))):
        if f.endswith((".idx", ".json")):
            continue
        out.extend(rf.RecordReader(f))
    return out


def _leftovers(folder: str) -> list[str]:
    """Anything a failed or losing attempt could leave behind."""
    bad = []
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            if "attempt" in name or name == rfs.TEMPORARY or ".tmp" in name:
                bad.append(os.path.join(root, name))
    return bad


def test_every_type_through_tensorflow_parse_example(spark, tf, tmp_path):
    rows = _all_type_rows(40)
    df = spark.createDataFrame(rows, ALL_TYPES).repartition(2)
    out = str(tmp_path / "out")
    df.write.format("recordflow").mode("overwrite").save(out)
    records = _records(out)
    assert len(records) == len(rows)

    spec = {}
    for f in ALL_TYPES.fields:
        leaf = f.dataType.elementType if isinstance(f.dataType, T.ArrayType) else f.dataType
        dtype = (tf.int64 if isinstance(leaf, rfs._INT_TYPES) else
                 tf.float32 if isinstance(leaf, rfs._FLOAT_TYPES) else tf.string)
        spec[f.name] = tf.io.VarLenFeature(dtype)
    parsed = tf.io.parse_example(tf.constant(records), spec)
    dense = {k: tf.sparse.to_dense(v).numpy() if v.dtype != tf.string else
             tf.sparse.to_dense(v, default_value=b"").numpy() for k, v in parsed.items()}
    lengths = {k: tf.sparse.to_dense(tf.sparse.map_values(tf.ones_like, v)).numpy().sum(axis=1)
               if v.dtype != tf.string else
               tf.reduce_sum(tf.cast(tf.sparse.to_dense(tf.sparse.map_values(
                   lambda x: tf.ones_like(x, tf.int64), v)), tf.int64), axis=1).numpy()
               for k, v in parsed.items()}
    by_long = {}
    for r in range(len(records)):
        key = int(dense["long"][r][0]) if lengths["long"][r] else None
        by_long.setdefault(key, []).append(r)
    for row in rows:
        if row[0] is None:
            continue
        (r,) = by_long[row[0]]
        for f, value in zip(ALL_TYPES.fields, row):
            got = dense[f.name][r][: int(lengths[f.name][r])].tolist()
            want = value if isinstance(value, list) else [value]
            if isinstance(f.dataType, T.BooleanType):
                want = [int(v) for v in want]
            if isinstance(f.dataType, T.StringType) or (isinstance(f.dataType, T.ArrayType) and
                                                       isinstance(f.dataType.elementType, T.StringType)):
                want = [v.encode("utf-8") for v in want]
            if isinstance(f.dataType, (T.FloatType, T.DoubleType)) or (
                    isinstance(f.dataType, T.ArrayType) and isinstance(f.dataType.elementType, T.FloatType)):
                np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f.name)
            else:
                assert got == want, f.name
    # A null row is a record with no features (nulls are absent features).
    nulls = [r for r in range(len(records)) if all(lengths[k][r] == 0 for k in lengths)]
    assert len(nulls) == sum(1 for row in rows if row[0] is None)

    # And back through Spark with the sidecar's schema: exactly the rows written, except that
    # an absent array feature reads as an empty array (VarLen semantics, documented).
    back = spark.read.format("recordflow").load(out)
    assert back.schema == ALL_TYPES.__class__([T.StructField(f.name, f.dataType, True) for f in ALL_TYPES.fields])
    expect = [tuple([] if v is None and isinstance(f.dataType, T.ArrayType) else v
                    for f, v in zip(ALL_TYPES.fields, row)) for row in rows]
    got_rows = [tuple(r) for r in back.collect()]

    def key(r):
        return (r[0] is None, r[0] or 0)

    got_rows = [tuple(bytes(v) if isinstance(v, bytearray) else
                      [bytes(x) for x in v] if isinstance(v, list) and v and isinstance(v[0], bytearray) else v
                      for v in r) for r in got_rows]
    for g, w in zip(sorted(got_rows, key=key), sorted(expect, key=key)):
        for f, gv, wv in zip(ALL_TYPES.fields, g, w):
            if isinstance(f.dataType, T.FloatType) and wv is not None:
                assert gv == pytest.approx(wv), f.name
            elif isinstance(f.dataType, T.ArrayType) and isinstance(f.dataType.elementType, T.FloatType):
                assert gv == pytest.approx(wv), f.name
            else:
                assert gv == wv, f.name


SEQ_SCHEMA = T.StructType([
    T.StructField("id", T.LongType()),
    T.StructField("name", T.StringType()),
    T.StructField("tokens", T.ArrayType(T.ArrayType(T.LongType()))),
    T.StructField("frames", T.ArrayType(T.ArrayType(T.FloatType()))),
    T.StructField("words", T.ArrayType(T.ArrayType(T.BinaryType()))),
])


def test_sequence_example_through_tensorflow_parse_sequence_example(spark, tf, tmp_path):
    rows = [(i, f"n{i}", [list(range(j, j + i % 3)) for j in range(i % 4)],
             [[float(i), float(j)] for j in range(i % 3)], [[RAW[:j]] for j in range(i % 5)])
            for i in range(12)]
    df = spark.createDataFrame(rows, SEQ_SCHEMA).coalesce(1)
    out = str(tmp_path / "seq")
    df.write.format("recordflow").option("recordType", "SequenceExample").mode("overwrite").save(out)
    records = _records(out)
    assert len(records) == len(rows)
    for rec in records:
        ctx, seq = tf.io.parse_single_sequence_example(
            rec,
            context_features={"id": tf.io.FixedLenFeature([], tf.int64),
                              "name": tf.io.FixedLenFeature([], tf.string)},
            sequence_features={"tokens": tf.io.RaggedFeature(tf.int64),
                               "frames": tf.io.RaggedFeature(tf.float32),
                               "words": tf.io.RaggedFeature(tf.string)})
        row = rows[int(ctx["id"].numpy())]
        assert ctx["name"].numpy() == row[1].encode()
        assert seq["tokens"].to_list() == row[2]
        assert seq["frames"].to_list() == row[3]
        assert seq["words"].to_list() == row[4]
    # The batch parser gives the same (tf.io.parse_sequence_example).
    _, batch, _ = tf.io.parse_sequence_example(
        tf.constant(records), context_features={"id": tf.io.FixedLenFeature([], tf.int64)},
        sequence_features={"tokens": tf.io.RaggedFeature(tf.int64)})
    assert sum(len(x) for x in batch["tokens"].to_list()) == sum(len(r[2]) for r in rows)
    back = spark.read.format("recordflow").option("recordType", "SequenceExample").load(out)
    assert back.schema.fieldNames() == SEQ_SCHEMA.fieldNames()
    got = sorted((r.id, r.name, r.tokens, r.frames, [[bytes(x) for x in s] for s in r.words])
                 for r in back.collect())
    assert got == sorted(rows)


def _tf_examples(tf, n):
    out = []
    for i in range(n):
        feats = {
            "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
            "vec": tf.train.Feature(float_list=tf.train.FloatList(value=[i, i + 0.5])),
            "raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[RAW[i % 200:]])),
        }
        out.append(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
    return out


@pytest.mark.parametrize("compression", ["", "GZIP"])
def test_reads_tensorflow_written_files(spark, tf, tmp_path, compression):
    recs = _tf_examples(tf, 50)
    path = str(tmp_path / ("tf.tfrecord" + (".gz" if compression else "")))
    with tf.io.TFRecordWriter(path, options=compression or None) as w:
        for r in recs:
            w.write(r)
    df = spark.read.format("recordflow").load(path)  # schema inferred by sampling
    assert df.schema == T.StructType([
        T.StructField("id", T.LongType(), True), T.StructField("raw", T.BinaryType(), True),
        T.StructField("vec", T.ArrayType(T.FloatType(), True), True)])
    got = sorted((r.id, bytes(r.raw), r.vec) for r in df.collect())
    assert got == [(i, RAW[i % 200:], [float(i), i + 0.5]) for i in range(50)]
    raw = spark.read.format("recordflow").option("recordType", "ByteArray").load(path)
    assert sorted(bytes(r.byteArray) for r in raw.collect()) == sorted(recs)


def test_large_indexed_file_read_by_many_partitions(spark, tmp_path):
    path = str(tmp_path / "big.tfrecord")
    n = 5000
    with rf.RecordWriter(path, index=True) as w:
        for i in range(n):
            w.write(rf.Example({"i": i, "b": b"x" * (i % 17)}).serialize())
    df = (spark.read.format("recordflow").option("recordsPerPartition", "700")
          .schema("i long, b binary").load(path))
    assert df.rdd.getNumPartitions() == (n + 699) // 700
    got = [r.i for r in df.collect()]
    assert got == list(range(n))  # every record once, in file order
    # Without an index the file is one partition.
    os.remove(path + ".idx")
    df = spark.read.format("recordflow").option("recordsPerPartition", "700").schema("i long").load(path)
    assert df.rdd.getNumPartitions() == 1
    assert df.count() == n


def test_corruption_raise_and_skip(spark, tmp_path, skip_log):
    path = str(tmp_path / "c.tfrecord")
    with rf.RecordWriter(path) as w:
        for i in range(20):
            w.write(rf.Example({"i": i}).serialize())
    data = bytearray(open(path, "rb").read())
    size = len(data) // 20
    data[5 * size + 14] ^= 0xFF  # payload byte of record 5: CRC mismatch
    open(path, "wb").write(bytes(data))
    with pytest.raises(Exception, match=r"c\.tfrecord"):
        spark.read.format("recordflow").schema("i long").load(path).collect()
    rows = (spark.read.format("recordflow").schema("i long").option("on_corruption", "skip")
            .load(path).collect())
    assert sorted(r.i for r in rows) == [i for i in range(20) if i != 5]
    # The skip is counted: one report per file read, in the executor log and in the folder
    # RECORDFLOW_SPARK_SKIP_LOG names.
    reports = [json.load(open(f)) for f in glob.glob(str(skip_log / "*.json"))]
    assert [(r["path"], r["records"]) for r in reports if r["path"] == path] == [(path, 1)]


def test_gzip_write_and_read_back(spark, tf, tmp_path):
    df = spark.createDataFrame([(i, f"v{i}") for i in range(30)], "i long, s string").repartition(2)
    out = str(tmp_path / "gz")
    df.write.format("recordflow").option("compression", "GZIP").mode("overwrite").save(out)
    files = sorted(glob.glob(out + "/part-*.tfrecord.gz"))
    assert len(files) == 2 and not glob.glob(out + "/*.idx")
    ids = []
    for f in files:
        for rec in tf.data.TFRecordDataset(f, compression_type="GZIP"):
            p = tf.io.parse_single_example(rec, {"i": tf.io.FixedLenFeature([], tf.int64)})
            ids.append(int(p["i"]))
    assert sorted(ids) == list(range(30))
    back = spark.read.format("recordflow").load(out)
    assert sorted((r.i, r.s) for r in back.collect()) == [(i, f"v{i}") for i in range(30)]


def test_failed_first_attempts_still_write_exactly_once(spark, tmp_path):
    df = spark.createDataFrame([(i,) for i in range(100)], "i long").repartition(3)
    out = str(tmp_path / "retry")
    (df.write.format("recordflow").option("_testFailFirstAttempt", "true")
     .mode("overwrite").save(out))
    ids = sorted(rf.Example.parse(r)["i"][0] for r in _records(out))
    assert ids == list(range(100))
    assert _leftovers(out) == []
    manifest = json.load(open(os.path.join(out, "_manifest.json")))
    assert manifest["records"] == 100 and len(manifest["shards"]) == 3
    assert os.path.exists(os.path.join(out, "_SUCCESS"))
    for s in manifest["shards"]:
        assert os.path.getsize(os.path.join(out, s["file"])) == s["bytes"]
        assert rf.count_records(os.path.join(out, s["file"])) == s["records"]


def test_speculative_attempts_commit_exactly_once(tmp_path):
    """Speculative execution as Spark runs it: two attempts of one partition both write their
    whole shard; the commit coordinator lets one commit; a third copy still running after the
    job committed finds its folder gone. (local mode never launches a speculative copy, since
    all attempts would be on one host, so the attempts are driven here directly through the
    writer Spark pickles to its tasks.)"""
    out = str(tmp_path / "spec")
    writer, schema, batch, other, first, speculative, second_partition = _three_attempts(out)
    assert os.path.exists(first.temp_file) and os.path.exists(speculative.temp_file)
    writer.commit([speculative, second_partition])  # the coordinator chose attempt 1
    with pytest.raises(Exception):  # the late copy cannot create anything any more
        writer.write_attempt(iter([batch]), partition=0, attempt=2)
    ids = sorted(int(rf.Example.parse(r)["i"][0]) for r in _records(out))
    assert ids == list(range(80))
    assert _leftovers(out) == []
    assert sorted(os.listdir(out)) == _output_names([speculative.final_name,
                                                    second_partition.final_name])
    # abort() of another job leaves the committed output alone and removes its own attempts.
    job2 = rfs.RecordflowDataSource({"path": out}).writer(schema, overwrite=True)
    m = job2.write_attempt(iter([other]), partition=0, attempt=0)
    job2.abort([m])
    assert sorted(int(rf.Example.parse(r)["i"][0]) for r in _records(out)) == list(range(80))
    assert _leftovers(out) == []


def test_failed_job_leaves_nothing(spark, tmp_path):
    out = str(tmp_path / "abort")

    def boom(i):
        if i == 57:
            raise ValueError("row 57")
        return i

    df = spark.createDataFrame(
        spark.sparkContext.parallelize(range(100), 3).map(lambda i: (boom(i),)), "i long")
    with pytest.raises(Exception, match="row 57"):
        df.write.format("recordflow").mode("append").save(out)
    assert not os.path.exists(out) or os.listdir(out) == []


def test_save_modes(spark, tmp_path):
    out = str(tmp_path / "modes")
    a, b, ids = _save_mode_frames(spark, out)
    rfs.write(a, out)  # errorifexists on a new folder writes
    assert ids() == list(range(10))
    with pytest.raises(rf.AlreadyExistsError, match="modes"):
        rfs.write(b, out)
    # The data source's own check (saveMode option) refuses too, before any task runs.
    with pytest.raises(Exception, match="already exists"):
        b.write.format("recordflow").mode("append").option("saveMode", "errorifexists").save(out)
    rfs.write(b, out, mode="ignore")
    b.write.format("recordflow").mode("append").option("saveMode", "ignore").save(out)
    assert ids() == list(range(10))
    b.write.format("recordflow").mode("append").save(out)
    assert ids() == list(range(15))
    assert json.load(open(os.path.join(out, "_manifest.json")))["records"] == 15
    rfs.write(b, out, mode="overwrite")
    assert ids() == list(range(10, 15))
    assert _leftovers(out) == []


def test_nesting_beyond_a_feature_list_is_refused_naming_the_column():
    # Spark arrays and Arrow lists: one check, each in its own words (Spark's recordType).
    from recordflow import _arrow_io

    A = T.ArrayType
    with pytest.raises(rf.SchemaError, match="column 'c': arrays nest at most twice"):
        rfs._layout(A(A(A(T.LongType()))), "c", "SequenceExample")
    with pytest.raises(rf.SchemaError,
                       match="column 'c': array of arrays needs recordType SequenceExample"):
        rfs._layout(A(A(T.LongType())), "c", "Example")
    assert rfs._layout(A(A(T.LongType())), "c", "SequenceExample") == ("int64", 2)
    with pytest.raises(rf.SchemaError, match="column 'l': lists nest at most twice"):
        _arrow_io.arrow_layout(pa.list_(pa.list_(pa.list_(pa.int64()))), "l", "SequenceExample")
    with pytest.raises(rf.SchemaError,
                       match="column 'l': a list of lists needs record type SequenceExample"):
        _arrow_io.arrow_layout(pa.list_(pa.list_(pa.float32())), "l", "Example")
    assert _arrow_io.arrow_layout(pa.list_(pa.float32()), "l", "Example") == ("float32", 1)


def test_record_type_option_any_case_or_an_error_naming_the_option():
    from recordflow import _arrow_io

    assert rfs._record_type({"recordtype": "sequenceexample"}) == "SequenceExample"
    assert rfs._record_type({}) == "Example"
    with pytest.raises(ValueError, match="recordType must be one of Example, SequenceExample, "
                                         "ByteArray, not 'Bogus'"):
        rfs._record_type({"recordType": "Bogus"})
    assert _arrow_io.record_type_name("BYTEARRAY") == "ByteArray"
    with pytest.raises(ValueError, match="record_type must be one of Example, SequenceExample, "
                                         "ByteArray, not 'x'"):
        _arrow_io.record_type_name("x")


def test_non_nullable_columns_round_trip(spark, tmp_path):
    """Columns Spark knows are never null (spark.range, array literals) write and read back
    through the sidecar schema; a required column over records missing the feature fails
    naming the key instead of giving nulls."""
    out = str(tmp_path / "nn")
    df = spark.range(20, numPartitions=2).selectExpr(
        "id", "array(cast(id as float), 1.5f) as v", "cast(cast(id as string) as binary) as b")
    assert not df.schema["id"].nullable
    df.write.format("recordflow").mode("overwrite").save(out)
    back = spark.read.format("recordflow").load(out)
    got = sorted((r.id, r.v, bytes(r.b)) for r in back.collect())
    assert got == [(i, [float(i), 1.5], str(i).encode()) for i in range(20)]
    path = str(tmp_path / "gap.tfrecord")
    with rf.RecordWriter(path) as w:
        w.write(rf.Example({"x": 1}).serialize())
        w.write(rf.Example({"y": 2}).serialize())
    required = T.StructType([T.StructField("x", T.LongType(), False)])
    with pytest.raises(Exception, match="feature 'x' is missing in record 1"):
        spark.read.format("recordflow").schema(required).load(path).collect()


def test_schema_errors_name_the_column(spark, tmp_path):
    df = spark.createDataFrame([({"a": 1},)], "m map<string,int>")
    with pytest.raises(Exception, match="'m'"):
        df.write.format("recordflow").mode("overwrite").save(str(tmp_path / "bad"))
    path = str(tmp_path / "multi.tfrecord")
    with rf.RecordWriter(path) as w:
        w.write(rf.Example({"x": [1, 2]}).serialize())
    with pytest.raises(Exception, match="feature 'x' has 2 values"):
        spark.read.format("recordflow").schema("x long").load(path).collect()


# ---- distributed conversion ----------------------------------------------------------------


def _image_folder(root: str) -> dict:
    """Three classes of small JPEGs; returns {relative path: bytes}."""
    rng = np.random.default_rng(0)
    files = {}
    for c, count in (("cat", 7), ("dog", 5), ("eel", 4)):
        os.makedirs(os.path.join(root, c))
        for i in range(count):
            img = rng.integers(0, 255, (8 + i, 10 + c.__len__(), 3), dtype=np.uint8)
            data = rf.encode_jpeg(img)
            p = os.path.join(root, c, f"{c}{i:02d}.jpg")
            open(p, "wb").write(data)
            files[f"{c}/{c}{i:02d}.jpg"] = data
    return files


def _digest(folder: str) -> dict:
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith((".tfrecord", ".idx", ".gz")) or name == "labels.txt":
            out[name] = hashlib.sha256(open(os.path.join(folder, name), "rb").read()).hexdigest()
    return out


CONVERT_SCRIPT = textwrap.dedent("""
    import os, sys, json
    sys.path[:0] = {path!r}
    from test_spark import _session
    import recordflow.spark as rfs
    spark = _session("local[1]")
    rfs.convert(spark, {src!r}, {dst!r}, shards=3, val_fraction=0.25, seed=7)
    spark.stop()
""")


def test_convert_matches_local_convert_and_tensorflow_reads_it(spark, tf, tmp_path):
    src = str(tmp_path / "images")
    files = _image_folder(src)
    dst2 = str(tmp_path / "spark2")
    dst1 = str(tmp_path / "spark1")
    local = str(tmp_path / "local")
    # local[1] in its own JVM, started first so it overlaps with the work below.
    proc = subprocess.Popen(
        [sys.executable, "-c", CONVERT_SCRIPT.format(path=[os.path.dirname(__file__)], src=src, dst=dst1)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        summary = rfs.convert(spark, src, dst2, shards=3, val_fraction=0.25, seed=7)
        rf.convert(src, local, shards=3, val_fraction=0.25, seed=7)
        assert _digest(dst2) == _digest(local)
        n_shards = sum(len(split["shards"]) for split in summary["splits"].values())
        assert n_shards >= 4 and len(summary["splits"]["train"]["shards"]) == 3
        assert len(_digest(local)) == 2 * n_shards + 1  # shards, their .idx, labels.txt
        assert summary["records"] == len(files)
        assert not os.path.exists(os.path.join(dst2, rfs.TEMPORARY))
        # TensorFlow reads every image once, with its label and original bytes.
        classes = open(os.path.join(dst2, "labels.txt")).read().split()
        assert classes == ["cat", "dog", "eel"]
        seen = {}
        shards = sorted(glob.glob(os.path.join(dst2, "*.tfrecord")))
        spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
                "image/class/label": tf.io.FixedLenFeature([], tf.int64),
                "image/filename": tf.io.FixedLenFeature([], tf.string)}
        for rec in tf.data.TFRecordDataset(shards):
            p = tf.io.parse_single_example(rec, spec)
            name = p["image/filename"].numpy().decode()
            assert name not in seen
            seen[name] = (int(p["image/class/label"]), p["image/encoded"].numpy())
        assert len(seen) == len(files)
        by_base = {os.path.basename(k): (k, v) for k, v in files.items()}
        for name, (label, encoded) in seen.items():
            rel, data = by_base[os.path.basename(name)]
            assert classes[label] == rel.split("/")[0]
            assert encoded == data
        # Resumable: a second run with resume skips every committed shard.
        again = rfs.convert(spark, src, dst2, shards=3, val_fraction=0.25, seed=7, resume=True)
        assert again["resumed_shards"] == n_shards and again["records_this_run"] == 0
        with pytest.raises(rf.AlreadyExistsError):
            rfs.convert(spark, src, dst2, shards=3, val_fraction=0.25, seed=7)
        out, _ = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out[-3000:]
    assert _digest(dst1) == _digest(dst2)


# ---------------------------------------------------------------------------------------------
# Checks shared by the local folder and object store (s3://, gs://) tests


def _output_names(shards) -> list[str]:
    """A committed output folder's object names: every shard with its .idx and schema sidecar,
    _SUCCESS and _manifest.json."""
    return sorted(["_SUCCESS", "_manifest.json"] + [
        n for s in shards for n in (s, s + ".idx", s + rfs.META_SUFFIX)])


def _check_manifest(url: str, records: int, shards: int | None = None) -> None:
    manifest = json.loads(_core.read_file(url + "/_manifest.json"))
    assert manifest["records"] == records
    if shards is not None:
        assert len(manifest["shards"]) == shards
    for sh in manifest["shards"]:
        assert _core.file_size(url + "/" + sh["file"]) == sh["bytes"]


def _three_attempts(url: str):
    """A job's writer (schema column i) and three attempts as Spark runs them through the
    pickled writer: attempts 0 and 1 (speculative) of partition 0 on one batch, attempt 0 of
    partition 1 on another. Returns (writer, schema, the two batches, the three commit
    messages)."""
    schema = T.StructType([T.StructField("i", T.LongType())])
    writer = rfs.RecordflowDataSource({"path": url}).writer(schema, overwrite=False)
    batch = pa.RecordBatch.from_arrays([pa.array(range(50), pa.int64())], names=["i"])
    other = pa.RecordBatch.from_arrays([pa.array(range(50, 80), pa.int64())], names=["i"])
    first = writer.write_attempt(iter([batch]), partition=0, attempt=0)
    speculative = writer.write_attempt(iter([batch]), partition=0, attempt=1)
    second = writer.write_attempt(iter([other]), partition=1, attempt=0)
    return writer, schema, batch, other, first, speculative, second


def _save_mode_frames(spark, url: str):
    """Two one-partition frames (i: 0..9 and 10..14) and ids(): the sorted i read back from
    ``url``."""
    a = spark.createDataFrame([(i,) for i in range(10)], "i long").coalesce(1)
    b = spark.createDataFrame([(i,) for i in range(10, 15)], "i long").coalesce(1)

    def ids():
        return sorted(r.i for r in spark.read.format("recordflow").load(url).collect())

    return a, b, ids


def _check_save_modes(spark, url: str) -> None:
    """errorifexists (on an empty folder it writes), ignore, append and overwrite; one shard
    remains after overwrite."""
    a, b, ids = _save_mode_frames(spark, url)
    rfs.write(a, url)  # errorifexists on an empty prefix writes
    assert ids() == list(range(10))
    with pytest.raises(rf.AlreadyExistsError, match="already exists"):
        rfs.write(b, url)
    rfs.write(b, url, mode="ignore")
    assert ids() == list(range(10))
    rfs.write(b, url, mode="append")
    assert ids() == list(range(15))
    assert json.loads(_core.read_file(url + "/_manifest.json"))["records"] == 15
    rfs.write(b, url, mode="overwrite")
    assert ids() == list(range(10, 15))
    assert len([n for n in _s3_names(url) if n.endswith(".tfrecord")]) == 1


# ---------------------------------------------------------------------------------------------
# Object stores (s3:// on SeaweedFS): commit by completing multipart uploads


def test_s3_first_attempts_fail_then_exactly_once_and_no_leftover_uploads(spark, s3):
    """Every first attempt uploads its whole shard (its multipart uploads left open) and then
    fails; the retries win. The driver completes exactly the winners' uploads and aborts the
    rest: no open upload and no stray object remains. The output reads back through s3://
    globs, cut into many partitions by the remote .idx files."""
    df = spark.createDataFrame([(i, b"x" * (i % 50)) for i in range(3000)], "i long, b binary")
    (df.repartition(3).write.format("recordflow").option("_testFailFirstAttempt", "true")
     .mode("overwrite").save(s3))
    assert _core.list_uploads(s3 + "/") == []
    names = _s3_names(s3)
    shards = [n for n in names if n.endswith(".tfrecord")]
    assert len(shards) == 3
    assert names == _output_names(shards)
    ids = sorted(rf.Example.parse(r)["i"][0] for r in _s3_records(s3))
    assert ids == list(range(3000))
    _check_manifest(s3, 3000, shards=3)
    back = (spark.read.format("recordflow").option("recordsPerPartition", "256")
            .load(s3 + "/part-*.tfrecord"))
    assert back.rdd.getNumPartitions() >= 12  # ranges of the remote .idx files
    rows = back.collect()
    assert sorted((r.i, bytes(r.b)) for r in rows) == [(i, b"x" * (i % 50)) for i in range(3000)]
    # A folder URL reads the same (data files only: no _SUCCESS, manifest or sidecars).
    assert spark.read.format("recordflow").load(s3).count() == 3000


def test_s3_nothing_visible_before_commit_losers_and_abort_cleaned(s3):
    """Concurrent attempts of one partition (speculation, retries) as Spark runs them through
    the pickled writer: each holds open uploads and no object exists under a final key until
    commit(); commit completes the coordinator's winner only; abort() leaves nothing."""
    writer, schema, _, other, first, speculative, second = _three_attempts(s3)
    assert _s3_names(s3) == []  # no object under any key before commit
    assert len(_core.list_uploads(s3 + "/")) == 6  # 3 attempts x (records, index)
    assert first.final_name == speculative.final_name
    writer.commit([speculative, second])  # the coordinator chose attempt 1
    assert _core.list_uploads(s3 + "/") == []
    assert sorted(int(rf.Example.parse(r)["i"][0]) for r in _s3_records(s3)) == list(range(80))
    assert _s3_names(s3) == _output_names([speculative.final_name, second.final_name])
    # abort() of another job aborts its uploads and leaves the committed output alone.
    before = _s3_names(s3)
    job2 = rfs.RecordflowDataSource({"path": s3}).writer(schema, overwrite=True)
    m = job2.write_attempt(iter([other]), partition=0, attempt=0)
    job2.write_attempt(iter([other]), partition=1, attempt=3)  # an attempt not in the messages
    job2.abort([m])
    assert _core.list_uploads(s3 + "/") == []
    assert _s3_names(s3) == before
    assert sorted(int(rf.Example.parse(r)["i"][0]) for r in _s3_records(s3)) == list(range(80))


def test_s3_save_modes(spark, s3):
    _check_save_modes(spark, s3)
    assert _core.list_uploads(s3 + "/") == []


def test_s3_convert_identical_to_local(spark, s3, tmp_path):
    src = str(tmp_path / "images")
    _image_folder(src)
    local = str(tmp_path / "local")
    rf.convert(src, local, shards=3, val_fraction=0.25, seed=7)
    summary = rfs.convert(spark, src, s3, shards=3, val_fraction=0.25, seed=7)
    want = _digest(local)
    got = {n: hashlib.sha256(_core.read_file(s3 + "/" + n)).hexdigest() for n in want}
    assert got == want
    assert summary["records"] == 16
    assert "_SUCCESS" in _s3_names(s3) and "summary.json" in _s3_names(s3)
    again = rfs.convert(spark, src, s3, shards=3, val_fraction=0.25, seed=7, resume=True)
    assert again["records_this_run"] == 0 and again["resumed_shards"] >= 4
    with pytest.raises(rf.AlreadyExistsError):
        rfs.convert(spark, src, s3, shards=3, val_fraction=0.25, seed=7)


# ---------------------------------------------------------------------------------------------
# Bytes columns as Arrow buffers, both ways (no Python object per value or record)


def test_bytes_columns_are_native_arrow_buffers(tmp_path):
    values = [RAW[i % 256:] + bytes([i % 7]) * (i % 5) for i in range(300)]
    recs = [rf.Example({"b": v, "bl": [v[:3], b"", v[-2:]], "i": i}).serialize()
            for i, v in enumerate(values)]
    parser = _core.ExampleParser([("b", "var", "bytes", [], None), ("bl", "var", "bytes", [], None)])
    (b_vals, b_splits), (bl_vals, bl_splits) = parser.parse(recs, 0, "arrow")
    offsets, data = b_vals
    assert offsets.dtype == np.int32 and data.dtype == np.uint8
    assert [bytes(data[offsets[j]:offsets[j + 1]]) for j in range(300)] == values
    # Read side: the Arrow array is a view of the parser's buffers (same memory, no copy).
    schema = T.StructType([T.StructField("b", T.BinaryType()),
                           T.StructField("bl", T.ArrayType(T.BinaryType())),
                           T.StructField("i", T.LongType())])
    conv = rfs._BatchConverter(schema, "Example", rfs._arrow_schema(schema))
    batch = conv(recs, "mem", 0)
    assert batch.column(0).to_pylist() == values
    assert batch.column(1).to_pylist() == [[v[:3], b"", v[-2:]] for v in values]
    col = rfs._BatchConverter._values(b_vals, pa.binary(), "b", "mem")
    assert col.buffers()[2].address == data.ctypes.data
    assert col.buffers()[1].address == offsets.ctypes.data
    # Write side: one (offsets, data) pair per batch, written by RecordWriter.write_buffers.
    enc = rfs._BatchEncoder(schema, "Example")
    out_offsets, out_data = enc(batch)
    assert out_offsets.dtype == np.int64 and len(out_offsets) == 301
    path = str(tmp_path / "b.tfrecord")
    with rf.RecordWriter(path) as w:
        w.write_buffers(out_offsets, out_data)
    assert [rf.Example.parse(r)["b"] for r in rf.RecordReader(path)] == [[v] for v in values]
    raw_schema = T.StructType([T.StructField("byteArray", T.BinaryType())])
    sliced = pa.RecordBatch.from_arrays([pa.array(values, pa.binary()).slice(10, 50)],
                                        schema=rfs._arrow_schema(raw_schema))
    raw = str(tmp_path / "raw.tfrecord")
    with rf.RecordWriter(raw) as w:
        w.write_buffers(*rfs._BatchEncoder(raw_schema, "ByteArray")(sliced))
    assert list(rf.RecordReader(raw)) == values[10:60]
    with pytest.raises(ValueError, match="not within the data"):
        with rf.RecordWriter(str(tmp_path / "bad.tfrecord")) as w:
            w.write_buffers(np.array([0, 5, 3], np.int64), np.zeros(4, np.uint8))


def test_byte_array_reads_are_native_arrow_buffers(spark, tmp_path):
    """recordType=ByteArray: the reader hands the records over as an Arrow binary column's two
    buffers built in C++ (no bytes object per record), and Arrow wraps them without a copy;
    stream (compressed, unindexed) and indexed range partitions read the same bytes."""
    values = [RAW[i % 256:] + bytes([i % 7]) * (i % 5) for i in range(700)] + [b""]
    plain = str(tmp_path / "raw.tfrecord")
    with rf.RecordWriter(plain, index=True) as w:
        for v in values:
            w.write(v)
    with _core.RecordReader(plain) as r:
        offsets, data = r.read_batch_arrow(300)
        assert offsets.dtype == np.int32 and data.dtype == np.uint8 and len(offsets) == 301
        assert [bytes(data[offsets[j]:offsets[j + 1]]) for j in range(300)] == values[:300]
        assert len(r.read_batch_arrow(1000)[0]) == len(values) - 300 + 1
        assert r.read_batch_arrow(10) is None  # end of file
    offsets, data = _core.IndexedRecordReader(plain).read_range_arrow(650, 100)  # clipped
    assert [bytes(data[offsets[j]:offsets[j + 1]]) for j in range(len(offsets) - 1)] == values[650:]
    raw_schema = T.StructType([T.StructField("byteArray", T.BinaryType())])
    conv = rfs._BatchConverter(raw_schema, "ByteArray", rfs._arrow_schema(raw_schema))
    batch = conv((offsets, data), plain, 650)
    assert batch.column(0).to_pylist() == values[650:]
    assert batch.column(0).buffers()[2].address == data.ctypes.data  # the reader's memory
    assert batch.column(0).buffers()[1].address == offsets.ctypes.data
    # Through Spark: indexed ranges and a compressed stream.
    gz = str(tmp_path / "gz" / "raw.tfrecord.gz")
    os.makedirs(os.path.dirname(gz))
    with rf.RecordWriter(gz, "GZIP") as w:
        for v in values:
            w.write(v)
    for path, opts in ((plain, {"recordsPerPartition": "128", "batchSize": "50"}),
                       (gz, {"batchSize": "64"})):
        df = spark.read.format("recordflow").option("recordType", "ByteArray").options(**opts).load(path)
        assert df.schema == raw_schema.__class__([T.StructField("byteArray", T.BinaryType(), True)])
        if path == plain:
            assert df.rdd.getNumPartitions() == 6
        assert sorted(bytes(r.byteArray) for r in df.collect()) == sorted(values)


# ---------------------------------------------------------------------------------------------
# gs:// (the GCS emulator's JSON API): attempts write under _temporary/<job>/, the driver
# promotes the winners by copy


def test_gs_round_trip_read_partitions_from_remote_idx(spark, gs):
    df = spark.createDataFrame([(i, b"y" * (i % 30), f"s{i}") for i in range(1500)],
                               "i long, b binary, s string")
    df.repartition(2).write.format("recordflow").mode("overwrite").save(gs)
    names = _s3_names(gs)  # list_prefix works for any URL
    shards = [n for n in names if n.endswith(".tfrecord")]
    assert len(shards) == 2
    assert names == _output_names(shards)
    back = spark.read.format("recordflow").option("recordsPerPartition", "200").load(gs)
    assert back.rdd.getNumPartitions() >= 8  # ranges cut from the remote .idx files
    assert back.schema["s"].dataType == T.StringType()  # from the gs:// sidecar
    assert sorted((r.i, bytes(r.b), r.s) for r in back.collect()) == [
        (i, b"y" * (i % 30), f"s{i}") for i in range(1500)]
    glob_df = spark.read.format("recordflow").load(gs + "/part-*.tfrecord")
    assert glob_df.count() == 1500
    _check_manifest(gs, 1500)


def test_gs_first_attempts_fail_then_exactly_once(spark, gs):
    """Every first attempt writes its whole shard under _temporary/<job>/ and then fails; the
    retries win; commit copies exactly the winners and deletes the job folder."""
    df = spark.createDataFrame([(i,) for i in range(900)], "i long").repartition(3)
    (df.write.format("recordflow").option("_testFailFirstAttempt", "true")
     .mode("overwrite").save(gs))
    names = _s3_names(gs)
    assert not any(n.startswith(rfs.TEMPORARY) or "attempt" in n for n in names), names
    shards = [n for n in names if n.endswith(".tfrecord")]
    assert len(shards) == 3
    ids = sorted(int(rf.Example.parse(r)["i"][0]) for n in shards for r in rf.RecordReader(gs + "/" + n))
    assert ids == list(range(900))
    _check_manifest(gs, 900, shards=3)


def test_gs_nothing_visible_before_commit_and_abort_cleaned(gs):
    writer, schema, _, other, first, speculative, second = _three_attempts(gs)
    names = _s3_names(gs)
    assert names and all(n.startswith(rfs.TEMPORARY + "/") for n in names)  # only attempts
    assert not rfs._has_output(gs)
    with pytest.raises(FileNotFoundError):  # a reader of the folder sees no data yet
        rfs._list_files(gs)
    assert first.final_name == speculative.final_name
    writer.commit([speculative, second])  # the coordinator chose attempt 1
    assert sorted(int(rf.Example.parse(r)["i"][0]) for r in _s3_records_any(gs)) == list(range(80))
    assert _s3_names(gs) == _output_names([speculative.final_name, second.final_name])
    before = _s3_names(gs)
    job2 = rfs.RecordflowDataSource({"path": gs}).writer(schema, overwrite=True)
    m = job2.write_attempt(iter([other]), partition=0, attempt=0)
    job2.abort([m])
    assert _s3_names(gs) == before
    assert sorted(int(rf.Example.parse(r)["i"][0]) for r in _s3_records_any(gs)) == list(range(80))


def _s3_records_any(folder: str) -> list[bytes]:
    return [r for u in rfs._list_files(folder) for r in rf.RecordReader(u)]


def test_gs_save_modes(spark, gs):
    _check_save_modes(spark, gs)
    assert not any(n.startswith(rfs.TEMPORARY) for n in _s3_names(gs))
