"""Speed-up of a CPU-bound pure-Python `map` on 2 threads against 1 thread, and against worker
processes, on the interpreter that runs this script (meant for the free-threaded 3.13t venv
that scripts/freethreaded.sh builds; on a GIL interpreter the thread ratio is ~1.0x).

    ~/.cache/recordflow/venv-3.13t/bin/python bench/freethreaded_map.py [--elements 24] [--runs 5]

Prints, per executor, the median wall time of 1 and 2 workers over alternated runs and their
ratio, with the load average: the machine is shared, quote medians and ratios."""

import argparse
import os
import statistics
import sys
import sysconfig
import time

import recordflow as rf

SPEC = {"id": rf.FixedLen([], "int64")}


def burn(e, loops=400_000):
    """A fixed amount of CPU-bound pure-Python work (locals and small ints only)."""
    x = 0
    for i in range(loops):
        x += i & 7
    return {"id": int(e["id"]), "x": x}


def wall(n, num_parallel, workers):
    records = [rf.Example({"id": i}).serialize() for i in range(n)]
    ds = rf.Dataset.from_records(records).parse(SPEC).map(burn, num_parallel=num_parallel,
                                                          workers=workers)
    start = time.perf_counter()
    got = [int(e["id"]) for e in ds]
    elapsed = time.perf_counter() - start
    assert got == list(range(n)), "order or count changed"
    return elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elements", type=int, default=24)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    gil = sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True
    print(f"{sys.version.split()[0]} free-threaded build={bool(sysconfig.get_config_var('Py_GIL_DISABLED'))} "
          f"GIL enabled={gil}; {os.cpu_count()} CPUs; load average at start "
          f"{os.getloadavg()[0]:.1f}")
    print("| executor | 1 worker s | 2 workers s | speed-up |")
    print("|---|---:|---:|---:|")
    for workers in ("thread", "process"):
        one, two = [], []
        for _ in range(args.runs):
            one.append(wall(args.elements, 1, workers))
            two.append(wall(args.elements, 2, workers))
        m1, m2 = statistics.median(one), statistics.median(two)
        print(f"| {workers} | {m1:.3f} | {m2:.3f} | {m1 / m2:.2f}x |")
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
