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
    _ops,
    _python_start,
    _read_alone_rate,
    _run_alone,
    _run_with_step,
    _source_paths,
    _stages,
    _with_ops,
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
from recordflow.example import _Plan as _SpecPlan


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

    def print_line(line: str) -> None:  # the engine's lines start with "doctor: " already
        print(line, file=sys.stderr, flush=True)

    engine_log = print_line if verbose else None

    plan = _native_plan(dataset)
    # The engine's runs use the Dataset's with_options settings, as its own iterators do: the
    # shard cache (process-wide) and the core caps (passed to each pipeline::Diagnose).
    dataset._apply_cache(None, None)
    caps = dataset._caps(None, None)
    if plan is not None and step_fn is None:
        log("the pipeline is native: measured, stepped and varied by the engine's doctor")
        data, waits, computes = _engine_diagnose(plan, seconds, variant_seconds, step_seconds,
                                                 try_variants, engine_log, caps)
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

    # The native stages (all of them under a Python step_fn, else those before the first
    # Python stage): the engine's doctor measures them (pipeline::Diagnose on that plan);
    # Python times only the tail, the consuming loop and the step.
    prefix = plan if plan is not None else _native_prefix_plan(dataset)
    engine = None
    if prefix is not None:
        log("the native stages: measured by the engine's doctor ...")
        engine, _, _ = _engine_diagnose(prefix, seconds, variant_seconds, None, False,
                                        engine_log, caps)
    log(f"running the pipeline alone for {seconds:g} s ...")
    alone = _run_alone(dataset, seconds)
    stages = _stages(alone)
    batch_size = _batch_size(dataset)
    rate = alone["elements_per_s"]
    if engine is not None:
        stages = _merge_engine_stages(engine, alone, stages)
        read = next(s for s in stages if s["id"] == "read")
        read_alone = read.get("alone_records_per_s")
    else:
        # The stream's busy time includes waiting for interleave reads queued on the thread
        # pool that the executor's work shares; when that pool is saturated the stream looks
        # busy without being the limit. Time the stream alone to know (a measurement, not a
        # variant: done with try_variants=False too).
        # Reading from a bucket is network time, not disk time: the report says which it
        # measured.
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
    rule_cause = judged["rule_cause"]
    if (engine is not None and rule_cause is not None
            and rule_cause["id"] == engine["cause"]["id"]
            and rule_cause.get("stage") == engine["cause"].get("stage")):
        # A native stage sets the pace: its variants are the engine's, tried on the native
        # stages (an interleave added, the files rewritten, ...).
        if try_variants:
            log("trying the native stages' variants in the engine's doctor ...")
            tried, _, _ = _engine_diagnose(prefix, min(seconds, variant_seconds), variant_seconds,
                                           None, True, engine_log, caps)
            engine_recs = tried["recommendations"]
        else:
            engine_recs = engine["recommendations"]
        recs = [r | {"measured_by": "engine"} for r in engine_recs if r["id"] != "cap_cpu"]
    elif rule_cause is not None:
        # try_variants=False: the same rules with variant_seconds 0, which run nothing.
        recs = _recommend(dataset, rule_cause, stages, alone, step, step_run,
                          variant_seconds if try_variants else 0.0, log)
    if judged["cpu_cap"] is not None:  # a CPU-heavy step (pipeline::CpuCapRecommendation)
        cap = judged["cpu_cap"]
        recs.append(_Rec.make(cap["id"], None, cap["title"], cap["detail"],
                              command=cap["command"]))
    # Measured gains that help first, then estimates, then what was measured not to help.
    recs = ordered(recs)

    data = {
        "pipeline": dataset.describe(),
        "measured_by": "python" if engine is None else "engine+python",
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
    if engine is not None:
        data["native_stages"] = {
            "measured_by": "engine", "pipeline": engine["pipeline"],
            "elements_per_s": engine["ceiling"]["iterator_elements_per_s"],
            "time_to_first_element_s": engine["time_to_first_element_s"],
            "slowest_stage": engine["slowest_stage"]}
    timeline = [] if step_run is None else list(zip(step_run["waits"], step_run["computes"]))
    return Report(data, timeline)


def _engine_diagnose(plan: tuple[_st.Files | _st.Records, list[tuple]], seconds: float,
                     variant_seconds: float, step_seconds: float | None, try_variants: bool,
                     log, caps: dict) -> tuple[dict, list[float], list[float]]:
    """pipeline::Diagnose on ``plan`` (_native_plan's) with the iterator ``caps``
    (max_threads, max_cpu_fraction): the report as a dict, and the per-step waits and
    computes."""
    source, steps = plan
    if isinstance(source, _st.Records):  # Dataset::FromRecords in place of the files
        files, records = ([], None, False, None, "raise", True), list(source.records)
    else:
        files = (list(source.paths), source.compression, source.shuffle_files, source.seed,
                 source.on_corruption, source.verify_checksums)
        records = None
    text, waits, computes = _core.doctor_diagnose(
        *files, steps, seconds,
        variant_seconds if try_variants else 0.0, step_seconds, try_variants, log,
        records=records, **caps)
    data = json.loads(text)
    for s in data["stages"]:
        s["measured_by"] = "engine"
    return data, waits, computes


def _native_prefix_plan(ds: Dataset) -> tuple[_st.Files | _st.Records, list[tuple]] | None:
    """The plan of ``ds``'s native stages (those before its first Python stage, whichever it
    is: map, filter, unbatch, flat_map, padded_batch, ...) when the engine's doctor can run
    them; None when no stage runs in Python or the native part has no plan (a Python source:
    then the Python measurements time the whole pipeline)."""
    ops = _ops(ds)
    start = _python_start(ops)
    if start == len(ops):
        return None
    return _native_plan(_with_ops(ds, ops[:start]))


def _merge_engine_stages(engine: dict, alone: dict, stages: list[dict]) -> list[dict]:
    """The stages table of a pipeline timed in Python (a Python tail, or a Python step_fn): the
    native stages as the engine's doctor measured them, then the Python stages (the tail, the
    consuming loop) as timed here.

    The engine ran the native stages alone, as fast as they go; in the whole pipeline they
    run at the pace Python takes their elements (the engine's elements delivered). A stage's utilization there is its
    utilization alone scaled by that pace over its pace alone (a stage busy 90% of the time at
    1000 elements/s is busy 9% at 100/s). ``alone_utilization`` keeps the engine's figure."""
    engine_rate = engine["ceiling"]["iterator_elements_per_s"]
    taken = alone.get("steady_native_delivered")
    steady = alone["steady_seconds"]
    if taken and steady > 0 and engine_rate > 0:
        pace = min(1.0, taken / steady / engine_rate)
    else:  # nothing was taken after the first element: the native stages were not busy
        pace = 0.0
    # The prefetch buffer's fill depends on who drains it: in the whole pipeline it is the
    # tail, so its fill is the one the engine counted in that run (it.stats()).
    in_pipeline = {s["id"]: s for s in stages if s["kind"] == "native"}
    native = []
    for s in engine["stages"]:
        s = dict(s)
        s["alone_utilization"] = s["utilization"]
        if s["utilization"] is not None:
            s["utilization"] = s["utilization"] * pace
        s["pace_in_pipeline"] = pace
        if s.get("buffer_fill") is not None and s["id"] in in_pipeline:
            s["alone_buffer_fill"] = s["buffer_fill"]
            s["buffer_fill"] = in_pipeline[s["id"]].get("buffer_fill")
        native.append(s)
    return native + [s for s in stages if s["kind"] != "native"]


def _native_plan(ds: Dataset) -> tuple[_st.Files | _st.Records, list[tuple]] | None:
    """The pipeline as pipeline::PipelinePlan's steps (the arguments _lowering.lower() gives the same
    Dataset calls), or None when a stage runs in Python or has no plan step: then the Python
    measurements below time it."""
    source, *rest = ds.stages
    if not isinstance(source, (_st.Files, _st.Records)):  # a Python source (range, zip, ...)
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
        elif isinstance(s, _st.GlobalShuffle):
            steps.append(("global_shuffle", s.seed, s.reshuffle_each_iteration))
        elif isinstance(s, (_st.Repeat, _st.Take, _st.Skip)):
            steps.append((s.name, s.count))
        elif isinstance(s, _st.Cache):
            steps.append(("cache", s.path))
        elif isinstance(s, _st.Parse):
            # The specs _lowering.lower() gives the engine: shaped features (sparse, ragged,
            # sequences) as the columns they read.
            steps.append(("parse", _SpecPlan(s.spec, "spec").specs))
        elif isinstance(s, _st.NativeMap):
            steps.append(("map", s.op._core, s.num_parallel))
        elif isinstance(s, _st.Batch):
            steps.append(("batch", s.batch_size, s.drop_remainder))
        elif isinstance(s, _st.Prefetch):
            steps.append(("prefetch", s.n))
        else:  # a Python stage (not native): measured from Python
            return None
    for path in getattr(source, "paths", ()):  # s3:// from Python: botocore's credentials, as _lowering.lower() does
        if path.startswith("s3://"):
            from recordflow import _remote
            _remote.prepare(path)
    return source, steps
