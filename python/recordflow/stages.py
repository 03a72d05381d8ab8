"""rf.stages: the typed stages of an rf.Dataset.

Over 600 lines: one small frozen dataclass per stage, each with its own argument checks.

A Dataset is a tuple of stages: a source (:class:`Files` or :class:`Records`) followed by
transformations, one frozen dataclass per transformation, with named and typed fields::

    ds = rf.Dataset.from_files("train-*.tfrecord").shuffle(1000, seed=0).batch(32)
    ds.stages
    # (Files(paths=('train-*.tfrecord',), ...), Shuffle(buffer_size=1000, seed=0, ...),
    #  Batch(batch_size=32, drop_remainder=False))
    bigger = ds.with_stages(s.replace(batch_size=64) if isinstance(s, rf.stages.Batch) else s
                            for s in ds.stages)

Every stage checks its fields when it is made (the Dataset methods make them, so a bad
argument fails there, naming it); ``replace(**changes)`` gives a changed copy, checked again.
``native`` says whether the C++ engine runs the stage: a Python callable (:class:`Map`,
:class:`Filter`) and every stage after it run in Python on the consuming thread.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Optional, Tuple

import numpy as np

from recordflow import _core
from recordflow.errors import InvalidArgumentError
from recordflow.example import _Plan
from recordflow.vision import NativeOp

AUTOTUNE = _core.AUTOTUNE

__all__ = ["Stage", "Files", "Records", "Shard", "Interleave", "Shuffle", "GlobalShuffle",
           "Repeat", "Take", "Skip", "Cache", "Parse", "NativeMap", "Map", "Filter", "Batch",
           "Prefetch", "expand_globs",
           # tf.data's other transformations (run in Python: recordflow/_tfdata.py)
           "Range", "Zip", "SampleFrom", "ChooseFrom", "Unbatch", "PaddedBatch", "Enumerate",
           "TakeWhile", "IgnoreErrors", "FlatMap", "Concatenate"]


def expand_globs(paths: Any) -> list[str]:
    """``paths`` (a path or glob pattern, or a list of them) with every pattern replaced by the
    files it matches, sorted; plain paths are kept as given (not checked). Raises NotFoundError
    naming a pattern that matches nothing. The same expansion the engine's from_files does."""
    return list(_core.expand_globs(_paths_arg(paths, "expand_globs")))


_frozen = dataclasses.dataclass(frozen=True)


class Stage:
    """Base of every stage. ``name``: the transformation's name (the Dataset method's);
    ``native``: run by the C++ engine (else in Python, as is everything after it);
    ``source``: a source stage (first in a Dataset, and only there)."""

    name: ClassVar[str] = ""
    native: ClassVar[bool] = True
    source: ClassVar[bool] = False

    def replace(self, **changes: Any) -> "Stage":
        """A copy with ``changes`` to its fields (checked as a new stage's)."""
        return dataclasses.replace(self, **changes)

    def _set(self, field: str, value: Any) -> None:
        # Normalizing a field in __post_init__ (int(np.int64(3)) -> 3): the one write a frozen
        # stage gets, while it is being made.
        object.__setattr__(self, field, value)


# ---------------------------------------------------------------- sources
@_frozen
class Files(Stage):
    """Records of TFRecord files (``Dataset.from_files``). ``paths``: paths and glob patterns,
    expanded (each sorted) when the pipeline is built. ``compression``: None (from each file
    name), "", "GZIP", "ZLIB". ``shuffle_files``: a new file order every epoch (from ``seed``).
    ``on_corruption``: "raise" or "skip". ``verify_checksums``: check every record's CRCs."""

    name: ClassVar[str] = "files"
    source: ClassVar[bool] = True

    paths: Tuple[str, ...]
    compression: Optional[str] = None
    shuffle_files: bool = False
    seed: Optional[int] = None
    on_corruption: str = "raise"
    verify_checksums: bool = True

    def __post_init__(self):
        self._set("paths", tuple(_paths_arg(self.paths, "from_files")))
        if self.compression is not None and not isinstance(self.compression, str):
            raise TypeError(
                f"from_files: compression must be None or a str, not {self.compression!r}")
        self._set("shuffle_files", _bool_arg("shuffle_files", self.shuffle_files))
        self._set("seed", _seed_arg("seed", self.seed))
        if self.on_corruption not in ("raise", "skip"):
            raise InvalidArgumentError(
                f"from_files: on_corruption must be 'raise' or 'skip', not {self.on_corruption!r}")
        self._set("verify_checksums", _bool_arg("verify_checksums", self.verify_checksums))

    def expanded_paths(self) -> list[str]:
        """The files read: patterns replaced by their matches (sorted), plain paths kept.
        Raises NotFoundError naming a pattern that matches nothing."""
        return list(_core.expand_globs(list(self.paths)))


@_frozen
class Records(Stage):
    """Serialized records held in memory (``Dataset.from_records``)."""

    name: ClassVar[str] = "records"
    source: ClassVar[bool] = True

    records: Tuple[bytes, ...] = dataclasses.field(repr=False)

    def __post_init__(self):
        records = tuple(self.records)
        for i, r in enumerate(records):
            if not isinstance(r, bytes):
                raise TypeError(f"from_records: record {i} must be bytes, not {type(r).__name__}")
        self._set("records", records)

    def __repr__(self) -> str:
        return f"Records(<{len(self.records)} records>)"


# ---------------------------------------------------------------- record stream
@_frozen
class Shard(Stage):
    """Every ``num_shards``-th file (right after Files) or record (elsewhere), from ``index``."""

    name: ClassVar[str] = "shard"

    num_shards: int
    index: int

    def __post_init__(self):
        self._set("num_shards", _int_arg("num_shards", self.num_shards, minimum=1))
        self._set("index", _int_arg("index", self.index, minimum=0))
        if self.index >= self.num_shards:
            raise InvalidArgumentError(
                f"shard: index ({self.index}) must be < num_shards ({self.num_shards})")


@_frozen
class Interleave(Stage):
    """``cycle_length`` files read at once, ``block_length`` records from each in turn;
    ``num_parallel`` files read ahead on the thread pool."""

    name: ClassVar[str] = "interleave"

    cycle_length: int = AUTOTUNE
    block_length: int = 1
    num_parallel: int = AUTOTUNE
    deterministic: bool = True

    def __post_init__(self):
        self._set("cycle_length", _int_arg("cycle_length", self.cycle_length, 1, autotune=True))
        self._set("block_length", _int_arg("block_length", self.block_length, 1))
        self._set("num_parallel", _int_arg("num_parallel", self.num_parallel, 1, autotune=True))
        self._set("deterministic", _bool_arg("deterministic", self.deterministic))


@_frozen
class Shuffle(Stage):
    """A uniformly random record of a ``buffer_size`` buffer (tf.data's shuffle)."""

    name: ClassVar[str] = "shuffle"

    buffer_size: int
    seed: Optional[int] = None
    reshuffle_each_iteration: bool = True

    def __post_init__(self):
        self._set("buffer_size", _int_arg("buffer_size", self.buffer_size, 1))
        self._set("seed", _seed_arg("seed", self.seed))
        self._set("reshuffle_each_iteration",
                  _bool_arg("reshuffle_each_iteration", self.reshuffle_each_iteration))


@_frozen
class GlobalShuffle(Stage):
    """An exact permutation of all records of all files per epoch (right after Files, or a
    file Shard; uncompressed files)."""

    name: ClassVar[str] = "global_shuffle"

    seed: Optional[int] = None
    reshuffle_each_iteration: bool = True

    def __post_init__(self):
        self._set("seed", _seed_arg("seed", self.seed))
        self._set("reshuffle_each_iteration",
                  _bool_arg("reshuffle_each_iteration", self.reshuffle_each_iteration))


@_frozen
class Repeat(Stage):
    """The records ``count`` times; -1: forever."""

    name: ClassVar[str] = "repeat"

    count: int = -1

    def __post_init__(self):
        self._set("count", _int_arg("count", self.count, -1))


@_frozen
class Take(Stage):
    """The first ``count`` elements; -1: all of them."""

    name: ClassVar[str] = "take"

    count: int

    def __post_init__(self):
        self._set("count", _int_arg("count", self.count, -1))


@_frozen
class Skip(Stage):
    """Drops the first ``count`` elements."""

    name: ClassVar[str] = "skip"

    count: int

    def __post_init__(self):
        self._set("count", _int_arg("count", self.count, 0))


@_frozen
class Cache(Stage):
    """The first epoch's records kept in memory (``path`` ""), or in the TFRecord file
    ``path``."""

    name: ClassVar[str] = "cache"

    path: str = ""

    def __post_init__(self):
        path = "" if self.path is None else self.path
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"cache: path must be None, a str or a path, not {self.path!r}")
        self._set("path", os.fspath(path))


# ---------------------------------------------------------------- elements
@_frozen
class Parse(Stage):
    """Parses tf.train.Example records with ``spec`` (feature key -> FixedLen / VarLen /
    rf.FixedLenSequenceFeature / rf.SparseFeature / rf.RaggedFeature)."""

    name: ClassVar[str] = "parse"

    spec: Mapping = dataclasses.field(hash=False)

    def __post_init__(self):
        _Plan(self.spec, "spec")  # a bad spec fails here, naming the key
        self._set("spec", dict(self.spec))


@_frozen
class NativeMap(Stage):
    """A native op (``rf.vision.imagenet_train(...)``, ...) run in C++ on the pipeline's
    threads, ``num_parallel`` elements at once."""

    name: ClassVar[str] = "native_map"

    op: NativeOp
    num_parallel: int = AUTOTUNE

    def __post_init__(self):
        if not isinstance(self.op, NativeOp):
            raise TypeError(f"NativeMap takes a native op (rf.vision...), not {self.op!r}")
        self._set("num_parallel", _int_arg("num_parallel", self.num_parallel, 1, autotune=True))


@_frozen
class Map(Stage):
    """A Python callable applied to every element, results in order. ``workers``: "process"
    (spawn-started worker processes), "thread", "inline" (the consuming thread) or "auto";
    ``num_parallel``: workers (AUTOTUNE: grown while the consumer waits). See
    docs/pipeline.md, "Python callables"."""

    name: ClassVar[str] = "map"
    native: ClassVar[bool] = False

    fn: Callable[[Any], Any]
    num_parallel: int = AUTOTUNE
    workers: str = "auto"

    def __post_init__(self):
        if not callable(self.fn):
            raise TypeError("map takes a callable")
        self._set("num_parallel", _int_arg("num_parallel", self.num_parallel, 1, autotune=True))
        _workers_arg("map", self.workers)


@_frozen
class Filter(Stage):
    """Keeps the elements for which the Python callable ``predicate`` is true; ``num_parallel``
    and ``workers`` as Map's."""

    name: ClassVar[str] = "filter"
    native: ClassVar[bool] = False

    predicate: Callable[[Any], bool]
    num_parallel: int = AUTOTUNE
    workers: str = "auto"

    def __post_init__(self):
        if not callable(self.predicate):
            raise TypeError("filter takes a callable")
        self._set("num_parallel", _int_arg("num_parallel", self.num_parallel, 1, autotune=True))
        _workers_arg("filter", self.workers)


def _workers_arg(what: str, value: Any) -> None:
    if value not in ("auto", "process", "thread", "inline"):
        raise InvalidArgumentError(f"{what}: workers must be 'auto', 'process', 'thread' or "
                                   f"'inline', not {value!r}")


@_frozen
class Batch(Stage):
    """Groups ``batch_size`` elements; ``drop_remainder`` drops a last, smaller batch."""

    name: ClassVar[str] = "batch"

    batch_size: int
    drop_remainder: bool = False

    def __post_init__(self):
        self._set("batch_size", _int_arg("batch_size", self.batch_size, 1))
        self._set("drop_remainder", _bool_arg("drop_remainder", self.drop_remainder))


@_frozen
class Prefetch(Stage):
    """Up to ``n`` ready elements ahead of the consumer (AUTOTUNE: grown while it waits)."""

    name: ClassVar[str] = "prefetch"

    n: int = AUTOTUNE

    def __post_init__(self):
        self._set("n", _int_arg("prefetch: n", self.n, 0, autotune=True))


# ---------------------------------------------------------------- tf.data's other stages
# Run in Python on the consuming thread (recordflow/_tfdata.py), checkpointable. A source among
# them takes other Datasets as inputs (``datasets``: a tuple of rf.Dataset, compared by identity).
def _datasets_arg(what: str, datasets: Any) -> tuple:
    from recordflow.dataset import Dataset
    items = tuple(datasets)
    if not items:
        raise InvalidArgumentError(f"{what}: the list of datasets is empty")
    for i, d in enumerate(items):
        if not isinstance(d, Dataset):
            raise TypeError(f"{what}: input {i} must be an rf.Dataset, not {type(d).__name__}")
    return items


@_frozen
class Range(Stage):
    """The int64 scalars ``range(start, stop, step)`` (``Dataset.range``)."""

    name: ClassVar[str] = "range"
    native: ClassVar[bool] = False
    source: ClassVar[bool] = True

    start: int
    stop: int
    step: int = 1

    def __post_init__(self):
        for f in ("start", "stop", "step"):
            self._set(f, _int_arg(f"range: {f}", getattr(self, f), -(1 << 63)))
        if self.step == 0:
            raise InvalidArgumentError("range: step must not be 0")


@_frozen
class Zip(Stage):
    """Tuples (or the nested structure ``structure``) of the inputs' elements, until the
    shortest input ends (``Dataset.zip``). ``datasets``: the inputs, flattened."""

    name: ClassVar[str] = "zip"
    native: ClassVar[bool] = False
    source: ClassVar[bool] = True

    datasets: Tuple[Any, ...] = dataclasses.field(hash=False, repr=False)
    structure: Any = dataclasses.field(default=None, hash=False, repr=False)

    def __post_init__(self):
        self._set("datasets", _datasets_arg("zip", self.datasets))


@_frozen
class SampleFrom(Stage):
    """Elements drawn at random from the inputs with probabilities ``weights``
    (``Dataset.sample_from_datasets``); an exhausted input leaves the draw (or ends it:
    ``stop_on_empty_dataset``)."""

    name: ClassVar[str] = "sample_from_datasets"
    native: ClassVar[bool] = False
    source: ClassVar[bool] = True

    datasets: Tuple[Any, ...] = dataclasses.field(hash=False, repr=False)
    weights: Optional[Tuple[float, ...]] = None
    seed: Optional[int] = None
    stop_on_empty_dataset: bool = False

    def __post_init__(self):
        self._set("datasets", _datasets_arg("sample_from_datasets", self.datasets))
        n = len(self.datasets)
        if self.weights is None:
            weights = (1.0 / n,) * n
        else:
            try:
                weights = tuple(float(w) for w in np.asarray(self.weights, dtype=np.float64).ravel())
            except (TypeError, ValueError):
                raise TypeError("sample_from_datasets: weights must be a list of numbers "
                                f"(one per dataset), not {self.weights!r}") from None
        if len(weights) != n:
            raise InvalidArgumentError(f"sample_from_datasets: {len(weights)} weights for {n} "
                                       "datasets")
        if any(not np.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
            raise InvalidArgumentError("sample_from_datasets: weights must be finite, >= 0 "
                                       f"and not all 0, not {list(weights)}")
        self._set("weights", weights)
        self._set("seed", _seed_arg("seed", self.seed))
        self._set("stop_on_empty_dataset",
                  _bool_arg("stop_on_empty_dataset", self.stop_on_empty_dataset))


@_frozen
class ChooseFrom(Stage):
    """For each element i of ``choice_dataset``, the next element of ``datasets[i]``
    (``Dataset.choose_from_datasets``)."""

    name: ClassVar[str] = "choose_from_datasets"
    native: ClassVar[bool] = False
    source: ClassVar[bool] = True

    datasets: Tuple[Any, ...] = dataclasses.field(hash=False, repr=False)
    choice_dataset: Any = dataclasses.field(hash=False, repr=False, default=None)
    stop_on_empty_dataset: bool = True

    def __post_init__(self):
        self._set("datasets", _datasets_arg("choose_from_datasets", self.datasets))
        _datasets_arg("choose_from_datasets: choice_dataset", [self.choice_dataset])
        self._set("stop_on_empty_dataset",
                  _bool_arg("stop_on_empty_dataset", self.stop_on_empty_dataset))


@_frozen
class Unbatch(Stage):
    """Splits each element along its first dimension into its rows."""

    name: ClassVar[str] = "unbatch"
    native: ClassVar[bool] = False


@_frozen
class PaddedBatch(Stage):
    """Groups ``batch_size`` elements, each component padded to ``padded_shapes`` (None, or a
    None/-1 dimension: the batch's longest) with ``padding_values`` (None: 0, or b"")."""

    name: ClassVar[str] = "padded_batch"
    native: ClassVar[bool] = False

    batch_size: int
    padded_shapes: Any = dataclasses.field(default=None, hash=False)
    padding_values: Any = dataclasses.field(default=None, hash=False)
    drop_remainder: bool = False

    def __post_init__(self):
        self._set("batch_size", _int_arg("batch_size", self.batch_size, 1))
        self._set("drop_remainder", _bool_arg("drop_remainder", self.drop_remainder))


@_frozen
class Enumerate(Stage):
    """Pairs ``(index, element)``, the index an int64 from ``start``."""

    name: ClassVar[str] = "enumerate"
    native: ClassVar[bool] = False

    start: int = 0

    def __post_init__(self):
        self._set("start", _int_arg("enumerate: start", self.start, -(1 << 63)))


@_frozen
class TakeWhile(Stage):
    """The elements up to (without) the first for which ``predicate`` is false."""

    name: ClassVar[str] = "take_while"
    native: ClassVar[bool] = False

    predicate: Callable[[Any], bool]

    def __post_init__(self):
        if not callable(self.predicate):
            raise TypeError("take_while takes a callable")


@_frozen
class IgnoreErrors(Stage):
    """Drops the elements whose making raised an error in a Python stage before it (counted:
    ``Iterator.errors_ignored``, ``stats()["errors_ignored"]``); ``log_warning``: logs each."""

    name: ClassVar[str] = "ignore_errors"
    native: ClassVar[bool] = False

    log_warning: bool = False

    def __post_init__(self):
        self._set("log_warning", _bool_arg("log_warning", self.log_warning))


@_frozen
class FlatMap(Stage):
    """The elements of ``fn(element)`` (an rf.Dataset) for every element, in order."""

    name: ClassVar[str] = "flat_map"
    native: ClassVar[bool] = False

    fn: Callable[[Any], Any]

    def __post_init__(self):
        if not callable(self.fn):
            raise TypeError("flat_map takes a callable returning an rf.Dataset")


@_frozen
class Concatenate(Stage):
    """The elements, then those of ``other``."""

    name: ClassVar[str] = "concatenate"
    native: ClassVar[bool] = False

    other: Any = dataclasses.field(hash=False, repr=False)

    def __post_init__(self):
        _datasets_arg("concatenate", [self.other])


# Stages of the record stream (before parse/map/batch/filter): they pass records through.
RECORD_STAGES = (Shard, Interleave, Shuffle, GlobalShuffle, Repeat, Take, Skip, Cache)


# ---------------------------------------------------------------- argument checks
# Checked here, before nanobind (whose TypeError for a negative size names no argument).
def _int_arg(name: str, value: Any, minimum: int, autotune: bool = False) -> int:
    """``value`` as an int >= minimum (or AUTOTUNE when allowed); bool and float refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
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
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be None or an int, not {value!r}")
    if not 0 <= int(value) < 1 << 64:
        raise InvalidArgumentError(f"{name} must be None or in [0, 2**64), not {value}")
    return int(value)


def _paths_arg(pattern_or_paths: Any, what: str) -> list[str]:
    """A path or a list of them as a non-empty list of non-empty str."""
    if isinstance(pattern_or_paths, (str, bytes, os.PathLike)):
        items = [pattern_or_paths]
    else:
        try:
            items = list(pattern_or_paths)
        except TypeError:
            raise TypeError(f"{what} takes a path, a glob pattern or a list of them, not "
                            f"{type(pattern_or_paths).__name__}") from None
    if not items:
        raise InvalidArgumentError(f"{what}: the list of paths is empty")
    paths = []
    for p in items:
        if not isinstance(p, (str, bytes, os.PathLike)):
            raise TypeError(f"{what}: a path must be a str, bytes or os.PathLike, not "
                            f"{type(p).__name__} ({p!r})")
        p = os.fsdecode(os.fspath(p))
        if not p:
            raise InvalidArgumentError(f"{what}: a path is the empty string")
        paths.append(p)
    return paths
