"""One rank's slices for the timeline exporters: every span table in one frame, sorted, with launch->run pairs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from ktrace.model.schema import LAUNCH_CONFIG
from ktrace.model.trace import Trace

ARG_INT_COLUMNS = (*LAUNCH_CONFIG, "bytes", "correlation_id")
"""Integer columns written as slice args (debug annotations), when not null."""
ARG_STR_COLUMNS = ("copy_kind", "src_kind", "dst_kind", "sync_type", "domain")
"""String columns written as slice args, when not null."""
ARG_KEYS = ARG_INT_COLUMNS + ARG_STR_COLUMNS

KINDS = ("step", "range", "op", "api", "kernel", "memory", "sync", "gpu_range")
"""Slice kinds: `kind` column values. Thread tracks hold range/op/api, stream tracks kernel/memory."""
KIND_DTYPE = pl.Enum(KINDS)
"""The `kind` column's type: one byte per row to sort, gather and compare (a string column cost ~0.1 s per 2 M)."""
THREAD_KINDS = ("range", "op", "api")
STREAM_KINDS = ("kernel", "memory")


def kind_in(kind: pl.Series, kinds: Sequence[str]) -> np.ndarray:
    """Whether each row's kind (a KIND_DTYPE column) is one of `kinds`, on its 1-byte codes (no polars expression:
    each costs ~1 ms of planning a call)."""
    codes = (kind if kind.dtype == KIND_DTYPE else kind.cast(KIND_DTYPE)).to_physical().to_numpy()
    return np.isin(codes, [KINDS.index(k) for k in kinds]) if len(kinds) > 1 else codes == KINDS.index(kinds[0])


def _base(kind: str, name: pl.Expr, extra: Sequence[str]) -> list[pl.Expr]:
    cols = [
        pl.col("start_ns"),
        pl.col("end_ns"),
        name.cast(pl.Categorical).alias("name"),
        pl.lit(kind, KIND_DTYPE).alias("kind"),
    ]
    return cols + [pl.col(c).cast(pl.Categorical) if c in ARG_STR_COLUMNS else pl.col(c).cast(pl.Int64) for c in extra]


@dataclass(frozen=True)
class SlicePart:
    """One span table's share of a rank's slices: `rows` of `table` become slices of `kind` named by `name`, with
    the `extra` columns (cast as in rank_slices)."""

    table: pl.DataFrame
    rows: pl.Expr
    kind: str
    name: pl.Expr
    extra: tuple[str, ...]

    def exprs(self, columns: Sequence[str] | None = None) -> list[pl.Expr]:
        """The slice columns (start_ns, end_ns, name, kind and the extra columns; only `columns` if given) as
        expressions over `table`."""
        out = _base(self.kind, self.name, self.extra)
        return out if columns is None else [e for e in out if e.meta.output_name() in columns]

    def select(self, frame: pl.DataFrame) -> pl.DataFrame:
        """`frame` (rows of `table`) as slice columns."""
        return frame.select(self.exprs())


def rank_parts(trace: Trace, node: str, rank: int) -> list[SlicePart]:
    """The parts of a rank's slices in the order rank_slices concatenates them (the order ties keep)."""
    mine = (pl.col("rank") == rank) & (pl.col("node") == node) & (pl.col("end_ns") >= pl.col("start_ns"))
    is_step = pl.col("domain") == "profiler_step"
    thread_cols = ("pid", "tid")
    gpu_cols = ("device", "stream")
    name = pl.col("name")
    return [
        SlicePart(trace.ranges, mine & is_step & ~pl.col("on_gpu"), "step", name, thread_cols),
        SlicePart(trace.ranges, mine & ~is_step & ~pl.col("on_gpu"), "range", name, (*thread_cols, "domain")),
        SlicePart(trace.ranges, mine & pl.col("on_gpu"), "gpu_range", name, gpu_cols),
        SlicePart(trace.ops, mine, "op", name, thread_cols),
        SlicePart(trace.api, mine, "api", name, (*thread_cols, "correlation_id")),
        SlicePart(trace.kernels, mine, "kernel", name, (*gpu_cols, *ARG_INT_COLUMNS[:9], "correlation_id")),
        SlicePart(
            trace.memory,
            mine,
            "memory",
            _memory_name(),
            (*gpu_cols, "bytes", "correlation_id", "copy_kind", "src_kind", "dst_kind"),
        ),
        SlicePart(
            trace.syncs,
            mine,
            "sync",
            pl.concat_str(pl.lit("Sync "), pl.col("sync_type").cast(pl.String)),
            (*gpu_cols, "sync_type", "correlation_id"),
        ),
    ]


SLICE_COLUMNS = ("start_ns", "end_ns", "name", "kind", "pid", "tid", "device", "stream", *ARG_KEYS)
"""The columns of a rank's slices (rank_slices adds `row`)."""


def slice_frame(parts: list[pl.DataFrame], columns: Sequence[str] | None = None) -> pl.DataFrame:
    """Slice columns of some parts (from SlicePart.select) as one frame with every rank_slices column but `row`
    (or every one of `columns`), in the parts' order (not sorted)."""
    present = [p for p in parts if p.height]
    frame = pl.concat(present, how="diagonal_relaxed") if present else parts[0]
    have = set(frame.columns)
    wanted = set(SLICE_COLUMNS if columns is None else columns)
    fills: list[pl.Expr] = []  # one with_columns call: each costs ~0.5 ms of planning
    for c in ("pid", "tid", "device", "stream", *ARG_INT_COLUMNS):
        if c not in wanted:
            continue
        if c in ("device", "stream"):
            fills.append(pl.col(c).fill_null(-1) if c in have else pl.lit(-1, pl.Int64).alias(c))
        elif c not in have:
            fills.append(pl.lit(None, pl.Int64).alias(c))
    fills += [pl.lit(None, pl.Categorical).alias(c) for c in ARG_STR_COLUMNS if c not in have and c in wanted]
    return frame.with_columns(fills)


def rank_slices(trace: Trace, node: str, rank: int) -> pl.DataFrame:
    """Every slice of one rank, sorted by (start, -duration): the file order that keeps nesting intact.

    Columns: start_ns, end_ns, name, kind (see KINDS), pid, tid, device, stream, the ARG_KEYS columns, and `row`
    (0..n-1 in sorted order). The whole rank in one frame: the Perfetto export reads it window by window instead
    (perfetto_slice_windows).
    """
    parts = [p.select(p.table.filter(p.rows)) for p in rank_parts(trace, node, rank)]
    frame = slice_frame(parts)
    frame = frame[file_order(frame["start_ns"].to_numpy(), frame["end_ns"].to_numpy())]
    return frame.with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))


def file_order(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The permutation that sorts slices by (start, -duration), ties kept in input order (a stable sort).

    The parts rank_slices concatenates come mostly sorted by start (kernels per stream, API calls per thread), so
    numpy's stable argsort (timsort) of the start column merges a few long runs; only rows whose start ties with
    another's are then re-sorted by duration. On the 20 M slices of 10 M kernels: 0.5-0.6 s CPU, and with the one
    gather of every column 1.5-1.8 s vs 2.1-2.9 s for polars' sort on both keys (load 5).
    """
    order = np.argsort(start, kind="stable")
    s = start[order]
    tie = s[1:] == s[:-1]
    if not tie.any():
        return order
    tied = np.zeros(order.shape[0], np.bool_)
    tied[1:] |= tie
    tied[:-1] |= tie
    at = np.flatnonzero(tied)
    group = np.cumsum(np.concatenate(([True], ~tie)))[at]
    rows = order[at]
    order[at] = rows[np.lexsort((rows, start[rows] - end[rows], group))]
    return order


def _memory_name() -> pl.Expr:
    op = pl.col("op").cast(pl.String)
    return (
        pl.when(op == "memset")
        .then(pl.lit("Memset"))
        .otherwise(pl.concat_str(pl.lit("Memcpy "), pl.col("copy_kind").cast(pl.String)))
    )


def launch_pairs(slices: pl.DataFrame) -> pl.DataFrame:
    """(launch_row, gpu_row, launch_start, gpu_start) for every GPU record whose launch is in `slices`, by gpu_row.

    A launch is the earliest API call with the record's correlation id (its smallest row; launch_start is the
    smallest start among those calls); one launch may cause many records (CUDA graphs), each pair gets its own
    flow. Done on numpy columns: one sort of the launches' correlation ids and a binary search per GPU record.
    """
    cols = slices.select("kind", "correlation_id", "row", "start_ns").filter(pl.col("correlation_id").is_not_null())
    api = cols.filter(pl.col("kind") == "api")
    gpu = cols.filter(pl.col("kind").is_in(STREAM_KINDS))
    a_corr, a_row, a_start = (api[c].to_numpy() for c in ("correlation_id", "row", "start_ns"))
    order = np.argsort(a_corr, kind="stable")
    a_corr, a_row, a_start = a_corr[order], a_row[order], a_start[order]
    firsts = np.flatnonzero(np.r_[True, a_corr[1:] != a_corr[:-1]]) if a_corr.size else np.zeros(0, np.int64)
    ids = a_corr[firsts]
    launch_row = np.minimum.reduceat(a_row, firsts) if firsts.size else a_row[:0]
    launch_start = np.minimum.reduceat(a_start, firsts) if firsts.size else a_start[:0]
    g_corr, g_row, g_start = (gpu[c].to_numpy() for c in ("correlation_id", "row", "start_ns"))
    at = np.searchsorted(ids, g_corr).clip(0, max(ids.size - 1, 0))
    found = ids[at] == g_corr if ids.size else np.zeros(g_corr.size, bool)
    at, g_row, g_start = at[found], g_row[found], g_start[found]
    by_row = np.argsort(g_row, kind="stable")
    return pl.DataFrame(
        {
            "launch_row": launch_row[at][by_row],
            "gpu_row": g_row[by_row],
            "launch_start": launch_start[at][by_row],
            "gpu_start": g_start[by_row],
        },
        schema={"launch_row": pl.Int64, "gpu_row": pl.Int64, "launch_start": pl.Int64, "gpu_start": pl.Int64},
    )
