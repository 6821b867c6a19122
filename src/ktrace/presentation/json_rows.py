"""Values as the JSON documents hold them: frames as row dicts, floats rounded to FLOAT_DIGITS, NaN and
infinity as null."""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from ktrace.analysis.summary import FLOAT_DIGITS


def clean(value: Any) -> Any:
    """`value` made JSON-ready: floats rounded to FLOAT_DIGITS (NaN and infinity as None), dict keys as strings,
    tuples and lists as lists, every level down."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, FLOAT_DIGITS)
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def frame_records(frame: pl.DataFrame | None) -> list[dict[str, Any]] | None:
    """A frame as JSON-ready row dicts: categoricals as strings, floats rounded, NaN as null."""
    if frame is None:
        return None
    plain = frame.with_columns(pl.col(pl.Categorical).cast(pl.String))
    return [clean(row) for row in plain.to_dicts()]
