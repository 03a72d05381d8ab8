"""tf.io parsing parity beyond FixedLen / VarLen: FixedLenSequenceFeature, SparseFeature,
RaggedFeature (with row partitions), parse_single_example, parse_single_sequence_example and
decode_raw.

The C++ parser finds, type-checks and counts every key (FixedLenSequenceFeature's item stride
and required feature lists are checked there); SparseFeature indices (counts, ranges, order) and
RaggedFeature row partitions are checked and built in C++ for the whole batch, without the GIL
(recordflow/example/composite.h). This module only hands the columns over and wraps the results.
Every error names the feature key and the record.
"""

from __future__ import annotations

import numbers
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from recordflow import _core
from recordflow.errors import SchemaError
from recordflow.example import (
    FixedLen,
    Ragged,
    SequenceParser,
    VarLen,
    _check_shape,
    _dtype_name,
    _feature,
    _is_int,
    parse_example,
)

_NUMPY = {"int64": np.int64, "float32": np.float32, "bytes": object}


def _shape_tuple(shape: Any, what: str) -> tuple:
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    try:
        return tuple(int(d) if _is_int(d) else d for d in shape)
    except TypeError:
        raise SchemaError(f"{what} shape must be a list of ints, not {shape!r}") from None


def _where(key: str, record: int) -> str:
    return f"feature '{key}' of record {record}"


class FixedLenSequenceFeature:
    """tf.io.FixedLenSequenceFeature: any number of items of ``shape`` per record.

    In :func:`parse_example` a record's values are split into items of prod(shape) values
    (their count must be a multiple of it) and records are padded with ``default_value`` (0 or
    b"" when None) to the longest: an array [batch, max_items, *shape]. As in TensorFlow it
    needs ``allow_missing=True`` there (a missing feature is zero items).
    In ``sequence_spec`` of :func:`parse_sequence_example` each step is one item; without
    ``allow_missing`` the feature list is required (a record without it is an error naming the
    key and the record); the result is [batch, max_steps, *shape], padded the same way.
    """

    __slots__ = ("shape", "dtype", "allow_missing", "default_value")

    def __init__(self, shape: Iterable[int], dtype: Any, allow_missing: bool = False,
                 default_value: Any = None):
        self.shape = _shape_tuple(shape, "FixedLenSequenceFeature")
        self.dtype = _dtype_name(dtype)
        self.allow_missing = bool(allow_missing)
        self.default_value = default_value

    def _parts(self, key: str, sequence: bool) -> list:
        _check_shape(key, self.shape, sequence=True)
        if not sequence and not self.allow_missing:
            raise SchemaError(f"feature '{key}': FixedLenSequenceFeature requires allow_missing=True "
                              "in parse_example (as tf.io.parse_example); a required list of steps "
                              "is a sequence feature of parse_sequence_example")
        pad = None
        if self.default_value is not None:
            v = self.default_value
            if self.dtype != "bytes":
                arr = np.asarray(v)
                if arr.size != 1:
                    raise SchemaError(f"feature '{key}': FixedLenSequenceFeature default_value pads "
                                      f"records and must be one value, not {v!r}")
                v = arr.reshape(-1)[0].item()
            pad = _feature(key, [v], self.dtype)
        return [(key, "fixedseq", self.dtype, list(self.shape), pad, self.allow_missing)]

    def _padding(self) -> Any:
        if self.default_value is not None:
            if self.dtype == "bytes":
                v = self.default_value
                return v.encode() if isinstance(v, str) else bytes(v)
            return np.asarray(self.default_value).reshape(-1)[0]
        return b"" if self.dtype == "bytes" else 0

    def _finish(self, key: str, cols: list, batch: int, first: int, sequence: bool) -> np.ndarray:
        values, splits = cols[0]
        items = np.asarray(values).reshape((-1,) + self.shape)
        if not sequence:  # the Example parser's splits count values, the sequence parser's steps
            splits = splits // max(1, int(np.prod(self.shape, dtype=np.int64)))
        return _pad(items, splits, self._padding(), _NUMPY[self.dtype])

    def __repr__(self) -> str:
        return (f"FixedLenSequenceFeature({list(self.shape)}, {self.dtype!r}, "
                f"allow_missing={self.allow_missing}, default_value={self.default_value!r})")


def _pad(items: np.ndarray, splits: np.ndarray, pad: Any, dtype: Any) -> np.ndarray:
    """items [n, *s] split into rows by splits [batch + 1] -> [batch, max_row, *s]."""
    batch = len(splits) - 1
    lengths = np.diff(splits)
    width = int(lengths.max()) if batch else 0
    out = np.empty((batch, width) + items.shape[1:], dtype=dtype)
    out[...] = pad
    if len(items):
        rows = np.repeat(np.arange(batch), lengths)
        cols = np.arange(int(splits[-1]) - int(splits[0])) - np.repeat(splits[:-1] - splits[0], lengths)
        out[rows, cols] = items[int(splits[0]):int(splits[-1])]
    return out


class Sparse(NamedTuple):
    """A SparseTensor's parts, as NumPy arrays (tf.compat.v1.SparseTensorValue's fields, and the
    tuple rf.Ragged.to_sparse() gives): indices [n, rank] int64, values [n], dense_shape [rank]."""

    indices: np.ndarray
    values: np.ndarray
    dense_shape: np.ndarray


class SparseFeature:
    """tf.io.SparseFeature: values at explicit indices, from several features of one record.

    ``index_key`` (one key or a list, one per dimension) holds int64 indices, ``value_key`` the
    values; ``size`` (int or list, one per index key) bounds each index. The result is a
    :class:`Sparse` with indices [n, 1 + len(index_key)] (the record, then the indices), values
    and dense_shape [batch, *size]; entries are sorted by index within each record unless
    ``already_sorted``. A record whose index and value counts differ, or with an index outside
    [0, size), is an error naming the key and the record (TensorFlow gives an invalid
    SparseTensor or fails later).
    """

    __slots__ = ("index_key", "value_key", "dtype", "size", "already_sorted")

    def __init__(self, index_key: str | Sequence[str], value_key: str, dtype: Any,
                 size: int | Sequence[int], already_sorted: bool = False):
        self.index_key = [index_key] if isinstance(index_key, str) else list(index_key)
        self.value_key = value_key
        self.dtype = _dtype_name(dtype)
        self.size = [size] if _is_int(size) else list(size)
        self.already_sorted = bool(already_sorted)

    def _parts(self, key: str, sequence: bool) -> list:
        if sequence:
            raise SchemaError(f"sequence feature '{key}': SparseFeature is for Examples and context "
                              "features (as in tf.io)")
        if not self.index_key or len(self.index_key) != len(self.size):
            raise SchemaError(f"feature '{key}': SparseFeature needs one size per index key "
                              f"({len(self.index_key)} keys, {len(self.size)} sizes)")
        for d in self.size:
            if not _is_int(d) or d < 0:
                raise SchemaError(f"feature '{key}': SparseFeature size {self.size} must be ints >= 0")
        return ([(str(k), "var", "int64", [], None) for k in self.index_key] +
                [(str(self.value_key), "var", self.dtype, [], None)])

    def _finish(self, key: str, cols: list, batch: int, first: int, sequence: bool) -> Sparse:
        *index_cols, (values, vsplits) = cols
        vsplits = np.asarray(vsplits, np.int64)
        indices, order = _core.sparse_indices(
            key, [str(k) for k in self.index_key], str(self.value_key), [int(d) for d in self.size],
            self.already_sorted, [(np.asarray(i, np.int64), np.asarray(s, np.int64)) for i, s in index_cols],
            vsplits, first)
        values = np.asarray(values)
        values = values[int(vsplits[0]):int(vsplits[-1])] if order is None else values[order]
        dense_shape = np.array([batch] + [int(d) for d in self.size], np.int64)
        return Sparse(indices, values, dense_shape)

    def __repr__(self) -> str:
        return (f"SparseFeature({self.index_key!r}, {self.value_key!r}, {self.dtype!r}, "
                f"{self.size!r}, already_sorted={self.already_sorted})")


class _OneValue:
    """A partition given by one value, held in its class's only slot."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({getattr(self, self.__slots__[0])!r})"


class _Partition(_OneValue):
    """A partition read from a feature: ``key`` names it."""

    __slots__ = ("key",)

    def __init__(self, key: str):
        self.key = key


class RowSplits(_Partition):
    """Row boundaries: row i is [splits[i], splits[i+1]) (starts at 0, ends at the count)."""


class RowLengths(_Partition):
    """The length of each row."""


class RowStarts(_Partition):
    """The start of each row (the end of the last row is the count of inner items)."""


class RowLimits(_Partition):
    """The end of each row (the first row starts at 0)."""


class ValueRowIds(_Partition):
    """The row of each inner item, non-decreasing; the row count is the last id + 1."""


class UniformRowLength(_OneValue):
    """Rows of ``length`` items each (no feature is read)."""

    __slots__ = ("length",)

    def __init__(self, length: int):
        self.length = length


_PARTITION_KINDS = {"RowSplits": "row_splits", "RowLengths": "row_lengths", "RowStarts": "row_starts",
                   "RowLimits": "row_limits", "ValueRowIds": "value_rowids"}


def _partition_tuple(p: Any) -> tuple:
    """A partition as the C++ builder takes it: (kind, key, uniform_length)."""
    if isinstance(p, UniformRowLength):
        return ("uniform_row_length", "", int(p.length))
    for cls in type(p).__mro__:
        if cls.__name__ in _PARTITION_KINDS:
            return (_PARTITION_KINDS[cls.__name__], str(p.key), 0)
    raise SchemaError(f"RaggedFeature partition {p!r} is not one of RowSplits, RowLengths, "
                      "RowStarts, RowLimits, ValueRowIds, UniformRowLength")


class RaggedFeature:
    """tf.io.RaggedFeature: a feature's values as a ragged array, optionally with inner ragged
    dimensions read from other features of the same record.

    ``value_key`` (default: the spec's key) holds the values. ``partitions``, outermost first,
    are rf.RowSplits / RowLengths / RowStarts / RowLimits / ValueRowIds (each naming an int64
    feature) or rf.UniformRowLength(n). The batch result is an :class:`rf.Ragged` whose outer
    rows are records, nested once per partition; ``row_splits_dtype`` ("int32" as TensorFlow's
    default, or "int64") is the dtype of every row_splits. Partitions that do not fit their
    values are an error naming the key and the record, whatever ``validate`` says (TensorFlow
    checks them only with validate=True). In ``sequence_spec`` the value key and the partition
    keys are feature lists: the partitions apply to each step, and the result nests records,
    then steps, then one level per partition (as tf.io.parse_sequence_example).
    """

    __slots__ = ("dtype", "value_key", "partitions", "row_splits_dtype", "validate")

    RowSplits = RowSplits
    RowLengths = RowLengths
    RowStarts = RowStarts
    RowLimits = RowLimits
    ValueRowIds = ValueRowIds
    UniformRowLength = UniformRowLength

    def __init__(self, dtype: Any, value_key: str | None = None, partitions: Sequence[Any] = (),
                 row_splits_dtype: Any = "int32", validate: bool = False):
        self.dtype = _dtype_name(dtype)
        self.value_key = value_key
        self.partitions = tuple(partitions)
        name = getattr(row_splits_dtype, "name", None) or np.dtype(row_splits_dtype).name \
            if not isinstance(row_splits_dtype, str) else row_splits_dtype
        if name not in ("int32", "int64"):
            raise SchemaError(f"RaggedFeature row_splits_dtype must be int32 or int64, not {row_splits_dtype!r}")
        self.row_splits_dtype = name
        self.validate = bool(validate)

    def _parts(self, key: str, sequence: bool) -> list:
        out = [(str(self.value_key or key), "var", self.dtype, [], None)]
        for p in self.partitions:
            if isinstance(p, UniformRowLength):
                if not _is_int(p.length) or p.length < 0:
                    raise SchemaError(f"feature '{key}': UniformRowLength({p.length!r}) must be an int >= 0")
            elif isinstance(p, _Partition):
                out.append((str(p.key), "var", "int64", [], None))
            else:
                raise SchemaError(f"feature '{key}': RaggedFeature partition {p!r} is not one of "
                                  "RowSplits, RowLengths, RowStarts, RowLimits, ValueRowIds, "
                                  "UniformRowLength")
        return out

    def _finish(self, key: str, cols: list, batch: int, first: int, sequence: bool) -> Ragged:
        dt = np.dtype(self.row_splits_dtype)
        if not self.partitions:  # the C++ splits as they are: no per-record work
            splits = [np.asarray(cols[0][2]), np.asarray(cols[0][1])] if sequence else [np.asarray(cols[0][1])]
            return _nest(np.asarray(cols[0][0]), [x.astype(dt) for x in splits])
        parts = [_partition_tuple(p) for p in self.partitions]
        pcols = [(np.asarray(c[0], np.int64), np.asarray(c[1], np.int64)) for c in cols[1:]]
        if not sequence:
            splits = _core.ragged_row_splits(key, parts, np.asarray(cols[0][1], np.int64), pcols,
                                             None, first)
            return _nest(np.asarray(cols[0][0]), [s.astype(dt) for s in splits])
        # A feature list: the partitions apply to each step; records split the steps.
        row_splits = np.asarray(cols[0][2])
        for p, c in zip([None] + [p for p in self.partitions if not isinstance(p, UniformRowLength)],
                        cols):
            if p is not None and not np.array_equal(np.diff(c[2]), np.diff(row_splits)):
                r = int(np.flatnonzero(np.diff(c[2]) != np.diff(row_splits))[0])
                raise SchemaError(f"feature list '{key}' of record {first + r}: partition feature list "
                                  f"'{p.key}' has {int(c[2][r + 1] - c[2][r])} steps, the values "
                                  f"{int(row_splits[r + 1] - row_splits[r])}")
        splits = _core.ragged_row_splits(key, parts, np.asarray(cols[0][1], np.int64), pcols,
                                         np.asarray(row_splits, np.int64), first)
        return _nest(np.asarray(cols[0][0]), [row_splits.astype(dt)] + [s.astype(dt) for s in splits])

    def __repr__(self) -> str:
        return (f"RaggedFeature({self.dtype!r}, value_key={self.value_key!r}, "
                f"partitions={list(self.partitions)!r}, row_splits_dtype={self.row_splits_dtype!r})")


def _nest(values: np.ndarray, splits: list) -> Ragged:
    out: Any = values
    for s in reversed(splits):
        out = Ragged(out, s)
    return out


def _unbatch(v: Any) -> Any:
    if isinstance(v, Sparse):
        keep = v.indices[:, 0] == 0
        return Sparse(v.indices[keep][:, 1:], v.values[keep], v.dense_shape[1:])
    if isinstance(v, Ragged):
        return v[0]
    return np.asarray(v[0])  # shape () stays an array, as a 0-d tensor


def parse_single_example(serialized: bytes, features: Mapping[str, Any]) -> dict:
    """Parses one serialized tf.train.Example, like tf.io.parse_single_example: each result is
    the batch result of :func:`parse_example` without the batch dimension (FixedLen: [*shape];
    VarLen: the record's values; FixedLenSequenceFeature: [items, *shape]; SparseFeature: a
    :class:`Sparse` with dense_shape [*size]; RaggedFeature: the record's row)."""
    if not isinstance(serialized, (bytes, bytearray, memoryview)):
        raise SchemaError("parse_single_example takes one serialized record (bytes); "
                          "use parse_example for a batch")
    batch = parse_example([bytes(serialized)], features)
    # A batch of one pads nothing: FixedLenSequenceFeature's [1, items, *shape] is the record's.
    return {key: _unbatch(v) for key, v in batch.items()}


def parse_single_sequence_example(serialized: bytes, context_features: Mapping[str, Any] | None = None,
                                  sequence_features: Mapping[str, Any] | None = None) -> tuple[dict, dict]:
    """Parses one serialized tf.train.SequenceExample, like tf.io.parse_single_sequence_example:
    the results of :func:`parse_sequence_example` without the batch dimension."""
    if not isinstance(serialized, (bytes, bytearray, memoryview)):
        raise SchemaError("parse_single_sequence_example takes one serialized record (bytes)")
    ctx, seq = SequenceParser(context_features, sequence_features)([bytes(serialized)])
    return ({k: _unbatch(v) for k, v in ctx.items()}, {k: _unbatch(v) for k, v in seq.items()})


_RAW_TYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
              "uint16", "uint32", "uint64", "complex64", "complex128", "bool")


def decode_raw(data: Any, out_type: Any, little_endian: bool = True,
               fixed_length: int | None = None) -> np.ndarray:
    """Reinterprets bytes as numbers, like tf.io.decode_raw.

    ``data``: one bytes object (-> [n]) or a sequence / array of them (-> [len(data), n]; every
    element the same length unless ``fixed_length``). ``out_type``: a NumPy dtype or its name
    (float16/32/64, int8/16/32/64, uint8/16/32/64, complex64/128, bool). ``little_endian``: the
    byte order of the data. ``fixed_length``: each element is cut or zero-padded to this many
    bytes (a multiple of the type's size). Errors (ValueError): a length that is not a multiple
    of the type's size, elements of different lengths, naming the element.
    """
    dt = np.dtype(out_type)
    if dt.name not in _RAW_TYPES:
        raise ValueError(f"decode_raw: out_type {dt.name} is not one of {', '.join(_RAW_TYPES)}")
    size = dt.itemsize
    single = isinstance(data, (bytes, bytearray, memoryview))
    items = [data] if single else list(np.asarray(data, dtype=object).reshape(-1))
    items = [v.encode() if isinstance(v, str) else bytes(v) for v in items]
    if fixed_length is not None:
        if not _is_int(fixed_length) or fixed_length < 0 or fixed_length % size:
            raise ValueError(f"decode_raw: fixed_length {fixed_length!r} must be a multiple of "
                             f"{size}, the size of {dt.name}")
        items = [v[:fixed_length].ljust(fixed_length, b"\0") for v in items]
    for i, v in enumerate(items):
        if len(v) % size:
            raise ValueError(f"decode_raw: element {i} has {len(v)} bytes, not a multiple of {size}, "
                             f"the size of {dt.name}")
        if len(v) != len(items[0]):
            raise ValueError(f"decode_raw: every element must have the same length (or pass "
                             f"fixed_length): element {i} has {len(v)} bytes, element 0 {len(items[0])}")
    wire = dt.newbyteorder("<" if little_endian else ">")
    flat = np.frombuffer(b"".join(items), dtype=wire).astype(dt.newbyteorder("="))
    if single:
        return flat
    n = len(items[0]) // size if items else 0
    shape = np.shape(np.asarray(data, dtype=object)) if not single else ()
    return flat.reshape(tuple(shape) + (n,))


__all__ = [
    "FixedLenSequenceFeature",
    "SparseFeature",
    "Sparse",
    "RaggedFeature",
    "RowSplits",
    "RowLengths",
    "RowStarts",
    "RowLimits",
    "ValueRowIds",
    "UniformRowLength",
    "parse_single_example",
    "parse_single_sequence_example",
    "decode_raw",
    "FixedLenFeature",
    "VarLenFeature",
]

class FixedLenFeature(FixedLen):
    """tf.io.FixedLenFeature's name and arguments for :class:`rf.FixedLen`."""

    __slots__ = ()

    def __init__(self, shape: Iterable[int], dtype: Any, default_value: Any = None):
        super().__init__(shape, dtype, default_value)


# tf.io.VarLenFeature(dtype) takes what rf.VarLen takes.
VarLenFeature = VarLen
