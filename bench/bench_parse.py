#!/usr/bin/env python3
"""Batch tf.train.Example parsing: recordflow against tf.io.parse_example, in one run, as ratios.

    python bench/bench_parse.py            # full run (~5 min on 2 cores)
    python bench/bench_parse.py --quick    # smoke run (~30 s): 3 short runs per contender

Records are built once per workload with rf.Example (batch of 1024, fixed seed) and parsed by
both libraries before any timing; the outputs must be identical or the benchmark stops.

Workloads:
  (a)  ImageNet-style: "image/encoded" ~110 KB random bytes, "image/class/label",
       "image/height", "image/width", "image/channels" int64, "image/format" b"JPEG",
       "image/class/text" bytes. Full spec (3 bytes features), and (a-num) the same records
       with only the 4 int64 features in the spec, to separate the cost of the bytes outputs.
  (b)  100 float features "f000".."f099", one value each: 100 x FixedLen([], float32).
  (b2) the same 100 floats as one feature: FixedLen([100], float32).
  (c)  VarLen int64 "ids" with 0-20 values a record + scalars "label" int64, "weight" float32,
       "timestamp" int64.

Contenders (each call parses the whole batch and ends with NumPy-accessible values):
  rf Parser        parser = rf.Parser(spec) made once; parser(batch). Inputs: list of bytes.
                   Outputs: NumPy arrays (zero-copy over the C++ buffers); bytes features as
                   NumPy object arrays of bytes (one new bytes object per value, made under the
                   GIL); VarLen as rf.Ragged (values, row_splits).
  rf parse_example rf.parse_example(batch, spec): spec compiled on every call (one-shot cost).
  TF eager         tf.io.parse_example(t, spec) with t = tf.constant(batch) made once outside
                   the timing (as a tf.data pipeline would hand TF a tensor), then .numpy() on
                   every output tensor (a copy for numeric tensors; an object array of bytes for
                   string tensors, like rf's).
  TF tf.function   the same inside a tf.function traced once (TF's best), then .numpy().
  For VarLen features TF runs twice: tf.io.VarLenFeature (SparseTensor -> indices, values,
  dense_shape) and tf.io.RaggedFeature (RaggedTensor -> values, row_splits, rf's layout).
  The TF peer of a row is the TF variant above with the best median.
Information rows (never a peer): TF tf.function without .numpy() (TF tensors only), TF eager
including tf.constant(batch) (TF starting from the same Python bytes as rf), and for (a) a
"copy floor": Python slicing each record's image bytes into a new bytes object (the cost of
materializing ~113 MB of bytes outputs at all).

Each contender of a workload runs `--warmup` unmeasured runs (which also calibrate how many
calls make a run of about `--min-time` seconds), then `--runs` measured runs; the order of the
contenders rotates on every run. Reported: medians over runs; rf/TF = TF's median time per
record / rf's; "paired" = median over runs of the per-run ratio (rf and the TF peer ran close
together in each run, so it is steadier on a noisy machine). CPU time is the process's (all
threads); "cores busy" = CPU time / wall time; "faults" = minor page faults per call (first
touches of freshly mapped memory, which dominate the bytes-heavy workload on this VM). The
machine's load (load average, and the CPU that other processes used during each workload,
from /proc/stat) is recorded per workload.

After the all-cores run, the same workloads run again in a child process started under
`taskset -c 0` (one core for both libraries: the Python binding does not expose
ParseOptions::max_parallelism); --no-one-core skips it. Last, recordflow runs alone in a fresh
process that never imports TensorFlow (--no-rf-alone skips it): the heap of such a process
behaves differently (glibc returns freed memory to the OS after every batch, so the next batch
page-faults it back in), which matters for the ~113 MB of bytes outputs of (a).

Writes a markdown report to stdout and bench/out/parse.md, raw numbers to bench/out/parse.json.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported

import numpy as np  # noqa: E402
from benchlib import (  # noqa: E402
    HERE,
    Contender,
    fill_defaults,
    fmt_rate,
    machine_info,
    machine_sentence,
    measure,
    run_child_json,
    timed_calls,
    top_processes,
)
from benchlib import cpu_busy as cpu_busy_seconds  # noqa: E402

import recordflow as rf  # noqa: E402

TARGET = 3.0  # DESIGN.md: parse_example on batches >= 3x tf.io.parse_example


# --------------------------------------------------------------------------------------------
# Workloads


@dataclass
class Workload:
    key: str  # "a", "a-num", "b", "b2", "c"
    title: str
    records: list[bytes]
    rf_spec: dict
    tf_specs: dict[str, dict]  # variant label ("" when one) -> TF feature spec
    note: str = ""

    @property
    def payload_bytes(self) -> int:
        return sum(len(r) for r in self.records)


def imagenet_records(rng: np.random.Generator, batch: int) -> list[bytes]:
    classes = [b"tench, Tinca tinca", b"goldfish, Carassius auratus", b"great white shark",
               b"tiger shark, Galeocerdo cuvieri", b"hammerhead, hammerhead shark"]
    out = []
    for _ in range(batch):
        label = int(rng.integers(0, 1000))
        out.append(rf.Example({
            "image/encoded": rng.bytes(int(rng.integers(100_000, 120_001))),  # ~110 KB
            "image/class/label": label,
            "image/height": int(rng.integers(200, 800)),
            "image/width": int(rng.integers(200, 800)),
            "image/channels": 3,
            "image/format": b"JPEG",
            "image/class/text": classes[label % len(classes)],
        }).serialize())
    return out


def build_workloads(batch: int, seed: int, tf) -> list[Workload]:
    rng = np.random.default_rng(seed)
    ints = ["image/class/label", "image/height", "image/width", "image/channels"]
    byts = ["image/encoded", "image/format", "image/class/text"]
    img = imagenet_records(rng, batch)
    a_rf = {k: rf.FixedLen([], "int64") for k in ints} | {k: rf.FixedLen([], "bytes") for k in byts}
    num_rf = {k: rf.FixedLen([], "int64") for k in ints}

    names = [f"f{i:03d}" for i in range(100)]
    floats = rng.standard_normal((batch, 100)).astype(np.float32)
    b_recs = [rf.Example({n: float(v) for n, v in zip(names, row)}).serialize() for row in floats]
    b2_recs = [rf.Example({"floats": row}).serialize() for row in floats]

    c_recs = []
    for _ in range(batch):
        n = int(rng.integers(0, 21))
        c_recs.append(rf.Example({
            "ids": rng.integers(0, 2**40, size=n).astype(np.int64),
            "label": int(rng.integers(0, 2)),
            "weight": float(rng.random()),
            "timestamp": int(rng.integers(1_600_000_000, 1_800_000_000)),
        }, dtypes={"ids": "int64"}).serialize())
    c_scalars_rf = {"label": rf.FixedLen([], "int64"), "weight": rf.FixedLen([], "float32"),
                    "timestamp": rf.FixedLen([], "int64")}

    # TF specs (variant label -> spec); none in the rf-only child, which never imports TF.
    tf_specs: dict[str, dict[str, dict]] = {k: {} for k in ("a", "a-num", "b", "b2", "c")}
    if tf is not None:
        fixed = tf.io.FixedLenFeature
        c_scalars_tf = {"label": fixed([], tf.int64), "weight": fixed([], tf.float32),
                        "timestamp": fixed([], tf.int64)}
        tf_specs = {
            "a": {"": {k: fixed([], tf.int64) for k in ints} | {k: fixed([], tf.string) for k in byts}},
            "a-num": {"": {k: fixed([], tf.int64) for k in ints}},
            "b": {"": {n: fixed([], tf.float32) for n in names}},
            "b2": {"": {"floats": fixed([100], tf.float32)}},
            "c": {"VarLenFeature": {"ids": tf.io.VarLenFeature(tf.int64)} | c_scalars_tf,
                  "RaggedFeature": {"ids": tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int64)}
                  | c_scalars_tf},
        }

    return [
        Workload("a", "(a) ImageNet-style, full spec (3 bytes + 4 int64)", img, a_rf, tf_specs["a"]),
        Workload("a-num", "(a-num) same records, int64 features only", img, num_rf, tf_specs["a-num"],
                 note="the 110 KB image is skipped, not copied"),
        Workload("b", "(b) 100 scalar float features", b_recs,
                 {n: rf.FixedLen([], "float32") for n in names}, tf_specs["b"]),
        Workload("b2", "(b2) one FixedLen [100] float feature", b2_recs,
                 {"floats": rf.FixedLen([100], "float32")}, tf_specs["b2"]),
        Workload("c", "(c) VarLen int64 (0-20 values) + 3 scalars", c_recs,
                 {"ids": rf.VarLen("int64")} | c_scalars_rf, tf_specs["c"]),
    ]


# --------------------------------------------------------------------------------------------
# Output conversion and verification


def tf_to_numpy(tf, out: dict) -> dict:
    """Every TF output as NumPy: dense -> ndarray; SparseTensor -> (indices, values, dense_shape);
    RaggedTensor -> (values, row_splits)."""
    res = {}
    for k, v in out.items():
        if isinstance(v, tf.SparseTensor):
            res[k] = (v.indices.numpy(), v.values.numpy(), v.dense_shape.numpy())
        elif isinstance(v, tf.RaggedTensor):
            res[k] = (v.values.numpy(), v.row_splits.numpy())
        else:
            res[k] = v.numpy()
    return res


def same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype == object or b.dtype == object:
        return a.shape == b.shape and all(x == y for x, y in zip(a.ravel().tolist(), b.ravel().tolist()))
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)


def verify(w: Workload, rf_out: dict, tf_out: dict, variant: str) -> None:
    if set(rf_out) != set(tf_out):
        raise RuntimeError(f"{w.key}/{variant}: keys differ: {sorted(rf_out)} vs {sorted(tf_out)}")
    for k, r in rf_out.items():
        t = tf_out[k]
        if isinstance(r, rf.Ragged):
            if len(t) == 2:  # RaggedTensor
                ok = same(r.values, t[0]) and same(r.row_splits, t[1])
            else:  # SparseTensor
                indices, values, dense_shape = r.to_sparse()
                ok = same(values, t[1]) and same(indices, t[0]) and same(dense_shape, t[2])
        else:
            ok = same(r, t)
        if not ok:
            raise RuntimeError(f"{w.key}/{variant}: feature '{k}' differs between recordflow and TF")


# --------------------------------------------------------------------------------------------
# Measurement


def run_once(c: Contender) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and minor page faults, each per call."""
    _, wall, cpu, faults = timed_calls(c)
    return wall, cpu, faults


def make_contenders(w: Workload, tf, tensor) -> list[Contender]:
    parser = rf.Parser(w.rf_spec)
    cs = [
        Contender("rf Parser", "rf", lambda: parser(w.records)),
        Contender("rf parse_example (one-shot)", "info", lambda: rf.parse_example(w.records, w.rf_spec)),
    ]
    if any(getattr(s, "dtype", None) == "bytes" for s in w.rf_spec.values()):
        zc = rf.Parser(w.rf_spec, bytes_as="memoryview")
        cs.append(Contender("rf Parser bytes_as=memoryview (zero-copy)", "rfzc", lambda: zc(w.records)))
    for variant, spec in w.tf_specs.items():
        suffix = f" {variant}" if variant else ""
        fn = tf.function(lambda t, spec=spec: tf.io.parse_example(t, spec))
        cs.append(Contender(f"TF eager{suffix}", "tf",
                            lambda spec=spec: tf_to_numpy(tf, tf.io.parse_example(tensor, spec))))
        cs.append(Contender(f"TF tf.function{suffix}", "tf", lambda fn=fn: tf_to_numpy(tf, fn(tensor))))
        cs.append(Contender(f"TF tf.function{suffix}, tensors only (no .numpy())", "info",
                            lambda fn=fn: fn(tensor)))
    if w.tf_specs:
        first_spec = next(iter(w.tf_specs.values()))
        cs.append(Contender("TF eager incl. tf.constant(batch)", "info",
                            lambda: tf_to_numpy(tf, tf.io.parse_example(tf.constant(w.records), first_spec))))
    if w.key == "a":
        # A record is its image plus < 1 KB of other fields, so r[1000:] copies about one image
        # into a new bytes object: what returning the images as Python bytes costs at least.
        cs.append(Contender("copy floor: new bytes per image (Python slice)", "info",
                            lambda: [r[1000:] for r in w.records]))
    return cs


def best(cs: list[Contender], side: str) -> Contender | None:
    return min((c for c in cs if c.side == side), key=Contender.median_wall, default=None)


def run_workloads(args, tf) -> list[dict]:
    results = []
    for w in build_workloads(args.batch, args.seed, tf):
        tensor = tf.constant(w.records) if tf is not None else None
        if tf is not None:  # outputs must match before anything is timed
            rf_out = rf.Parser(w.rf_spec)(w.records)
            for variant, spec in w.tf_specs.items():
                verify(w, rf_out, tf_to_numpy(tf, tf.io.parse_example(tensor, spec)), variant or "eager")
                fn = tf.function(lambda t, spec=spec: tf.io.parse_example(t, spec))
                verify(w, rf_out, tf_to_numpy(tf, fn(tensor)), (variant + " tf.function").strip())
            if any(getattr(s, "dtype", None) == "bytes" for s in w.rf_spec.values()):
                zc = rf.Parser(w.rf_spec, bytes_as="memoryview")(w.records)
                zc = {k: (np.array([bytes(x) for x in v.ravel()], dtype=object).reshape(v.shape)
                          if isinstance(v, np.ndarray) and v.dtype == object else v)
                      for k, v in zc.items()}
                verify(w, zc, tf_to_numpy(tf, tf.io.parse_example(
                    tensor, next(iter(w.tf_specs.values())))), "memoryview")
            verify(w, rf.parse_example(w.records, w.rf_spec), tf_to_numpy(
                tf, tf.io.parse_example(tensor, next(iter(w.tf_specs.values())))), "one-shot")
            del rf_out
            gc.collect()

        cs = make_contenders(w, tf, tensor)
        load_before = os.getloadavg()
        busy0, own0, t0 = cpu_busy_seconds(), sum(os.times()[:2]), time.perf_counter()
        measure(cs, run_once, args.runs, args.warmup, args.min_time)
        elapsed = time.perf_counter() - t0
        other = (cpu_busy_seconds() - busy0 - (sum(os.times()[:2]) - own0)) / elapsed
        load_after = os.getloadavg()

        b = len(w.records)
        r_, t_ = best(cs, "rf"), best(cs, "tf")
        res = {
            "workload": w.key,
            "title": w.title,
            "note": w.note,
            "batch": b,
            "batch_payload_bytes": w.payload_bytes,
            "loadavg_before": load_before,
            "loadavg_after": load_after,
            "other_processes_cores": max(0.0, other),
            "rf": r_.name,
            "tf_peer": t_.name if t_ else None,
            "ratio": t_.median_wall() / r_.median_wall() if t_ else None,
            "ratio_paired": statistics.median(t / r for r, t in zip(r_.wall, t_.wall)) if t_ else None,
            "ratio_cpu": t_.median_cpu() / r_.median_cpu() if t_ else None,
            "contenders": [
                {
                    "name": c.name,
                    "side": c.side,
                    "calls_per_run": c.iters,
                    "wall_s_per_call": c.wall,
                    "cpu_s_per_call": c.cpu,
                    "page_faults_per_call": c.faults,
                    "median_page_faults_per_call": statistics.median(c.faults),
                    "records_per_s": b / c.median_wall(),
                    "records_per_s_min": b / max(c.wall),
                    "records_per_s_max": b / min(c.wall),
                    "records_per_cpu_s": b / c.median_cpu(),
                    "us_per_record": 1e6 * c.median_wall() / b,
                    "mb_per_s": w.payload_bytes / 1e6 / c.median_wall(),
                    "cores_busy": c.median_cpu() / c.median_wall(),
                }
                for c in cs
            ],
        }
        zc_ = best(cs, "rfzc")
        res["ratio_zero_copy"] = t_.median_wall() / zc_.median_wall() if (t_ and zc_) else None
        oneshot = next(c for c in cs if c.name.startswith("rf parse_example"))
        res["ratio_oneshot"] = t_.median_wall() / oneshot.median_wall() if t_ else None
        results.append(res)
        vs_tf = (f"TF ({t_.name}) {b / t_.median_wall():>12,.0f} rec/s   rf/TF {res['ratio']:.2f}x"
                 if t_ else "(no TF in this process)")
        print(f"  {w.key:6s} rf {b / r_.median_wall():>12,.0f} rec/s   {vs_tf}   "
              f"(other processes: {res['other_processes_cores']:.2f} cores)", file=sys.stderr, flush=True)
        del cs, tensor, w
        gc.collect()
    return results


# --------------------------------------------------------------------------------------------
# Report


def contender(res: dict, name: str) -> dict:
    return next(c for c in res["contenders"] if c["name"] == name)


def markdown(sections: list[dict], info: dict, meta: dict) -> str:
    L = [
        "## Example parsing",
        "",
        f"Run: {meta['date']}, `{meta['command']}`",
        "",
        machine_sentence(info, f" (`{rf._core.__file__}`)"),
        f"Load average before / after: {meta['loadavg_before']} / {meta['loadavg_after']}. "
        f"Busiest other processes at the start: {', '.join(meta['top_before']) or 'n/a'}.",
        *([f"**Warning: {meta['warning']}.**"] if meta.get("warning") else []),
        "",
        f"Batch {meta['batch']} records; {meta['runs']} measured runs of >= {meta['min_time']} s per "
        f"contender after {meta['warmup']} warm-up run(s), contenders in rotating order; medians. "
        "rec/s is wall-clock; per core = rec/s / cores available to the process. "
        "rf = `rf.Parser(spec)(batch)` (spec compiled once), outputs NumPy (bytes as object arrays "
        "of bytes). zero-copy rf/TF: `rf.Parser(spec, bytes_as=\"memoryview\")`, bytes values as "
        "memoryviews into the records (workloads with bytes features only; not the judged ratio). TF = best of `tf.io.parse_example` eager / in a `tf.function` on a prebuilt "
        "`tf.constant(batch)`, every output `.numpy()`'d; both sides end with NumPy values. "
        "rf/TF = TF median time / rf median time (wall; the target is judged on it); paired = "
        "median of per-run ratios; CPU-time = the same ratio on process CPU time (all threads), "
        "steadier when other processes take cores away; one-shot = `rf.parse_example(batch, "
        "spec)` (spec compiled on every call) against the same TF peer. "
        "other CPU = cores that other processes kept busy during the workload (from /proc/stat).",
        "",
        "| Workload | cores | rf rec/s | rf rec/s/core | rf rec/CPU-s | TF peer | TF rec/s "
        "| TF rec/s/core | TF rec/CPU-s | **rf/TF** | paired | CPU-time | one-shot | >= 3x? | other CPU "
        "| zero-copy rf/TF |",
        "|---|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|",
    ]
    for sec in sections:
        if sec.get("rf_only"):
            continue
        cores = sec["cores"]
        for r in sec["results"]:
            rr, tt = contender(r, r["rf"]), contender(r, r["tf_peer"])
            met = "yes" if r["ratio"] >= TARGET else f"**no** ({r['ratio'] / TARGET:.0%} of target)"
            L.append(
                f"| {r['title']} | {cores} | {fmt_rate(rr['records_per_s'])} | "
                f"{fmt_rate(rr['records_per_s'] / cores)} | {fmt_rate(rr['records_per_cpu_s'])} | "
                f"{r['tf_peer']} | {fmt_rate(tt['records_per_s'])} | "
                f"{fmt_rate(tt['records_per_s'] / cores)} | {fmt_rate(tt['records_per_cpu_s'])} | "
                f"**{r['ratio']:.2f}x** | {r['ratio_paired']:.2f}x | {r['ratio_cpu']:.2f}x | "
                f"{r['ratio_oneshot']:.2f}x | {met} | {r['other_processes_cores']:.2f} | "
                + (f"{r['ratio_zero_copy']:.2f}x |" if r.get("ratio_zero_copy") else "- |"))
    alone = next((sec for sec in sections if sec.get("rf_only")), None)
    if alone:
        main = {r["workload"]: r for r in sections[0]["results"]}
        L += [
            "",
            f"recordflow alone: the same rf Parser runs in a fresh process that never imports "
            f"TensorFlow (as in an rf-only training job), on all {alone['cores']} cores, right after "
            "the runs above (not interleaved with TF: the last column is a cross-process ratio). "
            "faults/call = minor page faults per batch.",
            "",
            "| Workload | rf alone rec/s | rec/CPU-s | faults/call | rf in the TF process rec/s "
            "| faults/call | TF peer rec/s (same process as rf above) | rf alone / TF |",
            "|---|--:|--:|--:|--:|--:|--:|--:|",
        ]
        for r in alone["results"]:
            a, m = contender(r, r["rf"]), main[r["workload"]]
            rm, tm = contender(m, m["rf"]), contender(m, m["tf_peer"])
            L.append(
                f"| {r['title']} | {fmt_rate(a['records_per_s'])} | {fmt_rate(a['records_per_cpu_s'])} | "
                f"{a['median_page_faults_per_call']:,.0f} | {fmt_rate(rm['records_per_s'])} | "
                f"{rm['median_page_faults_per_call']:,.0f} | {fmt_rate(tm['records_per_s'])} | "
                f"{a['records_per_s'] / tm['records_per_s']:.2f}x |")
    L += [
        "",
        "All contenders (median rec/s [min-max over runs], us per record, process CPU cores busy, "
        "records per CPU-second, minor page faults per call, i.e. per batch (4 KiB pages: "
        "first touches of freshly mapped memory)). Rows marked *info* are never the peer.",
        "",
    ]
    for sec in sections:
        L.append(f"**{sec['label']}**")
        L.append("")
        L.append("| Workload | Contender | rec/s | range | us/rec | MB/s | cores busy | rec/CPU-s "
                 "| faults/call |")
        L.append("|---|---|--:|--:|--:|--:|--:|--:|--:|")
        for r in sec["results"]:
            for c in r["contenders"]:
                name = c["name"] + (" *info*" if c["side"] == "info" else "")
                L.append(
                    f"| {r['workload']} | {name} | {fmt_rate(c['records_per_s'])} | "
                    f"{fmt_rate(c['records_per_s_min'])}-{fmt_rate(c['records_per_s_max'])} | "
                    f"{c['us_per_record']:.2f} | {c['mb_per_s']:.0f} | {c['cores_busy']:.2f} | "
                    f"{fmt_rate(c['records_per_cpu_s'])} | {c['median_page_faults_per_call']:,.0f} |")
        L.append("")
    return "\n".join(L) + "\n"


# --------------------------------------------------------------------------------------------


def run_child(args, rf_only: bool, cpu: int | None) -> dict:
    """Runs the workloads in a fresh interpreter: pinned to `cpu` (taskset -c), or with recordflow
    alone (TensorFlow never imported, so nothing else shapes the heap and threads)."""
    child_args = ["--runs", str(args.runs), "--warmup", str(args.warmup), "--min-time", str(args.min_time),
                  "--batch", str(args.batch), "--seed", str(args.seed)]
    if rf_only:
        child_args.append("--child-rf-only")
    return run_child_json(__file__, child_args, cpu)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 3 short runs, 1 warm-up")
    ap.add_argument("--runs", type=int, help="measured runs per contender (default 7; quick 3)")
    ap.add_argument("--warmup", type=int, help="unmeasured runs per contender (default 2; quick 1)")
    ap.add_argument("--min-time", type=float, help="seconds per run (default 0.5; quick 0.05)")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-one-core", action="store_true", help="skip the taskset -c 0 run")
    ap.add_argument("--one-core-cpu", type=int, default=0, help="CPU for the one-core run")
    ap.add_argument("--out", type=Path, default=HERE / "out")
    ap.add_argument("--no-rf-alone", action="store_true",
                    help="skip the run of recordflow alone in a process without TensorFlow")
    ap.add_argument("--child-json", type=Path, help=argparse.SUPPRESS)  # child process mode
    ap.add_argument("--child-rf-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    fill_defaults(args, runs=(7, 3), warmup=(2, 1), min_time=(0.5, 0.05))

    cores = len(os.sched_getaffinity(0))
    if args.child_json and args.child_rf_only:
        args.child_json.write_text(json.dumps({"cores": cores, "results": run_workloads(args, None)}))
        return 0

    import tensorflow as tf  # noqa: E402  (after argument errors, which need no TF)

    if args.child_json:
        args.child_json.write_text(json.dumps({"cores": cores, "results": run_workloads(args, tf)}))
        return 0

    info = machine_info() | {"tensorflow": tf.__version__}
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python bench/bench_parse.py" + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else ""),
        "batch": args.batch,
        "runs": args.runs,
        "warmup": args.warmup,
        "min_time": args.min_time,
        "loadavg_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "top_before": top_processes(),
    }
    print(f"all {cores} cores:", file=sys.stderr, flush=True)
    sections = [{"label": f"All cores ({cores})", "cores": cores, "results": run_workloads(args, tf)}]

    if not args.no_one_core:
        print(f"one core (CPU {args.one_core_cpu}, child process):", file=sys.stderr, flush=True)
        child = run_child(args, rf_only=False, cpu=args.one_core_cpu)
        sections.append({"label": f"One core (taskset -c {args.one_core_cpu})", "cores": child["cores"],
                         "results": child["results"]})
    if not args.no_rf_alone:
        print(f"recordflow alone, no TensorFlow in the process, all {cores} cores:", file=sys.stderr, flush=True)
        child = run_child(args, rf_only=True, cpu=None)
        sections.append({"label": f"recordflow alone, process without TensorFlow, all cores ({child['cores']})",
                         "cores": child["cores"], "results": child["results"], "rf_only": True})

    meta["loadavg_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if machine_info()["recordflow_installed"] != info["recordflow_installed"]:
        meta["warning"] = "recordflow was reinstalled during the run: the child processes may have used another build"
    md = markdown(sections, info, meta)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "parse.md").write_text(md)
    (args.out / "parse.json").write_text(json.dumps({"machine": info, "meta": meta, "sections": sections}, indent=1))
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
