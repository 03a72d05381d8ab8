"""rf.ray (recordflow's Ray Data source and sink) against Ray Data's own read_tfrecords /
write_tfrecords on the same Dataset and the same files, on one machine, in one run.

    python bench/ray_bench.py [--rows 200000] [--cores 2] [--repeat 3] [--json out.json]

The Dataset (long, int, float[16], binary ~200 B, string; the columns of spark_bench.py) is
materialized in Ray's object store first, in 2 x cores blocks. Write: the Dataset saved by
rf.ray.write and by Dataset.write_tfrecords (a fresh folder each run). Read: the files
rf.ray.write made, read by rf.ray.read and by ray.data.read_tfrecords, each materialized (every
column decoded into Arrow blocks). Rates are rows/s per core (Ray runs with num_cpus=cores),
the median of --repeat runs; ratios are recordflow over Ray Data.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

import numpy as np
from benchlib import show_results, write_read_rates


def _table(rows: int):
    import pyarrow as pa
    ids = np.arange(rows, dtype=np.int64)
    vec = (ids[:, None] * np.arange(1, 17)[None, :]).astype(np.float32)
    return pa.table({
        "id": ids,
        "label": pa.array((ids % 1000).astype(np.int32)),
        "vec": pa.ListArray.from_arrays(pa.array(np.arange(0, rows * 16 + 1, 16, dtype=np.int32)),
                                        pa.array(vec.reshape(-1))),
        "payload": pa.array([str(i).encode() * 30 for i in range(rows)], pa.binary()),
        "text": pa.array([f"row {i}" for i in range(rows)], pa.string()),
    })


def _median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="median of N timings (>= 3)")
    ap.add_argument("--json", default="")
    args = ap.parse_args()

    import ray

    import recordflow as rf
    ray.init(num_cpus=args.cores, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1")
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    work = tempfile.mkdtemp(prefix="rf-ray-bench-")
    results: dict = {"rows": args.rows, "cores": args.cores, "repeat": args.repeat}
    try:
        ds = ray.data.from_arrow(_table(args.rows)).repartition(args.cores * 2).materialize()
        rf_dir, ray_dir = os.path.join(work, "rf"), os.path.join(work, "ray")

        def write_rf():
            rf.ray.write(ds, rf_dir, mode="overwrite")

        def write_ray():
            shutil.rmtree(ray_dir, ignore_errors=True)
            ds.write_tfrecords(ray_dir)

        w_rf = _median(write_rf, args.repeat)
        w_ray = _median(write_ray, args.repeat)
        files = sorted(os.path.join(rf_dir, f) for f in os.listdir(rf_dir) if f.endswith(".tfrecord"))
        counts = {}

        def read_rf():
            counts["rf"] = rf.ray.read(files).materialize().count()

        def read_ray():
            counts["ray"] = ray.data.read_tfrecords(files).materialize().count()

        r_rf = _median(read_rf, args.repeat)
        r_ray = _median(read_ray, args.repeat)
        assert counts["rf"] == counts["ray"] == args.rows, counts
        results.update(write_read_rates(args.rows, args.cores, ("rf_ray", w_rf, r_rf),
                                        ("ray_tfrecords", w_ray, r_ray), vs="ray"))
    finally:
        ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    show_results(results, args.json)


if __name__ == "__main__":
    main()
