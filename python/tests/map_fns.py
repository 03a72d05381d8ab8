"""Module-level callables for test_map_workers.py and test_freethreaded.py (worker processes
import them by name), and the small dataset and hang-guard helpers both files use."""

import os
import threading
import time

import numpy as np

import recordflow as rf

SPEC = {"id": rf.FixedLen([], "int64")}
N = 40


def records(n=N):
    return [rf.Example({"id": i}).serialize() for i in range(n)]


def parsed(n=N):
    return rf.Dataset.from_records(records(n)).parse(SPEC)


def bounded(fn, seconds=60.0):
    """fn() on a thread; fails the test if it has not returned within ``seconds`` (a hang)."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"did not finish within {seconds} s (hang)"
    if "error" in box:
        raise box["error"]
    return box["value"]


def in_threads(fn, n=4):
    """fn(0), ..., fn(n - 1), each on its own thread, all at once; returns when all have."""
    threads = [threading.Thread(target=fn, args=(t,)) for t in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def error_at_7(it):
    """The ValueError that iterating `it` (a map of fail_at_7 over parsed()) raises, checked to
    come after elements 0 to 6, in order, and to carry element index 7."""
    import pytest  # not in map worker processes, which import this module too

    got = []
    with pytest.raises(ValueError, match="bad element 7") as e:
        for x in it:
            got.append(x)
    assert got == list(range(7))  # every element before it, in order
    assert e.value.rf_element_index == 7
    return e.value


def double_id(e):
    return {"id": e["id"] * 2, "pid": os.getpid()}


def spin(e, seconds=0.02):
    """CPU-bound pure Python for ``seconds`` (the GIL held), then the element's id and pid."""
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        x += 1
    return {"id": int(e["id"]), "pid": os.getpid()}


def spin_5ms(e):
    return spin(e, 0.005)


def big_array(e):
    i = int(e["id"])
    return {"id": i, "image": np.full((256, 256, 3), i % 251, np.uint8), "pid": os.getpid()}


def fail_at_7(e):
    if int(e["id"]) == 7:
        raise ValueError(f"bad element {int(e['id'])}")
    return int(e["id"])


def exit_at_5(e):
    if int(e["id"]) == 5:
        os._exit(3)
    return int(e["id"])


def kill_at_5(e):
    if int(e["id"]) == 5:
        os.kill(os.getpid(), 9)
    return int(e["id"])


def _id(e):
    return int(e["id"]) if isinstance(e, dict) else int(e)


def is_even(e):
    return _id(e) % 2 == 0


def slow_is_even(e):
    spin({"id": _id(e)}, 0.002)
    return _id(e) % 2 == 0


def ident(e):
    return int(e["id"])


class Unpicklable(Exception):
    def __init__(self, a, b):  # pickles as (message,) and cannot be rebuilt from it
        super().__init__(f"{a}-{b}")


def raise_unpicklable(e):
    raise Unpicklable(1, 2)


def checksum(e):
    return int(e["image"].sum())


def sleep_5ms(e):
    time.sleep(0.005)
    return int(e["id"])


def batch_features(b):
    ids = np.asarray(b["id"])
    return {"id": ids, "x": np.repeat(ids[:, None].astype(np.float32), 16, axis=1) / 64}


def draw(e):
    import random
    return (random.random(), float(np.random.random_sample()))


def spin_fail_at_20(e):
    if int(e["id"]) == 20:
        raise KeyError("no feature at 20")
    return spin_5ms(e)

