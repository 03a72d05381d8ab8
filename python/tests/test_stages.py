"""rf.stages: a Dataset's typed stages, rewriting a pipeline through them, and glob expansion."""

import dataclasses
import inspect
import os
import pickle

import numpy as np
import pytest
from id_files import ids, write_id_files

import recordflow as rf
from recordflow import stages as st

SPEC = {"id": rf.FixedLen([], "int64"), "v": rf.VarLen("float32")}


def write_files(tmp_path, counts, name="part"):
    return write_id_files(tmp_path, counts, stem=name,
                          features=lambda f, i: {"v": np.arange(i % 3, dtype=np.float32)})


def _double(e):
    return {"id": e["id"] * 2}


def _even(e):
    return e["id"] % 2 == 0


def test_every_method_appends_one_typed_stage(tmp_path):
    paths = write_files(tmp_path, [3, 4])
    op = rf.vision.imagenet_eval(32, 40)
    ds = (rf.Dataset.from_files(str(tmp_path / "part-*.tfrecord"), shuffle_files=True, seed=3)
          .shard(1, 0).interleave(2, block_length=2).shuffle(8, seed=1).repeat(2).take(100)
          .skip(1).cache().parse(SPEC).batch(4, drop_remainder=True).map(_double, num_parallel=2)
          .filter(_even).prefetch(3))
    assert [type(s) for s in ds.stages] == [
        st.Files, st.Shard, st.Interleave, st.Shuffle, st.Repeat, st.Take, st.Skip, st.Cache,
        st.Parse, st.Batch, st.Map, st.Filter, st.Prefetch]
    files = ds.stages[0]
    assert files == st.Files((str(tmp_path / "part-*.tfrecord"),), None, True, 3, "raise", True)
    assert files.expanded_paths() == paths
    assert ds.stages[2] == st.Interleave(cycle_length=2, block_length=2,
                                         num_parallel=rf.AUTOTUNE, deterministic=True)
    assert ds.stages[3].buffer_size == 8 and ds.stages[3].seed == 1
    assert ds.stages[4].count == 2 and ds.stages[5].count == 100 and ds.stages[6].count == 1
    assert ds.stages[7].path == ""
    assert ds.stages[9] == st.Batch(4, True)
    assert ds.stages[10].fn is _double and ds.stages[10].num_parallel == 2
    assert ds.stages[11].predicate is _even
    assert ds.stages[12].n == 3
    assert [s.name for s in ds.stages] == [
        "files", "shard", "interleave", "shuffle", "repeat", "take", "skip", "cache", "parse",
        "batch", "map", "filter", "prefetch"]
    assert [s.native for s in ds.stages].index(False) == 10  # Map: the Python tail starts
    mapped = rf.Dataset.from_records([b"x"]).batch(2).map(op)
    assert mapped.stages[-1] == st.NativeMap(op, rf.AUTOTUNE) and mapped.stages[-1].native
    assert mapped.stages[0].records == (b"x",)
    assert rf.Dataset.from_files(paths).global_shuffle(5).stages[-1] == st.GlobalShuffle(5, True)
    assert rf.Dataset.from_records([]).repeat().stages[-1] == st.Repeat(-1)


def test_stages_are_frozen_and_replace_checks_again():
    stage = st.Batch(4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stage.batch_size = 8
    bigger = stage.replace(batch_size=8)
    assert bigger == st.Batch(8, False) and stage == st.Batch(4, False)
    with pytest.raises(rf.InvalidArgumentError, match="batch_size must be >= 1, not 0"):
        stage.replace(batch_size=0)
    ds = rf.Dataset.from_records([b"a"])
    with pytest.raises(AttributeError):
        ds.stages = ()
    assert isinstance(ds.stages, tuple)
    # Fields are normalized to their declared types when the stage is made.
    s = st.Shuffle(np.int64(16), seed=np.uint64(7), reshuffle_each_iteration=np.bool_(False))
    assert (type(s.buffer_size), type(s.seed), type(s.reshuffle_each_iteration)) == (int, int, bool)
    assert st.Files("a.tfrecord").paths == ("a.tfrecord",)
    assert st.Cache(None).path == "" and st.Cache(os.path.join("d", "c")).path == "d/c"


@pytest.mark.parametrize("make, error, message", [
    (lambda: st.Batch(0), rf.InvalidArgumentError, "batch_size must be >= 1, not 0"),
    (lambda: st.Batch(2.0), TypeError, "batch_size must be an int, not 2.0"),
    (lambda: st.Batch(2, drop_remainder=1), TypeError, "drop_remainder must be a bool, not 1"),
    (lambda: st.Shard(2, 2), rf.InvalidArgumentError, r"shard: index \(2\) must be < num_shards \(2\)"),
    (lambda: st.Shuffle(10, seed=-1), rf.InvalidArgumentError, r"seed must be None or in \[0, 2\*\*64\)"),
    (lambda: st.Shuffle(True), TypeError, "buffer_size must be an int, not True"),
    (lambda: st.Interleave(0), rf.InvalidArgumentError, "cycle_length must be >= 1 or rf.AUTOTUNE, not 0"),
    (lambda: st.Repeat(-2), rf.InvalidArgumentError, "count must be >= -1, not -2"),
    (lambda: st.Skip(-1), rf.InvalidArgumentError, "count must be >= 0, not -1"),
    (lambda: st.Prefetch(-5), rf.InvalidArgumentError, "prefetch: n must be >= 0"),
    (lambda: st.Cache(3), TypeError, "cache: path must be None, a str or a path, not 3"),
    (lambda: st.Parse({"x": "int64"}), Exception, "x"),
    (lambda: st.Map(3), TypeError, "map takes a callable"),
    (lambda: st.Filter(None), TypeError, "filter takes a callable"),
    (lambda: st.NativeMap(_double), TypeError, "NativeMap takes a native op"),
    (lambda: st.Files([]), rf.InvalidArgumentError, "from_files: the list of paths is empty"),
    (lambda: st.Files(""), rf.InvalidArgumentError, "from_files: a path is the empty string"),
    (lambda: st.Files("a", on_corruption="ignore"), rf.InvalidArgumentError, "on_corruption must be"),
    (lambda: st.Files("a", compression=1), TypeError, "compression must be None or a str"),
    (lambda: st.Records(["text"]), TypeError, "record 0 must be bytes, not str"),
])
def test_invalid_stage_fields_raise_errors_naming_them(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_with_stages_checks_the_structure():
    ds = rf.Dataset.from_records([b"a", b"b"])
    with pytest.raises(rf.InvalidArgumentError, match="start with a source stage"):
        ds.with_stages([st.Batch(2)])
    with pytest.raises(rf.InvalidArgumentError, match="start with a source stage"):
        ds.with_stages([])
    with pytest.raises(rf.InvalidArgumentError, match=r"stage 2 \(Records\) is a source"):
        ds.with_stages([ds.stages[0], st.Take(1), ds.stages[0]])
    with pytest.raises(TypeError, match=r"stage 1 is not an rf.stages stage: \('batch', 2, False\)"):
        ds.with_stages([ds.stages[0], ("batch", 2, False)])
    with pytest.raises(TypeError, match="not one stage"):
        ds.with_stages(ds.stages[0])


def test_with_stages_round_trips_and_rewrites_give_the_same_elements(tmp_path):
    paths = write_files(tmp_path, [5, 7, 3])
    ds = (rf.Dataset.from_files(paths, shuffle_files=True, seed=1).interleave(2)
          .shuffle(4, seed=2).parse(SPEC).batch(3).map(_double).filter(lambda e: len(e["id"]) > 0))
    same = ds.with_stages(ds.stages)
    assert same.stages == ds.stages and same is not ds and same.epoch == 0
    assert ids(same) == ids(ds.with_stages(list(ds.stages)))
    # A rewrite through the typed stages equals the pipeline written directly.
    rewritten = ds.with_stages(
        s.replace(batch_size=5) if isinstance(s, st.Batch) else s for s in ds.stages)
    direct = (rf.Dataset.from_files(paths, shuffle_files=True, seed=1).interleave(2)
              .shuffle(4, seed=2).parse(SPEC).batch(5).map(_double)
              .filter(lambda e: len(e["id"]) > 0))
    assert ids(rewritten) == ids(direct)
    assert sorted(ids(rewritten)) == sorted(2 * i for i in
                                            [f * 1000 + i for f, n in enumerate([5, 7, 3]) for i in range(n)])
    # The user's Dataset is untouched by the rewrite.
    assert ds.stages[4] == st.Batch(3)


def test_python_tail_runs_the_same_stages_after_a_callable(tmp_path):
    paths = write_files(tmp_path, [10])
    spec = {"id": SPEC["id"]}  # (a batch built in Python stacks dense features only)
    native = rf.Dataset.from_files(paths).take(7).skip(2).parse(spec).batch(2)
    tail = rf.Dataset.from_files(paths).map(lambda r: r).parse(spec).take(7).skip(2).batch(2)
    assert [type(s).native for s in tail.stages[1:]] == [False] + [True] * 4  # all in Python
    assert [b["id"].tolist() for b in tail] == [b["id"].tolist() for b in native] == \
        [[2, 3], [4, 5], [6]]
    assert "-> python map -> python parse -> python take" in tail.describe()
    # take(-1) after a callable keeps everything, as it does natively.
    assert len(list(rf.Dataset.from_files(paths).map(lambda r: r).take(-1))) == 10


def _ids_of(elements):
    return [int(x) for e in elements for x in np.atleast_1d(e["id"])]


@pytest.mark.parametrize("tail", ["shuffle", "shuffle_repeat", "shard_batch", "batch_take_skip"])
def test_stages_after_a_python_callable_run_and_checkpoint(tmp_path, tail):
    # Every stage after a Python map runs (as a _tfdata node), deterministically for a seed,
    # and the iterator checkpoints and restores at any point.
    paths = write_files(tmp_path, [9, 6])
    ds = rf.Dataset.from_files(paths).parse(SPEC).map(_double, workers="inline")
    doubled = [2 * (f * 1000 + i) for f, n in enumerate([9, 6]) for i in range(n)]
    if tail == "shuffle":
        ds, want = ds.shuffle(4, seed=3), sorted(doubled)
    elif tail == "shuffle_repeat":
        ds, want = ds.shuffle(5, seed=1).repeat(2), sorted(doubled * 2)
    elif tail == "shard_batch":
        ds, want = ds.shard(2, 1).batch(4), doubled[1::2]
    else:
        ds, want = ds.batch(2).take(6).skip(1), doubled[2:12]
    full = _ids_of(ds.iterator(epoch=0))
    assert (sorted(full) if "shuffle" in tail else full) == want
    if "shuffle" in tail:
        assert full != sorted(full)  # shuffled ...
        assert _ids_of(ds.iterator(epoch=0)) == full  # ... the same way for the same seed
    elements = list(ds.iterator(epoch=0))
    for k in (0, 1, len(elements) // 2, len(elements) - 1, len(elements)):
        it = ds.iterator(epoch=0)
        head = [next(it) for _ in range(k)]
        state = it.checkpoint()
        it.close()
        assert _ids_of(head) + _ids_of(ds.restore(state)) == full, f"checkpoint after {k}"


def test_engine_only_stages_after_a_python_callable_say_why(tmp_path):
    paths = write_files(tmp_path, [4])
    ds = rf.Dataset.from_files(paths).map(lambda r: r)
    for make in (lambda d: d.interleave(2), lambda d: d.global_shuffle(seed=1)):
        with pytest.raises(rf.UnimplementedError, match="works on the engine's records, not on "
                                                        "Python elements: put it before"):
            iter(make(ds))


def test_pickled_dataset_keeps_its_stages_and_epoch(tmp_path):
    paths = write_files(tmp_path, [6, 2])
    ds = rf.Dataset.from_files(paths).shuffle(4, seed=9).parse(SPEC).batch(3).map(_double)
    first = ids(ds)
    again = pickle.loads(pickle.dumps(ds))
    # (FixedLen compares by identity: the unpickled Parse holds equal, new specs)
    assert [repr(s) for s in again.stages] == [repr(s) for s in ds.stages]
    assert again.stages[:2] == ds.stages[:2] and again.stages[3:] == ds.stages[3:]
    assert again.epoch == ds.epoch == 1
    assert ids(again) == ids(ds)  # both run epoch 1
    assert ids(ds.with_stages(pickle.loads(pickle.dumps(ds.stages)))) == first  # epoch 0
    assert pickle.loads(pickle.dumps(st.Shuffle(4, seed=9))) == st.Shuffle(4, seed=9)


def test_cardinality_reads_the_typed_stages(tmp_path):
    paths = write_files(tmp_path, [5, 7])
    ds = rf.Dataset.from_files(paths).shard(2, 1).repeat(3).batch(4)
    assert ds.cardinality() == 6  # file shard: 7 records, x3, in batches of 4
    assert ds.with_stages(ds.stages[:-1] + (st.Batch(4, True),)).cardinality() == 5


def test_expand_globs_sorts_keeps_plain_paths_and_names_the_pattern(tmp_path):
    for name in ("b.tfrecord", "a.tfrecord", "c.idx", ".hidden.tfrecord"):
        (tmp_path / name).write_bytes(b"")
    d = str(tmp_path)
    assert st.expand_globs(f"{d}/*.tfrecord") == [f"{d}/a.tfrecord", f"{d}/b.tfrecord"]
    assert st.expand_globs([f"{d}/missing.tfrecord", f"{d}/[bc].*"]) == [
        f"{d}/missing.tfrecord", f"{d}/b.tfrecord", f"{d}/c.idx"]
    with pytest.raises(rf.NotFoundError, match=f"no files match '{d}/nothing-\\*'"):
        st.expand_globs(f"{d}/nothing-*")
    with pytest.raises(rf.NotFoundError, match="no files match"):
        rf.Dataset.from_files(f"{d}/nothing-*").iterator()
    assert rf.Dataset.from_files(f"{d}/*.tfrecord").stages[0].expanded_paths() == [
        f"{d}/a.tfrecord", f"{d}/b.tfrecord"]


def test_every_stage_has_a_docstring():
    assert st.__doc__
    for name in st.__all__:
        assert inspect.getdoc(getattr(st, name)), name
    assert rf.stages is st and "stages" in rf.__all__


def test_reshard_expands_patterns_in_the_engine_for_python_and_the_cli(tmp_path):
    import json
    import shutil
    import subprocess
    import sys
    src = tmp_path / "src"
    src.mkdir()
    paths = write_files(src, [2, 3, 4])
    # A str, and a list mixing a pattern with a plain path: each pattern's matches sorted.
    one = rf.reshard(str(src / "part-*.tfrecord"), tmp_path / "one", shards=1)
    assert one["inputs"] == paths and one["records"] == 9
    mixed = rf.reshard([str(src / "part-00[12].tfrecord"), paths[0]], tmp_path / "mixed", shards=1)
    assert mixed["inputs"] == paths[1:] + paths[:1]
    cli = shutil.which("recordflow", path=os.path.dirname(sys.executable))
    out = subprocess.run([cli, "reshard", str(src / "part-*.tfrecord"), str(tmp_path / "cli"),
                          "--shards", "2", "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["inputs"] == paths
    text = subprocess.run([cli, "reshard", str(src / "part-*.tfrecord"), str(tmp_path / "cli2"),
                           "--shards", "2"], capture_output=True, text=True)
    assert "resharded 9 records from 3 files into 2 shards" in text.stdout, text.stdout
    none = subprocess.run([cli, "reshard", str(src / "none-*"), str(tmp_path / "cli3"), "--shards", "2"],
                          capture_output=True, text=True)
    assert none.returncode == 1
    assert f"NotFound: no files match '{src}/none-*'" in none.stderr
