"""rf.diagnose: the three phases (alone, with the step, variants) and the report."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from recordflow import _core
from recordflow import stages as _st
from recordflow.dataset import Dataset
from recordflow.doctor.measure import (
    _batch_size,
    _callable_name,
    _cores,
    _read_alone_rate,
    _run_alone,
    _run_with_step,
    _source_paths,
    _stages,
)
from recordflow.doctor.report import Report
from recordflow.doctor.rules import (
    HELPS_GAIN,
    INPUT_BOUND_WAIT_FRACTION,
    KEEPS_UP_MARGIN,
    READ_HEADROOM,
    _Rec,
    judge,
    ordered,
)
from recordflow.doctor.samples import _remote_origin
from recordflow.doctor.variants import _recommend
from recordflow.example import _specs


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

    plan = _native_plan(dataset) if step_fn is None else None
    if plan is not None:
        log("the pipeline is native: measured, stepped and varied by the engine's doctor")
        files, steps = plan
        text, waits, computes = _core.doctor_diagnose(
            list(files.paths), files.compression, files.shuffle_files, files.seed,
            files.on_corruption, files.verify_checksums, steps, seconds,
            variant_seconds if try_variants else 0.0, step_seconds, try_variants,
            log if verbose else None)
        data = json.loads(text)
        data["pipeline"] = dataset.describe()
        return Report(data, list(zip(waits, computes)))

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
    # Reading from a bucket is network time, not disk time: the report says which it measured.
    origin = _remote_origin(_source_paths(dataset) or [])
    read = next(s for s in stages if s["id"] == "read")
    if origin:
        read["name"] = f"remote read from {origin}: {read['name']}"
    log("timing the record stream alone ..." if not origin
        else f"timing the remote record stream ({origin}) alone ...")
    read_alone = _read_alone_rate(dataset, min(variant_seconds, seconds, 1.0))
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
    judged = judge({
        "stages": stages, "batch_size": batch_size, "elements_per_s": rate,
        "elements": alone["elements"], "read_alone_records_per_s": read_alone,
        "cores": _cores(),
        "step": None if step_run is None else {
            k: step_run[k] for k in ("steps", "steps_per_s", "wait_fraction", "mean_wait_ms",
                                     "mean_compute_ms", "max_compute_ms", "wait_s", "compute_s",
                                     "step_cpu_s")}})
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
    if judged["cpu_cap"] is not None:  # a CPU-heavy step (pipeline::CpuCapRecommendation)
        cap = judged["cpu_cap"]
        recs.append(_Rec.make(cap["id"], None, cap["title"], cap["detail"],
                              command=cap["command"]))
    # Measured gains that help first, then estimates, then what was measured not to help.
    recs = ordered(recs)

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


def _native_plan(ds: Dataset) -> tuple[_st.Files, list[tuple]] | None:
    """The pipeline as pipeline::PipelinePlan's steps (the arguments _lower() gives the same
    Dataset calls), or None when a stage runs in Python or has no plan step: then the Python
    measurements below time it."""
    source, *rest = ds.stages
    if not isinstance(source, _st.Files):
        return None
    steps: list[tuple] = []
    for s in rest:
        if isinstance(s, _st.Shard):
            steps.append(("shard", s.num_shards, s.index))
        elif isinstance(s, _st.Interleave):
            steps.append(("interleave", s.cycle_length, s.block_length, s.num_parallel,
                          s.deterministic))
        elif isinstance(s, _st.Shuffle):
            steps.append(("shuffle", s.buffer_size, s.seed, s.reshuffle_each_iteration))
        elif isinstance(s, (_st.Repeat, _st.Take, _st.Skip)):
            steps.append((s.name, s.count))
        elif isinstance(s, _st.Cache):
            steps.append(("cache", s.path))
        elif isinstance(s, _st.Parse):
            steps.append(("parse", _specs(s.spec, "spec")))
        elif isinstance(s, _st.NativeMap):
            steps.append(("map", s.op._core, s.num_parallel))
        elif isinstance(s, _st.Batch):
            steps.append(("batch", s.batch_size, s.drop_remainder))
        elif isinstance(s, _st.Prefetch):
            steps.append(("prefetch", s.n))
        else:  # a Python callable, GlobalShuffle, ...: measured from Python
            return None
    for path in source.paths:  # s3:// from Python: botocore's credentials, as _lower() does
        if path.startswith("s3://"):
            from recordflow import _remote
            _remote.prepare(path)
    return source, steps
