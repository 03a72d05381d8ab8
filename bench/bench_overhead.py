#!/usr/bin/env python3
"""Per-batch Python overhead: what each loader costs per batch when the data costs nothing.

    python bench/bench_overhead.py            # ~1 min on 2 shared cores
    python bench/bench_overhead.py --quick    # smoke run, a few seconds

Data: one TFRecord file of 64,000 tiny tf.train.Examples {"a": int64, "b": int64} (~30 B a
record), in the page cache; batch 32 (2,000 batches a pass). The work per record is trivial,
so the time per batch is each framework's per-batch cost: its Python layers, thread hand-offs
and conversions. Every contender consumes whole passes and touches every batch (sums "a" and
"b"); the sums are checked against the file's on every run.

Contenders (the same records, the same batch size, the same outputs: two int64 arrays):
  rf              rf.Dataset.from_files(f).batch(32).parse(spec).prefetch() -> NumPy
  rf.torch        rf.torch.loader(the same) -> torch tensors sharing recordflow's buffers
  tf.data         TFRecordDataset(f).batch(32).map(parse_example, AUTOTUNE).prefetch(AUTOTUNE)
                    .as_numpy_iterator()
  torch DataLoader  DataLoader(map-style dataset over the file's records in memory,
                    batch_size=32, num_workers=0, collate_fn=rf.parse_example -> tensors):
                    PyTorch's own per-item __getitem__ + per-batch collate path
Median of --runs passes each (after one warm-up pass), contenders interleaved run by run;
ratios are contender / rf.
"""

import argparse
import os
import statistics
import tempfile
import time

import recordflow as rf

SPEC = {"a": rf.FixedLen([], "int64"), "b": rf.FixedLen([], "int64")}
BATCH = 32


def write(path, n):
    if os.path.exists(path) and rf.count_records(path) == n:
        return
    with rf.RecordWriter(path, index=True) as w:
        for i in range(n):
            w.write(rf.Example({"a": i, "b": 2 * i}).serialize())


def consume(batches):
    """What every contender's batches go through: the sums of "a" and "b" (checked by main)."""
    sa = sb = 0
    for b in batches:
        sa += int(b["a"].sum())
        sb += int(b["b"].sum())
    return sa, sb


def contenders(path, records):
    import tensorflow as tf
    import torch

    import recordflow.torch as rft

    ds = rf.Dataset.from_files(path).batch(BATCH).parse(SPEC).prefetch()
    loader = rft.loader(ds)

    tf_spec = {"a": tf.io.FixedLenFeature([], tf.int64), "b": tf.io.FixedLenFeature([], tf.int64)}
    tfds = (tf.data.TFRecordDataset(path).batch(BATCH)
            .map(lambda x: tf.io.parse_example(x, tf_spec), num_parallel_calls=tf.data.AUTOTUNE)
            .prefetch(tf.data.AUTOTUNE))

    class Records(torch.utils.data.Dataset):
        def __len__(self):
            return len(records)

        def __getitem__(self, i):
            return records[i]

    def collate(batch):
        parsed = rf.parse_example(batch, SPEC)
        return {k: torch.from_numpy(v) for k, v in parsed.items()}

    dl = torch.utils.data.DataLoader(Records(), batch_size=BATCH, num_workers=0, collate_fn=collate)

    return {"rf": lambda: consume(ds), "rf.torch": lambda: consume(loader),
            "tf.data": lambda: consume(tfds.as_numpy_iterator()),
            "torch DataLoader": lambda: consume(dl)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "rf-bench-overhead"))
    args = ap.parse_args()
    n = 6_400 if args.quick else 64_000
    runs = args.runs or (3 if args.quick else 7)
    os.makedirs(args.data_dir, exist_ok=True)
    path = os.path.join(args.data_dir, f"tiny-{n}.tfrecord")
    write(path, n)
    records = list(rf.RecordReader(path))  # page cache warm; the DataLoader's in-memory input
    expected = (n * (n - 1) // 2, n * (n - 1))
    batches = -(-n // BATCH)

    runners = contenders(path, records)
    times = {name: [] for name in runners}
    for name, fn in runners.items():  # warm-up pass (graph building, first-touch)
        assert fn() == expected, name
    for _ in range(runs):
        for name, fn in runners.items():
            t = time.perf_counter()
            got = fn()
            times[name].append(time.perf_counter() - t)
            assert got == expected, (name, got, expected)

    base = statistics.median(times["rf"]) / batches * 1e6
    print(f"{n} records, batch {BATCH} ({batches} batches a pass), {runs} runs, "
          f"{os.cpu_count()} cores")
    print()
    print("| Loader | us per batch (median) | min-max | ratio to rf |")
    print("|---|--:|--:|--:|")
    for name, ts in times.items():
        per = [t / batches * 1e6 for t in ts]
        med = statistics.median(per)
        print(f"| {name} | {med:.1f} | {min(per):.1f}-{max(per):.1f} | {med / base:.1f}x |")


if __name__ == "__main__":
    main()
