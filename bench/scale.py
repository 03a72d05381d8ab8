#!/usr/bin/env python3
"""How cost grows with the dataset: synthetic 100-byte Examples, N = 10^4 .. 10^7 records in
10 .. 10,000 shards; recordflow side by side with tf.data on the same files.

    python bench/scale.py [--max-n 1000000] [--shards 10,1000] [--no-tf]
                          [--timeout 600] [--tf-read-prefix 0]
                          [--markdown scale.md] [--png scale.png] [--work /tmp/rf_scale]
                          [--json rows.json] [--include earlier.json ...]

Each measurement runs in a fresh subprocess (so peak RSS, `ru_maxrss`, is that point's alone):

- records/s and time to first batch (TTFB): `from_files -> interleave(16) -> batch(1024)`
  against `TFRecordDataset` files `interleave(cycle_length=16, num_parallel_calls=AUTOTUNE)
  -> batch(1024)`, reading every record once. --tf-read-prefix K (> 0) bounds tf.data's read
  to the epoch's first K records (`take(K)` before batching; its rate is of those K, and the
  table marks it); --timeout is each measurement's limit in seconds.
- global shuffle: `from_files -> global_shuffle -> batch(1024)`: TTFB, the RSS it adds over the
  process after `import` (its index state: per-record index entries and the permutation) per
  record, and the checkpoint's size taken after the first batch. tf.data's exact global order
  needs `shuffle(N)`, whose TTFB and RSS are measured for N <= --tf-shuffle-max.

Prints a markdown table (and writes it with --markdown) and plots the curves against N
(--png, matplotlib).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

BATCH = 1024
CYCLE = 16


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# ---------------------------------------------------------------------------- data
def example_template():
    """A serialized Example of ~100 bytes whose 'id' digits can be rewritten in place."""
    import recordflow as rf
    digits = b"0" * 10
    payload = b"x" * 60
    ser = rf.Example({"id": digits, "payload": payload, "label": 7}).serialize()
    return ser, ser.index(digits)


def write_dataset(root: str, n: int, shards: int) -> list[str]:
    import recordflow as rf
    d = os.path.join(root, f"n{n}_s{shards}")
    done = os.path.join(d, "DONE")
    paths = [os.path.join(d, f"part-{i:05d}-of-{shards:05d}.tfrecord") for i in range(shards)]
    if os.path.exists(done):
        return paths
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    ser, at = example_template()
    buf = bytearray(ser)
    per = [n // shards + (1 if i < n % shards else 0) for i in range(shards)]
    k = 0
    for path, count in zip(paths, per):
        # No fsync: benchmark data need not survive a crash, and the four fsyncs a shard
        # (data, .idx, their directory) made 10,000 shards of 10 records take ~190 s to write.
        with rf.RecordWriter(path, index=True, sync=False) as w:
            for _ in range(count):
                buf[at:at + 10] = b"%010d" % k
                w.write(bytes(buf))
                k += 1
    open(done, "w").close()
    return paths


# ---------------------------------------------------------------------------- points
def point_rf_read(paths: list[str]) -> dict:
    import recordflow as rf
    t0 = time.perf_counter()
    ds = rf.Dataset.from_files(paths).interleave(cycle_length=CYCLE).batch(BATCH)
    it = ds.iterator()
    n = _first_len(it)
    ttfb = time.perf_counter() - t0
    for b in it:
        n += _batch_len(b)
    wall = time.perf_counter() - t0
    return {"ttfb_s": ttfb, "records": n, "records_per_s": n / wall,
            "peak_rss": peak_rss_bytes()}


def _batch_len(b) -> int:
    # A raw batch (no parse) is a list/array of serialized records under its key.
    v = next(iter(b.values())) if isinstance(b, dict) else b
    return len(v)


def _first_len(it) -> int:
    return _batch_len(next(it))


def point_rf_global(paths: list[str], n: int) -> dict:
    import recordflow as rf
    base = rss_bytes()
    t0 = time.perf_counter()
    it = rf.Dataset.from_files(paths).global_shuffle(seed=0).batch(BATCH).iterator()
    first = _first_len(it)
    ttfb = time.perf_counter() - t0
    held = rss_bytes() - base
    ckpt = it.checkpoint()
    it.close()
    return {"ttfb_s": ttfb, "first": first, "rss_added": held, "bytes_per_record": held / n,
            "checkpoint_bytes": len(ckpt), "peak_rss": peak_rss_bytes()}


def _tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    return tf


def point_tf_read(paths: list[str], prefix: int = 0) -> dict:
    tf = _tf()
    t0 = time.perf_counter()
    ds = (tf.data.Dataset.from_tensor_slices(paths)
          .interleave(tf.data.TFRecordDataset, cycle_length=CYCLE,
                      num_parallel_calls=tf.data.AUTOTUNE))
    if prefix > 0:
        ds = ds.take(prefix)
    ds = ds.batch(BATCH).prefetch(tf.data.AUTOTUNE)
    it = iter(ds)
    n = int(next(it).shape[0])
    ttfb = time.perf_counter() - t0
    for b in it:
        n += int(b.shape[0])
    wall = time.perf_counter() - t0
    out = {"ttfb_s": ttfb, "records": n, "records_per_s": n / wall, "peak_rss": peak_rss_bytes()}
    if prefix > 0:
        out["prefix"] = prefix
    return out


def point_tf_shuffle(paths: list[str], n: int) -> dict:
    tf = _tf()
    base = rss_bytes()
    t0 = time.perf_counter()
    ds = (tf.data.Dataset.from_tensor_slices(paths)
          .interleave(tf.data.TFRecordDataset, cycle_length=CYCLE,
                      num_parallel_calls=tf.data.AUTOTUNE)
          .shuffle(n, seed=0).batch(BATCH))
    it = iter(ds)
    next(it)
    ttfb = time.perf_counter() - t0
    held = rss_bytes() - base
    return {"ttfb_s": ttfb, "rss_added": held, "bytes_per_record": held / n,
            "peak_rss": peak_rss_bytes()}


POINTS = {"rf_read": point_rf_read, "tf_read": point_tf_read}
N_POINTS = {"rf_global": point_rf_global, "tf_shuffle": point_tf_shuffle}


def run_point(kind: str, paths: list[str], n: int, timeout: float, prefix: int = 0) -> dict:
    # The shards by their directory: 10,000 paths would overflow the child's argument list.
    spec = json.dumps({"kind": kind, "dir": os.path.dirname(paths[0]), "n": n,
                       "prefix": prefix})
    try:
        p = subprocess.run([sys.executable, __file__, "--point", spec], capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:g} s"}
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------- report
def mb(x):
    return f"{x / 2**20:.0f}"


def table(rows: list[dict]) -> str:
    out = ["| N | shards | rf TTFB s | tf TTFB s | rf rec/s | tf rec/s | rf/tf | rf peak RSS MB "
           "| tf peak RSS MB | global shuffle TTFB s | index B/record | checkpoint B "
           "| tf shuffle(N) TTFB s | tf shuffle B/record | load |",
           "|" + "---|" * 15]
    for r in rows:
        rf_, tf_, g, ts = r["rf_read"], r.get("tf_read", {}), r["rf_global"], r.get("tf_shuffle", {})

        def f(d, k, fmt):
            if "error" in d:
                return "error: " + d["error"][:60]
            return fmt.format(d[k]) if k in d else "-"
        ratio = (f"{rf_['records_per_s'] / tf_['records_per_s']:.2f}x"
                 if "records_per_s" in rf_ and "records_per_s" in tf_ else "-")
        if "prefix" in tf_:
            ratio += f" (tf: first {tf_['prefix']:,})"
        load = f"{r['load'][0]:.1f}-{r['load'][1]:.1f}" if "load" in r else "-"
        out.append(
            f"| {r['n']:,} | {r['shards']:,} | {f(rf_, 'ttfb_s', '{:.3f}')} | "
            f"{f(tf_, 'ttfb_s', '{:.3f}')} | {f(rf_, 'records_per_s', '{:,.0f}')} | "
            f"{f(tf_, 'records_per_s', '{:,.0f}')} | {ratio} | "
            f"{mb(rf_['peak_rss']) if 'peak_rss' in rf_ else '-'} | "
            f"{mb(tf_['peak_rss']) if 'peak_rss' in tf_ else '-'} | "
            f"{f(g, 'ttfb_s', '{:.3f}')} | {f(g, 'bytes_per_record', '{:.1f}')} | "
            f"{f(g, 'checkpoint_bytes', '{:,}')} | {f(ts, 'ttfb_s', '{:.2f}')} | "
            f"{f(ts, 'bytes_per_record', '{:.0f}')} | {load} |")
    return "\n".join(out)


def plot(rows: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    for shards in sorted({r["shards"] for r in rows}):
        rs = [r for r in rows if r["shards"] == shards]
        ns = [r["n"] for r in rs]

        def ys(kind, key, scale=1.0):
            return [r[kind][key] * scale if key in r.get(kind, {}) else float("nan") for r in rs]
        axes[0].plot(ns, ys("rf_read", "ttfb_s"), "o-", label=f"recordflow, {shards} shards")
        axes[0].plot(ns, ys("tf_read", "ttfb_s"), "x--", label=f"tf.data, {shards} shards")
        axes[1].plot(ns, ys("rf_read", "records_per_s"), "o-", label=f"recordflow, {shards}")
        axes[1].plot(ns, ys("tf_read", "records_per_s"), "x--", label=f"tf.data, {shards}")
        axes[2].plot(ns, ys("rf_read", "peak_rss", 2**-20), "o-", label=f"recordflow read, {shards}")
        axes[2].plot(ns, ys("rf_global", "peak_rss", 2**-20), "s-",
                     label=f"recordflow global shuffle, {shards}")
        axes[2].plot(ns, ys("tf_shuffle", "peak_rss", 2**-20), "x--",
                     label=f"tf.data shuffle(N), {shards}")
        axes[3].plot(ns, ys("rf_global", "ttfb_s"), "s-", label=f"recordflow global, {shards}")
        axes[3].plot(ns, ys("tf_shuffle", "ttfb_s"), "x--", label=f"tf.data shuffle(N), {shards}")
    titles = ["time to first batch (s)", "records/s (one pass)", "peak RSS (MiB)",
              "shuffled: time to first batch (s)"]
    for ax, t in zip(axes, titles):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("records N (100-byte Examples)")
        ax.set_title(t)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--point", help=argparse.SUPPRESS)
    ap.add_argument("--max-n", type=int, default=1_000_000)
    ap.add_argument("--min-n", type=int, default=10_000)
    ap.add_argument("--shards", default="10,1000,10000",
                    help="shard counts (a count above N/10 is left out)")
    ap.add_argument("--no-tf", action="store_true")
    ap.add_argument("--tf-shuffle-max", type=int, default=1_000_000)
    ap.add_argument("--timeout", type=float, default=600,
                    help="each measurement's limit, seconds")
    ap.add_argument("--tf-read-prefix", type=int, default=0,
                    help="tf.data reads only the epoch's first K records (0: all)")
    ap.add_argument("--work", default="/tmp/rf_scale")
    ap.add_argument("--markdown")
    ap.add_argument("--png")
    ap.add_argument("--json")
    ap.add_argument("--include", nargs="+", default=[], metavar="JSON",
                    help="rows of earlier runs' --json, put before this run's in the table and "
                         "the chart (a run at 10^7 beside a grid up to 10^6)")
    a = ap.parse_args()
    if a.point:
        spec = json.loads(a.point)
        kind = spec["kind"]
        spec["paths"] = sorted(os.path.join(spec["dir"], f) for f in os.listdir(spec["dir"])
                               if f.endswith(".tfrecord"))
        if kind == "tf_read":
            res = point_tf_read(spec["paths"], spec.get("prefix", 0))
        elif kind in POINTS:
            res = POINTS[kind](spec["paths"])
        else:
            res = N_POINTS[kind](spec["paths"], spec["n"])
        print(json.dumps(res))
        return
    ns = []
    n = a.min_n
    while n <= a.max_n:
        ns.append(n)
        n *= 10
    rows = []
    for n in ns:
        for shards in [int(s) for s in a.shards.split(",")]:
            if shards > n // 10:
                continue
            t = time.perf_counter()
            paths = write_dataset(a.work, n, shards)
            print(f"N={n:,} shards={shards:,}: written in {time.perf_counter() - t:.1f} s",
                  file=sys.stderr)
            load0 = os.getloadavg()[0]
            row = {"n": n, "shards": shards,
                   "rf_read": run_point("rf_read", paths, n, a.timeout),
                   "rf_global": run_point("rf_global", paths, n, a.timeout)}
            if not a.no_tf:
                prefix = a.tf_read_prefix if 0 < a.tf_read_prefix < n else 0
                row["tf_read"] = run_point("tf_read", paths, n, a.timeout, prefix)
                if n <= a.tf_shuffle_max:
                    row["tf_shuffle"] = run_point("tf_shuffle", paths, n, a.timeout)
            row["load"] = [min(load0, os.getloadavg()[0]), max(load0, os.getloadavg()[0])]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    for earlier in reversed(a.include):
        with open(earlier) as f:
            rows = json.load(f) + rows
    md = table(rows)
    load = os.getloadavg()  # at the end of the run; each row carries its own (row["load"])
    header = (f"`{' '.join(['python', 'bench/scale.py'] + sys.argv[1:])}` on {os.cpu_count()} "
              f"cores, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}\n\n")
    print(header + md)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(header + md + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if a.png:
        plot(rows, a.png)


if __name__ == "__main__":
    main()
