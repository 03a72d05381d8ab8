"""rf.Example / rf.SequenceExample / rf.parse_example without TensorFlow (see
test_example_tf.py for the differential tests against TensorFlow)."""

import gc

import numpy as np
import pytest

import recordflow as rf


def test_example_round_trip_and_type_inference():
    e = rf.Example({
        "i": 3, "b": True, "f": 1.5, "s": "héllo", "raw": b"\x00\xff",
        "ints": [1, -2, 2**63 - 1, -(2**63)], "floats": (0.5, -0.0),
        "arr": np.arange(6, dtype=np.int32).reshape(2, 3), "farr": np.ones(3, np.float64),
        "empty": np.array([], np.float32), "words": [b"a", "b"],
    })
    got = rf.Example.parse(e.serialize())
    assert got["i"].tolist() == [3] and got["b"].tolist() == [1]
    assert got["f"].dtype == np.float32 and got["f"].tolist() == [1.5]
    assert got["s"] == ["héllo".encode()] and got["raw"] == [b"\x00\xff"]
    assert got["ints"].tolist() == [1, -2, 2**63 - 1, -(2**63)]
    assert got["arr"].tolist() == [0, 1, 2, 3, 4, 5] and got["arr"].dtype == np.int64
    assert got["farr"].dtype == np.float32
    assert got["empty"].shape == (0,) and got["empty"].dtype == np.float32
    assert got["words"] == [b"a", b"b"]


def test_parsed_example_round_trips_including_unset_features():
    record = rf.Example({"unset": None, "ints": [1, 2], "s": [b"x"]}).serialize()
    parsed = rf.Example.parse(record)
    assert parsed["unset"] is None
    assert rf.Example(parsed).serialize() == record


def test_example_errors():
    with pytest.raises(rf.SchemaError, match="empty list"):
        rf.Example({"x": []})
    assert rf.Example({"x": []}, dtypes={"x": "int64"}).serialize()
    with pytest.raises(rf.SchemaError, match="'x'"):
        rf.Example({"x": [b"a", 1]})
    with pytest.raises(rf.SchemaError):
        rf.Example({"x": [object()]})
    with pytest.raises(rf.SchemaError, match="non-integer"):
        rf.Example({"x": [1.5]}, dtypes={"x": "int64"})
    with pytest.raises(rf.DataLossError):
        rf.Example.parse(b"\x0a\x05\x0a")


def test_keys_serialize_sorted():
    a = rf.Example({"b": 1, "a": 2}).serialize()
    b = rf.Example({"a": 2, "b": 1}).serialize()
    assert a == b
    assert a.index(b"\n\x01a") < a.index(b"\n\x01b")


def batch(n):
    return [
        rf.Example({
            "label": i, "xy": [float(i), -float(i)], "name": f"r{i}",
            "tags": np.arange(i % 4, dtype=np.int64), "grid": np.full(6, i, np.float32),
        }).serialize()
        for i in range(n)
    ]


SPEC = {
    "label": rf.FixedLen([], "int64"),
    "xy": rf.FixedLen([2], np.float32),
    "grid": rf.FixedLen([2, 3], "float32"),
    "name": rf.FixedLen((), "bytes"),
    "tags": rf.VarLen(np.int64),
    "missing": rf.FixedLen([2], "float32", default=[7.0, 8.0]),
    "missing_str": rf.FixedLen([], "bytes", default="dflt"),
}


def test_parse_example_shapes_and_values():
    out = rf.parse_example(batch(1000), SPEC)
    assert out["label"].shape == (1000,) and out["label"].dtype == np.int64
    assert out["label"].tolist() == list(range(1000))
    assert out["xy"].shape == (1000, 2) and out["xy"][7].tolist() == [7.0, -7.0]
    assert out["grid"].shape == (1000, 2, 3) and out["grid"][9].sum() == 54
    assert out["name"].dtype == object and out["name"][5] == b"r5"
    tags = out["tags"]
    assert isinstance(tags, rf.Ragged) and len(tags) == 1000
    assert tags.to_list()[:5] == [[], [0], [0, 1], [0, 1, 2], []]
    assert tags.row_splits[-1] == len(tags.values)
    indices, values, dense_shape = tags.to_sparse()
    assert dense_shape.tolist() == [1000, 3] and indices.shape == (len(values), 2)
    assert out["missing"].tolist()[0] == [7.0, 8.0]
    assert out["missing_str"].tolist()[:2] == [b"dflt", b"dflt"]


def test_outputs_own_recordflow_memory_without_copy():
    parser = rf.Parser(SPEC)
    out = parser(batch(64))
    label = out["label"]
    assert not label.flags.owndata and label.base is not None  # a view over C++ memory
    del parser, out
    gc.collect()
    assert label.tolist() == list(range(64))  # still valid: the array keeps its owner


def test_bytes_as_memoryview_is_zero_copy_and_equal():
    records = batch(500)
    spec = dict(SPEC, names=rf.VarLen("bytes"), empty=rf.VarLen("bytes"))
    records = [rf.Example({"label": i, "xy": [1.0, 2.0], "grid": np.zeros(6, np.float32),
                           "name": b"\xff\x00n%d" % i, "tags": [1],
                           "names": [b"a" * (i % 3), b"z%d" % i][: i % 3]},
                          dtypes={"names": "bytes"}).serialize()
               for i in range(500)]
    copied = rf.parse_example(records, spec)
    viewed = rf.parse_example(records, spec, bytes_as="memoryview")
    assert viewed["name"].dtype == object and viewed["name"].shape == (500,)
    v = viewed["name"][7]
    assert isinstance(v, memoryview) and v.readonly and bytes(v) == b"\xff\x00n7"
    assert [bytes(x) for x in viewed["name"]] == list(copied["name"])
    assert [[bytes(x) for x in row] for row in viewed["names"].to_list()] == copied["names"].to_list()
    assert viewed["names"].row_splits.tolist() == copied["names"].row_splits.tolist()
    assert viewed["missing_str"].tolist() == [b"dflt"] * 500  # defaults are not in any record
    # The view points into the record itself, and keeps it alive after the batch is gone.
    assert v.obj is records[7]
    del records, copied, viewed
    gc.collect()
    assert bytes(v) == b"\xff\x00n7"
    with pytest.raises(ValueError, match="bytes_as"):
        rf.Parser(SPEC, bytes_as="str")


def test_parse_example_errors_name_key_and_record():
    records = batch(300)
    records[123] = rf.Example({"label": 1.5}).serialize()
    with pytest.raises(rf.SchemaError) as e:
        rf.parse_example(records, {"label": rf.FixedLen([], "int64")})
    assert "'label'" in str(e.value) and "record 123" in str(e.value)
    assert isinstance(e.value, ValueError)
    with pytest.raises(rf.SchemaError, match="missing"):
        rf.parse_example(batch(2), {"nope": rf.FixedLen([], "int64")})
    with pytest.raises(rf.SchemaError, match=r"needs 3"):
        rf.parse_example(batch(2), {"xy": rf.FixedLen([3], "float32")})
    with pytest.raises(rf.DataLossError, match="record 1"):
        rf.parse_example([batch(1)[0], b"\x0a\x09garbage"], {"label": rf.FixedLen([], "int64")})
    with pytest.raises(rf.SchemaError):
        rf.parse_example(batch(1), {"x": rf.FixedLen([2], "int64", default=[1, 2, 3])})
    with pytest.raises(rf.SchemaError):
        rf.parse_example(batch(1)[0], {"label": rf.FixedLen([], "int64")})


def test_parse_releases_the_gil():
    from gil_check import progress_during

    records = batch(20000)
    parser = rf.Parser({k: v for k, v in SPEC.items() if k != "name"})
    assert progress_during(lambda: parser(records), calls=10) > 10


def test_sequence_example_round_trip_and_batch_parse():
    records = []
    for i in range(50):
        records.append(rf.SequenceExample(
            context={"id": i},
            feature_lists={"xy": [[float(i), float(s)] for s in range(i % 3)],
                           "words": [[f"w{s}"] * s for s in range(i % 4)]},
            dtypes={"xy": "float32", "words": "bytes"},
        ).serialize())
    ctx, steps = rf.SequenceExample.parse(records[5])
    assert ctx["id"].tolist() == [5] and [s.tolist() for s in steps["xy"]] == [[5.0, 0.0], [5.0, 1.0]]
    context, seq = rf.parse_sequence_example(
        records, {"id": rf.FixedLen([], "int64")},
        {"xy": rf.FixedLen([2], "float32"), "words": rf.VarLen("bytes")})
    assert context["id"].tolist() == list(range(50))
    xy = seq["xy"]
    assert xy.values.shape[1:] == (2,) and xy.to_list()[2] == [[2.0, 0.0], [2.0, 1.0]]
    assert xy.to_dense().shape == (50, 2, 2)
    assert seq["words"].to_list()[3] == [[], [b"w1"], [b"w2", b"w2"]]
    with pytest.raises(rf.SchemaError, match="record 0, step 0"):
        rf.parse_sequence_example(records[5:6], None, {"xy": rf.FixedLen([3], "float32")})
