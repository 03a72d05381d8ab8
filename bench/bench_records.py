#!/usr/bin/env python3
"""Reading TFRecord files: recordflow against TensorFlow's tf.data, in one run, as ratios.

Over 600 lines: the data generator, every contender and the ratio table belong to one run.

    python bench/bench_records.py            # full run (~1M small / 2,000 large records)
    python bench/bench_records.py --quick    # smoke run: small files, 3 runs

Files are generated once under bench/data/ (reused while bench/data/manifest.json says they
match) and read once before measuring so they sit in the page cache. For every row, the
recordflow contender and every tf.data variant run in turn, in a rotating order, `--warmup`
times unmeasured and then `--runs` times measured; a row reports each contender's median.
The TF peer of a row is the TF variant with the best median. Both sides run in this one
process, on the same files, with the same cores available.

Rows:
  (a) scan        count records with no per-record Python: rf.count_records vs. tf.data
                  pipelines that stay in TF's C++ runtime (Dataset.reduce, batched or not, in a
                  tf.function; or a Python loop over large batches).
  (b) batches     records delivered to Python as bytes, in batches: RecordReader.read_batch vs.
                  TFRecordDataset.batch(...)[.prefetch(AUTOTUNE)] -> NumPy arrays of bytes.
  (c) per-record  `for r in rf.RecordReader(f)` vs. `for r in tf.data.TFRecordDataset(f)`
                  (TF yields scalar EagerTensors, not bytes: that favours TF). For small
                  records only the first --per-record-limit records are read (TF needs ~90 us
                  a record here, so the whole file five times would take minutes).
  (d) CRC cost    recordflow with verify_checksums=True vs. False (count_records and
                  read_batch): extra time in percent, (t_on - t_off) / t_off.

Writes a markdown table to stdout and bench/out/records.md, raw numbers to
bench/out/records.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported

import numpy as np  # noqa: E402
from benchlib import cpu_identity, fmt_rate, mem_total_gib  # noqa: E402

import recordflow as rf  # noqa: E402

HERE = Path(__file__).resolve().parent
DATA_VERSION = 1  # bump when the generator changes, to regenerate stale files
MB = 1e6


# --------------------------------------------------------------------------------------------
# Data


@dataclass(frozen=True)
class FileSpec:
    name: str
    records: int
    record_size: int
    compression: str | None  # None or "GZIP"
    batch: int  # batch size for the (b) rows and the batched TF scans

    @property
    def payload_bytes(self) -> int:
        return self.records * self.record_size

    @property
    def tf_compression(self) -> str:
        return self.compression or ""

    @property
    def label(self) -> str:
        kib = self.record_size // 1024
        size = f"{self.record_size} B" if self.record_size < 1024 else f"{kib} KiB"
        return f"{size}, {self.compression or 'none'}"


def file_specs(quick: bool) -> list[FileSpec]:
    small, large = (100_000, 200) if quick else (1_000_000, 2_000)
    prefix = "quick-" if quick else ""
    # Large records use batches of 64 (6.5 MB): a batch of 4096 would be the whole 200 MB file.
    return [
        FileSpec(f"{prefix}small.tfrecord", small, 100, None, 4096),
        FileSpec(f"{prefix}large.tfrecord", large, 100 * 1024, None, 64),
        FileSpec(f"{prefix}small.tfrecord.gz", small, 100, "GZIP", 4096),
        FileSpec(f"{prefix}large.tfrecord.gz", large, 100 * 1024, "GZIP", 64),
    ]


def manifest_entry(spec: FileSpec) -> dict:
    return {
        "version": DATA_VERSION,
        "records": spec.records,
        "record_size": spec.record_size,
        "compression": spec.compression,
    }


def ensure_files(data_dir: Path, specs: list[FileSpec]) -> None:
    """Writes the files the manifest does not vouch for (right parameters and byte size)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = data_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    # Payloads are windows into a pool of low-entropy random bytes (16 symbols): deflate
    # shrinks them to ~60%, like serialized Examples, instead of storing incompressible noise.
    rng = np.random.default_rng(42)
    pool = (rng.integers(0, 16, 4 << 20, dtype=np.uint8) + ord("a")).tobytes()
    for spec in specs:
        path = data_dir / spec.name
        entry = manifest.get(spec.name)
        if (
            entry is not None
            and path.exists()
            and {k: entry.get(k) for k in manifest_entry(spec)} == manifest_entry(spec)
            and entry.get("file_bytes") == path.stat().st_size
        ):
            continue
        t0 = time.perf_counter()
        starts = np.random.default_rng(7).integers(0, len(pool) - spec.record_size, spec.records)
        size = spec.record_size
        with rf.RecordWriter(str(path), spec.compression, sync=False) as writer:
            for s in starts.tolist():
                writer.write(pool[s : s + size])
        manifest[spec.name] = {**manifest_entry(spec), "file_bytes": path.stat().st_size}
        manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
        elapsed = time.perf_counter() - t0
        print(
            f"# wrote {path} ({path.stat().st_size / MB:.1f} MB) in {elapsed:.1f} s",
            file=sys.stderr,
        )


def warm_page_cache(paths: list[Path]) -> None:
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.read(8 << 20):
                pass


# --------------------------------------------------------------------------------------------
# Contenders: each is a zero-argument callable returning the number of records it saw.


@dataclass
class Contender:
    name: str
    side: str  # "rf" or "tf"
    run: Callable[[], int]
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def median_wall(self) -> float:
        return statistics.median(self.wall)

    def median_cpu(self) -> float:
        return statistics.median(self.cpu)


def rf_count(spec: FileSpec, path: str, verify: bool = True) -> Callable[[], int]:
    return lambda: rf.count_records(path, spec.compression, verify_checksums=verify)


def rf_read_batch(spec: FileSpec, path: str, batch: int, verify: bool = True) -> Callable[[], int]:
    def run() -> int:
        reader = rf.RecordReader(path, spec.compression, verify_checksums=verify)
        n = 0
        while records := reader.read_batch(batch):
            n += len(records)
        reader.close()
        return n

    return run


def rf_per_record(spec: FileSpec, path: str, limit: int) -> Callable[[], int]:
    def run() -> int:
        n = 0
        for _ in rf.RecordReader(path, spec.compression):
            n += 1
            if n == limit:
                break
        return n

    return run


class TfContenders:
    """tf.data variants. Datasets and tf.functions are built once, outside the timing; each run
    makes a fresh iterator, which opens and reads the file again (as rf opens it again)."""

    BUFFER = 1 << 20  # TFRecordDataset's read buffer, as recordflow's default

    def __init__(self) -> None:
        import tensorflow as tf

        self.tf = tf

    def dataset(self, spec: FileSpec, path: str):
        return self.tf.data.TFRecordDataset(path, spec.tf_compression, buffer_size=self.BUFFER)

    def reduce(self, spec: FileSpec, path: str) -> Callable[[], int]:
        ds = self.dataset(spec, path)
        fn = self.tf.function(lambda: ds.reduce(np.int64(0), lambda c, _: c + 1))
        return lambda: int(fn())

    def batch_reduce(self, spec: FileSpec, path: str) -> Callable[[], int]:
        tf = self.tf
        ds = self.dataset(spec, path).batch(spec.batch)
        fn = tf.function(
            lambda: ds.reduce(np.int64(0), lambda c, b: c + tf.shape(b, out_type=tf.int64)[0])
        )
        return lambda: int(fn())

    def batch_for(self, spec: FileSpec, path: str) -> Callable[[], int]:
        ds = self.dataset(spec, path).batch(spec.batch)

        def run() -> int:
            n = 0
            for b in ds:
                n += int(b.shape[0])
            return n

        return run

    def batch_numpy(
        self, spec: FileSpec, path: str, batch: int, prefetch: bool
    ) -> Callable[[], int]:
        ds = self.dataset(spec, path).batch(batch)
        if prefetch:
            ds = ds.prefetch(self.tf.data.AUTOTUNE)

        def run() -> int:
            n = 0
            for b in ds.as_numpy_iterator():  # object arrays of bytes
                n += len(b)
            return n

        return run

    def batch_eager_numpy(self, spec: FileSpec, path: str, batch: int) -> Callable[[], int]:
        ds = self.dataset(spec, path).batch(batch).prefetch(self.tf.data.AUTOTUNE)

        def run() -> int:
            n = 0
            for b in ds:
                n += len(b.numpy())
            return n

        return run

    def per_record(self, spec: FileSpec, path: str, limit: int) -> Callable[[], int]:
        ds = self.dataset(spec, path)
        if limit < spec.records:
            ds = ds.take(limit)

        def run() -> int:
            n = 0
            for _ in ds:
                n += 1
            return n

        return run


# --------------------------------------------------------------------------------------------
# Measurement


@dataclass
class Row:
    kind: str  # "scan", "batches", "per-record", "crc"
    spec: FileSpec
    records: int  # records each run must see
    contenders: list[Contender]
    runs: int
    warmup: int
    note: str = ""

    @property
    def payload_bytes(self) -> int:
        return self.records * self.spec.record_size


def measure(row: Row) -> None:
    n = len(row.contenders)
    for i in range(row.warmup + row.runs):
        # Rotate the order every run, so no contender always follows the same one.
        order = row.contenders[i % n :] + row.contenders[: i % n]
        for c in order:
            w0, c0 = time.perf_counter(), time.process_time()
            got = c.run()
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            if got != row.records:
                raise RuntimeError(
                    f"{c.name} on {row.spec.name}: {got} records, expected {row.records}"
                )
            if i >= row.warmup:
                c.wall.append(wall)
                c.cpu.append(cpu)


def best(contenders: list[Contender], side: str) -> Contender:
    return min((c for c in contenders if c.side == side), key=Contender.median_wall)


def row_result(row: Row) -> dict:
    out = {
        "kind": row.kind,
        "file": row.spec.name,
        "file_label": row.spec.label,
        "records": row.records,
        "payload_bytes": row.payload_bytes,
        "runs": row.runs,
        "warmup": row.warmup,
        "note": row.note,
        "contenders": [
            {
                "name": c.name,
                "side": c.side,
                "wall_s": c.wall,
                "cpu_s": c.cpu,
                "median_wall_s": c.median_wall(),
                "median_cpu_s": c.median_cpu(),
                "records_per_s": row.records / c.median_wall(),
                "mb_per_s": row.payload_bytes / MB / c.median_wall(),
                "cores_used": c.median_cpu() / c.median_wall(),
            }
            for c in row.contenders
        ],
    }
    if row.kind == "crc":
        on, off = row.contenders[0], row.contenders[1]
        out["crc_cost_pct"] = 100 * (on.median_wall() / off.median_wall() - 1)
        out["crc_cost_cpu_pct"] = 100 * (on.median_cpu() / off.median_cpu() - 1)
        # Per run, on and off ran back to back: the median of those paired ratios is steadier.
        out["crc_cost_paired_pct"] = 100 * (
            statistics.median(a / b for a, b in zip(on.wall, off.wall)) - 1
        )
        if len(row.contenders) == 4:
            on2, off2 = row.contenders[2], row.contenders[3]
            out["crc_cost_batch_pct"] = 100 * (on2.median_wall() / off2.median_wall() - 1)
            out["crc_cost_batch_cpu_pct"] = 100 * (on2.median_cpu() / off2.median_cpu() - 1)
            out["crc_cost_batch_paired_pct"] = 100 * (
                statistics.median(a / b for a, b in zip(on2.wall, off2.wall)) - 1
            )
    else:
        r, t = best(row.contenders, "rf"), best(row.contenders, "tf")
        out["rf"] = r.name
        out["tf_best"] = t.name
        out["ratio"] = t.median_wall() / r.median_wall()
        out["ratio_paired"] = statistics.median(b / a for a, b in zip(r.wall, t.wall))
        # Work per record regardless of how much of the shared machine each side got: TF's
        # CPU time includes its runtime threads.
        out["ratio_cpu"] = t.median_cpu() / r.median_cpu()
    return out


# --------------------------------------------------------------------------------------------
# Report


def machine_info() -> dict:
    cpu, family, model = cpu_identity()
    gib = mem_total_gib()
    mem = "?" if gib is None else f"{gib:.1f} GiB"
    import tensorflow as tf

    core = Path(rf._core.__file__)
    built = datetime.datetime.fromtimestamp(core.stat().st_mtime).isoformat(timespec="seconds")
    try:
        head = subprocess.run(
            ["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=False,
        ).stdout.strip() or "?"
    except OSError:
        head = "?"
    return {
        "cpu": f"{cpu} (family {family}, model {model})",
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "memory": mem,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "recordflow": rf.__version__,
        "recordflow_core": f"{core} (built {built})",
        "git_head": head,
        "crc32c_backend": rf.crc32c_backend(),
        "tensorflow": tf.__version__,
        "numpy": np.__version__,
    }


KIND_TITLE = {
    "scan": "(a) native scan",
    "batches": "(b) batches to Python",
    "per-record": "(c) per-record Python",
}


def markdown(results: list[dict], info: dict, meta: dict) -> str:
    lines = [
        f"Run: {meta['date']}, `{meta['command']}`",
        "",
        f"Machine: {info['cpu']}, {info['cores']} cores ({info['cores_usable']} usable), "
        f"{info['memory']}, Linux {info['kernel']}; CRC32C backend `{info['crc32c_backend']}`; "
        f"recordflow {info['recordflow']} (tree at {info['git_head']}), "
        f"TensorFlow {info['tensorflow']}, "
        f"Python {info['python']}. Load average before/after: {meta['loadavg_before']} / "
        f"{meta['loadavg_after']}.",
        "",
        "Medians of the measured runs (warm-up runs excluded). rec/s and MB/s are wall-clock; "
        "MB = 10^6 payload bytes (decompressed for GZIP). cores = CPU time / wall time of the "
        "process (TF's threads included). rf/TF = TF's best median time / rf's median time; "
        "rf/TF CPU = the same with CPU time (work per record, steadier on a shared machine).",
        "",
        "| Row | Records | rf | rf rec/s | rf MB/s | rf cores | TF best | TF rec/s | TF MB/s "
        "| TF cores | rf/TF | rf/TF CPU | runs |",
        "|---|---|---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|",
    ]
    for r in results:
        if r["kind"] == "crc":
            continue
        c = {x["name"]: x for x in r["contenders"]}
        a, t = c[r["rf"]], c[r["tf_best"]]
        lines.append(
            f"| {KIND_TITLE[r['kind']]}, {r['file_label']} | {r['records']:,} | `{a['name']}` "
            f"| {fmt_rate(a['records_per_s'])} | {a['mb_per_s']:.0f} | {a['cores_used']:.2f} "
            f"| `{t['name']}` | {fmt_rate(t['records_per_s'])} | {t['mb_per_s']:.0f} "
            f"| {t['cores_used']:.2f} | **{r['ratio']:.2f}x** | {r['ratio_cpu']:.2f}x "
            f"| {r['runs']} |"
        )
    lines += [
        "",
        "All TF variants per row (median rec/s; the best one is the peer above):",
        "",
    ]
    for r in results:
        if r["kind"] == "crc":
            continue
        variants = ", ".join(
            f"`{x['name']}` {fmt_rate(x['records_per_s'])}"
            for x in r["contenders"]
            if x["side"] == "tf"
        )
        note = f" ({r['note']})" if r["note"] else ""
        lines.append(f"- {KIND_TITLE[r['kind']]}, {r['file_label']}: {variants}{note}")
    lines += [
        "",
        "CRC cost: recordflow with verify_checksums=True vs. False, extra time in percent "
        "((t_on - t_off) / t_off; 'paired' is the median over runs of each back-to-back pair; "
        "'CPU' uses CPU time instead of wall time).",
        "",
        "| File | count_records on | off | CRC cost | paired | CPU | read_batch on | off "
        "| CRC cost | paired | CPU | runs |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in results:
        if r["kind"] != "crc":
            continue
        on, off, bon, boff = r["contenders"]
        lines.append(
            f"| {r['file_label']} | {on['mb_per_s']:.0f} MB/s | {off['mb_per_s']:.0f} MB/s "
            f"| {r['crc_cost_pct']:+.1f}% | {r['crc_cost_paired_pct']:+.1f}% "
            f"| {r['crc_cost_cpu_pct']:+.1f}% "
            f"| {bon['mb_per_s']:.0f} MB/s | {boff['mb_per_s']:.0f} MB/s "
            f"| {r['crc_cost_batch_pct']:+.1f}% | {r['crc_cost_batch_paired_pct']:+.1f}% "
            f"| {r['crc_cost_batch_cpu_pct']:+.1f}% | {r['runs']} |"
        )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------


def build_rows(specs: list[FileSpec], data_dir: Path, tfc: TfContenders, args) -> list[Row]:
    rows = []
    for spec in specs:
        path = str(data_dir / spec.name)
        large = spec.record_size >= 1024
        runs, warmup = args.runs, args.warmup

        scan = [Contender("count_records", "rf", rf_count(spec, path))]
        scan.append(Contender(f"batch({spec.batch}).reduce", "tf", tfc.batch_reduce(spec, path)))
        scan.append(Contender(f"batch({spec.batch}) for-loop", "tf", tfc.batch_for(spec, path)))
        note = ""
        if large:
            scan.append(Contender("reduce", "tf", tfc.reduce(spec, path)))
        else:
            # Dataset.reduce one element at a time costs TF ~20-40 us a record: it was measured
            # at 23-41 s per 1M records, so it is left out of the small-record rows.
            note = "per-element Dataset.reduce left out: ~30 us/record"
        rows.append(Row("scan", spec, spec.records, scan, runs, warmup, note))

        def batches(b: int) -> list[Contender]:
            return [
                Contender(f"read_batch({b})", "rf", rf_read_batch(spec, path, b)),
                Contender(
                    f"batch({b}).prefetch.as_numpy_iterator",
                    "tf",
                    tfc.batch_numpy(spec, path, b, prefetch=True),
                ),
                Contender(
                    f"batch({b}).as_numpy_iterator",
                    "tf",
                    tfc.batch_numpy(spec, path, b, prefetch=False),
                ),
                Contender(
                    f"batch({b}).prefetch, eager .numpy()",
                    "tf",
                    tfc.batch_eager_numpy(spec, path, b),
                ),
            ]

        rows.append(Row("batches", spec, spec.records, batches(spec.batch), runs, warmup))
        if large and spec.compression is None:
            # Batches of 4096 with 100 KiB records: the whole file in one batch.
            note = "batch 4096 = whole file"
            rows.append(Row("batches", spec, spec.records, batches(4096), runs, warmup, note))

        limit = spec.records if large else min(spec.records, args.per_record_limit)
        per_record = [
            Contender("for r in RecordReader", "rf", rf_per_record(spec, path, limit)),
            Contender("for r in TFRecordDataset", "tf", tfc.per_record(spec, path, limit)),
        ]
        note = f"first {limit:,} of {spec.records:,} records" if limit < spec.records else ""
        rows.append(Row("per-record", spec, limit, per_record, runs, warmup, note))

        crc = [
            Contender("count_records crc", "rf", rf_count(spec, path, True)),
            Contender("count_records nocrc", "rf", rf_count(spec, path, False)),
            Contender(
                f"read_batch({spec.batch}) crc", "rf", rf_read_batch(spec, path, spec.batch, True)
            ),
            Contender(
                f"read_batch({spec.batch}) nocrc",
                "rf",
                rf_read_batch(spec, path, spec.batch, False),
            ),
        ]
        # These runs are short (tens of ms uncompressed) and the difference is small: more runs.
        crc_runs = max(runs, args.crc_runs if spec.compression is None else runs)
        rows.append(Row("crc", spec, spec.records, crc, crc_runs, warmup))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small files and 3 runs (smoke run)")
    parser.add_argument(
        "--runs", type=int, help="measured runs per contender (default 5; 3 with --quick)"
    )
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured runs first (default 1)")
    parser.add_argument("--crc-runs", type=int, default=15, help="runs for uncompressed CRC rows")
    parser.add_argument(
        "--per-record-limit", type=int, help="records read by (c) on small files (default 50000)"
    )
    parser.add_argument("--data-dir", type=Path, default=HERE / "data")
    parser.add_argument("--out-dir", type=Path, default=HERE / "out")
    args = parser.parse_args()
    if args.runs is None:
        args.runs = 3 if args.quick else 5
    if args.per_record_limit is None:
        args.per_record_limit = 20_000 if args.quick else 50_000
    if args.quick:
        args.crc_runs = min(args.crc_runs, 5)

    t_start = time.perf_counter()
    meta = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join(["python", *sys.argv]),
        "loadavg_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    specs = file_specs(args.quick)
    ensure_files(args.data_dir, specs)
    warm_page_cache([args.data_dir / s.name for s in specs])
    tfc = TfContenders()
    info = machine_info()
    rows = build_rows(specs, args.data_dir, tfc, args)

    results = []
    for row in rows:
        t0 = time.perf_counter()
        measure(row)
        results.append(row_result(row))
        print(
            f"# {row.kind:10s} {row.spec.name:22s} {time.perf_counter() - t0:6.1f} s",
            file=sys.stderr,
            flush=True,
        )
    meta["loadavg_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    meta["elapsed_s"] = round(time.perf_counter() - t_start, 1)

    md = markdown(results, info, meta)
    print(md)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "records.md").write_text(md)
    raw = {
        "meta": meta,
        "machine": info,
        "args": {k: str(v) for k, v in vars(args).items()},
        "rows": results,
    }
    (args.out_dir / "records.json").write_text(json.dumps(raw, indent=2) + "\n")
    print(
        f"# {meta['elapsed_s']} s; wrote {args.out_dir}/records.md and records.json",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
