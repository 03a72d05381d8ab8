#!/usr/bin/env python3
"""A Python map in series with the training step (the doctor's "waiting on a Python map"
finding) against the same map in worker processes:

    python bench/python_map.py [--elements 300] [--map-ms 5] [--step-ms 2] [--workers 2] [--runs 3]

Pipeline: in-memory tf.train.Examples -> parse -> map(fn) where fn spends ``--map-ms`` of CPU
in pure Python (the GIL held) and returns a 64 KiB float32 array (it crosses through shared
memory). The loop's "training step" sleeps ``--step-ms`` per element (a GPU step: the consumer
thread idle). For each mode (``workers="inline"``: the consuming thread; ``"process"``:
``--workers`` processes), the first 10% of the elements warm the pool up and are not counted;
over the rest it reports ms per step (loop time / elements), the consumer's wait (seconds
inside next() / loop time) and the consuming thread's CPU ms per element (the map's cost it
pays: load-independent, unlike wall time on a shared machine; the load average is printed). Runs alternate between the modes; medians of ``--runs``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import recordflow as rf

SPEC = {"id": rf.FixedLen([], "int64")}
MAP_SECONDS = 0.005  # set from --map-ms in main(); workers get it through the element


def cpu_map(e):
    """``seconds`` of pure-Python CPU work, then a 64 KiB array (a decoded feature)."""
    end = time.thread_time() + float(e["seconds"])
    x = 0
    while time.thread_time() < end:
        x += 1
    return {"id": int(e["id"]), "feature": np.full(16384, float(e["id"]), np.float32)}


def with_seconds(seconds):
    return _AddSeconds(seconds)


class _AddSeconds:
    """Picklable: adds the map's cost to each element (so workers need no global state)."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __call__(self, e):
        return {"id": e["id"], "seconds": self.seconds}


def run(mode: str, n: int, map_s: float, step_s: float, workers: int) -> tuple:
    records = [rf.Example({"id": i}).serialize() for i in range(n)]
    ds = (rf.Dataset.from_records(records).parse(SPEC)
          .map(with_seconds(map_s), workers="inline")
          .map(cpu_map, num_parallel=1 if mode == "inline" else workers, workers=mode))
    it = ds.iterator()
    warm = max(1, n // 10)
    waited = 0.0
    start = None
    count = 0
    while True:
        t0 = time.perf_counter()
        e = next(it, None)
        t1 = time.perf_counter()
        if e is None:
            break
        assert e["id"] == count and e["feature"][0] == count
        count += 1
        if count == warm:
            start = time.perf_counter()
            cpu = time.thread_time()
        elif count > warm:
            waited += t1 - t0
        time.sleep(step_s)  # the training step
    total = time.perf_counter() - start
    cpu = time.thread_time() - cpu
    counted = n - warm
    it.close()
    return 1e3 * total / counted, waited / total, 1e3 * cpu / counted


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--elements", type=int, default=300)
    p.add_argument("--map-ms", type=float, default=5.0)
    p.add_argument("--step-ms", type=float, default=2.0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    results = {"inline": [], "process": []}
    for _ in range(a.runs):
        for mode in results:
            results[mode].append(run(mode, a.elements, a.map_ms / 1e3, a.step_ms / 1e3,
                                     a.workers))
    med = {m: [statistics.median(r[k] for r in rs) for k in range(3)]
           for m, rs in results.items()}
    print(f"map {a.map_ms} ms/element (pure Python), step {a.step_ms} ms, "
          f"{a.elements} elements, median of {a.runs}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'mode':<28}{'ms/step':>10}{'consumer wait':>16}{'consumer CPU ms/el':>20}")
    for mode, (ms, wait, cpu) in med.items():
        label = "inline (consuming thread)" if mode == "inline" else f"process ({a.workers} workers)"
        print(f"{label:<28}{ms:>10.2f}{wait:>15.1%}{cpu:>20.2f}")
    print(f"step time ratio inline/process: {med['inline'][0] / med['process'][0]:.2f}x")


if __name__ == "__main__":
    main()
