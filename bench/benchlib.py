"""Helpers the benchmarks share: what machine and build a run was on, what else was running,
and rates printed the same way."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

import numpy as np

import recordflow as rf

HERE = Path(__file__).resolve().parent


def machine_info() -> dict:
    model, family, mnum = "unknown", "?", "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        k, _, v = line.partition(":")
        k, v = k.strip(), v.strip()
        if k == "model name" and model == "unknown":
            model = v
        elif k == "cpu family" and family == "?":
            family = v
        elif k == "model" and mnum == "?":
            mnum = v
    mem = 0.0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1]) / 2**20
    core = Path(rf._core.__file__)
    try:
        head = subprocess.run(["git", "-C", str(HERE), "log", "-1", "--format=%h %cI"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head = ""
    return {
        "recordflow_installed": datetime.datetime.fromtimestamp(
            core.stat().st_mtime, datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_head": head or "unknown",
        "cpu_model": model,
        "cpu_family": family,
        "cpu_model_number": mnum,
        "cores_online": os.cpu_count(),
        "mem_gib": round(mem, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "recordflow": getattr(rf, "__version__", "?"),
    }


def top_processes(n: int = 4) -> list[str]:
    try:
        out = subprocess.run(["ps", "-eo", "pcpu,pid,comm", "--sort=-pcpu", "--no-headers"],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    own = os.getpid()
    rows = [l.split(None, 2) for l in out.splitlines() if l.strip()]
    return [f"{c} ({p}) {pc}%" for pc, p, c in rows if int(p) != own][:n]


def fmt_rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"
