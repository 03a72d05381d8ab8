"""len(ds) / ds.cardinality(): known from .idx files or convert's summary.json without reading
the data, propagated through every stage, INFINITE / UNKNOWN as tf.data; Datasets pickle."""

import json
import os
import pickle

import pytest
from test_frameworks import SPEC, write_files

import recordflow as rf


def count(ds):
    return sum(1 for _ in ds)


def test_constants_match_tf_data():
    assert (rf.INFINITE, rf.UNKNOWN) == (-1, -2)


def test_length_from_idx_files_without_reading_records(tmp_path):
    paths = write_files(tmp_path, [30, 0, 45, 17])
    ds = rf.Dataset.from_files(paths)
    assert ds.cardinality() == 92 and len(ds) == 92
    # The counts come from the .idx files: damaging every record's bytes (same size) keeps it.
    for p in paths:
        size = os.path.getsize(p)
        with open(p, "r+b") as f:
            f.write(b"\xff" * size)
    assert len(ds) == 92


def test_stale_or_missing_index_is_not_trusted(tmp_path):
    paths = write_files(tmp_path, [10, 5], index=False)
    ds = rf.Dataset.from_files(paths)
    assert ds.cardinality() == rf.UNKNOWN
    with pytest.raises(TypeError, match="unknown"):
        len(ds)
    rf.write_index(paths[0])
    rf.write_index(paths[1])
    assert len(ds) == 15
    with rf.RecordWriter(paths[1]) as w:  # rewritten with more records, index now stale
        for i in range(7):
            w.write(b"x" * i)
    assert rf.Dataset.from_files(paths[1]).cardinality() == rf.UNKNOWN


def test_length_from_convert_summary(tmp_path):
    paths = write_files(tmp_path, [12, 4], index=False)
    shards = [{"file": os.path.basename(p), "records": n, "bytes": os.path.getsize(p)}
              for p, n in zip(paths, [12, 4])]
    (tmp_path / "summary.json").write_text(json.dumps({"splits": {"train": {"shards": shards}}}))
    assert len(rf.Dataset.from_files(str(tmp_path / "part-*.tfrecord"))) == 16
    shards[0]["bytes"] += 1  # a summary of other files is ignored
    (tmp_path / "summary.json").write_text(json.dumps({"splits": {"train": {"shards": shards}}}))
    assert rf.Dataset.from_files(paths).cardinality() == rf.UNKNOWN


def test_real_convert_output_has_a_known_length(tmp_path):
    from PIL import Image

    src = tmp_path / "src"
    for c in ("cat", "dog"):
        (src / c).mkdir(parents=True)
        for i in range(5):
            Image.new("RGB", (8, 8), (i * 20, 0, 0)).save(src / c / f"{i}.jpg")
    rf.convert(str(src), str(tmp_path / "out"), shards=3, val_fraction=0.2)
    for split in ("train", "validation"):
        ds = rf.Dataset.from_files(str(tmp_path / "out" / f"{split}-*.tfrecord"))
        assert len(ds) == count(ds)


@pytest.mark.parametrize("name,build", [
    ("file shard", lambda d: d.shard(3, 1)),
    ("record shard", lambda d: d.shuffle(10, seed=1).shard(4, 3)),
    ("take", lambda d: d.take(50)),
    ("take more", lambda d: d.take(500)),
    ("skip", lambda d: d.skip(20)),
    ("skip all", lambda d: d.skip(500)),
    ("repeat", lambda d: d.repeat(3)),
    ("batch", lambda d: d.batch(8)),
    ("batch drop", lambda d: d.batch(8, drop_remainder=True)),
    ("interleave", lambda d: d.interleave(2).shuffle(7, seed=0).batch(5).parse(SPEC)),
    ("global shuffle", lambda d: d.global_shuffle(seed=3).batch(9, True).parse(SPEC)),
    ("python map", lambda d: d.batch(10).parse(SPEC).map(lambda b: b["id"])),
    ("cache prefetch", lambda d: d.cache().take(33).skip(3).prefetch(2)),
    ("infinite take", lambda d: d.repeat().take(130).batch(16)),
    ("repeat take skip batch", lambda d: d.repeat(2).skip(5).take(200).batch(64, True)),
])
def test_stage_cardinalities_match_a_run(tmp_path, name, build):
    paths = write_files(tmp_path, [30, 0, 45, 17, 8])
    ds = build(rf.Dataset.from_files(paths))
    assert len(ds) == count(ds), name


def test_infinite_unknown_and_records_source(tmp_path):
    paths = write_files(tmp_path, [10])
    ds = rf.Dataset.from_files(paths)
    assert ds.repeat().cardinality() == rf.INFINITE
    assert ds.repeat().batch(4).cardinality() == rf.INFINITE
    with pytest.raises(TypeError, match="infinite"):
        len(ds.repeat())
    assert ds.filter(lambda r: True).cardinality() == rf.UNKNOWN
    assert ds.filter(lambda r: True).take(0).cardinality() == 0
    assert ds.take(0).repeat().cardinality() == 0
    mem = rf.Dataset.from_records([b"a", b"b", b"c"])
    assert len(mem) == 3 and len(mem.repeat(2).batch(4)) == 2
    assert rf.Dataset.from_files(str(tmp_path / "nothing-*.rec")).cardinality() == rf.UNKNOWN
    assert bool(rf.Dataset.from_records([]))  # truth does not depend on the length
    assert list(mem) == [b"a", b"b", b"c"]


def test_skip_mode_and_dropping_native_map_are_unknown(tmp_path):
    paths = write_files(tmp_path, [10])
    assert rf.Dataset.from_files(paths, on_corruption="skip").cardinality() == rf.UNKNOWN
    # ... also after a "raise" Dataset counted the same file from its .idx (no shared cache).
    assert len(rf.Dataset.from_files(paths)) == 10
    assert rf.Dataset.from_files(paths, on_corruption="skip").cardinality() == rf.UNKNOWN
    ds = rf.Dataset.from_files(paths).batch(2)
    assert len(ds.map(rf.vision.imagenet_eval(32, 40))) == 5
    assert ds.map(rf.vision.imagenet_eval(32, 40, on_corruption="skip")).cardinality() == rf.UNKNOWN


def test_dataset_with_preset_pickles_as_its_description(tmp_path):
    paths = write_files(tmp_path, [6])
    src = rf.Dataset.from_files(paths).shuffle(4, seed=2).batch(3).parse(SPEC)
    list(src)  # holds an iterator now
    again = pickle.loads(pickle.dumps(src))
    assert [b["id"].tolist() for b in again] == [b["id"].tolist() for b in src]
    preset = rf.vision.imagenet_train(16, seed=None, scale=(0.5, 1.0))
    ds = rf.Dataset.from_records([]).batch(2).map(preset)
    op = pickle.loads(pickle.dumps(ds)).stages[-1].op
    assert op._params == preset._params and op._params["seed"] is not None
    assert repr(op) == repr(preset)
