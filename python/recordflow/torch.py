"""PyTorch integration: recordflow batches as torch tensors, without copies.

Two ways in:

- :func:`loader` (recommended): iterates an rf.Dataset in the training process itself and
  hands each batch over as tensors. recordflow already reads, shuffles and parses on all cores
  in C++ with the GIL released, so no worker processes are needed, and on the CPU the tensors
  share memory with recordflow's buffers (``torch.from_numpy``). With ``device="cuda"`` and
  ``pin_memory=True`` each batch is staged in pinned host memory and copied on a side CUDA
  stream, one batch ahead of the consumer.
- :class:`IterableDataset` for code built around ``torch.utils.data.DataLoader``: it splits the
  data across DataLoader workers and DDP ranks so that every record is read at most once per
  epoch (exactly once with ``even=None``), and ``set_epoch(e)`` reshuffles as ``DistributedSampler.set_epoch`` does. Use
  ``DataLoader(ids, batch_size=None)``: the batches come from recordflow. Worker processes add
  a copy per batch (tensors travel through shared memory); ``loader`` does not.

Both give every rank the same number of batches per epoch (``even="drop"``, the default, or
``"pad"``: see :mod:`recordflow.sharding`), have a ``len()`` (batches per epoch of this rank)
and checkpoint mid-epoch through ``state_dict()`` / ``load_state_dict()`` (torchdata's Stateful
protocol: ``torchdata.stateful_dataloader.StatefulDataLoader``, Lightning and the like save and
restore them, per rank and per DataLoader worker); a resumed epoch yields exactly the batches
the interrupted one had not yet yielded.

What becomes of each feature (``keys=`` selects features; the others are dropped):

- numeric FixedLen columns -> ``torch.Tensor`` sharing memory with recordflow's buffer (kept
  alive by the tensor);
- bytes columns -> left as NumPy object arrays of ``bytes`` (torch has no bytes tensor); drop
  them with ``keys=`` when the model does not need them;
- VarLen columns (:class:`recordflow.Ragged`) -> ``ragged="split"`` (default): a
  ``(values, row_splits)`` pair of tensors; ``"dense"``: padded with ``ragged_pad``
  (``Ragged.to_dense``, a copy); ``"keep"``: the rf.Ragged itself. A nested rf.Ragged
  (rf.RaggedFeature with partitions) splits into nested pairs; ``"dense"`` refuses it
  (ValueError: one level of raggedness);
- rf.SparseFeature (:class:`recordflow.Sparse`) -> ``torch.sparse_coo_tensor`` (bytes values:
  the Sparse parts, indices and dense_shape as tensors).

Importing this module imports torch; it works without CUDA.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator as _Iterator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.utils.data

from recordflow.dataset import Dataset
from recordflow.errors import InvalidArgumentError
from recordflow.example import Ragged
from recordflow.parsing import Sparse
from recordflow.sharding import Even, Mode, ShardingPlan, file_counts

__all__ = ["IterableDataset", "Loader", "loader", "to_torch", "distributed_rank"]

_RAGGED = ("split", "dense", "keep")


def to_torch(batch: Any, keys: Sequence[str] | None = None, ragged: str = "split",
             ragged_pad: Any = 0) -> Any:
    """One element of an rf.Dataset as torch objects, sharing memory where it can.

    A dict is converted per key (only ``keys`` when given); a numeric NumPy array becomes a
    tensor over the same memory (``torch.from_numpy``; read-only arrays too: do not write to
    such a tensor); object arrays (bytes) stay as they are; rf.Ragged per ``ragged`` (see the
    module docs). Lists and tuples are converted item by item."""
    if ragged not in _RAGGED:
        raise ValueError(f"ragged must be one of {_RAGGED}, not {ragged!r}")
    return _convert(batch, keys, ragged, ragged_pad)


def _convert(x: Any, keys, ragged: str, pad: Any) -> Any:
    if isinstance(x, Mapping):
        names = x.keys() if keys is None else keys
        return {k: _convert(x[k], None, ragged, pad) for k in names}
    if isinstance(x, np.ndarray):
        return _tensor(x)
    if isinstance(x, Ragged):
        if ragged == "keep":
            return x
        if ragged == "dense":
            if isinstance(x.values, Ragged):
                raise ValueError("to_torch(ragged='dense'): a nested rf.Ragged (RaggedFeature with "
                                 "partitions) has more than one ragged dimension; use "
                                 "ragged='split' or 'keep'")
            return _tensor(x.to_dense(pad))
        return (_convert(x.values, None, ragged, pad), _tensor(x.row_splits))
    if isinstance(x, Sparse):
        values = np.asarray(x.values)
        if values.dtype == object:  # bytes: torch has no tensor for them; the parts as they are
            return Sparse(_tensor(x.indices), values, _tensor(x.dense_shape))
        return torch.sparse_coo_tensor(torch.from_numpy(np.ascontiguousarray(x.indices.T)),
                                       torch.from_numpy(np.ascontiguousarray(values)),
                                       tuple(int(d) for d in x.dense_shape),
                                       check_invariants=False)  # indices checked in C++
    if isinstance(x, (list, tuple)):
        return type(x)(_convert(v, None, ragged, pad) for v in x)
    if isinstance(x, np.generic) and x.dtype != object:
        return torch.from_numpy(np.asarray(x))
    return x


def _tensor(a: np.ndarray):
    if a.dtype == object or a.dtype.kind in "SUV":
        return a  # bytes / strings: torch has no tensor for them
    if not a.flags.writeable:
        # torch.from_numpy shares memory with read-only arrays too, but warns on each call.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return torch.from_numpy(a)
    return torch.from_numpy(a)


def distributed_rank(rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
    """(rank, world_size): the arguments when given, else ``torch.distributed``'s when it is
    initialized, else (0, 1)."""
    if rank is None or world_size is None:
        dist = torch.distributed
        initialized = dist.is_available() and dist.is_initialized()
        if rank is None:
            rank = dist.get_rank() if initialized else 0
        if world_size is None:
            world_size = dist.get_world_size() if initialized else 1
    return int(rank), int(world_size)


class IterableDataset(torch.utils.data.IterableDataset):
    """An rf.Dataset as a ``torch.utils.data.IterableDataset`` that splits its records across
    DataLoader workers and DDP ranks: per epoch, the union of what every worker of every rank
    yields is each record at most once, all of them but :attr:`dropped_records` (exactly once
    with ``even=None``; see :mod:`recordflow.sharding` for the plan: by file when there are
    enough files, else by record).

    ``dataset``: an rf.Dataset *without* a final ``repeat()`` (one pass is one epoch), usually
    ending in ``batch(...).parse(spec)``. ``rank`` / ``world_size``: from ``torch.distributed``
    when not given (pass them to simulate ranks). ``seed``: used by shuffles that have none (all
    ranks must agree). ``mode``: "auto", "files" or "records". ``even``: "drop" (default: every
    worker of every rank reads as many records as the smallest; :attr:`dropped_records` says how
    many are left out per epoch), "pad" (as many as the largest, reading some twice) or None
    (no equalizing: ranks may run different numbers of steps). ``num_workers``: the DataLoader's,
    for ``len()`` (checked when iterating). ``keys``, ``ragged``, ``ragged_pad``: as
    :func:`to_torch`.

    ``len()``: batches this rank yields per epoch (all its workers together). ``state_dict()``
    / ``load_state_dict()``: the position of the running epoch (of this worker, inside a
    DataLoader worker), restored by the next ``iter()``.

    Use ``DataLoader(ds, batch_size=None, num_workers=k)``, and call ``ds.set_epoch(e)`` before
    each epoch's ``iter(loader)``, as with ``DistributedSampler``. With
    ``persistent_workers=True`` the workers keep the epoch they started with: leave it off.

    Every worker builds its recordflow iterator when iteration starts (after the fork); this
    object holds only the description, so it pickles for the spawn start method too.
    """

    def __init__(self, dataset: Dataset, *, rank: int | None = None, world_size: int | None = None,
                 seed: int = 0, mode: Mode = "auto", keys: Sequence[str] | None = None,
                 ragged: str = "split", ragged_pad: Any = 0, even: Even = "drop",
                 num_workers: int | None = None):
        super().__init__()
        if not isinstance(dataset, Dataset):
            raise TypeError(f"IterableDataset takes an rf.Dataset, not {type(dataset).__name__}")
        if ragged not in _RAGGED:
            raise ValueError(f"ragged must be one of {_RAGGED}, not {ragged!r}")
        self.dataset = dataset.with_stages(dataset.stages)  # a description only
        self.rank, self.world_size = distributed_rank(rank, world_size)
        self.seed = int(seed)
        self.mode = mode
        self.keys = list(keys) if keys is not None else None
        self.ragged = ragged
        self.ragged_pad = ragged_pad
        self.even = even
        self.num_workers = None if num_workers is None else max(1, int(num_workers))
        self.epoch = 0
        self._counts: dict | None = None
        self._consumer_records: dict[int, list[int] | None] = {}  # by num_workers
        self._it = None        # the running epoch's rf iterator
        self._resume = None    # a loaded position, used by the next iter()
        self._finished = False
        self._paused = None    # the position of an epoch left mid-way (a loop's break)
        self.plan(0, 1)  # checks the arguments now rather than in a worker
        if even is not None and self.world_size * (self.num_workers or 1) > 1:
            # Once, here: DataLoader workers get the counts with the pickle.
            self._consumer_counts(self.num_workers or 1)

    def _file_counts(self) -> dict:
        if self._counts is None:
            self._counts = file_counts(self.dataset)
        return self._counts

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch for the next iteration: every shuffle seed becomes seed + epoch."""
        self.epoch = int(epoch)
        self._finished = False
        self._paused = None

    def plan(self, worker_id: int | None = None, num_workers: int | None = None) -> ShardingPlan:
        """The sharding plan of one worker of this rank (by default: the calling worker, from
        ``torch.utils.data.get_worker_info()``)."""
        if worker_id is None or num_workers is None:
            info = torch.utils.data.get_worker_info()
            worker_id, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        if self.even is not None and self.world_size * num_workers > 1:
            counts = self._file_counts()
        else:
            counts = self._counts
        return ShardingPlan(rank=self.rank, world_size=self.world_size, worker_id=worker_id,
                            num_workers=num_workers, seed=self.seed, epoch=self.epoch,
                            mode=self.mode, even=self.even, counts=counts)

    def _consumer_counts(self, num_workers: int) -> list[int] | None:
        if num_workers not in self._consumer_records:
            plan = self.plan(0, num_workers)
            self._consumer_records[num_workers] = plan.consumer_records(self.dataset)
        return self._consumer_records[num_workers]

    def shard(self, worker_id: int | None = None, num_workers: int | None = None) -> Dataset:
        """The rf.Dataset one worker of this rank reads in the current epoch."""
        plan = self.plan(worker_id, num_workers)
        counts = None
        if plan.even is not None and plan.num_consumers > 1:
            counts = self._consumer_counts(plan.num_workers)
        return plan.apply(self.dataset, counts)

    @property
    def dropped_records(self) -> int:
        """Records left out per epoch job-wide by ``even="drop"`` (read twice under "pad"),
        for the DataLoader's ``num_workers`` given to the constructor (default 1)."""
        return self.plan(0, self.num_workers or 1).dropped(self.dataset)

    def __len__(self) -> int:
        workers = self.num_workers or 1
        total = 0
        for w in range(workers):
            n = self.shard(w, workers).cardinality()
            if n < 0:
                raise TypeError("the number of batches per epoch is not known (see "
                                "rf.Dataset.cardinality(): a filter, or files without .idx?)")
            total += n
        return total

    def _worker(self) -> tuple[int, int]:
        info = torch.utils.data.get_worker_info()
        worker_id, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        if self.num_workers is not None and info is not None and num_workers != self.num_workers:
            raise InvalidArgumentError(
                f"IterableDataset(num_workers={self.num_workers}) runs in a DataLoader with "
                f"num_workers={num_workers}: pass the DataLoader's")
        return worker_id, num_workers

    def __iter__(self) -> _Iterator:
        worker_id, num_workers = self._worker()
        shard = self.shard(worker_id, num_workers)
        resume, self._resume = self._resume, None
        self._finished = False
        self._paused = None
        if resume is None:
            # Iteration `epoch`: augmentations (rf.vision seeds) change per epoch as well as the
            # shuffles, which the plan already reseeds with seed + epoch.
            it = shard.iterator(epoch=self.epoch)
        else:
            _check_position(resume, self, worker_id, num_workers)
            if resume["done"]:
                self._finished = True
                return
            it = (shard.restore(resume["position"]) if resume["position"]
                  else shard.iterator(epoch=self.epoch))
        self._it = it
        try:
            for batch in it:
                yield _convert(batch, self.keys, self.ragged, self.ragged_pad)
            self._finished = True
        except GeneratorExit:
            # The loop stopped mid-epoch (break, or the generator was dropped): keep where it
            # stood, so that state_dict() taken now still resumes after the last batch yielded.
            if self._it is it:
                try:
                    self._paused = bytes(it.checkpoint())
                except Exception as e:  # a pipeline that cannot checkpoint: state_dict() says so
                    self._paused = e
            raise
        finally:
            if self._it is it:  # an abandoned earlier epoch may be collected during a later one
                self._it = None
            it.close()

    # ---------------------------------------------------------------- checkpoints (Stateful)
    def state_dict(self) -> dict:
        """The position in the current epoch: before its first batch, after the last batch
        yielded (also after a ``break`` out of the loop), or at its end. Taken in the process
        that iterates (a DataLoader worker: the StatefulDataLoader collects it there)."""
        if self._resume is not None:
            return dict(self._resume)
        worker_id, num_workers = self._worker()
        position = b""
        if self._it is not None:
            position = bytes(self._it.checkpoint())
        elif isinstance(self._paused, Exception):
            raise self._paused
        elif self._paused is not None:
            position = self._paused
        return {"epoch": self.epoch, "seed": self.seed, "rank": self.rank,
                "world_size": self.world_size, "worker_id": worker_id,
                "num_workers": num_workers, "done": self._it is None and self._finished,
                "position": position}

    def load_state_dict(self, state: Mapping) -> None:
        """Restores a state_dict(): the next ``iter()`` continues that epoch where it was."""
        missing = {"epoch", "rank", "world_size", "done", "position"} - set(state)
        if missing:
            raise InvalidArgumentError(f"not an rf.torch state_dict: missing {sorted(missing)}")
        self.epoch = int(state["epoch"])
        self.seed = int(state.get("seed", self.seed))
        self._resume = dict(state)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["dataset"] = self.dataset.with_stages(self.dataset.stages)
        state["_it"] = None
        return state


def _check_position(state: Mapping, ds: IterableDataset, worker_id: int, num_workers: int) -> None:
    mine = (ds.rank, ds.world_size, worker_id, num_workers)
    theirs = (state["rank"], state["world_size"], state.get("worker_id", worker_id),
              state.get("num_workers", num_workers))
    if tuple(theirs) != mine:
        raise InvalidArgumentError(
            f"state_dict of rank {theirs[0]}/{theirs[1]}, worker {theirs[2]}/{theirs[3]} loaded "
            f"into rank {mine[0]}/{mine[1]}, worker {mine[2]}/{mine[3]}: each rank and worker "
            "resumes from its own state")


class Loader:
    """Iterates an rf.Dataset in this process and yields its batches as torch tensors (see
    :func:`loader`). Iterable many times: each ``iter()`` is one pass (epoch); ``set_epoch``
    reshuffles as in :class:`IterableDataset`."""

    def __init__(self, dataset: Dataset | IterableDataset, device: Any = None, pin_memory: bool = False,
                 non_blocking: bool = True, keys: Sequence[str] | None = None, ragged: str = "split",
                 ragged_pad: Any = 0, rank: int | None = None, world_size: int | None = None,
                 seed: int = 0, mode: Mode = "auto", even: Even = "drop"):
        if isinstance(dataset, IterableDataset):
            self._source = dataset
        else:
            self._source = IterableDataset(dataset, rank=rank, world_size=world_size, seed=seed,
                                           mode=mode, keys=keys, ragged=ragged, ragged_pad=ragged_pad,
                                           even=even)
        self.device = torch.device(device) if device is not None else None
        self.non_blocking = bool(non_blocking)
        cuda = self.device is not None and self.device.type == "cuda"
        self.pin_memory = bool(pin_memory)
        if self.pin_memory and not torch.cuda.is_available():
            warnings.warn("pin_memory=True but CUDA is not available: not pinning", stacklevel=2)
            self.pin_memory = False
        self._cuda = cuda
        self._stream = None
        # Passes without set_epoch() advance the epoch themselves, as each iteration of a
        # tf.data Dataset reshuffles: None before the first pass, True once the next pass's
        # epoch was set (set_epoch / load_state_dict), False after a pass started.
        self._epoch_set: bool | None = None

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch of the next pass: shuffles reseeded with seed + epoch, augmentations
        drawn for that epoch. Without it, each new pass runs the epoch after the last one."""
        self._source.set_epoch(epoch)
        self._epoch_set = True

    @property
    def dataset(self) -> IterableDataset:
        """The rf.torch.IterableDataset (with the sharding plan) this loader iterates."""
        return self._source

    def __len__(self) -> int:
        """Batches per epoch on this rank (the same on every rank unless even=None)."""
        return len(self._source)

    def state_dict(self) -> dict:
        """The position in the current epoch, after the last batch yielded (torchdata's
        Stateful protocol). With a CUDA device the batch copied ahead counts as yielded."""
        return self._source.state_dict()

    def load_state_dict(self, state: Mapping) -> None:
        """Restores a state_dict(): the next ``iter()`` continues that epoch."""
        self._source.load_state_dict(state)
        self._epoch_set = True

    def __iter__(self) -> _Iterator:
        if self._epoch_set is False:
            self._source.set_epoch(self._source.epoch + 1)
        self._epoch_set = False
        batches = iter(self._source)
        if self.device is None or self.device.type == "cpu":
            if self.pin_memory:
                return (_map_tensors(b, _pin) for b in batches)
            return batches
        if not self._cuda:
            return (_map_tensors(b, lambda t: t.to(self.device, non_blocking=self.non_blocking))
                    for b in batches)
        return self._cuda_batches(batches)

    def _cuda_batches(self, batches):
        # Copies batch k + 1 on a side stream while the consumer works on batch k.
        if self._stream is None:
            self._stream = torch.cuda.Stream(device=self.device)
        stream = self._stream
        pin = self.pin_memory

        def upload(b):
            with torch.cuda.stream(stream):
                return _map_tensors(b, lambda t: (_pin(t) if pin else t).to(
                    self.device, non_blocking=self.non_blocking))

        ahead = None
        for b in batches:
            nxt = upload(b)
            if ahead is not None:
                yield _hand_over(ahead, stream)
            ahead = nxt
        if ahead is not None:
            yield _hand_over(ahead, stream)


def _pin(t):
    return t.pin_memory() if isinstance(t, torch.Tensor) and t.device.type == "cpu" else t


def _hand_over(batch, stream):
    current = torch.cuda.current_stream(stream.device)
    current.wait_stream(stream)

    def record(t):
        t.record_stream(current)  # the caching allocator must not reuse it before `current` is done
        return t
    return _map_tensors(batch, record)


def _map_tensors(x, fn):
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, Mapping):
        return {k: _map_tensors(v, fn) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_map_tensors(v, fn) for v in x)
    return x


def loader(dataset: Dataset | IterableDataset, device: Any = None, pin_memory: bool = False,
           non_blocking: bool = True, keys: Sequence[str] | None = None, ragged: str = "split",
           ragged_pad: Any = 0, rank: int | None = None, world_size: int | None = None,
           seed: int = 0, mode: Mode = "auto", even: Even = "drop") -> Loader:
    """Batches of an rf.Dataset as torch tensors, with no worker processes.

    ``device``: None or "cpu" gives tensors that share memory with recordflow's buffers;
    a CUDA device copies each batch there (``pin_memory=True``: through pinned host memory, on
    a side stream, one batch ahead; ``non_blocking`` as ``Tensor.to``). Without CUDA,
    ``pin_memory`` is ignored with a warning. Under DDP the data is split across ranks
    (``rank``/``world_size`` from ``torch.distributed`` unless given) exactly as
    :class:`IterableDataset` does, every rank getting the same number of batches (``even``);
    ``set_epoch`` on the result reshuffles; ``len()``, ``state_dict()`` and
    ``load_state_dict()`` as :class:`IterableDataset`. ``keys``, ``ragged``, ``ragged_pad``:
    as :func:`to_torch`.

    Example::

        ds = rf.Dataset.from_files("train-*.tfrecord").shuffle(10_000, seed=0) \\
                 .batch(256, drop_remainder=True).parse(spec)
        train = rf.torch.loader(ds, keys=["image", "label"])
        for epoch in range(10):
            train.set_epoch(epoch)
            for batch in train:
                loss = step(batch["image"], batch["label"])
    """
    return Loader(dataset, device=device, pin_memory=pin_memory, non_blocking=non_blocking,
                  keys=keys, ragged=ragged, ragged_pad=ragged_pad, rank=rank,
                  world_size=world_size, seed=seed, mode=mode, even=even)
