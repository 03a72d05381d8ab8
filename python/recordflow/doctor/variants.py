"""The doctor's variants: for the cause found, the pipeline rebuilt with one change (a new
Dataset description: the user's is never modified) and timed, so that each recommendation
carries a measured gain, or an estimate labelled as one (docs/doctor.md)."""

from __future__ import annotations

import numpy as np

from recordflow import stages as _st
from recordflow.dataset import AUTOTUNE, Dataset
from recordflow.doctor.measure import (
    _batch_size,
    _cores,
    _instrument,
    _measure_alone,
    _ops,
    _python_start,
    _run_with_step,
    _source_compression,
    _source_paths,
    _with_ops,
)
from recordflow.doctor.native import _native_replacement
from recordflow.doctor.rules import _free_gain, _Rec, error_name
from recordflow.doctor.samples import (
    _cache_variant,
    _file_layout_variants,
    _image_sizes,
    _pre_resize_variant,
    _vision_target,
)

_MAX_PREFETCH_BYTES = 1 << 30


def _insert_interleave(ds: Dataset, cycle: int) -> Dataset:
    ops = list(_ops(ds))
    i = 0
    while i < len(ops) and isinstance(ops[i], _st.Shard):  # a file-level shard stays first
        i += 1
    ops.insert(i, _st.Interleave(cycle, 1, AUTOTUNE, True))
    return _with_ops(ds, ops)


def _replace_op(ds: Dataset, index: int, op: _st.Stage | None) -> Dataset:
    ops = list(_ops(ds))
    if op is None:
        del ops[index]
    else:
        ops[index] = op
    return _with_ops(ds, ops)


def _with_prefetch(ds: Dataset, n: int) -> Dataset:
    """``ds`` with its engine-side prefetch set to ``n`` (added when it has none). A prefetch
    after a Python callable does nothing (Python stages run on the consuming thread), so the
    one that counts is the last native one."""
    ops = list(_ops(ds))
    start = _python_start(tuple(ops))
    native_prefetch = [i for i in range(start) if isinstance(ops[i], _st.Prefetch)]
    if native_prefetch:
        ops[native_prefetch[-1]] = _st.Prefetch(n)
    else:
        ops.insert(start, _st.Prefetch(n))
    return _with_ops(ds, ops)


def _prefetch_setting(ds: Dataset) -> int | None:
    ops = _ops(ds)
    start = _python_start(ops)
    found = [op.n for op in ops[:start] if isinstance(op, _st.Prefetch)]
    return found[-1] if found else None


def _recommend(ds: Dataset, cause: dict, stages: list[dict], alone: dict, step,
               step_run: dict | None, variant_seconds: float, log) -> list[dict]:
    ops = _ops(ds)
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
        later_callables = any(isinstance(o, (_st.Map, _st.Filter)) for o in ops[op_index + 1:])
        if op.num_parallel <= 1 or op.num_parallel == AUTOTUNE:
            n = max(4, cores)
            recs.append(_measure_alone(
                "parallel", _replace_op(ds, op_index, op.replace(num_parallel=n)), base, variant_seconds,
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
        if (any(isinstance(o, _st.Batch) for o in ops[op_index + 1:])
                and not any(isinstance(o, _st.Batch) for o in ops[:op_index])):
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
        paths = _source_paths(ds) or []
        interleaves = [i for i in range(start) if isinstance(ops[i], _st.Interleave)]
        compressed = _source_compression(ds) not in (None, "") or any(
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
            cycle = min(max(len(paths), 1), max(2 * op.cycle_length if op.cycle_length > 0 else cores, cores))
            if op.cycle_length != AUTOTUNE and (op.cycle_length < cycle
                                                or (op.num_parallel != AUTOTUNE and op.num_parallel < cores)):
                recs.append(_measure_alone(
                    "interleave", _replace_op(ds, i, op.replace(cycle_length=cycle, num_parallel=AUTOTUNE)),
                    base, variant_seconds, "parallel_reads", sid,
                    f"more parallel reads: .interleave(cycle_length={cycle}, num_parallel=rf.AUTOTUNE)",
                    "The interleave reads fewer files at once than the machine can inflate/read.", log))
        recs += _file_layout_variants(ds, paths, compressed, variant_seconds, sid, log)
        if any(isinstance(o, _st.Repeat) for o in ops) and not any(isinstance(o, _st.Cache) for o in ops):
            recs.append(_cache_variant(ds, paths, stages, variant_seconds, sid, log))
    elif kind == "process":
        maps = [i for i in range(start) if isinstance(ops[i], _st.NativeMap)]
        for i in maps:
            op = ops[i]
            if op.num_parallel != AUTOTUNE and op.num_parallel < cores:
                recs.append(_measure_alone(
                    "map_parallel", _replace_op(ds, i, op.replace(num_parallel=AUTOTUNE)), base,
                    variant_seconds, "map_parallel", sid,
                    "more parallel map work: .map(op, num_parallel=rf.AUTOTUNE)",
                    f"The native map runs on {op.num_parallel} thread(s) of {cores} cores.", log))
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
