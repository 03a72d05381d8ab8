"""tf.train.Example / SequenceExample without TensorFlow: build, serialize, parse."""

from __future__ import annotations

import numbers
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from recordflow import _core
from recordflow.errors import SchemaError

_DTYPES = {
    "int64": "int64",
    "float32": "float32",
    "float": "float32",
    "bytes": "bytes",
    "string": "bytes",
    "str": "bytes",
}


def _dtype_name(dtype: Any) -> str:
    """Accepts "int64" / "float32" / "bytes" and NumPy dtypes (np.int64, np.float32,
    np.bytes_, object, str)."""
    if isinstance(dtype, str) and dtype in _DTYPES:
        return _DTYPES[dtype]
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise SchemaError(f"unknown dtype {dtype!r}: expected 'int64', 'float32' or 'bytes'") from None
    if dt.kind in "iub":
        return "int64"
    if dt.kind == "f":
        return "float32"
    if dt.kind in "SUO":
        return "bytes"
    raise SchemaError(f"unsupported dtype {dtype!r}: expected 'int64', 'float32' or 'bytes'")


def _to_bytes(v: Any, key: str) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytearray, memoryview, np.bytes_)):
        return bytes(v)
    raise SchemaError(f"feature '{key}': cannot mix bytes/str with {type(v).__name__} values")


def _feature(key: str, value: Any, dtype: str | None = None) -> tuple:
    """A Python value as ("int64"|"float32"|"bytes"|"none", values) for the encoder."""
    if value is None:
        return ("none", None)  # a Feature with no list set, as Example.parse returns it
    if isinstance(value, np.ndarray):
        arr = value.reshape(-1)
        kind = dtype or _dtype_name(arr.dtype)
        if kind == "bytes":
            return ("bytes", [_to_bytes(v, key) for v in arr.tolist()])
        return (kind, np.ascontiguousarray(arr, dtype=np.int64 if kind == "int64" else np.float32))
    if isinstance(value, (bytes, str, bytearray, memoryview, numbers.Number, np.generic)):
        value = [value]
    if not isinstance(value, (list, tuple)):
        try:
            value = list(value)
        except TypeError:
            raise SchemaError(f"feature '{key}': unsupported value of type {type(value).__name__}") from None
    if dtype is None:
        if not value:
            raise SchemaError(
                f"feature '{key}': cannot tell the type of an empty list; pass a NumPy array "
                "with a dtype (e.g. np.array([], np.int64)) or use Example(..., dtypes=...)")
        first = value[0]
        if isinstance(first, (bool, np.bool_, numbers.Integral)):
            dtype = "int64"
        elif isinstance(first, numbers.Real):
            dtype = "float32"
        elif isinstance(first, (bytes, str, bytearray, memoryview, np.bytes_)):
            dtype = "bytes"
        else:
            raise SchemaError(f"feature '{key}': unsupported value type {type(first).__name__}")
    if dtype == "bytes":
        return ("bytes", [_to_bytes(v, key) for v in value])
    try:
        if dtype == "int64":
            if any(isinstance(v, float) and not float(v).is_integer() for v in value):
                raise SchemaError(f"feature '{key}': int64 feature holds non-integer values")
            return ("int64", np.asarray(value, dtype=np.int64).reshape(-1))
        return ("float32", np.asarray(value, dtype=np.float32).reshape(-1))
    except (TypeError, ValueError, OverflowError) as e:
        raise SchemaError(f"feature '{key}': {e}") from None


class Example:
    """A tf.train.Example: a mapping from feature keys to lists of int64, float32 or bytes.

    Values may be int, float, bytes, str (stored as UTF-8), lists or tuples of one of those,
    NumPy arrays (flattened), or None (a Feature with no list set). ``dtypes`` forces a type per
    key (needed for empty lists).
    ``serialize()`` gives the bytes TensorFlow's protobuf gives with deterministic
    serialization (keys in sorted order).
    """

    __slots__ = ("features",)

    def __init__(self, features: Mapping[str, Any] | None = None, dtypes: Mapping[str, Any] | None = None):
        dtypes = {k: _dtype_name(v) for k, v in (dtypes or {}).items()}
        self.features = {str(k): _feature(str(k), v, dtypes.get(str(k))) for k, v in (features or {}).items()}

    def serialize(self) -> bytes:
        """The wire bytes (``SerializeToString`` is the same method)."""
        return _core.serialize_example(self.features)

    SerializeToString = serialize

    @staticmethod
    def parse(data: bytes) -> dict:
        """Decodes one serialized Example: int64 and float32 lists as NumPy arrays, bytes lists
        as lists of bytes; a feature with no list set is None."""
        return _core.parse_example_single(bytes(data))

    def __repr__(self) -> str:
        return f"Example({ {k: v[1] for k, v in self.features.items()} !r})"


class SequenceExample:
    """A tf.train.SequenceExample: ``context`` (as Example's features) and ``feature_lists``,
    a mapping from keys to lists of per-step values."""

    __slots__ = ("context", "feature_lists")

    def __init__(self, context: Mapping[str, Any] | None = None,
                 feature_lists: Mapping[str, Sequence[Any]] | None = None,
                 dtypes: Mapping[str, Any] | None = None):
        dtypes = {k: _dtype_name(v) for k, v in (dtypes or {}).items()}
        self.context = {str(k): _feature(str(k), v, dtypes.get(str(k))) for k, v in (context or {}).items()}
        self.feature_lists = {}
        for k, steps in (feature_lists or {}).items():
            key = str(k)
            dtype = dtypes.get(key)
            if dtype is None:
                # Empty steps take the type of the list's other steps.
                for step in steps:
                    if isinstance(step, np.ndarray) or not hasattr(step, "__len__") or len(step):
                        dtype = _feature(key, step)[0]
                        break
            self.feature_lists[key] = [_feature(key, step, dtype) for step in steps]

    def serialize(self) -> bytes:
        """The wire bytes (``SerializeToString`` is the same method)."""
        return _core.serialize_sequence_example(self.context, self.feature_lists)

    SerializeToString = serialize

    @staticmethod
    def parse(data: bytes) -> tuple[dict, dict]:
        """Decodes one serialized SequenceExample into (context, feature_lists), where
        feature_lists maps each key to a list of per-step values."""
        return _core.parse_sequence_example_single(bytes(data))


class FixedLen:
    """A feature with exactly prod(shape) values in every record (``default`` when missing).

    Parses to an array of shape [batch, *shape] (an object array of bytes for "bytes").
    """

    __slots__ = ("shape", "dtype", "default")

    def __init__(self, shape: Iterable[int] = (), dtype: Any = "int64", default: Any = None):
        if isinstance(shape, numbers.Integral):
            shape = (shape,)
        try:
            dims = tuple(shape)
        except TypeError:
            raise SchemaError(f"FixedLen shape must be a list of ints, not {shape!r}") from None
        # Invalid dimensions are kept as given and refused by _spec, which knows the key.
        self.shape = tuple(int(d) if _is_int(d) else d for d in dims)
        self.dtype = _dtype_name(dtype)
        self.default = default

    def _spec(self, key: str, sequence: bool = False) -> tuple:
        _check_shape(key, self.shape, sequence)
        default = None if self.default is None else _feature(key, self.default, self.dtype)
        return (key, "fixed", self.dtype, list(self.shape), default)

    def __repr__(self) -> str:
        return f"FixedLen({list(self.shape)}, {self.dtype!r}, default={self.default!r})"


# Values one FixedLen feature may have per record: at most a record's size in bytes
# (max_record_size, 1 GiB, and at least a byte per value) and within int32 indexing, as TF's
# parser needs; a larger shape can only be a mistake and would ask for terabytes per batch.
_MAX_FIXEDLEN_VALUES = (1 << 31) - 1


def _is_int(d: Any) -> bool:
    return isinstance(d, (numbers.Integral, np.integer)) and not isinstance(d, (bool, np.bool_))


def _check_shape(key: str, shape: tuple, sequence: bool) -> None:
    """TF's rules for FixedLenFeature shapes, with errors naming the key: every dimension a
    known int >= 0 (0 allowed: a feature with no values); in a sequence spec (per step) no zero
    dimension (tf.io.parse_sequence_example divides by it)."""
    what = "sequence feature" if sequence else "feature"
    for d in shape:
        if d is None:
            raise SchemaError(
                f"{what} '{key}': FixedLen shape {list(shape)} has an unknown dimension (None): "
                "every dimension must be known; use rf.VarLen for a variable number of values")
        if not _is_int(d):
            raise SchemaError(f"{what} '{key}': FixedLen shape {list(shape)}: dimension {d!r} is "
                              "not an int")
        if d < 0:
            raise SchemaError(f"{what} '{key}': FixedLen shape {list(shape)}: dimension {d} must "
                              "be >= 0")
        if sequence and d == 0:
            raise SchemaError(f"{what} '{key}': FixedLen shape {list(shape)} has a zero "
                              "dimension: each step must hold at least one value")
    n = 1
    for d in shape:
        n *= int(d)
    if n > _MAX_FIXEDLEN_VALUES:
        raise SchemaError(f"{what} '{key}': FixedLen shape {list(shape)} asks for too many values "
                          f"per record ({n} > {_MAX_FIXEDLEN_VALUES})")


class VarLen:
    """A feature with any number of values per record. Parses to a :class:`Ragged`."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: Any = "int64"):
        self.dtype = _dtype_name(dtype)

    def _spec(self, key: str, sequence: bool = False) -> tuple:
        return (key, "var", self.dtype, [], None)

    def __repr__(self) -> str:
        return f"VarLen({self.dtype!r})"


class Ragged:
    """Values of a variable-length feature for a batch: row i holds
    ``values[row_splits[i]:row_splits[i + 1]]``. ``values`` is a NumPy array, or another
    Ragged for sequence features with a variable number of values per step."""

    __slots__ = ("values", "row_splits")

    def __init__(self, values, row_splits: np.ndarray):
        self.values = values
        self.row_splits = row_splits

    def __len__(self) -> int:
        return len(self.row_splits) - 1

    def __getitem__(self, i):
        n = len(self)
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step != 1:
                raise ValueError("Ragged supports contiguous slices only")
            return Ragged(self.values, self.row_splits[start:max(start, stop) + 1])
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("row index out of range")
        return self.values[self.row_splits[i]:self.row_splits[i + 1]]

    def row_lengths(self) -> np.ndarray:
        """The number of values in each row."""
        return np.diff(self.row_splits)

    def to_list(self) -> list:
        """The rows as nested Python lists."""
        out = []
        for i in range(len(self)):
            row = self[i]
            out.append(row.to_list() if isinstance(row, Ragged) else row.tolist())
        return out

    def flat_values(self) -> np.ndarray:
        """The innermost values array (through every level of raggedness)."""
        return self.values.flat_values() if isinstance(self.values, Ragged) else self.values

    def to_sparse(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indices [n, 2], values [n], dense_shape [2]) as tf.io.VarLenFeature gives."""
        if isinstance(self.values, Ragged):
            raise ValueError("to_sparse() takes one level of raggedness")
        lengths = self.row_lengths()
        first, last = int(self.row_splits[0]), int(self.row_splits[-1])
        values = self.values[first:last]
        rows = np.repeat(np.arange(len(self), dtype=np.int64), lengths)
        cols = np.arange(first, last, dtype=np.int64) - np.repeat(self.row_splits[:-1], lengths)
        indices = np.stack([rows, cols], axis=1) if len(rows) else np.zeros((0, 2), np.int64)
        dense_shape = np.array([len(self), int(lengths.max()) if len(lengths) else 0], np.int64)
        return indices, values, dense_shape

    def to_dense(self, default_value: Any = 0) -> np.ndarray:
        """Pads every row to the longest one: shape [rows, max_len, *value_shape]."""
        if isinstance(self.values, Ragged):
            raise ValueError("to_dense() takes one level of raggedness")
        n = len(self)
        width = int(self.row_lengths().max()) if n else 0
        out = np.full((n, width) + self.values.shape[1:], default_value, dtype=self.values.dtype)
        for i in range(n):
            row = self[i]
            out[i, :len(row)] = row
        return out

    def __repr__(self) -> str:
        return f"Ragged({self.to_list()!r})"


class Parser:
    """A compiled spec: parse many batches with the same spec without re-validating it.

    ``bytes_as`` chooses how bytes features come out: ``"bytes"`` (default) makes a new
    ``bytes`` object per value, like ``tf.io.parse_example(...).numpy()``; ``"memoryview"``
    copies nothing: each value is a read-only ``memoryview`` into the serialized record it came
    from (which it keeps alive). Use it when the values go on to something that reads buffers
    (an image decoder, ``np.frombuffer``, ``torch.frombuffer``, ``PIL.Image.open(io.BytesIO(v))``);
    ``bytes(v)`` copies when a real ``bytes`` is needed. A FixedLen default stands in as ``bytes``.
    """

    def __init__(self, spec: Mapping[str, FixedLen | VarLen], bytes_as: str = "bytes"):
        if bytes_as not in ("bytes", "memoryview"):
            raise ValueError(f'bytes_as must be "bytes" or "memoryview", not {bytes_as!r}')
        self._plan = _Plan(spec, "spec")
        self._parser = _core.ExampleParser(self._plan.specs)
        self._bytes_as = bytes_as

    def __call__(self, serialized: Sequence[bytes], first_record_index: int = 0) -> dict:
        if not self._plan.shaped:  # FixedLen / VarLen only: the columns as they come
            columns = self._parser.parse(serialized, first_record_index, self._bytes_as)
            out = {}
            for key, col in zip(self._plan.keys, columns):
                out[key] = Ragged(*col) if isinstance(col, tuple) else col
            return out
        records = serialized if isinstance(serialized, list) else list(serialized)
        columns = self._parser.parse(records, first_record_index, self._bytes_as)
        return self._plan.finish(columns, len(records), first_record_index, False)


class _Plan:
    """Spec objects -> the C++ parser's spec tuples, and the C++ columns back to each spec's
    result. FixedLen and VarLen are one column each; the rf.parsing features (SparseFeature,
    RaggedFeature, FixedLenSequenceFeature) may read several keys and shape the columns
    (``_parts`` / ``_finish``). A key read by several specs is parsed once when they agree on it."""

    def __init__(self, spec: Mapping[str, Any] | None, what: str):
        sequence = what == "sequence_spec"
        self.keys, self.specs, self.outputs, self.shaped = [], [], [], False
        if spec is None:
            return
        if not isinstance(spec, Mapping):
            raise SchemaError(f"{what} must be a mapping from feature key to a feature spec")
        where: dict = {}
        for key, s in spec.items():
            key = str(key)
            if isinstance(s, (FixedLen, VarLen)):
                parts = [s._spec(key, sequence=sequence)]
            elif hasattr(s, "_parts"):
                parts = s._parts(key, sequence)
                self.shaped = True
            else:
                raise SchemaError(f"spec for '{key}' must be a feature spec (rf.FixedLen, rf.VarLen, "
                                  f"rf.FixedLenSequenceFeature, rf.SparseFeature, rf.RaggedFeature), "
                                  f"not {s!r}")
            columns = []
            for t in parts:
                if t[0] in where:
                    prev = self.specs[where[t[0]]]
                    if not (t[1] == prev[1] == "var" and t[2] == prev[2]):
                        raise SchemaError(f"feature '{t[0]}' is read by two specs that disagree "
                                          f"on it ({prev[1]} {prev[2]} and {t[1]} {t[2]})")
                    self.shaped = True
                    columns.append(where[t[0]])
                    continue
                where[t[0]] = len(self.specs)
                columns.append(len(self.specs))
                self.specs.append(t)
            self.keys.append(key)
            self.outputs.append((key, s, columns))

    def finish(self, columns: list, batch: int, first_record_index: int, sequence: bool) -> dict:
        out = {}
        for key, s, idx in self.outputs:
            cols = [columns[i] for i in idx]
            if isinstance(s, (FixedLen, VarLen)):
                col = cols[0]
                out[key] = _to_ragged(col) if sequence else (Ragged(*col) if isinstance(col, tuple) else col)
            else:
                out[key] = s._finish(key, cols, batch, first_record_index, sequence)
        return out


def _specs(spec: Mapping[str, FixedLen | VarLen] | None, what: str) -> list:
    if spec is None:
        return []
    if not isinstance(spec, Mapping):
        raise SchemaError(f"{what} must be a mapping from feature key to rf.FixedLen / rf.VarLen")
    out = []
    for key, s in spec.items():
        if not isinstance(s, (FixedLen, VarLen)):
            raise SchemaError(f"spec for '{key}' must be rf.FixedLen or rf.VarLen, not {s!r}")
        out.append(s._spec(str(key), sequence=what == "sequence_spec"))
    return out


def _to_ragged(col):
    if len(col) == 3:  # values, step_splits, row_splits
        return Ragged(Ragged(col[0], col[1]), col[2])
    return Ragged(*col)


class SequenceParser:
    """A compiled pair of specs for batches of tf.train.SequenceExample."""

    def __init__(self, context_spec: Mapping[str, FixedLen | VarLen] | None = None,
                 sequence_spec: Mapping[str, FixedLen | VarLen] | None = None):
        self._context_plan = _Plan(context_spec, "context_spec")
        self._sequence_plan = _Plan(sequence_spec, "sequence_spec")
        self._context = _core.ExampleParser(self._context_plan.specs)
        self._sequence = _core.SequenceParser(self._sequence_plan.specs)

    def __call__(self, serialized: Sequence[bytes], first_record_index: int = 0) -> tuple[dict, dict]:
        records = list(serialized)
        context = self._context.parse(records, first_record_index)
        sequences = self._sequence.parse(records, first_record_index)
        ctx = self._context_plan.finish(context, len(records), first_record_index, False)
        seq = self._sequence_plan.finish(sequences, len(records), first_record_index, True)
        return ctx, seq


def parse_sequence_example(serialized: Sequence[bytes],
                           context_spec: Mapping[str, FixedLen | VarLen] | None = None,
                           sequence_spec: Mapping[str, FixedLen | VarLen] | None = None) -> tuple[dict, dict]:
    """Parses a batch of serialized tf.train.SequenceExample, like tf.io.parse_sequence_example.

    Returns (context, sequences). Context features parse as in :func:`parse_example`. Each
    sequence feature is a :class:`Ragged` over steps: ``FixedLen(shape)`` gives values of shape
    [total_steps, *shape] split by record (``.to_dense()`` pads to [batch, max_steps, *shape]);
    ``VarLen`` gives a Ragged of steps whose values are themselves a Ragged of values. A record
    without a feature list has zero steps for it.
    """
    if isinstance(serialized, (bytes, bytearray)):
        raise SchemaError("parse_sequence_example takes a batch (a list of serialized records)")
    return SequenceParser(context_spec, sequence_spec)(serialized)


def parse_example(serialized: Sequence[bytes], spec: Mapping[str, FixedLen | VarLen],
                  bytes_as: str = "bytes") -> dict:
    """Parses a batch of serialized tf.train.Example records, like tf.io.parse_example.

    FixedLen features become arrays of shape [batch, *shape]; VarLen features become
    :class:`Ragged` (``.values``, ``.row_splits``, ``.to_list()``, ``.to_sparse()``).
    Bytes features are object arrays of ``bytes``, or with ``bytes_as="memoryview"`` of
    zero-copy memoryviews into the records (see :class:`Parser`).
    Raises rf.SchemaError naming the key and record index for a missing required feature, a
    wrong type or a wrong value count, and rf.DataLossError for malformed bytes.
    """
    if isinstance(serialized, (bytes, bytearray)):
        raise SchemaError("parse_example takes a batch (a list of serialized records); wrap one record in a list")
    return Parser(spec, bytes_as=bytes_as)(serialized)
