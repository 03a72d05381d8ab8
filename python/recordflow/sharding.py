"""Sharding plans: one rf.Dataset split across DDP ranks / JAX processes and loader workers.

A training job reads a dataset with ``world_size`` ranks (processes), each running
``num_workers`` loader workers: ``world_size * num_workers`` consumers in all. A
:class:`ShardingPlan` turns the user's :class:`recordflow.Dataset` into the part one consumer
reads, so that together the consumers see every record exactly once per epoch:

- **by file** when there are at least as many files as consumers: each consumer reads whole
  files. Files are assigned greedily by size (largest first, to the least-loaded consumer), so
  the consumers' byte counts are balanced even when the files are not;
- **by record** otherwise: every consumer reads the same record stream and keeps every
  ``consumers``-th record (``shard(consumers, consumer)`` after the file stage). Record shards
  differ by at most one record, at the cost of each consumer reading every file.

Shuffles are seeded per epoch: every seed in the pipeline (``from_files(shuffle_files=True)``,
``shuffle``, ``global_shuffle``) becomes ``(seed or plan.seed) + epoch``, like
``torch.utils.data.DistributedSampler.set_epoch``, so all ranks agree on the order they split
and every epoch is a new order. Only descriptions are built here; no iterator is started (a
DataLoader worker builds its own after the fork).

**Even consumers** (``even="drop"`` or ``"pad"``, the default of the torch adapters): DDP needs
every rank to run the same number of steps, or the ranks desync in a collective. The plan
counts each consumer's records (``.idx`` files, convert's ``summary.json``, else one native
scan of each file, cached; see :mod:`recordflow._cardinality`), assigns files balancing those
counts, and cuts every consumer's record stream, right after its record stages (before
parse/map/batch), to the same length: ``"drop"`` to the smallest consumer's count (the others'
last records are dropped for that epoch, counted by :meth:`ShardingPlan.dropped`; no record
is read twice), ``"pad"`` to the largest (the smaller consumers read their records again from
the start, as ``DistributedSampler(drop_last=False)`` pads). Every consumer then yields the
same number of batches, with or without ``drop_remainder``. The rule needs no collective: every
rank computes every consumer's count from the same files.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import os
from collections.abc import Mapping
from typing import Literal

from recordflow._cardinality import INFINITE, cardinality, file_records
from recordflow.dataset import Dataset
from recordflow.errors import InvalidArgumentError
from recordflow.stages import (
    RECORD_STAGES,
    Files,
    GlobalShuffle,
    Interleave,
    Repeat,
    Shard,
    Shuffle,
    Take,
)

Mode = Literal["auto", "files", "records"]
Even = Literal["drop", "pad", None]

# Stages that must sit directly on the file source (optionally after a file shard).
_FILE_STAGES = (Interleave, GlobalShuffle)


@dataclasses.dataclass(frozen=True)
class ShardingPlan:
    """Where one consumer stands in the job and how the data is split.

    ``rank`` / ``world_size``: the process among the job's processes (DDP rank, JAX process).
    ``worker_id`` / ``num_workers``: the loader worker within the process (0 / 1 without
    workers). ``seed`` replaces unseeded shuffles (all ranks must agree); ``epoch`` is added to
    every seed. ``mode``: "auto" (by file when there are at least as many files as consumers,
    else by record), "files" or "records".
    """

    rank: int = 0
    world_size: int = 1
    worker_id: int = 0
    num_workers: int = 1
    seed: int = 0
    epoch: int = 0
    mode: Mode = "auto"
    even: Even = None
    # Records per file (path -> count) when the caller has them; others are counted as needed.
    counts: Mapping[str, int] | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise InvalidArgumentError(f"rank {self.rank} of world_size {self.world_size}: need 0 <= rank < world_size")
        if self.num_workers < 1 or not 0 <= self.worker_id < self.num_workers:
            raise InvalidArgumentError(
                f"worker {self.worker_id} of {self.num_workers}: need 0 <= worker_id < num_workers")
        if self.mode not in ("auto", "files", "records"):
            raise InvalidArgumentError(f'mode must be "auto", "files" or "records", not {self.mode!r}')
        if self.even not in (None, "drop", "pad"):
            raise InvalidArgumentError(f'even must be None, "drop" or "pad", not {self.even!r}')

    @property
    def num_consumers(self) -> int:
        """world_size * num_workers."""
        return self.world_size * self.num_workers

    @property
    def consumer(self) -> int:
        """This consumer's index in [0, num_consumers): rank-major, then worker."""
        return self.rank * self.num_workers + self.worker_id

    def split_by(self, dataset: Dataset) -> str:
        """"files" or "records": how :meth:`apply` splits ``dataset``."""
        if not isinstance(dataset.stages[0], Files):
            if self.mode == "files":
                raise InvalidArgumentError('mode="files" needs a Dataset.from_files source')
            return "records"
        if self.mode != "auto":
            return self.mode
        files = _own_files(dataset)[0]
        if len(files) < self.num_consumers:
            return "records"
        if self.even is not None and self.num_consumers > 1:
            # Whole files rarely split records evenly: when equalizing them would drop (or pad)
            # more than 2% of the records, split by record instead (at most consumers - 1).
            counts = [_records_of(f, dataset, self.counts) for f in files]
            if None not in counts:
                loads = [0] * self.num_consumers
                order = {f: i for i, f in enumerate(files)}
                for c, part in enumerate(assign_files(files, self.num_consumers, counts)):
                    loads[c] = sum(counts[order[f]] for f in part)
                spread = (sum(loads) - min(loads) * len(loads) if self.even == "drop"
                          else max(loads) * len(loads) - sum(loads))
                if spread > 0.02 * sum(loads):
                    return "records"
        return "files"

    def apply(self, dataset: Dataset, consumer_records: list[int] | None = None) -> Dataset:
        """The part of ``dataset`` this consumer reads, with epoch-seeded shuffles (and, with
        ``even``, cut or padded to the common record count). ``consumer_records``: a previous
        :meth:`consumer_records` of the same dataset and layout (it does not change with the
        epoch), to skip counting again."""
        mine = self._split(dataset, self.even is not None)
        if self.even is None or self.num_consumers == 1:
            return mine
        counts = consumer_records if consumer_records is not None else self.consumer_records(dataset)
        if counts is None:
            return mine
        source, ops = mine.stages[0], list(mine.stages[1:])
        at = _record_stages_end(ops)
        own = counts[self.consumer]
        if self.even == "drop":
            target = min(counts)
            if own > target:
                ops.insert(at, Take(target))
        else:
            target = max(counts)
            if own < target:
                if own == 0:
                    raise InvalidArgumentError(
                        f"consumer {self.consumer} of {self.num_consumers} has no records to pad "
                        f"with (others have up to {target}): use fewer consumers or even=\"drop\"")
                ops[at:at] = [Repeat(-(-target // own)), Take(target)]
        return mine.with_stages([source] + ops)

    def consumer_records(self, dataset: Dataset) -> list[int] | None:
        """Records each consumer reads per epoch before ``even`` applies (its record stages:
        everything before parse/map/batch), or None when that stream is endless. Raises
        InvalidArgumentError when a count cannot be known."""
        out = []
        for c in range(self.num_consumers):
            plan = dataclasses.replace(self, rank=c // self.num_workers,
                                       worker_id=c % self.num_workers)
            part = plan._split(dataset, plan.even is not None)
            ops = part.stages[1:]
            n = cardinality(part.stages[:1 + _record_stages_end(ops)], scan=True, counts=self.counts)
            if n == INFINITE:
                return None
            if n < 0:
                raise InvalidArgumentError(
                    "cannot count the records of each consumer (a file that cannot be read?), so "
                    "the ranks cannot be given equal steps: fix the files or pass even=None")
            out.append(n)
        return out

    def dropped(self, dataset: Dataset) -> int:
        """Records left out per epoch, job-wide, by ``even="drop"`` (for ``"pad"``: records
        read twice); 0 without ``even``. The same on every rank and worker."""
        if self.even is None or self.num_consumers == 1:
            return 0
        counts = self.consumer_records(dataset)
        if counts is None:
            return 0
        if self.even == "drop":
            return sum(counts) - min(counts) * len(counts)
        return max(counts) * len(counts) - sum(counts)

    def _split(self, dataset: Dataset, by_records: bool = False) -> Dataset:
        dataset = _seeded(dataset, self.seed, self.epoch)
        by = self.split_by(dataset)
        if self.num_consumers == 1:
            return dataset
        if by == "files":
            return self._by_file(dataset, by_records)
        return self._by_record(dataset)

    # ---------------------------------------------------------------- by file
    def _by_file(self, dataset: Dataset, by_records: bool = False) -> Dataset:
        files, ops = _own_files(dataset)
        if len(files) < self.num_consumers:
            raise InvalidArgumentError(
                f"{len(files)} files for {self.num_consumers} consumers: sharding by file needs "
                'at least one file per consumer (use mode="records")')
        weights = None
        if by_records:
            # Balance records, not bytes, when they are to be equal (or known).
            weights = [_records_of(f, dataset, self.counts) for f in files]
            if any(w is None for w in weights):
                weights = None
        mine = assign_files(files, self.num_consumers, weights)[self.consumer]
        return dataset.with_stages((dataset.stages[0].replace(paths=tuple(mine)),) + ops)

    # ---------------------------------------------------------------- by record
    def _by_record(self, dataset: Dataset) -> Dataset:
        source, ops = dataset.stages[0], list(dataset.stages[1:])
        shard = Shard(self.num_consumers, self.consumer)
        if not isinstance(source, Files):
            return dataset.with_stages([source, shard] + ops)
        # After the stages that read files (a user's file shard, interleave, global_shuffle):
        # everything before the record shard must give every consumer the same stream.
        at = 0
        if at < len(ops) and isinstance(ops[at], Shard):
            at += 1
        if at < len(ops) and isinstance(ops[at], _FILE_STAGES):
            if isinstance(ops[at], Interleave) and not ops[at].deterministic:
                raise InvalidArgumentError(
                    "interleave(deterministic=False) gives each consumer a different order, so a "
                    'record shard of it is not a partition: use deterministic=True or mode="files"')
            at += 1
        if at == 0:
            # shard(1, 0) is a file shard that keeps every file; the shard after it is by record.
            ops[0:0] = [Shard(1, 0), shard]
        else:
            ops.insert(at, shard)
        return dataset.with_stages([source] + ops)


def assign_files(files: list[str], num_consumers: int,
                 weights: list[int] | None = None) -> list[list[str]]:
    """Files dealt to ``num_consumers`` consumers, balancing bytes (or ``weights``, e.g.
    record counts): largest first, each to the consumer with the least so far (ties: the lowest
    consumer). Each consumer's files keep their order in ``files``. Deterministic for the same
    list and sizes."""
    sizes = []
    for i, f in enumerate(files):
        if weights is not None:
            sizes.append((int(weights[i]), i))
            continue
        try:
            sizes.append((os.path.getsize(f), i))
        except OSError:
            sizes.append((0, i))
    return [[files[i] for i in part] for part in _deal(tuple(sizes), num_consumers)]


@functools.lru_cache(maxsize=64)
def _deal(sizes: tuple, num_consumers: int) -> tuple:
    # Every consumer of every rank deals the same files (an even plan deals once per consumer
    # it counts): cached, and a heap keeps it O(files log consumers).
    heap = [(0, 0, k) for k in range(num_consumers)]  # (load, files, consumer): ties as min()
    picked: list[list[int]] = [[] for _ in range(num_consumers)]
    for size, i in sorted(sizes, key=lambda s: (-s[0], s[1])):
        load, count, c = heapq.heappop(heap)
        picked[c].append(i)
        heapq.heappush(heap, (load + size, count + 1, c))
    return tuple(tuple(sorted(p)) for p in picked)


def _record_stages_end(ops) -> int:
    """Index in ``ops`` (transformations) of the first stage that is not a record stage
    (parse, map, batch, filter, ...)."""
    for i, op in enumerate(ops):
        if not isinstance(op, RECORD_STAGES):
            return i
    return len(ops)


def _records_of(path: str, dataset: Dataset, counts: Mapping[str, int] | None) -> int | None:
    if counts and path in counts:
        return counts[path]
    src = dataset.stages[0]
    return file_records(path, src.compression, scan=True, on_corruption=src.on_corruption)


def file_counts(dataset: Dataset) -> dict[str, int]:
    """Records per file of a from_files Dataset (.idx, convert's summary.json, else a native
    scan of each file); {} for other sources. Pass to ShardingPlan(counts=...) so that DataLoader
    workers do not count again."""
    if not isinstance(dataset.stages[0], Files):
        return {}
    out = {}
    for f in _files_of(dataset):
        n = _records_of(f, dataset, None)
        if n is not None:
            out[f] = n
    return out


def _files_of(dataset: Dataset) -> list[str]:
    """The source's files with globs expanded and sorted, as Dataset does."""
    return dataset.stages[0].expanded_paths()


def _own_files(dataset: Dataset) -> tuple[list[str], tuple]:
    """The files the dataset reads after the user's own file shard (if any), and the stages
    after that shard."""
    files, ops = _files_of(dataset), dataset.stages[1:]
    if ops and isinstance(ops[0], Shard):
        files, ops = files[ops[0].index::ops[0].num_shards], ops[1:]
    return files, ops


def _seeded(dataset: Dataset, seed: int, epoch: int) -> Dataset:
    """Every shuffle seed -> (seed or the plan's seed) + epoch."""
    def s(value):
        return ((seed if value is None else int(value)) + epoch) % (1 << 64)

    stages = []
    for stage in dataset.stages:
        if isinstance(stage, (Files, Shuffle, GlobalShuffle)):
            stage = stage.replace(seed=s(stage.seed))
        stages.append(stage)
    return dataset.with_stages(stages)


__all__ = ["ShardingPlan", "assign_files", "file_counts"]
