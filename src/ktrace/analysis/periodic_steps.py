"""Inferred (periodic) training steps: the kernel whose start-to-start intervals repeat most regularly marks them.

steps.detect_steps' fallback for ranks without step ranges (its module docstring says when and how sure).
The kernels are taken as integer arrays (the index's rank ids and lexical name codes), grouped by (rank, name)
with one counting sort, and scored by a numba pass: never as per-row strings. A polars frame of every
kernel's node and name strings, sorted whole and grouped, held ~2.1 GB at 20 M kernels (and polars' allocator
kept it resident under the next analyses); only the marker kernels' rows get their strings back, at the end.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl
from polars.datatypes import DataTypeClass

from ktrace.analysis._kernels.periodic import gap_spread
from ktrace.analysis.breakdown import communication_names
from ktrace.analysis.columns import dense_ids, time_order_with_times
from ktrace.analysis.index import TraceIndex

PERIODIC_MIN_STEPS = 5
"""Inferred (periodic) steps: at least this many per rank (intervals between the marker kernel's runs)."""
PERIODIC_MAX_CV = 0.1
"""... whose durations vary by at most this coefficient of variation (std / mean) ..."""
PERIODIC_MIN_COVER = 0.5
"""... and that together cover at least this share of the rank's kernel span."""


def periodic_steps(index: TraceIndex, annotated: pl.DataFrame, schema: Mapping[str, DataTypeClass]) -> pl.DataFrame:
    """Steps inferred from a periodic kernel on every rank of the trace without step ranges.

    Args:
        index: the trace's TraceIndex (its kernels' rank ids and name codes).
        annotated: node, rank of the ranks that have step ranges (they get no inferred steps).
        schema: the steps frame's columns and types (steps._STEP_SCHEMA).

    Returns:
        One row per step (source "periodic"), sorted by node, rank, start_ns; empty without a confident marker.
    """
    kernels = index.trace.kernels
    empty = pl.DataFrame(schema=schema)
    if kernels.height == 0:
        return empty
    keys, rank_id = index.table_rank_ids("kernels")
    codes, names = index.kernel_name_codes()
    start = kernels["start_ns"].to_numpy()
    skipped = keys.with_row_index("g").join(annotated.cast({"rank": pl.Int32}), on=["node", "rank"])["g"]
    mine = ~np.isin(rank_id, skipped.to_numpy()) if skipped.len() else None
    span = _rank_spans(rank_id, start, kernels["end_ns"].to_numpy(), keys.height, mine)
    # A collective is not a step marker: it runs as often as the program communicates (several per step, or one
    # per layer), and a rank that waits for another starts it late, so its period is the job's, not the step's.
    code_of = {name: i for i, name in enumerate(names)}
    comm = [code_of[n] for n in communication_names(index.trace, index=index) if n in code_of]
    keep = (codes >= 0) & kernels["collective"].is_null().to_numpy()
    if comm:
        keep &= ~np.isin(codes, comm)
    if mine is not None:
        keep &= mine
    if not keep.any():
        return empty
    if not keep.all():
        rows = np.flatnonzero(keep)
        rank_id, codes, start = rank_id[rows], codes[rows], start[rows]
        del rows
    del keep, mine
    gid, (group_rank, group_code) = dense_ids([rank_id, codes])
    perm, bounds, ordered = time_order_with_times(gid, int(group_rank.size), start)
    del gid, perm
    n = np.diff(bounds)
    covered = ordered[bounds[1:] - 1] - ordered[bounds[:-1]]
    score = pl.DataFrame(
        {"g": group_rank, "code": group_code, "group": np.arange(n.size), "n": n, "cv": gap_spread(ordered, bounds)}
    ).filter(
        (pl.col("n") > PERIODIC_MIN_STEPS)
        & (pl.col("cv") <= PERIODIC_MAX_CV)
        & pl.Series(covered >= PERIODIC_MIN_COVER * span[group_rank])
    )
    chosen = score.sort("cv", "n", "code").unique("g", keep="first").sort("g")
    if chosen.height == 0:
        return empty
    parts = []
    for g, code, group in chosen.select("g", "code", "group").iter_rows():
        times = ordered[bounds[group] : bounds[group + 1]]
        parts.append(
            pl.DataFrame({"start_ns": times[:-1], "end_ns": times[1:]}).select(
                node=pl.lit(keys["node"][g], pl.String),
                rank=pl.lit(keys["rank"][g], pl.Int32),
                step=pl.int_range(pl.len(), dtype=pl.Int64),
                name=pl.lit(names[code], pl.String),
                start_ns="start_ns",
                end_ns="end_ns",
                duration_ns=pl.col("end_ns") - pl.col("start_ns"),
                pid=pl.lit(None, pl.Int64),
                tid=pl.lit(None, pl.Int64),
                source=pl.lit("periodic"),
            )
        )
    return pl.concat(parts).select(list(schema)).cast(dict(schema))  # type: ignore[arg-type]


def _rank_spans(
    rank_id: np.ndarray, start: np.ndarray, end: np.ndarray, n_ranks: int, mine: np.ndarray | None
) -> np.ndarray:
    """Per rank id: its kernels' last end minus first start (0 for a rank with none of `mine`)."""
    if mine is not None and not mine.all():
        rows = np.flatnonzero(mine)
        rank_id, start, end = rank_id[rows], start[rows], end[rows]
    first = np.full(n_ranks, np.iinfo(np.int64).max, np.int64)
    last = np.full(n_ranks, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(first, rank_id, start)
    np.maximum.at(last, rank_id, end)
    return np.where(last >= first, last - first, 0)
