"""rf.Dataset: a tf.data-style input pipeline run by recordflow's C++ engine.

Over 600 lines: the Dataset's methods are the public API, each documented where it is
defined. Lowering the stages to the engine's pipeline is recordflow._lowering's job.

A Dataset is an immutable description of stages (plus a counter of the iterations started,
which decides each iteration's seeds: see :meth:`Dataset.iterator`); iterating it (or calling
:meth:`Dataset.iterator`) starts an iterator. Native stages (files, shard, interleave, shuffle, global_shuffle, repeat,
take, skip, cache, parse, batch, prefetch) run in C++ on a shared thread pool without the GIL.
A Python callable in ``map`` or ``filter`` splits the pipeline: everything before it runs in
C++, the callable and everything after it runs in Python: the callable in worker processes,
threads or on the consuming thread (``workers=``; see :meth:`Dataset.map`), the rest on the
consuming thread.

Example::

    ds = (rf.Dataset.from_files("train-*.tfrecord", shuffle_files=True, seed=0)
            .interleave(cycle_length=4)
            .shuffle(10_000, seed=0)
            .batch(256, drop_remainder=True)
            .parse({"image/encoded": rf.FixedLen([], "bytes"),
                    "image/class/label": rf.FixedLen([], "int64")})
            .prefetch())
    for batch in ds:   # dict of NumPy arrays
        ...
"""

from __future__ import annotations

import itertools as _itertools
import os
import weakref as _weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from recordflow import _core, _lowering, _workers
from recordflow import stages as _st
from recordflow.errors import InvalidArgumentError, UnimplementedError
from recordflow.example import Parser
from recordflow.parsing import _unbatch
from recordflow.stages import _int_arg

AUTOTUNE = _core.AUTOTUNE
INFINITE = -1  # cardinality of an endless pipeline (tf.data.INFINITE_CARDINALITY)
UNKNOWN = -2   # cardinality not known without running it (tf.data.UNKNOWN_CARDINALITY)


def _cpu_fraction(value: float) -> float:
    v = float(value)
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"max_cpu_fraction must be in [0, 1] (0: no cap), not {value!r}")
    return v


class Dataset:
    """An immutable pipeline description (its stages; only the iteration counter advances, on
    each ``iter()``). Methods return new Datasets; iterate to run it.

    ``stages`` is the description itself: a source stage (rf.stages.Files or Records), then
    one rf.stages dataclass per transformation. ``with_stages`` builds a Dataset from stages,
    so a pipeline can be inspected and rewritten (rf.sharding, rf.diagnose do)."""

    def __init__(self, stages: Iterable[_st.Stage]):
        self._stages = _check_stages(stages)
        # The most recent iterator, for stats(): weak, so dropping an iterator stops its
        # threads and frees its buffers at once. Its last stats are kept in _stats_box when it
        # is closed or dropped.
        self._last_iterator: _weakref.ref | None = None
        self._stats_box: dict = {}
        # Iterations started so far: iteration k reseeds every seeded stage with (seed, k), as
        # tf.data's reshuffle_each_iteration does (see iterator()).
        self._iterations = 0

    # ---------------------------------------------------------------- stages
    @property
    def stages(self) -> tuple:
        """The pipeline: its source stage, then its transformations in order (rf.stages)."""
        return self._stages

    def with_stages(self, stages: Iterable[_st.Stage]) -> "Dataset":
        """A new Dataset of ``stages`` (e.g. this one's, changed): a source stage first, then
        transformations. Its iteration counter starts at 0, as any new Dataset's; its options
        (:meth:`with_options`) are this one's."""
        return Dataset(stages)._copy_options(self)

    def with_options(self, max_threads: int | None = None,
                     max_cpu_fraction: float | None = None, cache_dir: str | None = None,
                     cache_size: int | str | None = None) -> "Dataset":
        """This pipeline with iterator options that every later ``iter()``/``iterator()``
        (and the framework adapters, which go through it) uses, and that datasets derived from
        it keep. ``max_threads``: at most this many engine threads (reading ahead, parsing,
        native maps, decoding); ``max_cpu_fraction``: at most this share of the process's
        cores, rounded down, at least one (0.4 leaves 60% to the training step). None keeps
        the current setting; 0 removes the cap. ``cache_dir`` / ``cache_size``: the local
        shard cache for remote files (see :meth:`from_files`)."""
        d = Dataset(self._stages)._copy_options(self)
        opts = dict(d._options)
        opts.update(_cache_options(cache_dir, cache_size))
        if max_threads is not None:
            opts["max_threads"] = _int_arg("max_threads", max_threads, 0)
        if max_cpu_fraction is not None:
            opts["max_cpu_fraction"] = _cpu_fraction(max_cpu_fraction)
        d._options = opts
        return d

    @property
    def options(self) -> dict:
        """The iterator options set with :meth:`with_options` (a copy)."""
        return dict(getattr(self, "_options", {}))

    def _copy_options(self, other: "Dataset") -> "Dataset":
        self._options = dict(getattr(other, "_options", {}))
        return self

    # ---------------------------------------------------------------- sources
    @staticmethod
    def from_files(pattern_or_paths: str | Sequence[str], compression: str | None = None,
                   shuffle_files: bool = False, seed: int | None = None,
                   on_corruption: str = "raise", verify_checksums: bool = True,
                   cache_dir: str | None = None,
                   cache_size: int | str | None = None) -> "Dataset":
        """Records of TFRecord files: a glob pattern, a path, or a list of them (globs are
        expanded and sorted). ``compression``: None (from each file name), "", "GZIP", "ZLIB".
        ``shuffle_files``: a new file order every epoch (seeded). ``on_corruption``: "raise"
        or "skip" (counted and reported by the reader).

        ``cache_dir``: keep whole copies of remote files (s3://, gs://, http(s)://) and their
        .idx files in this local folder, validated by ETag and size on every open, and read
        them from there (docs/remote-storage.md). ``cache_size``: its limit in bytes (int, or
        "20G"); least recently used files are evicted. Both default to RECORDFLOW_CACHE_DIR /
        RECORDFLOW_CACHE_SIZE (10 GiB). The cache is process-wide: iterating this Dataset
        sets it for every remote open in the process. ``stats()["cache"]`` counts hits,
        misses, bytes fetched and evictions."""
        d = Dataset([_st.Files(pattern_or_paths, compression, shuffle_files, seed,
                               on_corruption, verify_checksums)])
        d._options = _cache_options(cache_dir, cache_size)
        return d

    @staticmethod
    def from_records(records: Iterable[bytes]) -> "Dataset":
        """Serialized records held in memory (tests, small data)."""
        return Dataset([_st.Records([bytes(r) for r in records])])

    # ---------------------------------------------------------------- transformations
    def _with(self, stage: _st.Stage) -> "Dataset":
        return Dataset(self._stages + (stage,))._copy_options(self)

    def shard(self, num_shards: int, index: int) -> "Dataset":
        """Every num_shards-th file (right after from_files) or record (elsewhere), from
        ``index``: the shards of N workers are disjoint and together complete."""
        return self._with(_st.Shard(num_shards, index))

    def interleave(self, cycle_length: int = AUTOTUNE, block_length: int = 1,
                   num_parallel: int = AUTOTUNE, deterministic: bool = True) -> "Dataset":
        """Reads ``cycle_length`` files at once, ``block_length`` records from each in turn;
        ``num_parallel`` files are read ahead on the thread pool."""
        return self._with(_st.Interleave(cycle_length, block_length, num_parallel, deterministic))

    def shuffle(self, buffer_size: int, seed: int | None = None,
                reshuffle_each_iteration: bool = True) -> "Dataset":
        """Outputs a uniformly random record of a ``buffer_size`` buffer (tf.data's shuffle)."""
        return self._with(_st.Shuffle(buffer_size, seed, reshuffle_each_iteration))

    def global_shuffle(self, seed: int | None = None, reshuffle_each_iteration: bool = True) -> "Dataset":
        """An exact permutation of all records of all files per epoch, read by random access
        through the .idx index files (built in memory when missing). Right after from_files
        (or a file shard); uncompressed files only."""
        return self._with(_st.GlobalShuffle(seed, reshuffle_each_iteration))

    def repeat(self, count: int | None = None) -> "Dataset":
        """Repeats the records ``count`` times (None: forever); each epoch reshuffles."""
        return self._with(_st.Repeat(-1 if count is None else count))

    def take(self, count: int) -> "Dataset":
        """The first ``count`` records (after ``batch``: batches); -1: all of them."""
        return self._with(_st.Take(count))

    def skip(self, count: int) -> "Dataset":
        """Drops the first ``count`` records (after ``batch``: batches)."""
        return self._with(_st.Skip(count))

    def cache(self, path: str | None = None) -> "Dataset":
        """Keeps the records of the first epoch in memory (or in the TFRecord file ``path``,
        which later runs read instead of the input once it is complete)."""
        return self._with(_st.Cache(path))

    def parse(self, spec: Mapping[str, Any]) -> "Dataset":
        """Parses tf.train.Example records with ``spec`` (see rf.parse_example): rf.FixedLen,
        rf.VarLen, rf.FixedLenSequenceFeature, rf.SparseFeature, rf.RaggedFeature. Before or
        after batch: a whole batch is parsed at once either way, and each feature comes out as
        rf.parse_example gives it (after batch) or rf.parse_single_example (before)."""
        return self._with(_st.Parse(spec))

    def map(self, fn: Callable[[Any], Any], num_parallel: int = AUTOTUNE,
            workers: str = "auto") -> "Dataset":
        """Applies ``fn`` to every element. A native op (rf.vision.imagenet_train(...), ...) runs
        in C++ on the pipeline's threads. A Python callable runs, results always in input order,
        with ``workers``:

        - "process": ``num_parallel`` spawn-started worker processes (``fn`` must pickle: a
          module-level function or a picklable object); arrays cross through shared memory;
        - "thread": a pool of ``num_parallel`` threads (parallel on free-threaded CPython, or
          for callables that release the GIL);
        - "inline": on the consuming thread;
        - "auto" (default): inline when ``num_parallel`` is 1; threads on free-threaded
          CPython; else ``fn`` is timed on the first elements and moves to processes when it
          takes >= 1 ms an element and pickles (else: threads when ``num_parallel`` > 1,
          inline otherwise). A callable that must share state with the caller: "thread".

        ``num_parallel=AUTOTUNE``: workers added while the consumer waits, up to the CPUs."""
        if isinstance(fn, _st.NativeOp):
            return self._with(_st.NativeMap(fn, num_parallel))
        return self._with(_st.Map(fn, num_parallel, workers))

    def filter(self, predicate: Callable[[Any], bool], num_parallel: int = AUTOTUNE,
               workers: str = "auto") -> "Dataset":
        """Keeps elements for which ``predicate`` is true; ``num_parallel`` and ``workers``
        as :meth:`map`'s (with processes only the verdict comes back)."""
        return self._with(_st.Filter(predicate, num_parallel, workers))

    def batch(self, batch_size: int, drop_remainder: bool = False) -> "Dataset":
        """Groups ``batch_size`` records (dense columns stack, VarLen stays ragged);
        ``drop_remainder`` drops a last, smaller batch."""
        return self._with(_st.Batch(batch_size, drop_remainder))

    def prefetch(self, n: int = AUTOTUNE) -> "Dataset":
        """Keeps up to ``n`` ready elements ahead of the consumer (AUTOTUNE: grown while the
        consumer waits, within the memory budget)."""
        return self._with(_st.Prefetch(n))

    # ---------------------------------------------------------------- tf.data's other stages
    # Run in Python, checkpointable (recordflow/_tfdata.py); see docs/pipeline.md's table.
    @staticmethod
    def range(*args: int) -> "Dataset":
        """The int64 scalars of ``range(stop)`` / ``range(start, stop[, step])``."""
        r = range(*args)
        return Dataset([_st.Range(r.start, r.stop, r.step)])

    @staticmethod
    def zip(*datasets: Any) -> "Dataset":
        """Tuples of the datasets' elements, until the shortest ends: ``zip(a, b)``, or one
        nested structure of datasets (``zip((a, (b, c)))``, ``zip({"x": a, "y": b})``), whose
        shape the elements take."""
        structure = datasets[0] if len(datasets) == 1 and not isinstance(datasets[0], Dataset) \
            else tuple(datasets)
        flat: list = []

        def index(x):
            if isinstance(x, Dataset):
                flat.append(x)
                return len(flat) - 1
            if isinstance(x, Mapping):
                return {k: index(v) for k, v in x.items()}
            if isinstance(x, (tuple, list)):
                return tuple(index(v) for v in x)
            raise TypeError(f"zip takes rf.Datasets (or nested tuples/dicts of them), not "
                            f"{type(x).__name__}")

        template = index(structure)
        return Dataset([_st.Zip(tuple(flat), template)])

    @staticmethod
    def sample_from_datasets(datasets: Sequence["Dataset"], weights: Sequence[float] | None = None,
                             seed: int | None = None,
                             stop_on_empty_dataset: bool = False) -> "Dataset":
        """Each element from an input drawn at random with probabilities ``weights`` (None:
        uniform). Deterministic for a seed and iteration; an exhausted input leaves the draw
        (``stop_on_empty_dataset``: ends it). Checkpointable (inputs and the generator)."""
        return Dataset([_st.SampleFrom(tuple(datasets), None if weights is None else
                                       tuple(np.asarray(weights, dtype=np.float64).ravel()),
                                       seed, stop_on_empty_dataset)])

    @staticmethod
    def choose_from_datasets(datasets: Sequence["Dataset"], choice_dataset: "Dataset",
                             stop_on_empty_dataset: bool = True) -> "Dataset":
        """For each integer i of ``choice_dataset``, the next element of ``datasets[i]``; an
        exhausted input ends it (``stop_on_empty_dataset`` False: its choices are skipped)."""
        return Dataset([_st.ChooseFrom(tuple(datasets), choice_dataset, stop_on_empty_dataset)])

    def unbatch(self) -> "Dataset":
        """Splits every element along its first dimension (VarLen columns: their rows)."""
        return self._with(_st.Unbatch())

    def padded_batch(self, batch_size: int, padded_shapes: Any = None,
                     padding_values: Any = None, drop_remainder: bool = False) -> "Dataset":
        """Groups ``batch_size`` elements, every component padded to ``padded_shapes`` (None,
        or a None / -1 dimension: the batch's longest; per component as the element's
        structure, or one for all) with ``padding_values`` (None: 0, b"" for strings)."""
        return self._with(_st.PaddedBatch(batch_size, padded_shapes, padding_values,
                                          drop_remainder))

    def enumerate(self, start: int = 0) -> "Dataset":
        """Pairs ``(index, element)``, the index an int64 counting from ``start``."""
        return self._with(_st.Enumerate(start))

    def take_while(self, predicate: Callable[[Any], bool]) -> "Dataset":
        """The elements before the first for which ``predicate`` is false."""
        return self._with(_st.TakeWhile(predicate))

    def ignore_errors(self, log_warning: bool = False) -> "Dataset":
        """Drops elements whose making raised in a Python stage before it (map, filter,
        flat_map, ...), counted: ``Iterator.errors_ignored``, ``stats()["errors_ignored"]``. The
        engine's errors still end the iteration (corrupt records: from_files(on_corruption=
        "skip"))."""
        return self._with(_st.IgnoreErrors(log_warning))

    def flat_map(self, fn: Callable[[Any], "Dataset"]) -> "Dataset":
        """The elements of ``fn(element)`` (an rf.Dataset) for every element, in order."""
        return self._with(_st.FlatMap(fn))

    def concatenate(self, other: "Dataset") -> "Dataset":
        """The elements of this Dataset, then those of ``other``."""
        return self._with(_st.Concatenate(other))

    def as_numpy_iterator(self):
        """An iterator of the elements with every tensor a NumPy value (elements already are;
        tensors a map returned, e.g. tf or torch ones, are converted)."""
        return _NumpyIterator(self.iterator())

    # ---------------------------------------------------------------- length and pickling
    def cardinality(self) -> int:
        """Elements one pass yields, without reading the data: a count, ``rf.INFINITE`` or
        ``rf.UNKNOWN`` (as tf.data). Files count through their ``.idx`` index or the
        ``summary.json`` of ``recordflow convert``; see docs/pipeline.md for each stage."""
        from recordflow._cardinality import cardinality
        if _tfdata_chain(self._stages):
            from recordflow._tfdata import cardinality as chain_cardinality
            return chain_cardinality(self._stages)
        return cardinality(self._stages)

    def __len__(self) -> int:
        n = self.cardinality()
        if n == INFINITE:
            raise TypeError("The dataset is infinite.")
        if n < 0:
            raise TypeError("The dataset length is unknown (no .idx index or convert summary "
                            "for its files, or a filter): see Dataset.cardinality().")
        return n

    def __bool__(self) -> bool:
        return True  # __len__ must not decide truth (nor read .idx files for it)

    def __getstate__(self) -> dict:
        # The description only (native ops pickle as their constructor's arguments); an
        # unpickled Dataset builds its engine objects when iterated.
        # The iteration counter goes along: a copy runs the same next epoch as the original.
        return {"stages": self._stages, "iterations": self.epoch, "options": self.options}

    def __setstate__(self, state: dict) -> None:
        self._stages = _check_stages(state["stages"])
        self._iterations = int(state.get("iterations", 0))
        self._options = dict(state.get("options", {}))
        self._last_iterator = None
        self._stats_box = {}

    # ---------------------------------------------------------------- running
    def iterator(self, memory_budget: int = 1 << 30, epoch: int | None = None,
                 max_threads: int | None = None,
                 max_cpu_fraction: float | None = None, cache_dir: str | None = None,
                 cache_size: int | str | None = None) -> "Iterator":
        """Starts the pipeline. ``memory_budget``: bytes the engine's buffers may hold (shuffle
        buffers, memory caches, interleave read-ahead, batches in flight, open files' record
        readers; see
        ``stats()["memory"]`` and docs/pipeline.md). A shuffle buffer or memory cache that
        alone exceeds it raises ResourceExhaustedError.

        ``epoch``: which iteration of this Dataset to run (None: the next one; the first is 0).
        Like tf.data's ``reshuffle_each_iteration``, iteration k of the same Dataset object
        gets a new order: seeded file orders, shuffles and augmentations (``rf.vision``
        presets) are a function of (seed, k), so iteration k is the same in every run.
        Passing ``epoch`` also makes the next iteration ``epoch + 1`` (resuming at an epoch).

        ``max_threads`` / ``max_cpu_fraction``: cap the engine's cores for this iterator (see
        :meth:`with_options`; None: the Dataset's options). ``cache_dir`` / ``cache_size``:
        the local shard cache (see :meth:`from_files`; None: the Dataset's options)."""
        memory_budget = _int_arg("memory_budget", memory_budget, 1)
        caps = self._caps(max_threads, max_cpu_fraction)
        self._apply_cache(cache_dir, cache_size)
        epoch = self._next_epoch(epoch)
        if _tfdata_chain(self._stages):
            from recordflow import _tfdata
            it = _tfdata.ChainIterator(self, memory_budget, epoch, caps=caps)
            self._last_iterator = _weakref.ref(it)
            it._stats_sink = self._stats_box
            return it
        plan = _lowering.lower(self._stages)
        it = Iterator(plan.native.make_iterator(memory_budget, epoch, **caps), plan.keys,
                      plan.tail)
        it.epoch = epoch
        self._last_iterator = _weakref.ref(it)
        it._stats_sink = self._stats_box
        return it

    def _next_epoch(self, epoch: int | None) -> int:
        if epoch is None:
            epoch = getattr(self, "_iterations", 0)  # (absent in objects unpickled without it)
        elif int(epoch) < 0:
            raise ValueError(f"epoch must be >= 0, not {epoch}")
        self._iterations = int(epoch) + 1
        return int(epoch)

    @property
    def epoch(self) -> int:
        """The iteration the next ``iterator()`` / ``iter()`` runs (0 before the first)."""
        return getattr(self, "_iterations", 0)

    def set_epoch(self, epoch: int) -> None:
        """Makes the next ``iterator()`` / ``iter()`` run iteration ``epoch`` (resuming a job
        at an epoch: iteration k's order depends only on the seeds and k)."""
        if int(epoch) < 0:
            raise ValueError(f"epoch must be >= 0, not {epoch}")
        self._iterations = int(epoch)

    def __iter__(self) -> "Iterator":
        return self.iterator()

    def _apply_cache(self, cache_dir: str | None, cache_size: int | str | None) -> None:
        opts = dict(self.options)
        opts.update(_cache_options(cache_dir, cache_size))
        if "cache_dir" in opts or "cache_size" in opts:
            _core.configure_shard_cache(opts.get("cache_dir"), opts.get("cache_size"))

    def _caps(self, max_threads: int | None, max_cpu_fraction: float | None) -> dict:
        opts = self.options
        if max_threads is not None:
            opts["max_threads"] = _int_arg("max_threads", max_threads, 0)
        if max_cpu_fraction is not None:
            opts["max_cpu_fraction"] = _cpu_fraction(max_cpu_fraction)
        return {"max_threads": opts.get("max_threads", 0),
                "max_cpu_fraction": opts.get("max_cpu_fraction", 0.0)}

    def restore(self, state: bytes, memory_budget: int = 1 << 30,
                max_threads: int | None = None,
                max_cpu_fraction: float | None = None, cache_dir: str | None = None,
                cache_size: int | str | None = None) -> "Iterator":
        """An iterator that continues exactly where ``state`` (from Iterator.checkpoint() of an
        iterator of an equal Dataset) was taken, in the same iteration (epoch) as the saved
        one; the next ``iterator()`` runs the iteration after it."""
        memory_budget = _int_arg("memory_budget", memory_budget, 1)
        caps = self._caps(max_threads, max_cpu_fraction)
        self._apply_cache(cache_dir, cache_size)
        if _tfdata_chain(self._stages):
            from recordflow import _tfdata
            if not bytes(state).startswith(_tfdata.MAGIC):
                raise InvalidArgumentError("restore: the checkpoint is not from an iterator of "
                                           "this Dataset (it has Python-side stages)")
            it = _tfdata.restore(self, bytes(state), memory_budget, caps)
            self._iterations = it.epoch + 1
            self._last_iterator = _weakref.ref(it)
            it._stats_sink = self._stats_box
            return it
        plan = _lowering.lower(self._stages)
        state, tail_states = _split_checkpoint(bytes(state), plan.tail)
        it = Iterator(plan.native.restore(state, memory_budget, **caps), plan.keys, plan.tail,
                      tail_states)
        # The checkpoint carries its iteration: the one after it comes next.
        it.epoch = it._it.iteration
        self._iterations = it.epoch + 1
        self._last_iterator = _weakref.ref(it)
        it._stats_sink = self._stats_box
        return it

    def stats(self) -> dict:
        """Per-stage throughput and waiting of the most recent iterator of this Dataset: live
        while it runs, and as it was when it was closed or dropped."""
        it = self._last_iterator() if self._last_iterator is not None else None
        if it is not None:
            return it.stats()
        if "last" in self._stats_box:
            return self._stats_box["last"]
        raise RuntimeError("stats(): this Dataset has not been iterated yet")

    def describe(self) -> str:
        """The native part of the pipeline, stage by stage."""
        if not self._stages[0].native:  # a Python source (range, zip, ...)
            return " -> ".join(f"python {stage.name}" for stage in self._stages)
        plan = _lowering.lower(self._stages)
        s = plan.native.debug_string()
        for stage in plan.tail:
            s += f" -> python {stage.name}"
        return s

    def __repr__(self) -> str:
        try:
            return f"rf.Dataset({self.describe()})"
        except Exception as e:  # repr never raises: show the stages and why they cannot run
            stages = " -> ".join(stage.name for stage in self._stages)
            return f"rf.Dataset({stages}; cannot run: {type(e).__name__}: {e})"


def _cache_options(cache_dir, cache_size) -> dict:
    out = {}
    if cache_dir is not None:
        out["cache_dir"] = os.fspath(cache_dir)
    if cache_size is not None:
        if isinstance(cache_size, bool) or not isinstance(cache_size, (int, str)):
            raise TypeError(f"cache_size must be an int or a str like '20G', not {cache_size!r}")
        if isinstance(cache_size, str):
            _core.parse_byte_size(cache_size)  # raises InvalidArgumentError now, not later
        elif cache_size <= 0:
            raise InvalidArgumentError(f"cache_size must be above 0, not {cache_size}")
        out["cache_size"] = cache_size
    return out


def _with_cache_stats(stats):
    """Adds the process's shard cache counters (when a cache is set) to an iterator's stats."""
    if isinstance(stats, dict) and _core.shard_cache()[0]:
        stats["cache"] = _core.shard_cache_stats()
    return stats


def _tfdata_chain(stages: tuple) -> bool:
    from recordflow._tfdata import uses_chain
    return uses_chain(stages)


class _NumpyIterator:
    """Dataset.as_numpy_iterator(): the iterator's elements with tensors as NumPy values."""

    def __init__(self, it):
        self._iterator = it

    def __iter__(self):
        return self

    def __next__(self):
        return _as_numpy(next(self._iterator))

    def checkpoint(self) -> bytes:
        return self._iterator.checkpoint()

    def close(self) -> None:
        self._iterator.close()


def _as_numpy(x):
    if isinstance(x, Mapping):
        return {k: _as_numpy(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_as_numpy(v) for v in x)
    if isinstance(x, list):
        return [_as_numpy(v) for v in x]
    if hasattr(x, "numpy") and callable(x.numpy):  # a tf.Tensor, or a CPU torch.Tensor
        return x.numpy()
    return x


def _check_stages(stages: Iterable[_st.Stage]) -> tuple:
    """``stages`` as a tuple, checked: rf.stages objects, a source first and only there."""
    if isinstance(stages, _st.Stage):
        raise TypeError("with_stages takes a sequence of stages (a source first), not one stage")
    stages = tuple(stages)
    for i, stage in enumerate(stages):
        if not isinstance(stage, _st.Stage):
            raise TypeError(f"stage {i} is not an rf.stages stage: {stage!r}")
    if not stages or not stages[0].source:
        raise InvalidArgumentError("a Dataset's stages start with a source stage "
                                   "(rf.stages.Files or rf.stages.Records)")
    for i, stage in enumerate(stages[1:], 1):
        if stage.source:
            raise InvalidArgumentError(f"stage {i} ({type(stage).__name__}) is a source: only "
                                       "the first stage can be one")
    return stages


def _stack(items: list) -> Any:
    """Batches Python-side elements: dicts of arrays are stacked per key, others listed."""
    first = items[0]
    if isinstance(first, Mapping):
        return {k: _stack([it[k] for it in items]) for k in first}
    if isinstance(first, (np.ndarray, np.generic, int, float)):
        return np.stack([np.asarray(x) for x in items])
    return list(items)


class Iterator:
    """Yields the elements of a Dataset. ``checkpoint()`` returns bytes that
    ``Dataset.restore`` continues from; ``stats()`` reports per-stage throughput.
    Closing it (or dropping its last reference) stops and joins the engine's threads and frees
    its buffers at once. Ctrl-C interrupts a waiting ``next()`` within ~0.1 s; see
    docs/pipeline.md for what the iterator does afterwards and after ``fork()``."""

    def __init__(self, native, keys, python_stages: tuple = (), tail_states: list | None = None):
        self._it = native
        self._keys = keys
        self._python_stages = python_stages
        self._stats_sink: dict | None = None  # set by Dataset: gets the final stats
        self._checkpointable = all(_checkpointable(s) for s in python_stages)
        # The generators reference the native iterator, never self: no reference cycle, so
        # dropping the last reference to an Iterator stops its threads at once (no cyclic GC).
        self._callables: list = []  # the map/filter stages' iterators (rf._workers)
        self._gen = _run_python_stages(python_stages, _NativeElements(native, keys),
                                       tail_states, self._callables)

    def __iter__(self) -> "Iterator":
        return self

    def __next__(self):
        try:
            return next(self._gen)
        except KeyboardInterrupt:
            # Without Python stages the element being fetched is kept for the next call.
            # Python stages are generators, which the interrupt has ended: stop the engine too.
            if self._python_stages:
                self._close_callables()
                self._it.close()
            raise

    def checkpoint(self) -> bytes:
        """The iterator's position as bytes, for ``Dataset.restore``."""
        if not self._checkpointable:
            raise UnimplementedError(
                "checkpoint() of a pipeline with Python-side batch/parse/take/skip after a "
                "Python callable: move them before the callable")
        state = self._it.checkpoint()
        if not self._callables:
            return state
        return _join_checkpoint(state, [c.state() for c in self._callables])

    def stats(self) -> dict:
        """Per-stage throughput and waiting of this iterator (see docs/pipeline.md); with
        Python callables, ``["python"]``: each one's executor, workers and elements in flight."""
        stats = _with_cache_stats(self._it.stats())
        if self._callables and isinstance(stats, dict):
            stats["python"] = [c.stats() for c in self._callables]
        return stats

    def close(self) -> None:
        """Stops the pipeline, its threads and worker processes. Idempotent."""
        self._save_stats()
        self._close_callables()
        self._it.close()

    def _close_callables(self) -> None:
        for c in self._callables:
            c.close()

    def _save_stats(self) -> None:
        sink = self._stats_sink
        if sink is not None:
            try:
                sink["last"] = _with_cache_stats(self._it.stats())
            except Exception:  # closed already, or inherited through fork()
                pass

    def __del__(self) -> None:
        # Only the stats are saved here: the native iterator stops when it is freed, right
        # after this (an Iterator is in no reference cycle).
        if getattr(self, "_it", None) is not None:
            self._save_stats()

    def __enter__(self) -> "Iterator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _NativeElements:
    """The native iterator's elements as Python values. A class, not a generator: an exception
    (KeyboardInterrupt) raised out of __next__ leaves it usable, where it would end a generator."""

    __slots__ = ("_native", "_keys")

    def __init__(self, native, keys):
        self._native = native
        self._keys = keys

    def __iter__(self):
        return self

    def __next__(self):
        e = self._native.next()
        if e is None:
            raise StopIteration
        return _lowering.to_python(e, self._keys)


# ---------------------------------------------------------------- the Python tail
# The stages from the first Python callable on run here, on the consuming thread, each a
# generator over the one before it: Map, Filter, and the stages that may follow them (Batch,
# Parse, Take, Skip, Prefetch). The engine's record-stream stages (shuffle, repeat, ...) have no
# Python version: after a callable they are refused, naming the fix.
def _run_python_stages(stages: tuple, stream, states: list | None = None,
                       callables: list | None = None):
    """The tail's iterators over ``stream``; each Map/Filter's iterator (rf._workers) is
    appended to ``callables``, restored from ``states[k]`` (k-th callable) when given."""
    for stage in stages:
        if isinstance(stage, (_st.Map, _st.Filter)):
            k = len(callables) if callables is not None else 0
            stream = _workers.CallableStage(
                stage.name, stage.fn if isinstance(stage, _st.Map) else stage.predicate,
                stage.num_parallel, stage.workers, stream, states[k] if states else None)
            if callables is not None:
                callables.append(stream)
            continue
        run = _PYTHON_RUNNERS.get(type(stage))
        if run is None:
            raise UnimplementedError(f"{stage.name} after a Python callable is not supported: "
                                     "put it before the map/filter")
        stream = run(stage, stream)
    return stream


# A checkpoint with Python callables: the engine's state and each callable's elements in
# flight (pickled: restore only checkpoints you trust), with a CRC32 of what follows the magic.
_TAIL_MAGIC = b"RFPYTAIL1\n"


def _join_checkpoint(native: bytes, tail_states: list) -> bytes:
    import pickle
    import zlib
    body = pickle.dumps({"native": bytes(native), "tail": tail_states}, protocol=5)
    return _TAIL_MAGIC + zlib.crc32(body).to_bytes(4, "little") + body


def _split_checkpoint(state: bytes, tail: tuple):
    """(the engine's state, the callables' states or None) of a checkpoint."""
    if not state.startswith(_TAIL_MAGIC):
        return state, None
    import pickle
    import zlib

    from recordflow.errors import DataLossError
    crc, body = state[len(_TAIL_MAGIC):len(_TAIL_MAGIC) + 4], state[len(_TAIL_MAGIC) + 4:]
    if len(crc) != 4 or zlib.crc32(body) != int.from_bytes(crc, "little"):
        raise DataLossError("checkpoint with Python callables: CRC32 mismatch (damaged state)")
    saved = pickle.loads(body)
    n = sum(isinstance(s, (_st.Map, _st.Filter)) for s in tail)
    if len(saved["tail"]) != n:
        raise InvalidArgumentError(f"the checkpoint has {len(saved['tail'])} Python "
                                   f"map/filter stages, this Dataset {n}")
    return saved["native"], saved["tail"]


def _checkpointable(stage: _st.Stage) -> bool:
    """Whether an iterator with ``stage`` in its Python tail can checkpoint: a Map or Filter
    saves its elements in flight (rf._workers), a Prefetch there holds nothing; a Python batch,
    parse, take or skip has state of its own that a checkpoint does not carry."""
    return isinstance(stage, (_st.Map, _st.Filter, _st.Prefetch))


def _python_batch(stage: _st.Batch, stream):
    buf = []
    for x in stream:
        buf.append(x)
        if len(buf) == stage.batch_size:
            yield _stack(buf)
            buf = []
    if buf and not stage.drop_remainder:
        yield _stack(buf)


def _python_parse(stage: _st.Parse, stream):
    parser = Parser(stage.spec)
    return (parser(x) if isinstance(x, list) else
            {k: _unbatch(v) for k, v in parser([x]).items()}
            for x in stream)


def _take_count(stage: _st.Take) -> int | None:
    return None if stage.count < 0 else stage.count  # -1: every element


_PYTHON_RUNNERS: dict = {
    _st.Batch: _python_batch,
    _st.Parse: _python_parse,
    _st.Take: lambda stage, stream: _itertools.islice(stream, _take_count(stage)),
    _st.Skip: lambda stage, stream: _itertools.islice(stream, stage.count, None),
    _st.Prefetch: lambda stage, stream: stream,  # the consuming thread runs the tail: no buffer
}
