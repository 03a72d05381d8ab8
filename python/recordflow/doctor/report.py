"""The doctor's report: the data, and its text and HTML renderings (the engine's
pipeline::RenderText / RenderHtml, the ones `recordflow doctor` prints)."""

from __future__ import annotations

import json
from typing import Any

from recordflow import _core


class Report:
    """What rf.diagnose measured and concluded. ``str(report)``: the terminal report;
    :meth:`to_dict`: the same as plain data (``--json``); :meth:`write_html`: a timeline of
    per-step wait vs compute."""

    def __init__(self, data: dict, timeline: list[tuple[float, float]]):
        self._data = data
        self._timeline = timeline

    def to_dict(self) -> dict:
        """The report as JSON-serializable data (see docs/doctor.md for the fields)."""
        return json.loads(json.dumps(self._data))

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    @property
    def timeline(self) -> list[tuple[float, float]]:
        """(wait_seconds, compute_seconds) of each measured step (empty without a step)."""
        return list(self._timeline)

    def __str__(self) -> str:
        return _render_text(self._data)

    def __repr__(self) -> str:
        cause = self._data["cause"]
        return f"<rf.doctor.Report verdict={self._data['verdict']!r} cause={cause['id']!r}>"

    def write_html(self, path: str) -> None:
        """Writes a self-contained HTML page: the report and a per-step wait/compute timeline."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(_render_html(self._data, self._timeline))


def _render_text(d: dict) -> str:
    """The terminal report (pipeline::RenderText, the one `recordflow doctor` prints)."""
    return _core.doctor_render_text(d)


def _render_html(d: dict, timeline: list[tuple[float, float]]) -> str:
    """The HTML page (pipeline::RenderHtml): verdict, what would help, the per-step timeline,
    the stages, the text and this report's JSON."""
    return _core.doctor_render_html(d, [w for w, _ in timeline], [c for _, c in timeline],
                                    json.dumps(d, indent=2))
