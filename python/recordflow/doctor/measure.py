"""What the doctor times in Python: the pipeline alone and with the step, and the Python-side
stages (map/filter callables wrapped in a timer, the consuming thread's own work), on top of
the engine's own per-stage statistics (``it.stats()``)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from recordflow import stages as _st
from recordflow.dataset import Dataset
from recordflow.doctor.rules import _Rec, error_name


def _cores() -> int:
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not Linux
        return max(os.cpu_count() or 1, 1)


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
        if not op.native:
            return i
    return len(ops)


# The doctor rewrites a pipeline's transformations (ds.stages[1:]) and keeps its source.
def _ops(ds: Dataset) -> tuple:
    """The transformations of ``ds`` (rf.stages), in order: its stages after the source."""
    return ds.stages[1:]


def _with_ops(ds: Dataset, ops) -> Dataset:
    """``ds``'s source with the transformations ``ops``."""
    return ds.with_stages(ds.stages[:1] + tuple(ops))


def _source_paths(ds: Dataset) -> list[str] | None:
    """The files ``ds`` reads (globs expanded), or None for in-memory records."""
    source = ds.stages[0]
    return source.expanded_paths() if isinstance(source, _st.Files) else None


def _source_compression(ds: Dataset) -> str | None:
    """The compression given to from_files (None: from each file name)."""
    source = ds.stages[0]
    return source.compression if isinstance(source, _st.Files) else None


def _instrument(ds: Dataset) -> tuple[Dataset, list[dict]]:
    """The dataset with each Python map/filter callable wrapped in a _Timed, and a description
    of each Python-side stage (id, kind, name, parallelism, timer)."""
    ops = list(_ops(ds))
    start = _python_start(tuple(ops))
    python_stages = []
    counts: dict[str, int] = {}
    for i in range(start, len(ops)):
        op = ops[i]
        kind = op.name
        k = counts.get(kind, 0)
        counts[kind] = k + 1
        stage = {"id": f"python_{kind}_{k}", "kind": f"python_{kind}", "op_index": i,
                 "timer": None, "parallelism": 1}
        if isinstance(op, (_st.Map, _st.Filter)):
            fn = op.fn if isinstance(op, _st.Map) else op.predicate
            timer = _Timed(fn)
            # The timer counts in this process: a callable meant for worker processes is
            # measured on threads.
            workers = "thread" if op.workers == "process" else op.workers
            ops[i] = (op.replace(fn=timer, workers=workers) if isinstance(op, _st.Map) else
                      op.replace(predicate=timer, workers=workers))
            stage["timer"] = timer
            stage["name"] = f"python {kind}({_callable_name(fn)})"
            if isinstance(op, _st.Map) and op.num_parallel > 1:
                stage["parallelism"] = op.num_parallel
        else:
            stage["name"] = f"python {kind}"
        python_stages.append(stage)
    return _with_ops(ds, ops), python_stages


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
    sizes = [op.batch_size for op in _ops(ds) if isinstance(op, _st.Batch)]
    return sizes[-1] if sizes else None


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
        delivered_at_first = _delivered(it)
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
        delivered = _delivered(it)
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
            "element_bytes": _element_bytes(first),
            # Elements the engine's native stages delivered to Python after the first one
            # (whatever takes them: a Python stage or the loop); None when not counted.
            "steady_native_delivered": None if None in (delivered, delivered_at_first)
                                       else delivered - delivered_at_first}


def _delivered(it) -> int | None:
    """Elements the engine has delivered to Python so far (it.stats()), or None."""
    try:
        n = it.stats().get("elements_delivered")
    except Exception:  # a Python source has no engine to count
        return None
    return None if n is None else int(n)


def _run_with_step(ds: Dataset, step: Callable[[Any], Any], seconds: float) -> dict:
    """Iterates ``ds`` and calls ``step`` on each element for ``seconds``; times each step's
    wait for its element and its compute. The first element (start-up) is left out."""
    it = ds.with_stages(ds.stages).iterator()  # a copy: the user's ds.stats() stays theirs
    waits: list[float] = []
    computes: list[float] = []
    step_cpu = 0.0  # the step's own thread's CPU time (pipeline::StepRun::step_cpu_s)
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
            cpu_b = time.thread_time()
            step(element)
            step_cpu += time.thread_time() - cpu_b
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
            "max_compute_ms": 1e3 * max(computes, default=0.0), "step_cpu_s": step_cpu,
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
                    "utilization": util, "seconds_per_element": None,
                    "measured_by": "python"})
    py_wall = max(run["seconds"], 1e-9)
    python_busy = 0.0
    for st in run["python_stages"]:
        timer = st["timer"]
        entry = {"id": st["id"], "kind": st["kind"], "name": st["name"], "elements": 0,
                 "busy_seconds": None, "wait_output_seconds": None,
                 "parallelism": st["parallelism"], "buffer_size": None, "buffer_fill": None,
                 "utilization": None, "seconds_per_element": None, "measured_by": "python"}
        if timer is not None:
            entry["elements"] = timer.calls
            entry["busy_seconds"] = timer.seconds
            entry["seconds_per_element"] = timer.seconds / timer.calls if timer.calls else None
            # A parallel map's threads share the GIL; sleeping or native code inside the callable
            # does run in parallel, so its capacity is its thread count.
            entry["utilization"] = timer.seconds / (py_wall * st["parallelism"])
            # Serial vs workers: the callable's own rate on one thread, and the rate it ran at
            # with its workers in this run.
            if timer.seconds > 0:
                entry["serial_elements_per_s"] = timer.calls / timer.seconds
            entry["elements_per_s"] = timer.calls / py_wall
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
                "buffer_fill": None, "utilization": consumer / steady, "measured_by": "python",
                "seconds_per_element": consumer / max(run["steady_elements"], 1)})
    return out


def _read_alone_rate(ds: Dataset, seconds: float) -> float | None:
    """Records/s of ``ds``'s record stream alone (its transformations before the first parse,
    map, filter or batch), batched natively so the consumer is not the limit."""
    stream = []
    for op in _ops(ds):
        if isinstance(op, (_st.Parse, _st.NativeMap, _st.Map, _st.Filter, _st.Batch, _st.Prefetch)):
            break
        stream.append(op)
    stream.append(_st.Batch(256, False))
    try:
        return _run_alone(_with_ops(ds, stream), seconds)["elements_per_s"] * 256
    except Exception:  # the check is advisory; the utilizations still stand
        return None


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
