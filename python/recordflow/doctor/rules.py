"""The doctor's rules: the engine's pure functions of the measurements
(include/recordflow/pipeline/diagnose.h, shared with `recordflow doctor`), and how a
recommendation entry and an error are written down."""

from __future__ import annotations

from recordflow import _core

# The rules' thresholds are the engine's (pipeline::kInputBoundWaitFraction, ...; docs/doctor.md).
_THRESHOLDS = _core.DOCTOR_THRESHOLDS


INPUT_BOUND_WAIT_FRACTION = _THRESHOLDS["input_bound_wait_fraction"]


HELPS_GAIN = _THRESHOLDS["helps_gain"]


KEEPS_UP_MARGIN = _THRESHOLDS["keeps_up_margin"]


READ_HEADROOM = _THRESHOLDS["read_headroom"]


def _free_gain(stages: list[dict], stage_id: str, records_per_s: float | None = None) -> float:
    """Estimated speed-up if stage ``stage_id`` cost nothing (pipeline::FreeGain): an upper
    bound, capped at 10x."""
    return _core.doctor_free_gain(stages, stage_id, records_per_s)


# Shards of about this size: large enough that opening a file and restarting its read-ahead
# are a small share of reading it, small enough to spread over readers and hosts.
RESHARD_TARGET_BYTES = _core.DOCTOR_RESHARD_TARGET_BYTES


def reshard_command(paths: list[str], total_bytes: float, compression: str | None = None) -> tuple[str, int]:
    """The `recordflow reshard` command that rewrites ``paths`` (``total_bytes`` of output) into
    shards of about RESHARD_TARGET_BYTES, and the shard count N it computed
    (pipeline::ReshardCommand)."""
    return _core.doctor_reshard_command(list(paths), float(total_bytes), compression or "")


class _Rec:
    """Builds one recommendation entry."""

    @staticmethod
    def make(rid: str, stage: str | None, title: str, detail: str, *, gain: float | None = None,
             measured: bool = False, metric: str | None = None, baseline: float | None = None,
             variant: float | None = None, error: str | None = None,
             command: str | None = None) -> dict:
        return {"id": rid, "stage": stage, "title": title, "detail": detail,
                "gain": None if gain is None else round(gain, 3), "measured": measured,
                "helps": None if gain is None or not measured else gain >= HELPS_GAIN,
                "metric": metric, "baseline": baseline, "variant": variant, "error": error,
                "command": command}


def error_name(e: BaseException) -> str:
    """The status code name the other subcommands print for an error ("NotFound",
    "InvalidArgument", "IOError", ...): a recordflow error's own code, the fitting one for a
    built-in exception."""
    from recordflow import errors
    if isinstance(e, errors.Error) and e.code != "Unknown":
        return e.code
    for cls, name in ((FileNotFoundError, "NotFound"), (PermissionError, "PermissionDenied"),
                      (FileExistsError, "AlreadyExists"), (IsADirectoryError, "InvalidArgument"),
                      (NotADirectoryError, "InvalidArgument"), (OSError, "IOError"),
                      (ValueError, "InvalidArgument"), (MemoryError, "ResourceExhausted"),
                      (NotImplementedError, "Unimplemented")):
        if isinstance(e, cls):
            return name
    return "Internal"



def judge(measurements: dict) -> dict:
    """Verdict, cause and slowest stage (pipeline::JudgeMeasurements) from ``measurements``:
    ``stages``, ``batch_size``, ``elements_per_s`` (iterator elements), ``elements``,
    ``read_alone_records_per_s`` and ``step`` (None without one)."""
    return _core.doctor_judge(measurements)


def ordered(recs: list[dict]) -> list[dict]:
    """``recs`` in report order (pipeline::SortRecommendations): measured gains that help
    first, then estimates, then what was measured not to help."""
    return [recs[i] for i in _core.doctor_order(recs)]
