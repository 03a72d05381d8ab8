"""TensorFlow integration: an rf.Dataset as a ``tf.data.Dataset``, for gradual migration.

:func:`to_tf_dataset` wraps an rf.Dataset in ``tf.data.Dataset.from_generator`` with an
``output_signature`` derived from the pipeline's parse spec and batch stage, so Keras
``model.fit`` and the rest of a tf.data pipeline see proper shapes and dtypes:

- FixedLen(shape, dtype) -> ``tf.TensorSpec([batch, *shape], dtype)`` (batch is the batch
  size with ``drop_remainder=True``, else None; no batch dimension without ``batch``);
  bytes -> ``tf.string``;
- VarLen(dtype) -> ``tf.RaggedTensorSpec([batch, None], dtype)`` built from ``row_splits``;
- rf.SparseFeature -> ``tf.SparseTensor``; rf.RaggedFeature -> ``tf.RaggedTensor`` (one ragged
  dimension per partition, its ``row_splits_dtype``); rf.FixedLenSequenceFeature -> its padded
  array (their signature is read from the first element);
- an unparsed pipeline -> ``tf.string`` records;
- a native op that declares its outputs (the rf.vision presets) after ``batch`` ->
  ``{"image": TensorSpec([batch, size, size, 3]), "label": TensorSpec([batch], int64)}``.

Each iteration of the tf.data.Dataset is the next iteration (epoch) of the rf.Dataset: a new
order and new augmentations, the same in every run. The result has ``state_dict()`` /
``load_state_dict()`` and ``set_epoch()``; its cardinality is the Dataset's when known.

Values cross into TensorFlow once per batch (TensorFlow copies NumPy input into its own
tensors); recordflow's reading and parsing keep running in C++ meanwhile. A pipeline that
ends in Python ``map`` callables has no spec to read the signature from: pass
``output_signature``, or the first element is read to infer it.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from recordflow import stages as st
from recordflow.dataset import INFINITE, Dataset
from recordflow.errors import UnimplementedError
from recordflow.example import FixedLen, Ragged, VarLen
from recordflow.parsing import Sparse

__all__ = ["to_tf_dataset", "output_signature"]

_TF_DTYPES = {"int64": tf.int64, "float32": tf.float32, "bytes": tf.string}


def output_signature(dataset: Dataset) -> Any:
    """The ``output_signature`` of ``dataset``'s elements, read from its stages (parse specs,
    batch, native maps that declare their outputs such as the rf.vision presets); None when
    Python callables or an op without declared outputs make it unknowable without running the
    pipeline."""
    spec = None
    mapped = None  # the op of the last native map
    batch_dim: Any = "none"  # no batch stage: one record per element
    for stage in dataset.stages[1:]:
        if isinstance(stage, (st.Map, st.Filter)):
            return None
        if isinstance(stage, st.Parse):
            if mapped is not None:
                return None
            spec = stage.spec
        elif isinstance(stage, st.NativeMap):
            if stage.op.outputs is None or spec is not None:
                return None  # undeclared, or a map over parsed columns: peek instead
            mapped = stage.op
        elif isinstance(stage, st.Batch):
            if mapped is not None and batch_dim == "none":
                return None  # a map on single records batched later: peek
            batch_dim = stage.batch_size if stage.drop_remainder else None
    batched = batch_dim != "none"
    lead = [batch_dim] if batched else []
    if mapped is not None:
        if mapped.drops_records and batched:
            lead = [None]  # skipped images shrink a batch
        return {key: tf.TensorSpec(lead + list(shape), tf.as_dtype(np.dtype(dtype)))
                for key, (shape, dtype) in mapped.outputs.items()}
    if spec is None:
        return tf.TensorSpec(lead, tf.string)
    if not all(isinstance(s, (FixedLen, VarLen)) for s in spec.values()):
        return None  # sparse / ragged / sequence features: shapes read from the first element
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
    if isinstance(element, Sparse):
        return tf.SparseTensorSpec([None] * len(element.dense_shape),
                                   _dtype(np.asarray(element.values)))
    if isinstance(element, tuple):
        return tuple(_infer(v) for v in element)
    if isinstance(element, Ragged):
        values = np.asarray(element.flat_values())
        rank = 1
        inner = element.values
        while isinstance(inner, Ragged):
            rank, inner = rank + 1, inner.values
        return tf.RaggedTensorSpec([None] * (rank + 1) + list(values.shape[1:]), _dtype(values),
                                   ragged_rank=rank,
                                   row_splits_dtype=tf.as_dtype(element.row_splits.dtype))
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
    if isinstance(x, Sparse):
        return tf.SparseTensor(x.indices, x.values, x.dense_shape)
    if isinstance(x, tuple):
        return tuple(_to_tf(v) for v in x)
    if isinstance(x, Ragged):
        return tf.RaggedTensor.from_row_splits(_to_tf(x.values), x.row_splits, validate=False)
    if isinstance(x, list):  # unparsed batch of records
        return np.array(x, dtype=object)
    return x


class _Source:
    """The recordflow side of one to_tf_dataset: which iteration runs next, and positions in
    it (recordflow checkpoints every ``checkpoint_every`` elements handed to TensorFlow), for
    state_dict(). A position between two checkpoints is the checkpoint before it plus the
    number of elements to replay after it."""

    _KEEP = 8  # checkpoints kept: enough for tf.data stages that read ahead of the consumer

    def __init__(self, dataset: Dataset, checkpoint_every: int):
        if checkpoint_every < 0:
            raise ValueError(f"checkpoint_every must be >= 0, not {checkpoint_every}")
        self.dataset = dataset.with_stages(dataset.stages)
        self.dataset.set_epoch(dataset.epoch)
        self.every = int(checkpoint_every)
        self._lock = threading.Lock()
        self._resume: dict | None = None
        self._epoch = self.dataset.epoch  # the iteration running (or next)
        self._produced = 0  # elements handed to TensorFlow in this iteration
        self._states: collections.deque = collections.deque(maxlen=self._KEEP)  # (count, state)

    def generate(self):
        with self._lock:
            resume, self._resume = self._resume, None
            self._states.clear()
            if resume is not None:
                epoch, count = resume["epoch"], resume["elements"]
                if resume["checkpoint"] is not None:
                    it = self.dataset.restore(resume["checkpoint"])
                    at = resume["checkpoint_elements"]
                    self._states.append((at, resume["checkpoint"]))
                else:
                    it = self.dataset.iterator(epoch=epoch)
                    at = 0
            else:
                it = self.dataset.iterator()
                epoch, count, at = it.epoch, 0, 0
            self._epoch, self._produced = epoch, at
        tracking = self.every > 0
        try:
            if tracking and at == 0:
                tracking = self._save(it, 0)  # the start: unseeded stages' seeds are in it
            for _ in range(count - at):  # replay from the checkpoint to the saved position
                if next(it, None) is None:
                    return
                with self._lock:
                    self._produced += 1
            for element in it:
                with self._lock:
                    self._produced += 1
                    n = self._produced
                if tracking and n % self.every == 0:
                    tracking = self._save(it, n)
                yield _to_tf(element)
        finally:
            it.close()

    def _save(self, it, n: int) -> bool:
        try:
            state = it.checkpoint()
        except UnimplementedError:
            return False  # Python-side stages: positions replay from the epoch's start
        with self._lock:
            self._states.append((n, state))
        return True

    def state_dict(self, consumed: int | None = None) -> dict:
        """{"epoch", "elements", "checkpoint", "checkpoint_elements"}: the position after
        ``consumed`` elements of the current iteration (default: all handed to TensorFlow),
        as the last checkpoint at or before it and the elements to replay after it."""
        with self._lock:
            n = self._produced if consumed is None else int(consumed)
            if not 0 <= n <= self._produced:
                raise ValueError(f"state_dict(consumed={n}): {self._produced} elements were "
                                 "produced in this iteration")
            before = [(m, st) for m, st in self._states if m <= n]
            if before:
                m, ckpt = before[-1]
            elif self._states:
                raise ValueError(f"state_dict(consumed={n}): the oldest checkpoint kept is at "
                                 f"element {self._states[0][0]}")
            else:
                m, ckpt = 0, None  # no checkpoints: replay from the epoch's start
            return {"epoch": self._epoch, "elements": n, "checkpoint": ckpt,
                    "checkpoint_elements": m}

    def load_state_dict(self, state: Mapping) -> None:
        with self._lock:
            self._resume = {"epoch": int(state["epoch"]), "elements": int(state["elements"]),
                            "checkpoint": state.get("checkpoint"),
                            "checkpoint_elements": int(state.get("checkpoint_elements", 0))}
            self._epoch, self._produced = self._resume["epoch"], self._resume["elements"]
            self._states.clear()
            if self._resume["checkpoint"] is not None:
                self._states.append((self._resume["checkpoint_elements"], self._resume["checkpoint"]))

    def set_epoch(self, epoch: int) -> None:
        with self._lock:
            if self._resume is not None and self._resume["epoch"] == int(epoch):
                return  # resuming inside this epoch: keep the saved position
            self._resume = None
            self.dataset.set_epoch(epoch)
            self._epoch, self._produced = int(epoch), 0
            self._states.clear()


def to_tf_dataset(dataset: Dataset, output_signature: Any = None, *,
                  checkpoint_every: int = 16, cardinality: bool = True) -> tf.data.Dataset:
    """``dataset`` as a ``tf.data.Dataset`` (see the module docs for the signature).

    Each iteration of the tf.data.Dataset starts a new recordflow iterator: iteration k runs
    iteration (epoch) k of ``dataset`` (new seeded orders and augmentations every epoch, as
    tf.data's ``reshuffle_each_iteration``). ``output_signature`` overrides the derived one.
    ``cardinality``: set the cardinality (``tf.data.experimental.assert_cardinality``) when
    recordflow knows it (Keras then knows the steps per epoch). tf.data checks it on every
    iteration, so a pipeline that resumes mid-epoch with ``load_state_dict`` (a shorter first
    iteration) needs ``cardinality=False``.

    The result also has ``state_dict(consumed=None)`` / ``load_state_dict(state)`` (torchdata's
    Stateful protocol) and ``set_epoch(epoch)``: the state names the epoch and the position
    after ``consumed`` elements of it (default: every element handed to TensorFlow so far);
    after ``load_state_dict`` the next iteration continues there, every remaining record once.
    ``checkpoint_every``: a recordflow checkpoint is taken at the start of an iteration and
    after every ``checkpoint_every`` elements (the last 8 kept); a position in between restores
    the checkpoint before it and replays the elements after it. 0: no checkpoints, a restore
    replays the epoch from its start (exact for seeded pipelines only).
    """
    sig = output_signature if output_signature is not None else globals()["output_signature"](dataset)
    if sig is None:
        # A short-lived iterator of a copy: the user's Dataset keeps its iteration count.
        peek = dataset.with_stages(dataset.stages).iterator()
        try:
            first = next(peek, None)
        finally:
            peek.close()
        if first is None:
            raise ValueError("to_tf_dataset: the dataset is empty; pass output_signature")
        sig = _infer(first)
    source = _Source(dataset, checkpoint_every)
    tfds = tf.data.Dataset.from_generator(source.generate, output_signature=sig)
    n = _cardinality(dataset) if cardinality else None
    if n is not None:
        tfds = tfds.apply(tf.data.experimental.assert_cardinality(n))
    # No prefetch injected behind the generator: state_dict() counts what the consumer got.
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    tfds = tfds.with_options(options)
    tfds.state_dict = source.state_dict
    tfds.load_state_dict = source.load_state_dict
    tfds.set_epoch = source.set_epoch
    tfds.recordflow_source = source
    return tfds


def _cardinality(dataset: Dataset) -> int | None:
    """Elements per iteration when recordflow knows it (Dataset.cardinality), tf.data's
    INFINITE for an endless pipeline, None when unknown."""
    n = int(dataset.cardinality())
    if n == INFINITE:
        return int(tf.data.INFINITE_CARDINALITY)
    return n if n >= 0 else None
