"""Helpers the benchmarks share: what machine and build a run was on, what else was running,
and rates printed the same way."""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

import recordflow as rf

HERE = Path(__file__).resolve().parent


def cpu_identity(unknown: str = "?") -> tuple[str, str, str]:
    """(model name, cpu family, model number) of the first CPU in /proc/cpuinfo; `unknown` for the
    name and "?" for the numbers when it does not say."""
    name, family, number = unknown, "?", "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            k, _, v = line.partition(":")
            k, v = k.strip(), v.strip()
            if k == "model name" and name == unknown:
                name = v
            elif k == "cpu family" and family == "?":
                family = v
            elif k == "model" and number == "?":
                number = v
    except OSError:
        pass
    return name, family, number


def mem_total_gib() -> float | None:
    """MemTotal from /proc/meminfo in GiB, None when it is not there."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return None


def machine_info() -> dict:
    model, family, mnum = cpu_identity("unknown")
    mem = mem_total_gib() or 0.0
    core = Path(rf._core.__file__)
    try:
        head = subprocess.run(["git", "-C", str(HERE), "log", "-1", "--format=%h %cI"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head = ""
    return {
        "recordflow_installed": datetime.datetime.fromtimestamp(
            core.stat().st_mtime, datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_head": head or "unknown",
        "cpu_model": model,
        "cpu_family": family,
        "cpu_model_number": mnum,
        "cores_online": os.cpu_count(),
        "mem_gib": round(mem, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "recordflow": getattr(rf, "__version__", "?"),
    }


@dataclass
class Contender:
    """One side of a timed comparison and its measurements, one entry per measured run."""

    name: str
    side: str  # "rf", "tf" (the peer candidates) or "info"
    fn: Callable[[], Any]
    iters: int = 1  # calls (or epochs) per run, calibrated in the warm-up
    wall: list[float] = field(default_factory=list)  # seconds per call
    cpu: list[float] = field(default_factory=list)
    faults: list[float] = field(default_factory=list)  # minor page faults per call

    def median_wall(self) -> float:
        return statistics.median(self.wall)

    def median_cpu(self) -> float:
        return statistics.median(self.cpu)


def timed_calls(c: Contender, keep: bool = False) -> tuple[list, float, float, float]:
    """c.fn() called c.iters times: (its results when ``keep``, else [], then wall seconds, CPU
    seconds and minor page faults, each per call)."""
    results = []
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(c.iters):
        if keep:
            results.append(c.fn())
        else:
            c.fn()  # dropped before the next call, as a training loop drops its batches
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    return results, wall / c.iters, cpu / c.iters, faults / c.iters


def measure(contenders: list[Contender], run_once: Callable[[Contender], tuple[float, float, float]],
            runs: int, warmup: int, min_time: float) -> None:
    """The timed comparison: a warm-up (unmeasured: traces TF's functions, lets AUTOTUNE settle,
    fills allocator caches) that calibrates each contender's iters so that a run lasts about
    min_time (short calls would otherwise be mostly noise), then `runs` measured runs of every
    contender in rotating order (nobody always goes first). run_once(c) runs c.iters calls and
    gives (wall seconds, CPU seconds, minor page faults), each per call; they are appended to
    c.wall, c.cpu and c.faults."""
    for c in contenders:
        for _ in range(max(1, warmup)):
            per_call, _, _ = run_once(c)
            c.iters = max(1, math.ceil(min_time / max(per_call, 1e-9)))
    n = len(contenders)
    for i in range(runs):
        for c in contenders[i % n:] + contenders[: i % n]:
            wall, cpu, faults = run_once(c)
            c.wall.append(wall)
            c.cpu.append(cpu)
            c.faults.append(faults)


def machine_sentence(info: dict, installed_detail: str = "") -> str:
    """The report's "Machine:" sentence from machine_info() (with TensorFlow's version in
    info["tensorflow"]); installed_detail follows the install path."""
    return (f"Machine: {info['cpu_model']} (family {info['cpu_family']}, model "
            f"{info['cpu_model_number']}), {info['cores_online']} cores, {info['mem_gib']} GiB, Linux "
            f"{info['kernel']}; recordflow {info['recordflow']}, TensorFlow {info['tensorflow']}, "
            f"NumPy {info['numpy']}, Python {info['python']}. recordflow as installed at "
            f"{info['recordflow_installed']}{installed_detail}; repository HEAD {info['git_head']}.")


def cpu_busy(cpu: int | None = None) -> float:
    """Seconds of CPU the machine (or one CPU) spent busy since boot, all processes, from
    /proc/stat (busy = user nice system irq softirq steal; idle and iowait are not)."""
    want = "cpu" if cpu is None else f"cpu{cpu}"
    for line in Path("/proc/stat").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == want:
            vals = [int(x) for x in parts[1:]]
            idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
            return (sum(vals[:8]) - idle) / os.sysconf("SC_CLK_TCK")
    return 0.0


def fill_defaults(args, **defaults: tuple) -> None:
    """Sets each option the command line left out (None) to its default: `name=(full, quick)`,
    the second under --quick (args.quick). A value given on the command line is kept."""
    for name, (full, quick) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)


def write_read_rates(rows: int, cores: int, ours: tuple[str, float, float],
                     peer: tuple[str, float, float], vs: str) -> dict:
    """Rows/s per core of writing and reading `rows` rows, each contender a (name, write
    seconds, read seconds), and ours over the peer (write_ratio_vs_<vs>, read_ratio_vs_<vs>)."""
    (a, w_a, r_a), (b, w_b, r_b) = ours, peer
    return {f"write_{a}_rows_per_s_per_core": rows / w_a / cores,
            f"write_{b}_rows_per_s_per_core": rows / w_b / cores,
            f"read_{a}_rows_per_s_per_core": rows / r_a / cores,
            f"read_{b}_rows_per_s_per_core": rows / r_b / cores,
            f"write_ratio_vs_{vs}": w_b / w_a, f"read_ratio_vs_{vs}": r_b / r_a}


def show_results(results: dict, json_path: str = "") -> None:
    """One line per result, floats with thousands separators, then a blank line; given a path,
    the results are written there as JSON too."""
    for k, v in results.items():
        print(f"{k:45s} {v:,.2f}" if isinstance(v, float) else f"{k:45s} {v}", flush=True)
    print(flush=True)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(results, f, indent=1)


def run_for_result(cmd, env: dict | None, timeout: float, tag: str) -> dict:
    """Runs `cmd` (a worker) and returns the JSON it printed on a stdout line `<tag> {...}`. A
    worker that times out, fails or prints no such line gives {"error": ...} with the last lines
    of its stderr (or stdout), which name the exception."""
    try:
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in r.stdout.splitlines():
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1:])
    err = (r.stderr or r.stdout).strip().splitlines() or ["(no output)"]
    return {"error": f"exit {r.returncode}: " + " | ".join(err[-6:])[-1500:]}


def run_child_json(script: str, child_args: list[str], cpu: int | None) -> dict:
    """Runs `script --child-json FILE child_args...` in a fresh interpreter, pinned to `cpu` when
    it is not None (taskset -c, or sched_setaffinity where taskset is missing), and returns the
    JSON the child wrote to FILE."""
    with tempfile.TemporaryDirectory() as tmp:
        out_json = Path(tmp) / "child.json"
        cmd = [sys.executable, str(Path(script).resolve()), "--child-json", str(out_json), *child_args]
        pre = None
        if cpu is not None:
            if shutil.which("taskset"):
                cmd = ["taskset", "-c", str(cpu)] + cmd
            else:
                pre = lambda: os.sched_setaffinity(0, {cpu})  # noqa: E731
        subprocess.run(cmd, check=True, preexec_fn=pre)
        return json.loads(out_json.read_text())


def top_processes(n: int = 4) -> list[str]:
    try:
        out = subprocess.run(["ps", "-eo", "pcpu,pid,comm", "--sort=-pcpu", "--no-headers"],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    own = os.getpid()
    rows = [l.split(None, 2) for l in out.splitlines() if l.strip()]
    return [f"{c} ({p}) {pc}%" for pc, p, c in rows if int(p) != own][:n]


def fmt_rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"


# ---------------------------------------------------------------------------- load on the machine
def cpu_busy_seconds() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat (all cores)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / tick, sum(fields[:8]) / tick


def cpu_flags(wanted=("sse4_2", "avx", "avx2", "avx512f", "avx512bw", "avx512vl", "bmi2",
                      "fma", "sha_ni", "vaes")) -> list[str]:
    """The SIMD-relevant flags of /proc/cpuinfo that this CPU has."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            have = set(line.split(":", 1)[1].split())
            return [f for f in wanted if f in have]
    return []


# ---------------------------------------------------------------------------- TF image pipelines
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def tf_decode_eval(tf, jpeg, size: int = 224, resize: int = 256):
    """tf.data's eval preprocessing of one JPEG: decode, shorter side to `resize` (bilinear,
    antialiased, as torchvision/Pillow), center crop `size`, normalize. float32 HWC."""
    img = tf.io.decode_jpeg(jpeg, channels=3)
    h, w = tf.shape(img)[0], tf.shape(img)[1]
    # torchvision's Resize(int): the shorter side becomes `resize` exactly, the longer one
    # int(resize * long / short).
    long_side = tf.cast(resize * tf.maximum(h, w) / tf.minimum(h, w), tf.int32)
    new_hw = tf.cond(h <= w, lambda: tf.stack([resize, long_side]),
                     lambda: tf.stack([long_side, resize]))
    img = tf.image.resize(img, new_hw, antialias=True)
    img = tf.image.resize_with_crop_or_pad(img, size, size)
    return (img / 255.0 - IMAGENET_MEAN) / IMAGENET_STD


def _tf_parse(tf, record):
    f = tf.io.parse_single_example(record, {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64)})
    return f["image/encoded"], f["image/class/label"]


def tf_imagenet_train_map(tf, size: int = 224):
    """A serialized Example -> (image, label) the way TensorFlow's ImageNet input pipelines do
    it (TF Model Garden): parse, sample_distorted_bounding_box on the JPEG's header shape
    (area 8-100%, aspect 3/4-4/3, 10 attempts), decode_and_crop_jpeg (decodes only the crop),
    bilinear resize to size x size (TF's default, not antialiased), random flip, normalize."""
    bbox = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, [1, 1, 4])

    def fn(record):
        jpeg, label = _tf_parse(tf, record)
        shape = tf.image.extract_jpeg_shape(jpeg)
        begin, crop, _ = tf.image.sample_distorted_bounding_box(
            shape, bounding_boxes=bbox, min_object_covered=0.1, aspect_ratio_range=(3 / 4, 4 / 3),
            area_range=(0.08, 1.0), max_attempts=10, use_image_if_no_bounding_boxes=True)
        oy, ox, _ = tf.unstack(begin)
        h, w, _ = tf.unstack(crop)
        img = tf.image.decode_and_crop_jpeg(jpeg, tf.stack([oy, ox, h, w]), channels=3)
        img = tf.image.resize(img, [size, size])
        img = tf.image.random_flip_left_right(img)
        return (img / 255.0 - IMAGENET_MEAN) / IMAGENET_STD, label

    return fn


def tf_imagenet_eval_map(tf, size: int = 224, resize: int = 256):
    """A serialized Example -> (image, label): tf_decode_eval of its JPEG."""
    def fn(record):
        jpeg, label = _tf_parse(tf, record)
        return tf.cast(tf_decode_eval(tf, jpeg, size, resize), tf.float32), label

    return fn
