"""rf.diagnose and `recordflow doctor`: does training wait on data, where, and what would help.

The doctor runs a pipeline in three phases and reports what it measured:

1. **Alone**: the pipeline as fast as it goes, for ``seconds``. Gives the ceiling (elements/s,
   batches/s), the time to the first element, and each stage's *utilization*: the fraction of
   its available time it was busy (native stages from the engine's own ``it.stats()``; Python
   map/filter stages timed per call by a wrapper the doctor puts around the callable). The stage
   closest to 100% is the slowest stage: it sets the ceiling.
2. **With the step** (``step_fn(batch)``, or ``step_seconds`` simulated by sleeping, which uses
   no CPU, like a step on an accelerator): the time each step waited for its batch and the time
   it computed. The fraction of time spent waiting decides the verdict: input-bound when it is
   at least 10%.
3. **Variants**: for the cause found, the pipeline is rebuilt with one change (an interleave
   added, a Python map made parallel or removed, a bigger prefetch) and timed briefly, so the
   expected gain of each recommendation is measured. Changes that cannot be tried in a few
   seconds (decode on a GPU, re-converting files) come with an estimate, marked as such.

docs/doctor.md explains the rules and how to read the report. Example::

    report = rf.diagnose(ds, step_seconds=0.05)
    print(report)                  # the terminal report
    report.to_dict()["cause"]      # {"id": "python_map", "stage": "python_map_0", ...}
    report.write_html("timeline.html")
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from recordflow import _core
from recordflow import dataset as _dataset
from recordflow.dataset import AUTOTUNE, Dataset

__all__ = ["diagnose", "Report", "main"]

# The rules' thresholds are the engine's (pipeline::kInputBoundWaitFraction, ...; docs/doctor.md).
_THRESHOLDS = _core.DOCTOR_THRESHOLDS
INPUT_BOUND_WAIT_FRACTION = _THRESHOLDS["input_bound_wait_fraction"]
HELPS_GAIN = _THRESHOLDS["helps_gain"]
KEEPS_UP_MARGIN = _THRESHOLDS["keeps_up_margin"]
READ_HEADROOM = _THRESHOLDS["read_headroom"]
_MAX_PREFETCH_BYTES = 1 << 30


def _cores() -> int:
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not Linux
        return max(os.cpu_count() or 1, 1)


# ------------------------------------------------------------------------ instrumentation
class _Timed:
    """Wraps a Python map/filter callable and adds up calls and seconds (thread-safe: a
    parallel map calls it from several threads)."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.calls = 0
        self.seconds = 0.0
        self._lock = threading.Lock()

    def __call__(self, x):
        t0 = time.perf_counter()
        try:
            return self.fn(x)
        finally:
            dt = time.perf_counter() - t0
            with self._lock:
                self.calls += 1
                self.seconds += dt


def _callable_name(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return name or type(fn).__name__


def _python_start(ops: tuple) -> int:
    """Index of the first transformation that runs in Python (len(ops) when none does)."""
    for i, op in enumerate(ops):
        if op[0] not in _dataset._NATIVE:
            return i
    return len(ops)


def _instrument(ds: Dataset) -> tuple[Dataset, list[dict]]:
    """The dataset with each Python map/filter callable wrapped in a _Timed, and a description
    of each Python-side stage (id, kind, name, parallelism, timer)."""
    ops = list(ds._stage_ops())
    start = _python_start(tuple(ops))
    python_stages = []
    counts: dict[str, int] = {}
    for i in range(start, len(ops)):
        op = ops[i]
        kind = op[0]
        k = counts.get(kind, 0)
        counts[kind] = k + 1
        stage = {"id": f"python_{kind}_{k}", "kind": f"python_{kind}", "op_index": i,
                 "timer": None, "parallelism": 1}
        if kind in ("map", "filter"):
            timer = _Timed(op[1])
            ops[i] = (kind, timer) + tuple(op[2:])
            stage["timer"] = timer
            stage["name"] = f"python {kind}({_callable_name(op[1])})"
            if kind == "map" and op[2] > 1:
                stage["parallelism"] = op[2]
        else:
            stage["name"] = f"python {kind}"
        python_stages.append(stage)
    return ds._with_ops(ops), python_stages


def _element_bytes(element: Any) -> int:
    if isinstance(element, np.ndarray):
        return element.nbytes
    if isinstance(element, (bytes, bytearray)):
        return len(element)
    if isinstance(element, Mapping):
        return sum(_element_bytes(v) for v in element.values())
    if isinstance(element, (list, tuple)):
        return sum(_element_bytes(v) for v in element)
    values = getattr(element, "values", None)  # rf.Ragged
    if isinstance(values, np.ndarray):
        return values.nbytes
    return 0


def _batch_size(ds: Dataset) -> int | None:
    sizes = [op[1] for op in ds._stage_ops() if op[0] == "batch"]
    return sizes[-1] if sizes else None


# ------------------------------------------------------------------------ measuring
def _run_alone(ds: Dataset, seconds: float) -> dict:
    """Iterates ``ds`` as fast as it goes for ``seconds`` after its first element."""
    inst, python_stages = _instrument(ds)
    t_start = time.perf_counter()
    it = inst.iterator()
    try:
        try:
            first = next(it)
        except StopIteration:
            raise ValueError("the dataset yields no elements: nothing to diagnose") from None
        t_first = time.perf_counter()
        # Start-up (building the pipeline, opening files) is not the consumer's steady work:
        # its share is measured from here on.
        wait_at_first = it.stats()["consumer_wait_seconds"]
        python_at_first = sum(st["timer"].seconds / st["parallelism"]
                              for st in python_stages if st["timer"] is not None)
        n = 0
        exhausted = False
        while time.perf_counter() - t_first < seconds:
            try:
                next(it)
            except StopIteration:
                exhausted = True
                break
            n += 1
        t_end = time.perf_counter()
        stats = it.stats()
    finally:
        it.close()
    elapsed = t_end - t_first
    rate = n / elapsed if n > 0 and elapsed > 0 else 1.0 / max(t_first - t_start, 1e-9)
    return {"time_to_first_element_s": t_first - t_start, "elements": n + 1,
            "seconds": t_end - t_start, "elements_per_s": rate, "exhausted": exhausted,
            "stats": stats, "python_stages": python_stages, "steady_seconds": elapsed,
            "steady_elements": n, "steady_wait_seconds": stats["consumer_wait_seconds"] - wait_at_first,
            "steady_python_seconds": sum(st["timer"].seconds / st["parallelism"]
                                         for st in python_stages if st["timer"] is not None)
                                     - python_at_first,
            "element_bytes": _element_bytes(first)}


def _run_with_step(ds: Dataset, step: Callable[[Any], Any], seconds: float) -> dict:
    """Iterates ``ds`` and calls ``step`` on each element for ``seconds``; times each step's
    wait for its element and its compute. The first element (start-up) is left out."""
    it = ds._with_ops(ds._stage_ops()).iterator()  # a copy: the user's ds.stats() stays theirs
    waits: list[float] = []
    computes: list[float] = []
    try:
        t_start = time.perf_counter()
        try:
            first = next(it)
        except StopIteration:
            raise ValueError("the dataset yields no elements: nothing to diagnose") from None
        step(first)
        t_first = time.perf_counter()
        exhausted = False
        while time.perf_counter() - t_first < seconds:
            a = time.perf_counter()
            try:
                element = next(it)
            except StopIteration:
                exhausted = True
                break
            b = time.perf_counter()
            step(element)
            c = time.perf_counter()
            waits.append(b - a)
            computes.append(c - b)
        stats = it.stats()
    finally:
        it.close()
    wait, compute = sum(waits), sum(computes)
    total = wait + compute
    return {"steps": len(waits), "wait_s": wait, "compute_s": compute,
            "wait_fraction": wait / total if total > 0 else 0.0,
            "steps_per_s": len(waits) / total if total > 0 else 0.0,
            "mean_wait_ms": 1e3 * wait / max(len(waits), 1),
            "mean_compute_ms": 1e3 * compute / max(len(waits), 1),
            "max_compute_ms": 1e3 * max(computes, default=0.0),
            "startup_s": t_first - t_start, "exhausted": exhausted, "stats": stats,
            "waits": waits, "computes": computes}


def _stages(run: dict) -> list[dict]:
    """Per-stage figures of an alone run: native stages from it.stats(), Python stages from
    the timers, and the Python consumer's own time (conversion, the loop)."""
    stats = run["stats"]
    wall = max(stats["wall_seconds"], 1e-9)
    native_ids = ["read", "process", "prefetch"]
    out = []
    for i, s in enumerate(stats["stages"]):
        sid = native_ids[i] if i < len(native_ids) else f"native_{i}"
        parallel = max(int(s["parallelism"]), 1)
        util = None
        if sid == "read":
            util = s["busy_seconds"] / wall  # one producer thread pulls the record stream
        elif sid == "process":
            util = s["busy_seconds"] / (wall * parallel)
        out.append({"id": sid, "kind": "native", "name": s["name"],
                    "elements": int(s["elements"]), "busy_seconds": s["busy_seconds"],
                    "wait_output_seconds": s["wait_output_seconds"],
                    "parallelism": int(s["parallelism"]), "buffer_size": int(s["buffer_size"]),
                    "buffer_fill": s["buffer_fill"] if sid == "prefetch" else None,
                    "utilization": util, "seconds_per_element": None})
    py_wall = max(run["seconds"], 1e-9)
    python_busy = 0.0
    for st in run["python_stages"]:
        timer = st["timer"]
        entry = {"id": st["id"], "kind": st["kind"], "name": st["name"], "elements": 0,
                 "busy_seconds": None, "wait_output_seconds": None,
                 "parallelism": st["parallelism"], "buffer_size": None, "buffer_fill": None,
                 "utilization": None, "seconds_per_element": None}
        if timer is not None:
            entry["elements"] = timer.calls
            entry["busy_seconds"] = timer.seconds
            entry["seconds_per_element"] = timer.seconds / timer.calls if timer.calls else None
            # A parallel map's threads share the GIL; sleeping or native code inside the callable
            # does run in parallel, so its capacity is its thread count.
            entry["utilization"] = timer.seconds / (py_wall * st["parallelism"])
            python_busy += timer.seconds / st["parallelism"]
        out.append(entry)
    # What the consuming thread did besides waiting for the engine and running Python stages:
    # turning engine elements into NumPy/dicts and the loop itself.
    # Measured after the first element, so that start-up is not counted as its work.
    steady = max(run["steady_seconds"], 1e-9)
    consumer = max(0.0, steady - run["steady_wait_seconds"] - run["steady_python_seconds"])
    out.append({"id": "python_consumer", "kind": "python_consumer",
                "name": "Python consumer (element conversion, the loop)",
                "elements": run["steady_elements"], "busy_seconds": consumer,
                "wait_output_seconds": None, "parallelism": 1, "buffer_size": None,
                "buffer_fill": None, "utilization": consumer / steady,
                "seconds_per_element": consumer / max(run["steady_elements"], 1)})
    return out


def _read_alone_rate(ds: Dataset, seconds: float) -> float | None:
    """Records/s of ``ds``'s record stream alone (its transformations before the first parse,
    map, filter or batch), batched natively so the consumer is not the limit."""
    ops = list(ds._stage_ops())
    stream = []
    for op in ops:
        if op[0] in ("parse", "native_map", "map", "filter", "batch", "prefetch"):
            break
        stream.append(op)
    stream.append(("batch", 256, False))
    try:
        return _run_alone(ds._with_ops(stream), seconds)["elements_per_s"] * 256
    except Exception:  # the check is advisory; the utilizations still stand
        return None


def _free_gain(stages: list[dict], stage_id: str, records_per_s: float | None = None) -> float:
    """Estimated speed-up if stage ``stage_id`` cost nothing (pipeline::FreeGain): an upper
    bound, capped at 10x."""
    return _core.doctor_free_gain(stages, stage_id, records_per_s)


# ------------------------------------------------------------------------ variants
def _insert_interleave(ds: Dataset, cycle: int) -> Dataset:
    ops = list(ds._stage_ops())
    i = 0
    while i < len(ops) and ops[i][0] == "shard":  # a file-level shard stays first
        i += 1
    ops.insert(i, ("interleave", cycle, 1, AUTOTUNE, True))
    return ds._with_ops(ops)


def _replace_op(ds: Dataset, index: int, op: tuple | None) -> Dataset:
    ops = list(ds._stage_ops())
    if op is None:
        del ops[index]
    else:
        ops[index] = op
    return ds._with_ops(ops)


def _with_prefetch(ds: Dataset, n: int) -> Dataset:
    """``ds`` with its engine-side prefetch set to ``n`` (added when it has none). A prefetch
    after a Python callable does nothing (Python stages run on the consuming thread), so the
    one that counts is the last native one."""
    ops = list(ds._stage_ops())
    start = _python_start(tuple(ops))
    native_prefetch = [i for i in range(start) if ops[i][0] == "prefetch"]
    if native_prefetch:
        ops[native_prefetch[-1]] = ("prefetch", n)
    else:
        ops.insert(start, ("prefetch", n))
    return ds._with_ops(ops)


def _prefetch_setting(ds: Dataset) -> int | None:
    ops = ds._stage_ops()
    start = _python_start(ops)
    found = [op[1] for op in ops[:start] if op[0] == "prefetch"]
    return found[-1] if found else None


def _vision_target(op: tuple) -> int | None:
    """The shorter side a pre-resize at conversion should keep for a vision preset map."""
    desc = repr(op[1])
    m = re.search(r"imagenet_eval\((\d+), (\d+)\)", desc)
    if m:
        return int(m.group(2))
    m = re.search(r"imagenet_train\((\d+)\)", desc)
    if m:
        return round(int(m.group(1)) * 256 / 224)
    return None


def _image_sizes(ds: Dataset, key: str = "image/encoded", samples: int = 16) -> list | None:
    """(width, height) of the first images of the first file (headers only)."""
    from recordflow import Example, RecordReader, probe_image
    paths = ds._source_paths()
    if not paths:
        return None
    pixels = []
    try:
        for record in RecordReader(paths[0], ds._source_compression()):
            image = Example.parse(record).get(key)
            if isinstance(image, list):
                image = image[0] if image else None
            if isinstance(image, (bytes, bytearray)):
                info = probe_image(bytes(image))
                pixels.append((info["width"], info["height"]))
            if len(pixels) >= samples:
                break
    except Exception:  # an estimate only: never fail the report over it
        return None
    if not pixels:
        return None
    return pixels


def _sample_pipeline(ds: Dataset, paths: list[str], compression: str | None) -> Dataset:
    """``ds``'s transformations over the sample files ``paths``: a file-level shard is dropped
    (it would empty a one-file sample) and a repeat added when there is none, so that the
    sample runs as long as the timing needs."""
    ops = list(ds._stage_ops())
    while ops and ops[0][0] == "shard":
        ops.pop(0)
    if not any(op[0] == "repeat" for op in ops):
        ops.insert(0, ("repeat", -1))
    return ds._with_ops(ops)._with_source_files(paths, compression)


# Shards of about this size: large enough that opening a file and restarting its read-ahead
# are a small share of reading it, small enough to spread over readers and hosts.
RESHARD_TARGET_BYTES = _core.DOCTOR_RESHARD_TARGET_BYTES


def reshard_command(paths: list[str], total_bytes: float, compression: str | None = None) -> tuple[str, int]:
    """The `recordflow reshard` command that rewrites ``paths`` (``total_bytes`` of output) into
    shards of about RESHARD_TARGET_BYTES, and the shard count N it computed
    (pipeline::ReshardCommand)."""
    return _core.doctor_reshard_command(list(paths), float(total_bytes), compression or "")


def _file_layout_variants(ds: Dataset, paths: list[str], compressed: bool, seconds: float,
                          sid: str, log) -> list[dict]:
    """Measures, on a sample of the files rewritten in a temporary directory, what storing
    them uncompressed and storing them as one larger file would change. Both variants and
    their baseline run the same transformations on the same records."""
    import tempfile
    from recordflow import RecordReader, RecordWriter
    recs: list[dict] = []
    many = len(paths) > 1
    if not (compressed or many):
        return recs
    sizes = [os.path.getsize(p) for p in paths if os.path.exists(p)]
    mean = sum(sizes) / max(len(sizes), 1)
    small = many and mean < 32 << 20
    if not (compressed or small):
        return recs
    total_bytes = float(sum(sizes))
    keep = "GZIP" if compressed else None
    if seconds <= 0:  # try_variants=False: the rules' advice, without numbers
        if compressed:
            # Without a sample the inflated size is unknown: at least the compressed size.
            cmd, _ = reshard_command(paths, total_bytes)
            recs.append(_Rec.make("uncompressed_files", sid,
                                  f"store the records uncompressed: {cmd}",
                                  "Compressed TFRecords cost an inflate of every byte.",
                                  command=cmd))
        if small:
            cmd, n = reshard_command(paths, total_bytes, keep)
            recs.append(_Rec.make("fewer_larger_files", sid,
                                  f"fewer, larger files (now {len(paths)} of {mean / 2**20:.1f} MiB; "
                                  f"{n} of about {total_bytes / n / 2**20:.0f} MiB): {cmd}",
                                  "Each file costs an open and a read-ahead restart.",
                                  command=cmd))
        return recs
    compression = ds._source_compression()
    out_compression = "GZIP" if compressed else ""
    sample, records, total, sample_file_bytes = [], [], 0, 0
    try:
        for path in paths[:16]:
            file_records = list(RecordReader(path, compression))
            sample.append(path)
            records.append(file_records)
            total += sum(len(r) for r in file_records)
            sample_file_bytes += os.path.getsize(path)
            if total > 32 << 20:
                break
    except Exception as e:  # an unreadable file fails the baseline too; report, don't crash
        return [_Rec.make("uncompressed_files" if compressed else "fewer_larger_files", sid,
                          "rewrite the files", "", error=f"{error_name(e)}: {e}")]
    with tempfile.TemporaryDirectory(prefix="rf-doctor-") as tmp:
        log(f"trying file layouts on a sample of {len(sample)} file(s), {total / 2**20:.1f} MiB ...")
        try:
            base = _run_alone(_sample_pipeline(ds, sample, compression), seconds)["elements_per_s"]
        except Exception as e:
            return [_Rec.make("uncompressed_files" if compressed else "fewer_larger_files", sid,
                              "rewrite the files", "", error=f"{error_name(e)}: {e}")]
        detail_tail = (f" Measured on a sample ({len(sample)} file(s), {total / 2**20:.1f} MiB of "
                       "records) rewritten that way, against the same sample as it is.")
        # Uncompressed size of all the files, from the sample's ratio (framing: 16 bytes/record).
        framed = total + 16 * sum(len(r) for r in records)
        plain_bytes = total_bytes * framed / max(sample_file_bytes, 1)
        if compressed:
            plain = []
            for i, file_records in enumerate(records):
                path = os.path.join(tmp, f"plain-{i:05d}.tfrecord")
                with RecordWriter(path) as w:
                    for r in file_records:
                        w.write(r)
                plain.append(path)
            cmd, _ = reshard_command(paths, plain_bytes)
            recs.append(_measure_alone(
                "uncompressed", _sample_pipeline(ds, plain, ""), base, seconds,
                "uncompressed_files", sid,
                f"store the records uncompressed: {cmd}",
                "Compressed TFRecords cost an inflate of every byte on the reading thread."
                + detail_tail, log, command=cmd))
        if small:
            path = os.path.join(tmp, "joined.tfrecord" + (".gz" if compressed else ""))
            with RecordWriter(path, compression=out_compression or None) as w:
                for file_records in records:
                    for r in file_records:
                        w.write(r)
            cmd, n = reshard_command(paths, total_bytes, keep)
            recs.append(_measure_alone(
                "fewer_larger", _sample_pipeline(ds, [path], out_compression), base, seconds,
                "fewer_larger_files", sid,
                f"fewer, larger files (now {len(paths)} files of {mean / 2**20:.1f} MiB on average; "
                f"{n} of about {total_bytes / n / 2**20:.0f} MiB): {cmd}",
                "Each file costs an open, a read-ahead restart and (compressed) a new inflater. "
                "recordflow reshard copies the records unchanged (CRC-checked), with .idx files."
                + detail_tail, log, command=cmd))
    return recs


def _cache_variant(ds: Dataset, paths: list[str], stages: list[dict], seconds: float, sid: str,
                   log) -> dict:
    """.cache() before the first repeat, measured on a sample of the files (the first epoch
    of a sample is short, so the timing sees mostly cached epochs)."""
    title = "cache the records after the first epoch: .cache() before .repeat() (or .cache(path))"
    total = sum(os.path.getsize(p) for p in paths if os.path.exists(p))
    detail = (f"Later epochs then skip reading (and inflating); the files hold {total / 2**20:.0f} "
              "MiB (compressed size), which .cache() keeps in memory and .cache(path) on a local disk.")
    if seconds <= 0 or not paths:
        return _Rec.make("cache", sid, title, detail)
    sample, size = [], 0
    for p in paths[:16]:
        sample.append(p)
        size += os.path.getsize(p) if os.path.exists(p) else 0
        if size > 16 << 20:
            break
    compression = ds._source_compression()
    base_ds = _sample_pipeline(ds, sample, compression)
    ops = list(base_ds._stage_ops())
    first_repeat = next(i for i, op in enumerate(ops) if op[0] == "repeat")
    ops.insert(first_repeat, ("cache", ""))
    log(f"trying: .cache() on a sample of {len(sample)} file(s) ...")
    try:
        base = _run_alone(base_ds, seconds)["elements_per_s"]
    except Exception as e:
        return _Rec.make("cache", sid, title, detail, error=f"{error_name(e)}: {e}")
    rec = _measure_alone("cache", base_ds._with_ops(ops), base, seconds, "cache", sid, title,
                         detail + f" Measured on a sample of {len(sample)} file(s) against the "
                         "same sample uncached.", lambda m: None)
    return rec


def _pre_resize_variant(ds: Dataset, target: int, seconds: float, sid: str, title: str,
                        detail: str, log, key: str = "image/encoded") -> dict | None:
    """Measures pre-resizing on a sample: up to 128 records re-encoded with the shorter side at
    ``target`` (as convert --resize-shorter does: resize, JPEG quality 95), against the same
    records as they are, both uncompressed in one file. None when it cannot be tried."""
    import tempfile
    from recordflow import Example, RecordReader, RecordWriter, encode_jpeg, vision
    paths = ds._source_paths()
    if not paths or seconds <= 0:
        return None
    original, resized = [], []
    try:
        for path in paths:
            for record in RecordReader(path, ds._source_compression()):
                features = Example.parse(record)
                image = features.get(key)
                if not isinstance(image, list) or not image:
                    return None
                pixels = vision.decode_image(image[0])
                h, w = pixels.shape[:2]
                if min(h, w) > target:
                    nh, nw = round(h * target / min(h, w)), round(w * target / min(h, w))
                    pixels = vision.resize(pixels, (nh, nw))
                    features[key] = [encode_jpeg(np.ascontiguousarray(pixels), 95)]
                    if "image/height" in features:
                        features["image/height"] = [nh]
                    if "image/width" in features:
                        features["image/width"] = [nw]
                original.append(record)
                resized.append(Example(features).serialize())
                if len(original) >= 128:
                    break
            if len(original) >= 128:
                break
    except Exception:  # not images this code can rewrite: fall back to the estimate
        return None
    with tempfile.TemporaryDirectory(prefix="rf-doctor-") as tmp:
        files = []
        for name, records in (("original", original), ("resized", resized)):
            path = os.path.join(tmp, f"{name}.tfrecord")
            with RecordWriter(path) as w:
                for r in records:
                    w.write(r)
            files.append(path)
        log(f"trying: pre-resized images on a sample of {len(original)} records ...")
        try:
            base = _run_alone(_sample_pipeline(ds, files[:1], ""), seconds)["elements_per_s"]
        except Exception as e:
            return _Rec.make("pre_resize", sid, title, detail, error=f"{error_name(e)}: {e}")
        return _measure_alone("pre_resize", _sample_pipeline(ds, files[1:], ""), base, seconds,
                              "pre_resize", sid, title,
                              detail + f" Measured on a sample of {len(original)} records "
                              "re-encoded that way, against the same records as they are.",
                              lambda m: None)


class _Rec:
    """Builds one recommendation entry."""

    @staticmethod
    def make(rid: str, stage: str | None, title: str, detail: str, *, gain: float | None = None,
             measured: bool = False, metric: str | None = None, baseline: float | None = None,
             variant: float | None = None, error: str | None = None,
             command: str | None = None) -> dict:
        return {"id": rid, "stage": stage, "title": title, "detail": detail,
                "gain": None if gain is None else round(gain, 3), "measured": measured,
                "helps": None if gain is None or not measured else gain >= HELPS_GAIN,
                "metric": metric, "baseline": baseline, "variant": variant, "error": error,
                "command": command}


def _measure_alone(label: str, variant: Dataset, baseline_rate: float, seconds: float,
                   rid: str, stage: str, title: str, detail: str, log,
                   command: str | None = None) -> dict:
    if seconds <= 0:  # try_variants=False: the rule's advice, without a number
        return _Rec.make(rid, stage, title, detail, command=command)
    log(f"trying: {title} ...")
    try:
        r = _run_alone(variant, seconds)
    except Exception as e:  # a variant that fails is reported, never fatal
        return _Rec.make(rid, stage, title, detail, error=f"{error_name(e)}: {e}",
                         command=command)
    gain = r["elements_per_s"] / max(baseline_rate, 1e-9)
    return _Rec.make(rid, stage, title, detail, gain=gain, measured=True,
                     metric="elements_per_s", baseline=baseline_rate,
                     variant=r["elements_per_s"], command=command)


_IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n")


def _first_value(v: Any) -> Any:
    """A value of a feature, or of its first row when batched."""
    while isinstance(v, (list, tuple)) or (isinstance(v, np.ndarray) and v.dtype == object):
        if len(v) == 0:
            return None
        v = v[0]
    return v


def _features_of(x: Any) -> dict | None:
    """The features an element carries: a parsed dict as it is, a serialized Example (or a
    batch of them) parsed; None for anything else."""
    from recordflow import Example
    if isinstance(x, dict):
        return x
    record = _first_value(x) if isinstance(x, (list, tuple)) else x
    if isinstance(record, (bytes, bytearray, memoryview)):
        try:
            return Example.parse(bytes(record))
        except Exception:
            return None
    return None


def _square_image(y: Any) -> np.ndarray | None:
    """An HxWx3 (or NxHxWx3) array with H == W in a map's output, or None."""
    values = y.values() if isinstance(y, dict) else (y if isinstance(y, (list, tuple)) else [y])
    for v in values:
        if isinstance(v, np.ndarray) and v.ndim in (3, 4) and v.shape[-1] == 3 and v.shape[-2] == v.shape[-3]:
            return v
    return None


def _native_replacement(ds: Dataset, op_index: int) -> dict | None:
    """The native op that does what the Python map at ``op_index`` does, found by running it
    on the pipeline's first element: a decode + square resize of an encoded image becomes a
    rf.vision preset (train when two calls on the same element differ: random crops, eval
    otherwise); a function from serialized Examples to some of their features becomes .parse.
    None when the map is neither (the doctor then does not offer a native op)."""
    ops = ds._stage_ops()
    fn = ops[op_index][1]
    try:
        it = iter(ds._with_ops(ops[:op_index]))
        try:
            x = next(it)
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()
        y1, y2 = fn(x), fn(x)
    except Exception:
        return None
    features = _features_of(x)
    if not features:
        return None
    image_keys = [k for k, v in features.items()
                  if isinstance(_first_value(v), (bytes, bytearray))
                  and bytes(_first_value(v)[:8]).startswith(_IMAGE_MAGIC)]
    out1 = _square_image(y1)
    if image_keys and out1 is not None:
        size = int(out1.shape[-2])
        out2 = _square_image(y2)
        random = out2 is None or out1.shape != out2.shape or not np.array_equal(out1, out2)
        args = [f"size={size}"]
        if image_keys[0] != "image/encoded":
            args.append(f"image_key={image_keys[0]!r}")
        labels = [k for k in features if "label" in k.lower()]
        if labels and labels[0] != "image/class/label":
            args.append(f"label_key={labels[0]!r}")
        preset = "imagenet_train" if random else "imagenet_eval"
        return {"op": f"rf.vision.{preset}({', '.join(args)})", "preset": preset, "size": size,
                "image_key": image_keys[0], "label_key": labels[0] if labels else None,
                "replaces_input": not isinstance(x, dict)}
    raw = not isinstance(x, dict)
    if raw and isinstance(y1, dict) and y1 and set(y1) <= set(features):
        keys = ", ".join(repr(k) for k in y1)
        return {"op": f".parse({{{keys}: ...}})", "preset": None, "keys": list(y1),
                "replaces_input": True}
    return None


def _recommend(ds: Dataset, cause: dict, stages: list[dict], alone: dict, step,
               step_run: dict | None, variant_seconds: float, log) -> list[dict]:
    ops = ds._stage_ops()
    start = _python_start(ops)
    cores = _cores()
    base = alone["elements_per_s"]
    records_rate = base * (_batch_size(ds) or 1)
    recs: list[dict] = []
    sid = cause["stage"]
    kind = cause["id"]

    if kind == "python_map":
        op_index = next(s for s in _instrument(ds)[1] if s["id"] == sid)["op_index"]
        op = ops[op_index]
        later_callables = any(o[0] in ("map", "filter") for o in ops[op_index + 1:])
        if op[2] <= 1 or op[2] == AUTOTUNE:
            n = max(4, cores)
            recs.append(_measure_alone(
                "parallel", _replace_op(ds, op_index, ("map", op[1], n)), base, variant_seconds,
                "python_map_parallel", sid, f"run the Python map on threads: .map(fn, num_parallel={n})",
                "A Python map runs on the consuming thread; with num_parallel it runs on a thread "
                "pool. Helps when fn sleeps, does I/O or calls code that releases the GIL "
                "(NumPy, PIL, recordflow ops); pure-Python work stays serial under the GIL.", log))
        # Offered only with the native op that does the map's work: advice to "use a native
        # op" without naming one cannot be followed.
        native = _native_replacement(ds, op_index)
        if native is not None:
            title = f"replace the Python map with the native op: .map({native['op']})"
            detail = ("Native ops run in C++ on the pipeline's threads, off the GIL. The doctor "
                      "ran the map on the pipeline's first element: "
                      + ("it decodes an image and resizes it to a square"
                         f" ({native['size']}x{native['size']}), "
                         + ("differently on each call (random crops), which the train preset does"
                            if native["preset"] == "imagenet_train" else
                            "the same on each call, which the eval preset does")
                         if native["preset"] else "it picks features of the Example, which "
                         ".parse does")
                      + ". The gain shown is the pipeline with this map removed: the upper bound "
                      "the native op can reach.")
            rec_args = dict(command=f".map({native['op']})")
            if later_callables:
                rec = _Rec.make("python_map_native", sid, title, detail,
                                gain=_free_gain(stages, sid, records_rate), measured=False,
                                **rec_args)
            else:
                rec = _measure_alone("native", _replace_op(ds, op_index, None), base,
                                     variant_seconds, "python_map_native", sid, title, detail, log,
                                     **rec_args)
            rec["native_op"] = native["op"]
            recs.append(rec)
        if any(o[0] == "batch" for o in ops[op_index + 1:]) and not any(o[0] == "batch" for o in ops[:op_index]):
            recs.append(_Rec.make(
                "python_map_after_batch", sid, "batch before the Python map and vectorize it",
                "A batch after a Python callable is built in Python, one element at a time; a "
                "native batch first gives the map whole NumPy columns (one call per batch).",
                gain=None, measured=False))
    elif kind == "python_filter":
        recs.append(_Rec.make(
            "python_filter_native", sid, "filter at conversion time, or on batches in a map",
            "A Python filter runs per element on the consuming thread.",
            gain=_free_gain(stages, sid, records_rate), measured=False))
    elif kind == "python_consumer":
        if _batch_size(ds) is None:
            recs.append(_Rec.make(
                "batch_natively", sid, "batch in the engine (.batch(n) before any Python stage)",
                "Each element crosses into Python separately; batches cross once per batch.",
                gain=None, measured=False))
        else:
            recs.append(_Rec.make(
                "fewer_python_elements", sid, "larger batches, or fewer Python stages",
                "The consuming thread's per-element work (conversion to NumPy, the loop) sets the pace.",
                gain=None, measured=False))
    elif kind == "read":
        paths = ds._source_paths() or []
        interleaves = [i for i in range(start) if ops[i][0] == "interleave"]
        compressed = ds._source_compression() not in (None, "") or any(
            p.endswith((".gz", ".gzip", ".zz", ".zlib")) for p in paths)
        if len(paths) > 1 and not interleaves:
            cycle = min(len(paths), max(cores, 4))
            recs.append(_measure_alone(
                "interleave", _insert_interleave(ds, cycle), base, variant_seconds,
                "parallel_reads", sid,
                f"read files in parallel: .interleave(cycle_length={cycle}) after from_files",
                "Without interleave one thread reads (and inflates, for GZIP/ZLIB) the files one "
                "at a time; interleave reads several on the thread pool.", log))
        elif interleaves:
            i = interleaves[-1]
            op = ops[i]
            cycle = min(max(len(paths), 1), max(2 * op[1] if op[1] > 0 else cores, cores))
            if op[1] != AUTOTUNE and (op[1] < cycle or (op[3] != AUTOTUNE and op[3] < cores)):
                recs.append(_measure_alone(
                    "interleave", _replace_op(ds, i, ("interleave", cycle, op[2], AUTOTUNE, op[4])),
                    base, variant_seconds, "parallel_reads", sid,
                    f"more parallel reads: .interleave(cycle_length={cycle}, num_parallel=rf.AUTOTUNE)",
                    "The interleave reads fewer files at once than the machine can inflate/read.", log))
        recs += _file_layout_variants(ds, paths, compressed, variant_seconds, sid, log)
        if any(o[0] == "repeat" for o in ops) and not any(o[0] == "cache" for o in ops):
            recs.append(_cache_variant(ds, paths, stages, variant_seconds, sid, log))
    elif kind == "process":
        maps = [i for i in range(start) if ops[i][0] == "native_map"]
        for i in maps:
            op = ops[i]
            if op[2] != AUTOTUNE and op[2] < cores:
                recs.append(_measure_alone(
                    "map_parallel", _replace_op(ds, i, ("native_map", op[1], AUTOTUNE)), base,
                    variant_seconds, "map_parallel", sid,
                    "more parallel map work: .map(op, num_parallel=rf.AUTOTUNE)",
                    f"The native map runs on {op[2]} thread(s) of {cores} cores.", log))
        vision = [ops[i] for i in maps if _vision_target(ops[i]) is not None]
        if vision:
            upper = _free_gain(stages, sid, records_rate)
            recs.append(_Rec.make(
                "decode_on_gpu", sid, "decode JPEGs on the GPU (nvJPEG, e.g. DALI's mixed decoder)",
                "Decode + crop + resize is the pipeline's work; on a GPU it leaves the CPU. "
                "Estimated gain: the pipeline if this stage cost nothing (upper bound).",
                gain=upper, measured=False))
            target = _vision_target(vision[0])
            dims = _image_sizes(ds)
            if dims:
                now = np.mean([w * h for w, h in dims])
                after = np.mean([w * h * (target / min(w, h)) ** 2 if min(w, h) > target else w * h
                                 for w, h in dims])
                ratio = float(now / max(after, 1.0))
                if ratio > 1.3:
                    title = f"pre-resize at conversion: recordflow convert --resize-shorter {target}"
                    detail = (f"The images average {np.mean([w for w, _ in dims]):.0f}x"
                              f"{np.mean([h for _, h in dims]):.0f} px, {ratio:.1f}x the pixels "
                              "they would have after the resize; decode cost grows with pixels.")
                    measured = _pre_resize_variant(ds, target, variant_seconds, sid, title,
                                                   detail, log)
                    recs.append(measured or _Rec.make(
                        "pre_resize", sid, title,
                        detail + " Estimated gain: the smaller of that ratio and the stage's "
                        "upper bound (DCT-scaled decoding already wins part of it).",
                        gain=min(ratio, upper), measured=False))
        if not maps:
            recs.append(_Rec.make(
                "parse_fewer_features", sid, "parse only the features you use",
                "Parsing is the busiest stage; each key in the spec costs a column.",
                gain=None, measured=False))
    elif kind == "prefetch":
        element = max(alone["element_bytes"], 1)
        n = int(min(64, max(8, _MAX_PREFETCH_BYTES // element)))
        current = _prefetch_setting(ds)
        if variant_seconds <= 0:
            return [_Rec.make("bigger_prefetch", sid, f"a bigger prefetch buffer: .prefetch({n})",
                              "The buffer is too small to absorb the step's bursts.")]
        log(f"trying: prefetch({n}) with the step ...")
        title = f"a bigger prefetch buffer: .prefetch({n}) (or .prefetch() to autotune)"
        detail = (f"The pipeline keeps up on average ({cause.get('ceiling_over_demand', 0):.1f}x the "
                  "step's rate) but its buffer "
                  + (f"(prefetch({current})) " if current not in (None, AUTOTUNE) else "")
                  + "is too small to absorb the step's bursts; a bigger one lets it work ahead "
                  "during long steps.")
        try:
            r = _run_with_step(_with_prefetch(ds, n), step, variant_seconds)
            gain = r["steps_per_s"] / max(step_run["steps_per_s"], 1e-9)
            rec = _Rec.make("bigger_prefetch", sid, title, detail, gain=gain, measured=True,
                            metric="steps_per_s", baseline=step_run["steps_per_s"],
                            variant=r["steps_per_s"])
            rec["wait_fraction_before"] = step_run["wait_fraction"]
            rec["wait_fraction_after"] = r["wait_fraction"]
            recs.append(rec)
        except Exception as e:
            recs.append(_Rec.make("bigger_prefetch", sid, title, detail,
                                  error=f"{error_name(e)}: {e}"))
    return recs


# ------------------------------------------------------------------------ the report
class Report:
    """What rf.diagnose measured and concluded. ``str(report)``: the terminal report;
    :meth:`to_dict`: the same as plain data (``--json``); :meth:`write_html`: a timeline of
    per-step wait vs compute."""

    def __init__(self, data: dict, timeline: list[tuple[float, float]]):
        self._data = data
        self._timeline = timeline

    def to_dict(self) -> dict:
        """The report as JSON-serializable data (see docs/doctor.md for the fields)."""
        return json.loads(json.dumps(self._data))

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    @property
    def timeline(self) -> list[tuple[float, float]]:
        """(wait_seconds, compute_seconds) of each measured step (empty without a step)."""
        return list(self._timeline)

    def __str__(self) -> str:
        return _render_text(self._data)

    def __repr__(self) -> str:
        cause = self._data["cause"]
        return f"<rf.doctor.Report verdict={self._data['verdict']!r} cause={cause['id']!r}>"

    def write_html(self, path: str) -> None:
        """Writes a self-contained HTML page: the report and a per-step wait/compute timeline."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(_render_html(self._data, self._timeline))


def _render_text(d: dict) -> str:
    """The terminal report (pipeline::RenderText, the one `recordflow doctor` prints)."""
    return _core.doctor_render_text(d)


def _render_html(d: dict, timeline: list[tuple[float, float]]) -> str:
    """The HTML page (pipeline::RenderHtml): verdict, what would help, the per-step timeline,
    the stages, the text and this report's JSON."""
    return _core.doctor_render_html(d, [w for w, _ in timeline], [c for _, c in timeline],
                                    json.dumps(d, indent=2))


# ------------------------------------------------------------------------ the entry point
def diagnose(dataset: Dataset, step_fn: Callable[[Any], Any] | None = None, *,
             step_seconds: float | None = None, seconds: float = 3.0,
             variant_seconds: float | None = None, try_variants: bool = True,
             verbose: bool = False) -> Report:
    """Diagnoses an input pipeline: its ceiling, whether a training step waits on it, its
    slowest stage, and what would help (with gains measured by trying variants).

    ``dataset``: any rf.Dataset (it is iterated several times: use a seeded or repeating one).
    ``step_fn(batch)``: the training step, called on each element; or ``step_seconds``: a
    simulated step that sleeps (no CPU, like a step on an accelerator). Without either, only the
    ceiling and the slowest stage are reported. ``seconds``: how long each of the two main phases
    runs; ``variant_seconds`` (default ``min(seconds, 2)``): how long each tried variant runs.
    ``try_variants=False`` reports estimates only. ``verbose``: progress on stderr.

    Returns a :class:`Report`: ``print(report)``, ``report.to_dict()``,
    ``report.write_html(path)``. docs/doctor.md describes the fields and the rules.
    """
    if not isinstance(dataset, Dataset):
        raise TypeError("diagnose takes an rf.Dataset")
    if step_fn is not None and step_seconds is not None:
        raise ValueError("give step_fn or step_seconds, not both")
    if step_seconds is not None and step_seconds < 0:
        raise ValueError("step_seconds must be >= 0")
    if seconds <= 0:
        raise ValueError("seconds must be > 0")
    variant_seconds = min(seconds, 2.0) if variant_seconds is None else variant_seconds

    def log(msg: str) -> None:
        if verbose:
            print(f"doctor: {msg}", file=sys.stderr, flush=True)

    step = step_fn
    mode = None
    if step_fn is not None:
        mode = f"step_fn {_callable_name(step_fn)}"
    elif step_seconds is not None:
        mode = f"simulated {1e3 * step_seconds:g} ms step"

        def step(_batch, _s=float(step_seconds)):
            time.sleep(_s)

    log(f"running the pipeline alone for {seconds:g} s ...")
    alone = _run_alone(dataset, seconds)
    stages = _stages(alone)
    batch_size = _batch_size(dataset)
    rate = alone["elements_per_s"]
    # The stream's busy time includes waiting for interleave reads queued on the thread
    # pool that the executor's work shares; when that pool is saturated the stream looks
    # busy without being the limit. Time the stream alone to know (a measurement, not a
    # variant: done with try_variants=False too).
    log("timing the record stream alone ...")
    read_alone = _read_alone_rate(dataset, min(variant_seconds, seconds, 1.0))
    read = next(s for s in stages if s["id"] == "read")
    read["alone_records_per_s"] = read_alone
    ceiling = {"elements_per_s": rate * (batch_size or 1),
               "batches_per_s": rate if batch_size else None, "batch_size": batch_size,
               "iterator_elements_per_s": rate, "seconds": alone["seconds"],
               "exhausted": alone["exhausted"]}

    step_run = None
    if step is not None:
        log(f"running the pipeline with the step for {seconds:g} s ...")
        step_run = _run_with_step(dataset, step, seconds)

    # The rules are the engine's (pipeline::JudgeMeasurements), shared with `recordflow doctor`.
    judged = _core.doctor_judge({
        "stages": stages, "batch_size": batch_size, "elements_per_s": rate,
        "elements": alone["elements"], "read_alone_records_per_s": read_alone,
        "step": None if step_run is None else {
            k: step_run[k] for k in ("steps", "steps_per_s", "wait_fraction", "mean_wait_ms",
                                     "mean_compute_ms", "max_compute_ms", "wait_s", "compute_s")}})
    if judged["read_note"]:
        read["utilization_note"] = judged["read_note"]
    slowest = next(s for s in stages if s["id"] == judged["slowest_stage"])
    verdict, verdict_detail = judged["verdict"], judged["verdict_detail"]
    input_bound, cause = judged["input_bound"], judged["cause"]

    recs: list[dict] = []
    if judged["rule_cause"] is not None:
        # try_variants=False: the same rules with variant_seconds 0, which run nothing.
        recs = _recommend(dataset, judged["rule_cause"], stages, alone, step, step_run,
                          variant_seconds if try_variants else 0.0, log)
    # Measured gains that help first, then estimates, then what was measured not to help.
    recs = [recs[i] for i in _core.doctor_order(recs)]

    data = {
        "pipeline": dataset.describe(),
        "cores": _cores(),
        "ceiling": ceiling,
        "time_to_first_element_s": alone["time_to_first_element_s"],
        "stages": stages,
        "slowest_stage": slowest["id"],
        "step": None if step_run is None else {
            k: step_run[k] for k in ("steps", "steps_per_s", "wait_fraction", "mean_wait_ms",
                                     "mean_compute_ms", "max_compute_ms", "wait_s", "compute_s")
        } | {"mode": mode},
        "input_bound": input_bound,
        "verdict": verdict,
        "verdict_detail": verdict_detail,
        "cause": cause,
        "recommendations": recs,
        "thresholds": {"input_bound_wait_fraction": INPUT_BOUND_WAIT_FRACTION,
                       "helps_gain": HELPS_GAIN, "keeps_up_margin": KEEPS_UP_MARGIN,
                       "read_headroom": READ_HEADROOM},
    }
    timeline = [] if step_run is None else list(zip(step_run["waits"], step_run["computes"]))
    return Report(data, timeline)


# ------------------------------------------------------------------------ the command
PRESETS = ("imagenet_train", "imagenet_eval", "records", "parse")


def _infer_spec(path: str, compression: str | None) -> dict:
    """A VarLen spec of every feature of the first record (dtype from its values)."""
    from recordflow import Example, RecordReader, VarLen
    for record in RecordReader(path, compression):
        spec = {}
        for key, value in Example.parse(record).items():
            values = value if isinstance(value, (list, tuple, np.ndarray)) else [value]
            first = values[0] if len(values) else None
            if isinstance(first, (bytes, str)):
                spec[key] = VarLen("bytes")
            elif isinstance(first, (float, np.floating)):
                spec[key] = VarLen("float32")
            else:
                spec[key] = VarLen("int64")
        return spec
    raise ValueError(f"'{path}' has no records: cannot infer the features to parse")


def build_preset(paths: list[str], preset: str, batch: int, interleave: int | None = None,
                 compression: str | None = None) -> Dataset:
    """The pipeline `recordflow doctor --preset` diagnoses: the files read with interleave
    (``interleave`` files at once; 0: one at a time; None: min(files, cores)), repeated, then
    the preset's work, batched, prefetched (autotuned)."""
    from recordflow import vision
    ds = Dataset.from_files(paths, compression=compression, shuffle_files=preset == "imagenet_train",
                            seed=0)
    files = ds._source_paths()
    cycle = min(len(files), _cores()) if interleave is None else interleave
    if cycle > 1:
        ds = ds.interleave(cycle_length=cycle)
    ds = ds.repeat()
    if preset == "imagenet_train":
        ds = (ds.shuffle(1024, seed=0).batch(batch, drop_remainder=True)
              .map(vision.imagenet_train(224, seed=0)))
    elif preset == "imagenet_eval":
        ds = ds.batch(batch).map(vision.imagenet_eval(224, 256))
    elif preset == "parse":
        ds = ds.batch(batch).parse(_infer_spec(files[0], compression))
    elif preset == "records":
        ds = ds.batch(batch)
    else:
        raise ValueError(f"unknown preset '{preset}' (one of {', '.join(PRESETS)})")
    return ds.prefetch()


_EXIT_OK, _EXIT_ERROR, _EXIT_USAGE, _EXIT_DATA_LOSS = 0, 1, 2, 3


def error_name(e: BaseException) -> str:
    """The status code name the other subcommands print for an error ("NotFound",
    "InvalidArgument", "IOError", ...): a recordflow error's own code, the fitting one for a
    built-in exception."""
    from recordflow import errors
    if isinstance(e, errors.Error) and e.code != "Unknown":
        return e.code
    for cls, name in ((FileNotFoundError, "NotFound"), (PermissionError, "PermissionDenied"),
                      (FileExistsError, "AlreadyExists"), (IsADirectoryError, "InvalidArgument"),
                      (NotADirectoryError, "InvalidArgument"), (OSError, "IOError"),
                      (ValueError, "InvalidArgument"), (MemoryError, "ResourceExhausted"),
                      (NotImplementedError, "Unimplemented")):
        if isinstance(e, cls):
            return name
    return "Internal"


class _Parser(argparse.ArgumentParser):
    """Usage errors as the other subcommands print them (docs/cli.md), exit status 2."""

    def error(self, message: str):
        self.exit(_EXIT_USAGE, f"recordflow: usage error: {message}\n"
                               f"Run '{self.prog} --help' for usage.\n")


def main(argv: list[str] | None = None, prog: str = "recordflow doctor") -> int:
    """`recordflow doctor GLOB... [options]` (the C++ `recordflow doctor` runs this)."""
    parser = _Parser(
        prog=prog,
        description="Runs an input pipeline over the given TFRecord files alone and with a "
                    "(simulated) training step; reports its ceiling, whether the step waits "
                    "on data, the slowest stage, and what would help, with gains measured by "
                    "trying variants. See docs/doctor.md.",
        epilog="exit codes: 0 report written; 1 error (no files, unreadable data, ...); "
               "2 usage error; 3 corrupt data found")
    parser.add_argument("files", nargs="+", metavar="GLOB", help="TFRecord files or glob patterns")
    parser.add_argument("--preset", choices=PRESETS, default="records",
                        help="the pipeline's work: imagenet_train (shuffle, random-resized-crop "
                             "224, flip, normalize), imagenet_eval (resize 256, center crop 224), "
                             "records (batches of raw records), parse (batches parsed with every "
                             "feature of the first record). Default: records")
    parser.add_argument("--batch", type=int, default=256, metavar="N", help="batch size (default 256)")
    parser.add_argument("--step-ms", type=float, default=None, metavar="MS",
                        help="simulate a training step of MS milliseconds (a sleep: no CPU, like "
                             "a step on a GPU); without it only the ceiling is measured")
    parser.add_argument("--seconds", type=float, default=3.0, metavar="S",
                        help="seconds for each main phase (default 3; variants run min(S, 2))")
    parser.add_argument("--interleave", type=int, default=None, metavar="N",
                        help="files read at once (0 or 1: one at a time; default min(files, cores))")
    parser.add_argument("--compression", choices=("GZIP", "ZLIB", "NONE"), default=None,
                        help="compression of the files (default: from each file name)")
    parser.add_argument("--no-variants", action="store_true",
                        help="do not try variants: estimates only (faster)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--html", metavar="PATH", help="also write an HTML report with a "
                                                       "per-step wait/compute timeline")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    if args.batch <= 0:
        parser.error("--batch must be > 0")
    if args.seconds <= 0:
        parser.error("--seconds must be > 0")
    if args.step_ms is not None and args.step_ms < 0:
        parser.error("--step-ms must be >= 0")

    from recordflow import errors
    compression = None if args.compression is None else ("" if args.compression == "NONE" else args.compression)
    # A path that is not there is a mistake on the command line: said here, naming it, before
    # anything is read. (Patterns that match nothing are reported by from_files: exit 1.)
    for path in args.files:
        if any(c in path for c in "*?["):
            continue
        if not os.path.exists(path):
            parser.error(f"no such file: '{path}'")
        if os.path.isdir(path):
            parser.error(f"'{path}' is a folder: give the TFRecord files in it "
                         f"(e.g. '{os.path.join(path, '*.tfrecord')}')")
    try:
        ds = build_preset(args.files, args.preset, args.batch, args.interleave, compression)
        report = diagnose(ds, step_seconds=None if args.step_ms is None else args.step_ms / 1e3,
                          seconds=args.seconds, try_variants=not args.no_variants,
                          verbose=not args.quiet and not args.json)
        if args.html:
            report.write_html(args.html)
        if args.json:
            out = report.to_dict()
            out["preset"] = args.preset
            out["files"] = len(ds._source_paths() or [])
            sys.stdout.write(json.dumps(out, indent=2) + "\n")
        else:
            sys.stdout.write(str(report))
            if args.html:
                sys.stdout.write(f"timeline: {args.html}\n")
        sys.stdout.flush()
    except errors.DataLossError as e:
        print(f"recordflow: DataLoss: {e}", file=sys.stderr)
        return _EXIT_DATA_LOSS
    except (errors.Error, OSError, ValueError) as e:
        print(f"recordflow: {error_name(e)}: {e}", file=sys.stderr)
        return _EXIT_ERROR
    return _EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
