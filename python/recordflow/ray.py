"""recordflow on Ray Data: a Datasource and a Datasink on recordflow's native reader, parser,
encoder and writer.

    import recordflow as rf
    ds = rf.ray.read("data/*.tfrecord")                     # -> ray.data.Dataset
    rf.ray.write(ds, "out/", mode="overwrite")              # or "s3://bucket/out/"

Reading: one read task per (file, record range) planned from the ``.idx`` files (an indexed,
uncompressed file is cut into as many ranges as the requested parallelism needs), each range
parsed into Arrow batches by the C++ Example parser. Writing: each write task writes its shard
under a temporary name with a ``.idx`` and a ``.meta.json`` sidecar; the driver promotes exactly
one shard per task once every task has succeeded, then writes ``_manifest.json`` and
``_SUCCESS``; a failed job removes everything it wrote. A retried task (Ray's max_retries) never
duplicates or loses a shard. See docs/spark.md ("Ray Data").
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
import uuid
from typing import Any, Iterable, Sequence

from recordflow import _arrow_io as aio
from recordflow import _core
from recordflow.errors import AlreadyExistsError

try:
    import ray
    from ray.data import Datasink, Datasource, ReadTask
    from ray.data.block import BlockAccessor, BlockMetadata
except ImportError as e:  # pragma: no cover - exercised only without ray
    raise ImportError("recordflow.ray needs Ray Data (pip install 'ray[data]')") from e

TEMPORARY = "_temporary"
MODES = ("errorifexists", "overwrite", "append", "ignore")
_BATCH = 4096


# ---------------------------------------------------------------------------------------------
# Files: local paths natively, s3:// through pyarrow.fs for listing, moves and small files (the
# record data itself is read and written by recordflow's native S3 client).


def _fs(path: str):
    """(pyarrow FileSystem, path inside it) for a local path or an s3:// URL."""
    import pyarrow.fs as pafs
    if path.startswith("s3://"):
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        kw: dict[str, Any] = {}
        if endpoint:
            scheme, _, host = endpoint.partition("://")
            kw.update(endpoint_override=host.rstrip("/") if host else scheme,
                      scheme=scheme if host else "https")
        if os.environ.get("AWS_REGION"):
            kw["region"] = os.environ["AWS_REGION"]
        return pafs.S3FileSystem(**kw), path[len("s3://"):].rstrip("/")
    if "://" in path:
        raise ValueError(f"recordflow.ray: '{path}': only local paths and s3:// URLs are supported")
    return pafs.LocalFileSystem(), os.path.abspath(path)


def _join(path: str, name: str) -> str:
    return path.rstrip("/") + "/" + name


def _url(base: str, inner: str) -> str:
    return "s3://" + inner if base.startswith("s3://") else inner


def _kind(fs, p: str):
    import pyarrow.fs as pafs
    return fs.get_file_info(p).type if p else pafs.FileType.Directory


def _children(fs, p: str) -> list:
    import pyarrow.fs as pafs
    return fs.get_file_info(pafs.FileSelector(p, allow_not_found=True))


def _read_text(path: str) -> str | None:
    import pyarrow.fs as pafs
    fs, p = _fs(path)
    if fs.get_file_info(p).type != pafs.FileType.File:
        return None
    with fs.open_input_stream(p) as f:
        return f.read().decode()


def _write_text(path: str, text: str) -> None:
    if path.startswith("s3://"):  # an S3 PUT is atomic
        fs, p = _fs(path)
        with fs.open_output_stream(p) as f:
            f.write(text.encode())
    else:
        aio._write_atomic(path, text)


def _list_files(paths: str | Sequence[str]) -> list[str]:
    """Record files named by a file, a folder (its data files: names starting with '_' or '.'
    and sidecars are left out), a glob, or a list of those; local or s3://."""
    import pyarrow.fs as pafs
    out: list[str] = []
    for path in [paths] if isinstance(paths, (str, os.PathLike)) else list(paths):
        path = os.fspath(path)
        fs, p = _fs(path)
        if any(ch in p for ch in "*?["):
            wild = min(p.find(c) for c in "*?[" if c in p)
            parent = p[:p.rfind("/", 0, wild)] if "/" in p[:wild] else ""
            infos = fs.get_file_info(pafs.FileSelector(parent, recursive="/" in p[wild:],
                                                       allow_not_found=True))
            found = sorted(i.path for i in infos if i.type == pafs.FileType.File
                           and fnmatch.fnmatchcase(i.path, p) and aio._is_data_name(i.base_name))
        else:
            kind = _kind(fs, p)
            if kind == pafs.FileType.File:
                found = [p]
            elif kind == pafs.FileType.Directory:
                found = sorted(i.path for i in _children(fs, p)
                               if i.type == pafs.FileType.File and aio._is_data_name(i.base_name))
            else:
                raise FileNotFoundError(f"recordflow.ray: no such file or folder: '{path}'")
        out.extend(_url(path, f) for f in found)
    if not out:
        raise FileNotFoundError(f"recordflow.ray: no record files in {paths!r}")
    return out


# ---------------------------------------------------------------------------------------------
# Reading


def _index_count(path: str) -> int | None:
    text = _read_text(path + ".idx")
    return None if text is None else sum(1 for line in text.splitlines() if line.strip())


class RecordflowDatasource(Datasource):
    """TFRecord files as a Ray Data source. Read tasks are (file, record range) pieces: an
    uncompressed file with an ``.idx`` is cut into ranges (with on_corruption="raise"), any
    other file is read whole by one task with the stream reader."""

    def __init__(self, paths, record_type: str = "Example", schema=None,
                 compression: str | None = None, on_corruption: str = "raise",
                 batch_size: int = _BATCH, sample: int = 1000):
        super().__init__()
        self.files = _list_files(paths)
        self.record_type = aio.record_type_name(record_type)
        self.compression = aio.compression_name(compression)
        if on_corruption not in ("raise", "skip"):
            raise ValueError(f'on_corruption must be "raise" or "skip", not {on_corruption!r}')
        self.on_corruption = on_corruption
        self.batch_size = int(batch_size)
        if schema is None:
            schema = aio.infer_arrow_schema(self.files, self.record_type, self.compression,
                                            sample, _read_text)
        aio.check_arrow_schema(schema, self.record_type)
        self.schema = schema
        self.counts = {}
        self.sizes = {}
        for f in self.files:
            ranged = aio._compression_of(f, self.compression) is None and on_corruption == "raise"
            self.counts[f] = _index_count(f) if ranged else None
            fs, p = _fs(f)
            self.sizes[f] = fs.get_file_info(p).size or 0

    def get_name(self) -> str:
        return "Recordflow"

    def estimate_inmemory_data_size(self) -> int | None:
        return sum(self.sizes.values())

    def plan(self, parallelism: int) -> list[tuple[str, int, int]]:
        """(file, first record, count; -1: the whole file) pieces, about `parallelism` of them
        when the files are indexed."""
        indexed = sum(c for c in self.counts.values() if c)
        per = max(1, -(-indexed // max(1, parallelism))) if indexed else 1
        pieces = []
        for f in self.files:
            n = self.counts[f]
            if n is None:
                pieces.append((f, 0, -1))
            elif n > 0:
                pieces.extend((f, s, min(per, n - s)) for s in range(0, n, per))
        return pieces

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context=None) -> list:
        tasks = []
        for path, start, count in self.plan(parallelism):
            whole = self.counts[path]
            size = self.sizes[path] if count < 0 or not whole else self.sizes[path] * count // whole
            meta = BlockMetadata(num_rows=None if count < 0 else count, size_bytes=size,
                                 input_files=[path], exec_stats=None)
            fn = _ReadPiece(path, start, count, self.schema, self.record_type, self.compression,
                            self.on_corruption, self.batch_size)
            tasks.append(ReadTask(fn, meta, schema=self.schema, per_task_row_limit=per_task_row_limit))
        return tasks


class _ReadPiece:
    """One read task's work (a picklable callable)."""

    def __init__(self, path, start, count, schema, record_type, compression, on_corruption, batch):
        self.args = (path, start, count, schema, record_type, compression, on_corruption, batch)

    def __call__(self) -> Iterable:
        path, start, count, schema, record_type, compression, on_corruption, batch = self.args
        decode = aio.RecordBatchDecoder(schema, record_type)
        import pyarrow as pa
        if count >= 0:
            reader = _core.IndexedRecordReader(path)
            end = min(len(reader), start + count)
            for s in range(start, end, batch):
                yield pa.Table.from_batches([decode(reader.read_range(s, min(batch, end - s)), path, s)])
            return
        with _core.RecordReader(path, aio._compression_of(path, compression), on_corruption) as reader:
            first = 0
            while True:
                records = reader.read_batch(batch)
                if not records:
                    break
                yield pa.Table.from_batches([decode(records, path, first)])
                first += len(records)
            if reader.skipped_records:
                # A counted skip: the task's stderr reaches the driver's log with Ray's defaults.
                print(f"recordflow: skipped {reader.skipped_records} corrupt record(s), "
                      f"{reader.skipped_bytes} bytes, in '{path}'", file=sys.stderr, flush=True)


def read(paths_or_glob, record_type: str = "Example", schema=None, compression: str | None = None,
         on_corruption: str = "raise", override_num_blocks: int | None = None,
         batch_size: int = _BATCH, **read_args: Any):
    """TFRecord files as a ``ray.data.Dataset``.

    `paths_or_glob`: a file, folder, glob or list of them, local or s3://. `record_type`:
    "Example", "SequenceExample" (feature lists are list<list<...>> columns) or "ByteArray"
    (one binary column "byteArray"). `schema`: a ``pyarrow.Schema`` (scalar columns read one
    value per record, null when absent; list columns read every value), else taken from the
    ``.meta.json`` sidecar recordflow's writers leave beside each shard, else inferred from the
    first 1000 records. `compression`: "GZIP", "ZLIB" or None (from the extension .gz / .zz).
    `on_corruption`: "raise" (DataLossError naming file, offset and record) or "skip" (counted
    in the task's log). `override_num_blocks`: the number of read tasks to aim for. Other
    keyword arguments go to ``ray.data.read_datasource`` (num_cpus, concurrency, ...).
    """
    source = RecordflowDatasource(paths_or_glob, record_type, schema, compression, on_corruption,
                                  batch_size)
    return ray.data.read_datasource(source, override_num_blocks=override_num_blocks, **read_args)


# ---------------------------------------------------------------------------------------------
# Writing


def _has_output(path: str) -> bool:
    import pyarrow.fs as pafs
    fs, p = _fs(path)
    if _kind(fs, p) != pafs.FileType.Directory:
        return False
    return any(not i.base_name.startswith(".") and i.base_name != TEMPORARY for i in _children(fs, p))


class RecordflowDatasink(Datasink):
    """A Ray Data sink writing TFRecord shards with exactly-once commit.

    A write task writes ``<dir>/_temporary/<job>/part-<task>-<job>-<attempt id><ext>`` with its
    ``.idx`` (uncompressed) and ``.meta.json``; on_write_complete (driver, after every task
    succeeded) keeps one result per task index (a retried or re-executed task reports under
    the same index), moves it to ``part-<task>-<job><ext>``, writes ``_manifest.json`` and
    ``_SUCCESS`` and removes the job folder with every losing attempt's files;
    on_write_failed removes the job folder and any shard of this job already promoted.
    """

    def __init__(self, path: str, record_type: str = "Example", compression: str | None = None,
                 mode: str = "errorifexists"):
        self.path = os.fspath(path).rstrip("/") if str(path).startswith("s3://") else os.path.abspath(path)
        self.record_type = aio.record_type_name(record_type)
        self.compression = aio.compression_name(compression)
        mode = mode.lower()
        mode = "errorifexists" if mode == "error" else mode
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        self.skip = False
        if _has_output(self.path):
            if mode == "errorifexists":
                raise AlreadyExistsError(f"recordflow: '{self.path}' already exists (mode "
                                         "errorifexists); use mode overwrite, append or ignore")
            self.skip = mode == "ignore"
        self.job = uuid.uuid4().hex[:16]
        self.job_dir = _join(self.path, f"{TEMPORARY}/{self.job}")
        if not self.path.startswith("s3://"):
            os.makedirs(self.job_dir, exist_ok=True)

    def get_name(self) -> str:
        return "Recordflow"

    def on_write_start(self, schema=None) -> None:
        if schema is not None and not self.skip:
            aio.check_arrow_schema(schema, self.record_type)  # fails before any task runs

    def _final_name(self, task: int) -> str:
        return f"part-{task:05d}-{self.job}{aio.EXTENSIONS[self.compression]}"

    def write(self, blocks: Iterable, ctx) -> dict | None:
        if self.skip:
            return None
        ext = aio.EXTENSIONS[self.compression]
        temp = _join(self.job_dir, f"part-{ctx.task_idx:05d}-{self.job}-{uuid.uuid4().hex[:8]}{ext}")
        indexed = self.compression is None
        writer = None
        schema = layout = None
        try:
            for block in blocks:
                table = BlockAccessor.for_block(block).to_arrow()
                if table.num_rows == 0:
                    continue
                if layout is None:
                    schema = table.schema
                    aio.check_arrow_schema(schema, self.record_type)
                    layout = None if self.record_type == "ByteArray" else [
                        (f.name, *aio.arrow_layout(f.type, f.name, self.record_type)) for f in schema]
                    writer = _core.RecordWriter(temp, self.compression, index=indexed)
                else:
                    table = table.select(schema.names)
                for batch in table.to_batches(max_chunksize=_BATCH):
                    for rec in aio.encode_batch(batch, layout, self.record_type):
                        writer.write(rec)
            if writer is None:
                return None  # no rows: no shard
            writer.close()
        except BaseException:
            if writer is not None and not writer.closed:
                writer.abort()
            raise
        records, nbytes = writer.records_written, writer.bytes_written
        spark_schema = aio.spark_json_from_arrow(schema) if layout is not None else None
        meta = {"recordType": self.record_type, "schema": spark_schema, "records": records,
                "bytes": nbytes, "compression": self.compression}
        if spark_schema is None:
            del meta["schema"]
        _write_text(temp + aio.META_SUFFIX, json.dumps(meta, sort_keys=True) + "\n")
        return {"task": ctx.task_idx, "temp": temp, "records": records, "bytes": nbytes,
                "indexed": indexed, "schema": spark_schema}

    def on_write_complete(self, write_result) -> None:
        import pyarrow.fs as pafs
        results = getattr(write_result, "write_returns", write_result)
        fs, root = _fs(self.path)
        if self.skip:
            self._remove_job()
            return
        winners: dict[int, dict] = {}
        for r in results:
            if r is not None:
                winners.setdefault(r["task"], r)  # one shard per task, whatever ran twice
        if self.mode == "overwrite":
            for i in _children(fs, root):
                if i.base_name == TEMPORARY:
                    continue
                if i.type == pafs.FileType.Directory:
                    fs.delete_dir(i.path)
                else:
                    fs.delete_file(i.path)
        manifest = {"shards": []}
        if self.mode == "append":
            text = _read_text(_join(self.path, aio.MANIFEST))
            if text:
                manifest = json.loads(text)
                manifest.setdefault("shards", [])
        schema = None
        for task in sorted(winners):
            r = winners[task]
            final = _join(self.path, self._final_name(task))
            _, src = _fs(r["temp"])
            _, dst = _fs(final)
            # Sidecars first, the shard last: a listed shard has its index and schema.
            if r["indexed"]:
                fs.move(src + ".idx", dst + ".idx")
            fs.move(src + aio.META_SUFFIX, dst + aio.META_SUFFIX)
            fs.move(src, dst)
            manifest["shards"].append({"file": self._final_name(task), "records": r["records"],
                                       "bytes": r["bytes"]})
            schema = schema or r["schema"]
        manifest["records"] = sum(s["records"] for s in manifest["shards"])
        manifest["bytes"] = sum(s["bytes"] for s in manifest["shards"])
        manifest["recordType"] = self.record_type
        if schema is not None:
            manifest["schema"] = schema
        _write_text(_join(self.path, aio.MANIFEST), json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        _write_text(_join(self.path, "_SUCCESS"), "")
        self._remove_job()

    def on_write_failed(self, error: Exception) -> None:
        import pyarrow.fs as pafs
        # Everything this job wrote: the job folder, and shards already promoted (their names
        # carry the job id) when the failure came during on_write_complete.
        fs, root = _fs(self.path)
        for i in _children(fs, root):
            if f"-{self.job}" in i.base_name and i.type == pafs.FileType.File:
                fs.delete_file(i.path)
        self._remove_job()

    def _remove_job(self) -> None:
        fs, job = _fs(self.job_dir)
        try:
            fs.delete_dir(job)
        except (FileNotFoundError, OSError):
            pass
        _, tmp = _fs(_join(self.path, TEMPORARY))
        try:
            if not _children(fs, tmp):
                fs.delete_dir(tmp)  # only when no other job uses it
        except (FileNotFoundError, OSError):
            pass


def write(ds, path: str, record_type: str = "Example", compression: str | None = None,
          mode: str = "errorifexists", ray_remote_args: dict | None = None,
          concurrency: int | None = None) -> None:
    """`ds` (a ``ray.data.Dataset``) saved as TFRecord shards in `path` (local or s3://).

    Columns map to features as in recordflow.spark: integers and booleans -> int64 lists,
    floats -> float lists, binary and string -> bytes lists; a scalar column is a one-value
    feature (a null leaves the feature out), a list column a list feature, a list of lists a
    SequenceExample feature list. "ByteArray" writes one binary column as raw records.
    `mode`: "errorifexists" (AlreadyExistsError when `path` holds data, before any task
    runs), "overwrite", "append" or "ignore" (nothing written when `path` holds data).
    `ray_remote_args` (e.g. {"max_retries": 3}) and `concurrency` go to the write tasks.
    """
    sink = RecordflowDatasink(path, record_type, compression, mode)
    if sink.skip:
        sink._remove_job()
        return
    ds.write_datasink(sink, ray_remote_args=ray_remote_args, concurrency=concurrency)
