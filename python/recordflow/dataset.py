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

import glob as _glob
import numbers as _numbers
import os as _os
import weakref as _weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from recordflow import _core
from recordflow.errors import InvalidArgumentError, UnimplementedError
from recordflow.example import FixedLen, Parser, Ragged, VarLen, _specs

AUTOTUNE = _core.AUTOTUNE
INFINITE = -1  # cardinality of an endless pipeline (tf.data.INFINITE_CARDINALITY)
UNKNOWN = -2   # cardinality not known without running it (tf.data.UNKNOWN_CARDINALITY)

_NATIVE = {"shard", "interleave", "shuffle", "global_shuffle", "repeat", "take", "skip", "cache",
           "parse", "batch", "prefetch", "native_map"}


class Dataset:
    """An immutable pipeline description (its stages; only the iteration counter advances, on
    each ``iter()``). Methods return new Datasets; iterate to run it."""

    def __init__(self, _source: tuple, _ops: tuple = ()):
        self._source = _source
        self._ops = _ops
        # The most recent iterator, for stats(): weak, so dropping an iterator stops its
        # threads and frees its buffers at once. Its last stats are kept in _stats_box when it
        # is closed or dropped.
        self._last_iterator: _weakref.ref | None = None
        self._stats_box: dict = {}
        # Iterations started so far: iteration k reseeds every seeded stage with (seed, k), as
        # tf.data's reshuffle_each_iteration does (see iterator()).
        self._iterations = 0

    # ---------------------------------------------------------------- sources
    @staticmethod
    def from_files(pattern_or_paths: str | Sequence[str], compression: str | None = None,
                   shuffle_files: bool = False, seed: int | None = None,
                   on_corruption: str = "raise", verify_checksums: bool = True) -> "Dataset":
        """Records of TFRecord files: a glob pattern, a path, or a list of them (globs are
        expanded and sorted). ``compression``: None (from each file name), "", "GZIP", "ZLIB".
        ``shuffle_files``: a new file order every epoch (seeded). ``on_corruption``: "raise"
        or "skip" (counted and reported by the reader)."""
        paths = _paths_arg(pattern_or_paths)
        if compression is not None and not isinstance(compression, str):
            raise TypeError(f"from_files: compression must be None or a str, not {compression!r}")
        shuffle_files = _bool_arg("shuffle_files", shuffle_files)
        seed = _seed_arg("seed", seed)
        if on_corruption not in ("raise", "skip"):
            raise InvalidArgumentError(
                f"from_files: on_corruption must be 'raise' or 'skip', not {on_corruption!r}")
        verify_checksums = _bool_arg("verify_checksums", verify_checksums)
        return Dataset(("files", paths, compression, shuffle_files, seed, on_corruption, verify_checksums))

    @staticmethod
    def from_records(records: Iterable[bytes]) -> "Dataset":
        """Serialized records held in memory (tests, small data)."""
        return Dataset(("records", [bytes(r) for r in records]))

    # ---------------------------------------------------------------- transformations
    def _with(self, *op) -> "Dataset":
        return Dataset(self._source, self._ops + (op,))

    def shard(self, num_shards: int, index: int) -> "Dataset":
        """Every num_shards-th file (right after from_files) or record (elsewhere), from
        ``index``: the shards of N workers are disjoint and together complete."""
        num_shards = _int_arg("num_shards", num_shards, minimum=1)
        index = _int_arg("index", index, minimum=0)
        if index >= num_shards:
            raise InvalidArgumentError(f"shard: index ({index}) must be < num_shards ({num_shards})")
        return self._with("shard", num_shards, index)

    def interleave(self, cycle_length: int = AUTOTUNE, block_length: int = 1,
                   num_parallel: int = AUTOTUNE, deterministic: bool = True) -> "Dataset":
        """Reads ``cycle_length`` files at once, ``block_length`` records from each in turn;
        ``num_parallel`` files are read ahead on the thread pool."""
        return self._with("interleave", _int_arg("cycle_length", cycle_length, 1, autotune=True),
                          _int_arg("block_length", block_length, 1),
                          _int_arg("num_parallel", num_parallel, 1, autotune=True),
                          _bool_arg("deterministic", deterministic))

    def shuffle(self, buffer_size: int, seed: int | None = None,
                reshuffle_each_iteration: bool = True) -> "Dataset":
        """Outputs a uniformly random record of a ``buffer_size`` buffer (tf.data's shuffle)."""
        return self._with("shuffle", _int_arg("buffer_size", buffer_size, 1), _seed_arg("seed", seed),
                          _bool_arg("reshuffle_each_iteration", reshuffle_each_iteration))

    def global_shuffle(self, seed: int | None = None, reshuffle_each_iteration: bool = True) -> "Dataset":
        """An exact permutation of all records of all files per epoch, read by random access
        through the .idx index files (built in memory when missing). Right after from_files
        (or a file shard); uncompressed files only."""
        return self._with("global_shuffle", _seed_arg("seed", seed),
                          _bool_arg("reshuffle_each_iteration", reshuffle_each_iteration))

    def repeat(self, count: int | None = None) -> "Dataset":
        """Repeats the records ``count`` times (None: forever); each epoch reshuffles."""
        return self._with("repeat", -1 if count is None else _int_arg("count", count, -1))

    def take(self, count: int) -> "Dataset":
        """The first ``count`` records (after ``batch``: batches); -1: all of them."""
        return self._with("take", _int_arg("count", count, -1))

    def skip(self, count: int) -> "Dataset":
        """Drops the first ``count`` records (after ``batch``: batches)."""
        return self._with("skip", _int_arg("count", count, 0))

    def cache(self, path: str | None = None) -> "Dataset":
        """Keeps the records of the first epoch in memory (or in the TFRecord file ``path``,
        which later runs read instead of the input once it is complete)."""
        if path is not None and not isinstance(path, (str, _os.PathLike)):
            raise TypeError(f"cache: path must be None, a str or a path, not {path!r}")
        return self._with("cache", "" if path is None else _os.fspath(path))

    def parse(self, spec: Mapping[str, FixedLen | VarLen]) -> "Dataset":
        """Parses tf.train.Example records with ``spec`` (see rf.parse_example). Before or after
        batch: a whole batch is parsed at once either way."""
        _specs(spec, "spec")  # a bad spec fails here, naming the key
        return self._with("parse", dict(spec))

    def map(self, fn: Callable[[Any], Any], num_parallel: int = AUTOTUNE) -> "Dataset":
        """Applies ``fn`` to every element. A native op (rf.vision.imagenet_train(...), ...) runs
        in C++ on the pipeline's threads. A Python callable runs in Python, on the consuming
        thread (num_parallel > 1: on a thread pool, in order)."""
        from recordflow.vision import NativeOp
        if isinstance(fn, NativeOp):
            return self._with("native_map", fn, _int_arg("num_parallel", num_parallel, 1, autotune=True))
        if not callable(fn):
            raise TypeError("map takes a callable")
        return self._with("map", fn, _int_arg("num_parallel", num_parallel, 1, autotune=True))

    def filter(self, predicate: Callable[[Any], bool]) -> "Dataset":
        """Keeps elements for which ``predicate`` is true (Python, on the consuming thread)."""
        if not callable(predicate):
            raise TypeError("filter takes a callable")
        return self._with("filter", predicate)

    def batch(self, batch_size: int, drop_remainder: bool = False) -> "Dataset":
        """Groups ``batch_size`` records (dense columns stack, VarLen stays ragged);
        ``drop_remainder`` drops a last, smaller batch."""
        return self._with("batch", _int_arg("batch_size", batch_size, 1),
                          _bool_arg("drop_remainder", drop_remainder))

    def prefetch(self, n: int = AUTOTUNE) -> "Dataset":
        """Keeps up to ``n`` ready elements ahead of the consumer (AUTOTUNE: grown while the
        consumer waits, within the memory budget)."""
        return self._with("prefetch", _int_arg("prefetch: n", n, 0, autotune=True))

    # ---------------------------------------------------------------- length and pickling
    def cardinality(self) -> int:
        """Elements one pass yields, without reading the data: a count, ``rf.INFINITE`` or
        ``rf.UNKNOWN`` (as tf.data). Files count through their ``.idx`` index or the
        ``summary.json`` of ``recordflow convert``; see docs/pipeline.md for each stage."""
        from recordflow._cardinality import cardinality
        return cardinality(self._source, self._ops)

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
        return {"_source": self._source, "_ops": self._ops, "_iterations": self.epoch}

    def __setstate__(self, state: dict) -> None:
        self._source = state["_source"]
        self._ops = state["_ops"]
        self._iterations = int(state.get("_iterations", 0))
        self._last_iterator = None
        self._stats_box = {}

    # ---------------------------------------------------------------- rewriting (rf.doctor)
    # rf.diagnose tries variants of a user's pipeline (an interleave added, a map made parallel,
    # a bigger prefetch) by rebuilding it with one stage changed. Stages are the tuples that the
    # transformations above append: (name, *args), e.g. ("map", fn, num_parallel).
    def _stage_ops(self) -> tuple:
        """The transformations of this Dataset, in order, as (name, *args) tuples."""
        return self._ops

    def _with_ops(self, ops: Sequence[tuple]) -> "Dataset":
        """The same source with the transformations ``ops`` (from _stage_ops, changed)."""
        return Dataset(self._source, tuple(ops))

    def _source_paths(self) -> list[str] | None:
        """The files this Dataset reads (globs expanded), or None for in-memory records."""
        if self._source[0] != "files":
            return None
        return _expand(self._source[1])

    def _with_source_files(self, paths: Sequence[str], compression: str | None) -> "Dataset":
        """The same transformations over other files (the other from_files options kept)."""
        if self._source[0] != "files":
            raise ValueError("not a Dataset of files")
        _, _, _, shuffle_files, seed, on_corruption, verify = self._source
        return Dataset(("files", [str(p) for p in paths], compression, shuffle_files, seed,
                        on_corruption, verify), self._ops)

    def _source_compression(self) -> str | None:
        """The compression given to from_files (None: from each file name)."""
        return self._source[2] if self._source[0] == "files" else None

    # ---------------------------------------------------------------- running
    def _split(self) -> tuple[list, list]:
        native, python = [], []
        for op in self._ops:
            if python or op[0] not in _NATIVE:
                python.append(op)
            else:
                native.append(op)
        return native, python

    def _native(self, native_ops: list):
        src = self._source
        if src[0] == "files":
            _, paths, compression, shuffle_files, seed, on_corruption, verify = src
            ds = _core.PipelineDataset.from_files(_expand(paths), compression, shuffle_files, seed,
                                                  on_corruption, verify)
        else:
            ds = _core.PipelineDataset.from_records(src[1])
        keys = None
        for op in native_ops:
            name, args = op[0], op[1:]
            if name == "parse":
                keys = list(args[0])
                ds = ds.parse(_specs(args[0], "spec"))
            elif name == "native_map":
                ds = ds.map_native(args[0]._core, args[1])
            else:
                ds = getattr(ds, name)(*args)
        return ds, keys

    def iterator(self, memory_budget: int = 1 << 30, epoch: int | None = None) -> "Iterator":
        """Starts the pipeline. ``memory_budget``: bytes the engine's buffers may hold (shuffle
        buffers, memory caches, interleave read-ahead, batches in flight, open files' record
        readers; see
        ``stats()["memory"]`` and docs/pipeline.md). A shuffle buffer or memory cache that
        alone exceeds it raises ResourceExhaustedError.

        ``epoch``: which iteration of this Dataset to run (None: the next one; the first is 0).
        Like tf.data's ``reshuffle_each_iteration``, iteration k of the same Dataset object
        gets a new order: seeded file orders, shuffles and augmentations (``rf.vision``
        presets) are a function of (seed, k), so iteration k is the same in every run.
        Passing ``epoch`` also makes the next iteration ``epoch + 1`` (resuming at an epoch)."""
        memory_budget = _int_arg("memory_budget", memory_budget, 1)
        epoch = self._next_epoch(epoch)
        native, python = self._split()
        ds, keys = self._native(native)
        it = Iterator(ds.make_iterator(memory_budget, epoch), keys, python)
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

    def restore(self, state: bytes, memory_budget: int = 1 << 30) -> "Iterator":
        """An iterator that continues exactly where ``state`` (from Iterator.checkpoint() of an
        iterator of an equal Dataset) was taken, in the same iteration (epoch) as the saved
        one; the next ``iterator()`` runs the iteration after it."""
        memory_budget = _int_arg("memory_budget", memory_budget, 1)
        native, python = self._split()
        ds, keys = self._native(native)
        it = Iterator(ds.restore(bytes(state), memory_budget), keys, python)
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
        native, python = self._split()
        ds, _ = self._native(native)
        s = ds.debug_string()
        for op in python:
            s += f" -> python {op[0]}"
        return s

    def __repr__(self) -> str:
        try:
            return f"rf.Dataset({self.describe()})"
        except Exception as e:  # repr never raises: show the stages and why they cannot run
            stages = " -> ".join([self._source[0]] + [op[0] for op in self._ops])
            return f"rf.Dataset({stages}; cannot run: {type(e).__name__}: {e})"


# ---------------------------------------------------------------- argument checks
# Checked here, before nanobind (whose TypeError for a negative size names no argument).
def _int_arg(name: str, value: Any, minimum: int, autotune: bool = False) -> int:
    """``value`` as an int >= minimum (or AUTOTUNE when allowed); bool and float refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, _numbers.Integral):
        raise TypeError(f"{name} must be an int, not {value!r}")
    value = int(value)
    if autotune and value == AUTOTUNE:
        return value
    if value < minimum:
        also = " or rf.AUTOTUNE" if autotune else ""
        raise InvalidArgumentError(f"{name} must be >= {minimum}{also}, not {value}")
    if value >= 1 << 63:
        raise InvalidArgumentError(f"{name} must be < 2**63, not {value}")
    return value


def _bool_arg(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, not {value!r}")
    return bool(value)


def _seed_arg(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, _numbers.Integral):
        raise TypeError(f"{name} must be None or an int, not {value!r}")
    if not 0 <= int(value) < 1 << 64:
        raise InvalidArgumentError(f"{name} must be None or in [0, 2**64), not {value}")
    return int(value)


def _paths_arg(pattern_or_paths: Any) -> list[str]:
    """from_files' paths as a non-empty list of non-empty str."""
    if isinstance(pattern_or_paths, (str, bytes, _os.PathLike)):
        items = [pattern_or_paths]
    else:
        try:
            items = list(pattern_or_paths)
        except TypeError:
            raise TypeError("from_files takes a path, a glob pattern or a list of them, not "
                            f"{type(pattern_or_paths).__name__}") from None
    if not items:
        raise InvalidArgumentError("from_files: the list of paths is empty")
    paths = []
    for p in items:
        if not isinstance(p, (str, bytes, _os.PathLike)):
            raise TypeError(f"from_files: a path must be a str, bytes or os.PathLike, not "
                            f"{type(p).__name__} ({p!r})")
        p = _os.fsdecode(_os.fspath(p))
        if not p:
            raise InvalidArgumentError("from_files: a path is the empty string")
        paths.append(p)
    return paths


def _expand(paths: list[str]) -> list[str]:
    """Globs expanded (each sorted; each must match something), plain paths kept."""
    expanded = []
    for p in paths:
        if _core.is_remote_path(p):  # object stores: listed natively (io/filesystem.h)
            from recordflow import _remote
            _remote.prepare(p)
            expanded += _core.glob_paths(p) if any(ch in p for ch in "*?[") else [p]
            continue
        if any(ch in p for ch in "*?["):
            matched = sorted(_glob.glob(p))
            if not matched:
                from recordflow.errors import NotFoundError
                raise NotFoundError(f"no files match '{p}'")
            expanded += matched
        else:
            expanded.append(p)
    return expanded


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

    def __init__(self, native, keys, python_ops):
        self._it = native
        self._keys = keys
        self._python_ops = python_ops
        self._stats_sink: dict | None = None  # set by Dataset: gets the final stats
        self._checkpointable = all(op[0] == "filter" or (op[0] == "map" and op[2] in (1, AUTOTUNE))
                                   for op in python_ops)
        # The generators reference the native iterator, never self: no reference cycle, so
        # dropping the last reference to an Iterator stops its threads at once (no cyclic GC).
        stream = _NativeElements(native, keys)
        for op in python_ops:
            stream = _apply(op, stream)
        self._gen = stream

    def __iter__(self) -> "Iterator":
        return self

    def __next__(self):
        try:
            return next(self._gen)
        except KeyboardInterrupt:
            # Without Python stages the element being fetched is kept for the next call.
            # Python stages are generators, which the interrupt has ended: stop the engine too.
            if self._python_ops:
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


def _apply(op: tuple, stream):
    name = op[0]
    if name == "map":
        fn, parallel = op[1], op[2]
        if parallel <= 1:
            return (fn(x) for x in stream)
        return _parallel_map(fn, parallel, stream)
    if name == "filter":
        pred = op[1]
        return (x for x in stream if pred(x))
    if name == "batch":
        size, drop = op[1], op[2]

        def batches():
            buf = []
            for x in stream:
                buf.append(x)
                if len(buf) == size:
                    yield _stack(buf)
                    buf = []
            if buf and not drop:
                yield _stack(buf)
        return batches()
    if name == "parse":
        parser = Parser(op[1])
        return (parser(x) if isinstance(x, list) else
                {k: (v.values if isinstance(v, Ragged) else v[0]) for k, v in parser([x]).items()}
                for x in stream)
    if name == "take":
        import itertools
        return itertools.islice(stream, op[1])
    if name == "skip":
        import itertools
        return itertools.islice(stream, op[1], None)
    if name == "prefetch":
        return stream
    raise UnimplementedError(f"{name} after a Python callable is not supported: put it before the map/filter")


def _parallel_map(fn, parallel: int, stream):
    """fn over stream on `parallel` threads, results in order, at most 2 * parallel ahead."""
    import collections
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="rf-map") as pool:
        window = collections.deque()
        for x in stream:
            window.append(pool.submit(fn, x))
            if len(window) >= 2 * parallel:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()
