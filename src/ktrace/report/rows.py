"""Rows and numbers of the dashboard model as the JSON report has them, for the renderers that show them as text.

Every view prints the same numbers as the JSON document: frame rows come from presentation.json_rows.frame_records
(categoricals as text, floats rounded to FLOAT_DIGITS, NaN as None) and scalar floats are rounded the same way.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from ktrace.analysis.phases import JobPhases
from ktrace.analysis.summary import FLOAT_DIGITS
from ktrace.presentation.json_rows import frame_records


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
