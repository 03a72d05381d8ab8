"""max_threads / max_cpu_fraction: the engine's work stays within the cap (CPU time over wall
time of the process, and the parallelism the iterator reports), and the options travel with
the Dataset (derived datasets, pickling) and are checked."""

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


def _eval_pipeline(paths):
    return (rf.Dataset.from_files(paths).interleave(cycle_length=2).repeat(2).batch(8)
            .map(rf.vision.imagenet_eval(224, 256)))


def _map_parallelism(stats):
    return max(s["parallelism"] for s in stats["stages"])


def test_max_threads_one_keeps_the_decode_on_one_core(jpeg_files):
    n, cores, stats = _run(_eval_pipeline(jpeg_files), max_threads=1)
    assert n == 96
    assert _map_parallelism(stats) == 1
    assert cores <= 1.1, f"{cores:.2f} cores with max_threads=1"


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
