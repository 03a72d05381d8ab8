"""Arrow <-> TFRecord pieces shared by the Spark data source (recordflow.spark) and the Ray
Data source and sink (recordflow.ray): file naming, the Arrow column mapping of Example /
SequenceExample features, and the native decode (records -> Arrow batch) and encode (Arrow
batch -> records) on recordflow's C++ parser and ``_core.serialize_columns``.

Nothing here imports pyspark or ray. pyarrow is imported on first use.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Sequence

import numpy as np

from recordflow import _core
from recordflow.errors import SchemaError

RECORD_TYPES = ("Example", "SequenceExample", "ByteArray")
META_SUFFIX = ".meta.json"  # per-shard sidecar: schema, record type, record count, bytes
MANIFEST = "_manifest.json"
EXTENSIONS = {None: ".tfrecord", "GZIP": ".tfrecord.gz", "ZLIB": ".tfrecord.zz"}


def record_type_name(rt: str, option: str = "record_type") -> str:
    """The record type's canonical spelling (any case); ``option`` names the setting in the
    error (Spark: recordType)."""
    for name in RECORD_TYPES:
        if str(rt).lower() == name.lower():
            return name
    raise ValueError(f"{option} must be one of {', '.join(RECORD_TYPES)}, not {rt!r}")


def compression_name(given: str | None) -> str | None:
    """None, "GZIP" or "ZLIB" from a user's value ("none", "" and None mean none)."""
    c = (given or "").upper()
    if c in ("", "NONE"):
        return None
    if c not in ("GZIP", "ZLIB"):
        raise ValueError(f'compression must be "GZIP", "ZLIB" or none, not {given!r}')
    return c


def _compression_of(path: str, given: str | None) -> str | None:
    if given:
        c = given.upper()
        return None if c in ("NONE", "") else c
    if path.endswith(".gz"):
        return "GZIP"
    if path.endswith(".zz"):
        return "ZLIB"
    return None


def _is_data_name(name: str) -> bool:
    return not (name.startswith((".", "_")) or name.endswith((".idx", ".json", ".crc", ".txt")))


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# Arrow types <-> Example features


def _kind_of(t, key: str) -> str:
    import pyarrow as pa
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return "int64"
    if pa.types.is_floating(t):
        return "float32"
    if (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t)):
        return "bytes"
    raise SchemaError(f"column '{key}': Arrow type {t} has no Example feature type (integers and "
                      "booleans -> int64 list, floats -> float list, binary/string -> bytes list)")


def check_nesting(key: str, depth: int, record_type: str, lists: str = "lists",
                  list_of_lists: str = "a list of lists", option: str = "record type") -> None:
    """A column's list depth against what a feature holds: at most a list of lists (a feature
    list), and that only in a SequenceExample. The words name the caller's types and option
    (Spark: arrays, recordType)."""
    if depth > 2:
        raise SchemaError(f"column '{key}': {lists} nest at most twice (a feature list of lists)")
    if depth == 2 and record_type != "SequenceExample":
        raise SchemaError(f"column '{key}': {list_of_lists} needs {option} SequenceExample")


def arrow_layout(t, key: str, record_type: str) -> tuple[str, int]:
    """(feature kind, depth) of an Arrow column type: depth 0 scalar, 1 list, 2 feature list."""
    import pyarrow as pa
    depth = 0
    if isinstance(t, pa.ExtensionType):  # Ray's tensor columns: their flat list storage
        t = t.storage_type
    while pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        t = t.value_type
        depth += 1
    check_nesting(key, depth, record_type)
    return _kind_of(t, key), depth


def check_arrow_schema(schema, record_type: str) -> None:
    import pyarrow as pa
    if record_type == "ByteArray":
        if len(schema) != 1 or not (pa.types.is_binary(schema[0].type)
                                    or pa.types.is_large_binary(schema[0].type)):
            raise SchemaError("record type ByteArray has one binary column (default name "
                              f"'byteArray'), not {schema}")
        return
    for f in schema:
        arrow_layout(f.type, f.name, record_type)


_SPARK_TO_ARROW = {"long": "int64", "integer": "int32", "short": "int16", "byte": "int8",
                   "boolean": "bool_", "float": "float32", "double": "float64",
                   "binary": "binary", "string": "string"}
_ARROW_TO_SPARK = {"int64": "long", "int32": "integer", "int16": "short", "int8": "byte",
                   "bool": "boolean", "float": "float", "double": "double", "binary": "binary",
                   "string": "string", "large_binary": "binary", "large_string": "string",
                   "uint8": "short", "uint16": "integer", "uint32": "long", "uint64": "long",
                   "halffloat": "float"}


def arrow_from_spark_json(schema_json: dict):
    """The Arrow schema of a Spark StructType's JSON (the sidecar's "schema"), all nullable:
    a record can always lack a feature."""
    import pyarrow as pa

    def conv(t):
        if isinstance(t, str):
            if t not in _SPARK_TO_ARROW:
                raise SchemaError(f"sidecar schema: Spark type {t!r} has no Example mapping")
            return getattr(pa, _SPARK_TO_ARROW[t])()
        if t.get("type") == "array":
            return pa.list_(pa.field("element", conv(t["elementType"]), True))
        raise SchemaError(f"sidecar schema: unsupported type {t!r}")

    return pa.schema([pa.field(f["name"], conv(f["type"]), True) for f in schema_json["fields"]])


def spark_json_from_arrow(schema) -> dict:
    """A Spark StructType JSON for an Arrow schema, so Spark's reader gets exact types from the
    sidecars written by recordflow.ray (and the other way round)."""
    import pyarrow as pa

    def conv(t):
        if isinstance(t, pa.ExtensionType):
            t = t.storage_type
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return {"type": "array", "elementType": conv(t.value_type), "containsNull": True}
        if str(t) not in _ARROW_TO_SPARK:
            raise SchemaError(f"Arrow type {t} has no Example feature type")
        return _ARROW_TO_SPARK[str(t)]

    return {"type": "struct", "fields": [{"name": f.name, "type": conv(f.type), "nullable": True,
                                          "metadata": {}} for f in schema]}


def sample_feature_kinds(files: Sequence[str], record_type: str, compression: str | None,
                         sample: int) -> tuple[dict[str, str], dict[str, bool], dict[str, str], int]:
    """Reads the first `sample` records of `files` (in file order, no full pass) and returns
    (kinds, single, seq_kinds, seen): each context feature's kind ("int64", "float32" or
    "bytes"), whether it had exactly one value in every sampled record, each feature list's
    kind, and how many records were read. Spark's and Ray's schema inference share it."""
    kinds: dict[str, str] = {}
    single: dict[str, bool] = {}
    seq_kinds: dict[str, str] = {}
    seen = 0

    def kind(v):
        return "bytes" if isinstance(v, list) else ("int64" if v.dtype == np.int64 else "float32")

    for path in files:
        if seen >= sample:
            break
        with _core.RecordReader(path, _compression_of(path, compression)) as reader:
            for rec in reader.read_batch(sample - seen):
                seen += 1
                if record_type == "Example":
                    context, lists = _core.parse_example_single(rec), {}
                else:
                    context, lists = _core.parse_sequence_example_single(rec)
                for key, v in context.items():
                    if v is None:
                        continue
                    if kinds.setdefault(key, kind(v)) != kind(v):
                        raise SchemaError(f"feature '{key}' has type {kinds[key]} in one sampled "
                                          f"record and {kind(v)} in another ('{path}')")
                    single[key] = single.get(key, True) and len(v) == 1
                for key, steps in lists.items():
                    for v in steps:
                        if v is not None:
                            seq_kinds.setdefault(key, kind(v))
    return kinds, single, seq_kinds, seen


def infer_arrow_schema(files: Sequence[str], record_type: str, compression: str | None = None,
                       sample: int = 1000, read_text=None):
    """The Arrow schema of `files`: from the sidecar beside the first file when there is one
    (`read_text(path)` -> str or None reads it), else from the first `sample` records (as
    recordflow.spark.infer_schema: one value in every sampled record -> scalar, else list)."""
    import pyarrow as pa
    if record_type == "ByteArray":
        return pa.schema([pa.field("byteArray", pa.binary(), True)])
    text = read_text(files[0] + META_SUFFIX) if read_text else None
    if text:
        m = json.loads(text)
        if m.get("recordType") == record_type and "schema" in m:
            return arrow_from_spark_json(m["schema"])
    kinds, single, seq_kinds, seen = sample_feature_kinds(files, record_type, compression, sample)
    types = {"int64": pa.int64(), "float32": pa.float32(), "bytes": pa.binary()}
    fields = []
    for key in sorted(kinds):
        t = types[kinds[key]]
        fields.append(pa.field(key, t if single[key] else pa.list_(pa.field("element", t, True)), True))
    for key in sorted(seq_kinds):
        if key in kinds:
            raise SchemaError(f"key '{key}' is both a context feature and a feature list")
        inner = pa.list_(pa.field("element", types[seq_kinds[key]], True))
        fields.append(pa.field(key, pa.list_(pa.field("element", inner, True)), True))
    if not fields:
        raise SchemaError(f"cannot infer a schema: no features in the first {seen} records of "
                          f"'{files[0]}'; pass schema=")
    return pa.schema(fields)


# ---------------------------------------------------------------------------------------------
# Records -> Arrow


class RecordBatchDecoder:
    """Serialized records -> one Arrow RecordBatch of `arrow_schema`: the C++ parser fills
    NumPy buffers (GIL released), which Arrow takes over without copying numeric data. An
    absent scalar feature reads as null (an error for a non-nullable field), an absent list
    feature as an empty list (VarLen semantics, as tf.io.parse_example)."""

    def __init__(self, arrow_schema, record_type: str):
        self.arrow_schema = arrow_schema
        self.record_type = record_type
        if record_type == "ByteArray":
            return
        context, sequence = [], []
        self.depths = {}
        for f in arrow_schema:
            kind, depth = arrow_layout(f.type, f.name, record_type)
            self.depths[f.name] = depth
            (sequence if depth == 2 else context).append((f.name, kind))
        self.context_keys = [k for k, _ in context]
        self.sequence_keys = [k for k, _ in sequence]
        self._context = _core.ExampleParser([(k, "var", kind, [], None) for k, kind in context])
        self._sequence = _core.SequenceParser([(k, "var", kind, [], None) for k, kind in sequence])

    def __call__(self, records, path: str, first: int):
        """`records`: a list of bytes, or for ByteArray the (offsets, data) buffers of
        RecordReader.read_batch_arrow / IndexedRecordReader.read_range_arrow, which become the
        binary column without a copy and without a Python object per record."""
        import pyarrow as pa
        if self.record_type == "ByteArray":
            if isinstance(records, tuple):
                column = self._values(records, self.arrow_schema[0].type, "byteArray", path)
            else:
                column = pa.array(records, self.arrow_schema[0].type)
            return pa.RecordBatch.from_arrays([column], schema=self.arrow_schema)
        n = len(records)
        cols = {}
        try:
            for key, col in zip(self.context_keys, self._context.parse(records, first, "arrow")):
                cols[key] = col
            if self.sequence_keys:
                for key, col in zip(self.sequence_keys, self._sequence.parse(records, first, "arrow")):
                    cols[key] = col
        except Exception as e:  # name the file: the parser knows only the record index
            raise type(e)(f"'{path}': {e}") from e
        arrays = [self._to_arrow(af, cols[af.name], n, path, first) for af in self.arrow_schema]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    @staticmethod
    def _values(kind_values, leaf_type, key: str, path: str):
        import pyarrow as pa
        import pyarrow.compute as pc
        if isinstance(kind_values, tuple):
            # Bytes: the parser built an Arrow binary array's buffers natively (GIL released);
            # Arrow takes them over without a copy.
            offsets, data = kind_values
            wide = offsets.dtype == np.int64
            arr = pa.Array.from_buffers(pa.large_binary() if wide else pa.binary(), len(offsets) - 1,
                                        [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        else:
            arr = pa.array(kind_values)  # int64 / float32: zero-copy over the parser's buffer
        if arr.type == leaf_type:
            return arr
        if pa.types.is_boolean(leaf_type):
            return pc.not_equal(arr, 0)
        try:
            return arr.cast(leaf_type, safe=True)  # int64 -> int32 etc. checked; bytes -> UTF-8 checked
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaError(f"'{path}': feature '{key}' does not fit {leaf_type}: {e}") from None

    def _to_arrow(self, af, col, n: int, path: str, first: int):
        import pyarrow as pa
        atype = af.type
        depth = self.depths[af.name]
        leaf_type = atype
        for _ in range(depth):
            leaf_type = leaf_type.value_type
        if depth == 2:
            values, step_splits, row_splits = col
            inner = pa.ListArray.from_arrays(pa.array(step_splits.astype(np.int32)),
                                             self._values(values, leaf_type, af.name, path),
                                             type=atype.value_type)
            return pa.ListArray.from_arrays(pa.array(row_splits.astype(np.int32)), inner, type=atype)
        values, row_splits = col
        leaf = self._values(values, leaf_type, af.name, path)
        if depth == 1:
            return pa.ListArray.from_arrays(pa.array(row_splits.astype(np.int32)), leaf, type=atype)
        lengths = np.diff(row_splits)
        if n and lengths.max(initial=0) > 1:
            r = int(np.argmax(lengths > 1))
            raise SchemaError(f"'{path}': record {first + r}: feature '{af.name}' has {int(lengths[r])} "
                              f"values; column type {atype} holds one (use a list column)")
        present = lengths == 1
        if present.all():
            return leaf
        if not af.nullable:
            r = int(np.argmin(present))
            raise SchemaError(f"'{path}': feature '{af.name}' is missing in record {first + r}, and "
                              f"column '{af.name}' is not nullable")
        # Absent -> null: place the present values at their rows.
        pos = np.cumsum(present) - 1
        pos[~present] = 0
        if len(leaf) == 0:
            return pa.nulls(n, type=leaf_type)
        import pyarrow.compute as pc
        taken = leaf.take(pa.array(pos))
        return pc.if_else(pa.array(~present), pa.scalar(None, leaf_type), taken)


# ---------------------------------------------------------------------------------------------
# Arrow -> records


def encode_batch(batch, layout, record_type: str) -> list:
    """Arrow RecordBatch -> serialized records. `layout` is [(key, kind, depth)] per column
    (None for ByteArray); column buffers go to the C++ encoder (``_core.serialize_columns``),
    which builds each Example without the GIL."""
    if record_type == "ByteArray":
        col = batch.column(0)
        if col.null_count:
            raise SchemaError("record type ByteArray: a null record cannot be written")
        return col.to_pylist()
    n = batch.num_rows
    cols = [_column_buffers(key, kind, depth, arr, n)
            for (key, kind, depth), arr in zip(layout, batch.columns)]
    return _core.serialize_columns(n, cols, record_type == "SequenceExample")


def _offsets(arr) -> np.ndarray:
    # .offsets honours the array's slice offset (.values does not: offsets index into it).
    return np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)


def _leaf_buffers(key: str, kind: str, arr):
    """Leaf values of a (possibly nested) column as (values, data) for serialize_columns."""
    import pyarrow as pa
    import pyarrow.compute as pc
    if arr.null_count:
        raise SchemaError(f"column '{key}': a null inside an array cannot be written (an Example "
                          "list has no nulls)")
    if kind == "bytes":
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            arr = arr.cast(pa.binary() if pa.types.is_string(arr.type) else pa.large_binary())
        bufs = arr.buffers()
        wide = pa.types.is_large_binary(arr.type)
        offsets = np.frombuffer(bufs[1], dtype=np.int64 if wide else np.int32,
                                count=len(arr) + 1, offset=arr.offset * (8 if wide else 4)).astype(np.int64)
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and bufs[2].size else np.zeros(1, np.uint8)
        return offsets, data
    if pa.types.is_boolean(arr.type):
        arr = pc.cast(arr, pa.int64())
    np_dtype = np.int64 if kind == "int64" else np.float32
    values = np.ascontiguousarray(arr.to_numpy(zero_copy_only=False), dtype=np_dtype)
    return values, None


def _column_buffers(key: str, kind: str, depth: int, arr, n: int) -> tuple:
    import pyarrow as pa
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage  # a tensor column: each row's values, flattened (row-major)
    if pa.types.is_large_list(arr.type) or pa.types.is_fixed_size_list(arr.type):
        arr = arr.cast(_plain_lists(arr.type))
    present = np.ones(n, np.uint8) if arr.null_count == 0 else \
        np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=np.uint8)
    if depth == 0:
        row_splits = np.arange(n + 1, dtype=np.int64)
        if arr.null_count:
            # Null rows are left out of the record; their slot needs a value of the right type.
            if kind == "bytes":
                fill = pa.scalar(b"", pa.binary()).cast(arr.type)
            elif pa.types.is_boolean(arr.type):
                fill = pa.scalar(False)
            else:
                fill = pa.scalar(0.0 if kind == "float32" else 0, arr.type)
            arr = arr.fill_null(fill)
        values, data = _leaf_buffers(key, kind, arr)
        return (key, kind, False, present, row_splits, None, values, data)
    row_splits = _offsets(arr)
    child = arr.values
    if depth == 1:
        values, data = _leaf_buffers(key, kind, child)
        return (key, kind, False, present, row_splits, None, values, data)
    if child.null_count:
        raise SchemaError(f"column '{key}': a null step inside a feature list cannot be written")
    step_splits = _offsets(child)
    values, data = _leaf_buffers(key, kind, child.values)
    return (key, kind, True, present, row_splits, step_splits, values, data)


def _plain_lists(t):
    """large_list / fixed_size_list types (Ray's tensor columns, for one) as list types."""
    import pyarrow as pa
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return pa.list_(pa.field("element", _plain_lists(t.value_type), True))
    return t
