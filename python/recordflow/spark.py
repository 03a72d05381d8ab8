"""recordflow on Apache Spark 4: the ``recordflow`` data source (read and write) and
distributed conversion, on Spark's Python Data Source API (pyspark >= 4.0).

    import recordflow.spark as rfs
    rfs.register(spark)
    df = spark.read.format("recordflow").option("recordType", "Example").load("data/*.tfrecord")
    df.write.format("recordflow").mode("overwrite").save("out/")
    rfs.write(df, "out/", mode="errorifexists")        # also "ignore" (see write())
    rfs.convert(spark, "images/", "dst/", shards=64, val_fraction=0.1, seed=0)

The native pieces do the work: records are read by the C++ reader (CRC checked, GIL released),
parsed by the C++ Example parser into NumPy buffers (bytes columns as Arrow binary
buffers) that become Arrow arrays without a copy, and written by the C++ writer from Arrow
column buffers (``_core.serialize_columns``, ``RecordWriter.write_buffers``). On s3:// the
commit protocol runs on open multipart uploads, on gs:// on whole objects under
``_temporary/<job>/`` promoted by copy (see ``_Writer``). See docs/spark.md for the
schema table and the commit protocol.

This module is over 600 lines: reader, writer, commit protocol, schema mapping and convert
share the Arrow/Example column mapping defined here; a package split along those lines is
planned.
"""

from __future__ import annotations

import glob as _glob
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from recordflow import _core
from recordflow._arrow_io import (  # noqa: F401 - shared with recordflow.ray
    MANIFEST,
    META_SUFFIX,
    RECORD_TYPES,
    RecordBatchDecoder,
    _column_buffers,
    _compression_of,
    _is_data_name,
    _leaf_buffers,
    _offsets,
    _write_atomic,
    check_nesting,
    record_type_name,
    sample_feature_kinds,
)
from recordflow.errors import AlreadyExistsError, SchemaError

try:  # pyspark is optional for the rest of recordflow
    from pyspark.sql import types as T
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        InputPartition,
        WriterCommitMessage,
    )
except ImportError as e:  # pragma: no cover - exercised only without pyspark
    raise ImportError("recordflow.spark needs pyspark >= 4.0 (pip install 'pyspark>=4.0' pyarrow)") from e

FORMAT = "recordflow"
TEMPORARY = "_temporary"
_DEFAULT_RECORDS_PER_PARTITION = 1 << 16
_DEFAULT_SAMPLE = 1000


# ---------------------------------------------------------------------------------------------
# Options and files


def _record_type(options: dict) -> str:
    return record_type_name(options.get("recordtype", options.get("recordType", "Example")),
                            option="recordType")


def _opt(options: dict, name: str, default: Any = None) -> Any:
    # Spark passes option keys case-insensitively (lower-cased in some versions).
    for k, v in options.items():
        if k.lower() == name.lower():
            return v
    return default


# Files and objects: local paths through os, s3:// / gs:// URLs through the native io layer
# (the same code the readers and writers use).


def _is_remote(path: str) -> bool:
    return _core.is_remote_path(path)


def _join(folder: str, name: str) -> str:
    return folder.rstrip("/") + "/" + name if _is_remote(folder) else os.path.join(folder, name)


def _isfile(path: str) -> bool:
    return _core.file_size(path) is not None if _is_remote(path) else os.path.isfile(path)


def _read_text(path: str) -> str | None:
    """A small file's text; None when it does not exist."""
    if _is_remote(path):
        if _core.file_size(path) is None:
            return None
        return _core.read_file(path).decode()
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return f.read()


def _remote_children(folder: str) -> list[str]:
    """The objects directly in `folder` (not in its sub-folders), sorted."""
    prefix = folder.rstrip("/") + "/"
    return [u for u in _core.list_prefix(prefix) if "/" not in u[len(prefix):]]


def _list_files(path: str) -> list[str]:
    """The record files a load path names: a file, a folder (its data files, as Parquet skips
    names starting with '_' or '.'), a glob, or several comma-separated of those; local paths
    or s3:// / gs:// URLs."""
    out: list[str] = []
    for p in [x for x in path.split(",") if x]:
        if _is_remote(p):
            if any(ch in p for ch in "*?["):
                out.extend(sorted(u for u in _core.expand_globs([p])
                                  if _is_data_name(u.rsplit("/", 1)[-1])))
            elif _isfile(p):
                out.append(p)
            else:
                found = [u for u in _remote_children(p) if _is_data_name(u.rsplit("/", 1)[-1])]
                if not found:
                    raise FileNotFoundError(f"recordflow: no such object or folder: '{p}'")
                out.extend(found)
        elif os.path.isdir(p):
            out.extend(sorted(os.path.join(p, n) for n in os.listdir(p)
                              if _is_data_name(n) and os.path.isfile(os.path.join(p, n))))
        elif any(ch in p for ch in "*?["):
            out.extend(sorted(f for f in _glob.glob(p)
                              if os.path.isfile(f) and _is_data_name(os.path.basename(f))))
        elif os.path.isfile(p):
            out.append(p)
        else:
            raise FileNotFoundError(f"recordflow: no such file or folder: '{p}'")
    if not out:
        raise FileNotFoundError(f"recordflow: no record files under '{path}'")
    return out


# ---------------------------------------------------------------------------------------------
# Schema: Spark types <-> Example features


_INT_TYPES = (T.LongType, T.IntegerType, T.ShortType, T.ByteType, T.BooleanType)
_FLOAT_TYPES = (T.FloatType, T.DoubleType)
_BYTES_TYPES = (T.BinaryType, T.StringType)


def _kind(dt: T.DataType, key: str) -> str:
    if isinstance(dt, _INT_TYPES):
        return "int64"
    if isinstance(dt, _FLOAT_TYPES):
        return "float32"
    if isinstance(dt, _BYTES_TYPES):
        return "bytes"
    raise SchemaError(f"column '{key}': Spark type {dt.simpleString()} has no Example feature "
                      "type (see docs/spark.md for the mapping)")


def _layout(dt: T.DataType, key: str, record_type: str) -> tuple[str, int]:
    """(feature kind, depth): depth 0 scalar, 1 list, 2 feature list (SequenceExample)."""
    depth = 0
    while isinstance(dt, T.ArrayType):
        dt = dt.elementType
        depth += 1
    check_nesting(key, depth, record_type, lists="arrays", list_of_lists="array of arrays",
                  option="recordType")
    return _kind(dt, key), depth


def _check_schema(schema: T.StructType, record_type: str) -> None:
    if record_type == "ByteArray":
        if len(schema.fields) != 1 or not isinstance(schema.fields[0].dataType, T.BinaryType):
            raise SchemaError("recordType ByteArray has one BinaryType column (default name "
                              "'byteArray')")
        return
    for f in schema.fields:
        _layout(f.dataType, f.name, record_type)


def _type_for(kind: str) -> T.DataType:
    return {"int64": T.LongType(), "float32": T.FloatType(), "bytes": T.BinaryType()}[kind]


def infer_schema(files: Sequence[str], record_type: str, compression: str | None = None,
                 sample: int = _DEFAULT_SAMPLE) -> T.StructType:
    """The schema of `files`: from the sidecar recordflow wrote beside the first file when there
    is one, else from the first `sample` records (in file order, stopping there: no full pass).
    A feature seen with exactly one value in every sampled record is a scalar, else an array;
    bytes are BinaryType (exact bytes; cast to string in Spark when they are text)."""
    if record_type == "ByteArray":
        return T.StructType([T.StructField("byteArray", T.BinaryType(), True)])
    text = _read_text(files[0] + META_SUFFIX)
    if text is not None:
        m = json.loads(text)
        if m.get("recordType") == record_type and "schema" in m:
            # A record can always lack a feature, whatever the writer's DataFrame promised.
            return _nullable(T.StructType.fromJson(m["schema"]))
    # Records missing a key in some rows still give it a column: it reads as null.
    kinds, single, seq_kinds, seen = sample_feature_kinds(files, record_type, compression, sample)
    fields = []
    for key in sorted(kinds):
        t = _type_for(kinds[key])
        fields.append(T.StructField(key, t if single[key] else T.ArrayType(t, True), True))
    for key in sorted(seq_kinds):
        if key in kinds:
            raise SchemaError(f"key '{key}' is both a context feature and a feature list")
        fields.append(T.StructField(key, T.ArrayType(T.ArrayType(_type_for(seq_kinds[key]), True), True), True))
    if not fields:
        raise SchemaError(f"cannot infer a schema: no features in the first {seen} records of "
                          f"'{files[0]}'; give one with .schema(...)")
    return T.StructType(fields)


# ---------------------------------------------------------------------------------------------
# Reading


@dataclass
class RecordRange(InputPartition):
    """A partition: records [start, start + count) of `path` (count -1: the whole file)."""
    path: str
    start: int = 0
    count: int = -1

    def __post_init__(self):
        InputPartition.__init__(self, (self.path, self.start, self.count))


def _plan_partitions(files: Sequence[str], compression: str | None, per_partition: int,
                     on_corruption: str) -> list[RecordRange]:
    parts = []
    for path in files:
        idx = path + ".idx"
        # Ranges need random access (uncompressed, with an index); "skip" needs the stream
        # reader's resynchronisation, so those read whole files.
        text = (_read_text(idx) if _compression_of(path, compression) is None
                and on_corruption == "raise" else None)
        if text is not None:
            n = sum(1 for line in text.splitlines() if line.strip())
            if n > per_partition:
                parts.extend(RecordRange(path, s, per_partition) for s in range(0, n, per_partition))
                continue
        parts.append(RecordRange(path))
    return parts


class _Reader(DataSourceReader):
    def __init__(self, options: dict, schema: T.StructType, files: list[str]):
        self.options = options
        self.schema = schema
        self.files = files
        self.record_type = _record_type(options)
        self.compression = _opt(options, "compression")
        self.on_corruption = _opt(options, "on_corruption", _opt(options, "onCorruption", "raise"))
        if self.on_corruption not in ("raise", "skip"):
            raise ValueError(f'on_corruption must be "raise" or "skip", not {self.on_corruption!r}')
        self.batch_size = int(_opt(options, "batchSize", 4096))
        self.per_partition = int(_opt(options, "recordsPerPartition", _DEFAULT_RECORDS_PER_PARTITION))
        _check_schema(schema, self.record_type)

    def partitions(self) -> list[RecordRange]:
        return _plan_partitions(self.files, self.compression, self.per_partition, self.on_corruption)

    def read(self, partition: RecordRange) -> Iterator[Any]:
        arrow_schema = _arrow_schema(self.schema)
        converter = _BatchConverter(self.schema, self.record_type, arrow_schema)
        path = partition.path
        # ByteArray: the records arrive as an Arrow binary column's buffers, built natively.
        raw = self.record_type == "ByteArray"
        if partition.count >= 0:
            reader = _core.IndexedRecordReader(path)
            read_range = reader.read_range_arrow if raw else reader.read_range
            end = min(len(reader), partition.start + partition.count)
            for s in range(partition.start, end, self.batch_size):
                records = read_range(s, min(self.batch_size, end - s))
                yield converter(records, path, s)
            return
        with _core.RecordReader(path, _compression_of(path, self.compression),
                                self.on_corruption) as reader:
            read_batch = reader.read_batch_arrow if raw else reader.read_batch
            first = 0
            while True:
                records = read_batch(self.batch_size)
                if records is None or (not raw and not records):
                    break
                yield converter(records, path, first)
                first += len(records[0]) - 1 if raw else len(records)
            if reader.skipped_records:
                _report_skips(path, reader.skipped_records, reader.skipped_bytes)


def _report_skips(path: str, records: int, nbytes: int) -> None:
    """Skipped corrupt records are counted in the task's log (stderr goes to the executor log)
    and, when the caller set one up, in the environment variable's folder (tests)."""
    import sys
    print(f"recordflow: skipped {records} corrupt record(s), {nbytes} bytes, in '{path}'",
          file=sys.stderr)
    out = os.environ.get("RECORDFLOW_SPARK_SKIP_LOG")
    if out:
        with open(os.path.join(out, f"skip-{uuid.uuid4().hex}.json"), "w") as f:
            json.dump({"path": path, "records": records, "bytes": nbytes}, f)


def _arrow_type(dt: T.DataType):
    import pyarrow as pa
    simple = {T.LongType: pa.int64(), T.IntegerType: pa.int32(), T.ShortType: pa.int16(),
              T.ByteType: pa.int8(), T.BooleanType: pa.bool_(), T.FloatType: pa.float32(),
              T.DoubleType: pa.float64(), T.BinaryType: pa.binary(), T.StringType: pa.string()}
    for cls, at in simple.items():
        if isinstance(dt, cls):
            return at
    if isinstance(dt, T.ArrayType):
        return pa.list_(pa.field("element", _arrow_type(dt.elementType), dt.containsNull))
    raise SchemaError(f"unsupported Spark type {dt.simpleString()}")


def _arrow_schema(schema: T.StructType):
    """Spark checks the batches' Arrow schema against the read schema, nullability included."""
    import pyarrow as pa
    return pa.schema([pa.field(f.name, _arrow_type(f.dataType), f.nullable) for f in schema.fields])


def _nullable(dt):
    if isinstance(dt, T.StructType):
        return T.StructType([T.StructField(f.name, _nullable(f.dataType), True, f.metadata)
                             for f in dt.fields])
    if isinstance(dt, T.ArrayType):
        return T.ArrayType(_nullable(dt.elementType), True)
    return dt


def _leaf(dt: T.DataType) -> T.DataType:
    while isinstance(dt, T.ArrayType):
        dt = dt.elementType
    return dt


class _BatchConverter(RecordBatchDecoder):
    """Serialized records -> one Arrow RecordBatch (the shared native decoder, _arrow_io)."""

    def __init__(self, schema: T.StructType, record_type: str, arrow_schema):
        self.schema = schema
        super().__init__(arrow_schema, record_type)


# ---------------------------------------------------------------------------------------------
# Writing


@dataclass
class ShardCommit(WriterCommitMessage):
    """What a successful task attempt reports to the driver."""
    partition: int
    attempt: int
    temp_file: str
    final_name: str
    records: int
    bytes: int
    indexed: bool
    # Object stores: the attempt's open multipart uploads (records file, then index), as
    # RecordWriter.pending_uploads gives them; the driver completes exactly the winners'.
    uploads: list | None = None


def _job_dir(path: str, job: str) -> str:
    return os.path.join(path, TEMPORARY, job)


def _has_output(path: str) -> bool:
    if _is_remote(path):
        return any(not n.startswith(".") and n != TEMPORARY
                   for n in (u[len(path.rstrip("/")) + 1:].split("/", 1)[0]
                             for u in _core.list_prefix(path.rstrip("/") + "/")))
    return os.path.isdir(path) and any(not n.startswith(".") and n != TEMPORARY for n in os.listdir(path))


class _Writer(DataSourceArrowWriter):
    def __init__(self, options: dict, schema: T.StructType, overwrite: bool):
        self.path = _opt(options, "path")
        if not self.path:
            raise ValueError("recordflow: save(path) needs a destination folder")
        self.record_type = _record_type(options)
        comp = _opt(options, "compression")
        self.compression = None if not comp or comp.upper() == "NONE" else comp.upper()
        if self.compression not in (None, "GZIP", "ZLIB"):
            raise ValueError(f'compression must be "GZIP", "ZLIB" or none, not {comp!r}')
        self.schema = schema
        self.overwrite = overwrite
        self.save_mode = (_opt(options, "saveMode") or ("overwrite" if overwrite else "append")).lower()
        if self.save_mode not in ("errorifexists", "error", "ignore", "append", "overwrite"):
            raise ValueError(f"saveMode {self.save_mode!r}: expected errorifexists, ignore, append "
                             "or overwrite")
        self.fail_first_attempt = _opt(options, "_testFailFirstAttempt", "") == "true"
        _check_schema(schema, self.record_type)
        self.skip = False
        if self.save_mode in ("errorifexists", "error") and _has_output(self.path):
            raise AlreadyExistsError(f"recordflow: '{self.path}' already exists (mode "
                                     "errorifexists); use mode overwrite, append or ignore")
        if self.save_mode == "ignore" and _has_output(self.path):
            self.skip = True
        # The job id names every attempt's file; the folder is made here, on the driver, and
        # tasks never create it: a task still running after commit/abort removed it fails
        # instead of leaving a file behind.
        self.job = uuid.uuid4().hex[:16]
        # Object stores have no folders and no rename: attempts leave open multipart uploads
        # under the final keys instead (see commit()).
        self.remote = _is_remote(self.path)
        # gs:// (the JSON API has no multipart upload to leave open): attempts write whole
        # objects under DST/_temporary/<job>/ and the driver promotes the winners by copy.
        self.promote = self.remote and self.path.startswith("gs://")
        if self.remote:
            self.path = self.path.rstrip("/")
        else:
            os.makedirs(_job_dir(self.path, self.job), exist_ok=True)

    def _names(self, partition: int, attempt: int) -> tuple[str, str]:
        ext = {None: ".tfrecord", "GZIP": ".tfrecord.gz", "ZLIB": ".tfrecord.zz"}[self.compression]
        final = f"part-{partition:05d}-{self.job}{ext}"
        temp = os.path.join(_job_dir(self.path, self.job), f"part-{partition:05d}-{self.job}-attempt-{attempt}{ext}")
        return temp, final

    def write(self, iterator) -> ShardCommit:
        from pyspark import TaskContext
        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx else 0
        attempt = ctx.attemptNumber() if ctx else 0
        return self.write_attempt(iterator, partition, attempt)

    def write_attempt(self, iterator, partition: int, attempt: int) -> ShardCommit:
        """One task attempt's shard (write() with the task's ids; tests drive concurrent
        attempts of one partition through it, as speculative execution runs them)."""
        temp, final = self._names(partition, attempt)
        if self.skip:
            for _ in iterator:
                pass
            return ShardCommit(partition, attempt, "", "", 0, 0, False)
        if self.remote and not self.promote:
            return self._write_remote_attempt(iterator, partition, attempt, final)
        indexed = self.compression is None
        w = self._write_shard(iterator, temp, attempt, indexed)
        records = w.records_written
        nbytes = _size(temp)
        meta = {"recordType": self.record_type, "schema": self.schema.jsonValue(),
                "records": records, "bytes": nbytes, "compression": self.compression}
        _write_text_any(temp + META_SUFFIX, json.dumps(meta, sort_keys=True) + "\n")
        return ShardCommit(partition, attempt, temp, final, records, nbytes, indexed)

    def _write_shard(self, iterator, target: str, attempt: int, indexed: bool, **writer_kw):
        """Every batch of ``iterator`` encoded into one record file at ``target``; returns the
        closed writer (records_written, pending_uploads)."""
        encoder = _BatchEncoder(self.schema, self.record_type)
        with _core.RecordWriter(target, self.compression, index=indexed, **writer_kw) as w:
            for batch in iterator:
                w.write_buffers(*encoder(batch))
            if self.fail_first_attempt and attempt == 0:
                # Test hook: the attempt dies after writing (or uploading every part of) its
                # whole shard, like a lost speculative copy or an executor lost after its write.
                w.close()
                raise RuntimeError("recordflow test: first attempt fails on purpose")
        return w

    def _write_remote_attempt(self, iterator, partition: int, attempt: int, final: str) -> ShardCommit:
        """The attempt's shard (and index) as open multipart uploads under the final keys:
        nothing is visible until the driver completes them; concurrent attempts of one
        partition each have their own upload of the same key."""
        indexed = self.compression is None
        url = _join(self.path, final)
        # With defer_completion the failing test attempt leaves its uploads open: the driver
        # must find and abort them.
        w = self._write_shard(iterator, url, attempt, indexed, defer_completion=True)
        uploads = w.pending_uploads
        return ShardCommit(partition, attempt, url, final, w.records_written, uploads[0]["size"],
                           indexed, uploads)

    def _job_uploads(self) -> list[tuple[str, str]]:
        """Open uploads of this job's keys (every attempt's, winners' included until completed)."""
        marker = f"-{self.job}"
        return [(u, i) for u, i in _core.list_uploads(self.path + "/part-")
                if marker in u.rsplit("/", 1)[-1]]

    def _commit_remote(self, messages: list[ShardCommit | None]) -> None:
        winners = sorted((m for m in messages if m is not None and m.uploads),
                         key=lambda m: m.partition)
        if self.skip:
            self._abort_remote()
            return
        if self.overwrite:
            # Nothing of this job is visible yet (its uploads are open): every object is old.
            for u in _core.list_prefix(self.path + "/"):
                _core.delete_path(u)
        text = None if self.overwrite else _read_text(_join(self.path, MANIFEST))
        manifest = json.loads(text) if text else {}
        manifest.setdefault("shards", [])
        for m in winners:
            for u in m.uploads:  # the records file first: an index never outlives its shard
                _core.complete_upload(u["url"], u["upload_id"], u["etags"])
            meta = {"recordType": self.record_type, "schema": self.schema.jsonValue(),
                    "records": m.records, "bytes": m.bytes, "compression": self.compression}
            _core.write_file(m.temp_file + META_SUFFIX, (json.dumps(meta, sort_keys=True) + "\n").encode())
            manifest["shards"].append({"file": m.final_name, "records": m.records, "bytes": m.bytes})
        self._finish_manifest(manifest, lambda name, text: _core.write_file(_join(self.path, name), text.encode()))
        self._abort_remote()  # losers, failed attempts: every upload of the job still open

    def _abort_remote(self) -> None:
        for url, upload_id in self._job_uploads():
            _core.abort_upload(url, upload_id)

    def _finish_manifest(self, manifest: dict, write_text) -> None:
        manifest["records"] = sum(s["records"] for s in manifest["shards"])
        manifest["bytes"] = sum(s["bytes"] for s in manifest["shards"])
        manifest["recordType"] = self.record_type
        manifest["schema"] = self.schema.jsonValue()
        write_text(MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        write_text("_SUCCESS", "")

    def _job_objects(self) -> list[str]:
        return _core.list_prefix(_job_dir(self.path, self.job) + "/")

    def _commit_promote(self, messages: list[ShardCommit | None]) -> None:
        """gs://: the winners' objects (written whole under DST/_temporary/<job>/) are copied
        to their final keys; then every object of the job folder (losers, failed attempts)
        is deleted."""
        if not self.skip:
            temporary = self.path + "/" + TEMPORARY + "/"
            if self.overwrite:
                for u in _core.list_prefix(self.path + "/"):
                    if not u.startswith(temporary):
                        _core.delete_path(u)
            text = None if self.overwrite else _read_text(_join(self.path, MANIFEST))
            manifest = json.loads(text) if text else {}
            manifest.setdefault("shards", [])
            winners = sorted((m for m in messages if m is not None and m.temp_file),
                             key=lambda m: m.partition)
            for m in winners:
                dst = _join(self.path, m.final_name)
                # The shard first: an index or sidecar never exists without its shard.
                for suffix in ("", ".idx", META_SUFFIX) if m.indexed else ("", META_SUFFIX):
                    _core.copy_file(m.temp_file + suffix, dst + suffix)
                manifest["shards"].append({"file": m.final_name, "records": m.records,
                                           "bytes": m.bytes})
            # _SUCCESS names the job: the GCS emulator drops the connection on an empty upload.
            self._finish_manifest(manifest, lambda name, text: _core.write_file(
                _join(self.path, name), (text or json.dumps({"job": self.job}) + "\n").encode()))
        for u in self._job_objects():
            _core.delete_path(u)

    def commit(self, messages: list[ShardCommit | None]) -> None:
        if self.promote:
            self._commit_promote(messages)
            return
        if self.remote:
            self._commit_remote(messages)
            return
        job_dir = _job_dir(self.path, self.job)
        if self.skip:
            _remove_job(self.path, job_dir)
            return
        if self.overwrite:
            for name in os.listdir(self.path):
                if name in (TEMPORARY,):
                    continue
                p = os.path.join(self.path, name)
                shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
        manifest = _read_manifest(self.path) if not self.overwrite else {"shards": []}
        # Exactly the winners: one message per partition (Spark's commit coordinator); other
        # attempts' files stay in the job folder and go with it.
        winners = sorted((m for m in messages if m is not None and m.temp_file), key=lambda m: m.partition)
        for m in winners:
            dst = os.path.join(self.path, m.final_name)
            os.replace(m.temp_file, dst)
            if m.indexed:
                os.replace(m.temp_file + ".idx", dst + ".idx")
            os.replace(m.temp_file + META_SUFFIX, dst + META_SUFFIX)
            manifest["shards"].append({"file": m.final_name, "records": m.records, "bytes": m.bytes})
        manifest["records"] = sum(s["records"] for s in manifest["shards"])
        manifest["bytes"] = sum(s["bytes"] for s in manifest["shards"])
        manifest["recordType"] = self.record_type
        manifest["schema"] = self.schema.jsonValue()
        _write_atomic(os.path.join(self.path, MANIFEST), json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        _write_atomic(os.path.join(self.path, "_SUCCESS"), "")
        _remove_job(self.path, job_dir)

    def abort(self, messages) -> None:
        if self.promote:
            for u in self._job_objects():
                _core.delete_path(u)
            return
        if self.remote:
            self._abort_remote()
            return
        _remove_job(self.path, _job_dir(self.path, self.job))


def _read_manifest(path: str) -> dict:
    p = os.path.join(path, MANIFEST)
    if os.path.isfile(p):
        with open(p) as f:
            m = json.load(f)
        m.setdefault("shards", [])
        return m
    return {"shards": []}


def _remove_job(path: str, job_dir: str) -> None:
    shutil.rmtree(job_dir, ignore_errors=True)
    try:
        os.rmdir(os.path.join(path, TEMPORARY))  # only when no other job uses it
    except OSError:
        pass


class _BatchEncoder:
    """Arrow RecordBatch -> serialized records: column buffers go to the C++ encoder
    (``_core.serialize_columns``), which builds each Example without the GIL."""

    def __init__(self, schema: T.StructType, record_type: str):
        self.schema = schema
        self.record_type = record_type
        self.layout = None if record_type == "ByteArray" else [
            (f.name, *_layout(f.dataType, f.name, record_type)) for f in schema.fields]

    def __call__(self, batch) -> tuple:
        """(offsets int64[n + 1], data uint8): record i is data[offsets[i]:offsets[i + 1]],
        for RecordWriter.write_buffers (no Python object per record)."""
        if self.record_type == "ByteArray":
            col = batch.column(0)
            if col.null_count:
                raise SchemaError("recordType ByteArray: a null record cannot be written")
            return _leaf_buffers("byteArray", "bytes", col)  # the column's own buffers
        n = batch.num_rows
        cols = []
        for (key, kind, depth), arr in zip(self.layout, batch.columns):
            cols.append(_column_buffers(key, kind, depth, arr, n))
        return _core.serialize_columns(n, cols, self.record_type == "SequenceExample", as_buffers=True)


# ---------------------------------------------------------------------------------------------
# The data source


class RecordflowDataSource(DataSource):
    """``spark.read.format("recordflow")`` / ``df.write.format("recordflow")``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _files(self) -> list[str]:
        path = _opt(self.options, "path") or _opt(self.options, "paths")
        if not path:
            raise ValueError("recordflow: load(path) needs a file, folder or glob")
        if path.startswith("["):  # load([a, b]) passes a JSON list
            path = ",".join(json.loads(path))
        return _list_files(path)

    def schema(self) -> T.StructType:
        files = self._files()
        return infer_schema(files, _record_type(self.options), _opt(self.options, "compression"),
                            int(_opt(self.options, "samplingRecords", _DEFAULT_SAMPLE)))

    def reader(self, schema: T.StructType) -> _Reader:
        return _Reader(dict(self.options), schema, self._files())

    def writer(self, schema: T.StructType, overwrite: bool) -> _Writer:
        return _Writer(dict(self.options), schema, overwrite)


def register(spark) -> None:
    """Registers the ``recordflow`` format with `spark` (a SparkSession)."""
    spark.dataSource.register(RecordflowDataSource)


def write(df, path: str, mode: str = "errorifexists", **options: Any) -> None:
    """``df`` saved as recordflow shards in `path` with Parquet's four save modes.

    Spark 4's Python data sources accept only append and overwrite in ``df.write.mode(...)``;
    this helper gives errorifexists (the default: AlreadyExistsError when `path` holds data,
    raised on the driver before any task runs) and ignore (nothing written when `path` holds
    data) through the data source's ``saveMode`` option. Options as for ``df.write``
    (``recordType``, ``compression``).
    """
    mode = mode.lower()
    if mode == "error":
        mode = "errorifexists"
    if mode not in ("errorifexists", "ignore", "append", "overwrite"):
        raise ValueError(f"mode must be errorifexists, ignore, append or overwrite, not {mode!r}")
    if mode == "errorifexists" and _has_output(path):
        raise AlreadyExistsError(f"recordflow: '{path}' already exists (mode errorifexists); use "
                                 "mode overwrite, append or ignore")
    if mode == "ignore" and _has_output(path):
        return  # as Parquet's ignore: no job runs
    w = df.write.format(FORMAT).mode("overwrite" if mode == "overwrite" else "append")
    w = w.option("saveMode", mode)
    for k, v in options.items():
        w = w.option(k, v)
    w.save(path)


# ---------------------------------------------------------------------------------------------
# Distributed conversion


def convert(spark, src: str, dst: str, *, shards: int, val_fraction: float = 0.0, seed: int = 0,
            val_shards: int | None = None, shuffle: bool = True, compression: str | None = None,
            index: bool = True, label_offset: int = 0, non_jpeg: str = "transcode",
            resize_shorter: int = 0, quality: int = 95, force_rgb: bool = False,
            exif_orientation: bool = False, verify: str = "structure", max_pixels: int = 1 << 28,
            image_column: str = "", label_column: str = "", label_separator: str = "",
            strict: bool = False, resume: bool = False, overwrite: bool = False,
            threads_per_task: int = 1) -> dict:
    """``recordflow convert`` on a Spark cluster: one task per output shard.

    The plan (listing, labels from sorted class names, stratified split, shuffle, shard
    assignment) is recordflow's own and depends only on the input and the options, so each
    task makes the same plan and writes its shard with the native converter; the shards,
    ``.idx`` files and ``labels.txt`` are byte-identical to a one-machine ``recordflow
    convert`` with the same options, whatever the number of executors. `src` and `dst` must be
    paths every executor sees (a shared filesystem). A task attempt writes into its own folder
    under ``dst/_temporary/<job>``; a finished shard is renamed to its final name (two attempts
    of one shard write the same bytes, so a retry or a speculative copy cannot duplicate or
    change it) with its state file, which ``resume=True`` uses to skip committed shards. The
    driver then writes ``summary.json`` (skipped inputs listed per shard) and ``_SUCCESS``.
    Returns the summary dict.
    """
    if shards is None or shards < 1:
        raise ValueError("rfs.convert needs shards >= 1 (one task per shard)")
    if resume and overwrite:
        raise ValueError("resume and overwrite exclude each other")
    src = os.path.abspath(src)
    remote = _is_remote(dst)
    dst = dst.rstrip("/") if remote else os.path.abspath(dst)
    opts = dict(val_fraction=val_fraction, seed=seed, shards=shards, shuffle=shuffle, index=index,
                label_offset=label_offset, non_jpeg=non_jpeg, resize_shorter=resize_shorter,
                quality=quality, force_rgb=force_rgb, exif_orientation=exif_orientation,
                verify=verify, max_pixels=max_pixels, image_column=image_column,
                label_column=label_column, label_separator=label_separator, strict=strict,
                num_threads=threads_per_task, compression=compression, sync=True)
    if val_shards is not None:
        opts["val_shards"] = val_shards
    state_dir = _join(dst, ".recordflow-convert")
    if remote:
        converted = _isfile(_join(state_dir, "plan.json")) or _isfile(_join(dst, "summary.json"))
    else:
        converted = os.path.isdir(dst) and (os.path.isdir(state_dir) or
                                            os.path.exists(os.path.join(dst, "summary.json")))
    if converted:
        if overwrite and remote:
            for u in _core.list_prefix(dst + "/"):
                _core.delete_path(u)
        elif overwrite:
            for name in os.listdir(dst):
                p = os.path.join(dst, name)
                shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
        elif not resume:
            raise AlreadyExistsError(f"'{dst}' already holds converted shards; use resume=True to "
                                     "finish it or overwrite=True to replace it")
    start = time.monotonic()
    job = uuid.uuid4().hex[:16]
    if remote:
        # An object store has no rename: the plan (and each task's shard) is made in a local
        # scratch folder and uploaded; a shard's object appears whole or not at all, and two
        # attempts of one shard upload the same bytes.
        import tempfile
        job_dir = tempfile.mkdtemp(prefix=f"rfs-convert-{job}-")
    else:
        job_dir = _job_dir(dst, job)
        os.makedirs(job_dir)
    try:
        # The plan: the native converter with no shard selected lists SRC, writes labels.txt
        # and names every shard (cheap: no image is read).
        plan_dir = os.path.join(job_dir, "plan")
        plan = json.loads(_core._convert(src, plan_dir, dict(opts, only_shards=[-1], sync=False), None))
        shard_files = [s["file"] for split in plan["splits"].values() for s in split["shards"]]
        if not remote:
            os.makedirs(state_dir, exist_ok=True)
        _copy_plan_state(plan_dir, state_dir, resume)
        todo = [i for i, f in enumerate(shard_files)
                if not _shard_committed(dst, state_dir, f, index and not compression)]

        def run(it):
            from pyspark import TaskContext
            ctx = TaskContext.get()
            attempt = ctx.attemptNumber() if ctx else 0
            for i in it:
                if remote:
                    yield _convert_shard_to_object_store(src, dst, state_dir, opts, i,
                                                         shard_files[i], attempt, job)
                    continue
                out = os.path.join(job_dir, f"shard-{i}-attempt-{attempt}")
                os.mkdir(out)  # fails once the driver removed the job folder
                _core._convert(src, out, dict(opts, only_shards=[i]), None)
                f = shard_files[i]
                for suffix in (".idx", ""):  # the shard last: present means complete
                    if os.path.exists(os.path.join(out, f + suffix)):
                        os.replace(os.path.join(out, f + suffix), os.path.join(dst, f + suffix))
                os.replace(os.path.join(out, ".recordflow-convert", f + ".json"),
                           os.path.join(state_dir, f + ".json"))
                yield i

        if todo:
            spark.sparkContext.parallelize(todo, len(todo)).mapPartitions(run).collect()
        labels = os.path.join(plan_dir, "labels.txt")
        if os.path.exists(labels):
            if remote:
                _core.copy_file(labels, _join(dst, "labels.txt"))
            else:
                os.replace(labels, os.path.join(dst, "labels.txt"))
        summary = _merge_summary(plan, dst, state_dir, set(todo), time.monotonic() - start)
        _write_text_any(_join(dst, "summary.json"), json.dumps(summary, indent=1) + "\n")
        _write_text_any(_join(dst, "_SUCCESS"), "")
        return summary
    finally:
        if remote:
            shutil.rmtree(job_dir, ignore_errors=True)
        else:
            _remove_job(dst, job_dir)


def _write_text_any(path: str, text: str) -> None:
    if _is_remote(path):
        _core.write_file(path, text.encode())
    else:
        _write_atomic(path, text)


def _convert_shard_to_object_store(src: str, dst: str, state_dir: str, opts: dict, i: int,
                                   name: str, attempt: int, job: str) -> int:
    """Task side of rfs.convert to s3:// / gs://: shard `i` converted into local scratch space,
    then uploaded (index first, the shard, then its state file: a state file means a whole
    shard, which resume relies on)."""
    import tempfile
    out = tempfile.mkdtemp(prefix=f"rfs-convert-{job}-{i}-{attempt}-")
    try:
        _core._convert(src, out, dict(opts, only_shards=[i]), None)
        for suffix in (".idx", ""):
            if os.path.exists(os.path.join(out, name + suffix)):
                _core.copy_file(os.path.join(out, name + suffix), _join(dst, name + suffix))
        _core.copy_file(os.path.join(out, ".recordflow-convert", name + ".json"),
                        _join(state_dir, name + ".json"))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return i


def _copy_plan_state(plan_dir: str, state_dir: str, resume: bool) -> None:
    src = os.path.join(plan_dir, ".recordflow-convert", "plan.json")
    dst = _join(state_dir, "plan.json")
    with open(src) as f:
        new = json.load(f)
    text = _read_text(dst)
    if text is not None:
        old = json.loads(text)
        if old.get("plan_hash") != new.get("plan_hash"):
            from recordflow.errors import FailedPreconditionError
            raise FailedPreconditionError(
                f"cannot resume in '{os.path.dirname(state_dir)}': it was started with different input "
                f"or options (plan {old.get('plan_hash')}, now {new.get('plan_hash')})")
    if _is_remote(dst):
        _core.copy_file(src, dst)
    else:
        shutil.copyfile(src, dst)


def _size(path: str) -> int | None:
    if _is_remote(path):
        return _core.file_size(path)
    return os.path.getsize(path) if os.path.isfile(path) else None


def _shard_committed(dst: str, state_dir: str, f: str, indexed: bool) -> bool:
    text = _read_text(_join(state_dir, f + ".json"))
    if text is None:
        return False
    s = json.loads(text)
    if _size(_join(dst, f)) != s.get("bytes"):
        return False
    return not indexed or _isfile(_join(dst, f + ".idx"))


def _merge_summary(plan: dict, dst: str, state_dir: str, ran: set, seconds: float) -> dict:
    """recordflow convert's summary.json, from the plan run and each shard's state file."""
    summary = dict(plan)
    summary["destination"] = dst
    classes = plan.get("classes", [])
    skipped = list(plan.get("skipped", []))
    totals = dict(records=0, output_bytes=0, input_bytes=0, transcoded=0, resumed_shards=0,
                  records_this_run=0)
    i = 0
    for split in summary["splits"].values():
        split["records"] = split["bytes"] = 0
        per_class = [0] * len(classes)
        for shard in split["shards"]:
            s = json.loads(_read_text(_join(state_dir, shard["file"] + ".json")))
            resumed = i not in ran
            shard.update(records=s["records"], bytes=s["bytes"], resumed=resumed)
            split["records"] += s["records"]
            split["bytes"] += s["bytes"]
            for c, v in enumerate(s.get("per_class", [])[:len(per_class)]):
                per_class[c] += v
            totals["records"] += s["records"]
            totals["output_bytes"] += s["bytes"]
            totals["input_bytes"] += s.get("input_bytes", 0)
            totals["transcoded"] += s.get("transcoded", 0)
            totals["resumed_shards"] += resumed
            totals["records_this_run"] += 0 if resumed else s["records"]
            skipped.extend(s.get("skipped", []))
            i += 1
        if "per_class" in split:
            split["per_class"] = {c: per_class[k] for k, c in enumerate(classes)}
    summary.update(totals)
    summary.update(skipped=skipped, skipped_count=len(skipped), seconds=round(seconds, 6),
                   images_per_second=round(totals["records_this_run"] / seconds, 4) if seconds > 0 else 0)
    return summary
