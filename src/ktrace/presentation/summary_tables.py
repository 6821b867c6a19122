"""What every summary section builder shares: a summary frame's rows as the JSON has them, and a Table of them.

Rows keep raw values (ints in ns, shares 0-1, trace text as recorded); the Column says how a view writes them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import polars as pl

from ktrace.analysis.summary import FLOAT_DIGITS
from ktrace.presentation.cells import Unit
from ktrace.presentation.json_rows import frame_records
from ktrace.presentation.page import Column, Table


def frame_rows(frame: pl.DataFrame | None) -> list[dict[str, Any]]:
    """The frame's rows as dicts keyed by column, as in the summary JSON ([] for None or an empty frame)."""
    return frame_records(frame) or []


def json_float(value: float | None) -> float | None:
    """A float as the JSON writes it: rounded to FLOAT_DIGITS, None for None, NaN and infinity."""
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return round(value, FLOAT_DIGITS)


def typed_columns(keys: Sequence[str], units: Mapping[str, Unit] | None = None) -> tuple[Column, ...]:
    """Columns of these keys, units read from the keys except those given in `units` (a text column whose key
    does not say so: "idle_category", "late")."""
    given = units or {}
    return tuple(Column(k, unit=given.get(k)) for k in keys)


def rows_table(
    key: str,
    title: str,
    found: Sequence[Mapping[str, Any]],
    keys: Sequence[str] | None = None,
    *,
    bar: str | None = None,
    units: Mapping[str, Unit] | None = None,
    rest: int = 0,
    rest_what: str = "rows",
    lines: tuple[str, ...] = (),
) -> Table:
    """A Table of `found` under the columns `keys` (default: the first row's keys; none without rows)."""
    shown = list(keys) if keys is not None else (list(found[0].keys()) if found else [])
    return Table(
        key=key,
        title=title,
        columns=typed_columns(shown, units),
        rows=tuple(found),
        bar=bar,
        rest=rest,
        rest_what=rest_what,
        lines=lines,
    )


def frame_table(
    key: str,
    title: str,
    frame: pl.DataFrame | None,
    keys: Sequence[str] | None = None,
    *,
    bar: str | None = None,
    units: Mapping[str, Unit] | None = None,
) -> Table:
    """A Table of a summary frame's rows (as in the JSON) under the columns `keys` (default: all of them)."""
    return rows_table(key, title, frame_rows(frame), keys, bar=bar, units=units)


RANK_TABLE_ROWS = 32
"""Rows a per-rank or per-device table shows (at 64 ranks the idle table alone had 256); the JSON has them all."""


def capped(table: Table, by: str, *, descending: bool, first: str, limit: int = RANK_TABLE_ROWS) -> Table:
    """`table` as it is up to `limit` rows; above, its `limit` rows first by column `by` (nulls last; `first` says
    which come first: "most idle"), and how many it left out."""
    if len(table.rows) <= limit:
        return table
    known = [r for r in table.rows if r[by] is not None]
    ordered = sorted(known, key=lambda r: r[by], reverse=descending) + [r for r in table.rows if r[by] is None]
    title = f"{table.title}; {limit} of {len(table.rows):,} rows, {first} first"
    return replace(table, title=title, rows=tuple(ordered[:limit]), rest=len(table.rows) - limit)
