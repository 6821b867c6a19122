"""Pure model of the kernel table: filtered, sorted row order over the kernels frame, and formatted pages.

Sorting and filtering work on whole columns (polars arg_sort, is_in over the distinct names); only the rows of
the visible page are ever turned into Python values. Times are written by the same formatters as the details
pane and the ruler (ktrace.tui.viewmodel.format_duration / format_offset), so one value reads the same everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from numpy.typing import NDArray

from ktrace.tui.viewmodel import format_duration, format_signed_offset


@dataclass(frozen=True)
class Column:
    """A kernel table column: header, width and the sort expression."""

    header: str
    width: int
    sort: pl.Expr | None


COLUMNS: tuple[Column, ...] = (
    Column("duration", 10, pl.col("end_ns") - pl.col("start_ns")),
    Column("start", 13, pl.col("start_ns")),
    Column("rank", 5, pl.col("rank")),
    Column("GPU", 4, pl.col("device")),
    Column("stream", 7, pl.col("stream")),
    Column("name", 0, pl.col("name").cast(pl.String)),
    Column("grid", 12, None),
    Column("block", 10, None),
    Column("regs", 6, pl.col("registers_per_thread")),
)
"""Columns in display order; the name takes the remaining width (at least NAME_MIN), before grid and block, so a
narrow terminal cuts the launch configuration, not the kernel's name."""
NAME = next(i for i, c in enumerate(COLUMNS) if c.header == "name")
NAME_MIN = 24
SORTABLE = tuple(i for i, c in enumerate(COLUMNS) if c.sort is not None)


def kernel_order(kernels: pl.DataFrame, sort: int = 0, descending: bool = True, text: str = "") -> NDArray[np.int64]:
    """Row indices of `kernels` whose name contains `text` (case-insensitive), sorted by column `sort`."""
    expr = COLUMNS[sort].sort
    assert expr is not None
    if kernels.height == 0:
        return np.empty(0, np.int64)
    frame = kernels.select(expr.alias("_key"), pl.col("name"))
    if text:
        names = kernels["name"].unique()
        wanted = names.filter(names.cast(pl.String).str.to_lowercase().str.contains(text.lower(), literal=True))
        frame = frame.with_row_index("_row").filter(pl.col("name").is_in(wanted.implode()))
        order = frame["_key"].arg_sort(descending=descending, nulls_last=True).to_numpy()
        return frame["_row"].to_numpy().astype(np.int64)[order]
    return frame["_key"].arg_sort(descending=descending, nulls_last=True).to_numpy().astype(np.int64)


def format_page(kernels: pl.DataFrame, rows: NDArray[np.int64], t0: int) -> list[list[str]]:
    """Cells (in COLUMNS order) of some rows: only these rows are materialized."""
    if rows.size == 0:
        return []
    page = kernels[pl.Series(rows)].select(
        "start_ns",
        "end_ns",
        "rank",
        "device",
        "stream",
        "grid_x",
        "grid_y",
        "grid_z",
        "block_x",
        "block_y",
        "block_z",
        "registers_per_thread",
        pl.col("name").cast(pl.String),
    )
    out = []
    for r in page.iter_rows(named=True):
        out.append(
            [
                format_duration(r["end_ns"] - r["start_ns"]),
                format_signed_offset(r["start_ns"] - t0),
                str(r["rank"]),
                str(r["device"]),
                _opt(r["stream"]),
                r["name"] or "",
                _dims(r["grid_x"], r["grid_y"], r["grid_z"]),
                _dims(r["block_x"], r["block_y"], r["block_z"]),
                _opt(r["registers_per_thread"]),
            ]
        )
    return out


def _opt(v: object) -> str:
    return "-" if v is None else str(v)


def _dims(x: object, y: object, z: object) -> str:
    return "-" if x is None else f"{x}×{y}×{z}"
