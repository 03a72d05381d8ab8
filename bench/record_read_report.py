"""The C++ record-read microbenchmark (bench/record_read_bench.cc) as a markdown table.

    python bench/record_read_report.py            # 64 MB files, 3 repetitions (~1 min + build)
    python bench/record_read_report.py --quick    # 32 MB files, 1 repetition

Builds `record_read_bench` on first use with CMake into bench/data/build-bench (Release,
-DRF_BUILD_BENCH=ON, tests and CLI off; Google Benchmark from Debian's libbenchmark-dev, which
scripts/setup.sh installs) and rebuilds it when a source changed (CMake's own dependency check).
Runs it with interleaved repetitions and writes record_read.md (and the raw JSON) into --out.

Rates follow the benchmark's own convention: the reader runs on one thread and Google
Benchmark's bytes/s come from that thread's CPU time, so they are per-core rates; the wall-clock
rate is printed beside them, and the coefficient of variation of CPU time shows how steady the
run was.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def build(build_dir: Path) -> Path:
    exe = build_dir / "record_read_bench"
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    cfg = ["cmake", "-S", str(ROOT), "-B", str(build_dir), *gen, "-DCMAKE_BUILD_TYPE=Release",
           "-DRF_BUILD_BENCH=ON", "-DRF_BUILD_TESTS=OFF", "-DRF_BUILD_CLI=OFF"]
    for step in (cfg, ["cmake", "--build", str(build_dir), "--target", "record_read_bench", "-j",
                       str(os.cpu_count() or 1)]):
        r = subprocess.run(step, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"record_read_report: {' '.join(step[:2])} failed (Google Benchmark: Debian "
                     f"libbenchmark-dev, scripts/setup.sh):\n{(r.stdout + r.stderr)[-2000:]}")
    return exe


def label(run_name: str) -> str:
    """BM_ReadRecords/large_100KiB/gzip_isal/crc/buffer_256KiB -> a readable row name."""
    parts = run_name.split("/")
    if parts[0] == "BM_ReadRecords":
        size = {"large_100KiB": "100 KiB records", "small_100B": "100 B records"}.get(parts[1], parts[1])
        comp = {"none": "uncompressed", "gzip_isal": "GZIP (ISA-L igzip)",
                "gzip_zlib": "GZIP (zlib, as TF)"}.get(parts[2], parts[2])
        crc = "CRC on" if parts[3] == "crc" else "CRC off"
        extra = f", buffer {parts[4].removeprefix('buffer_').replace('KiB', ' KiB')}" if len(parts) > 4 else ""
        return f"{size}, {comp}, {crc}{extra}"
    return run_name


def render(data: dict, cmd: str, seconds: float) -> str:
    ctx = data["context"]
    rows: dict[str, dict[str, dict]] = {}
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            rows.setdefault(b.get("run_name", b["name"]), {})["error"] = b
            continue
        agg = b.get("aggregate_name", "median" if b.get("run_type") == "iteration" else None)
        rows.setdefault(b.get("run_name", b["name"]), {})[agg] = b
    L = ["## Record reading, per core, C++ (`record_read_bench`)", "",
         f"Command: `{cmd}` ({seconds:.0f} s). Date {ctx.get('date', '?')}, "
         f"{ctx.get('num_cpus', '?')} CPUs, load average "
         f"{' '.join(f'{x:.2f}' for x in ctx.get('load_avg', []))}, CRC32C backend "
         f"{ctx.get('crc32c_backend', '?')}. One reader thread; medians over the repetitions. "
         "GB = 10^9 bytes of payload. per core = payload bytes per CPU-second of the reading "
         "thread (Google Benchmark's bytes/s); wall = the same per wall-clock second; cv = "
         "coefficient of variation of CPU time across repetitions.", "",
         "| Benchmark | per core (CPU time) | wall clock | records/s (CPU time) | cv |",
         "|---|--:|--:|--:|--:|"]
    crc = ["", "| CRC32C buffer | ns per call (CPU) | GB/s |", "|---|--:|--:|"]
    def order(name: str):
        # Random interleaving shuffles the output: sort by record size, compression, CRC, then
        # buffer; the CRC rows by buffer size, then backend.
        p = name.split("/")
        if p[0] == "BM_ReadRecords":
            return (0, p[1] != "large_100KiB", ["none", "gzip_isal", "gzip_zlib"].index(p[2])
                    if p[2] in ("none", "gzip_isal", "gzip_zlib") else 9, p[3] != "crc",
                    len(p), name)
        return (1, int(p[-1]) if p[-1].isdigit() else 0, name)

    for name, aggs in sorted(rows.items(), key=lambda kv: order(kv[0])):
        if "error" in aggs:
            L.append(f"| {label(name)} | error: {aggs['error'].get('error_message', '?')} | | | |")
            continue
        m = aggs.get("median")
        if m is None:
            continue
        cv = aggs.get("cv", {}).get("cpu_time")
        cvs = f"{100 * cv:.1f}%" if cv is not None else "-"
        if name.startswith("BM_ReadRecords"):
            per_core = m["bytes_per_second"]
            wall = per_core * m["cpu_time"] / m["real_time"] if m["real_time"] else float("nan")
            L.append(f"| {label(name)} | {per_core / 1e9:.2f} GB/s | {wall / 1e9:.2f} GB/s | "
                     f"{m.get('items_per_second', 0) / 1e3:,.1f} k | {cvs} |")
        elif name.startswith("BM_Crc32c"):
            unit = {"ns": 1.0, "us": 1e3, "ms": 1e6}.get(m.get("time_unit", "ns"), 1.0)
            backend, _, size = name.removeprefix("BM_Crc32c/").partition("/")
            crc.append(f"| {backend}, {size} B | {m['cpu_time'] * unit:.1f} | "
                       f"{m['bytes_per_second'] / 1e9:.1f} |")
    return "\n".join(L + (crc if len(crc) > 3 else [])) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="32 MB files, 1 repetition")
    ap.add_argument("--out", type=Path, default=HERE / "out")
    ap.add_argument("--build-dir", type=Path, default=HERE / "data" / "build-bench")
    ap.add_argument("--exe", type=Path, help="an existing record_read_bench (skips the build)")
    a = ap.parse_args()
    exe = a.exe or build(a.build_dir)
    mb, gz, reps = (32, 8, 1) if a.quick else (64, 16, 3)
    a.out.mkdir(parents=True, exist_ok=True)
    raw = a.out / "record_read.json"
    args = [f"--rf_mb={mb}", f"--rf_gzip_mb={gz}", f"--benchmark_repetitions={reps}",
            "--benchmark_enable_random_interleaving=true",
            "--benchmark_report_aggregates_only=true"]
    t = time.perf_counter()
    r = subprocess.run([str(exe), *args, "--benchmark_format=console",
                        f"--benchmark_out={raw}", "--benchmark_out_format=json"],
                       capture_output=True, text=True)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"record_read_bench failed ({r.returncode}):\n{r.stderr[-2000:]}")
    data = json.loads(raw.read_text())  # one repetition: plain runs, each its own median
    shown = "record_read_bench " + " ".join(args)
    md = render(data, shown, dt)
    (a.out / "record_read.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
