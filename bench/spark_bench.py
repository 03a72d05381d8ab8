"""recordflow on Spark 4 against Spark's own Parquet writer/reader, and rfs.convert against
`recordflow convert`, on one machine, in one run.

    python bench/spark_bench.py [--rows 200000] [--cores 2] [--images 600] [--json out.json]

Write: the same cached DataFrame (long, int, float[16], binary ~200 B, string) saved with
format("recordflow") and with Parquet (snappy, Spark's default). Read: each folder scanned with
every column materialized (written to Spark's "noop" sink). Rates are rows/s per core (the
session runs local[cores]). Conversion: an image folder converted by rfs.convert (one task per
shard, same plan and bytes) and by rf.convert (one process, `cores` threads).
With --ray, Ray Data's read_tfrecords / write_tfrecords on the recordflow shards as well.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from benchlib import show_results as _show  # noqa: E402
from benchlib import write_read_rates  # noqa: E402

import recordflow as rf  # noqa: E402


def _session(cores: int):
    from pyspark.sql import SparkSession
    os.environ["PYSPARK_PYTHON"] = sys.executable
    s = (SparkSession.builder.master(f"local[{cores}]").appName("recordflow-bench")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.python.worker.reuse", "true").config("spark.driver.memory", "2g")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    return s


def _timed(fn, repeat: int = 2) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _images(root: str, n: int) -> None:
    rng = np.random.default_rng(0)
    for c in range(10):
        os.makedirs(os.path.join(root, f"class{c:02d}"), exist_ok=True)
    for i in range(n):
        img = rng.integers(0, 255, (96, 128, 3), dtype=np.uint8)
        with open(os.path.join(root, f"class{i % 10:02d}", f"{i:06d}.jpg"), "wb") as f:
            f.write(rf.encode_jpeg(img))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--images", type=int, default=600)
    ap.add_argument("--json", default="")
    ap.add_argument("--repeat", type=int, default=2, help="best of N timings")
    ap.add_argument("--ray", action="store_true", help="also Ray Data's read/write_tfrecords")
    args = ap.parse_args()

    import recordflow.spark as rfs
    spark = _session(args.cores)
    rfs.register(spark)
    work = tempfile.mkdtemp(prefix="rf-spark-bench-")
    results: dict = {"rows": args.rows, "cores": args.cores}
    try:
        df = spark.range(args.rows, numPartitions=args.cores * 2).selectExpr(
            "id", "cast(id % 1000 as int) as label",
            "transform(sequence(1, 16), x -> cast(id * x as float)) as vec",
            "cast(repeat(cast(id as string), 30) as binary) as payload",
            "concat('row ', cast(id as string)) as text").cache()
        df.count()
        rf_dir, pq_dir = os.path.join(work, "rf"), os.path.join(work, "pq")
        w_rf = _timed(lambda: df.write.format("recordflow").mode("overwrite").save(rf_dir), args.repeat)
        w_pq = _timed(lambda: df.write.mode("overwrite").parquet(pq_dir), args.repeat)
        r_rf = _timed(lambda: spark.read.format("recordflow").load(rf_dir)
                      .write.format("noop").mode("overwrite").save(), args.repeat)
        r_pq = _timed(lambda: spark.read.parquet(pq_dir).write.format("noop").mode("overwrite").save(),
                      args.repeat)
        results.update(write_read_rates(args.rows, args.cores, ("recordflow", w_rf, r_rf),
                                        ("parquet", w_pq, r_pq), vs="parquet"))
        rf_bytes = sum(os.path.getsize(os.path.join(rf_dir, f)) for f in os.listdir(rf_dir)
                       if f.endswith(".tfrecord"))
        results["recordflow_bytes"] = rf_bytes
        _show(results)
        if args.ray:
            results.update(_ray(rf_dir, work, args.rows, args.cores, args.repeat))
            _show(results)

        src = os.path.join(work, "images")
        _images(src, args.images)
        shards = args.cores * 2
        c_spark = _timed(lambda: rfs.convert(spark, src, os.path.join(work, "c_spark"), shards=shards,
                                             val_fraction=0.1, seed=1, overwrite=True), repeat=1)
        c_local = _timed(lambda: rf.convert(src, os.path.join(work, "c_local"), shards=shards,
                                            val_fraction=0.1, seed=1, overwrite=True,
                                            num_threads=args.cores), repeat=1)
        same = all(open(os.path.join(work, "c_spark", f), "rb").read() ==
                   open(os.path.join(work, "c_local", f), "rb").read()
                   for f in os.listdir(os.path.join(work, "c_local")) if f.endswith(".tfrecord"))
        results.update(convert_images=args.images,
                       convert_rfs_images_per_s=args.images / c_spark,
                       convert_local_images_per_s=args.images / c_local,
                       convert_ratio_rfs_vs_local=c_local / c_spark,
                       convert_outputs_identical=same)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    _show(results, args.json)


def _ray(rf_dir: str, work: str, rows: int, cores: int, repeat: int) -> dict:
    import ray
    ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
    try:
        files = sorted(os.path.join(rf_dir, f) for f in os.listdir(rf_dir) if f.endswith(".tfrecord"))
        ds = None

        def read():
            nonlocal ds
            ds = ray.data.read_tfrecords(files).materialize()

        r = _timed(read, repeat)
        out = os.path.join(work, "ray_out")
        w = _timed(lambda: (shutil.rmtree(out, ignore_errors=True), ds.write_tfrecords(out)), repeat)
        return {"read_ray_rows_per_s_per_core": rows / r / cores,
                "write_ray_rows_per_s_per_core": rows / w / cores}
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
