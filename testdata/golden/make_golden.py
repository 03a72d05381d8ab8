#!/usr/bin/env python3
"""Writes the TFRecord golden files in this folder with real TensorFlow.

    python3 testdata/golden/make_golden.py [--out testdata/golden]

Deterministic: the same TensorFlow (and zlib) gives the same bytes on every run. The payloads
come from a fixed seed; nothing depends on time, the host or the order of a dict.

Files written (see README.md):
  records.tfrecord{,.gz,.zz}   the same record sequence: uncompressed, GZIP, ZLIB
  empty.tfrecord{,.gz,.zz}     zero records
  flushed.tfrecord.gz          small records with TFRecordWriter.flush() between them
  manifest.json                for each file: compression, records (length, crc32c, sha256),
                               and the `offset size` index lines of the uncompressed file
  manifest.txt                 the same facts in a line format that C++ tests parse trivially

The payloads' checksums are computed here from the payload bytes (hashlib.sha256 and the
CRC32C of tfrecord_ref.py), independently of TensorFlow; the script then checks that TensorFlow's framing
agrees and that tf.data reads every file back unchanged.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import struct
import sys

SEED = 20240611
# Payloads up to this many bytes are also stored verbatim (hex) in the manifests.
INLINE_LIMIT = 64

COMPRESSIONS = {"": ("NONE", ""), "GZIP": ("GZIP", ".gz"), "ZLIB": ("ZLIB", ".zz")}


# CRC32C from the pure-Python reference beside this script (independent of TensorFlow).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tfrecord_ref import crc32c, masked  # noqa: E402

assert crc32c(b"123456789") == 0xE3069283, "CRC32C known answer"


# --- The record sequence. ------------------------------------------------------------------------

def make_example(tf) -> bytes:
    example = tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[b"\xff\xd8\xff\xe0not-really-a-jpeg\xff\xd9"])),
        "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"jpeg"])),
        "image/height": tf.train.Feature(int64_list=tf.train.Int64List(value=[32])),
        "image/width": tf.train.Feature(int64_list=tf.train.Int64List(value=[48])),
        "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[7])),
        "image/class/text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"golden"])),
        "ints": tf.train.Feature(int64_list=tf.train.Int64List(value=[0, -1, 2**62, -(2**63)])),
        "floats": tf.train.Feature(float_list=tf.train.FloatList(value=[0.0, -1.5, 3.25, 1e30])),
        "empty": tf.train.Feature(bytes_list=tf.train.BytesList(value=[])),
    }))
    # Map fields serialize in an unspecified order unless asked for a deterministic one.
    return example.SerializeToString(deterministic=True)


def make_payloads(tf) -> list[tuple[str, bytes]]:
    rng = random.Random(SEED)
    payloads: list[tuple[str, bytes]] = [
        ("empty", b""),
        ("one byte", b"\x00"),
        ("one byte 0xff", b"\xff"),
        ("all 256 byte values", bytes(range(256))),
    ]
    # Sizes around the 12-byte header, the 16-byte framing, powers of two and 4 KiB.
    for size in (2, 3, 7, 8, 11, 12, 15, 16, 17, 31, 100, 255, 1000, 4095, 4096, 4097):
        payloads.append((f"random {size}", rng.randbytes(size)))
    payloads.append(("empty again", b""))
    payloads.append(("tf.train.Example", make_example(tf)))
    # Shuffled 0..255, so a long payload holds every byte value in random order.
    perm = list(range(256))
    rng.shuffle(perm)
    payloads.append(("permutation of 0..255", bytes(perm)))
    # ~64 KiB, mostly zeros with a random byte at random places (1 in 16): large in the record
    # stream, small once compressed, so three copies keep the folder small. 64 KiB + 7, so
    # neither the payload nor its framing is a round size.
    big = bytes(rng.randrange(256) if rng.random() < 1 / 16 else 0 for _ in range(65536 + 7))
    payloads.append(("64 KiB low entropy", big))
    return payloads


# --- Writing and checking. -----------------------------------------------------------------------

def write_with_tf(tf, path: str, payloads: list[bytes], compression: str,
                  flush_between: bool = False) -> None:
    options = tf.io.TFRecordOptions(compression_type=compression)
    with tf.io.TFRecordWriter(path, options) as writer:
        for p in payloads:
            writer.write(p)
            if flush_between:
                writer.flush()


def read_with_tf(tf, path: str, compression: str) -> list[bytes]:
    ds = tf.data.TFRecordDataset(path, compression_type=compression)
    return [t.numpy() for t in ds]


def check_framing(path: str, payloads: list[bytes]) -> list[tuple[int, int]]:
    """Checks TF's uncompressed bytes against the format, field by field; returns the index."""
    with open(path, "rb") as f:
        data = f.read()
    index = []
    offset = 0
    for i, p in enumerate(payloads):
        (length,) = struct.unpack_from("<Q", data, offset)
        (length_crc,) = struct.unpack_from("<I", data, offset + 8)
        payload = data[offset + 12:offset + 12 + length]
        (payload_crc,) = struct.unpack_from("<I", data, offset + 12 + length)
        if length != len(p) or payload != p:
            sys.exit(f"{path}: record {i} at offset {offset}: payload differs")
        if length_crc != masked(data[offset:offset + 8]):
            sys.exit(f"{path}: record {i} at offset {offset}: length CRC disagrees")
        if payload_crc != masked(p):
            sys.exit(f"{path}: record {i} at offset {offset}: payload CRC disagrees")
        index.append((offset, 16 + length))
        offset += 16 + length
    if offset != len(data):
        sys.exit(f"{path}: {len(data) - offset} bytes after the last record")
    return index


def record_entry(name: str, p: bytes) -> dict:
    entry = {
        "what": name,
        "length": len(p),
        "crc32c": f"{crc32c(p):08x}",
        "sha256": hashlib.sha256(p).hexdigest(),
    }
    if len(p) <= INLINE_LIMIT:
        entry["hex"] = p.hex()
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = parser.parse_args()

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    named = make_payloads(tf)
    payloads = [p for _, p in named]
    records = [record_entry(name, p) for name, p in named]
    flushed = [b"chunk %d " % i + bytes(range(i * 7 % 256, 256)) for i in range(6)]

    files = []
    for tf_name, (label, ext) in COMPRESSIONS.items():
        for stem, seq, recs in (("records", payloads, records), ("empty", [], [])):
            name = f"{stem}.tfrecord{ext}"
            path = os.path.join(args.out, name)
            write_with_tf(tf, path, seq, tf_name)
            if read_with_tf(tf, path, tf_name) != seq:
                sys.exit(f"{name}: tf.data reads back something else")
            entry = {"file": name, "compression": label, "record_count": len(seq),
                     "size": os.path.getsize(path), "records": recs}
            if tf_name == "":
                entry["index"] = [f"{o} {s}" for o, s in check_framing(path, seq)]
            files.append(entry)

    name = "flushed.tfrecord.gz"
    path = os.path.join(args.out, name)
    write_with_tf(tf, path, flushed, "GZIP", flush_between=True)
    if read_with_tf(tf, path, "GZIP") != flushed:
        sys.exit(f"{name}: tf.data reads back something else")
    files.append({"file": name, "compression": "GZIP", "record_count": len(flushed),
                  "size": os.path.getsize(path),
                  "records": [record_entry(f"chunk {i}", p) for i, p in enumerate(flushed)]})

    # The uncompressed files must be the same bytes as the GZIP and ZLIB ones decompressed.
    import gzip
    import zlib
    with open(os.path.join(args.out, "records.tfrecord"), "rb") as f:
        raw = f.read()
    with open(os.path.join(args.out, "records.tfrecord.gz"), "rb") as f:
        assert gzip.decompress(f.read()) == raw
    with open(os.path.join(args.out, "records.tfrecord.zz"), "rb") as f:
        assert zlib.decompress(f.read()) == raw

    manifest = {
        "generator": "testdata/golden/make_golden.py",
        "tensorflow_version": tf.__version__,
        "seed": SEED,
        "notes": "crc32c is the plain (unmasked) CRC32C of the payload; index lines are "
                 "`offset size` with size = 16 + payload length (DALI tfrecord2idx format).",
        "files": files,
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")

    # Line format for C++: one fact per line, space-separated, no quoting needed.
    #   file <name> <NONE|GZIP|ZLIB> <record_count>
    #   record <length> <crc32c hex> <payload hex, or '-' when empty or over INLINE_LIMIT>
    #   index <offset> <size>          (uncompressed files only)
    lines = [
        f"# Written by make_golden.py with TensorFlow {tf.__version__}; do not edit.",
        "# file <name> <NONE|GZIP|ZLIB> <record_count>",
        f"# record <length> <crc32c hex> <payload hex, or - when empty or over {INLINE_LIMIT} "
        "bytes>",
        "# index <offset> <framed size>",
    ]
    for entry in files:
        lines.append(f"file {entry['file']} {entry['compression']} {entry['record_count']}")
        for r in entry["records"]:
            lines.append(f"record {r['length']} {r['crc32c']} {r.get('hex') or '-'}")
        for line in entry.get("index", []):
            lines.append(f"index {line}")
    with open(os.path.join(args.out, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")

    total = sum(os.path.getsize(os.path.join(args.out, n)) for n in os.listdir(args.out))
    print(f"TensorFlow {tf.__version__}: wrote {len(files)} golden files to {args.out} "
          f"({total} bytes in the folder)")


if __name__ == "__main__":
    main()
