"""assert_trace_equal: two traces hold the same rows (order-insensitive) and the same meta counts."""

from __future__ import annotations

import polars as pl
from polars.testing import assert_frame_equal

from ktrace.model.schema import TABLES
from ktrace.model.trace import Trace


def _canonical(frame: pl.DataFrame) -> pl.DataFrame:
    cats = [c for c, t in frame.schema.items() if t == pl.Categorical]
    frame = frame.with_columns(pl.col(cats).cast(pl.String)) if cats else frame
    return frame.sort(frame.columns, nulls_last=True) if frame.height else frame


def assert_trace_equal(left: Trace, right: Trace, *, check_order: bool = False, check_meta: bool = True) -> None:
    """Raise AssertionError naming the first table that differs between `left` and `right`."""
    for name in TABLES:
        a, b = left.table(name), right.table(name)
        if not check_order:
            a, b = _canonical(a), _canonical(b)
        try:
            assert_frame_equal(a, b, check_dtypes=True, categorical_as_str=True)
        except AssertionError as exc:
            raise AssertionError(f"table {name!r} differs: {exc}") from None
    if check_meta:
        for attr in ("source", "schema_version", "clock", "health"):
            la, ra = getattr(left.meta, attr), getattr(right.meta, attr)
            if la != ra:
                raise AssertionError(f"meta.{attr} differs: {la!r} != {ra!r}")
