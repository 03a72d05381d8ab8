"""Keras 3 integration: :class:`PyDataset`, random access to batches through index files.

``keras.utils.PyDataset`` (the modern form of ``keras.utils.Sequence``) asks for ``len(ds)``
batches and for batch ``ds[i]`` in any order, from any of its worker threads, and calls
``on_epoch_end()`` between epochs. recordflow answers from the ``.idx`` index files (written by
``rf.RecordWriter(..., index=True)``, ``recordflow index`` or built in memory when missing):
batch ``i`` of an epoch is records ``perm[i * batch_size : (i + 1) * batch_size]`` of a
permutation of all records of all files, read by offset and parsed in C++ (GIL released).
``on_epoch_end`` draws the next epoch's permutation from ``seed + epoch``; with
``shuffle=False`` batches are in file order. Every epoch's batches cover every record exactly
once (the last batch is smaller unless ``drop_remainder``).

``map=`` takes a native op instead of a spec (``rf.vision.imagenet_train`` /
``imagenet_eval``): batches of JPEG shards from ``recordflow convert`` are decoded and
augmented in C++, with augmentation seeds drawn from (op seed, epoch, batch index).
``state_dict()`` / ``load_state_dict()`` and the :class:`DataCheckpoint` callback keep the
data position with the model's checkpoints.

Works with every Keras 3 backend (TensorFlow, JAX, PyTorch): batches are NumPy arrays.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import keras
import numpy as np

from recordflow import _core
from recordflow.errors import InvalidArgumentError, NotFoundError
from recordflow.example import FixedLen, Parser, Ragged, VarLen
from recordflow.stages import expand_globs

__all__ = ["PyDataset", "DataCheckpoint"]


class PyDataset(keras.utils.PyDataset):
    """Batches of TFRecord files of tf.train.Example for ``model.fit`` / ``evaluate`` /
    ``predict``, with random access by batch index.

    ``files``: a glob pattern, a path or a list of them (uncompressed TFRecord files; each
    file's ``.idx`` is used when present, else built in memory). ``spec``: the features to parse
    (rf.FixedLen / rf.VarLen). ``x``: the key of the model input, or a list of keys (a dict
    input). ``y``: the key of the target, or None (inputs only; for ``predict``).
    ``sample_weight``: optional key. With ``x=None`` a batch is the whole parsed dict.
    ``shuffle``: a new permutation per epoch, from ``seed + epoch``. ``drop_remainder``: drop
    the last, smaller batch. Further keyword arguments (``workers``, ``use_multiprocessing``,
    ``max_queue_size``) go to ``keras.utils.PyDataset``.

    VarLen features come out padded (``Ragged.to_dense``): Keras takes dense arrays only.
    """

    def __init__(self, files: str | Sequence[str], spec: Mapping[str, FixedLen | VarLen] | None = None,
                 batch_size: int = 32, x: str | Sequence[str] | None = None, y: str | None = None,
                 sample_weight: str | None = None, shuffle: bool = True, seed: int = 0,
                 drop_remainder: bool = False, map: Any = None, **kwargs):
        super().__init__(**kwargs)
        if batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be >= 1, not {batch_size}")
        from recordflow.vision import NativeOp
        if map is not None and not isinstance(map, NativeOp):
            raise InvalidArgumentError("map must be a native op such as rf.vision.imagenet_train(...)")
        if map is None and spec is None:
            raise InvalidArgumentError("give a spec to parse, or a map= native op")
        if map is not None and spec is not None:
            raise InvalidArgumentError("give either spec or map=: the op reads the serialized Examples")
        self.files = _expand(files)
        self.map = map
        self.spec = dict(spec) if spec is not None else None
        keys = set(self.spec) if self.spec is not None else set((map.outputs or {}).keys())
        self.batch_size = int(batch_size)
        self.x, self.y, self.sample_weight = x, y, sample_weight
        for key in ([x] if isinstance(x, str) else list(x or [])) + [k for k in (y, sample_weight) if k]:
            if keys and key not in keys:
                raise InvalidArgumentError(
                    f"key '{key}' is not in the {'spec' if map is None else 'op outputs'} "
                    f"({sorted(keys)})")
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.drop_remainder = bool(drop_remainder)
        self.epoch = 0
        self._start = 0  # batches of this epoch already consumed before a load_state_dict
        self._parser = Parser(self.spec) if self.spec is not None else None
        self._local = threading.local()  # one reader per file and thread: readers are not thread-safe
        counts = []
        for f in self.files:
            counts.append(len(self._readers()[len(counts)]))
        self._starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).tolist()
        self.num_records = int(self._starts[-1])
        self._order = self._permutation()

    # ------------------------------------------------------------------ Keras protocol
    def __len__(self) -> int:
        """Batches left in this epoch (all of them, unless load_state_dict resumed mid-epoch)."""
        return self.batches_per_epoch - self._start

    @property
    def batches_per_epoch(self) -> int:
        """Batches in a whole epoch."""
        if self.drop_remainder:
            return self.num_records // self.batch_size
        return -(-self.num_records // self.batch_size)

    def __getitem__(self, index: int):
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"batch {index} out of range: {n} batches")
        index += self._start
        ids = self.batch_indices(index)
        records = self._read(ids)
        if self.map is not None:
            batch = self._map(records, index)
        else:
            batch = self._parser(records)
        return self._arrange(batch)

    def on_epoch_end(self) -> None:
        """Moves to the next epoch: a new permutation (seed + epoch) when shuffling."""
        self.set_epoch(self.epoch + 1)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        """The epoch and the batches of it consumed (torchdata's Stateful protocol). Keras
        does not say which batches it consumed: :class:`DataCheckpoint` passes that on
        (``batch``); alone, this is the start of the current epoch (plus a resumed offset)."""
        return {"epoch": self.epoch, "batch": self._start, "seed": self.seed,
                "num_records": self.num_records}

    def load_state_dict(self, state: Mapping) -> None:
        """Continues at ``state``: its epoch's permutation, from batch ``state["batch"]``
        (``len()`` counts the batches left in that epoch; the next epochs are whole)."""
        if int(state.get("num_records", self.num_records)) != self.num_records:
            raise InvalidArgumentError(
                f"state of a dataset of {state['num_records']} records, this one has "
                f"{self.num_records}")
        if int(state.get("seed", self.seed)) != self.seed:
            raise InvalidArgumentError(f"state of seed {state['seed']}, this dataset has {self.seed}")
        start = int(state.get("batch", 0))
        if not 0 <= start <= self.batches_per_epoch:
            raise InvalidArgumentError(f"batch {start} out of range: {self.batches_per_epoch} batches")
        self.set_epoch(int(state["epoch"]))
        self._start = start

    # ------------------------------------------------------------------ helpers
    def set_epoch(self, epoch: int) -> None:
        """Uses the permutation of ``epoch`` from now on, from its first batch."""
        self.epoch = int(epoch)
        self._start = 0
        self._order = self._permutation()

    def _map(self, records: list, index: int) -> dict:
        """The native op over one batch of serialized records. Its augmentation seeds see
        (epoch, batch index) as the iteration, so every batch of every epoch draws anew and
        a batch is the same whenever it is read."""
        from recordflow.dataset import Dataset
        ds = Dataset.from_records(records).batch(len(records)).map(self.map, num_parallel=1)
        it = ds.iterator(epoch=self.epoch * self.batches_per_epoch + index)
        try:
            out = next(it)
        finally:
            it.close()
        return out

    def batch_indices(self, index: int) -> np.ndarray:
        """The global record indices (over all files, in file order) of batch ``index`` in the
        current epoch."""
        return self._order[index * self.batch_size:(index + 1) * self.batch_size]

    def _permutation(self) -> np.ndarray:
        if not self.shuffle:
            return np.arange(self.num_records, dtype=np.int64)
        return np.random.default_rng([self.seed, self.epoch]).permutation(self.num_records)

    def _readers(self) -> list:
        readers = getattr(self._local, "readers", None)
        if readers is None:
            readers = []
            for f in self.files:
                index = f + ".idx"
                if os.path.exists(index):
                    readers.append(_core.IndexedRecordReader(f))
                else:
                    readers.append(_InMemoryIndex(f))
            self._local.readers = readers
        return readers

    def _read(self, ids: np.ndarray) -> list:
        readers = self._readers()
        out = []
        for i in ids.tolist():
            f = bisect.bisect_right(self._starts, i) - 1
            out.append(readers[f][i - self._starts[f]])
        return out

    def _arrange(self, batch: dict):
        batch = {k: (v.to_dense() if isinstance(v, Ragged) else v) for k, v in batch.items()}
        if self.x is None:
            return batch
        x = batch[self.x] if isinstance(self.x, str) else {k: batch[k] for k in self.x}
        if self.y is None:
            return (x,)
        if self.sample_weight is None:
            return x, batch[self.y]
        return x, batch[self.y], batch[self.sample_weight]

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_local"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._local = threading.local()


class DataCheckpoint(keras.callbacks.Callback):
    """Keeps the data position with the model's checkpoints, and resumes the right epoch.

    ``data``: an :class:`PyDataset` or a ``rf.tf.to_tf_dataset`` result (anything with
    ``set_epoch`` / ``state_dict`` / ``load_state_dict``). At the start of every epoch the
    data is set to that epoch, so ``model.fit(..., initial_epoch=e)`` trains epoch e on
    epoch e's order and augmentations, not epoch 0's. ``path``: where the state is written
    (pickle, atomically) every ``save_freq`` batches or at every epoch end (``"epoch"``);
    use the same frequency as the ``keras.callbacks.ModelCheckpoint`` it goes with.
    :meth:`restore` reads it back and returns the ``initial_epoch`` for ``fit``.

    ``state`` is the position after the batches Keras finished: {"epoch", "batch",
    "data": data.state_dict(...)}. Keras fixes the steps per epoch when ``fit`` starts: after
    a mid-epoch ``restore()``, finish that epoch with ``fit(..., epochs=e + 1,
    initial_epoch=e)`` and continue with another ``fit`` call.
    """

    def __init__(self, data: Any, path: str | os.PathLike | None = None,
                 save_freq: str | int = "epoch"):
        super().__init__()
        if save_freq != "epoch" and (not isinstance(save_freq, int) or save_freq < 1):
            raise InvalidArgumentError(f'save_freq must be "epoch" or a positive int, not {save_freq!r}')
        self.data = data
        self.path = None if path is None else os.fspath(path)
        self.save_freq = save_freq
        self._epoch = 0
        self._offset = 0  # batches of the epoch consumed before this run (a mid-epoch resume)
        self._resumed: dict | None = None
        self.state: dict | None = None

    def restore(self, path: str | os.PathLike | None = None) -> int:
        """Loads the saved state (from ``path`` or this callback's) into the data; returns the
        epoch to pass as ``fit(initial_epoch=...)`` (0 when nothing was saved)."""
        import pickle
        path = os.fspath(path) if path is not None else self.path
        if path is None or not os.path.exists(path):
            return 0
        with open(path, "rb") as f:
            state = pickle.load(f)
        self.data.load_state_dict(state["data"])
        self._resumed = state
        self.state = state
        return int(state["epoch"])

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = int(epoch)
        if self._resumed is not None and int(self._resumed["epoch"]) == self._epoch:
            # Loaded again here: Keras may have iterated the data before the first epoch
            # (building the model), which used up the position restore() loaded.
            self.data.load_state_dict(self._resumed["data"])
            self._offset = int(self._resumed["batch"])
        else:
            self._offset = 0
            self.data.set_epoch(self._epoch)
        self._resumed = None

    def on_train_batch_end(self, batch, logs=None):
        done = self._offset + int(batch) + 1
        if isinstance(self.save_freq, int) and done % self.save_freq == 0:
            self._save(self._state(done))

    def on_epoch_end(self, epoch, logs=None):
        # The next epoch from its start.
        self._save({"epoch": int(epoch) + 1, "batch": 0,
                    "data": _epoch_start_state(self.data, int(epoch) + 1)},
                   write=self.save_freq == "epoch")

    def _state(self, done: int) -> dict:
        if isinstance(self.data, PyDataset):
            data = dict(self.data.state_dict(), epoch=self._epoch, batch=done)
        else:
            data = self.data.state_dict(consumed=done)  # counted from the epoch's start
        return {"epoch": self._epoch, "batch": done, "data": data}

    def _save(self, state: dict, write: bool = True) -> None:
        self.state = state
        if self.path is None or not write:
            return
        import pickle
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump(state, f)
        os.replace(tmp, self.path)


def _epoch_start_state(data: Any, epoch: int) -> dict:
    if isinstance(data, PyDataset):
        return dict(data.state_dict(), epoch=epoch, batch=0)
    return {"epoch": epoch, "elements": 0, "checkpoint": None}


class _InMemoryIndex:
    """Random access to a file without an .idx: the index is built in memory once."""

    def __init__(self, path: str):
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".idx", delete=False) as f:
            tmp = f.name
        try:
            _core.write_index(path, tmp)
            self._reader = _core.IndexedRecordReader(path, tmp)
        finally:
            os.unlink(tmp)  # the reader holds the index in memory

    def __len__(self) -> int:
        return len(self._reader)

    def __getitem__(self, i: int) -> bytes:
        return self._reader[i]


def _expand(files: str | Sequence[str]) -> list[str]:
    paths = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    out = []
    for p in map(str, paths):
        if any(ch in p for ch in "*?["):
            # A pattern like "shards/train-*" also matches the .idx index files beside them.
            matched = [m for m in expand_globs(p) if not m.endswith(".idx")]
            if not matched:
                raise NotFoundError(f"no files match '{p}'")
            out += matched
        else:
            out.append(p)
    if not out:
        raise InvalidArgumentError("no files given")
    return out
