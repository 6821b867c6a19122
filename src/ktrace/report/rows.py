"""Rows and numbers of the dashboard model as the JSON report has them, for the renderers that show them as text.

Every view prints the same numbers as the JSON document: frame rows come from summary.frame_records
(categoricals as text, floats rounded to FLOAT_DIGITS, NaN as None) and scalar floats are rounded the same way.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from ktrace.analysis.phases import JobPhases
from ktrace.analysis.rules.base import Evidence
from ktrace.analysis.summary import FLOAT_DIGITS, frame_records
from ktrace.report.format import fmt_num, fmt_time_range

COUNTER_STATS = ("min", "p50", "p95", "p99", "max")
"""The counter statistics the reports show."""


def rows(frame: pl.DataFrame | None) -> list[dict[str, Any]]:
    """The frame's rows as dicts keyed by column, as in the JSON report ([] for None or an empty frame)."""
    return frame_records(frame) or []


def json_float(value: float | None) -> float | None:
    """A float as the JSON report writes it: rounded to FLOAT_DIGITS, None for None, NaN and infinity."""
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return round(value, FLOAT_DIGITS)


def phase_rows(phases: JobPhases) -> list[tuple[str, int, float]]:
    """(phase, time in ns, % of the job) for initialization, the training loop and finalization."""
    return [
        ("initialization", phases.init_ns, _pct(phases.init_pct)),
        ("training loop", phases.training_ns, _pct(phases.training_pct)),
        ("finalization", phases.finalize_ns, _pct(phases.finalize_pct)),
    ]


def _pct(value: float) -> float:
    rounded = json_float(value)
    return 0.0 if rounded is None else rounded


def evidence_cells(e: Evidence) -> list[object]:
    """One evidence row: kind, when, node/rank, device, stream, what, value (absent fields blank)."""
    return [
        e.kind,
        fmt_time_range(e.start_ns, e.end_ns),
        "/".join(str(v) for v in (e.node, e.rank) if v is not None),
        _blank(e.device),
        _blank(e.stream),
        _blank(e.name),
        fmt_num(e.value),
    ]


def _blank(value: object) -> object:
    return "" if value is None else value
