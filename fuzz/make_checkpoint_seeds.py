#!/usr/bin/env python3
"""Writes seeds for checkpoint_fuzzer into fuzz/corpus/checkpoint/: real checkpoints of the two
pipelines in checkpoint_fuzzer.cc (same records, same stages, so the same fingerprint), taken
after 0..n elements, each prefixed with the pipeline's selector byte (bit 1 set: the fuzzer
re-seals the state's CRC32C). Needs recordflow installed. Hand-made seeds kept beside them:
*_reseal (re-seal mode), p0_v1_format_refused (a version-1 state, without a checksum)."""
import os

import recordflow as rf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "checkpoint")

records = [rf.Example({"id": i}).serialize() for i in range(10)]
pipelines = {
    0: rf.Dataset.from_records(records).shuffle(4, seed=1).repeat(2).batch(3)
         .parse({"id": rf.FixedLen([], "int64")}),
    1: rf.Dataset.from_records(records).shuffle(4, seed=1).take(7),
}
os.makedirs(OUT, exist_ok=True)
for which, ds in pipelines.items():
    n = sum(1 for _ in ds)
    for k in range(n + 1):
        it = ds.iterator(epoch=0)
        for _ in range(k):
            next(it)
        with open(os.path.join(OUT, f"p{which}_after{k:02d}"), "wb") as f:
            f.write(bytes([which]) + it.checkpoint())
        it.close()
