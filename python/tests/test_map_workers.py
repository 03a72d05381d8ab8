"""Python map/filter off the consuming thread (rf._workers): worker processes and threads,
order, shared memory, errors with the element index, worker death, /dev/shm hygiene, shutdown,
checkpoints, AUTOTUNE and the choice of "auto". The callables live in map_fns.py (worker
processes import them by name). Every test that could hang runs under a time bound."""

import gc
import glob
import mmap
import os
import time

import map_fns
import numpy as np
import pytest
from map_fns import SPEC, N, bounded, parsed, records  # noqa: F401 - shared helpers

import recordflow as rf
from recordflow import _workers


def segments():
    return set(glob.glob("/dev/shm/rf-map-*"))


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture(autouse=True)
def no_leaked_segments():
    before = segments()
    yield
    gc.collect()
    assert segments() - before == set(), "shared-memory segments left in /dev/shm"


def test_process_map_is_ordered_equal_to_serial_and_parallel():
    serial = [map_fns.spin(e) for e in parsed()]
    it = parsed().map(map_fns.spin, num_parallel=2, workers="process").iterator()
    consumer_cpu = time.thread_time()
    got = bounded(lambda: list(it))
    consumer_cpu = time.thread_time() - consumer_cpu  # (bounded ran it on another thread)
    assert [g["id"] for g in got] == [s["id"] for s in serial] == list(range(N))
    pids = {g["pid"] for g in got}
    assert len(pids) == 2 and os.getpid() not in pids


def test_consumer_thread_cpu_is_a_fraction_of_the_work():
    # 40 elements x 20 ms of CPU each: inline the consuming thread spends >= 0.8 s of CPU;
    # with worker processes it only dispatches and unpickles.
    it = parsed().map(map_fns.spin, num_parallel=2, workers="process").iterator()
    start = time.thread_time()
    got = [e["id"] for e in it]
    used = time.thread_time() - start
    assert got == list(range(N))
    assert used < 0.4 * N * 0.02, f"consumer thread used {used:.3f} s of CPU"
    start = time.thread_time()
    list(parsed(10).map(map_fns.spin, num_parallel=1))
    assert time.thread_time() - start >= 10 * 0.02 * 0.9  # inline: the consumer pays it all


def test_arrays_come_back_through_shared_memory_without_copies():
    got = bounded(lambda: list(parsed(12).map(map_fns.big_array, num_parallel=2,
                                              workers="process")))
    for e in got:
        img = e["image"]
        assert img.shape == (256, 256, 3) and img.dtype == np.uint8
        assert (img == e["id"] % 251).all()
        base = img
        while isinstance(base, np.ndarray):
            base = base.base
        assert isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap), type(base)
        assert img.flags.writeable
        assert img.ctypes.data % 64 == 0
    del got
    gc.collect()


def test_inputs_with_big_arrays_go_to_workers_through_shared_memory():
    ds = parsed(6).map(map_fns.big_array, workers="inline").map(
        map_fns.checksum, num_parallel=2, workers="process")
    got = bounded(lambda: list(ds))
    assert got == [int(np.full((256, 256, 3), i % 251, np.uint8).sum()) for i in range(6)]


def test_filter_in_processes_keeps_order_and_elements():
    ds = parsed().filter(map_fns.slow_is_even, num_parallel=2, workers="process")
    got = bounded(lambda: [int(e["id"]) for e in ds])
    assert got == list(range(0, N, 2))
    ds = parsed().map(map_fns.ident, workers="process", num_parallel=2).filter(
        map_fns.is_even, workers="thread", num_parallel=3)
    assert bounded(lambda: list(ds)) == list(range(0, N, 2))


def test_thread_workers_ordered_and_errors_carry_the_index():
    ds = parsed().map(map_fns.spin_5ms, num_parallel=3, workers="thread")
    assert [e["id"] for e in ds] == list(range(N))
    it = parsed().map(map_fns.fail_at_7, num_parallel=3, workers="thread").iterator()
    err = map_fns.error_at_7(it)
    assert any("element 7 of the map's input" in n for n in err.__notes__)


def test_worker_exception_is_reraised_in_order_with_index_and_traceback():
    it = parsed().map(map_fns.fail_at_7, num_parallel=2, workers="process").iterator()
    err = bounded(lambda: map_fns.error_at_7(it))
    notes = "\n".join(err.__notes__)
    assert "element 7 of the map's input" in notes and "worker pid" in notes
    assert "map_fns.py" in notes and "fail_at_7" in notes  # the worker's traceback
    assert next(it, "end") == "end"  # finished after the error


def test_exception_that_does_not_pickle_still_names_index_and_traceback():
    ds = parsed(4).map(map_fns.raise_unpicklable, num_parallel=2, workers="process")
    with pytest.raises(rf.MapWorkerError, match=r"element 0[\s\S]*Unpicklable"):
        bounded(lambda: list(ds))


@pytest.mark.parametrize("fn, how", [(map_fns.exit_at_5, "exited with code 3"),
                                     (map_fns.kill_at_5, "SIGKILL")])
def test_worker_death_raises_clearly_without_hanging(fn, how):
    it = parsed().map(fn, num_parallel=2, workers="process").iterator()
    pids = it.stats()["python"][0]["pids"]
    got = []

    def run():
        with pytest.raises(rf.MapWorkerError, match=how) as e:
            for x in it:
                got.append(x)
        return e.value

    err = bounded(run, 60)
    assert "element 5" in str(err)
    assert got == list(range(len(got))) and len(got) <= 5
    assert not any(alive(p) for p in pids)  # the other worker was stopped too


def test_workers_draw_different_random_numbers():
    # Forked workers inherit one RNG state: each is reseeded (Python's random, NumPy's global).
    got = bounded(lambda: list(parsed().map(map_fns.draw, num_parallel=2, workers="process")))
    assert len({a for a, _ in got}) == N and len({b for _, b in got}) == N


def test_unpicklable_callable_is_refused_clearly():
    with pytest.raises(rf.InvalidArgumentError, match="cannot be pickled.*workers='thread'"):
        iter(parsed().map(lambda e: e, workers="process"))
    with pytest.raises(rf.InvalidArgumentError, match="workers must be"):
        parsed().map(map_fns.ident, workers="fork")


def test_close_and_drop_stop_workers_and_free_shared_memory():
    before = segments()
    it = parsed(200).map(map_fns.big_array, num_parallel=2, workers="process").iterator()
    first = bounded(it.__next__)
    assert first["id"] == 0
    pids = it.stats()["python"][0]["pids"]
    time.sleep(0.5)  # let the workers fill their replies (segments in /dev/shm)
    it.close()
    assert not any(alive(p) for p in pids)
    assert segments() - before == set()
    assert (first["image"] == 0).all()  # a delivered array outlives the iterator

    it = parsed(200).map(map_fns.big_array, num_parallel=2, workers="process").iterator()
    bounded(it.__next__)
    pids = it.stats()["python"][0]["pids"]
    del it  # no reference cycle: dropping it shuts the pool down at once
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids)
    assert segments() - before == set()


def test_a_killed_consumer_leaves_no_workers_and_no_segments(tmp_path):
    # The consumer is SIGKILLed with replies and inputs in flight: its workers see the pipe
    # close, remove the stage's segments and exit.
    import subprocess
    import sys
    body = """def main():
    it = ds.map(map_fns.big_array, num_parallel=2, workers="process").iterator()
    next(it)
    print(*it.stats()["python"][0]["pids"], flush=True)
    import os, time
    time.sleep(0.5)
    os.kill(os.getpid(), 9)
if __name__ == "__main__":
    main()
"""
    script = tmp_path / "killed.py"
    script.write_text(SCRIPT.format(tests=os.path.dirname(os.path.abspath(__file__)), body=body))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == -9, out.stderr
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 20
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in pids)
    # (the autouse fixture checks that no segment is left)


def _run_to_list(it):
    return [repr(x) for x in it]


@pytest.mark.parametrize("workers", ["process", "thread"])
def test_checkpoint_mid_epoch_neither_loses_nor_repeats_in_flight_elements(workers):
    def ds():
        return (rf.Dataset.from_records(records()).shuffle(16, seed=3).parse(SPEC)
                .map(map_fns.ident, num_parallel=2, workers=workers)
                .filter(map_fns.is_even, num_parallel=2, workers=workers))

    full = bounded(lambda: _run_to_list(ds()))
    assert sorted(int(x) for x in full) == list(range(0, N, 2))
    for k in (0, 3, 11):
        it = ds().iterator()
        head = [repr(next(it)) for _ in range(k)]
        state = it.checkpoint()
        assert it.stats()["python"][0]["in_flight"] > 0 or k == 0
        rest_of_original = bounded(lambda: _run_to_list(it))
        assert head + rest_of_original == full  # checkpointing did not disturb the iterator
        restored = bounded(lambda: _run_to_list(ds().restore(state)))
        assert head + restored == full, f"checkpoint after {k}"


def test_checkpoint_checks_damage_and_stage_count():
    ds = parsed().map(map_fns.ident, num_parallel=2, workers="process")
    it = ds.iterator()
    bounded(it.__next__)
    state = it.checkpoint()
    it.close()
    damaged = bytearray(state)
    damaged[-3] ^= 0xFF
    with pytest.raises(rf.DataLossError, match="CRC32"):
        ds.restore(bytes(damaged))
    with pytest.raises(rf.InvalidArgumentError, match="map/filter stages"):
        ds.map(map_fns.ident).restore(state)


def test_auto_moves_a_slow_picklable_callable_to_processes():
    it = parsed().map(map_fns.spin_5ms).iterator()  # workers="auto", num_parallel=AUTOTUNE
    got = bounded(lambda: [e for e in it])
    assert [e["id"] for e in got] == list(range(N))
    assert {e["pid"] for e in got[:_workers._AUTO_PROBE]} == {os.getpid()}  # timed inline
    assert os.getpid() not in {e["pid"] for e in got[-8:]}  # then in worker processes
    # An error after the move still names its element and carries the worker's traceback.
    with pytest.raises(KeyError, match="no feature at 20") as e:
        bounded(lambda: list(parsed().map(map_fns.spin_fail_at_20)))
    assert e.value.rf_element_index == 20
    assert "spin_fail_at_20" in "\n".join(e.value.__notes__)
    # Fast callables stay on the consuming thread; an unpicklable one with num_parallel > 1
    # goes to threads (as asked).
    it = parsed().map(lambda e: int(e["id"])).iterator()
    assert list(it) == list(range(N))
    it = parsed().map(lambda e: map_fns.spin_5ms(e)["id"], num_parallel=3).iterator()
    assert list(it) == list(range(N))
    assert it.stats()["python"][0]["executor"] == "thread"


SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import map_fns, recordflow as rf
recs = [rf.Example({{"id": i}}).serialize() for i in range(30)]
ds = rf.Dataset.from_records(recs).parse({{"id": rf.FixedLen([], "int64")}})
{body}
"""
RUN = """it = ds.map(map_fns.spin_5ms).iterator()
assert [e["id"] for e in it] == list(range(30))
print(it.stats()["python"][0]["executor"])"""


@pytest.mark.parametrize("guarded, executor", [(True, "process"), (False, "inline")])
def test_auto_uses_processes_only_where_workers_can_reimport_main_safely(tmp_path, guarded,
                                                                         executor):
    # Workers re-import the main script: "auto" leaves a script without a __main__ guard (its
    # top-level work would run again in every worker) on the consuming thread.
    import subprocess
    import sys
    body = ("def main():\n" + "".join("    " + line + "\n" for line in RUN.splitlines())
            + "if __name__ == '__main__':\n    main()\n") if guarded else RUN
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(tests=os.path.dirname(os.path.abspath(__file__)), body=body))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [executor], out.stdout


def test_auto_on_free_threaded_python_uses_threads(monkeypatch):
    # This CPython has the GIL (no 3.13t here): the free-threaded branch is taken through its
    # one switch, sys._is_gil_enabled() as read by _workers.free_threaded.
    monkeypatch.setattr(_workers.sys, "_is_gil_enabled", lambda: False, raising=False)
    assert _workers.free_threaded()
    it = parsed().map(map_fns.spin_5ms).iterator()
    got = [e["id"] for e in it]
    assert got == list(range(N))
    stats = it.stats()["python"][0]
    assert stats["executor"] == "thread" and stats["workers"] == min(2, _workers.usable_cpus())


def test_autotune_adds_workers_while_the_consumer_waits(monkeypatch):
    monkeypatch.setattr(_workers, "usable_cpus", lambda: 6)
    it = parsed(120).map(map_fns.sleep_5ms, workers="thread").iterator()
    assert it.stats()["python"][0]["workers"] == 2
    assert [e for e in it] == list(range(120))
    grown = it.stats()["python"][0]["workers"]
    assert 2 < grown <= 6
    # A consumer slower than the callable keeps the pool as it started.
    it = parsed(60).map(map_fns.ident, workers="thread").iterator()
    for _ in it:
        time.sleep(0.005)
    assert it.stats()["python"][0]["workers"] == 2


def test_training_loop_and_torch_loader(tmp_path):
    import torch
    path = str(tmp_path / "d.tfrecord")
    with rf.RecordWriter(path, index=True) as w:
        for r in records(64):
            w.write(r)
    ds = (rf.Dataset.from_files(path).batch(8).parse(SPEC)
          .map(map_fns.batch_features, num_parallel=2, workers="process"))
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    seen = []

    def train():
        for b in rf.torch.loader(ds):
            x = b["x"]
            assert isinstance(x, torch.Tensor) and x.shape == (8, 16)
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen.extend(b["id"].tolist())

    bounded(train)
    assert seen == list(range(64))
