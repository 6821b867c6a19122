"""Pure model of the kernel table: filtered, sorted row order over the kernels frame, and formatted pages.

Sorting and filtering work on whole columns (polars arg_sort, is_in over the distinct names); only the rows of
the visible page are ever turned into Python values. Times are written by the same formatters as the details
pane and the ruler (ktrace.tui.viewmodel.format_duration / format_offset), so one value reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from ktrace.analysis.units import format_bytes
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
    Column("blk/SM", 8, None),
    Column("occ.", 6, pl.col("est_occupancy_pct")),
    Column("shared", 8, pl.col("static_shared_bytes").fill_null(0) + pl.col("dynamic_shared_bytes").fill_null(0)),
)
"""Columns in display order; the name takes the remaining width (at least NAME_MIN), before the launch figures
(grid, block, registers per thread, grid blocks per SM, Kineto's est. achieved occupancy, static + dynamic shared
memory per block), so a narrow terminal cuts those, not the kernel's name."""
SmCounts = Mapping[tuple[str, int, int], int]
"""(node, rank, device) -> the GPU's SM count (the devices table's sm_count, where the trace has it)."""
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


def sm_counts(devices: pl.DataFrame) -> dict[tuple[str, int, int], int]:
    """The SmCounts of a trace's devices table (empty without sm_count)."""
    if not {"node", "rank", "device", "sm_count"} <= set(devices.columns):
        return {}
    rows = devices.select(pl.col("node").cast(pl.String), "rank", "device", "sm_count").iter_rows()
    return {(str(n), int(r), int(d)): int(c) for n, r, d, c in rows if c}  # a few rows: one per GPU


def format_page(
    kernels: pl.DataFrame, rows: NDArray[np.int64], t0: int, sms: SmCounts | None = None
) -> list[list[str]]:
    """Cells (in COLUMNS order) of some rows: only these rows are materialized; blocks/SM where `sms` has the
    kernel's GPU."""
    if rows.size == 0:
        return []
    page = kernels[pl.Series(rows)].select(
        pl.col("node").cast(pl.String),
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
        "static_shared_bytes",
        "dynamic_shared_bytes",
        pl.col("est_occupancy_pct")
        if "est_occupancy_pct" in kernels.columns
        else pl.lit(None).alias("est_occupancy_pct"),
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
                _per_sm(blocks_per_sm(r, sms or {})),
                "-" if not r["est_occupancy_pct"] else f"{r['est_occupancy_pct']} %",  # 0: Kineto's "not estimated"
                _shared(r["static_shared_bytes"], r["dynamic_shared_bytes"]),
            ]
        )
    return out


def blocks_per_sm(rec: Mapping[str, Any], sms: SmCounts) -> tuple[float, int] | None:
    """(grid blocks / the GPU's SM count, that count) of a kernel row (Kineto's `blocks per SM`); None without
    either."""
    sm = sms.get((str(rec["node"]), int(rec["rank"]), int(rec["device"]))) if sms else None
    if sm is None or rec.get("grid_x") is None:
        return None
    return int(rec["grid_x"]) * int(rec.get("grid_y") or 1) * int(rec.get("grid_z") or 1) / sm, sm


def shared_bytes(static: int | None, dynamic: int | None) -> int | None:
    """Shared memory per block: static + dynamic bytes, None when the trace has neither."""
    return None if static is None and dynamic is None else (static or 0) + (dynamic or 0)


def _per_sm(found: tuple[float, int] | None) -> str:
    return "-" if found is None else f"{found[0]:,.2f}"


def _shared(static: int | None, dynamic: int | None) -> str:
    total = shared_bytes(static, dynamic)
    return "-" if total is None else format_bytes(total)


def _opt(v: object) -> str:
    return "-" if v is None else str(v)


def _dims(x: object, y: object, z: object) -> str:
    return "-" if x is None else f"{x}×{y}×{z}"
