#!/usr/bin/env python3
"""The benchmark suite: one command that regenerates every figure docs/benchmarks.md quotes.

Over 600 lines: the suite's sections share the data cache, the contender runs and the
result table that docs/benchmarks.md quotes.

    python bench/suite.py            # full run, < 20 min on 2 cores
    python bench/suite.py --quick    # smoke run, a few minutes

Sections (elapsed time printed for each):
 1. setup: matplotlib in this Python; a peers virtualenv bench/.venv-peers (torch 2.14.1 +
    torchvision 0.29.1, the `tfrecord` package, Pillow, NumPy, nvidia-dali-cuda120) created
    on first use; the bare decoder bench/jpeg_decode_bench.cc compiled with g++ -lturbojpeg.
 2. data: an ImageNet-like folder from recordflow.datasets (JPEG quality 85-97, ~108 KB mean),
    converted with `recordflow convert` into TFRecord shards with .idx files, cached under
    bench/data/suite-* and reused while bench/data/suite-*/manifest.json matches.
 3. checks: every contender's eval output on the same 8 records, compared with recordflow's;
    every contender's first train batch (shape, dtype, label range).
 4. image pipelines: train (read -> shuffle -> parse -> decode + RandomResizedCrop 224 + flip
    + normalize -> batch 256) and eval (resize 256, center crop 224, normalize) for recordflow,
    tf.data, PyTorch DataLoader + tfrecord + torchvision, NVIDIA DALI (CPU), and bare
    libjpeg-turbo full decode on all cores. Every run is a fresh process (bench/suite_worker.py)
    so peak memory is per contender; runs alternate in rotating order; warm-up batches are
    excluded (6 by default: a pipeline's first batches include one-time costs, such as the
    kernel zeroing the fresh pages of each new 154 MB batch buffer, that training at steady
    state does not pay); medians of --runs runs.
 5. microbenchmarks: bench_records, record_read_report (the C++ record_read_bench, built with
    CMake into bench/data/build-bench on first use), bench_parse, bench_pipeline, bench_image,
    bench_overhead, bench_convert in bounded modes; their tables are collected.

Writes bench/out/suite.md (tables), bench/out/suite.json (every raw time), bench/out/suite.png.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import benchlib  # noqa: E402

import recordflow as rf  # noqa: E402

PEERS_VENV = HERE / ".venv-peers"
# torch is pinned: PyPI's torchvision does not import beside the system's torch 2.13 CPU wheel,
# and these two releases are on this machine's disk (a CUDA build that runs on the CPU).
PEER_PACKAGES = {"torch": ["torch==2.14.1", "torchvision==0.29.1", "tfrecord", "pillow", "numpy"],
                 "dali": ["nvidia-dali-cuda120", "numpy"]}
# spdl, grain and ffcv run in this interpreter (scripts/setup.sh --bench installs them; FFCV's
# sdist builds against libopencv-dev and libturbojpeg0-dev).
CONTENDERS = ["recordflow", "tfdata", "torch", "dali", "spdl", "grain", "ffcv"]
LABELS = {"recordflow": "recordflow", "tfdata": "tf.data", "torch": "PyTorch DataLoader",
          "dali": "DALI (CPU)", "spdl": "SPDL (threads, FFmpeg decode)",
          "grain": "Grain (ArrayRecord, mp_prefetch)", "ffcv": "FFCV (.beton, JPEG)",
          "bare": "bare libjpeg-turbo decode"}
# DESIGN.md goals: recordflow's train throughput over each peer's.
GOALS = {"tfdata": 3.0, "dali": 2.0, "torch": 4.0, "spdl": 1.5, "grain": 1.0, "ffcv": 1.0,
         "bare": 1.1}
QUALITY = (85, 97)


CONFIGS = """Configurations (bench/suite_worker.py; each its library's documented best practice):
- recordflow: `rf.Dataset.from_files(files, shuffle_files=True).interleave().shuffle(B).repeat()
  .batch(256, drop_remainder=True).map(rf.vision.imagenet_train(224)).prefetch()` (eval:
  `imagenet_eval(224, 256)`, no shuffle); batches arrive as NumPy arrays.
- tf.data: `from_tensor_slices(files).shuffle().interleave(TFRecordDataset, cycle_length=16,
  num_parallel_calls=AUTOTUNE, deterministic=False).shuffle(B).repeat().map(f, AUTOTUNE,
  deterministic=False).batch(256).prefetch(AUTOTUNE)`, f = parse_single_example,
  extract_jpeg_shape + sample_distorted_bounding_box (area 0.08-1, aspect 3/4-4/3),
  decode_and_crop_jpeg, resize 224 bilinear (TF's default, no antialias: cheaper than the
  others' antialiased resize), random_flip_left_right, normalize (TF Model Garden's ImageNet
  input). Eval: decode_jpeg, antialiased resize of the shorter side to 256, center crop, normalize.
  Batches are consumed as EagerTensors (no `.numpy()`).
- PyTorch DataLoader: an IterableDataset over the shards with the `tfrecord` package's
  TFRecordDataset and .idx files (each worker reads its slice of every shard; the package's
  shuffle queue, B / workers records per worker), PIL decode, torchvision RandomResizedCrop(224),
  RandomHorizontalFlip, ToTensor, Normalize (eval: Resize(256), CenterCrop(224)),
  batch_size=256, num_workers = cores, persistent_workers=True, prefetch_factor=2.
- DALI (CPU): `pipeline_def(batch_size=256, num_threads=cores, device_id=None)`,
  `fn.readers.tfrecord` with the .idx files (random_shuffle, initial_fill=B),
  `fn.decoders.image_random_crop(device="cpu")`, `fn.resize` 224x224,
  `fn.crop_mirror_normalize` (coin-flip mirror) to float32 HWC (eval: `fn.decoders.image`,
  `resize(resize_shorter=256)`, `crop_mirror_normalize(crop=224)`); `pipe.run()` per batch.
- FFCV: the same images written once to a .beton by FFCV's `DatasetWriter` with
  `RGBImageField(write_mode="jpg", jpeg_quality=90)` (FFCV stores JPEG: each image re-encoded at
  its default quality) and `IntField`; `Loader(beton, batch_size=256, num_workers=cores,
  os_cache=True, order=OrderOption.RANDOM, drop_last=True)` with
  `RandomResizedCropRGBImageDecoder((224, 224))`, `RandomHorizontalFlip()`,
  `NormalizeImage(mean, std, np.float32)` (eval: `CenterCropRGBImageDecoder((224, 224),
  ratio=224/256)`, sequential order); batches arrive as NumPy arrays.
- bare decode: bench/jpeg_decode_bench.cc, TurboJPEG `tjDecompress2` of the same JPEG bytes to
  full-size RGB, one thread per core, no reading, parsing, cropping or resizing.

CPU-s / 1000 img: CPU time of the contender's process and all its children (DataLoader
workers) during the measured batches, less the CPU time of the harness's own thread that samples
the tree (~1.4% of a core). Peak PSS: the largest sum over the process tree of the
proportional set size (shared pages split between processes, so forked workers are not counted
twice), sampled every 0.1 s from start to end; RSS summed the same way in brackets. Other
processes (cores): the machine's busy CPU time during the measured batches less the
contender's own, per second of wall time: what the other jobs on this machine took.
"""


class Log:
    def __init__(self):
        self.t0 = time.perf_counter()
        self.sections: dict[str, float] = {}

    def section(self, name: str):
        log = self

        class _S:
            def __enter__(self):
                self.t = time.perf_counter()
                print(f"\n=== {name} (t = {time.perf_counter() - log.t0:.0f} s)", flush=True)

            def __exit__(self, *exc):
                dt = time.perf_counter() - self.t
                log.sections[name] = dt
                print(f"=== {name}: {dt:.1f} s", flush=True)
        return _S()


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


# ----------------------------------------------------------------------------- 1. setup
def ensure_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        pass
    print("setup: installing matplotlib into", sys.executable)
    r = run([sys.executable, "-m", "pip", "install", "-q", "matplotlib"])
    if r.returncode != 0:
        print("setup: matplotlib did not install, no chart:", r.stderr[-500:])
        return False
    return True


def peers_python() -> Path:
    return PEERS_VENV / "bin" / "python"


def ensure_peers() -> dict:
    """Creates bench/.venv-peers and installs the torch and DALI peers into it; returns
    {"torch": None | error, "dali": None | error}."""
    status = {}
    if not peers_python().exists():
        print(f"setup: creating {PEERS_VENV}")
        r = run([sys.executable, "-m", "venv", PEERS_VENV])
        if r.returncode != 0:
            return {k: f"venv failed: {r.stderr[-300:]}" for k in PEER_PACKAGES}
    probes = {"torch": "import torch, torchvision, tfrecord, PIL; print(torch.__version__, torchvision.__version__)",
              "dali": "import nvidia.dali as d; print(d.__version__)"}
    for name, pkgs in PEER_PACKAGES.items():
        r = run([peers_python(), "-c", probes[name]])
        if r.returncode != 0:
            print(f"setup: installing {' '.join(pkgs)} into {PEERS_VENV} (first run only)", flush=True)
            ri = run([peers_python(), "-m", "pip", "install", "-q", *pkgs])
            r = run([peers_python(), "-c", probes[name]])
            if r.returncode != 0:
                status[name] = (f"install failed: {ri.stderr.strip()[-400:]}; "
                                f"import: {r.stderr.strip()[-400:]}")
                continue
        status[name] = None
        print(f"setup: {name} peer: {r.stdout.strip()}")
    return status


def ensure_decoder(data_root: Path) -> Path | str:
    src = HERE / "jpeg_decode_bench.cc"
    exe = data_root / "bin" / "jpeg_decode_bench"
    if exe.exists() and exe.stat().st_mtime >= src.stat().st_mtime:
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    r = run(["g++", "-O2", "-std=c++20", "-pthread", src, "-o", exe, "-lturbojpeg"])
    if r.returncode != 0:
        return f"compile failed (Debian libturbojpeg0-dev; scripts/setup.sh --bench): {r.stderr[-400:]}"
    return exe


# ----------------------------------------------------------------------------- 2. data
def prepare_data(data_root: Path, classes: int, per_class: int, shards: int,
                 tag: str = "suite") -> dict:
    """ImageNet-like JPEGs converted to `shards` TFRecord shards with .idx files (and the same
    JPEGs in jpegs.pack for the bare decoder) under data_root/<tag>-<classes>x<per_class>,
    generated once and reused while the parameters match; returns the manifest and "dir"."""
    d = data_root / f"{tag}-{classes}x{per_class}"
    params = {"classes": classes, "images_per_class": per_class, "shards": shards,
              "quality": list(QUALITY), "seed": 0, "val_fraction": 0.0, "version": 1}
    manifest = d / "manifest.json"
    if manifest.exists():
        m = json.loads(manifest.read_text())
        files = [d / "shards" / f for f in m.get("files", [])]
        if m.get("params") == params and files and all(f.exists() and Path(str(f) + ".idx").exists()
                                                         for f in files):
            print(f"data: reusing {d} ({m['images']} images, mean JPEG {m['mean_jpeg_bytes'] / 1e3:.1f} KB)")
            return m | {"dir": str(d)}
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    t = time.perf_counter()
    from recordflow import datasets
    info = datasets.make_imagenet_like(str(d / "images"), classes, per_class, seed=0,
                                       quality=QUALITY)
    print(f"data: generated {info['images']} JPEGs in {time.perf_counter() - t:.0f} s")
    t = time.perf_counter()
    cli = shutil.which("recordflow") or str(Path(sys.executable).parent / "recordflow")
    r = run([cli, "convert", d / "images", d / "shards", "--val-fraction", "0", "--shards",
             str(shards), "--seed", "0"])
    if r.returncode != 0:
        raise SystemExit(f"recordflow convert failed: {r.stdout[-500:]} {r.stderr[-1000:]}")
    print(f"data: recordflow convert: {time.perf_counter() - t:.1f} s")
    files = sorted(p.name for p in (d / "shards").glob("train-*.tfrecord"))
    missing = [f for f in files if not (d / "shards" / (f + ".idx")).exists()]
    if not files or missing:
        raise SystemExit(f"convert wrote no shards or no .idx for {missing}")
    # The JPEG bytes as stored in the shards, for the bare decoder (pack: [u32 len][bytes]...).
    sizes = []
    labels = set()
    with open(d / "jpegs.pack", "wb") as out:
        for f in files:
            for rec in rf.RecordReader(str(d / "shards" / f)):
                ex = rf.Example.parse(rec) if hasattr(rf.Example, "parse") else rf.Example.from_bytes(rec)
                jpeg = ex["image/encoded"]
                jpeg = jpeg[0] if isinstance(jpeg, (list, tuple)) else jpeg
                lab = ex["image/class/label"]
                labels.add(int(lab[0] if isinstance(lab, (list, tuple, np.ndarray)) else lab))
                out.write(len(jpeg).to_bytes(4, "little"))
                out.write(jpeg)
                sizes.append(len(jpeg))
    shutil.rmtree(d / "images")  # the shards hold the very same bytes
    m = {"params": params, "files": files, "images": len(sizes),
         "mean_jpeg_bytes": float(np.mean(sizes)), "median_jpeg_bytes": float(np.median(sizes)),
         "labels": sorted(labels), "sources": info["sources"],
         "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    manifest.write_text(json.dumps(m, indent=1))
    print(f"data: {len(sizes)} images in {len(files)} shards, mean JPEG {m['mean_jpeg_bytes'] / 1e3:.1f} KB")
    return m | {"dir": str(d)}


# ----------------------------------------------------------------------------- 3./4. contenders
def worker_cmd(contender: str, python: Path, mode: str, files: list[str], args, extra=()) -> list:
    return [python, HERE / "suite_worker.py", contender, mode, "--files", *files,
            "--warmup-batches", str(args.warmup_batches), "--batches", str(args.batches),
            "--shuffle", str(args.shuffle), *extra]


def run_worker(cmd, timeout: float) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
    return benchlib.run_for_result(cmd, env, timeout, "SUITE_RESULT")


def run_bare(exe: Path, pack: Path, threads: int, passes: int, timeout: float) -> dict:
    try:
        r = run([exe, pack, threads, passes], timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-500:]}
    res = json.loads(r.stdout.strip().splitlines()[-1])
    # The decoder samples the machine's busy time around its timed loop itself: sampled here,
    # around the whole process, it would count the pack load (~1 core for a second or more)
    # as other processes' work.
    busy = res.get("machine_busy_s", -1)
    return {"contender": "bare", "images": res["images"], "wall_s": res["wall_s"],
            "cpu_s": res["cpu_s"], "images_per_s": res["images_per_s"], "threads": threads,
            "mean_jpeg_bytes": res["mean_jpeg_bytes"], "load_avg": os.getloadavg()[0],
            "others_cores": (max(0.0, (busy - res["cpu_s"]) / res["wall_s"]) if busy >= 0
                             else float("nan"))}


def checks(pythons: dict, files: list[str], out_dir: Path, timeout: float) -> dict:
    """Eval outputs vs recordflow's on the same 8 records; first train batch's shape/dtype and
    label range. Returns {contender: {...}}; raises on a contender that is wrong."""
    res = {}
    ref = None
    for c in CONTENDERS:
        if c not in pythons:
            continue
        npz = out_dir / f"check-{c}.npz"
        cmd = [pythons[c], HERE / "suite_worker.py", c, "check", "--files", *files,
               "--check-out", npz]
        r = run_worker(cmd, timeout)
        if "error" in r:
            res[c] = r
            print(f"check: {c}: ERROR {r['error'][:300]}")
            continue
        z = np.load(npz)
        r["eval"] = z["eval_images"]
        r["eval_label_list"] = z["eval_labels"]
        if c == "recordflow":
            ref = r
        res[c] = r
    problems = []
    for c, r in res.items():
        if "error" in r:
            continue
        ok_shape = r["train_shape"] == [256, 224, 224, 3] or r["train_shape"] == [256, 3, 224, 224]
        if not ok_shape:
            problems.append(f"{c}: train batch shape {r['train_shape']}")
        if r["train_dtype"] != "float32":
            problems.append(f"{c}: train dtype {r['train_dtype']}")
        if abs(r["train_mean"]) > 1.5 or not 0.3 < r["train_std"] < 2.0:
            problems.append(f"{c}: train batch not normalized (mean {r['train_mean']:.2f}, "
                            f"std {r['train_std']:.2f})")
        if ref is not None:
            if r["train_label_min"] < 0:
                problems.append(f"{c}: negative label {r['train_label_min']}")
            if list(r["eval_label_list"]) != list(ref["eval_label_list"]):
                problems.append(f"{c}: eval labels {list(r['eval_label_list'])} != recordflow's "
                                f"{list(ref['eval_label_list'])}")
            a, b = r["eval"], ref["eval"]
            if a.shape != b.shape:
                problems.append(f"{c}: eval shape {a.shape} != {b.shape}")
            else:
                d = np.abs(a - b)
                r["eval_mean_abs_diff"] = float(d.mean())
                r["eval_p99_abs_diff"] = float(np.quantile(d, 0.99))
                # Normalized units (1/255 / 0.226 ~ 0.017 per pixel level). Resamplers differ in
                # rounding and antialiasing, never by more than a few levels on average.
                # FFCV's .beton holds its own re-encode of each image (JPEG quality 90): its
                # pixels differ from the shards' before any resampling (~0.10 measured here).
                if d.mean() > (0.15 if c == "ffcv" else 0.1):
                    problems.append(f"{c}: eval output differs from recordflow's by "
                                    f"{d.mean():.3f} on average (normalized units)")
    for r in res.values():
        r.pop("eval", None)
        if "eval_label_list" in r:
            r["eval_label_list"] = [int(x) for x in r["eval_label_list"]]
    for c, r in res.items():
        if "error" not in r:
            print(f"check: {c}: train {r['train_shape']} {r['train_dtype']} labels "
                  f"{r['train_label_min']}..{r['train_label_max']}, eval vs recordflow "
                  f"mean |diff| {r.get('eval_mean_abs_diff', 0):.4f}")
    if problems:
        raise SystemExit("sanity checks failed:\n  " + "\n  ".join(problems))
    return res


def pipelines(pythons: dict, files: list[str], exe, pack: Path, args, log: Log) -> dict:
    """All runs of both modes; each round runs every contender once, order rotated."""
    raw = {"train": {c: [] for c in pythons}, "eval": {c: [] for c in pythons}, "bare": []}
    errors = {}
    names = list(pythons) + (["bare"] if isinstance(exe, Path) else [])
    images_per_run = args.batches * 256
    passes = max(1, round(images_per_run / max(1, args.images)))
    for mode in ("train", "eval"):
        with log.section(f"image pipelines: {mode}"):
            for rnd in range(args.runs):
                k = rnd % len(names)
                order = names[k:] + names[:k]
                for c in order:
                    if c in errors:
                        continue
                    if c == "bare":
                        if mode == "eval":
                            continue  # one bare series, rotated with the train runs
                        r = run_bare(exe, pack, os.cpu_count(), passes, args.timeout)
                    else:
                        r = run_worker(worker_cmd(c, pythons[c], mode, files, args), args.timeout)
                    r["round"] = rnd
                    if "error" in r:
                        errors[c] = r["error"]
                        print(f"  {mode} round {rnd} {c}: ERROR {r['error'][:400]}", flush=True)
                        continue
                    (raw["bare"] if c == "bare" else raw[mode][c]).append(r)
                    extra = (f", ttfb {r['time_to_first_batch_s']:.2f} s, peak PSS "
                             f"{r['peak_pss_bytes'] / 2**20:.0f} MiB") if c != "bare" else ""
                    print(f"  {mode} round {rnd} {c:<10} {r['images_per_s']:7.1f} img/s, "
                          f"cpu {r['cpu_s']:.1f} s / {r['images']} img{extra}, load {r['load_avg']:.2f}",
                          flush=True)
    return {"raw": raw, "errors": errors}


def summarize(raw: dict, cores: int) -> dict:
    out = {}
    for mode in ("train", "eval"):
        rows = {}
        series = dict(raw[mode])
        series["bare"] = raw["bare"]
        for c, runs in series.items():
            if not runs:
                continue
            ips = [r["images_per_s"] for r in runs]
            row = {"runs": len(runs), "images_per_s": statistics.median(ips),
                   "images_per_s_all": ips,
                   "cpu_s_per_1000": statistics.median(1000 * r["cpu_s"] / r["images"] for r in runs),
                   "cores_used": statistics.median(r["cpu_s"] / r["wall_s"] for r in runs),
                   "others_cores": statistics.median(r["others_cores"] for r in runs),
                   "load_avg": statistics.median(r["load_avg"] for r in runs)}
            if c != "bare":
                row["ttfb_s"] = statistics.median(r["time_to_first_batch_s"] for r in runs)
                row["peak_pss_mib"] = statistics.median(r["peak_pss_bytes"] for r in runs) / 2**20
                row["peak_rss_mib"] = statistics.median(r["peak_rss_bytes"] for r in runs) / 2**20
            rows[c] = row
        out[mode] = rows
    # Paired ratios: recordflow / peer within each round (the two ran minutes apart at most, so
    # a slow spell of the shared host hits both), then the median over rounds. Steadier than the
    # ratio of medians when the host's speed drifts between rounds; shown beside it.
    paired = {}
    for c in ("tfdata", "dali", "torch", "spdl", "grain", "ffcv", "bare"):
        peer = {r["round"]: r for r in (raw["bare"] if c == "bare" else raw["train"].get(c, []))}
        rf = {r["round"]: r for r in raw["train"].get("recordflow", [])}
        both = sorted(set(peer) & set(rf))
        if both:
            paired[c] = {
                "rounds": len(both),
                "train": statistics.median(rf[k]["images_per_s"] / peer[k]["images_per_s"]
                                           for k in both),
                "train_cpu": statistics.median(
                    (peer[k]["cpu_s"] / peer[k]["images"]) / (rf[k]["cpu_s"] / rf[k]["images"])
                    for k in both)}
    out["paired"] = paired
    return out


# ----------------------------------------------------------------------------- 5. micro
def micro_commands(quick: bool, out: Path) -> list[tuple[str, list, list[str]]]:
    py = sys.executable
    b = HERE
    one = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    # Only a non-default --out is passed on, so the commands shown stay the plain ones.
    o = out.resolve() != (HERE / "out").resolve()
    cmds = [
        ("records", [py, b / "bench_records.py", "--quick"] + (["--out-dir", out] if o else []),
         ["records.md"]),
        ("records_cpp", [py, b / "record_read_report.py"] + (["--quick"] if quick else []) +
         (["--out", out] if o else []), ["record_read.md"]),
        ("parse", [py, b / "bench_parse.py", "--quick"] + (["--out", out] if o else []) +
         (["--no-one-core", "--no-rf-alone"] if quick else []), ["parse.md"]),
        ("pipeline", [py, b / "bench_pipeline.py", "--quick"] + (["--out", out] if o else []) +
         (["--no-one-core"] if quick else []), ["pipeline.md"]),
        ("image", one + [py, b / "bench_image.py", "--images", "60" if quick else "120", "--repeat",
                         "1" if quick else "2"], []),
        ("overhead", [py, b / "bench_overhead.py", "--quick"], []),
        ("convert", [py, b / "bench_convert.py", "--classes", "10", "--images-per-class",
                     "30" if quick else "60", "--runs", "1" if quick else "2", "--warmup",
                     "0" if quick else "1"], []),
    ]
    return cmds


def run_micro(out_dir: Path, quick: bool, only: list[str] | None, log: Log) -> dict:
    res = {}
    mdir = out_dir / "micro"
    mdir.mkdir(parents=True, exist_ok=True)
    for name, cmd, md_files in micro_commands(quick, out_dir):
        if only and name not in only:
            continue
        with log.section(f"micro: {name}"):
            t = time.perf_counter()
            b0 = benchlib.cpu_busy_seconds()
            r = run(cmd, timeout=600)
            dt = time.perf_counter() - t
            busy = benchlib.cpu_busy_seconds()[0] - b0[0]
            (mdir / f"{name}.log").write_text(r.stdout + "\n--- stderr ---\n" + r.stderr)
            text = ""
            for f in md_files:
                p = out_dir / f
                if p.exists() and p.stat().st_mtime >= time.time() - dt - 5:
                    text += p.read_text()
            if not text:
                # The script prints its tables on stdout: keep the markdown table lines and the
                # lines around them that carry the ratios.
                keep = [l for l in r.stdout.splitlines()
                        if l.startswith("|") or l.startswith("- ") or l.startswith("#")
                        or "target" in l]
                text = "\n".join(keep)
            shown = " ".join("python" if str(c) == sys.executable else str(c) for c in cmd)
            res[name] = {"command": shown.replace(str(HERE.parent) + "/", ""),
                         "returncode": r.returncode, "seconds": dt,
                         "machine_cores_busy": busy / dt if dt else None,
                         "load_avg_end": os.getloadavg()[0], "markdown": text,
                         "stderr_tail": r.stderr.strip()[-800:] if r.returncode else ""}
            print(f"  {name}: exit {r.returncode}, {dt:.0f} s" +
                  (f"\n  {r.stderr.strip()[-400:]}" if r.returncode else ""), flush=True)
    return res


# ----------------------------------------------------------------------------- output
def fmt_mib(x):
    return "" if x is None else f"{x:.0f}"


def markdown(meta: dict, summary: dict, checks_res: dict, errors: dict, micro: dict) -> str:
    L = []
    m = meta["machine"]
    L.append("# recordflow benchmark suite\n")
    L.append(f"{meta['date']}, `{meta['command']}`, {meta['elapsed_s'] / 60:.1f} min.\n")
    L.append(f"Machine: {m['cpu_model']} ({m['cores_online']} cores online, {m['mem_gib']} GiB; "
             f"flags: {', '.join(meta['cpu_flags'])}), Linux {m['kernel']}, Python {m['python']}, "
             f"recordflow {m['recordflow']} ({m['git_head']}). Load average at start "
             f"{meta['load_start']:.2f}, at end {meta['load_end']:.2f}; busiest other processes "
             f"at start: {'; '.join(meta['top_start']) or 'none'}.\n")
    d = meta["data"]
    L.append(f"Workload: {d['images']} ImageNet-like JPEGs (recordflow.datasets, quality "
             f"{QUALITY[0]}-{QUALITY[1]}, mean {d['mean_jpeg_bytes'] / 1e3:.1f} KB, median "
             f"{d['median_jpeg_bytes'] / 1e3:.1f} KB, {len(d['labels'])} classes) in "
             f"{len(d['files'])} TFRecord shards with .idx (`recordflow convert`). Batch 256, "
             f"output 224x224x3 float32 normalized. Shuffle buffer {meta['shuffle']} records "
             f"(train). Each run: a fresh process, first batch (time to first batch), "
             f"{meta['warmup_batches']} warm-up batches, then {meta['batches']} measured batches "
             f"({meta['batches'] * 256} images); {meta['runs']} runs per contender, alternating in "
             f"rotating order; medians.\n")
    peers = meta["versions"]
    L.append("Contenders: " + "; ".join(f"{LABELS[k]}: {v}" for k, v in peers.items()) + ".\n")
    L.append(CONFIGS)
    for mode in ("train", "eval"):
        rows = summary.get(mode, {})
        if not rows:
            continue
        L.append(f"\n## {mode.capitalize()} pipeline\n")
        L.append("| Contender | images/s (median) | all runs | CPU-s / 1000 img | cores used | "
                 "other processes (cores) | load avg | time to first batch (s) | "
                 "peak PSS MiB (RSS) |")
        L.append("|---|---:|---|---:|---:|---:|---:|---:|---:|")
        for c in CONTENDERS + ["bare"]:
            r = rows.get(c)
            if r is None:
                continue
            L.append(f"| {LABELS[c]} | {r['images_per_s']:.1f} | "
                     f"{', '.join(f'{x:.0f}' for x in r['images_per_s_all'])} | "
                     f"{r['cpu_s_per_1000']:.2f} | {r['cores_used']:.2f} | "
                     f"{r['others_cores']:.2f} | {r['load_avg']:.2f} | "
                     + (f"{r['ttfb_s']:.2f} | " if "ttfb_s" in r else "- | ")
                     + (f"{r['peak_pss_mib']:.0f} ({r['peak_rss_mib']:.0f})" if 'peak_pss_mib' in r else "-")
                     + " |")
        if mode == "eval" and "bare" in rows:
            L.append("\n(bare decode: the same series as in the train table.)")
    L.append("\n## Ratios (recordflow / peer)\n")
    L.append("Goals from DESIGN.md, on the train pipeline's images/s (median over median). The "
             "CPU column compares CPU-seconds per image (peer / recordflow): the work each side "
             "does, which moves less than wall time when other jobs take cores.\n")
    L.append("Paired: the median over rounds of the ratio within a round (recordflow's run and the "
             "peer's run of the same round), images/s and CPU per image: less moved by a drift of "
             "the shared host's speed between rounds than the ratio of medians.\n")
    L.append("| Peer | train images/s | train CPU per image (peer / rf) | paired images/s (CPU) | eval images/s | eval CPU per image | goal (train) | met (images/s)? | met (CPU per image)? |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---|---|")
    ratios = {}
    tr, ev = summary.get("train", {}), summary.get("eval", {})
    for c in ["tfdata", "dali", "torch", "spdl", "grain", "ffcv", "bare"]:
        goal = GOALS[c]
        if "recordflow" not in tr or c not in tr:
            why = errors.get(c, "not run")
            L.append(f"| {LABELS[c]} | - | - | - | - | - | {goal:g}x | not measured: {why[:300]} | |")
            continue
        rt = tr["recordflow"]["images_per_s"] / tr[c]["images_per_s"]
        rc = tr[c]["cpu_s_per_1000"] / tr["recordflow"]["cpu_s_per_1000"]
        re = (ev["recordflow"]["images_per_s"] / ev[c]["images_per_s"]) if c in ev and "recordflow" in ev else None
        if c == "bare":
            re = ev["recordflow"]["images_per_s"] / tr[c]["images_per_s"] if "recordflow" in ev else None
        ec = None
        if "recordflow" in ev:
            peer_ev = tr[c] if c == "bare" else ev.get(c)
            if peer_ev:
                ec = peer_ev["cpu_s_per_1000"] / ev["recordflow"]["cpu_s_per_1000"]
        pr = summary.get("paired", {}).get(c)
        ratios[c] = {"train": rt, "train_cpu": rc, "eval": re, "eval_cpu": ec, "goal": goal,
                     "met": rt >= goal, "met_cpu": rc >= goal,
                     "paired": pr["train"] if pr else None,
                     "paired_cpu": pr["train_cpu"] if pr else None}
        ps = f"{pr['train']:.2f}x ({pr['train_cpu']:.2f}x)" if pr else "-"
        L.append(f"| {LABELS[c]} | {rt:.2f}x | {rc:.2f}x | {ps} | {'' if re is None else f'{re:.2f}x'} | "
                 f"{'' if ec is None else f'{ec:.2f}x'} | >= {goal:g}x | "
                 f"{'met' if rt >= goal else 'NOT met'} | {'met' if rc >= goal else 'NOT met'} |")
    L.append("\n## Sanity checks\n")
    for c, r in checks_res.items():
        if "error" in r:
            L.append(f"- {LABELS[c]}: could not run: {r['error'][:500]}")
        else:
            L.append(f"- {LABELS[c]}: train batch {r['train_shape']} {r['train_dtype']}, labels "
                     f"{r['train_label_min']}..{r['train_label_max']}, batch mean {r['train_mean']:.3f} "
                     f"std {r['train_std']:.3f}; eval on the first 8 records vs recordflow: mean "
                     f"|diff| {r.get('eval_mean_abs_diff', 0):.4f}, p99 {r.get('eval_p99_abs_diff', 0):.4f}"
                     " (normalized units)")
    if errors:
        L.append("\n## Contenders that did not run\n")
        for c, e in errors.items():
            L.append(f"- {LABELS.get(c, c)}: {e[:1500]}")
    if micro:
        L.append("\n## Microbenchmarks\n")
        L.append("| Benchmark | command | exit | seconds | machine cores busy |")
        L.append("|---|---|---:|---:|---:|")
        for name, r in micro.items():
            L.append(f"| {name} | `{r['command']}` | {r['returncode']} | {r['seconds']:.0f} | "
                     f"{r['machine_cores_busy']:.2f} |")
        for name, r in micro.items():
            L.append(f"\n### {name}\n\n`{r['command']}`\n")
            # The scripts' own headings go below this section's level.
            L.append(("\n" + r["markdown"]).replace("\n# ", "\n#### ")
                     .replace("\n## ", "\n#### ").replace("\n### ", "\n#### ").strip())
            if r["returncode"]:
                L.append(f"\nFAILED (exit {r['returncode']}): {r['stderr_tail']}")
    L.append("\n## Elapsed per section\n")
    for k, v in meta["sections"].items():
        L.append(f"- {k}: {v:.0f} s")
    return "\n".join(L) + "\n", ratios


def docs_section(md: str) -> str:
    """suite.md as a section of docs/benchmarks.md: headings one level down, the collected
    microbenchmark tables folded into a <details> block."""
    lines = md.splitlines()
    out, folded = [], False
    for line in lines:
        if line.startswith("#"):
            line = "#" + line
        if line == "### Microbenchmarks":
            out += [line, "", "<details><summary>The microbenchmarks' tables from this run"
                    "</summary>", ""]
            folded = True
            continue
        if folded and line == "### Elapsed per section":
            out += ["", "</details>", ""]
            folded = False
        out.append(line)
    if folded:
        out += ["", "</details>"]
    return "\n".join(out) + "\n"


def chart(summary: dict, path: Path, title: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, mode in zip(axes, ("train", "eval")):
        rows = summary.get(mode, {})
        names = [c for c in CONTENDERS + ["bare"] if c in rows]
        vals = [rows[c]["images_per_s"] for c in names]
        colors = ["#d62728" if c == "recordflow" else "#7f7f7f" if c == "bare" else "#1f77b4"
                  for c in names]
        bars = ax.barh([LABELS[c] for c in names], vals, color=colors)
        for b, v in zip(bars, vals):
            ax.text(v, b.get_y() + b.get_height() / 2, f" {v:.0f}", va="center", fontsize=9)
        ax.invert_yaxis()
        ax.set_xlabel("images/s (median)")
        ax.set_title(f"{mode} pipeline" + (" (bare decode: full decode)" if mode == "eval" else ""))
        ax.set_xlim(0, max(vals + [1]) * 1.2)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 600 images, short runs")
    ap.add_argument("--runs", type=int, help="measured runs per contender (default 5; quick 3)")
    ap.add_argument("--images", type=int, help="dataset size (default 3000; quick 600)")
    ap.add_argument("--batches", type=int, help="measured batches of 256 per run (default 8; quick 2)")
    ap.add_argument("--warmup-batches", type=int, help="unmeasured batches after the first (default 6; quick 1)")
    ap.add_argument("--shuffle", type=int, help="shuffle buffer in records (default 2048; quick 512)")
    ap.add_argument("--contenders", nargs="+", choices=CONTENDERS + ["bare"],
                    help="only these (default: all)")
    ap.add_argument("--micro", nargs="*", help="only these microbenchmarks (none: skip them)")
    ap.add_argument("--no-micro", action="store_true", help="skip the microbenchmarks")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per contender run")
    ap.add_argument("--data-dir", type=Path, default=HERE / "data")
    ap.add_argument("--out", type=Path, default=HERE / "out")
    args = ap.parse_args()
    q = args.quick
    benchlib.fill_defaults(args, runs=(5, 3), images=(3000, 600), batches=(8, 2),
                           warmup_batches=(6, 1), shuffle=(2048, 512))
    classes = 10
    per_class = max(1, args.images // classes)
    args.images = classes * per_class
    shards = 8 if q else 16
    args.out.mkdir(parents=True, exist_ok=True)
    log = Log()
    started = datetime.datetime.now(datetime.timezone.utc)
    load_start = os.getloadavg()[0]
    top_start = benchlib.top_processes()
    wanted = args.contenders or CONTENDERS + ["bare"]

    with log.section("setup"):
        have_mpl = ensure_matplotlib()
        peer_status = ensure_peers() if any(c in wanted for c in ("torch", "dali")) else {}
        exe = ensure_decoder(args.data_dir) if "bare" in wanted else "not requested"
    errors = {}
    pythons = {}
    for c in CONTENDERS:
        if c not in wanted:
            continue
        if c in ("torch", "dali"):
            if peer_status.get(c):
                errors[c] = peer_status[c]
                continue
            pythons[c] = peers_python()
        else:
            pythons[c] = Path(sys.executable)
    if not isinstance(exe, Path) and "bare" in wanted:
        errors["bare"] = exe

    with log.section("data"):
        data = prepare_data(args.data_dir, classes, per_class, shards)
    files = [str(Path(data["dir"]) / "shards" / f) for f in data["files"]]
    pack = Path(data["dir"]) / "jpegs.pack"

    with log.section("checks"):
        chk = checks(pythons, files, args.out, args.timeout)
    for c, r in chk.items():
        if "error" in r:
            errors[c] = r["error"]
            pythons.pop(c, None)

    versions = {"recordflow": rf.__version__ if hasattr(rf, "__version__") else "?"}
    import importlib.metadata as md
    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            versions["tfdata"] = f"{dist} {md.version(dist)}"
            break
        except md.PackageNotFoundError:
            pass
    for c, code in (("torch", "import torch, torchvision, tfrecord; print('torch', torch.__version__, '+ torchvision', torchvision.__version__, '+ tfrecord (pip)')"),
                    ("dali", "import nvidia.dali as d; print('nvidia-dali-cuda120', d.__version__)")):
        if c in pythons:
            versions[c] = run([pythons[c], "-c", code]).stdout.strip()
    for c, dist in (("spdl", "spdl"), ("grain", "grain"), ("ffcv", "ffcv")):
        if c in pythons:
            try:
                versions[c] = f"{dist} {md.version(dist)}"
            except md.PackageNotFoundError:
                pass
    versions["bare"] = "TurboJPEG API of Debian libturbojpeg 2.1, one thread per core, full decode to RGB"

    res = pipelines(pythons, files, exe if "bare" in wanted else None, pack, args, log)
    errors.update(res["errors"])
    summary = summarize(res["raw"], os.cpu_count())

    micro = {}
    if not args.no_micro and args.micro != []:
        micro = run_micro(args.out, q, args.micro, log)

    elapsed = time.perf_counter() - log.t0
    meta = {"date": started.strftime("%Y-%m-%d %H:%M UTC"),
            "command": "python bench/suite.py" + (" --quick" if q else "") +
                       "".join(f" {a}" for a in sys.argv[1:] if a != "--quick"),
            "elapsed_s": elapsed, "machine": benchlib.machine_info(),
            "cpu_flags": benchlib.cpu_flags(), "load_start": load_start,
            "load_end": os.getloadavg()[0], "top_start": top_start,
            "top_end": benchlib.top_processes(), "data": data, "shuffle": args.shuffle,
            "warmup_batches": args.warmup_batches, "batches": args.batches, "runs": args.runs,
            "versions": versions, "sections": log.sections}
    md, ratios = markdown(meta, summary, chk, errors, micro)
    (args.out / "suite.md").write_text(md)
    (args.out / "suite-docs.md").write_text(docs_section(md))
    (args.out / "suite.json").write_text(json.dumps(
        {"meta": meta, "summary": summary, "ratios": ratios, "raw": res["raw"], "errors": errors,
         "checks": chk, "micro": micro}, indent=1, default=str))
    if have_mpl:
        chart(summary, args.out / "suite.png",
              f"recordflow suite, {meta['date']}, {meta['machine']['cpu_model']}, "
              f"{os.cpu_count()} cores, {data['images']} JPEGs ~{data['mean_jpeg_bytes'] / 1e3:.0f} KB")
    print("\n" + md)
    print(f"wrote {args.out / 'suite.md'}, suite.json" + (", suite.png" if have_mpl else "") +
          f"; total {elapsed / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
