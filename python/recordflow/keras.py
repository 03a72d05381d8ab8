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

Works with every Keras 3 backend (TensorFlow, JAX, PyTorch): batches are NumPy arrays.
"""

from __future__ import annotations

import bisect
import glob as _glob
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import keras
import numpy as np

from recordflow import _core
from recordflow.errors import InvalidArgumentError, NotFoundError
from recordflow.example import FixedLen, Parser, Ragged, VarLen

__all__ = ["PyDataset"]


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

    def __init__(self, files: str | Sequence[str], spec: Mapping[str, FixedLen | VarLen],
                 batch_size: int, x: str | Sequence[str] | None = None, y: str | None = None,
                 sample_weight: str | None = None, shuffle: bool = True, seed: int = 0,
                 drop_remainder: bool = False, **kwargs):
        super().__init__(**kwargs)
        if batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be >= 1, not {batch_size}")
        self.files = _expand(files)
        self.spec = dict(spec)
        self.batch_size = int(batch_size)
        self.x, self.y, self.sample_weight = x, y, sample_weight
        for key in ([x] if isinstance(x, str) else list(x or [])) + [k for k in (y, sample_weight) if k]:
            if key not in self.spec:
                raise InvalidArgumentError(f"key '{key}' is not in the spec")
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.drop_remainder = bool(drop_remainder)
        self.epoch = 0
        self._parser = Parser(self.spec)
        self._local = threading.local()  # one reader per file and thread: readers are not thread-safe
        counts = []
        for f in self.files:
            counts.append(len(self._readers()[len(counts)]))
        self._starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).tolist()
        self.num_records = int(self._starts[-1])
        self._order = self._permutation()

    # ------------------------------------------------------------------ Keras protocol
    def __len__(self) -> int:
        if self.drop_remainder:
            return self.num_records // self.batch_size
        return -(-self.num_records // self.batch_size)

    def __getitem__(self, index: int):
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"batch {index} out of range: {n} batches")
        ids = self.batch_indices(index)
        batch = self._parser(self._read(ids))
        return self._arrange(batch)

    def on_epoch_end(self) -> None:
        """Moves to the next epoch: a new permutation (seed + epoch) when shuffling."""
        self.set_epoch(self.epoch + 1)

    # ------------------------------------------------------------------ helpers
    def set_epoch(self, epoch: int) -> None:
        """Uses the permutation of ``epoch`` from now on."""
        self.epoch = int(epoch)
        self._order = self._permutation()

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
            matched = sorted(_glob.glob(p))
            if not matched:
                raise NotFoundError(f"no files match '{p}'")
            out += matched
        else:
            out.append(p)
    if not out:
        raise InvalidArgumentError("no files given")
    return out
