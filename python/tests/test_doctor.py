"""rf.diagnose / `recordflow doctor` on pipelines made slow on purpose: each must name its cause.

Timings here are relative (one stage far slower than the rest, a step far slower than the
pipeline), so the verdicts hold on a loaded 2-core machine; the phases run ~1 s each.
"""

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import recordflow as rf

SPEC = {"x": rf.FixedLen([], "int64")}


def _write_files(directory, n_files, records_per_file, payload_bytes, compression=None, seed=0):
    """Files of Examples {"x": int, "pad": bytes}; pad compresses about 2:1 (GZIP must work)."""
    rng = np.random.default_rng(seed)
    suffix = ".tfrecord.gz" if compression == "GZIP" else ".tfrecord"
    paths = []
    for f in range(n_files):
        path = str(directory / f"part-{f:03d}{suffix}")
        with rf.RecordWriter(path, compression=compression) as w:
            for i in range(records_per_file):
                pad = rng.integers(0, 16, payload_bytes, dtype=np.uint8).tobytes()
                w.write(rf.Example({"x": f * records_per_file + i, "pad": pad}).serialize())
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def plain_files(tmp_path_factory):
    return _write_files(tmp_path_factory.mktemp("plain"), 4, 256, 64)


@pytest.fixture(scope="module")
def gzip_files(tmp_path_factory):
    return _write_files(tmp_path_factory.mktemp("gzip"), 24, 96, 8192, compression="GZIP")


def _rec(report, rid):
    found = [r for r in report["recommendations"] if r["id"] == rid]
    assert found, f"no recommendation {rid!r} in {[r['id'] for r in report['recommendations']]}"
    return found[0]


def test_sleep_in_python_map_is_named(plain_files):
    def slow_augment(batch):
        time.sleep(0.004)
        return batch

    ds = (rf.Dataset.from_files(plain_files).repeat().batch(16).parse(SPEC)
          .prefetch().map(slow_augment))
    report = rf.diagnose(ds, step_seconds=0.0005, seconds=1.0, variant_seconds=0.8).to_dict()
    assert report["verdict"] == "input-bound"
    assert report["input_bound"] is True
    assert report["slowest_stage"] == "python_map_0"
    assert report["cause"]["id"] == "python_map"
    assert report["cause"]["stage"] == "python_map_0"
    stage = next(s for s in report["stages"] if s["id"] == "python_map_0")
    assert "slow_augment" in stage["name"]
    # ~4 ms per call, measured by the doctor's own timer around the callable.
    assert 0.003 < stage["seconds_per_element"] < 0.05
    assert stage["utilization"] > 0.5
    # Threads overlap the sleeps: the measured gain is real, not an estimate.
    parallel = _rec(report, "python_map_parallel")
    assert parallel["measured"] and parallel["gain"] > 1.5 and parallel["helps"]
    # A sleep has no native equivalent: "move it to a native op" would name none, so it is not
    # offered (the doctor offers a native op only when it can name it).
    assert "python_map_native" not in [r["id"] for r in report["recommendations"]]
    # The ceiling is set by the sleep: at most 1 / 4 ms batches/s.
    assert report["ceiling"]["batches_per_s"] < 260
    assert report["ceiling"]["batch_size"] == 16
    assert report["ceiling"]["elements_per_s"] == pytest.approx(16 * report["ceiling"]["batches_per_s"])


def test_single_reader_on_many_gzip_files_recommends_parallel_reads(gzip_files):
    # No interleave: one thread opens and inflates the 24 files one after another.
    ds = rf.Dataset.from_files(gzip_files).repeat().batch(32).parse(SPEC)
    report = rf.diagnose(ds, seconds=1.0, variant_seconds=0.6).to_dict()
    assert report["verdict"] == "no step given"
    assert report["slowest_stage"] == "read"
    assert report["cause"]["id"] == "read"
    read = next(s for s in report["stages"] if s["id"] == "read")
    assert read["utilization"] > 0.5
    assert "files(24" in read["name"]
    parallel = _rec(report, "parallel_reads")
    # Tried for real: the pipeline rebuilt with an interleave and timed.
    assert parallel["measured"] and parallel["error"] is None
    assert parallel["variant"] > 0 and parallel["gain"] == pytest.approx(
        parallel["variant"] / parallel["baseline"], rel=1e-2)
    assert "interleave" in parallel["title"]
    # The file-layout advice is measured on a sample rewritten in a temporary directory:
    # without GZIP, one reading thread has no inflate to do.
    uncompressed = _rec(report, "uncompressed_files")
    assert uncompressed["measured"] and uncompressed["gain"] > 1.5, uncompressed
    assert _rec(report, "fewer_larger_files")["measured"]
    cache = _rec(report, "cache")
    assert cache["measured"] and cache["gain"] > 1.5, cache
    # The rebuilt variant must not have changed the user's dataset.
    assert "interleave" not in ds.describe()


def test_tiny_prefetch_with_bursty_step_names_the_prefetch_buffer(gzip_files):
    ds = (rf.Dataset.from_files(gzip_files).interleave(cycle_length=2).repeat()
          .batch(16).parse(SPEC).prefetch(1))
    # Calibrate the bursty step on this machine: the pipeline alone makes P batches/s; the
    # step takes a long step then `burst` instant ones, consuming on average P / 2.5.
    ceiling = rf.diagnose(ds, seconds=0.5, try_variants=False)["ceiling"]["batches_per_s"]
    burst = 30
    long_step = 2.5 * (burst + 1) / ceiling
    calls = [0]

    def bursty_step(batch):
        calls[0] += 1
        if calls[0] % (burst + 1) == 0:
            time.sleep(long_step)

    seconds = max(1.0, 8 * long_step)
    report = rf.diagnose(ds, bursty_step, seconds=seconds, variant_seconds=seconds).to_dict()
    assert report["verdict"] == "input-bound", report["step"]
    assert report["cause"]["id"] == "prefetch"
    assert report["cause"]["stage"] == "prefetch"
    assert report["cause"]["ceiling_over_demand"] > 1.25
    prefetch = next(s for s in report["stages"] if s["id"] == "prefetch")
    assert prefetch["buffer_size"] <= 1 + report["cores"]  # prefetch(1) + units in flight
    bigger = _rec(report, "bigger_prefetch")
    assert bigger["measured"] and bigger["metric"] == "steps_per_s"
    assert bigger["wait_fraction_after"] < bigger["wait_fraction_before"] / 2
    assert bigger["gain"] > 1.05


def test_fast_pipeline_slow_step_is_not_input_bound(plain_files):
    ds = rf.Dataset.from_files(plain_files).repeat().batch(32).parse(SPEC).prefetch()
    report = rf.diagnose(ds, step_seconds=0.02, seconds=1.0)
    d = report.to_dict()
    assert d["verdict"] == "not input-bound"
    assert d["input_bound"] is False
    assert d["cause"]["id"] == "step"
    assert d["step"]["wait_fraction"] < 0.10
    assert 15 <= d["step"]["mean_compute_ms"] <= 60
    assert d["recommendations"] == []
    assert d["ceiling"]["batches_per_s"] > 2 * d["step"]["steps_per_s"]
    assert len(report.timeline) == d["step"]["steps"]
    text = str(report)
    assert "NOT INPUT-BOUND" in text and "[read]" in text
    json.dumps(d)  # plain data


def _html_report(plain_files, tmp_path):
    """A short diagnose of a parsing pipeline: the dataset, the report and its HTML page."""
    ds = rf.Dataset.from_files(plain_files).repeat().batch(32).parse(SPEC).prefetch()
    report = rf.diagnose(ds, step_seconds=0.002, seconds=0.3, try_variants=False)
    path = tmp_path / "report.html"
    report.write_html(str(path))
    return ds, report, path.read_text()


def test_html_timeline_and_arguments(plain_files, tmp_path):
    ds, report, page = _html_report(plain_files, tmp_path)
    assert page.count("<rect") == 2 * len(report.timeline) > 0
    assert "recordflow doctor" in page
    with pytest.raises(ValueError):
        rf.diagnose(ds, lambda b: None, step_seconds=0.1)
    with pytest.raises(TypeError):
        rf.diagnose([1, 2, 3])
    with pytest.raises(ValueError, match="no elements"):
        rf.diagnose(rf.Dataset.from_records([]), seconds=0.1)


def _cli():
    return shutil.which("recordflow", path=os.path.dirname(sys.executable))


@pytest.mark.skipif(_cli() is None, reason="the recordflow command is not installed beside this Python")
def test_cli_doctor_json_names_the_stages(plain_files, tmp_path):
    html_path = tmp_path / "doctor.html"
    out = subprocess.run(
        [_cli(), "doctor", *plain_files, "--preset", "parse", "--batch", "16", "--seconds", "0.4",
         "--step-ms", "2", "--no-variants", "--json", "--html", str(html_path)],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    ids = [s["id"] for s in report["stages"]]
    assert ids[:3] == ["read", "process", "prefetch"]
    names = {s["id"]: s["name"] for s in report["stages"]}
    assert "files(4" in names["read"] and "parse" in names["process"]
    assert report["preset"] == "parse" and report["files"] == 4
    assert report["verdict"] in ("input-bound", "not input-bound")
    assert report["step"]["steps"] > 0
    assert html_path.exists()

    help_out = subprocess.run([_cli(), "doctor", "--help"], capture_output=True, text=True)
    assert help_out.returncode == 0 and "--preset" in help_out.stdout
    missing = subprocess.run([_cli(), "doctor", str(tmp_path / "none-*.tfrecord")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "no files match" in missing.stderr
    usage = subprocess.run([_cli(), "doctor", plain_files[0], "--preset", "nope"],
                           capture_output=True, text=True)
    assert usage.returncode == 2


def test_decode_bound_pipeline_names_the_map_and_measures_pre_resize(tmp_path):
    # Smooth 640x480 JPEGs (cheap to make, real to decode); eval preset resizes to 256 anyway.
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:480, 0:640]
    path = str(tmp_path / "images.tfrecord")
    with rf.RecordWriter(path) as w:
        for i in range(48):
            phase = rng.uniform(0, 6.28, 3)
            img = np.stack([(127 + 120 * np.sin(xx / (9 + c) + yy / (13 + c) + phase[c]))
                            for c in range(3)], -1).astype(np.uint8)
            w.write(rf.Example({"image/encoded": rf.encode_jpeg(img, 95), "image/height": 480,
                                "image/width": 640, "image/class/label": i % 4}).serialize())
    ds = (rf.Dataset.from_files([path]).repeat().batch(8)
          .map(rf.vision.imagenet_eval(224, 256)).prefetch())
    report = rf.diagnose(ds, seconds=1.0, variant_seconds=0.8).to_dict()
    # The record stream looks busy (it waits on the pool the decoders fill), but timed alone
    # it is far faster: the decode map is the limit.
    assert report["slowest_stage"] == "process", report["stages"]
    assert report["cause"]["id"] == "process"
    read = next(s for s in report["stages"] if s["id"] == "read")
    assert read["alone_records_per_s"] > 1.5 * report["ceiling"]["elements_per_s"]
    pre_resize = _rec(report, "pre_resize")
    assert pre_resize["measured"] and pre_resize["gain"] > 1.2, pre_resize
    assert "--resize-shorter 256" in pre_resize["title"]
    gpu = _rec(report, "decode_on_gpu")
    assert not gpu["measured"] and gpu["gain"] >= 1.0


# ---- advice that can be followed ----------------------------------------------------------------

def test_fewer_larger_files_names_the_reshard_command_and_it_runs(gzip_files, tmp_path):
    from recordflow import doctor
    ds = rf.Dataset.from_files(gzip_files).repeat().batch(32).parse(SPEC)
    report = rf.diagnose(ds, seconds=0.5, try_variants=False).to_dict()
    assert report["cause"]["id"] == "read"
    rec = _rec(report, "fewer_larger_files")
    folder = os.path.dirname(gzip_files[0])
    total = sum(os.path.getsize(p) for p in gzip_files)
    n = max(1, -(-total // doctor.RESHARD_TARGET_BYTES))
    assert rec["command"] == (f"recordflow reshard {folder}/*.tfrecord.gz "
                              f"{os.path.join(folder, 'resharded')} --shards {n} --compression GZIP")
    assert rec["command"] in rec["title"]
    # N follows the bytes: 300 MiB of files -> 3 shards of about 100 MiB.
    cmd, shards = doctor.reshard_command(gzip_files, 300 << 20)
    assert shards == 3 and cmd.endswith("--shards 3")
    # The command does what it says (run as a shell would, glob included).
    cli = _cli()
    if cli is not None:
        target = tmp_path / "resharded"
        command = rec["command"].replace(os.path.join(folder, "resharded"), str(target))
        command = command.replace("recordflow ", cli + " ", 1)
        out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        files = sorted(str(p) for p in target.glob("shard-*.tfrecord.gz"))
        assert len(files) == n
        got = [r for f in files for r in rf.RecordReader(f)]
        want = [r for f in gzip_files for r in rf.RecordReader(f)]
        assert got == want


def _image_records(tmp_path, n=24):
    rng = np.random.default_rng(1)
    path = str(tmp_path / "images.tfrecord")
    with rf.RecordWriter(path) as w:
        for i in range(n):
            img = rng.integers(0, 255, (60 + i % 5, 80, 3), dtype=np.uint8)
            w.write(rf.Example({"image/encoded": rf.encode_jpeg(img, 90),
                                "image/class/label": i % 3}).serialize())
    return path


def _decode_center(record):
    ex = rf.Example.parse(record)
    data = ex["image/encoded"]
    data = data[0] if isinstance(data, list) else data
    img = rf.vision.decode_image(data)
    img = rf.vision.resize(img, (40, 40))
    return {"image": rf.vision.center_crop(img, 32).astype(np.float32) / 255, "label": ex["image/class/label"]}


def _decode_random_crop(record, _rng=np.random.default_rng(0)):
    out = _decode_center(record)
    dy, dx = _rng.integers(0, 8, 2)
    img = np.pad(out["image"], ((4, 4), (4, 4), (0, 0)))[dy:dy + 32, dx:dx + 32]
    return {"image": img, "label": out["label"]}


@pytest.mark.parametrize("fn, preset", [(_decode_center, "imagenet_eval"),
                                        (_decode_random_crop, "imagenet_train")])
def test_python_decode_map_names_the_native_preset_that_replaces_it(tmp_path, fn, preset):
    ds = rf.Dataset.from_files([_image_records(tmp_path)]).repeat().map(fn).batch(8)
    report = rf.diagnose(ds, seconds=0.6, try_variants=False).to_dict()
    assert report["cause"]["id"] == "python_map", report["cause"]
    native = _rec(report, "python_map_native")
    assert native["native_op"] == f"rf.vision.{preset}(size=32)"
    assert native["command"] == f".map(rf.vision.{preset}(size=32))"
    assert native["native_op"] in native["title"]


def test_python_map_without_a_native_equivalent_gets_no_native_advice(plain_files):
    def busy(x):
        return sum(range(20000)) and x

    ds = rf.Dataset.from_files(plain_files).repeat().map(busy).batch(16)
    report = rf.diagnose(ds, seconds=0.5, try_variants=False).to_dict()
    assert report["cause"]["id"] == "python_map"
    ids = [r["id"] for r in report["recommendations"]]
    assert "python_map_native" not in ids
    assert not any("native op" in r["title"] for r in report["recommendations"])


def test_html_report_is_readable_verdict_first_axes_with_units(plain_files, tmp_path):
    _, report, page = _html_report(plain_files, tmp_path)
    verdict = page.index("Verdict: " + report["verdict"].upper())
    svg = page.index("<svg")
    assert verdict < page.index("Cause:") < svg
    assert "time since the first step (s)" in page[svg:]
    assert "step time (ms)" in page[svg:]
    ticks = page[svg:page.index("</svg>")].count("<text")
    assert ticks >= 2 + 4  # two axis titles and tick labels on both axes
    assert "white-space:pre-wrap" in page  # long lines wrap, nothing needs sideways scrolling
    assert page.count("<rect") == 2 * len(report.timeline)


def test_error_labels_are_status_names_not_python_classes(tmp_path, capsys):
    from recordflow import doctor
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    rc = doctor.main([str(empty), "--preset", "parse", "--seconds", "0.1", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.startswith("recordflow: InvalidArgument: "), err
    assert "empty.tfrecord" in err
    assert doctor.error_name(ValueError("x")) == "InvalidArgument"
    assert doctor.error_name(OSError("x")) == "IOError"
    assert doctor.error_name(FileNotFoundError("x")) == "NotFound"
    assert doctor.error_name(rf.DataLossError("x")) == "DataLoss"


def test_missing_path_is_a_usage_error_naming_it(tmp_path, capsys):
    from recordflow import doctor
    missing = str(tmp_path / "no" / "such")
    with pytest.raises(SystemExit) as exit_info:
        doctor.main([missing])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"no such file: '{missing}'" in err and err.startswith("recordflow: usage error: ")
    with pytest.raises(SystemExit) as exit_info:
        doctor.main([str(tmp_path)])
    assert exit_info.value.code == 2
    assert "is a folder" in capsys.readouterr().err
    cli = _cli()
    if cli is not None:
        out = subprocess.run([cli, "doctor", "/no/such"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, out.stderr
        assert "no such file: '/no/such'" in out.stderr


def test_a_native_pipeline_is_diagnosed_by_the_engine(gzip_files, monkeypatch):
    """No Python stage and no Python step: measurements, the simulated step and the variant
    trials are pipeline::Diagnose's; the Python measurers are not called. A Python map
    brings them back (they time what only Python can)."""
    import recordflow.doctor.run as run

    def python_measured(*args, **kwargs):
        raise AssertionError("a native pipeline was measured from Python")

    monkeypatch.setattr(run, "_run_alone", python_measured)
    monkeypatch.setattr(run, "_run_with_step", python_measured)
    monkeypatch.setattr(run, "_recommend", python_measured)
    ds = rf.Dataset.from_files(gzip_files).repeat().batch(32).parse(SPEC)
    report = rf.diagnose(ds, step_seconds=0.0, seconds=0.6, variant_seconds=0.4)
    d = report.to_dict()
    assert d["pipeline"] == ds.describe() and d["measured_by"] == "engine"
    assert d["step"]["mode"] == "simulated 0 ms step" and d["step"]["steps"] > 0
    assert d["verdict"] == "input-bound" and d["cause"]["id"] == "read"
    assert len(report.timeline) == d["step"]["steps"]
    assert [s["id"] for s in d["stages"]][0] == "read"
    parallel = _rec(d, "parallel_reads")  # a variant trial the engine ran
    assert parallel["measured"] and parallel["variant"] > 0, parallel
    with pytest.raises(AssertionError, match="measured from Python"):
        rf.diagnose(ds.map(lambda b: b), seconds=0.3, try_variants=False)


def _spy_engine(monkeypatch):
    """Records each pipeline::Diagnose run (the real engine runs: this only notes the steps)."""
    import recordflow.doctor.run as run
    calls = []
    real = run._core.doctor_diagnose

    def spy(*args, **kwargs):
        calls.append(args[6])  # the plan's steps
        return real(*args, **kwargs)

    monkeypatch.setattr(run._core, "doctor_diagnose", spy)

    def python_read(*args, **kwargs):
        raise AssertionError("the native stages were measured from Python")

    monkeypatch.setattr(run, "_read_alone_rate", python_read)
    return calls


def test_native_stages_then_a_slow_python_map_then_batch(plain_files, monkeypatch):
    """native stages -> Python map -> batch: the engine's doctor measures the native stages,
    Python times only the map (per element, serial and with its workers); a slow map is
    blamed (the step waits on the map, docs/doctor.md's example)."""
    calls = _spy_engine(monkeypatch)

    def slow_augment(x):
        time.sleep(0.002)
        return x

    ds = (rf.Dataset.from_files(plain_files).repeat().parse(SPEC).prefetch()
          .map(slow_augment, num_parallel=1).batch(8))
    report = rf.diagnose(ds, step_seconds=0.0005, seconds=0.8, variant_seconds=0.5)
    d = report.to_dict()
    assert d["measured_by"] == "engine+python"
    # The native stages ran in pipeline::Diagnose, alone, as its own pipeline.
    assert calls and [s[0] for s in calls[0]] == ["repeat", "parse", "prefetch"]
    assert d["native_stages"]["measured_by"] == "engine"
    assert d["native_stages"]["pipeline"].endswith("prefetch(autotune)")
    assert "python" not in d["native_stages"]["pipeline"]
    native = [s for s in d["stages"] if s["kind"] == "native"]
    assert [s["id"] for s in native] == ["read", "process", "prefetch"]
    assert all(s["measured_by"] == "engine" for s in native)
    assert native[1]["name"] == "parse(x)"  # the engine's own stage name
    read = native[0]
    assert read["alone_records_per_s"] > 0  # the engine's timing of the stream alone
    # In the pipeline the native stages run at the map's pace: far below their pace alone.
    assert read["utilization"] < read["alone_utilization"]
    stage = next(s for s in d["stages"] if s["id"] == "python_map_0")
    assert stage["measured_by"] == "python" and "slow_augment" in stage["name"]
    assert 0.0015 < stage["seconds_per_element"] < 0.05
    assert 20 < stage["serial_elements_per_s"] < 700 and stage["elements_per_s"] > 0
    assert d["verdict"] == "input-bound"
    assert d["slowest_stage"] == "python_map_0" and d["cause"]["id"] == "python_map"
    # The map's variants are Python's (only Python can rebuild a callable's stage).
    parallel = _rec(d, "python_map_parallel")
    assert parallel["measured"] and parallel["gain"] > 1.5 and "measured_by" not in parallel
    assert len(report.timeline) == d["step"]["steps"] > 0
    text = str(report)
    assert "[python_map_0]" in text and "<- slowest" in text
    assert ("native stages measured by the engine, alone: " + d["native_stages"]["pipeline"]
            in text), text
    # The prefetch buffer in the pipeline: the slow map drains it slowly, so it is fuller than
    # when the engine drained it alone.
    prefetch = native[2]
    assert prefetch["buffer_fill"] > prefetch["alone_buffer_fill"], prefetch


def test_slow_native_read_before_a_python_map_is_blamed_on_read(gzip_files, monkeypatch):
    """One thread inflating 24 GZIP files, then a cheap Python map over whole batches: the read
    stage is the cause, and its variants are the engine's, tried on the native stages."""
    calls = _spy_engine(monkeypatch)
    ds = rf.Dataset.from_files(gzip_files).repeat().batch(32).parse(SPEC).map(lambda b: b)
    d = rf.diagnose(ds, step_seconds=0.0, seconds=0.8, variant_seconds=0.4).to_dict()
    assert d["measured_by"] == "engine+python"
    assert d["verdict"] == "input-bound"
    assert d["slowest_stage"] == "read" and d["cause"]["id"] == "read", d["stages"]
    read = next(s for s in d["stages"] if s["id"] == "read")
    assert read["measured_by"] == "engine" and "files(24" in read["name"]
    # Measured once, then tried with variants: both runs are the engine's, on the native stages.
    assert len(calls) == 2 and all([s[0] for s in c] == ["repeat", "batch", "parse"]
                                   for c in calls)
    parallel = _rec(d, "parallel_reads")
    assert parallel["measured_by"] == "engine" and parallel["measured"], parallel
    assert parallel["variant"] > 0 and parallel["error"] is None


def test_a_python_step_fn_on_a_native_pipeline_leaves_the_stages_to_the_engine(
        gzip_files, monkeypatch):
    """A native pipeline with a Python step_fn: the engine's doctor measures every stage and
    tries the native variants; Python times only the step (and the loop that calls it)."""
    calls = _spy_engine(monkeypatch)
    ds = rf.Dataset.from_files(gzip_files).repeat().batch(32).parse(SPEC)

    def train_step(batch):
        assert batch["x"].shape == (32,)

    report = rf.diagnose(ds, train_step, seconds=0.8, variant_seconds=0.4)
    d = report.to_dict()
    assert d["measured_by"] == "engine+python"
    assert d["step"]["mode"].startswith("step_fn ") and "train_step" in d["step"]["mode"]
    assert d["step"]["steps"] > 0 and len(report.timeline) == d["step"]["steps"]
    # The whole pipeline ran in pipeline::Diagnose: measured once, then with its variants.
    assert calls and all([s[0] for s in c] == ["repeat", "batch", "parse"] for c in calls)
    native = [s for s in d["stages"] if s["kind"] == "native"]
    assert [s["id"] for s in native][0] == "read" and native
    assert all(s["measured_by"] == "engine" for s in native), native
    assert native[0]["alone_records_per_s"] > 0 and "files(24" in native[0]["name"]
    # Only the loop that calls the step is Python's own stage.
    assert [s["id"] for s in d["stages"] if s["kind"] != "native"] == ["python_consumer"]
    assert d["native_stages"]["measured_by"] == "engine"
    # One thread inflating 24 GZIP files: read is the cause and the engine tried its variant.
    assert d["verdict"] == "input-bound" and d["cause"]["id"] == "read", d["stages"]
    parallel = _rec(d, "parallel_reads")
    assert parallel["measured_by"] == "engine" and parallel["measured"], parallel


@pytest.mark.parametrize("tail", ["unbatch", "padded_batch", "enumerate", "take_while",
                                  "flat_map", "ignore_errors"])
def test_native_stages_before_any_python_stage_go_to_the_engine(plain_files, monkeypatch, tail):
    """Whatever the first Python stage is (not only a map or filter), the native stages before
    it are measured by the engine's doctor; Python times the tail."""
    calls = _spy_engine(monkeypatch)
    ds = rf.Dataset.from_files(plain_files).repeat().batch(8).parse(SPEC).prefetch()
    ds = {"unbatch": lambda: ds.unbatch(),
          "padded_batch": lambda: ds.unbatch().padded_batch(4),
          "enumerate": lambda: ds.enumerate(),
          "take_while": lambda: ds.take_while(lambda b: True),
          "flat_map": lambda: ds.flat_map(lambda b: rf.Dataset.range(2)),
          "ignore_errors": lambda: ds.ignore_errors()}[tail]()
    d = rf.diagnose(ds, step_seconds=0.0005, seconds=0.5, try_variants=False).to_dict()
    assert d["measured_by"] == "engine+python"
    assert calls and [s[0] for s in calls[0]] == ["repeat", "batch", "parse", "prefetch"]
    native = [s for s in d["stages"] if s["kind"] == "native"]
    assert [s["id"] for s in native] == ["read", "process", "prefetch"]
    assert all(s["measured_by"] == "engine" for s in native)
    # The native stages ran at the pace Python took their elements: never above alone.
    for s in native:
        if s["alone_utilization"] is not None:
            assert 0 <= s["utilization"] <= s["alone_utilization"] + 1e-9, s
    assert any(s["kind"].startswith("python_") and s["kind"] != "python_consumer"
               for s in d["stages"]), d["stages"]


def test_a_global_shuffle_pipeline_is_native_in_the_doctor(plain_files, monkeypatch):
    """global_shuffle is a PlanStep: the whole pipeline goes to the engine's doctor, whose
    variants keep to what Dataset allows (no interleave before a global shuffle)."""
    import recordflow.doctor.run as run
    calls = _spy_engine(monkeypatch)
    monkeypatch.setattr(run, "_run_alone", lambda *a, **k: pytest.fail("measured from Python"))
    ds = (rf.Dataset.from_files(plain_files).global_shuffle(seed=3).repeat().batch(16)
          .parse(SPEC))
    d = rf.diagnose(ds, step_seconds=0.0, seconds=0.5, variant_seconds=0.3).to_dict()
    assert d["measured_by"] == "engine" and "global_shuffle(seed=3)" in d["pipeline"]
    assert calls and calls[0][0] == ("global_shuffle", 3, True)
    assert all(s["measured_by"] == "engine" for s in d["stages"])
    ids = [r["id"] for r in d["recommendations"]]
    assert "parallel_reads" not in ids and "cache" not in ids, ids
    assert all(r.get("error") is None for r in d["recommendations"]), d["recommendations"]


def test_a_from_records_pipeline_is_native_in_the_doctor(monkeypatch):
    """Dataset.from_records: the records are the PipelinePlan's source (Dataset::FromRecords)."""
    import recordflow.doctor.run as run
    calls = _spy_engine(monkeypatch)
    python_alone = run._run_alone
    monkeypatch.setattr(run, "_run_alone", lambda *a, **k: pytest.fail("measured from Python"))
    records = [rf.Example({"x": i}).serialize() for i in range(200)]
    ds = rf.Dataset.from_records(records).repeat().batch(8).parse(SPEC)
    d = rf.diagnose(ds, step_seconds=0.0005, seconds=0.4, variant_seconds=0.3).to_dict()
    assert d["measured_by"] == "engine" and d["pipeline"] == ds.describe()
    assert calls and [s[0] for s in calls[0]] == ["repeat", "batch", "parse"]
    assert d["stages"][0]["id"] == "read" and d["stages"][0]["measured_by"] == "engine"
    assert d["step"]["steps"] > 0 and d["ceiling"]["batch_size"] == 8
    ids = [r["id"] for r in d["recommendations"]]
    assert not {"cache", "fewer_larger_files", "uncompressed_files"} & set(ids), ids
    # A Python tail on records: the native stages still go to the engine.
    monkeypatch.setattr(run, "_run_alone", python_alone)
    calls.clear()
    d = rf.diagnose(ds.unbatch(), seconds=0.3, try_variants=False).to_dict()
    assert d["measured_by"] == "engine+python" and len(calls) == 1


def test_shaped_parse_features_are_native_in_the_doctor(tmp_path, monkeypatch):
    """A parse with rf.SparseFeature / rf.RaggedFeature lowers as the columns it reads (as
    the pipeline does), so the doctor runs it in the engine."""
    calls = _spy_engine(monkeypatch)
    path = str(tmp_path / "shaped.tfrecord")
    with rf.RecordWriter(path) as w:
        for i in range(64):
            w.write(rf.Example({"idx": [0, 2], "val": [1.0, 2.0], "r": [float(i)] * (i % 3 + 1)})
                    .serialize())
    spec = {"sp": rf.SparseFeature("idx", "val", "float32", 4),
            "r": rf.RaggedFeature("float32")}
    ds = rf.Dataset.from_files(path).repeat().batch(8).parse(spec)
    d = rf.diagnose(ds, seconds=0.3, try_variants=False).to_dict()
    assert d["measured_by"] == "engine" and calls
    assert [s[0] for s in calls[0]] == ["repeat", "batch", "parse"]


@pytest.mark.parametrize("step_fn", [None, lambda batch: None])
def test_the_engine_measures_with_the_datasets_core_caps(plain_files, step_fn):
    """with_options(max_threads=1) caps the engine's runs as it caps the Dataset's iterators:
    the parse stage runs on one thread (whole pipeline in the engine, or under a step_fn)."""
    ds = (rf.Dataset.from_files(plain_files).repeat().batch(8).parse(SPEC).prefetch()
          .with_options(max_threads=1))
    d = rf.diagnose(ds, step_fn, seconds=0.3, try_variants=False).to_dict()
    process = next(s for s in d["stages"] if s["id"] == "process")
    assert process["measured_by"] == "engine" and process["parallelism"] == 1, process
