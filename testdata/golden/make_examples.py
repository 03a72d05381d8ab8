#!/usr/bin/env python3
"""Writes examples.tfrecord and examples_manifest.txt in this folder with real TensorFlow.

    python3 testdata/golden/make_examples.py [--out testdata/golden]

examples.tfrecord holds serialized tf.train.Example and tf.train.SequenceExample records,
written with tf.io.TFRecordWriter. Most are built with TensorFlow's protobuf and serialized by
it deterministically (two with their map entries then shuffled, as a non-deterministic
serializer may write them); a few are encoded by hand to cover wire forms protobuf
never writes but must read (unpacked and multi-run numeric lists, unknown fields, a repeated
key), and TensorFlow's own parser gives their expected values. examples_manifest.txt gives
every record's kind and decoded values as TensorFlow's parser (tf.train.*.FromString) reads
them, in a line format C++ tests parse trivially (src/recordflow/example/golden_example_test.cc).

Deterministic: fixed values, no clock, no dict-order dependence; the same TensorFlow rewrites
the same bytes. Needs no recordflow. Four of the records are also copied, raw, into
fuzz/corpus/example/golden_* as seeds for the example fuzzer. The script checks its own output: it reads the file back
with tf.data and re-parses every record.
"""

from __future__ import annotations

import argparse
import os
import random
import struct
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402
from tfrecord_ref import ld, ld_fields, tag, varint  # noqa: E402  (next to this script)

# ---- wire helpers, for the hand-encoded records and the canonical encoding ----------------------


def shuffled_maps(serialized: bytes, seed: int) -> bytes:
    """TensorFlow's bytes with the entries of each top-level map in a fixed pseudo-random order:
    what a non-deterministic serializer may write, but the same on every run (upb's
    non-deterministic order changes from process to process)."""
    rng = random.Random(seed)
    out = b""
    for field, payload in ld_fields(serialized):
        entries = [e for _, e in ld_fields(payload)]
        rng.shuffle(entries)
        out += ld(field, b"".join(ld(1, e) for e in entries))
    return out


# ---- decoded values: (kind, values) with kind "none" | "int64" | "float32" | "bytes" -----------


def from_feature(feature) -> tuple[str, list]:
    kind = feature.WhichOneof("kind")
    if kind is None:
        return ("none", [])
    if kind == "int64_list":
        return ("int64", list(feature.int64_list.value))
    if kind == "float_list":
        # Python floats hold every float32 exactly; struct gives back its bits.
        return ("float32", [struct.unpack("<I", struct.pack("<f", v))[0] for v in feature.float_list.value])
    return ("bytes", list(feature.bytes_list.value))


def to_feature(kind: str, values: list) -> tf.train.Feature:
    if kind == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    if kind == "float32":
        return tf.train.Feature(float_list=tf.train.FloatList(
            value=[struct.unpack("<f", struct.pack("<I", b))[0] for b in values]))
    if kind == "bytes":
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    return tf.train.Feature()


def canonical_feature(kind: str, values: list) -> bytes:
    """A Feature as C++ protobuf serializes it deterministically: packed numeric lists, an
    empty list kept as an empty list message, no list for "none"."""
    if kind == "none":
        return b""
    if kind == "int64":
        body = ld(1, b"".join(varint(v) for v in values)) if values else b""
        return ld(3, body)
    if kind == "float32":
        body = ld(1, b"".join(struct.pack("<I", b) for b in values)) if values else b""
        return ld(2, body)
    return ld(1, b"".join(ld(1, v) for v in values))


def canonical_map(entries: dict[str, bytes]) -> bytes:
    """Map entries in bytewise key order, key and value always written."""
    items = sorted((k.encode("utf-8"), v) for k, v in entries.items())
    return b"".join(ld(1, ld(1, k) + ld(2, v)) for k, v in items)


def canonical_example(features: dict) -> bytes:
    return ld(1, canonical_map({k: canonical_feature(*f) for k, f in features.items()}))


def canonical_sequence(context: dict, lists: dict) -> bytes:
    out = b""
    if context:
        out += ld(1, canonical_map({k: canonical_feature(*f) for k, f in context.items()}))
    if lists:
        out += ld(2, canonical_map({k: b"".join(ld(1, canonical_feature(*s)) for s in steps)
                                    for k, steps in lists.items()}))
    return out


# ---- the records ------------------------------------------------------------------------------

F = {  # float32 bit patterns
    "nan": 0x7FC00000, "-nan": 0xFFC00000, "nan_payload": 0x7FC12345, "inf": 0x7F800000,
    "-inf": 0xFF800000, "-0": 0x80000000, "0": 0x00000000, "denormal": 0x00000001,
    "-denormal": 0x807FFFFF, "max": 0x7F7FFFFF, "-max": 0xFF7FFFFF, "min_normal": 0x00800000,
    "1": 0x3F800000, "-1.5": 0xBFC00000, "third": 0x3EAAAAAB, "pi": 0x40490FDB,
}
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def example_records() -> list[tuple[str, str, dict]]:
    """(source, note, features) for the Examples TensorFlow builds and serializes."""
    jpeg = bytes([0xFF, 0xD8, 0xFF, 0xE0]) + bytes((i * 37) & 0xFF for i in range(120)) + bytes([0xFF, 0xD9])
    big = bytes((i * 7 + (i >> 8)) & 0xFF for i in range(4096))
    return [
        ("tf-deterministic", "imagenet-style", {
            "image/encoded": ("bytes", [jpeg]),
            "image/format": ("bytes", [b"JPEG"]),
            "image/height": ("int64", [375]),
            "image/width": ("int64", [500]),
            "image/channels": ("int64", [3]),
            "image/colorspace": ("bytes", [b"RGB"]),
            "image/class/label": ("int64", [207]),
            "image/class/text": ("bytes", ["golden retriever".encode()]),
            "image/filename": ("bytes", [b"n02099601_3004.JPEG"]),
        }),
        ("tf-deterministic", "int64 extremes", {
            "i": ("int64", [0, 1, -1, 127, 128, -128, 2**31 - 1, -(2**31), 2**32, 2**56,
                            I64_MAX, I64_MAX - 1, I64_MIN, I64_MIN + 1]),
            "j": ("int64", [I64_MIN]),
            "k": ("int64", [I64_MAX]),
        }),
        ("tf-deterministic", "float specials", {
            "f": ("float32", [F[k] for k in ("nan", "-nan", "nan_payload", "inf", "-inf", "-0", "0",
                                              "denormal", "-denormal", "max", "-max", "min_normal",
                                              "1", "-1.5", "third", "pi")]),
            "g": ("float32", [F["-0"]]),
        }),
        ("tf-deterministic", "bytes values", {
            "b": ("bytes", [b"", b"\x00", b"\xff\xfe\xfd", b"\xc3\x28", "é中😀".encode(),
                            bytes(range(256))]),
            "big": ("bytes", [big]),
        }),
        ("tf-deterministic", "empty lists and a feature with no list", {
            "empty_bytes": ("bytes", []),
            "empty_float": ("float32", []),
            "empty_int": ("int64", []),
            "no_kind": ("none", []),
        }),
        ("tf-deterministic", "keys: empty, non-ASCII, prefixes, NUL (upb's order is not sorted)", {
            "": ("int64", [1]),
            "a": ("int64", [2]),
            "ab": ("float32", [F["1"]]),
            "abc": ("bytes", [b"x"]),
            "b": ("int64", []),
            "é": ("bytes", [b"e-acute"]),
            "中文": ("int64", [3, 4]),
            "😀": ("float32", [F["pi"]]),
            "a\x00b": ("bytes", [b"nul in key"]),
        }),
        ("tf-deterministic", "one key, empty", {"": ("none", [])}),
        ("tf-deterministic", "keys of equal length (upb's order is sorted)", {
            "aa": ("int64", [1]), "ab": ("bytes", [b"2"]), "ba": ("float32", [F["-0"]]), "zz": ("none", []),
        }),
        ("tf-deterministic", "features present, no entries", {}),
        ("tf-shuffled", "many keys, map entries in a shuffled order", {
            f"key/{i:02d}" + ("/long" * (i % 3)): (("int64", [i, -i]) if i % 3 == 0 else
                                                   ("float32", [F["1"], i]) if i % 3 == 1 else
                                                   ("bytes", [b"v%d" % i]))
            for i in range(24)
        }),
    ]


def sequence_records() -> list[tuple[str, str, dict, dict]]:
    """(source, note, context, feature_lists) for SequenceExamples TensorFlow builds."""
    return [
        ("tf-deterministic", "context and lists with empty steps and steps of varying length", {
            "length": ("int64", [5]),
            "id": ("bytes", [b"seq-0001"]),
            "weight": ("float32", [F["third"]]),
        }, {
            "tokens": [("int64", [1, 2, 3]), ("int64", []), ("int64", [4]), ("int64", [I64_MIN, I64_MAX]),
                       ("int64", [])],
            "frames": [("bytes", [b"\xff\xd8frame0"]), ("bytes", [b"", b"\x00"]), ("bytes", [])],
            "scores": [("float32", [F["nan"], F["-0"]]), ("float32", [F["inf"]])],
            "empty_list": [],
            "no_kind_steps": [("none", []), ("none", [])],
        }),
        ("tf-deterministic", "feature lists only", {}, {
            "a": [("int64", [7])],
            "é": [("float32", [F["1"]]), ("float32", [F["-1.5"], F["denormal"]])],
        }),
        ("tf-deterministic", "context only", {"c": ("bytes", [b"ctx"]), "": ("int64", [0])}, {}),
        ("tf-deterministic", "empty SequenceExample", {}, {}),
        ("tf-shuffled", "many keys and lists, map entries in a shuffled order", {
            f"ctx{i}": ("int64", [i]) for i in range(6)
        }, {
            f"list{i}": [("float32", [F["1"]] * j) for j in range(i % 4)] for i in range(8)
        }),
    ]


def handmade_records() -> list[tuple[str, bytes]]:
    """(note, bytes) of Examples encoded by hand: forms a parser must accept but protobuf
    serializers do not write. TensorFlow's parser gives their expected values."""
    def entry(key: bytes, feature: bytes) -> bytes:
        return ld(1, ld(1, key) + ld(2, feature))

    unpacked_ints = b"".join(tag(1, 0) + varint(v) for v in [5, -1, I64_MIN, I64_MAX, 0])
    unpacked_floats = b"".join(tag(1, 5) + struct.pack("<I", F[k]) for k in ("1", "nan_payload", "-0"))
    packed_runs = ld(1, varint(1)) + ld(1, varint(2) + varint(3)) + ld(1, b"")
    float_runs = ld(1, struct.pack("<I", F["1"])) + ld(1, struct.pack("<2I", F["pi"], F["-inf"]))
    mixed = ld(1, varint(10)) + tag(1, 0) + varint(11) + ld(1, varint(12) + varint(13))
    unknown = tag(15, 0) + varint(3) + tag(14, 5) + b"\0\0\0\0" + ld(13, b"junk") + tag(12, 1) + b"\0" * 8
    return [
        ("unpacked int64 and float lists",
         ld(1, entry(b"ints", ld(3, unpacked_ints)) + entry(b"floats", ld(2, unpacked_floats)))),
        ("several packed runs, and packed mixed with unpacked",
         ld(1, entry(b"ints", ld(3, packed_runs)) + entry(b"floats", ld(2, float_runs))
            + entry(b"mixed", ld(3, mixed)))),
        ("unknown fields in Example, Features, Feature and lists; a repeated key; two `features`",
         unknown + ld(1, unknown + entry(b"k", ld(1, ld(1, b"first"))) + entry(b"k", ld(3, ld(1, varint(9)) + unknown)))
         + unknown + ld(1, entry(b"z", unknown + ld(1, unknown + ld(1, b"zz"))))),
        ("no features field at all (an empty record)", b""),
    ]


# ---- manifest ---------------------------------------------------------------------------------


def hexkey(s: str | bytes) -> str:
    b = s.encode("utf-8") if isinstance(s, str) else s
    return b.hex() if b else "-"


def feature_line(prefix: str, kind: str, values: list) -> str:
    if kind == "int64":
        vals = [str(v) for v in values]
    elif kind == "float32":
        vals = [f"{b:08x}" for b in values]
    elif kind == "bytes":
        vals = [v.hex() if v else "-" for v in values]
    else:
        vals = []
    return " ".join([prefix, kind, str(len(values))] + vals)


def describe_example(msg) -> list[str]:
    lines = []
    for key in sorted(msg.features.feature, key=lambda k: k.encode()):
        lines.append(feature_line(f"feature {hexkey(key)}", *from_feature(msg.features.feature[key])))
    return lines


def describe_sequence(msg) -> list[str]:
    lines = []
    for key in sorted(msg.context.feature, key=lambda k: k.encode()):
        lines.append(feature_line(f"context {hexkey(key)}", *from_feature(msg.context.feature[key])))
    for key in sorted(msg.feature_lists.feature_list, key=lambda k: k.encode()):
        steps = msg.feature_lists.feature_list[key].feature
        lines.append(f"list {hexkey(key)} {len(steps)}")
        lines += [feature_line("step", *from_feature(s)) for s in steps]
    return lines


def serialize(msg, source: str) -> bytes:
    data = msg.SerializeToString(deterministic=True)
    if source == "tf-shuffled":
        data = shuffled_maps(data, seed=len(data))
        assert type(msg).FromString(data) == msg
    return data


def build() -> list[tuple[str, str, str, bytes]]:
    """(kind, source, note, serialized) for every record, in file order."""
    records = []
    for source, note, features in example_records():
        msg = tf.train.Example(features=tf.train.Features(
            feature={k: to_feature(*f) for k, f in features.items()}))
        records.append(("example", source, note, serialize(msg, source)))
    for source, note, context, lists in sequence_records():
        msg = tf.train.SequenceExample()
        for k, f in context.items():
            msg.context.feature[k].CopyFrom(to_feature(*f))
        for k, steps in lists.items():
            fl = msg.feature_lists.feature_list[k]
            for s in steps:
                fl.feature.add().CopyFrom(to_feature(*s))
        records.append(("sequence", source, note, serialize(msg, source)))
    for note, data in handmade_records():
        records.append(("example", "handmade", note, data))
    return records


# Records also copied, raw (no TFRecord framing), into the example fuzzer's seed corpus.
FUZZ_SEEDS = {
    0: "golden_imagenet_example",
    2: "golden_float_specials",
    10: "golden_sequence_example",
    17: "golden_handmade_unknown_fields",
}


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=here)
    parser.add_argument("--fuzz-corpus", default=os.path.join(here, "..", "..", "fuzz", "corpus", "example"),
                        help="where to copy a few records as fuzz seeds ('' to skip)")
    args = parser.parse_args()
    records = build()

    path = os.path.join(args.out, "examples.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for _, _, _, data in records:
            writer.write(data)

    lines = [
        f"# Written by make_examples.py with TensorFlow {tf.__version__}; do not edit.",
        "# record <index> <example|sequence> <length> <canonical 0|1> <source>   (then its lines, then 'end')",
        "#   canonical 1: the record's bytes are C++ protobuf's deterministic encoding of its values",
        "#   (map entries in bytewise key order, packed lists), so re-serializing must give them back.",
        "# feature <key> <kind> <count> <values...>     one per key, in bytewise key order (Example)",
        "# context <key> <kind> <count> <values...>     (SequenceExample context)",
        "# list <key> <steps>, then one 'step <kind> <count> <values...>' per step (feature_lists)",
        "# key: UTF-8 bytes in hex, '-' when empty. kind: none|int64|float32|bytes. values: int64 in",
        "# decimal, float32 as 8 hex digits of the IEEE bits, bytes in hex ('-' when empty).",
    ]
    for i, (kind, source, note, data) in enumerate(records):
        if kind == "example":
            msg = tf.train.Example.FromString(data)
            values = {k: from_feature(f) for k, f in msg.features.feature.items()}
            canonical = data == canonical_example(values)
            body = describe_example(msg)
        else:
            msg = tf.train.SequenceExample.FromString(data)
            context = {k: from_feature(f) for k, f in msg.context.feature.items()}
            lists = {k: [from_feature(s) for s in fl.feature] for k, fl in msg.feature_lists.feature_list.items()}
            canonical = data == canonical_sequence(context, lists)
            body = describe_sequence(msg)
        lines.append(f"# {i}: {note}")
        lines.append(f"record {i} {kind} {len(data)} {int(canonical)} {source}")
        lines += body
        lines.append("end")
    with open(os.path.join(args.out, "examples_manifest.txt"), "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(lines) + "\n")

    if args.fuzz_corpus:
        for index, name in FUZZ_SEEDS.items():
            with open(os.path.join(args.fuzz_corpus, name), "wb") as f:
                f.write(records[index][3])

    # Self-check: tf.data reads back exactly what was written.
    back = [r.numpy() for r in tf.data.TFRecordDataset(path)]
    assert back == [data for _, _, _, data in records], "tf.data read back different records"
    size = os.path.getsize(path)
    assert size < 30_000, f"examples.tfrecord is {size} bytes; keep it under 30 KB"
    canon = sum(1 for line in lines if line.startswith("record ") and line.split()[4] == "1")
    print(f"wrote {len(records)} records ({size} bytes, {canon} canonical) to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
