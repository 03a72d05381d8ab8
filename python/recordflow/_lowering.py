"""Lowering: a Dataset's stages become the engine's pipeline (``_core.PipelineDataset``), and
the engine's elements become Python values. One module, used by ``rf.Dataset`` and by the chains
of ``_tfdata`` (their native part), so there is one lowering.
"""
from __future__ import annotations

from recordflow import _core
from recordflow import stages as _st
from recordflow.errors import UnimplementedError
from recordflow.example import Ragged
from recordflow.example import _Plan as _SpecPlan
from recordflow.parsing import _unbatch


class Plan:
    """A Dataset's stages lowered: the native pipeline (every stage up to the first Python
    callable), the keys of its parsed columns, and the stages after it (run in Python)."""

    __slots__ = ("native", "keys", "tail")

    def __init__(self, native, keys: list | None, tail: tuple):
        self.native, self.keys, self.tail = native, keys, tail


def lower(stages: tuple) -> Plan:
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
            plan = _SpecPlan(s.spec, "spec")
            # Shaped features (sparse, ragged with partitions, sequences) leave the engine as
            # the columns of the keys they read; to_python builds them.
            keys = plan if plan.shaped else list(s.spec)
            ds = ds.parse(plan.specs)
        elif isinstance(s, _st.NativeMap):
            ds = ds.map_native(s.op._core, s.num_parallel)
        elif isinstance(s, _st.Batch):
            ds = ds.batch(s.batch_size, s.drop_remainder)
        elif isinstance(s, _st.Prefetch):
            ds = ds.prefetch(s.n)
        else:  # a Stage subclass the engine does not know
            raise UnimplementedError(f"no native lowering for {type(s).__name__}")
    return Plan(ds, keys, tuple(transformations[split:]))


def to_python(element: tuple, keys: list | None):
    batched, parsed, payload, names = element
    if names is not None:  # a native map's outputs name themselves
        keys = names
    if not parsed:
        return payload if batched else payload[0]
    if isinstance(keys, _SpecPlan):
        cols = list(payload)
        first = cols[0] if cols else None
        rows = (len(first[-1]) - 1 if isinstance(first, tuple) else len(first)) if cols else 0
        out = keys.finish(cols, rows, 0, False)
        return out if batched else {k: _unbatch(v) for k, v in out.items()}
    out = {}
    for key, col in zip(keys, payload):
        value = Ragged(*col) if isinstance(col, tuple) else col
        if not batched:  # one record: drop the batch dimension
            value = value.values if isinstance(value, Ragged) else value[0]
        out[key] = value
    return out
