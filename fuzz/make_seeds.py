#!/usr/bin/env python3
"""Writes the seed corpus for record_reader_fuzzer into fuzz/corpus/record_reader/.

Each seed is one mode byte (see record_reader_fuzzer.cc: mode % 3 picks none/GZIP/ZLIB,
bit 2 = skip policy, bit 3 = no CRC checks, bit 4 = small buffer) followed by file bytes.
Seeds come from the TensorFlow-written golden files plus hand-damaged variants.
"""
import gzip
import os
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "testdata", "golden")
OUT = os.path.join(HERE, "corpus", "record_reader")

sys.path.insert(0, GOLDEN)
from seedlib import write_seeds  # noqa: E402  (next to this script)
from tfrecord_ref import frame  # noqa: E402  (TFRecord framing independent of recordflow)


def main():
    os.makedirs(OUT, exist_ok=True)
    plain = frame([b"", b"a", b"hello world" * 3, bytes(range(256))])
    seeds = {
        "plain": bytes([0]) + plain,
        "plain_skip_small_buffer": bytes([4 | 16]) + plain,
        "gzip": bytes([1]) + gzip.compress(plain, mtime=0),
        "zlib": bytes([2]) + zlib.compress(plain),
        "truncated": bytes([0]) + plain[:-7],
        "truncated_skip": bytes([4]) + plain[:-7],
        "bad_length_skip": bytes([4]) + plain[:18] + bytes([plain[18] ^ 0x10]) + plain[19:],
        "bad_payload_nocrc": bytes([8]) + plain[:30] + b"\x00" + plain[31:],
        "index_text": bytes([0]) + b"0 16\n16 17\n33 49\n",
    }
    with open(os.path.join(GOLDEN, "records.tfrecord"), "rb") as f:
        seeds["golden_head_skip"] = bytes([4 | 16]) + f.read(4096)
    with open(os.path.join(GOLDEN, "empty.tfrecord.gz"), "rb") as f:
        seeds["golden_empty_gzip"] = bytes([1]) + f.read()
    write_seeds(seeds, OUT)


if __name__ == "__main__":
    main()
