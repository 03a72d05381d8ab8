#!/usr/bin/env python3
"""Writes the SparseFeature / RaggedFeature goldens in this folder with real TensorFlow.

    python3 testdata/golden/make_composite_golden.py [--out testdata/golden]

composite.tfrecord: tf.train.Example records holding ragged values with every kind of row
partition (the inputs of TensorFlow's testSerializedContainingRaggedFeature, plus a nested case)
and sparse index/value features (those of testSerializedContaining3DSparseFeature).

composite_manifest.txt gives the specs and what tf.io.parse_example returns for the whole
batch, one fact per line:
  ragged_spec <name> <value_key> <partition>...   partition: <Kind>:<key> or UniformRowLength:<n>
  ragged <name> splits <level> <values...>        RaggedTensor.nested_row_splits[level]
  ragged <name> values <values...>                flat_values
  sparse_spec <name> <value_key> <already_sorted 0|1> <index_key>:<size>...
  sparse <name> indices <values...>               SparseTensor.indices, row-major
  sparse <name> values <values...>
  sparse <name> dense_shape <values...>
Checked by src/recordflow/example/composite_test.cc (no TensorFlow there).
Deterministic: fixed values; the same TensorFlow rewrites the same bytes.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402
from tf_features import example, f32, i64  # noqa: E402  (next to this script)

RECORDS = [
    example({"rt_values": f32([3, 4, 5, 6]), "rt_splits": i64([0, 1, 4]), "rt_lengths": i64([1, 3]),
             "rt_starts": i64([0, 1]), "rt_limits": i64([1, 4]), "rt_rowids": i64([0, 1, 1, 1]),
             "n_lengths": i64([2]), "n_splits": i64([0, 1, 4]),
             "val": f32([3, 4]), "idx0": i64([5, 10]), "idx1": i64([0, 2])}),
    example({"rt_values": f32([]), "rt_splits": i64([0]), "rt_lengths": i64([]),
             "rt_starts": i64([]), "rt_limits": i64([]), "rt_rowids": i64([]),
             "n_lengths": i64([]), "n_splits": i64([0]),
             "val": f32([]), "idx0": i64([]), "idx1": i64([])}),
    example({"rt_values": tf.train.Feature(), "rt_splits": i64([0]), "rt_lengths": tf.train.Feature(),
             "rt_starts": tf.train.Feature(), "rt_limits": tf.train.Feature(),
             "rt_rowids": tf.train.Feature(), "n_splits": i64([0]), "val": tf.train.Feature()}),
    example({"rt_values": f32([1, 2, -1, 8, 9, 5]), "rt_splits": i64([0, 3, 3, 5, 6]),
             "rt_lengths": i64([3, 0, 2, 1]), "rt_starts": i64([0, 3, 3, 5]),
             "rt_limits": i64([3, 3, 5, 6]), "rt_rowids": i64([0, 0, 0, 2, 2, 3]),
             "n_lengths": i64([2, 0, 2]), "n_splits": i64([0, 1, 2, 5, 6]),
             "val": f32([1, 2, -1]), "idx0": i64([0, 9, 3]), "idx1": i64([1, 0, 2])}),
]

R = tf.io.RaggedFeature
RAGGED = {
    "rt1": [("RowSplits", "rt_splits")],
    "rt2": [("RowLengths", "rt_lengths")],
    "rt3": [("RowStarts", "rt_starts")],
    "rt4": [("RowLimits", "rt_limits")],
    "rt5": [("ValueRowIds", "rt_rowids")],
    "uniform1": [("UniformRowLength", 2)],
    "uniform2": [("UniformRowLength", 2), ("RowSplits", "rt_splits")],
    "nested": [("RowLengths", "n_lengths"), ("RowSplits", "n_splits")],
}
SPARSE = {
    "sp2d": (["idx0", "idx1"], "val", [13, 3], False),
    "sp1d": (["idx0"], "val", [13], False),
    "sp1d_sorted": (["idx0"], "val", [13], True),
}


def fmt(v) -> str:
    return repr(float(v)) if isinstance(v, float) else str(int(v))


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=here)
    args = ap.parse_args()
    with tf.io.TFRecordWriter(os.path.join(args.out, "composite.tfrecord")) as w:
        for r in RECORDS:
            w.write(r)
    lines = []
    spec = {}
    for name, parts in RAGGED.items():
        spec[name] = R(tf.float32, value_key="rt_values", row_splits_dtype=tf.int64, validate=True,
                       partitions=[getattr(R, kind)(arg) for kind, arg in parts])
        lines.append(" ".join(["ragged_spec", name, "rt_values"] + [f"{k}:{a}" for k, a in parts]))
    for name, (keys, value_key, sizes, already_sorted) in SPARSE.items():
        spec[name] = tf.io.SparseFeature(keys, value_key, tf.float32, sizes, already_sorted)
        lines.append(" ".join(["sparse_spec", name, value_key, str(int(already_sorted))] +
                              [f"{k}:{s}" for k, s in zip(keys, sizes)]))
    parsed = tf.io.parse_example(RECORDS, spec)
    for name in RAGGED:
        rt = parsed[name]
        for level, splits in enumerate(rt.nested_row_splits):
            lines.append(" ".join(["ragged", name, "splits", str(level)] + [fmt(v) for v in splits.numpy()]))
        lines.append(" ".join(["ragged", name, "values"] +
                              [fmt(float(v)) for v in rt.flat_values.numpy().reshape(-1)]))
    for name in SPARSE:
        st = parsed[name]
        lines.append(" ".join(["sparse", name, "indices"] + [fmt(v) for v in st.indices.numpy().reshape(-1)]))
        lines.append(" ".join(["sparse", name, "values"] + [fmt(float(v)) for v in st.values.numpy()]))
        lines.append(" ".join(["sparse", name, "dense_shape"] + [fmt(v) for v in st.dense_shape.numpy()]))
    with open(os.path.join(args.out, "composite_manifest.txt"), "w") as f:
        f.write(f"# written by make_composite_golden.py with TensorFlow {tf.__version__}\n")
        f.write("\n".join(lines) + "\n")
    back = [r.numpy() for r in tf.data.TFRecordDataset(os.path.join(args.out, "composite.tfrecord"))]
    assert back == RECORDS
    # Seeds for the example fuzzer (raw records, no framing).
    corpus = os.path.join(here, "..", "..", "fuzz", "corpus", "example")
    if os.path.isdir(corpus):
        for i in (0, 3):
            with open(os.path.join(corpus, f"golden_composite_{i}"), "wb") as f:
                f.write(RECORDS[i])


if __name__ == "__main__":
    main()
