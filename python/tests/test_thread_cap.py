"""max_threads / max_cpu_fraction: the engine's work stays within the cap (which named threads
did the work, CPU time over wall time of the process, the parallelism the iterator reports),
and the options travel with the Dataset (derived datasets, pickling) and are checked."""

import io
import os
import pickle
import resource
import time

import numpy as np
import pytest
from PIL import Image

import recordflow as rf


@pytest.fixture(scope="module")
def jpeg_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cap")
    rng = np.random.default_rng(0)
    paths = []
    for f in range(2):
        path = str(d / f"cap-{f}.tfrecord")
        with rf.RecordWriter(path) as w:
            for i in range(24):
                buf = io.BytesIO()
                Image.fromarray(rng.integers(0, 255, (480, 640, 3), np.uint8)).save(
                    buf, "JPEG", quality=95)
                w.write(rf.Example({"image/encoded": buf.getvalue(),
                                    "image/class/label": i}).serialize())
        paths.append(path)
    return paths


def _cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def _run(ds, **kw):
    it = ds.iterator(**kw)
    c0, t0 = _cpu(), time.perf_counter()
    n = sum(len(b["label"]) for b in it)
    cores = (_cpu() - c0) / (time.perf_counter() - t0)
    return n, cores, it.stats()


def _eval_pipeline(paths, repeat=2):
    return (rf.Dataset.from_files(paths).interleave(cycle_length=2).repeat(repeat).batch(8)
            .map(rf.vision.imagenet_eval(224, 256)))


def _map_parallelism(stats):
    return max(s["parallelism"] for s in stats["stages"])


def _thread_cpu(tids=None):
    """{tid: (name, CPU seconds so far)} of this process's live threads, or of `tids` only
    (/proc, in clock ticks)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in tids if tids is not None else os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[tid] = (name, (int(fields[11]) + int(fields[12])) / tick)  # utime + stime
    return out


def test_max_threads_one_keeps_the_decode_on_one_core(jpeg_files):
    # Measured in the steady state, after the first batches (thread start-up, first buffers),
    # on the engine's own threads (named rf-*): the consumer's thread is the caller's, and in a
    # long pytest process its garbage collections alone were 15% of a core.
    it = _eval_pipeline(jpeg_files, repeat=8).iterator(max_threads=1)
    n = 0
    for i, b in enumerate(it):
        n += len(b["label"])
        if i == 2:
            before = {tid: v for tid, v in _thread_cpu().items() if v[0].startswith("rf-")}
            t0 = time.perf_counter()
            after = dict(before)
        if i > 2:
            after.update(_thread_cpu(before))  # a thread that ends (the producer) keeps its last
    wall = time.perf_counter() - t0
    assert n == 8 * 48
    assert _map_parallelism(it.stats()) == 1
    used = {name: round(cpu - before[tid][1], 2) for tid, (name, cpu) in after.items()}
    # The decode ran on the capped pool's one thread; the process-wide pool stayed idle.
    busy = sorted(name for name, cpu in used.items() if name != "rf-producer" and cpu > 0.05 * wall)
    assert busy == ["rf-cap-0"], used
    # The engine: that thread, plus the producer reading the records outside the pool (for
    # these 360 KB noise JPEGs, 8-11% of a core).
    cores = sum(used.values()) / wall
    assert cores <= 1.2, f"{cores:.2f} cores of engine threads with max_threads=1: {used}"


def test_with_options_travels_with_derived_and_pickled_datasets(jpeg_files):
    ds = _eval_pipeline(jpeg_files).with_options(max_cpu_fraction=0.01)
    assert ds.options == {"max_cpu_fraction": 0.01}
    derived = ds.take(3).with_stages(ds.take(3).stages)
    assert derived.options == ds.options
    assert pickle.loads(pickle.dumps(ds)).options == ds.options
    n, _, stats = _run(ds.take(3))
    assert n == 24 and _map_parallelism(stats) == 1
    # An argument overrides the Dataset's option; 0 removes the cap.
    _, _, stats = _run(ds.take(3), max_cpu_fraction=0)
    pool = int(os.environ.get("RECORDFLOW_NUM_THREADS") or len(os.sched_getaffinity(0)))
    assert _map_parallelism(stats) == pool


@pytest.mark.parametrize("kw", [{"max_threads": -1}, {"max_cpu_fraction": 1.5},
                                {"max_cpu_fraction": -0.1}, {"max_threads": 1.5}])
def test_bad_caps_are_refused(jpeg_files, kw):
    ds = rf.Dataset.from_files(jpeg_files)
    with pytest.raises((ValueError, TypeError)):
        ds.iterator(**kw)
    with pytest.raises((ValueError, TypeError)):
        ds.with_options(**kw)
