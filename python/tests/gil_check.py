"""Shared check that a native call releases the GIL while it runs."""

import threading
import time


def progress_during(native_call, calls=20):
    """Runs native_call() `calls` times while another Python thread counts; returns how many
    counts landed strictly inside the calls. With the GIL held throughout a call, none can."""
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    t = threading.Thread(target=ticker)
    t.start()
    windows = []
    try:
        time.sleep(0.01)
        for _ in range(calls):
            begin = time.perf_counter()
            native_call()
            windows.append((begin, time.perf_counter()))
    finally:
        stop.set()
        t.join()
    return sum(1 for x in ticks if any(b < x < e for b, e in windows))
