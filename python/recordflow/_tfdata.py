"""The rest of tf.data's transformations, run in Python on the consuming thread.

A Dataset whose source is a Python source (``range``, ``zip``, ``sample_from_datasets``,
``choose_from_datasets``), or that has one of the stages unbatch, padded_batch, enumerate,
take_while, ignore_errors, flat_map, concatenate, or a ``cache`` after a Python stage, runs
through a *chain*: its native part (every stage up to the first Python stage) in the engine, as
always, then one node object per remaining stage. Every node can say where it is
(``get_state``) and be put back there (``set_state``); a chain's checkpoint is the nested
state of its nodes, the native part's own checkpoint bytes at the bottom. A node that holds
elements between two ``next()`` calls (unbatch's rows, flat_map's outer element) stores them in
the state, packed (``_pack``: arrays as bytes, never pickle), so a checkpoint never replays
the engine.

This module is over 600 lines: the nodes share the state encoding and the element-structure
helpers defined here (one checkpoint format); the planned split is along those lines
(encoding, structures, sources, the decoded cache in modules of their own).

Nodes are objects, not generators: an error raised out of ``__next__`` leaves them usable,
which is what lets ``ignore_errors`` go on after it.
"""

from __future__ import annotations

import base64
import collections
import json
import logging
import os
import secrets
import struct
import uuid
import zlib
from collections.abc import Mapping

import numpy as np

from recordflow import _workers
from recordflow import stages as _st
from recordflow.errors import (
    DataLossError,
    InvalidArgumentError,
    ResourceExhaustedError,
    UnimplementedError,
)
from recordflow.example import Parser, Ragged
from recordflow.parsing import Sparse

_log = logging.getLogger("recordflow")

MAGIC = b"RFCHAIN1\n"  # a chain iterator's checkpoint starts so (a native one never does)

_PYTHON_SOURCES = (_st.Range, _st.Zip, _st.SampleFrom, _st.ChooseFrom)
_CHAIN_STAGES = (_st.Unbatch, _st.PaddedBatch, _st.Enumerate, _st.TakeWhile, _st.IgnoreErrors,
                 _st.FlatMap, _st.Concatenate)


# What the plain Iterator runs after a Python callable, checkpoint included: any other stage
# there (shuffle, repeat, shard, batch, parse, take, skip, cache) makes the Dataset a chain,
# whose nodes are deterministic for a seed and checkpointable.
_PLAIN_TAIL = (_st.Map, _st.Filter, _st.Prefetch)


def uses_chain(stages: tuple) -> bool:
    """Whether a Dataset of ``stages`` runs through a chain (else: the plain Iterator)."""
    if isinstance(stages[0], _PYTHON_SOURCES):
        return True
    python = False
    for s in stages[1:]:
        if isinstance(s, _CHAIN_STAGES):
            return True
        python = python or not s.native
        if python and not isinstance(s, _PLAIN_TAIL):
            return True
    return False


# ---------------------------------------------------------------- state encoding
def _pack(x, buffers: list | None = None):
    """``x`` (an element or a state: dicts, tuples, lists, arrays, Ragged, Sparse, scalars,
    bytes, str) as JSON-able values. Numeric arrays become their bytes (base64, or appended to
    ``buffers`` when given); object arrays (strings) their items."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return x if -(1 << 62) < x < 1 << 62 else {"$i": str(x)}
    if isinstance(x, float):
        return {"$f": x.hex()}
    if isinstance(x, bytes):
        return {"$b": base64.b64encode(x).decode()}
    if isinstance(x, Mapping):
        return {"$d": [[_pack(k, buffers), _pack(v, buffers)] for k, v in x.items()]}
    if isinstance(x, Sparse):  # (a tuple: kept apart so that it comes back as rf.Sparse)
        return {"$sp": [_pack(v, buffers) for v in x]}
    if isinstance(x, tuple):
        return {"$t": [_pack(v, buffers) for v in x]}
    if isinstance(x, list):
        return [_pack(v, buffers) for v in x]
    if isinstance(x, Ragged):
        return {"$r": [_pack(x.values, buffers), _pack(x.row_splits, buffers)]}
    if isinstance(x, (np.ndarray, np.generic)):
        a = np.asarray(x)
        kind = "$s" if isinstance(x, np.generic) else "$a"
        if a.dtype == object:
            return {kind: "O", "shape": list(a.shape),
                    "items": [_pack(v, buffers) for v in a.ravel().tolist()]}
        raw = np.ascontiguousarray(a).tobytes()
        if buffers is not None:
            buffers.append(raw)
            data = len(buffers) - 1
        else:
            data = base64.b64encode(raw).decode()
        return {kind: a.dtype.str, "shape": list(a.shape), "data": data}
    raise UnimplementedError(f"cannot store a {type(x).__name__} in a checkpoint or cache "
                             "(elements must be arrays, scalars, bytes, str, Ragged, or dicts/"
                             "tuples/lists of them)")


def _unpack(x, buffers: list | None = None):
    if isinstance(x, list):
        return [_unpack(v, buffers) for v in x]
    if not isinstance(x, dict):
        return x
    if "$i" in x:
        return int(x["$i"])
    if "$f" in x:
        return float.fromhex(x["$f"])
    if "$b" in x:
        return base64.b64decode(x["$b"])
    if "$d" in x:
        return {_unpack(k, buffers): _unpack(v, buffers) for k, v in x["$d"]}
    if "$t" in x:
        return tuple(_unpack(v, buffers) for v in x["$t"])
    if "$sp" in x:
        return Sparse(*(_unpack(v, buffers) for v in x["$sp"]))
    if "$r" in x:
        return Ragged(_unpack(x["$r"][0], buffers), _unpack(x["$r"][1], buffers))
    kind = "$s" if "$s" in x else "$a"
    dtype, shape = x[kind], tuple(x["shape"])
    if dtype == "O":
        a = np.empty(len(x["items"]), dtype=object)
        a[:] = [_unpack(v, buffers) for v in x["items"]]
        a = a.reshape(shape)
    else:
        raw = buffers[x["data"]] if isinstance(x["data"], int) else base64.b64decode(x["data"])
        a = np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape).copy()
    return a[()] if kind == "$s" else a


def encode_state(state) -> bytes:
    """MAGIC, the state as JSON, then a CRC32 of everything before it (4 bytes, little endian)."""
    body = MAGIC + json.dumps(_pack(state), separators=(",", ":")).encode()
    return body + struct.pack("<I", zlib.crc32(body))


def decode_state(blob: bytes):
    body, crc = blob[:-4], blob[-4:]
    if len(blob) < len(MAGIC) + 4 or struct.unpack("<I", crc)[0] != zlib.crc32(body):
        raise DataLossError(f"restore: the checkpoint is damaged (CRC32 mismatch over its "
                            f"{len(body)} bytes)")
    try:
        return _unpack(json.loads(body[len(MAGIC):].decode()))
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise InvalidArgumentError(f"restore: not a recordflow checkpoint ({e})") from None


def _nbytes(x) -> int:
    """Bytes an element holds (the memory cache's account)."""
    if isinstance(x, Mapping):
        return sum(_nbytes(v) for v in x.values())
    if isinstance(x, (tuple, list)):
        return sum(_nbytes(v) for v in x)
    if isinstance(x, Ragged):
        return _nbytes(x.values) + _nbytes(x.row_splits)
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            return x.nbytes + sum(_nbytes(v) for v in x.ravel().tolist())
        return x.nbytes
    if isinstance(x, (bytes, str)):
        return len(x)
    return 8


# ---------------------------------------------------------------- structures
def _rows(x):
    """An element with a leading batch dimension as the list of its rows."""
    if isinstance(x, Mapping):
        cols = {k: _rows(v) for k, v in x.items()}
        n = _common_len(cols, "unbatch")
        return [{k: cols[k][i] for k in cols} for i in range(n)]
    if isinstance(x, tuple):
        cols = [_rows(v) for v in x]
        n = _common_len(dict(enumerate(cols)), "unbatch")
        return [tuple(c[i] for c in cols) for i in range(n)]
    if isinstance(x, Ragged):
        return [x[i] for i in range(len(x))]
    if isinstance(x, list):
        return list(x)
    a = np.asarray(x)
    if a.ndim == 0:
        raise InvalidArgumentError("unbatch: an element component is a scalar (rank 0): it has "
                                   "no batch dimension to split")
    return list(a)


def _common_len(cols: dict, what: str) -> int:
    lens = {k: len(v) for k, v in cols.items()}
    if len(set(lens.values())) > 1:
        raise InvalidArgumentError(f"{what}: the components' batch sizes differ: {lens}")
    return next(iter(lens.values()), 0)


def _stack(items: list):
    """Batches elements: structures per component, arrays and scalars stacked, bytes/str as
    an object array."""
    first = items[0]
    if isinstance(first, Mapping):
        return {k: _stack([it[k] for it in items]) for k in first}
    if isinstance(first, tuple):
        return tuple(_stack([it[i] for it in items]) for i in range(len(first)))
    if isinstance(first, (bytes, str)):
        out = np.empty(len(items), dtype=object)
        out[:] = items
        return out
    if isinstance(first, (np.ndarray, np.generic, int, float, bool)):
        arrays = [np.asarray(x) for x in items]
        shapes = {a.shape for a in arrays}
        if len(shapes) > 1:
            raise InvalidArgumentError(f"batch: elements of different shapes {sorted(shapes)} "
                                       "cannot stack: use padded_batch")
        return np.stack(arrays)
    return list(items)


def _flatten(x, out: list) -> object:
    """Appends x's leaves to ``out``; returns its structure with leaf indices."""
    if isinstance(x, Mapping):
        return {k: _flatten(v, out) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_flatten(v, out) for v in x)
    out.append(x)
    return len(out) - 1


def _rebuild(structure, leaves: list):
    if isinstance(structure, Mapping):
        return {k: _rebuild(v, leaves) for k, v in structure.items()}
    if isinstance(structure, tuple):
        return tuple(_rebuild(v, leaves) for v in structure)
    return leaves[structure]


def _per_leaf(element, spec, out: list, what: str, path: str = "") -> None:
    """The entries of ``spec`` (None, one value for every leaf, or the element's structure)
    for each leaf of ``element``, in _flatten's order."""
    if isinstance(element, Mapping):
        for k, v in element.items():
            if isinstance(spec, Mapping):
                if k not in spec:
                    raise InvalidArgumentError(f"padded_batch: {what} has no entry for "
                                               f"component {path}[{k!r}]")
                _per_leaf(v, spec[k], out, what, f"{path}[{k!r}]")
            else:
                _per_leaf(v, spec, out, what, f"{path}[{k!r}]")
    elif isinstance(element, tuple):
        for i, v in enumerate(element):
            if isinstance(spec, tuple) and not _is_shape(spec):
                if len(spec) != len(element):
                    raise InvalidArgumentError(f"padded_batch: {what} has {len(spec)} entries "
                                               f"for {len(element)} components at {path or '/'}")
                _per_leaf(v, spec[i], out, what, f"{path}[{i}]")
            else:
                _per_leaf(v, spec, out, what, f"{path}[{i}]")
    else:
        out.append((spec, path or "element"))


def _is_shape(spec) -> bool:
    """A shape: a list/tuple of int/None (a tuple of them is a shape, not a structure)."""
    return isinstance(spec, (list, tuple)) and all(
        d is None or (isinstance(d, (int, np.integer)) and not isinstance(d, bool)) for d in spec)


def _shape_of(spec):
    if spec is None:
        return None
    if hasattr(spec, "as_list") and callable(spec.as_list):  # tf.TensorShape
        try:
            return [None if d is None else int(d) for d in spec.as_list()]
        except ValueError:  # unknown rank
            return None
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        return [int(spec)]
    if _is_shape(spec):
        return [None if d is None or int(d) < 0 else int(d) for d in spec]
    raise InvalidArgumentError(f"padded_batch: a padded shape must be a list of int/None, "
                               f"not {spec!r}")


def _pad_batch(items: list, padded_shapes, padding_values):
    leaves_per_item = []
    structure = None
    for it in items:
        leaves: list = []
        s = _flatten(it, leaves)
        structure = s if structure is None else structure
        leaves_per_item.append(leaves)
    shapes: list = []
    _per_leaf(items[0], padded_shapes, shapes, "padded_shapes")
    pads: list = []
    _per_leaf(items[0], padding_values, pads, "padding_values")
    out = []
    for j, ((shape_spec, where), (pad, _)) in enumerate(zip(shapes, pads)):
        column = []
        for it in leaves_per_item:
            v = it[j]
            if isinstance(v, (bytes, str)):
                v = np.array(v, dtype=object)
            column.append(np.asarray(v))
        ranks = {a.ndim for a in column}
        if len(ranks) > 1:
            raise InvalidArgumentError(f"padded_batch: component {where} has elements of "
                                       f"different ranks {sorted(ranks)}")
        rank = ranks.pop()
        spec = _shape_of(shape_spec)
        if spec is not None and len(spec) != rank:
            raise InvalidArgumentError(f"padded_batch: padded shape {spec} of component {where} "
                                       f"has rank {len(spec)}, its elements rank {rank}")
        target = []
        for d in range(rank):
            longest = max(a.shape[d] for a in column)
            want = None if spec is None else spec[d]
            if want is None:
                target.append(longest)
            elif longest > want:
                raise InvalidArgumentError(
                    f"padded_batch: component {where} has size {longest} in dimension {d}, "
                    f"larger than its padded shape {spec}")
            else:
                target.append(want)
        strings = column[0].dtype.kind == "O"
        dtype = np.dtype(object) if strings else np.result_type(*column)
        if pad is None:
            pad = b"" if strings else 0
        batch = np.full((len(column), *target), pad, dtype=dtype)
        for i, a in enumerate(column):
            batch[(i, *[slice(0, n) for n in a.shape])] = a
        out.append(batch)
    return _rebuild(structure, out)


# ---------------------------------------------------------------- nodes
class _Ctx:
    """What every node of one chain shares: the budget, the iteration, the Dataset's cache
    store, the ignored-errors counts."""

    def __init__(self, memory_budget: int, epoch: int, store: dict, counter: list,
                 caps: dict | None = None):
        self.memory_budget = memory_budget
        self.caps = dict(caps or {})  # the engine's CPU cap (Dataset.with_options)
        self.epoch = epoch
        self.store = store
        self.counter = counter  # [errors ignored], shared by a chain and all its inputs
        self.iteration = epoch  # the chain's iteration (epoch: a repetition's, under repeat)

    def child(self, epoch: int) -> "_Ctx":
        c = _Ctx(self.memory_budget, epoch, self.store, self.counter, self.caps)
        c.iteration = self.iteration
        return c


class _Node:
    def __init__(self, up):
        self.up = up

    def __iter__(self):
        return self

    def inputs(self) -> list:
        return [self.up] if self.up is not None else []

    # The node's own checkpointed attributes, beside its input's state under "up": name -> the
    # conversion that restores it from a checkpoint (which may have come back through pickle or
    # JSON as another number type).
    _STATE: dict = {}

    def get_state(self):
        state = {"up": self.up.get_state()} if self.up is not None else {}
        state.update((k, getattr(self, k)) for k in self._STATE)
        return state

    def set_state(self, state) -> None:
        if self.up is not None:
            self.up.set_state(state["up"])
        for k, restore in self._STATE.items():
            setattr(self, k, restore(state[k]))

    def close(self) -> None:
        for n in self.inputs():
            n.close()

    def stats(self) -> dict:
        return self.up.stats() if self.up is not None else {}


class _NativeRoot(_Node):
    """The engine's part of the pipeline; started at the first next() (or restored)."""

    def __init__(self, plan, ctx: _Ctx):
        super().__init__(None)
        self.plan, self.ctx, self.it = plan, ctx, None

    def _native(self):
        if self.it is None:
            self.it = self.plan.native.make_iterator(self.ctx.memory_budget, self.ctx.epoch,
                                                   **self.ctx.caps)
        return self.it

    def __next__(self):
        from recordflow import _lowering
        try:
            e = self._native().next()
        except Exception as err:
            err._rf_fatal = True  # the engine's iterator is finished after an error
            raise
        if e is None:
            raise StopIteration
        return _lowering.to_python(e, self.plan.keys)

    def get_state(self):
        return {"native": self._native().checkpoint()}

    def set_state(self, state) -> None:
        self.close()
        self.it = self.plan.native.restore(bytes(state["native"]), self.ctx.memory_budget,
                                           **self.ctx.caps)

    def close(self) -> None:
        if self.it is not None:
            self.it.close()

    def stats(self) -> dict:
        return self.it.stats() if self.it is not None else {}


class _RangeRoot(_Node):
    _STATE = {"i": int}

    def __init__(self, stage: _st.Range, ctx: _Ctx):
        super().__init__(None)
        self.r, self.i = range(stage.start, stage.stop, stage.step), 0

    def __next__(self):
        if self.i >= len(self.r):
            raise StopIteration
        self.i += 1
        return np.int64(self.r[self.i - 1])


class _InputsRoot(_Node):
    """A source over other Datasets: one chain per input."""

    def __init__(self, datasets, ctx: _Ctx):
        super().__init__(None)
        self.children = [ChainIterator(d, ctx.memory_budget, ctx.epoch, counter=ctx.counter,
                                      caps=ctx.caps)
                         for d in datasets]

    def inputs(self) -> list:
        return [c._node for c in self.children]

    def get_state(self):
        return {"in": [c._node.get_state() for c in self.children]}

    def set_state(self, state) -> None:
        for c, s in zip(self.children, state["in"]):
            c._node.set_state(s)

    def stats(self) -> dict:
        return {"inputs": [c.stats() for c in self.children]}


class _ZipRoot(_InputsRoot):
    def __init__(self, stage: _st.Zip, ctx: _Ctx):
        super().__init__(stage.datasets, ctx)
        self.structure = stage.structure

    def __next__(self):
        return _rebuild(self.structure, [next(c) for c in self.children])


class _PickRoot(_InputsRoot):
    """Each element from one input the subclass picks (_pick); an input that ends is marked
    (_ended) or, with stop_on_empty, ends the whole dataset."""

    def __next__(self):
        while not self.done:
            i = self._pick()
            if i is None:
                break
            try:
                return next(self.children[i])
            except StopIteration:
                if self.stop_on_empty:
                    break
                self._ended(i)
        self.done = True
        raise StopIteration


class _SampleRoot(_PickRoot):
    def __init__(self, stage: _st.SampleFrom, ctx: _Ctx):
        super().__init__(stage.datasets, ctx)
        self.weights = np.asarray(stage.weights, dtype=np.float64)
        self.stop_on_empty = stage.stop_on_empty_dataset
        # seed None: a random one, kept in the checkpoint (a restore continues the same draws)
        self.seed = stage.seed if stage.seed is not None else secrets.randbits(63)
        self.rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed,
                                                                              ctx.epoch])))
        self.active = [w > 0 for w in self.weights]
        self.done = False

    def _pick(self) -> int | None:
        w = self.weights * np.asarray(self.active, dtype=np.float64)
        total = w.sum()
        if total <= 0:
            return None
        return int(self.rng.choice(len(w), p=w / total))

    def _ended(self, i: int) -> None:
        self.active[i] = False

    def get_state(self):
        s = super().get_state()
        s.update(seed=self.seed, rng=self.rng.bit_generator.state, active=list(self.active),
                 done=self.done)
        return s

    def set_state(self, state) -> None:
        super().set_state(state)
        self.seed = state["seed"]
        self.rng.bit_generator.state = state["rng"]
        self.active, self.done = [bool(a) for a in state["active"]], bool(state["done"])


class _ChooseRoot(_PickRoot):
    def __init__(self, stage: _st.ChooseFrom, ctx: _Ctx):
        super().__init__(stage.datasets, ctx)
        self.choice = ChainIterator(stage.choice_dataset, ctx.memory_budget, ctx.epoch,
                                    counter=ctx.counter, caps=ctx.caps)
        self.stop_on_empty = stage.stop_on_empty_dataset
        self.empty = [False] * len(self.children)
        self.done = False

    def inputs(self) -> list:
        return super().inputs() + [self.choice._node]

    def _pick(self) -> int | None:
        while True:
            try:
                c = next(self.choice)
            except StopIteration:
                return None
            a = np.asarray(c)
            if a.ndim != 0 or a.dtype.kind not in "iu":
                raise InvalidArgumentError("choose_from_datasets: choice_dataset elements must "
                                           f"be integer scalars, not {c!r}")
            i = int(a)
            if not 0 <= i < len(self.children):
                raise InvalidArgumentError(f"choose_from_datasets: choice {i} is out of range "
                                           f"for {len(self.children)} datasets")
            if not self.empty[i]:
                return i

    def _ended(self, i: int) -> None:
        self.empty[i] = True

    def get_state(self):
        s = super().get_state()
        s.update(choice=self.choice._node.get_state(), empty=list(self.empty), done=self.done)
        return s

    def set_state(self, state) -> None:
        super().set_state(state)
        self.choice._node.set_state(state["choice"])
        self.empty, self.done = [bool(e) for e in state["empty"]], bool(state["done"])

    def stats(self) -> dict:
        s = super().stats()
        s["choice"] = self.choice.stats()
        return s


class _CallableNode(_Node):
    """A Python map or filter, run by _workers.CallableStage (the one executor of Python
    callables: on the consuming thread, on threads, or in worker processes, as the stage's
    ``workers`` and ``num_parallel`` say), in order. An exception of the callable consumes its
    element only, as in tf.data (so ignore_errors after it goes on). A checkpoint holds the
    inputs of the elements in flight (as data): a restore feeds them again."""

    def __init__(self, up, stage, ctx: _Ctx):
        super().__init__(up)
        self.stage = stage
        self.stream = self._make(None)

    def _make(self, state):
        s = self.stage
        kind, fn = ("map", s.fn) if isinstance(s, _st.Map) else ("filter", s.predicate)
        return _workers.CallableStage(kind, fn, s.num_parallel, s.workers, self.up, state,
                                      continue_after_errors=True)

    def __next__(self):
        return next(self.stream)

    def get_state(self):
        return {"up": self.up.get_state(), **self.stream.state()}

    def set_state(self, state) -> None:
        self.stream.close()
        self.up.set_state(state["up"])
        self.stream = self._make({"next_index": state["next_index"],
                                  "pending": list(state["pending"])})

    def close(self) -> None:
        self.stream.close()
        super().close()


class _BatchNode(_Node):
    def __init__(self, up, stage, ctx: _Ctx):
        super().__init__(up)
        self.stage = stage

    def _take(self) -> list:
        items = []
        for x in self.up:
            items.append(x)
            if len(items) == self.stage.batch_size:
                break
        if not items or (len(items) < self.stage.batch_size and self.stage.drop_remainder):
            raise StopIteration
        return items

    def __next__(self):
        return _stack(self._take())


class _PaddedBatchNode(_BatchNode):
    def __next__(self):
        return _pad_batch(self._take(), self.stage.padded_shapes, self.stage.padding_values)


class _ParseNode(_Node):
    def __init__(self, up, stage: _st.Parse, ctx: _Ctx):
        super().__init__(up)
        self.parser = Parser(stage.spec)

    def __next__(self):
        x = next(self.up)
        if isinstance(x, (list, np.ndarray)):
            return self.parser(list(x))
        from recordflow.parsing import _unbatch
        return {k: _unbatch(v) for k, v in self.parser([x]).items()}


class _CountNode(_Node):
    """take (``skip`` False) or skip: a count left, in the state."""

    _STATE = {"left": int}

    def __init__(self, up, stage, ctx: _Ctx):
        super().__init__(up)
        self.skip = isinstance(stage, _st.Skip)
        self.left = stage.count

    def __next__(self):
        if self.skip:
            while self.left > 0:
                next(self.up)
                self.left -= 1
            return next(self.up)
        if self.left == 0:
            raise StopIteration
        x = next(self.up)
        if self.left > 0:
            self.left -= 1
        return x


class _ShardNode(_Node):
    """Every ``num_shards``-th element from ``index`` (a shard after a Python stage)."""

    _STATE = {"k": int}

    def __init__(self, up, stage: _st.Shard, ctx: _Ctx):
        super().__init__(up)
        self.n, self.index, self.k = stage.num_shards, stage.index, 0

    def __next__(self):
        while True:
            x = next(self.up)
            self.k += 1
            if (self.k - 1) % self.n == self.index:
                return x


class _PassNode(_Node):
    def __init__(self, up, stage, ctx: _Ctx):
        super().__init__(up)

    def __next__(self):
        return next(self.up)


class _UnbatchNode(_Node):
    def __init__(self, up, stage, ctx: _Ctx):
        super().__init__(up)
        self.rows: collections.deque = collections.deque()

    def __next__(self):
        while not self.rows:
            self.rows.extend(_rows(next(self.up)))
        return self.rows.popleft()

    def get_state(self):
        return {"up": self.up.get_state(), "rows": list(self.rows)}

    def set_state(self, state) -> None:
        self.up.set_state(state["up"])
        self.rows = collections.deque(state["rows"])


class _EnumerateNode(_Node):
    _STATE = {"i": int}

    def __init__(self, up, stage: _st.Enumerate, ctx: _Ctx):
        super().__init__(up)
        self.i = stage.start

    def __next__(self):
        x = next(self.up)
        self.i += 1
        return (np.int64(self.i - 1), x)


class _TakeWhileNode(_Node):
    _STATE = {"done": bool}

    def __init__(self, up, stage: _st.TakeWhile, ctx: _Ctx):
        super().__init__(up)
        self.predicate, self.done = stage.predicate, False

    def __next__(self):
        if self.done:
            raise StopIteration
        x = next(self.up)
        if not bool(np.asarray(self.predicate(x))):
            self.done = True
            raise StopIteration
        return x


class _IgnoreErrorsNode(_Node):
    def __init__(self, up, stage: _st.IgnoreErrors, ctx: _Ctx):
        super().__init__(up)
        self.ctx, self.log = ctx, stage.log_warning

    def __next__(self):
        while True:
            try:
                return next(self.up)
            except StopIteration:
                raise
            except Exception as e:
                # The engine's errors end its iterator: going on would end the data silently.
                # Reader corruption is skipped by from_files(on_corruption="skip") instead.
                if getattr(e, "_rf_fatal", False):
                    raise
                self.ctx.counter[0] += 1
                if self.log:
                    _log.warning("ignore_errors: dropped an element (%s: %s)",
                                 type(e).__name__, e)



class _FlatMapNode(_Node):
    def __init__(self, up, stage: _st.FlatMap, ctx: _Ctx):
        super().__init__(up)
        self.fn, self.ctx = stage.fn, ctx
        self.outer = None  # the element whose dataset is being read
        self.inner: ChainIterator | None = None

    def _open(self, element, state=None) -> None:
        from recordflow.dataset import Dataset
        ds = self.fn(element)
        if not isinstance(ds, Dataset):
            raise TypeError(f"flat_map: fn must return an rf.Dataset, not {type(ds).__name__}")
        self.outer = element
        self.inner = ChainIterator(ds, self.ctx.memory_budget, self.ctx.epoch, state,
                                   counter=self.ctx.counter, caps=self.ctx.caps)

    def _drop_inner(self) -> None:
        if self.inner is not None:
            self.inner.close()
        self.inner, self.outer = None, None

    def inputs(self) -> list:
        return [self.up] + ([self.inner._node] if self.inner is not None else [])

    def __next__(self):
        while True:
            if self.inner is None:
                self._open(next(self.up))
            try:
                return next(self.inner)
            except StopIteration:
                self._drop_inner()

    def get_state(self):
        if self.inner is None:
            return {"up": self.up.get_state(), "outer": None}
        return {"up": self.up.get_state(), "outer": [self.outer],
                "inner": self.inner._node.get_state()}

    def set_state(self, state) -> None:
        self._drop_inner()
        self.up.set_state(state["up"])
        if state["outer"] is not None:
            self._open(state["outer"][0], state["inner"])


class _ConcatenateNode(_Node):
    def __init__(self, up, stage: _st.Concatenate, ctx: _Ctx):
        super().__init__(up)
        self.other_ds, self.ctx, self.other = stage.other, ctx, None

    def inputs(self) -> list:
        return [self.up] + ([self.other._node] if self.other is not None else [])

    def __next__(self):
        if self.other is None:
            try:
                return next(self.up)
            except StopIteration:
                self.up.close()
                self.other = ChainIterator(self.other_ds, self.ctx.memory_budget,
                                           self.ctx.epoch, counter=self.ctx.counter, caps=self.ctx.caps)
        return next(self.other)

    def get_state(self):
        if self.other is None:
            return {"up": self.up.get_state()}
        return {"other": self.other._node.get_state()}

    def set_state(self, state) -> None:
        if "other" in state:
            self.up.close()
            self.other = ChainIterator(self.other_ds, self.ctx.memory_budget, self.ctx.epoch,
                                       state["other"], counter=self.ctx.counter, caps=self.ctx.caps)
        else:
            self.up.set_state(state["up"])


def _repetition_epoch(epoch: int, rep: int) -> int:
    """The iteration number repetition ``rep`` of iteration ``epoch`` runs its input with
    (seeds): ``epoch`` itself first, then a mix (as the engine's repeat mixes its epochs)."""
    return epoch if rep == 0 else (epoch * 0x9E3779B97F4A7C15 + rep) % (1 << 63)


class _RepeatNode(_Node):
    """The stages before it made again for every repetition (a cache before it serves the
    later ones); an input that yields nothing ends it, as tf.data's."""

    def __init__(self, make_up, stage: _st.Repeat, ctx: _Ctx):
        super().__init__(None)
        self.make_up, self.count, self.ctx = make_up, stage.count, ctx
        self.rep, self.produced = 0, False
        self.up = make_up(ctx)

    def __next__(self):
        while self.count < 0 or self.rep < self.count:
            try:
                x = next(self.up)
            except StopIteration:
                self.up.close()
                if not self.produced and self.count < 0:
                    break  # an empty input repeated forever is empty
                self.rep, self.produced = self.rep + 1, False
                self.up = self.make_up(self.ctx.child(_repetition_epoch(self.ctx.epoch,
                                                                        self.rep)))
                continue
            self.produced = True
            return x
        raise StopIteration

    def get_state(self):
        return {"up": self.up.get_state(), "rep": self.rep, "produced": self.produced}

    def set_state(self, state) -> None:
        self.up.close()
        self.rep, self.produced = int(state["rep"]), bool(state["produced"])
        self.up = self.make_up(self.ctx.child(_repetition_epoch(self.ctx.epoch, self.rep)))
        self.up.set_state(state["up"])


class _ShuffleNode(_Node):
    """tf.data's buffer shuffle in Python: each output a uniformly random element of a
    ``buffer_size`` buffer. The buffer is in the checkpoint (as data) and its bytes are held
    against memory_budget."""

    def __init__(self, up, stage: _st.Shuffle, ctx: _Ctx):
        super().__init__(up)
        self.size, self.ctx = stage.buffer_size, ctx
        self.seed = stage.seed if stage.seed is not None else secrets.randbits(63)
        epoch = ctx.epoch if stage.reshuffle_each_iteration else 0
        self.rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed,
                                                                              epoch, 7])))
        self.buffer: list = []
        self.held = 0
        self.ended = False

    def _add(self, x) -> None:
        self.held += _nbytes(x)
        if self.held > self.ctx.memory_budget:
            raise ResourceExhaustedError(
                f"shuffle({self.size}) after a Python stage: the buffer holds {self.held} bytes "
                f"at {len(self.buffer) + 1} elements, more than memory_budget "
                f"({self.ctx.memory_budget} bytes): a smaller buffer_size or a larger budget")
        self.buffer.append(x)

    def __next__(self):
        while not self.ended and len(self.buffer) < self.size:
            try:
                self._add(next(self.up))
            except StopIteration:
                self.ended = True
        if not self.buffer:
            raise StopIteration
        i = int(self.rng.integers(len(self.buffer)))
        self.buffer[i], self.buffer[-1] = self.buffer[-1], self.buffer[i]
        x = self.buffer.pop()
        self.held -= _nbytes(x)
        return x

    def get_state(self):
        return {"up": self.up.get_state(), "buffer": list(self.buffer), "ended": self.ended,
                "seed": self.seed, "rng": self.rng.bit_generator.state}

    def set_state(self, state) -> None:
        self.up.set_state(state["up"])
        self.buffer = list(state["buffer"])
        self.held = sum(_nbytes(x) for x in self.buffer)
        self.ended, self.seed = bool(state["ended"]), state["seed"]
        self.rng.bit_generator.state = state["rng"]


_CACHE_FILE = "elements.rfcache"


class _CacheNode(_Node):
    """cache() after a Python stage: the elements (decoded tensors) of the first complete pass,
    in memory (the Dataset keeps them for its later iterations; held against memory_budget) or
    in ``<path>/elements.rfcache`` (written to a temporary name, renamed when the pass ends:
    a partial pass leaves no cache). Later passes read them instead of running the stages
    before the cache."""

    def __init__(self, make_up, stage: _st.Cache, ctx: _Ctx, key):
        super().__init__(None)
        self.make_up, self.ctx, self.key = make_up, ctx, key
        self.dir = stage.path
        self.final = os.path.join(self.dir, _CACHE_FILE) if self.dir else None
        self.pos = 0           # elements served so far
        self.reader = None     # serving a disk cache
        self.writer = None     # filling a disk cache: (file, temporary path)
        self.kept: list | None = None  # filling a memory cache
        self.held = 0
        self.pending: list = []  # an element read ahead by a refill (see _refill)
        cached = self._cached()
        if cached is not None:
            self.mode = "serve"
        else:
            # A cache holds what the iteration's first pass gives, whichever repetition fills
            # it (a repeat after a checkpoint restored into another Dataset object does).
            self.mode = "fill"
            self.ctx = ctx.child(ctx.iteration)
            self.up = make_up(self.ctx)

    def _cached(self):
        if self.final is None:
            return self.ctx.store.get(self.key)
        return self.final if os.path.exists(self.final) else None

    # -- filling
    def _keep(self, x) -> None:
        if self.final is None:
            if self.kept is None:
                self.kept = []
            self.held += _nbytes(x)
            if self.held > self.ctx.memory_budget:
                self.kept, self.mode = None, "pass"
                raise ResourceExhaustedError(
                    f"cache(): the elements of the first pass exceed memory_budget "
                    f"({self.ctx.memory_budget} bytes) at element {self.pos} ({self.held} bytes "
                    "held): give cache() a directory (cache(path)) to keep them in files, or "
                    "a larger memory_budget")
            self.kept.append(x)
            return
        if self.writer is None:
            os.makedirs(self.dir, exist_ok=True)
            tmp = f"{self.final}.tmp-{os.getpid()}-{uuid.uuid4().hex}"
            self.writer = (open(tmp, "wb"), tmp)
        _write_element(self.writer[0], x)

    def _finish(self) -> None:
        if self.final is None:
            self.ctx.store[self.key] = self.kept if self.kept is not None else []
            self.ctx.store[(self.key, "epoch")] = self.ctx.epoch  # the pass that filled it
            self.kept = None
            return
        if self.writer is None:
            os.makedirs(self.dir, exist_ok=True)
            tmp = f"{self.final}.tmp-{os.getpid()}-{uuid.uuid4().hex}"
            self.writer = (open(tmp, "wb"), tmp)
        f, tmp = self.writer
        f.flush()
        os.fsync(f.fileno())
        f.close()
        os.replace(tmp, self.final)  # atomic: the cache exists complete, or not at all
        self.writer = None

    def _abandon(self) -> None:
        if self.writer is not None:
            f, tmp = self.writer
            f.close()
            try:
                os.remove(tmp)
            except OSError:
                pass
            self.writer = None
        self.kept = None

    # -- serving
    def _serve(self):
        if self.final is None:
            kept = self.ctx.store[self.key]
            if self.pos >= len(kept):
                raise StopIteration
            x = kept[self.pos]
        else:
            if self.reader is None:
                self.reader = open(self.final, "rb")
            x = _read_element(self.reader, self.final, self.pos)
        self.pos += 1
        return x

    def __next__(self):
        if self.mode == "serve":
            return self._serve()
        if self.pending:
            self.pos += 1
            return self.pending.pop()
        try:
            x = next(self.up)
        except StopIteration:
            if self.mode == "fill":
                self._finish()
                self.mode = "done"
            raise
        except Exception:
            if self.mode == "fill":  # an error in the pass: it is not the data set
                self._abandon()
                self.mode = "pass"
            raise
        if self.mode == "fill":
            self._keep(x)
        self.pos += 1
        return x

    def get_state(self):
        if self.mode == "serve":
            offset = self.reader.tell() if self.reader is not None else 0
            return {"mode": "serve", "pos": self.pos, "offset": offset,
                    "filled_by": self.ctx.store.get((self.key, "epoch"))}
        return {"mode": self.mode, "pos": self.pos, "up": self.up.get_state(),
                "pending": list(self.pending)}

    def set_state(self, state) -> None:
        self.pos = int(state["pos"])
        if state["mode"] == "serve":
            if self._cached() is None:
                if self.final is not None or state["filled_by"] is None:
                    raise InvalidArgumentError(
                        f"restore: the checkpoint reads the cache file {self.final}, which no "
                        "longer exists")
                # A memory cache of another Dataset object (or process): fill this one again
                # from the pass that filled that one (iteration k is the same in every run),
                # up to the position, then go on filling.
                self._refill(int(state["filled_by"]))
                return
            self.mode = "serve"
            if self.final is not None and state["offset"]:
                self.reader = open(self.final, "rb")
                self.reader.seek(int(state["offset"]))
            return
        # Restored in the middle of a filling pass: the elements before it are not at hand,
        # so this pass runs without filling (a later complete pass fills the cache).
        self._abandon()
        self.mode = "pass" if state["mode"] == "fill" else state["mode"]
        if self.up is None:
            self.ctx = self.ctx.child(self.ctx.iteration)
            self.up = self.make_up(self.ctx)
        self.up.set_state(state["up"])
        self.pending = list(state["pending"])

    def _refill(self, epoch: int) -> None:
        if self.up is not None:
            self.up.close()
        self.ctx = self.ctx.child(epoch)
        self.up, self.mode, self.kept, self.held = self.make_up(self.ctx), "fill", [], 0
        for i in range(self.pos):
            try:
                x = next(self.up)
            except StopIteration:
                raise InvalidArgumentError(
                    f"restore: the cache's input ended at element {i}, before the checkpoint's "
                    f"position {self.pos}: the input changed") from None
            self._keep(x)
        # Read one ahead: a cache whose input ends here is complete now (the consumer may be
        # past its last element and never ask again).
        try:
            x = next(self.up)
        except StopIteration:
            self._finish()
            self.mode = "done"
            return
        self._keep(x)
        self.pending = [x]

    def inputs(self) -> list:
        return [self.up] if self.up is not None else []

    def close(self) -> None:
        self._abandon()
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        super().close()

    def stats(self) -> dict:
        s = dict(self.up.stats()) if self.up is not None else {}
        s["cache"] = {"mode": self.mode, "elements": self.pos}
        return s


def _write_element(f, x) -> None:
    buffers: list = []
    header = json.dumps(_pack(x, buffers), separators=(",", ":")).encode()
    f.write(struct.pack("<QQ", len(header), len(buffers)))
    f.write(header)
    for b in buffers:
        f.write(struct.pack("<Q", len(b)))
        f.write(b)


def _read_element(f, path: str, index: int):
    start = f.tell()

    def read(n: int) -> bytes:
        b = f.read(n)
        if len(b) != n:
            raise InvalidArgumentError(f"cache file {path}: truncated at byte {f.tell()} "
                                       f"(element {index}, starting at byte {start})")
        return b

    head = f.read(16)
    if not head:
        raise StopIteration
    if len(head) != 16:
        read(16 - len(head))
    header_len, nbuf = struct.unpack("<QQ", head)
    header = read(header_len)
    buffers = []
    for _ in range(nbuf):
        (n,) = struct.unpack("<Q", read(8))
        buffers.append(read(n))
    try:
        return _unpack(json.loads(header.decode()), buffers)
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise InvalidArgumentError(f"cache file {path}: element {index} at byte {start} is "
                                   f"corrupt ({e})") from None


# ---------------------------------------------------------------- building a chain
_ROOTS = {_st.Range: _RangeRoot, _st.Zip: _ZipRoot, _st.SampleFrom: _SampleRoot,
          _st.ChooseFrom: _ChooseRoot}

_NODES = {
    _st.Filter: _CallableNode, _st.Batch: _BatchNode, _st.Parse: _ParseNode,
    _st.Take: _CountNode, _st.Skip: _CountNode, _st.Prefetch: _PassNode, _st.Shard: _ShardNode,
    _st.Unbatch: _UnbatchNode, _st.PaddedBatch: _PaddedBatchNode,
    _st.Enumerate: _EnumerateNode, _st.TakeWhile: _TakeWhileNode,
    _st.IgnoreErrors: _IgnoreErrorsNode, _st.FlatMap: _FlatMapNode,
    _st.Concatenate: _ConcatenateNode,
}


def _build(stages: tuple, ctx: _Ctx, upto: int | None = None):  # noqa: C901
    """The chain of ``stages[:upto]``."""
    upto = len(stages) if upto is None else upto
    source = stages[0]
    if source.native:
        from recordflow import _lowering
        native_count = next((i for i, s in enumerate(stages[1:upto], 1) if not s.native), upto)
        node = _NativeRoot(_lowering.lower(stages[:native_count]), ctx)
    else:
        native_count = 1
        node = _ROOTS[type(source)](source, ctx)
    for i in range(native_count, upto):
        s = stages[i]
        if isinstance(s, _st.Map):
            node = _CallableNode(node, s, ctx)
        elif isinstance(s, _st.Cache):
            # the cache builds what is before it only when it has to read it
            node = _CacheNode(lambda c, i=i: _build(stages, c, i), s, ctx, i)
        elif isinstance(s, _st.Repeat):
            node.close()  # (not started: native parts start at their first next())
            node = _RepeatNode(lambda c, i=i: _build(stages, c, i), s, ctx)
        elif isinstance(s, _st.Shuffle):
            node = _ShuffleNode(node, s, ctx)
        elif type(s) in _NODES:
            node = _NODES[type(s)](node, s, ctx)
        else:
            # interleave and global_shuffle order files and records of files; a native op
            # maps the engine's parsed columns: none has elements of a Python stage to work on.
            raise UnimplementedError(
                f"{s.name} after a Python stage ({stages[native_count].name}) is not supported: "
                f"{s.name} works on the engine's records, not on Python elements: put it before "
                "the first Python stage, or in the input datasets")
    return node


def _walk(node):
    yield node
    for n in node.inputs():
        yield from _walk(n)


def _store_of(ds) -> dict:
    store = getattr(ds, "_chain_store", None)
    if store is None:
        store = ds._chain_store = {}
    return store


from recordflow.dataset import Iterator as _Iterator  # noqa: E402  (dataset imports us lazily)


class ChainIterator(_Iterator):
    """An rf.Iterator over a chain (see the module's doc): same methods, and
    ``errors_ignored`` (elements dropped by ignore_errors)."""

    def __init__(self, ds, memory_budget: int, epoch: int, state=None, counter=None,
                 caps: dict | None = None):
        self._it = None
        self._stats_sink = None
        self._python_stages = ()
        self.epoch = epoch
        self._ctx = _Ctx(memory_budget, epoch, _store_of(ds), counter or [0], caps)
        self._node = _build(ds.stages, self._ctx)
        if state is not None:
            self._node.set_state(state)

    def __next__(self):
        return next(self._node)

    @property
    def errors_ignored(self) -> int:
        return self._ctx.counter[0]

    def checkpoint(self) -> bytes:
        return encode_state({"epoch": self.epoch, "state": self._node.get_state(),
                             "errors_ignored": self._ctx.counter[0]})

    def stats(self) -> dict:
        s = dict(self._node.stats())
        s["errors_ignored"] = self.errors_ignored
        return s

    def close(self) -> None:
        self._save_stats()
        self._node.close()

    def _save_stats(self) -> None:
        if self._stats_sink is not None:
            try:
                self._stats_sink["last"] = self.stats()
            except Exception:
                pass

    def __del__(self) -> None:
        if getattr(self, "_node", None) is not None:
            self._save_stats()
            try:
                self._node.close()
            except Exception:
                pass


def restore(ds, blob: bytes, memory_budget: int, caps: dict | None = None) -> ChainIterator:
    d = decode_state(blob)
    it = ChainIterator(ds, memory_budget, int(d["epoch"]), d["state"], caps=caps)
    it._ctx.counter[0] = int(d["errors_ignored"])
    return it


# ---------------------------------------------------------------- cardinality
def cardinality(stages: tuple) -> int:
    """Dataset.cardinality() of a chain: as tf.data's (UNKNOWN where it depends on data)."""
    from recordflow import _cardinality as card
    source = stages[0]
    if source.native:
        n_native = next((i for i, s in enumerate(stages[1:], 1) if not s.native), len(stages))
        n, rest = card.cardinality(stages[:n_native]), stages[n_native:]
    else:
        rest = stages[1:]
        if isinstance(source, _st.Range):
            n = len(range(source.start, source.stop, source.step))
        else:
            ns = [d.cardinality() for d in source.datasets]
            if isinstance(source, _st.Zip):
                finite = [x for x in ns if x >= 0]
                n = (min(finite) if finite and (card.UNKNOWN not in ns or min(finite) == 0)
                     else card.UNKNOWN if card.UNKNOWN in ns else card.INFINITE)
            elif all(x == card.INFINITE for x in ns):
                n = card.INFINITE
            else:
                n = card.UNKNOWN
    for op in rest:
        if isinstance(op, (_st.Enumerate, _st.Cache, _st.Map, _st.Prefetch)):
            continue
        if isinstance(op, _st.PaddedBatch):
            op = _st.Batch(op.batch_size, op.drop_remainder)
        if isinstance(op, _st.Concatenate):
            m = op.other.cardinality()
            n = (card.INFINITE if card.INFINITE in (n, m) else
                 card.UNKNOWN if card.UNKNOWN in (n, m) else n + m)
        elif isinstance(op, (_st.Unbatch, _st.TakeWhile, _st.IgnoreErrors, _st.FlatMap)):
            n = card.UNKNOWN if n != card.INFINITE or isinstance(op, _st.TakeWhile) else n
        else:
            n = card._after(op, n)
    return n
