"""TensorFlow integration: an rf.Dataset as a ``tf.data.Dataset``, for gradual migration.

:func:`to_tf_dataset` wraps an rf.Dataset in ``tf.data.Dataset.from_generator`` with an
``output_signature`` derived from the pipeline's parse spec and batch stage, so Keras
``model.fit`` and the rest of a tf.data pipeline see proper shapes and dtypes:

- FixedLen(shape, dtype) -> ``tf.TensorSpec([batch, *shape], dtype)`` (batch is the batch
  size with ``drop_remainder=True``, else None; no batch dimension without ``batch``);
  bytes -> ``tf.string``;
- VarLen(dtype) -> ``tf.RaggedTensorSpec([batch, None], dtype)`` built from ``row_splits``;
- an unparsed pipeline -> ``tf.string`` records.

Values cross into TensorFlow once per batch (TensorFlow copies NumPy input into its own
tensors); recordflow's reading and parsing keep running in C++ meanwhile. A pipeline that
ends in Python ``map`` callables has no spec to read the signature from: pass
``output_signature``, or the first element is read to infer it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from recordflow.dataset import Dataset
from recordflow.example import FixedLen, Ragged, VarLen

__all__ = ["to_tf_dataset", "output_signature"]

_TF_DTYPES = {"int64": tf.int64, "float32": tf.float32, "bytes": tf.string}


def output_signature(dataset: Dataset) -> Any:
    """The ``output_signature`` of ``dataset``'s elements, read from its stages; None when
    Python callables make it unknowable without running the pipeline."""
    spec = None
    batch_dim: Any = "none"  # no batch stage: one record per element
    for op in dataset._ops:
        name = op[0]
        if name in ("map", "filter"):
            return None
        if name == "parse":
            spec = op[1]
        elif name == "batch":
            batch_dim = op[1] if op[2] else None
    batched = batch_dim != "none"
    lead = [batch_dim] if batched else []
    if spec is None:
        return tf.TensorSpec(lead, tf.string)
    sig = {}
    for key, s in spec.items():
        dtype = _TF_DTYPES[s.dtype]
        if isinstance(s, FixedLen):
            sig[key] = tf.TensorSpec(lead + list(s.shape), dtype)
        elif batched:
            sig[key] = tf.RaggedTensorSpec([batch_dim, None], dtype, ragged_rank=1,
                                           row_splits_dtype=tf.int64)
        else:  # one record: the values themselves
            sig[key] = tf.TensorSpec([None], dtype)
    return sig


def _infer(element: Any) -> Any:
    if isinstance(element, dict):
        return {k: _infer(v) for k, v in element.items()}
    if isinstance(element, tuple):
        return tuple(_infer(v) for v in element)
    if isinstance(element, Ragged):
        values = np.asarray(element.values)
        return tf.RaggedTensorSpec([None, None] + list(values.shape[1:]), _dtype(values),
                                   ragged_rank=1, row_splits_dtype=tf.int64)
    if isinstance(element, (bytes, list)):
        a = np.asarray(element, dtype=object)
        return tf.TensorSpec([None] * a.ndim, tf.string)
    a = np.asarray(element)
    return tf.TensorSpec([None] + list(a.shape[1:]) if a.ndim else [], _dtype(a))


def _dtype(a: np.ndarray):
    return tf.string if a.dtype == object or a.dtype.kind in "SU" else tf.as_dtype(a.dtype)


def _to_tf(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _to_tf(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_to_tf(v) for v in x)
    if isinstance(x, Ragged):
        return tf.RaggedTensor.from_row_splits(x.values, x.row_splits, validate=False)
    if isinstance(x, list):  # unparsed batch of records
        return np.array(x, dtype=object)
    return x


def to_tf_dataset(dataset: Dataset, output_signature: Any = None) -> tf.data.Dataset:
    """``dataset`` as a ``tf.data.Dataset`` (see the module docs for the signature).

    Each iteration of the tf.data.Dataset starts a new recordflow iterator (a new epoch, with
    reshuffled orders). ``output_signature`` overrides the derived one.
    """
    sig = output_signature if output_signature is not None else globals()["output_signature"](dataset)
    if sig is None:
        peek = Dataset(dataset._source, dataset._ops).iterator()
        try:
            first = next(peek, None)
        finally:
            peek.close()
        if first is None:
            raise ValueError("to_tf_dataset: the dataset is empty; pass output_signature")
        sig = _infer(first)
    description = Dataset(dataset._source, dataset._ops)

    def generate():
        it = description.iterator()
        try:
            for element in it:
                yield _to_tf(element)
        finally:
            it.close()

    return tf.data.Dataset.from_generator(generate, output_signature=sig)

