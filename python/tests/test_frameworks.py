"""Framework adapters, framework-free parts: the sharding plan, lazy submodules, packaging
(version, stubs, py.typed, docstrings)."""

import importlib
import inspect
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from id_files import all_ids, ids, write_id_files

import recordflow as rf
from recordflow.sharding import ShardingPlan, assign_files

SPEC = {"id": rf.FixedLen([], "int64"), "name": rf.FixedLen([], "bytes"), "v": rf.VarLen("float32")}


def write_files(tmp_path, counts, index=True):
    return write_id_files(tmp_path, counts, index=index,
                          features=lambda f, i: {"name": f"f{f}r{i}",
                                                 "v": np.arange(i % 3, dtype=np.float32)})


COUNTS = [30, 0, 45, 17, 60, 8, 25, 33, 12]  # 9 files, one empty, uneven


@pytest.mark.parametrize("pipeline", ["shuffle", "interleave", "global_shuffle", "user_shard",
                                      "records"])
@pytest.mark.parametrize("consumers", [1, 2, 3, 8, 12])
def test_plan_partitions_every_record_once(tmp_path, pipeline, consumers):
    files = write_files(tmp_path, COUNTS)
    pattern = str(tmp_path / "part-*.tfrecord")
    if pipeline == "shuffle":
        ds = rf.Dataset.from_files(pattern, shuffle_files=True).shuffle(50)
    elif pipeline == "interleave":
        ds = rf.Dataset.from_files(files).interleave(3).shuffle(20, seed=5)
    elif pipeline == "global_shuffle":
        ds = rf.Dataset.from_files(files).global_shuffle()
    elif pipeline == "user_shard":  # the user's own file shard composes with the plan's
        ds = rf.Dataset.from_files(files).shard(2, 1)
    else:
        ds = rf.Dataset.from_records([r for p in files for r in rf.RecordReader(p)])
    ds = ds.batch(7).parse(SPEC)
    expected = all_ids(COUNTS)
    if pipeline == "user_shard":
        expected = sorted(i for i in expected if (i // 1000) % 2 == 1)
    world_size = 2 if consumers % 2 == 0 else 1
    workers = consumers // world_size
    seen = []
    for rank in range(world_size):
        for worker in range(workers):
            plan = ShardingPlan(rank, world_size, worker, workers, seed=3, epoch=1)
            seen += ids(plan.apply(ds))
    assert sorted(seen) == expected


def test_plan_modes_and_epoch_seeds(tmp_path):
    files = write_files(tmp_path, COUNTS)
    ds = rf.Dataset.from_files(files, shuffle_files=True).shuffle(100).batch(10).parse(SPEC)
    assert ShardingPlan(0, 2, 0, 4).split_by(ds) == "files"         # 9 files, 8 consumers
    assert ShardingPlan(0, 2, 0, 5).split_by(ds) == "records"       # 10 consumers
    assert ShardingPlan(0, 1, mode="records").split_by(ds) == "records"
    with pytest.raises(rf.InvalidArgumentError):
        ShardingPlan(2, 2)
    with pytest.raises(rf.InvalidArgumentError):
        ShardingPlan(0, 1, 0, 1, mode="files").apply(rf.Dataset.from_records([b""]))
    with pytest.raises(rf.InvalidArgumentError):
        ShardingPlan(0, 2, mode="records").apply(
            rf.Dataset.from_files(files).interleave(2, deterministic=False))
    # The same epoch gives the same order on every rank; another epoch another order.
    e0 = ids(ShardingPlan(epoch=0).apply(ds))
    assert ids(ShardingPlan(epoch=0).apply(ds)) == e0
    e1 = ids(ShardingPlan(epoch=1).apply(ds))
    assert e1 != e0 and sorted(e1) == sorted(e0) == all_ids(COUNTS)
    # The description is rewritten, not the user's dataset.
    assert ds.stages[0].seed is None


def test_assign_files_balances_bytes(tmp_path):
    files = write_files(tmp_path, [100, 90, 10, 10, 10, 60, 50])
    parts = assign_files(files, 3)
    assert sorted(f for p in parts for f in p) == sorted(files)
    load = [sum(os.path.getsize(f) for f in p) for p in parts]
    assert max(load) - min(load) <= max(os.path.getsize(f) for f in files)
    assert all(p == sorted(p) for p in parts)  # file order kept


def test_frameworks_are_imported_lazily():
    code = ("import sys, recordflow as rf; from recordflow import *; "
            "assert not any(m in sys.modules for m in ('torch', 'jax', 'tensorflow', 'keras')), "
            "[m for m in ('torch', 'jax', 'tensorflow', 'keras') if m in sys.modules]; "
            "print(rf.__version__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == rf.__version__
    assert "torch" in dir(rf)
    with pytest.raises(AttributeError):
        rf.no_such_name  # noqa: B018


def test_version_stubs_and_py_typed():
    assert rf.__version__.count(".") == 2
    root = pathlib.Path(rf.__file__).parent
    assert (root / "py.typed").exists()
    stub = root / "_core.pyi"
    assert stub.exists(), "the build installs nanobind.stubgen's _core.pyi"
    text = stub.read_text()
    for name in ("class RecordReader", "class IndexedRecordReader", "class PipelineDataset",
                 "def parse_example"):
        assert name in text, name


def _public(module):
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    return [(n, getattr(module, n)) for n in names if not isinstance(getattr(module, n), (str, int))]


def test_every_public_name_has_a_docstring():
    modules = [rf, importlib.import_module("recordflow.sharding")]
    for name in ("torch", "jax", "keras", "tf"):
        try:
            modules.append(importlib.import_module(f"recordflow.{name}"))
        except ImportError:
            pass
    missing = []
    for module in modules:
        if not module.__doc__:
            missing.append(module.__name__)
        for name, obj in _public(module):
            if getattr(obj, "__module__", "").split(".")[0] not in ("recordflow",) \
                    and not getattr(obj, "__module__", "").startswith("recordflow"):
                continue
            if not inspect.getdoc(obj):
                missing.append(f"{module.__name__}.{name}")
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if attr.startswith("_") or not callable(member) and not isinstance(member, property):
                        continue
                    if not inspect.getdoc(getattr(obj, attr)):
                        missing.append(f"{module.__name__}.{name}.{attr}")
    assert not missing, missing
