"""rf.Dataset: a tf.data-style input pipeline run by recordflow's C++ engine.

A Dataset is an immutable description of stages (plus a counter of the iterations started,
which decides each iteration's seeds: see :meth:`Dataset.iterator`); iterating it (or calling
:meth:`Dataset.iterator`) starts an iterator. Native stages (files, shard, interleave, shuffle, global_shuffle, repeat,
take, skip, cache, parse, batch, prefetch) run in C++ on a shared thread pool without the GIL.
A Python callable in ``map`` or ``filter`` splits the pipeline: everything before it runs in
C++, the callable and everything after it runs in Python on the consuming thread (the slow
path: use it for light work, or put it after ``batch``).

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

import collections as _collections
import itertools as _itertools
import weakref as _weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from recordflow import _core
from recordflow import stages as _st
from recordflow.errors import InvalidArgumentError, UnimplementedError
from recordflow.example import FixedLen, Parser, Ragged, VarLen, _specs
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
                     max_cpu_fraction: float | None = None) -> "Dataset":
        """This pipeline with iterator options that every later ``iter()``/``iterator()``
        (and the framework adapters, which go through it) uses, and that datasets derived from
        it keep. ``max_threads``: at most this many engine threads (reading ahead, parsing,
        native maps, decoding); ``max_cpu_fraction``: at most this share of the process's
        cores, rounded down, at least one (0.4 leaves 60% to the training step). None keeps
        the current setting; 0 removes the cap."""
        d = Dataset(self._stages)._copy_options(self)
        opts = dict(d._options)
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
                   on_corruption: str = "raise", verify_checksums: bool = True) -> "Dataset":
        """Records of TFRecord files: a glob pattern, a path, or a list of them (globs are
        expanded and sorted). ``compression``: None (from each file name), "", "GZIP", "ZLIB".
        ``shuffle_files``: a new file order every epoch (seeded). ``on_corruption``: "raise"
        or "skip" (counted and reported by the reader)."""
        return Dataset([_st.Files(pattern_or_paths, compression, shuffle_files, seed,
                                  on_corruption, verify_checksums)])

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

    def parse(self, spec: Mapping[str, FixedLen | VarLen]) -> "Dataset":
        """Parses tf.train.Example records with ``spec`` (see rf.parse_example). Before or after
        batch: a whole batch is parsed at once either way."""
        return self._with(_st.Parse(spec))

    def map(self, fn: Callable[[Any], Any], num_parallel: int = AUTOTUNE) -> "Dataset":
        """Applies ``fn`` to every element. A native op (rf.vision.imagenet_train(...), ...) runs
        in C++ on the pipeline's threads. A Python callable runs in Python, on the consuming
        thread (num_parallel > 1: on a thread pool, in order)."""
        if isinstance(fn, _st.NativeOp):
            return self._with(_st.NativeMap(fn, num_parallel))
        return self._with(_st.Map(fn, num_parallel))

    def filter(self, predicate: Callable[[Any], bool]) -> "Dataset":
        """Keeps elements for which ``predicate`` is true (Python, on the consuming thread)."""
        return self._with(_st.Filter(predicate))

    def batch(self, batch_size: int, drop_remainder: bool = False) -> "Dataset":
        """Groups ``batch_size`` records (dense columns stack, VarLen stays ragged);
        ``drop_remainder`` drops a last, smaller batch."""
        return self._with(_st.Batch(batch_size, drop_remainder))

    def prefetch(self, n: int = AUTOTUNE) -> "Dataset":
        """Keeps up to ``n`` ready elements ahead of the consumer (AUTOTUNE: grown while the
        consumer waits, within the memory budget)."""
        return self._with(_st.Prefetch(n))

    # ---------------------------------------------------------------- length and pickling
    def cardinality(self) -> int:
        """Elements one pass yields, without reading the data: a count, ``rf.INFINITE`` or
        ``rf.UNKNOWN`` (as tf.data). Files count through their ``.idx`` index or the
        ``summary.json`` of ``recordflow convert``; see docs/pipeline.md for each stage."""
        from recordflow._cardinality import cardinality
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
                 max_cpu_fraction: float | None = None) -> "Iterator":
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
        :meth:`with_options`; None: the Dataset's options)."""
        memory_budget = _int_arg("memory_budget", memory_budget, 1)
        caps = self._caps(max_threads, max_cpu_fraction)
        epoch = self._next_epoch(epoch)
        plan = _lower(self._stages)
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
                max_cpu_fraction: float | None = None) -> "Iterator":
        """An iterator that continues exactly where ``state`` (from Iterator.checkpoint() of an
        iterator of an equal Dataset) was taken, in the same iteration (epoch) as the saved
        one; the next ``iterator()`` runs the iteration after it."""
        memory_budget = _int_arg("memory_budget", memory_budget, 1)
        caps = self._caps(max_threads, max_cpu_fraction)
        plan = _lower(self._stages)
        it = Iterator(plan.native.restore(bytes(state), memory_budget, **caps), plan.keys,
                      plan.tail)
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
        plan = _lower(self._stages)
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


# ---------------------------------------------------------------- lowering
class _Plan:
    """A Dataset's stages lowered: the native pipeline (every stage up to the first Python
    callable), the keys of its parsed columns, and the stages after it (run in Python)."""

    __slots__ = ("native", "keys", "tail")

    def __init__(self, native, keys: list | None, tail: tuple):
        self.native, self.keys, self.tail = native, keys, tail


def _lower(stages: tuple) -> _Plan:
    """The one place stages become the engine's pipeline (_core.PipelineDataset)."""
    source, transformations = stages[0], stages[1:]
    split = next((i for i, s in enumerate(transformations) if not s.native), len(transformations))
    if isinstance(source, _st.Files):
        for path in source.paths:  # s3:// from Python: botocore's credentials, if it has any
            if path.startswith("s3://"):
                from recordflow import _remote
                _remote.prepare(path)
        ds = _core.PipelineDataset.from_files(list(source.paths), source.compression,
                                              source.shuffle_files, source.seed,
                                              source.on_corruption, source.verify_checksums)
    else:
        ds = _core.PipelineDataset.from_records(list(source.records))
    keys = None
    for s in transformations[:split]:
        if isinstance(s, _st.Shard):
            ds = ds.shard(s.num_shards, s.index)
        elif isinstance(s, _st.Interleave):
            ds = ds.interleave(s.cycle_length, s.block_length, s.num_parallel, s.deterministic)
        elif isinstance(s, _st.Shuffle):
            ds = ds.shuffle(s.buffer_size, s.seed, s.reshuffle_each_iteration)
        elif isinstance(s, _st.GlobalShuffle):
            ds = ds.global_shuffle(s.seed, s.reshuffle_each_iteration)
        elif isinstance(s, _st.Repeat):
            ds = ds.repeat(s.count)
        elif isinstance(s, _st.Take):
            ds = ds.take(s.count)
        elif isinstance(s, _st.Skip):
            ds = ds.skip(s.count)
        elif isinstance(s, _st.Cache):
            ds = ds.cache(s.path)
        elif isinstance(s, _st.Parse):
            keys = list(s.spec)
            ds = ds.parse(_specs(s.spec, "spec"))
        elif isinstance(s, _st.NativeMap):
            ds = ds.map_native(s.op._core, s.num_parallel)
        elif isinstance(s, _st.Batch):
            ds = ds.batch(s.batch_size, s.drop_remainder)
        elif isinstance(s, _st.Prefetch):
            ds = ds.prefetch(s.n)
        else:  # a Stage subclass the engine does not know
            raise UnimplementedError(f"no native lowering for {type(s).__name__}")
    return _Plan(ds, keys, tuple(transformations[split:]))


def _to_python(element: tuple, keys: list | None):
    batched, parsed, payload, names = element
    if names is not None:  # a native map's outputs name themselves
        keys = names
    if not parsed:
        return payload if batched else payload[0]
    out = {}
    for key, col in zip(keys, payload):
        value = Ragged(*col) if isinstance(col, tuple) else col
        if not batched:  # one record: drop the batch dimension
            value = value.values if isinstance(value, Ragged) else value[0]
        out[key] = value
    return out


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

    def __init__(self, native, keys, python_stages: tuple = ()):
        self._it = native
        self._keys = keys
        self._python_stages = python_stages
        self._stats_sink: dict | None = None  # set by Dataset: gets the final stats
        self._checkpointable = all(_checkpointable(s) for s in python_stages)
        # The generators reference the native iterator, never self: no reference cycle, so
        # dropping the last reference to an Iterator stops its threads at once (no cyclic GC).
        self._gen = _run_python_stages(python_stages, _NativeElements(native, keys))

    def __iter__(self) -> "Iterator":
        return self

    def __next__(self):
        try:
            return next(self._gen)
        except KeyboardInterrupt:
            # Without Python stages the element being fetched is kept for the next call.
            # Python stages are generators, which the interrupt has ended: stop the engine too.
            if self._python_stages:
                self._it.close()
            raise

    def checkpoint(self) -> bytes:
        """The iterator's position as bytes, for ``Dataset.restore``."""
        if not self._checkpointable:
            raise UnimplementedError(
                "checkpoint() of a pipeline with Python-side batch/parse/take/skip after a "
                "Python callable: move them before the callable")
        return self._it.checkpoint()

    def stats(self) -> dict:
        """Per-stage throughput and waiting of this iterator (see docs/pipeline.md)."""
        return self._it.stats()

    def close(self) -> None:
        """Stops the pipeline and joins its threads. Idempotent."""
        self._save_stats()
        self._it.close()

    def _save_stats(self) -> None:
        sink = self._stats_sink
        if sink is not None:
            try:
                sink["last"] = self._it.stats()
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
        return _to_python(e, self._keys)


# ---------------------------------------------------------------- the Python tail
# The stages from the first Python callable on run here, on the consuming thread, each a
# generator over the one before it: Map, Filter, and the stages that may follow them (Batch,
# Parse, Take, Skip, Prefetch). The engine's record-stream stages (shuffle, repeat, ...) have no
# Python version: after a callable they are refused, naming the fix.
def _run_python_stages(stages: tuple, stream):
    for stage in stages:
        run = _PYTHON_RUNNERS.get(type(stage))
        if run is None:
            raise UnimplementedError(f"{stage.name} after a Python callable is not supported: "
                                     "put it before the map/filter")
        stream = run(stage, stream)
    return stream


def _checkpointable(stage: _st.Stage) -> bool:
    """Whether an iterator with ``stage`` in its Python tail can checkpoint: a Filter or a
    sequential Map holds no element between two next() calls, so the engine's position is the
    iterator's; a parallel map's window, a Python batch, take or skip have state of their own
    that a checkpoint does not carry."""
    if isinstance(stage, _st.Filter):
        return True
    return isinstance(stage, _st.Map) and stage.num_parallel in (1, AUTOTUNE)


def _python_map(stage: _st.Map, stream):
    if stage.num_parallel <= 1:
        return (stage.fn(x) for x in stream)
    return _parallel_map(stage.fn, stage.num_parallel, stream)


def _python_filter(stage: _st.Filter, stream):
    return (x for x in stream if stage.predicate(x))


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
            {k: (v.values if isinstance(v, Ragged) else v[0]) for k, v in parser([x]).items()}
            for x in stream)


def _take_count(stage: _st.Take) -> int | None:
    return None if stage.count < 0 else stage.count  # -1: every element


def _parallel_map(fn, parallel: int, stream):
    """fn over stream on `parallel` threads, results in order, at most 2 * parallel ahead."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="rf-map") as pool:
        window = _collections.deque()
        for x in stream:
            window.append(pool.submit(fn, x))
            if len(window) >= 2 * parallel:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()


_PYTHON_RUNNERS: dict = {
    _st.Map: _python_map,
    _st.Filter: _python_filter,
    _st.Batch: _python_batch,
    _st.Parse: _python_parse,
    _st.Take: lambda stage, stream: _itertools.islice(stream, _take_count(stage)),
    _st.Skip: lambda stage, stream: _itertools.islice(stream, stage.count, None),
    _st.Prefetch: lambda stage, stream: stream,  # the consuming thread runs the tail: no buffer
}
