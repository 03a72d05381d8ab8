"""rf.diagnose and `recordflow doctor`: does training wait on data, where, and what would help.

The doctor runs a pipeline in three phases and reports what it measured. A wholly native
pipeline (simulated step or none) runs all of them in the engine (pipeline::Diagnose); with a
Python map/filter, the native stages before it run there as their own plan, and Python times
only the tail (the callables, the consumer, the step); docs/doctor.md says where each part runs.

1. **Alone**: the pipeline as fast as it goes, for ``seconds``. Gives the ceiling (elements/s,
   batches/s), the time to the first element, and each stage's *utilization*: the fraction of
   its available time it was busy (native stages from the engine's own ``it.stats()``; Python
   map/filter stages timed per call by a wrapper the doctor puts around the callable). The stage
   closest to 100% is the slowest stage: it sets the ceiling.
2. **With the step** (``step_fn(batch)``, or ``step_seconds`` simulated by sleeping, which uses
   no CPU, like a step on an accelerator): the time each step waited for its batch and the time
   it computed. The fraction of time spent waiting decides the verdict: input-bound when it is
   at least 10%.
3. **Variants**: for the cause found, the pipeline is rebuilt with one change (an interleave
   added, a Python map made parallel or removed, a bigger prefetch) and timed briefly, so the
   expected gain of each recommendation is measured. Changes that cannot be tried in a few
   seconds (decode on a GPU, re-converting files) come with an estimate, marked as such.

docs/doctor.md explains the rules and how to read the report. Example::

    report = rf.diagnose(ds, step_seconds=0.05)
    print(report)                  # the terminal report
    report.to_dict()["cause"]      # {"id": "python_map", "stage": "python_map_0", ...}
    report.write_html("timeline.html")"""

from recordflow.doctor.cli import PRESETS, build_preset, main
from recordflow.doctor.report import Report
from recordflow.doctor.rules import (
    HELPS_GAIN,
    INPUT_BOUND_WAIT_FRACTION,
    KEEPS_UP_MARGIN,
    READ_HEADROOM,
    RESHARD_TARGET_BYTES,
    error_name,
    reshard_command,
)
from recordflow.doctor.run import diagnose

__all__ = ["diagnose", "Report", "main", "PRESETS", "build_preset", "HELPS_GAIN",
           "INPUT_BOUND_WAIT_FRACTION", "KEEPS_UP_MARGIN", "READ_HEADROOM", "RESHARD_TARGET_BYTES",
           "error_name", "reshard_command"]
