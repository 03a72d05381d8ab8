#!/usr/bin/env python3
"""Input pipelines end to end: rf.Dataset against the equivalent tf.data pipeline, in one run.

Over 600 lines: the data generator, both contenders and the ratio table belong to one run.

    python bench/bench_pipeline.py            # full run (~3 min on 2 quiet cores, ~5.5 loaded)
    python bench/bench_pipeline.py --quick    # smoke run (~35 s): smaller files, 3 short runs

Issue 5: records/s for read -> shuffle -> parse -> batch, on small and on image-sized records,
with 1 and 2 threads (scaling efficiency), against tf.data in the same run; target >= 2x.

Data (generated once into bench/data/pipeline/, gitignored, with rf.RecordWriter(index=True)
and rf.Example; reused while its manifest.json matches; every file is read once before timing
so that it is in the page cache):
  small  8 files x 50,000 records {"id": int64, "label": int64, "feat": 16 float32} (~110 B a
         record, FixedLen [16] for "feat").
  image  8 files x 600 records, ImageNet-style: "image/encoded" ~110 KB of random bytes,
         "image/class/label", "image/height", "image/width" int64 (~530 MB in all).
  --quick uses quick-* files of 12,500 and 150 records a file.

Pipelines (the same stages and parameters on both sides; one epoch, consumed completely):
  rf       rf.Dataset.from_files(files).interleave(cycle_length=4, block_length=1)
             .shuffle(B_s, seed).batch(B).parse(spec).prefetch(rf.AUTOTUNE)
  tf.data  tf.data.Dataset.from_tensor_slices(files).interleave(tf.data.TFRecordDataset,
             cycle_length=4, block_length=1, num_parallel_calls=AUTOTUNE, deterministic=True)
             .shuffle(B_s, seed).batch(B).map(lambda x: tf.io.parse_example(x, spec),
             num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)
  with (shuffle buffer B_s, batch B) = (10,000, 1024) for small and (256, 128) for image; files
  sorted. The consumer is a Python loop that gets NumPy on both sides (as a PyTorch or JAX
  trainer would): tf.data's outputs are `.numpy()`'d, every tensor of every batch; rf yields
  NumPy already (bytes features as object arrays of bytes on both sides). It touches every
  output: sums of the int64 columns and of "feat", and for images len() of the first and last
  image bytes of each batch. The record count and the label sum of every epoch are checked
  against the files' on every run (shuffling must not lose or duplicate records).
  tf.data runs twice: as above (best practice, AUTOTUNE everywhere), and the same with
  `options.autotune.enabled = False` (AUTOTUNE values then fall back to fixed defaults), which
  measured faster on this machine for the image records (TF's autotuned pipeline left the
  core idle ~25% of the time, at ~7.5 k rec/s, even on one core). The faster of the two
  (by median) is the peer of each row.
  Info row (never the peer): tf.data without `.numpy()` (tensors only; the loop reads shapes).

Before any timing, with shuffle(1) (no reordering) on both sides, the first batches of rf and
tf.data must be identical (every feature, in order): the deterministic interleave orders match.

Each contender's dataset is built once; every epoch iterates a fresh iterator (shuffle
reseeded per epoch on both sides, reshuffle_each_iteration). A run is as many whole epochs as
last about `--min-time` seconds (1 s; rf's epochs are short), counted in the warm-up.
`--warmup` unmeasured runs (trace TF's functions, let both AUTOTUNEs settle, warm allocators),
then `--runs` measured runs per contender, the order of the contenders rotating every run.
Reported: medians of the per-epoch times; rf/tf = the tf.data peer's median epoch time / rf's;
"paired" = median over runs of the per-run ratio (rf and tf.data ran back to back in each run);
CPU-time ratio = the same with process CPU time (all threads); cores busy = CPU time / wall
time; faults/rec = the process's minor page faults per record (memory freshly mapped and
touched; for 110 KB records up to ~27 per record when freed buffers go back to the OS).

Cores: recordflow's thread pool is sized once per process (std::thread::hardware_concurrency,
which ignores the CPU affinity mask), so the 1-core numbers come from a child process started
under `taskset -c 0`, for both libraries: there the kernel runs everything on one core (rf still
starts 2 pool threads, which share it), and tf.data additionally gets
`options.threading.private_threadpool_size = 1`. The 2-core numbers come from this process with
both cores. Scaling efficiency = rate(2 cores) / (2 x rate(1 core)) (cross-process ratio).

Load: the machine is shared. For every workload the load average and the CPU that other
processes used meanwhile (from /proc/stat: all CPUs, or CPU 0 in the pinned child) are
recorded, as is what they used in the 2 s before the start; the report warns when other
processes took more than 0.25 of a core in any of these windows.

Writes a markdown report to stdout and bench/out/pipeline.md, raw numbers (every run) to
bench/out/pipeline.json.
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
from dataclasses import dataclass, field
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

TARGET = 2.0  # issue 5: >= 2x tf.data
WARN_OTHER_CORES = 0.25
DATA_VERSION = 1


# --------------------------------------------------------------------------------------------
# Workloads and data


@dataclass
class Workload:
    key: str  # "small" or "image"
    title: str
    files_n: int
    per_file: int
    shuffle: int
    batch: int
    int_keys: list[str]
    float_keys: list[str] = field(default_factory=list)  # FixedLen [16] float32
    bytes_keys: list[str] = field(default_factory=list)
    label_key: str = "label"
    files: list[str] = field(default_factory=list)
    file_bytes: int = 0
    label_sum: int = 0

    @property
    def records(self) -> int:
        return self.files_n * self.per_file

    def rf_spec(self) -> dict:
        return ({k: rf.FixedLen([], "int64") for k in self.int_keys}
                | {k: rf.FixedLen([16], "float32") for k in self.float_keys}
                | {k: rf.FixedLen([], "bytes") for k in self.bytes_keys})

    def tf_spec(self, tf) -> dict:
        fixed = tf.io.FixedLenFeature
        return ({k: fixed([], tf.int64) for k in self.int_keys}
                | {k: fixed([16], tf.float32) for k in self.float_keys}
                | {k: fixed([], tf.string) for k in self.bytes_keys})


def workloads(quick: bool) -> list[Workload]:
    return [
        Workload("small", "small records (~110 B: 2 int64 + 16 float32)", 8,
                 12_500 if quick else 50_000, 10_000, 1024, ["id", "label"], ["feat"]),
        Workload("image", "image-sized records (~110 KB: bytes + 3 int64)", 8,
                 150 if quick else 600, 256, 128,
                 ["image/class/label", "image/height", "image/width"], [], ["image/encoded"],
                 label_key="image/class/label"),
    ]


def write_file(w: Workload, path: Path, f: int, rng: np.random.Generator) -> int:
    label_sum = 0
    with rf.RecordWriter(str(path), index=True) as out:
        if w.key == "small":
            labels = rng.integers(0, 1000, size=w.per_file)
            feats = rng.standard_normal((w.per_file, 16)).astype(np.float32)
            for i in range(w.per_file):
                out.write(rf.Example({"id": f * w.per_file + i, "label": int(labels[i]),
                                      "feat": feats[i]}).serialize())
            label_sum = int(labels.sum())
        else:
            for i in range(w.per_file):
                label = int(rng.integers(0, 1000))
                label_sum += label
                out.write(rf.Example({
                    "image/encoded": rng.bytes(int(rng.integers(100_000, 120_001))),
                    "image/class/label": label,
                    "image/height": int(rng.integers(200, 800)),
                    "image/width": int(rng.integers(200, 800)),
                }).serialize())
    return label_sum


def prepare_data(ws: list[Workload], data_dir: Path, quick: bool, seed: int) -> None:
    """Writes the files unless the manifest says they are there already; fills files/label_sum."""
    data_dir.mkdir(parents=True, exist_ok=True)
    prefix = "quick-" if quick else ""
    manifest_path = data_dir / f"{prefix}manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = {}
    for w in ws:
        params = {"version": DATA_VERSION, "files": w.files_n, "per_file": w.per_file, "seed": seed}
        w.files = sorted(str(data_dir / f"{prefix}{w.key}-{f:05d}-of-{w.files_n:05d}.tfrecord")
                         for f in range(w.files_n))
        m = manifest.get(w.key, {})
        if (m.get("params") == params and all(Path(p).exists() for p in w.files)
                and sum(Path(p).stat().st_size for p in w.files) == m.get("bytes")):
            w.label_sum = m["label_sum"]
        else:
            t0 = time.perf_counter()
            rng = np.random.default_rng([seed, 1 if w.key == "small" else 2])
            w.label_sum = sum(write_file(w, Path(p), f, rng) for f, p in enumerate(w.files))
            manifest[w.key] = {"params": params, "label_sum": w.label_sum,
                               "bytes": sum(Path(p).stat().st_size for p in w.files)}
            manifest_path.write_text(json.dumps(manifest, indent=1))
            print(f"  wrote {w.files_n} x {w.per_file} {w.key} records in "
                  f"{time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        w.file_bytes = sum(Path(p).stat().st_size for p in w.files)


def warm_page_cache(files: list[str]) -> None:
    for p in files:
        with open(p, "rb", buffering=0) as f:
            while f.read(8 << 20):
                pass


# --------------------------------------------------------------------------------------------
# Pipelines and consumers


def rf_dataset(w: Workload, shuffle: int, seed: int) -> rf.Dataset:
    return (rf.Dataset.from_files(w.files)
            .interleave(cycle_length=4, block_length=1)
            .shuffle(shuffle, seed=seed)
            .batch(w.batch)
            .parse(w.rf_spec())
            .prefetch(rf.AUTOTUNE))


def tf_dataset(tf, w: Workload, shuffle: int, seed: int, one_thread: bool, autotune: bool = True):
    spec = w.tf_spec(tf)
    ds = (tf.data.Dataset.from_tensor_slices(w.files)
          .interleave(tf.data.TFRecordDataset, cycle_length=4, block_length=1,
                      num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
          .shuffle(shuffle, seed=seed)
          .batch(w.batch)
          .map(lambda x: tf.io.parse_example(x, spec), num_parallel_calls=tf.data.AUTOTUNE)
          .prefetch(tf.data.AUTOTUNE))
    if one_thread or not autotune:
        opts = tf.data.Options()
        if one_thread:
            opts.threading.private_threadpool_size = 1
        if not autotune:
            opts.autotune.enabled = False
        ds = ds.with_options(opts)
    return ds


def consume(w: Workload, batches) -> tuple[int, int]:
    """Touches every output of every batch (NumPy dicts). Returns (records, label sum)."""
    n = labels = 0
    other = 0.0  # only there to make the loop read every column
    for b in batches:
        n += len(b[w.label_key])
        labels += int(b[w.label_key].sum())
        for k in w.int_keys:
            other += int(b[k].sum())
        for k in w.float_keys:
            other += float(b[k].sum())
        for k in w.bytes_keys:
            col = b[k]
            other += len(col[0]) + len(col[-1])
    return n, labels


def tf_numpy(batches):
    for b in batches:
        yield {k: v.numpy() for k, v in b.items()}


def consume_tensors(w: Workload, batches) -> tuple[int, None]:
    n = 0
    for b in batches:
        n += int(b[w.label_key].shape[0])
    return n, None


# --------------------------------------------------------------------------------------------
# Verification


def same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype == object or b.dtype == object:
        return a.shape == b.shape and a.ravel().tolist() == b.ravel().tolist()
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)


def verify(tf, w: Workload, seed: int, batches: int = 3) -> None:
    """With shuffle(1) the pipelines must give identical batches, in the same order."""
    for autotune in (True, False):
        ours = iter(rf_dataset(w, 1, seed))
        theirs = iter(tf_numpy(tf_dataset(tf, w, 1, seed, one_thread=False, autotune=autotune)))
        for i in range(batches):
            a, b = next(ours), next(theirs)
            if set(a) != set(b):
                raise RuntimeError(f"{w.key}: batch {i}: keys differ: {sorted(a)} vs {sorted(b)}")
            for k in a:
                if not isinstance(a[k], np.ndarray) or not same(a[k], b[k]):
                    raise RuntimeError(f"{w.key}: batch {i}: feature '{k}' differs between rf and "
                                       f"tf.data (autotune={autotune})")
        del ours, theirs


# --------------------------------------------------------------------------------------------
# Measurement


def run_once(w: Workload, c: Contender) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and minor page faults per epoch over c.iters epochs (each a
    fresh iterator), every epoch checked."""
    gc.collect()
    results, wall, cpu, faults = timed_calls(c, keep=True)
    for n, labels in results:
        if n != w.records or (labels is not None and labels != w.label_sum):
            raise RuntimeError(f"{w.key}/{c.name}: epoch gave {n} records, label sum {labels}; "
                               f"expected {w.records}, {w.label_sum}")
    return wall, cpu, faults


def run_workloads(args, tf, one_core: bool) -> list[dict]:
    results = []
    own_cpu = sorted(os.sched_getaffinity(0))[0] if one_core else None
    for w in workloads(args.quick):
        prepare_data([w], args.data_dir, args.quick, args.seed)
        warm_page_cache(w.files)
        if not one_core:
            verify(tf, w, args.seed)  # before anything is timed

        rf_ds = rf_dataset(w, w.shuffle, args.seed)
        tf_ds = tf_dataset(tf, w, w.shuffle, args.seed, one_thread=one_core)
        tf_fixed = tf_dataset(tf, w, w.shuffle, args.seed, one_thread=one_core, autotune=False)
        cs = [
            Contender("rf.Dataset", "rf", lambda: consume(w, rf_ds)),  # noqa: F821 (bound above; deleted after use)
            Contender("tf.data", "tf", lambda: consume(w, tf_numpy(tf_ds))),  # noqa: F821 (bound above; deleted after use)
            Contender("tf.data, autotune.enabled=False", "tf", lambda: consume(w, tf_numpy(tf_fixed))),  # noqa: F821 (bound above; deleted after use)
            Contender("tf.data, tensors only (no .numpy())", "info", lambda: consume_tensors(w, tf_ds)),  # noqa: F821 (bound above; deleted after use)
        ]
        load_before = os.getloadavg()
        busy0, own0, t0 = cpu_busy_seconds(own_cpu), sum(os.times()[:2]), time.perf_counter()
        measure(cs, lambda c: run_once(w, c), args.runs, args.warmup, args.min_time)
        elapsed = time.perf_counter() - t0
        other = (cpu_busy_seconds(own_cpu) - busy0 - (sum(os.times()[:2]) - own0)) / elapsed
        load_after = os.getloadavg()
        # One more rf epoch, untimed, for its stats: stats() is read right at the end of the
        # epoch, because the iterator's wall clock keeps running after the end of sequence.
        consume(w, rf_ds)
        stats = rf_ds.stats()

        r_ = cs[0]
        t_ = min((c for c in cs if c.side == "tf"), key=Contender.median_wall)  # TF's best
        res = {
            "workload": w.key,
            "title": w.title,
            "records": w.records,
            "files": len(w.files),
            "file_bytes": w.file_bytes,
            "shuffle_buffer": w.shuffle,
            "batch": w.batch,
            "loadavg_before": load_before,
            "loadavg_after": load_after,
            "other_processes_cores": max(0.0, other),
            "tf_peer": t_.name,
            "ratio": t_.median_wall() / r_.median_wall(),
            "ratio_paired": statistics.median(t / r for r, t in zip(r_.wall, t_.wall)),
            "ratio_cpu": t_.median_cpu() / r_.median_cpu(),
            "rf_stats_report": stats["report"],
            "rf_consumer_wait_s": stats.get("consumer_wait_seconds"),
            "rf_threads": max((st.get("parallelism", 0) for st in stats.get("stages", [])), default=0),
            "rf_stats_wall_s": stats.get("wall_seconds"),
            "contenders": [
                {
                    "name": c.name,
                    "side": c.side,
                    "epochs_per_run": c.iters,
                    "wall_s_per_epoch": c.wall,
                    "cpu_s_per_epoch": c.cpu,
                    "page_faults_per_epoch": c.faults,
                    "page_faults_per_record": statistics.median(c.faults) / w.records,
                    "records_per_s": w.records / c.median_wall(),
                    "records_per_s_min": w.records / max(c.wall),
                    "records_per_s_max": w.records / min(c.wall),
                    "records_per_cpu_s": w.records / c.median_cpu(),
                    "mb_per_s": w.file_bytes / 1e6 / c.median_wall(),
                    "cores_busy": c.median_cpu() / c.median_wall(),
                }
                for c in cs
            ],
        }
        results.append(res)
        print(f"  {w.key:6s} rf {w.records / r_.median_wall():>12,.0f} rec/s   tf.data "
              f"{w.records / t_.median_wall():>12,.0f} rec/s   rf/tf {res['ratio']:.2f}x   "
              f"(other processes: {res['other_processes_cores']:.2f} cores)", file=sys.stderr, flush=True)
        del cs, rf_ds, tf_ds, tf_fixed
        gc.collect()
    return results


# --------------------------------------------------------------------------------------------
# Report


def peer(res: dict, side: str) -> dict:
    name = res["tf_peer"] if side == "tf" else next(c["name"] for c in res["contenders"] if c["side"] == side)
    return next(c for c in res["contenders"] if c["name"] == name)


def rate(res: dict, side: str) -> float:
    return peer(res, side)["records_per_s"]


def markdown(sections: list[dict], info: dict, meta: dict) -> str:
    by_cores = {sec["cores"]: {r["workload"]: r for r in sec["results"]} for sec in sections}
    first = sections[0]["results"]
    L = [
        "## Pipeline",
        "",
        f"Run: {meta['date']}, `{meta['command']}` ({meta['duration_s']:.0f} s)",
        "",
        machine_sentence(info),
        f"Load average before / after: {meta['loadavg_before']} / {meta['loadavg_after']}; other "
        f"processes used {meta['other_cores_at_start']:.2f} cores in the 2 s before the start "
        "(the per-workload figures are in the \"other CPU\" column). Busiest other processes at "
        f"the start: {', '.join(meta['top_before']) or 'n/a'}.",
        *[f"**Warning: {w}.**" for w in meta.get("warnings", [])],
        "",
        "Pipeline on both sides: sorted files -> interleave(cycle_length=4, block_length=1, "
        "parallel, deterministic) -> shuffle(buffer, seed) -> batch -> parse_example -> "
        "prefetch(AUTOTUNE), whole epochs, consumed in Python as NumPy (tf.data's "
        "tensors `.numpy()`'d; bytes as object arrays of bytes on both sides), every output "
        "touched. Data: "
        + "; ".join(f"{r['workload']}: {r['files']} files, {r['records']:,} records, "
                    f"{r['file_bytes'] / 1e6:.0f} MB, shuffle buffer {r['shuffle_buffer']:,}, "
                    f"batch {r['batch']}" for r in first)
        + f". {meta['runs']} measured runs per contender after {meta['warmup']} warm-up "
        f"run(s), contenders in rotating order; a run is as many whole epochs (each a fresh "
        f"iterator) as fill >= {meta['min_time']:g} s, calibrated in the warm-up; medians of the "
        "per-epoch times. Outputs checked identical (shuffle(1)) "
        "and every epoch's record count and label sum checked. 1 core = child process under "
        "`taskset -c 0` (tf.data also with `private_threadpool_size=1`). tf.data peer = the faster "
        "(median) of the best-practice pipeline (AUTOTUNE) and the same with "
        "`options.autotune.enabled = False`. rf/tf = the peer's median "
        "epoch time / rf's; paired = median of per-run ratios; CPU = the ratio of process CPU "
        "time (all threads). cores busy = process CPU time / wall time. other CPU = cores that "
        "other processes kept busy meanwhile (2 cores: machine-wide; 1 core: CPU 0).",
        "",
        "| Workload | cores | rf rec/s | rf MB/s | rf cores busy | tf.data peer | tf.data rec/s "
        f"| tf cores busy | **rf/tf** | paired | CPU | >= {TARGET:g}x? | other CPU |",
        "|---|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|---|--:|",
    ]
    for sec in sections:
        for r in sec["results"]:
            rr, tt = peer(r, "rf"), peer(r, "tf")
            met = "yes" if r["ratio"] >= TARGET else f"**no** ({r['ratio'] / TARGET:.0%} of target)"
            L.append(
                f"| {r['workload']} | {sec['cores']} | {fmt_rate(rr['records_per_s'])} | "
                f"{rr['mb_per_s']:.0f} | {rr['cores_busy']:.2f} | {tt['name']} | {fmt_rate(tt['records_per_s'])} | "
                f"{tt['cores_busy']:.2f} | **{r['ratio']:.2f}x** | {r['ratio_paired']:.2f}x | "
                f"{r['ratio_cpu']:.2f}x | {met} | {r['other_processes_cores']:.2f} |")
    if 1 in by_cores and len(by_cores) > 1:
        many = max(by_cores)
        L += [
            "",
            f"Scaling, 1 -> {many} cores: efficiency = rate({many}) / ({many} x rate(1)) "
            "(1.00 = perfect; the two rates come from different processes).",
            "",
            f"| Workload | rf 1 core | rf {many} cores | rf efficiency | tf.data 1 core "
            f"| tf.data {many} cores | tf.data efficiency |",
            "|---|--:|--:|--:|--:|--:|--:|",
        ]
        for key, r1 in by_cores[1].items():
            rm = by_cores[many].get(key)
            if rm is None:
                continue
            f1, fm = rate(r1, "rf"), rate(rm, "rf")
            t1, tm = rate(r1, "tf"), rate(rm, "tf")
            L.append(f"| {key} | {fmt_rate(f1)} | {fmt_rate(fm)} | {fm / (many * f1):.2f} | "
                     f"{fmt_rate(t1)} | {fmt_rate(tm)} | {tm / (many * t1):.2f} |")
    L += [
        "",
        "All contenders (median rec/s [min-max over runs], MB/s of file bytes, process CPU cores "
        "busy, records per CPU-second, minor page faults per record (first touches of memory "
        "freshly mapped, as sys time)). Rows marked *info* are never the peer.",
        "",
        "| Workload | cores | Contender | rec/s | range | MB/s | cores busy | rec/CPU-s | faults/rec |",
        "|---|--:|---|--:|--:|--:|--:|--:|--:|",
    ]
    for sec in sections:
        for r in sec["results"]:
            for c in r["contenders"]:
                name = c["name"] + (" *info*" if c["side"] == "info" else "")
                L.append(
                    f"| {r['workload']} | {sec['cores']} | {name} | {fmt_rate(c['records_per_s'])} | "
                    f"{fmt_rate(c['records_per_s_min'])}-{fmt_rate(c['records_per_s_max'])} | "
                    f"{c['mb_per_s']:.0f} | {c['cores_busy']:.2f} | {fmt_rate(c['records_per_cpu_s'])} | "
                    f"{c['page_faults_per_record']:.2f} |")
    L += ["", "recordflow's `ds.stats()[\"report\"]`, read right at the end of one more (untimed) "
          "epoch. rf's pool has as many threads as the machine has cores "
          "(`std::thread::hardware_concurrency`), whatever the affinity mask: under `taskset -c 0` "
          "its threads share the one core.", ""]
    for sec in sections:
        for r in sec["results"]:
            L += [f"{r['workload']}, {sec['cores']} core{'s' if sec['cores'] > 1 else ''}:", "",
                  "```", r["rf_stats_report"].rstrip(), "```", ""]
    return "\n".join(L).rstrip() + "\n"


# --------------------------------------------------------------------------------------------


def run_child(args, cpu: int) -> dict:
    """Runs the workloads in a fresh interpreter pinned to `cpu` (taskset -c)."""
    child_args = ["--runs", str(args.runs), "--warmup", str(args.warmup), "--seed", str(args.seed),
                  "--min-time", str(args.min_time),
                  "--data-dir", str(args.data_dir)] + (["--quick"] if args.quick else [])
    return run_child_json(__file__, child_args, cpu)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: quick-* files, 3 runs, 1 warm-up")
    ap.add_argument("--runs", type=int, help="measured runs per contender (default 7; quick 3)")
    ap.add_argument("--warmup", type=int, help="unmeasured runs per contender (default 1)")
    ap.add_argument("--min-time", type=float,
                    help="seconds per run: short epochs repeat (default 1.0; quick 0.2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-one-core", action="store_true", help="skip the taskset -c 0 run")
    ap.add_argument("--one-core-cpu", type=int, default=0, help="CPU for the one-core run")
    ap.add_argument("--data-dir", type=Path, default=HERE / "data" / "pipeline")
    ap.add_argument("--out", type=Path, default=HERE / "out")
    ap.add_argument("--child-json", type=Path, help=argparse.SUPPRESS)  # child process mode
    args = ap.parse_args()
    fill_defaults(args, runs=(7, 3), min_time=(1.0, 0.2), warmup=(1, 1))

    import tensorflow as tf  # noqa: E402  (after argument errors, which need no TF)

    cores = len(os.sched_getaffinity(0))
    if args.child_json:
        results = run_workloads(args, tf, one_core=True)
        args.child_json.write_text(json.dumps({"cores": cores, "results": results}))
        return 0

    start = time.perf_counter()
    info = machine_info() | {"tensorflow": tf.__version__}
    busy0, own0, t0 = cpu_busy_seconds(), sum(os.times()[:2]), time.perf_counter()
    time.sleep(2.0)  # what other processes use right now (the load average lags by minutes)
    other_at_start = max(0.0, (cpu_busy_seconds() - busy0 - (sum(os.times()[:2]) - own0))
                         / (time.perf_counter() - t0))
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python bench/bench_pipeline.py" + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else ""),
        "runs": args.runs,
        "warmup": args.warmup,
        "min_time": args.min_time,
        "loadavg_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "other_cores_at_start": other_at_start,
        "top_before": top_processes(),
    }
    print(f"all {cores} cores:", file=sys.stderr, flush=True)
    sections = [{"label": f"All cores ({cores})", "cores": cores,
                 "results": run_workloads(args, tf, one_core=False)}]
    if not args.no_one_core:
        print(f"one core (CPU {args.one_core_cpu}, child process):", file=sys.stderr, flush=True)
        child = run_child(args, args.one_core_cpu)
        sections.append({"label": f"One core (taskset -c {args.one_core_cpu})", "cores": child["cores"],
                         "results": child["results"]})

    meta["loadavg_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    meta["duration_s"] = time.perf_counter() - start
    warnings = []
    for sec in sections:
        for r in sec["results"]:
            if r["other_processes_cores"] > WARN_OTHER_CORES:
                warnings.append(f"other processes kept {r['other_processes_cores']:.2f} cores busy "
                                f"during {r['workload']} ({sec['label']}): its rates are depressed")
    if other_at_start > WARN_OTHER_CORES:
        warnings.append(f"other processes kept {other_at_start:.2f} cores busy just before the run")
    if machine_info()["recordflow_installed"] != info["recordflow_installed"]:
        warnings.append("recordflow was reinstalled during the run: the child process may have "
                        "used another build")
    meta["warnings"] = warnings
    md = markdown(sections, info, meta)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "pipeline.md").write_text(md)
    (args.out / "pipeline.json").write_text(json.dumps({"machine": info, "meta": meta, "sections": sections},
                                                       indent=1))
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
