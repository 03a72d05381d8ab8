"""JAX integration: per-process sharding and batches ready for the devices.

In a multi-process JAX job every process reads its own part of the data:
:func:`process_shard` splits an rf.Dataset by ``jax.process_index()`` /
``jax.process_count()`` (the same plan as the PyTorch adapter: by file when there are at least
as many files as processes, else by record; shuffles seeded with ``seed + epoch`` so all
processes agree). :func:`loader` iterates it and hands each batch over

- as NumPy arrays (``sharding=None``), ready for ``jax.device_put`` (numeric arrays are views of
  recordflow's buffers: nothing is copied before the device transfer);
- or, with a ``jax.sharding.Sharding``, as global ``jax.Array``s built by
  ``jax.make_array_from_process_local_data(sharding, local_batch)``: each process contributes
  its local batch and the result spans every process's devices.

Bytes features cannot become jax arrays: they are dropped unless listed in ``keys`` (then kept
as NumPy object arrays). VarLen features (:class:`recordflow.Ragged`) are padded with
``Ragged.to_dense`` (``ragged="dense"``, default) or kept as rf.Ragged (``ragged="keep"``).
:func:`to_jax` converts a batch on the CPU without a copy (DLPack) where JAX allows it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np

from recordflow.dataset import Dataset
from recordflow.example import Ragged
from recordflow.sharding import Mode, ShardingPlan

__all__ = ["process_shard", "loader", "to_jax"]


def process_shard(dataset: Dataset, epoch: int = 0, seed: int = 0, mode: Mode = "auto",
                  process_index: int | None = None, process_count: int | None = None) -> Dataset:
    """The part of ``dataset`` this JAX process reads in ``epoch`` (``process_index`` /
    ``process_count`` default to ``jax.process_index()`` / ``jax.process_count()``)."""
    index = jax.process_index() if process_index is None else int(process_index)
    count = jax.process_count() if process_count is None else int(process_count)
    plan = ShardingPlan(rank=index, world_size=count, seed=seed, epoch=epoch, mode=mode)
    return plan.apply(dataset)


def _prepare(batch: Any, keys: Sequence[str] | None, ragged: str, pad: Any) -> Any:
    if not isinstance(batch, Mapping):
        return batch
    out = {}
    for k in (batch.keys() if keys is None else keys):
        v = batch[k]
        if isinstance(v, Ragged):
            if ragged == "keep":
                out[k] = v
                continue
            v = v.to_dense(pad)
        if isinstance(v, np.ndarray) and v.dtype == object and keys is None:
            continue  # bytes: no jax dtype for them
        out[k] = v
    return out


def to_jax(batch: Any) -> Any:
    """NumPy arrays of a batch (a dict, list or tuple of them) as jax arrays on the CPU,
    through DLPack: zero-copy when JAX accepts the buffer as it is (JAX copies when it needs
    a different alignment). Object arrays and rf.Ragged are left as they are."""
    if isinstance(batch, Mapping):
        return {k: to_jax(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_jax(v) for v in batch)
    if isinstance(batch, np.ndarray) and batch.dtype != object:
        return jax.dlpack.from_dlpack(batch)
    return batch


def loader(dataset: Dataset, sharding: Any = None, epoch: int | None = None, seed: int = 0,
           keys: Sequence[str] | None = None, ragged: str = "dense", ragged_pad: Any = 0,
           mode: Mode = "auto", process_index: int | None = None,
           process_count: int | None = None) -> "Loader":
    """One epoch of this process's shard of ``dataset`` (see :func:`process_shard`).

    ``epoch``: which epoch (None: the dataset's next iteration, ``dataset.epoch``, so that
    calling ``loader(ds)`` once per epoch gives a new order and new augmentations each
    time). Shuffle seeds become ``seed + epoch`` and augmentation seeds mix in the epoch: the
    same in every process and every run.

    ``sharding=None`` yields dicts of NumPy arrays (call ``jax.device_put`` on them);
    a ``jax.sharding.Sharding`` yields global ``jax.Array``s via
    ``jax.make_array_from_process_local_data``: the dataset's batch size is then the
    per-process batch. ``keys`` selects features (bytes features are dropped unless listed).
    The returned :class:`Loader` has ``state_dict()`` / ``load_state_dict()``.

    Example::

        mesh = jax.make_mesh((jax.device_count(),), ("data",),
                             axis_types=(jax.sharding.AxisType.Auto,))
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
        for epoch in range(10):
            for batch in rf.jax.loader(ds, sharding, epoch=epoch, keys=["image", "label"]):
                state = train_step(state, batch)
    """
    if ragged not in ("dense", "keep"):
        raise ValueError(f'ragged must be "dense" or "keep", not {ragged!r}')
    if epoch is None:
        epoch = dataset.epoch
    dataset.set_epoch(int(epoch) + 1)
    return Loader(dataset, sharding, int(epoch), seed, keys, ragged, ragged_pad, mode,
                  process_index, process_count)


class Loader:
    """One epoch of batches (an iterator; see :func:`loader`), with torchdata's Stateful
    protocol: ``state_dict()`` is the position after the batches returned so far;
    ``load_state_dict(state)`` continues from there (the rest of that epoch, each record
    once). The iterator starts on the first ``next``."""

    def __init__(self, dataset, sharding, epoch, seed, keys, ragged, ragged_pad, mode,
                 process_index, process_count):
        self.epoch = epoch
        self._sharding = sharding
        self._keys, self._ragged, self._pad = keys, ragged, ragged_pad
        self._shard = process_shard(dataset, epoch=epoch, seed=seed, mode=mode,
                                    process_index=process_index, process_count=process_count)
        self._it = None
        self._restore: bytes | None = None
        self._done = False
        self.batches = 0  # returned in this epoch

    def __iter__(self) -> "Loader":
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        if self._it is None:
            if self._restore is not None:
                self._it = self._shard.restore(self._restore)
            else:
                self._it = self._shard.iterator(epoch=self.epoch)
        batch = next(self._it, None)
        if batch is None:
            self.close()
            self._done = True
            raise StopIteration
        self.batches += 1
        local = _prepare(batch, self._keys, self._ragged, self._pad)
        if self._sharding is None:
            return local
        return jax.tree_util.tree_map(
            lambda a: jax.make_array_from_process_local_data(self._sharding, a), local)

    def state_dict(self) -> dict:
        """{"epoch", "batches", "checkpoint"}: checkpoint is None before the first batch."""
        if self._done:  # (the iterator is closed by then: this check comes first)
            return {"epoch": self.epoch, "batches": self.batches, "checkpoint": None, "done": True}
        if self._it is None:
            return {"epoch": self.epoch, "batches": self.batches, "checkpoint": self._restore}
        return {"epoch": self.epoch, "batches": self.batches, "checkpoint": self._it.checkpoint()}

    def load_state_dict(self, state: Mapping) -> None:
        """Continues at ``state`` (of a loader of the same dataset, epoch and process)."""
        if int(state["epoch"]) != self.epoch:
            raise ValueError(f"state of epoch {state['epoch']} loaded into the loader of epoch "
                             f"{self.epoch}: use loader(ds, epoch={state['epoch']})")
        self.close()
        self._restore = state.get("checkpoint")
        self._done = bool(state.get("done", False))
        self.batches = int(state.get("batches", 0))

    def close(self) -> None:
        """Stops the recordflow iterator (idempotent)."""
        if self._it is not None:
            self._it.close()
            self._it = None
