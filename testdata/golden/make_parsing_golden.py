#!/usr/bin/env python3
"""Writes the FixedLenSequence goldens in this folder with real TensorFlow.

    python3 testdata/golden/make_parsing_golden.py [--out testdata/golden]

fixed_len_sequence.tfrecord: tf.train.Example records for tf.io.FixedLenSequenceFeature
(keys "seq" int64 items of shape [2], "s" bytes items of shape [], "f" float items of shape [1],
all allow_missing=True). required_feature_list.tfrecord: tf.train.SequenceExample records for
FixedLenSequenceFeature in sequence_features ("x" int64 steps of shape [2], required; "y" float
steps of shape [], allow_missing=True); its last record lacks "x".

fixed_len_sequence_manifest.txt gives what tf.io parses from them, one fact per line:
  example <record> <key> <items> <values...>     items per record and their values, in order
                                                 (bytes values as hex, "-" for empty)
  bad_example <key> <hex>                        a record tf.io.parse_example rejects (its value
                                                 count is not a multiple of the item size)
  sequence <record> <key> <steps> <values...>    tf.io.parse_single_sequence_example's result
  missing_list <record> <key>                    a record TF rejects: required list "x" absent
Checked by src/recordflow/example/parse_sequence_feature_test.cc (no TensorFlow there).
Deterministic: fixed values; the same TensorFlow rewrites the same bytes.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tf_features import byt, example, f32, i64, seq_example  # noqa: E402  (next to this script)

EXAMPLES = [
    example({"seq": i64([1, 2, 3, 4]), "s": byt([b"a"]), "f": f32([0.5, 1.5])}),
    example({}),
    example({"seq": i64([]), "s": byt([b"", b"xyz"]), "f": f32([-1])}),
    example({"seq": i64([5, 6]), "f": tf.train.Feature()}),
    example({"seq": i64([-7, 1 << 40, 8, 9, 10, 11]), "s": byt([bytes(range(5))])}),
]
EXAMPLE_SPEC = {
    "seq": ((2,), tf.int64),
    "s": ((), tf.string),
    "f": ((1,), tf.float32),
}
BAD_EXAMPLE = example({"seq": i64([1, 2, 3])})

SEQUENCES = [
    seq_example(lists={"x": [i64([1, 2]), i64([3, 4])], "y": [f32([0.25])]}),
    seq_example(lists={"x": []}),
    seq_example(lists={"x": [i64([-1, 1 << 33])], "y": [f32([1]), f32([2]), f32([3])]}),
    seq_example(lists={"y": [f32([9])]}),  # no "x": TF's required feature list is missing
]


def fmt(v) -> str:
    if isinstance(v, bytes):
        return v.hex() or "-"
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    return str(int(v))


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=here)
    args = ap.parse_args()
    lines = []
    with tf.io.TFRecordWriter(os.path.join(args.out, "fixed_len_sequence.tfrecord")) as w:
        for r in EXAMPLES:
            w.write(r)
    spec = {k: tf.io.FixedLenSequenceFeature(s, t, allow_missing=True) for k, (s, t) in EXAMPLE_SPEC.items()}
    for i, r in enumerate(EXAMPLES):
        parsed = tf.io.parse_single_example(r, spec)
        for k in EXAMPLE_SPEC:
            items = parsed[k].numpy()
            flat = items.reshape(-1).tolist()
            lines.append(" ".join(["example", str(i), k, str(items.shape[0])] + [fmt(v) for v in flat]))
    try:
        tf.io.parse_example([BAD_EXAMPLE], spec)
        raise SystemExit("TensorFlow accepted the bad record")
    except tf.errors.InvalidArgumentError:
        lines.append(f"bad_example seq {BAD_EXAMPLE.hex()}")

    with tf.io.TFRecordWriter(os.path.join(args.out, "required_feature_list.tfrecord")) as w:
        for r in SEQUENCES:
            w.write(r)
    seq_spec = {"x": tf.io.FixedLenSequenceFeature((2,), tf.int64),
                "y": tf.io.FixedLenSequenceFeature((), tf.float32, allow_missing=True)}
    for i, r in enumerate(SEQUENCES):
        try:
            _, parsed = tf.io.parse_single_sequence_example(r, sequence_features=seq_spec)
        except tf.errors.InvalidArgumentError:
            lines.append(f"missing_list {i} x")
            continue
        for k in seq_spec:
            steps = parsed[k].numpy()
            lines.append(" ".join(["sequence", str(i), k, str(steps.shape[0])] +
                                  [fmt(v) for v in steps.reshape(-1).tolist()]))
    with open(os.path.join(args.out, "fixed_len_sequence_manifest.txt"), "w") as f:
        f.write(f"# written by make_parsing_golden.py with TensorFlow {tf.__version__}\n")
        f.write("\n".join(lines) + "\n")
    # Self-check: tf.data reads the files back unchanged.
    for name, recs in (("fixed_len_sequence.tfrecord", EXAMPLES), ("required_feature_list.tfrecord", SEQUENCES)):
        back = [r.numpy() for r in tf.data.TFRecordDataset(os.path.join(args.out, name))]
        assert back == recs, name
    # Seeds for the example fuzzer (raw records, no framing).
    corpus = os.path.join(here, "..", "..", "fuzz", "corpus", "example")
    if os.path.isdir(corpus):
        for name, data in (("golden_fixed_len_sequence", EXAMPLES[4]),
                           ("golden_required_feature_list", SEQUENCES[2])):
            with open(os.path.join(corpus, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
