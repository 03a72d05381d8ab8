"""The doctor's rules on recorded measurements (no clock): rf.diagnose calls the engine's
one implementation (pipeline::JudgeMeasurements, ...), the one `recordflow doctor` runs."""

import json

from recordflow.doctor import report, rules


def _stage(sid, util, kind="native", **extra):
    return {"id": sid, "kind": kind, "name": f"{sid} stage", "elements": 300,
            "busy_seconds": util, "parallelism": 1, "utilization": util, **extra}


def _measurements(step=None, **extra):
    # 100 batches/s of 32 alone; the decode stage is the busiest.
    return {"stages": [_stage("read", 0.3), _stage("process", 0.95),
                       _stage("prefetch", None, buffer_size=8, buffer_fill=0.5)],
            "batch_size": 32, "elements_per_s": 100.0, "elements": 300,
            "read_alone_records_per_s": None, "step": step, **extra}


def _step(wait_ms, compute_ms, steps=100):
    return {"steps": steps, "steps_per_s": 1e3 / (wait_ms + compute_ms),
            "wait_fraction": wait_ms / (wait_ms + compute_ms), "mean_wait_ms": wait_ms,
            "mean_compute_ms": compute_ms, "max_compute_ms": compute_ms,
            "wait_s": steps * wait_ms / 1e3, "compute_s": steps * compute_ms / 1e3}


def test_no_step_names_the_slowest_stage():
    v = rules.judge(_measurements())
    assert v["verdict"] == "no step given" and v["input_bound"] is None
    assert v["cause"]["id"] == "process" and v["slowest_stage"] == "process"
    assert v["rule_cause"]["id"] == "process"


def test_step_faster_than_the_pipeline_is_input_bound_on_the_slowest_stage():
    v = rules.judge(_measurements(_step(8, 2)))  # 500/s wanted, 100/s given
    assert v["verdict"] == "input-bound" and v["input_bound"] is True
    assert v["cause"]["id"] == "process"
    assert abs(v["cause"]["ceiling_over_demand"] - 0.2) < 1e-9


def test_keeping_up_on_average_but_waiting_is_the_prefetch_buffer():
    v = rules.judge(_measurements(_step(3, 20)))  # 50/s wanted, 100/s given
    assert v["cause"]["id"] == "prefetch" and v["cause"]["stage"] == "prefetch"


def test_threshold_and_borderline():
    assert rules.judge(_measurements(_step(1, 9)))["verdict"] == "input-bound"  # exactly 10%
    v = rules.judge(_measurements(_step(0.5, 11)))  # 1.1x the step's rate: no margin
    assert v["verdict"] == "not input-bound" and v["cause"]["borderline"] is True
    assert v["rule_cause"]["id"] == "process"
    v = rules.judge(_measurements(_step(0.1, 100)))  # 10x headroom
    assert v["cause"]["id"] == "step" and v["rule_cause"] is None


def test_python_map_in_series_with_the_step_is_the_cause():
    m = _measurements(_step(6, 20))
    m["stages"].append(_stage("python_map_0", 0.5, kind="python_map", busy_seconds=1.2))
    v = rules.judge(m)  # 1.2 s / 300 elements = 4 ms of the 6 ms each step waits
    assert v["cause"]["id"] == "python_map" and v["cause"]["stage"] == "python_map_0"


def test_a_stream_far_faster_alone_is_not_the_slowest_stage():
    m = _measurements()
    m["stages"][0]["utilization"] = 0.99
    m["read_alone_records_per_s"] = 1.5 * 100 * 32
    v = rules.judge(m)
    assert v["slowest_stage"] == "process" and "1.5x what the pipeline delivers" in v["read_note"]


def test_recommendations_order():
    def rec(rid, gain, measured):
        return {"id": rid, "gain": gain, "measured": measured,
                "helps": None if gain is None or not measured else gain >= rules.HELPS_GAIN}
    recs = [rec("no_gain", 1.05, True), rec("estimate", 3.0, False), rec("small", 1.2, True),
            rec("big", 2.5, True), rec("none", None, False)]
    assert [r["id"] for r in rules.ordered(recs)] == ["big", "small", "estimate", "none", "no_gain"]


def test_free_gain_is_the_next_limit_capped():
    stages = [_stage("read", 0.25), _stage("process", 0.9)]
    assert abs(rules._free_gain(stages, "process", 100.0) - 4.0) < 1e-9
    stages[0]["utilization"] = 0.01
    assert rules._free_gain(stages, "process", 100.0) == 10.0


def test_text_and_html_of_a_recorded_report():
    m = _measurements(_step(8, 2, steps=5))
    v = rules.judge(m)
    data = {"pipeline": "files(4) -> batch(32)", "cores": 2,
            "ceiling": {"elements_per_s": 3200.0, "batches_per_s": 100.0, "batch_size": 32,
                        "iterator_elements_per_s": 100.0, "seconds": 3.0, "exhausted": False},
            "time_to_first_element_s": 0.05, "stages": m["stages"],
            "slowest_stage": v["slowest_stage"],
            "step": dict(m["step"], mode="simulated 2 ms step"), "input_bound": v["input_bound"],
            "verdict": v["verdict"], "verdict_detail": v["verdict_detail"], "cause": v["cause"],
            "recommendations": [rules._Rec.make("decode_on_gpu", "process", "decode <on> GPU", "d",
                                                gain=2.0)]}
    text = report._render_text(data)
    assert "VERDICT: INPUT-BOUND - the step waits for data 80.0% of the time" in text
    assert "3,200 elements/s (100 batches/s of 32)" in text
    assert "estimated up to 2.00x" in text and "<- slowest" in text
    page = report._render_html(data, [(0.008, 0.002)] * 5)
    assert page.count("<rect") == 10
    assert "decode &lt;on&gt; GPU" in page and "decode <on> GPU" not in page
    assert json.dumps(data, indent=2).replace('"', "&quot;")[:40] in page


def test_cpu_heavy_step_gets_the_cpu_cap_and_a_sleeping_step_does_not():
    # Recorded: a 120 ms step of which 110 ms on the CPU (0.92 cores) on 4 cores.
    heavy = _step(2, 120) | {"step_cpu_s": 100 * 0.110}
    v = rules.judge(_measurements(heavy, cores=4))
    assert v["cpu_cap"]["id"] == "cap_cpu"
    assert v["cpu_cap"]["command"] == "max_cpu_fraction=0.75"
    sleeping = _step(2, 120) | {"step_cpu_s": 100 * 0.0005}
    assert rules.judge(_measurements(sleeping, cores=4))["cpu_cap"] is None
    assert rules.judge(_measurements(heavy, cores=1))["cpu_cap"] is None
    assert rules.judge(_measurements(_step(2, 120), cores=4))["cpu_cap"] is None  # not measured


# ---- a pipeline with a Python tail: the engine's native-stage figures merged with Python's ----

def _engine_prefix(read_util, read_alone):
    """pipeline::Diagnose's report of the native stages alone (recorded): 1,000 elements/s."""
    return {"ceiling": {"iterator_elements_per_s": 1000.0},
            "stages": [_stage("read", read_util, measured_by="engine",
                              alone_records_per_s=read_alone),
                       _stage("process", 0.2, measured_by="engine"),
                       _stage("prefetch", None, measured_by="engine", buffer_size=8,
                              buffer_fill=0.1)]}


def _python_tail(taken, map_busy, steady=1.0):
    """Python's run of the whole pipeline (recorded): the engine delivered `taken` elements in
    `steady` seconds; its map was busy `map_busy` of them."""
    alone = {"steady_native_delivered": taken, "steady_seconds": steady}
    stages = [_stage("read", 0.99, measured_by="python"),  # Python's own view: replaced
              _stage("prefetch", None, measured_by="python", buffer_size=8, buffer_fill=0.9),
              _stage("python_map_0", map_busy, kind="python_map", measured_by="python"),
              _stage("python_consumer", 0.05, kind="python_consumer", measured_by="python")]
    return alone, stages


def _judge_merged(engine, alone, stages, elements_per_s):
    from recordflow.doctor.run import _merge_engine_stages
    merged = _merge_engine_stages(engine, alone, stages)
    m = {"stages": merged, "batch_size": None, "elements_per_s": elements_per_s,
         "elements": 100, "read_alone_records_per_s": merged[0]["alone_records_per_s"],
         "step": _step(9, 1)}
    return merged, rules.judge(m)


def test_native_stages_run_at_the_python_tails_pace():
    # The engine alone: read 90% busy at 1,000/s. The whole pipeline: the tail took 100/s, its
    # map busy 95%: read is busy 9% at that pace, and the map is the cause.
    merged, v = _judge_merged(_engine_prefix(0.9, 5000.0), *_python_tail(100, 0.95), 100.0)
    assert [s["id"] for s in merged] == ["read", "process", "prefetch", "python_map_0",
                                         "python_consumer"]
    read = merged[0]
    assert read["measured_by"] == "engine" and read["alone_utilization"] == 0.9
    assert abs(read["utilization"] - 0.09) < 1e-9 and read["alone_records_per_s"] == 5000.0
    assert merged[3]["measured_by"] == "python"
    # The prefetch buffer's fill is the whole pipeline's (its own row there), not the engine's
    # alone.
    assert merged[2]["buffer_fill"] == 0.9 and merged[2]["alone_buffer_fill"] == 0.1
    assert v["slowest_stage"] == "python_map_0" and v["cause"]["id"] == "python_map"


def test_a_slow_native_read_under_a_cheap_python_tail_is_blamed_on_read():
    # The tail took the native stages' full pace (1,000/s, capped at 1: never above alone).
    merged, v = _judge_merged(_engine_prefix(0.95, 1050.0), *_python_tail(1100, 0.1),
                              1000.0)
    assert abs(merged[0]["utilization"] - 0.95) < 1e-9
    assert v["slowest_stage"] == "read" and v["cause"]["id"] == "read"
    # A tail that took nothing after its first element: the native stages were idle.
    merged, _ = _judge_merged(_engine_prefix(0.95, 1050.0), *_python_tail(0, 0.9), 1.0)
    assert merged[0]["utilization"] == 0.0
