"""Python map/filter on threads under free-threaded CPython (3.13t, built --disable-gil): the
extension keeps the GIL off, a pure-Python callable runs on two of the map's threads at once
(a rendezvous, not a timing: the speed-up is measured by bench/freethreaded_map.py), order,
determinism, checkpoints and error indices hold, and the bindings' objects stay sound when
several threads use them at once.

scripts/freethreaded.sh builds the interpreter and runs this file with
RF_REQUIRE_FREETHREADED=1: then a GIL interpreter FAILS the tests that need a free-threaded one.
On a GIL interpreter without that variable only those tests skip; the rest (thread executor,
concurrent use of one object) run on any CPython."""

import os
import subprocess
import sys
import sysconfig
import threading

import map_fns
import pytest
from map_fns import SPEC, N, bounded, parsed, records  # noqa: F401 - shared helpers

import recordflow as rf
from recordflow import _workers

REQUIRED = os.environ.get("RF_REQUIRE_FREETHREADED") == "1"
FT_BUILD = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
# Read after `import recordflow` (and NumPy, which it imports): an extension without
# Py_MOD_GIL_NOT_USED would have switched the GIL back on during those imports.
GIL_OFF = FT_BUILD and not sys._is_gil_enabled()


@pytest.fixture
def free_threaded():
    """For the tests that only mean something without the GIL."""
    if not FT_BUILD:
        reason = (f"{sys.executable} is not a free-threaded CPython build "
                  "(scripts/freethreaded.sh builds one)")
        if REQUIRED:
            pytest.fail("RF_REQUIRE_FREETHREADED=1: " + reason)
        pytest.skip(reason)



def burn(e, loops=400_000):
    """A fixed amount of CPU-bound pure-Python work (locals and small ints only: nothing
    shared between threads), then the element's id and the thread that ran it."""
    x = 0
    for i in range(loops):
        x += i & 7
    return {"id": int(e["id"]), "x": x, "thread": threading.get_ident()}


def ids(elements):
    return [int(e["id"]) for e in elements]


# ------------------------------------------------------------------ the interpreter
def test_gil_stays_disabled_after_importing_recordflow(free_threaded):
    assert GIL_OFF, "the GIL was enabled by the time recordflow and NumPy were imported"
    # In a fresh interpreter too, importing every part the map path loads (and with PYTHON_GIL
    # unset: it would override the modules' declarations).
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_GIL"}
    code = ("import sys, warnings; warnings.simplefilter('error');"
            "import recordflow, recordflow._core, recordflow._workers, numpy;"
            "print(sys._is_gil_enabled())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False"], out.stdout + out.stderr
    assert _workers.free_threaded()


# ------------------------------------------------------------------ map and filter on threads
def rendezvous_burn():
    """burn() whose elements 0 and 1 each wait (up to 20 s) until two different threads have
    entered the callable: proof that two calls run at once, independent of timing."""
    entered, lock, both = set(), threading.Lock(), threading.Event()

    def fn(e):
        with lock:
            entered.add(threading.get_ident())
            if len(entered) >= 2:
                both.set()
        if int(e["id"]) < 2:
            both.wait(20)
        return burn(e, 20_000)

    return fn, both


@pytest.mark.parametrize("workers", ["auto", "thread"])
def test_map_runs_on_threads_ordered_deterministic_equal_to_serial(workers, free_threaded):
    serial = [burn(e, 20_000) for e in parsed()]
    main = threading.get_ident()

    def run():
        fn, both = rendezvous_burn()
        it = parsed().map(fn, num_parallel=2, workers=workers).iterator()
        got = list(it)
        return got, it.stats()["python"][0], both.is_set()

    first, stats, concurrent = bounded(run)
    second, _, _ = bounded(run)
    assert stats["executor"] == "thread" and stats["workers"] == 2, stats
    assert concurrent, "the callable never ran on two threads at once"
    assert ids(first) == ids(second) == ids(serial) == list(range(N))
    assert [e["x"] for e in first] == [e["x"] for e in second] == [e["x"] for e in serial]
    threads = {e["thread"] for e in first}
    assert len(threads) == 2 and main not in threads, threads


def test_filter_on_threads_keeps_order(free_threaded):
    ds = parsed().filter(map_fns.is_even, num_parallel=2)  # workers="auto"
    it = ds.iterator()
    assert bounded(lambda: ids(it)) == list(range(0, N, 2))
    assert it.stats()["python"][0]["executor"] == "thread"


@pytest.mark.parametrize("workers", ["auto", "thread"])
def test_checkpoint_mid_epoch_restores_the_same_remaining_elements(workers):
    if workers == "auto" and not FT_BUILD:
        pytest.skip("auto picks threads only on free-threaded CPython")

    def ds():
        return (rf.Dataset.from_records(records()).shuffle(16, seed=5).parse(SPEC)
                .map(lambda e: burn(e, 5_000), num_parallel=2, workers=workers)
                .filter(lambda e: e["id"] % 3 != 0, num_parallel=2, workers=workers))

    full = bounded(lambda: ids(ds()))
    assert sorted(full) == [i for i in range(N) if i % 3 != 0]
    for k in (1, 6, 17):
        it = ds().iterator()
        head = [int(next(it)["id"]) for _ in range(k)]
        state = it.checkpoint()
        assert it.stats()["python"][0]["executor"] == "thread"
        assert head + bounded(lambda: ids(it)) == full
        assert head + bounded(lambda: ids(ds().restore(state))) == full, f"after {k}"


@pytest.mark.parametrize("workers", ["auto", "thread"])
def test_exception_in_fn_carries_the_record_index(workers):
    if workers == "auto" and not FT_BUILD:
        pytest.skip("auto picks threads only on free-threaded CPython")
    it = parsed().map(map_fns.fail_at_7, num_parallel=2, workers=workers).iterator()
    err = map_fns.error_at_7(it)
    assert any("element 7 of the map's input, in worker thread" in n for n in err.__notes__)


# ------------------------------------------------------------------ bindings used by threads
def test_one_iterator_from_several_threads_loses_and_repeats_nothing():
    # One next() at a time: a concurrent next() raises ValueError and has consumed nothing.
    n = 3000
    it = parsed(n).iterator()
    seen = [[] for _ in range(4)]

    def pull(t):
        while True:
            try:
                e = next(it)
            except StopIteration:
                return
            except ValueError as e:
                assert "already running next() in another thread" in str(e)
                continue
            seen[t].append(int(e["id"]))

    bounded(lambda: map_fns.in_threads(pull))
    assert sorted(i for s in seen for i in s) == list(range(n))
    for s in seen:
        assert s == sorted(s)  # each thread's share in input order


def test_indexed_reader_from_several_threads_returns_each_record_intact(tmp_path):
    # Records of very different sizes, read at random by 4 threads at once: each read has its
    # own buffer (the read runs with the GIL released, or with no GIL at all).
    path = str(tmp_path / "sizes.tfrecord")
    payloads = [bytes([i % 251]) * (1 + (i * 7919) % 200_000) for i in range(64)]
    with rf.RecordWriter(path, index=True) as w:
        for p in payloads:
            w.write(p)
    reader = rf.IndexedRecordReader(path)
    bad = []

    def read(t):
        for k in range(300):
            i = (k * 31 + t * 17) % len(payloads)
            lo = (k + t) % 60
            try:
                if reader[i] != payloads[i]:
                    bad.append((t, i))
                if reader.read_range(lo, 4) != payloads[lo:lo + 4]:
                    bad.append((t, "range", lo))
            except Exception as e:  # noqa: BLE001 - e.g. a CRC mismatch from a shared buffer
                bad.append((t, i, lo, repr(e)))

    bounded(lambda: map_fns.in_threads(read))
    assert bad == [], bad[:3]


def test_record_writer_and_reader_shared_by_threads(tmp_path):
    # Each write() is one whole record even when threads write to one writer at once.
    path = str(tmp_path / "shared.tfrecord")
    with rf.RecordWriter(path) as w:
        def write(t):
            for k in range(500):
                w.write(bytes([t]) * (1 + (k * 13) % 3000))

        map_fns.in_threads(write)
    got = list(rf.RecordReader(path))
    assert len(got) == 2000
    assert all(r == bytes([r[0]]) * len(r) for r in got)
    for t in range(4):
        assert sorted(len(r) for r in got if r[0] == t) == sorted(
            1 + (k * 13) % 3000 for k in range(500))
