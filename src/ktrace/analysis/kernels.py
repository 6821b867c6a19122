"""Top kernels by total GPU time and by launch count, with count/min/mean/p50/p95/max/total and shares."""

from __future__ import annotations

from typing import Literal

import numpy as np
import polars as pl

from ktrace.analysis.columns import dense_ids
from ktrace.analysis.index import Slot, TraceIndex
from ktrace.model.trace import Trace

OTHER = "other"
"""Name of the row that aggregates every kernel below the top N."""

SortKey = Literal["time", "count"]

KERNEL_STATS_SLOT = Slot[pl.DataFrame]("kernel_stats")
_STAT_COLUMNS = ("count", "total_ns", "min_ns", "mean_ns", "p50_ns", "p95_ns", "max_ns")


def _keys(per_rank: bool) -> list[str]:
    return ["node", "rank"] if per_rank else []


def kernel_stats(trace: Trace, *, per_rank: bool = False, index: TraceIndex | None = None) -> pl.DataFrame:
    """Statistics of every distinct kernel name (all ranks together, or per node/rank).

    Args:
        trace: the trace.
        per_rank: one row per (node, rank, name) instead of per name.
        index: the trace's TraceIndex.

    Returns:
        [``node``, ``rank``,] ``name`` (String), ``count``, ``total_ns``, ``min_ns``, ``mean_ns`` (float),
        ``p50_ns``, ``p95_ns`` (float, linear interpolation), ``max_ns``, ``time_share`` and
        ``count_share`` (0-1, of all kernel time/launches in the same group: the rank, or the trace),
        and per name (not per rank) EFFICIENCY_COLUMNS (kernel_efficiency's time-weighted means),
        sorted by total time descending then name.
    """
    ix = TraceIndex.of(trace, index)
    return ix.get(KERNEL_STATS_SLOT, lambda: _with_efficiency(ix, _kernel_stats(ix, per_rank), per_rank), per_rank)


def _with_efficiency(ix: TraceIndex, stats: pl.DataFrame, per_rank: bool) -> pl.DataFrame:
    """Per name (not per rank): kernel_stats with EFFICIENCY_COLUMNS joined on the name."""
    if per_rank:
        return stats
    means = efficiency_means(efficiency_sums(ix.trace, index=ix)).select("name", *EFFICIENCY_COLUMNS)
    return stats.join(means, on="name", how="left", nulls_equal=True, maintain_order="left")


def _kernel_stats(ix: TraceIndex, per_rank: bool) -> pl.DataFrame:
    from ktrace.analysis._kernels.groups import linear_quantiles
    from ktrace.analysis._kernels.scatter import duration_groups

    keys = _keys(per_rank)
    k = ix.trace.kernels
    code, names = ix.kernel_name_codes()
    c = ix.gpu_columns()
    rank_keys, rank_id = ix.table_rank_ids("kernels")
    if per_rank:
        gid, uniq = dense_ids([rank_id, code])
    else:  # name codes are dense by construction (every distinct name occurs); null (-1) first
        lo = -1 if k["name"].null_count() else 0
        gid, uniq = (code - lo if lo else code), [np.arange(lo, len(names), dtype=np.int64)]
        if k.height == 0:
            uniq = [np.zeros(0, np.int64)]
    n = int(uniq[0].size)
    nk = c.n_kernels
    count, total, lo_ns, hi, bounds, dur = duration_groups(gid, c.start[:nk], c.end[:nk], n)
    q = linear_quantiles(dur, bounds, (0.5, 0.95))
    labels = pl.Series("name", [*names, None], dtype=pl.String).gather(np.where(uniq[-1] >= 0, uniq[-1], len(names)))
    front = rank_keys[uniq[0]] if per_rank else pl.DataFrame({"name": labels})
    stats = front.with_columns(
        name=labels,
        count=pl.Series(count, dtype=pl.Int64),
        total_ns=pl.Series(total, dtype=pl.Int64),
        min_ns=pl.Series(lo_ns, dtype=pl.Int64),
        mean_ns=pl.Series(total / np.maximum(count, 1), dtype=pl.Float64),
        p50_ns=pl.Series(q[:, 0]),
        p95_ns=pl.Series(q[:, 1]),
        max_ns=pl.Series(hi, dtype=pl.Int64),
    )
    over = keys or None
    total_time = pl.col("total_ns").sum().over(over) if over else pl.col("total_ns").sum()
    total_count = pl.col("count").sum().over(over) if over else pl.col("count").sum()
    return (
        stats.lazy()
        .with_columns(time_share=pl.col("total_ns") / total_time, count_share=pl.col("count") / total_count)
        .sort([*keys, "total_ns", "name"], descending=[False] * len(keys) + [True, False])
        .collect()
    )


def top_kernels(
    trace: Trace,
    *,
    by: SortKey = "time",
    top: int = 15,
    per_rank: bool = False,
    other: bool = True,
    stats: pl.DataFrame | None = None,
    index: TraceIndex | None = None,
) -> pl.DataFrame:
    """The top `top` kernels by total time or launch count, the rest folded into one "other" row.

    Args:
        trace: the trace.
        by: "time" (total GPU time) or "count" (launches).
        top: how many kernels to list; 0 or less lists all.
        per_rank: rank the kernels within each (node, rank).
        other: add the "other" row (omitted when nothing is left over).
        stats: a precomputed ``kernel_stats(trace, per_rank=per_rank)`` to reuse.
        index: the trace's TraceIndex.

    Returns:
        The columns of kernel_stats plus ``position`` (1-based; the "other" row has null). The "other"
        row has count/total/min/max over the rest, mean = total / count and null percentiles and efficiency.
    """
    base = stats if stats is not None else kernel_stats(trace, per_rank=per_rank, index=index)
    return top_of_stats(base, by=by, top=top, per_rank=per_rank, other=other)


def top_of_stats(
    base: pl.DataFrame, *, by: SortKey = "time", top: int = 15, per_rank: bool = False, other: bool = True
) -> pl.DataFrame:
    """top_kernels of a kernel_stats frame (also one reduced from many ranks' partials, analysis.rank_reduce)."""
    if by not in ("time", "count"):
        raise ValueError(f"by must be 'time' or 'count', not {by!r}")
    keys = _keys(per_rank)
    sort_col = "total_ns" if by == "time" else "count"
    ordered = base.sort([*keys, sort_col, "name"], descending=[False] * len(keys) + [True, False])
    position = pl.int_range(1, pl.len() + 1).over(keys) if keys else pl.int_range(1, pl.len() + 1)
    ordered = ordered.with_columns(position=position.cast(pl.Int64))
    if top <= 0:
        return ordered
    head = ordered.filter(pl.col("position") <= top)
    rest = ordered.filter(pl.col("position") > top)
    if not other or rest.height == 0:
        return head
    agg = rest.group_by(keys) if keys else None
    exprs = [
        pl.lit(OTHER).alias("name"),
        pl.col("count").sum().cast(pl.Int64),
        pl.col("total_ns").sum().cast(pl.Int64),
        pl.col("min_ns").min().cast(pl.Int64),
        (pl.col("total_ns").sum() / pl.col("count").sum()).cast(pl.Float64).alias("mean_ns"),
        pl.lit(None, pl.Float64).alias("p50_ns"),
        pl.lit(None, pl.Float64).alias("p95_ns"),
        pl.col("max_ns").max().cast(pl.Int64),
        pl.col("time_share").sum(),
        pl.col("count_share").sum(),
        pl.lit(None, pl.Int64).alias("position"),
        *[pl.lit(None, pl.Float64).alias(c) for c in EFFICIENCY_COLUMNS if c in base.columns],
    ]
    other_rows = agg.agg(exprs) if agg is not None else rest.select(exprs)
    other_rows = other_rows.select(head.columns)
    return (
        pl.concat([head, other_rows]).sort([*keys, pl.col("position").is_null(), "position"])
        if keys
        else pl.concat([head, other_rows])
    )


EFFICIENCY_COLUMNS = ("blocks_per_sm", "est_occupancy_pct", "registers_per_thread", "shared_bytes")
"""kernel_efficiency's launch figures, each a time-weighted mean per kernel name (as TensorBoard's profiler showed
them): blocks per SM (grid blocks / the device's SM count, Kineto's `blocks per SM`), estimated achieved occupancy
(%, Kineto's `est. achieved occupancy %`), registers per thread, shared memory per block (static + dynamic bytes)."""
_EFFICIENCY = Slot[pl.DataFrame]("kernel_efficiency_sums")
WSUM_SCALE = 1_000_000
"""efficiency_sums keeps figure x ns in millionths, as Int128: exact in any order of ranks, 6 decimals kept."""


def kernel_efficiency(trace: Trace, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """Per kernel name: the time-weighted mean of each of EFFICIENCY_COLUMNS and occupancy_ns.

    Each mean weighs a kernel by its duration and counts only the kernels that carry the figure (blocks per SM
    needs the device's SM count; occupancy comes from Kineto; nsys and `ktrace run` give registers and shared
    memory); null where none does. An occupancy of 0 counts as none: Kineto writes 0 where it could not estimate
    one (NCCL kernels, cluster-launched sm90 GEMMs), and a kernel that ran had a block resident. occupancy_ns is
    the GPU time of the kernels with an occupancy.

    Returns:
        name (String), EFFICIENCY_COLUMNS (Float64), occupancy_ns (Int64); one row per name, in name order.
    """
    sums = efficiency_sums(trace, index=index)
    return efficiency_means(sums).select(
        "name", *EFFICIENCY_COLUMNS, pl.col("est_occupancy_pct_w").alias("occupancy_ns")
    )


def efficiency_sums(trace: Trace, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """Per kernel name, for each of EFFICIENCY_COLUMNS: ``{c}_wsum`` (the figure x duration in ns x WSUM_SCALE,
    each rounded to an Int128, summed) and ``{c}_w`` (the duration of the kernels carrying it): integers, so they
    add up over ranks exactly in any order (efficiency_means reads them)."""
    ix = TraceIndex.of(trace, index)
    return ix.get(_EFFICIENCY, lambda: _efficiency_sums(ix))


def efficiency_means(sums: pl.DataFrame) -> pl.DataFrame:
    """efficiency_sums' frame (a trace's, or several ranks' added up) with EFFICIENCY_COLUMNS: each wsum / w,
    null where no kernel carried the figure."""
    return sums.with_columns(
        pl.when(pl.col(f"{c}_w") > 0).then(pl.col(f"{c}_wsum") / WSUM_SCALE / pl.col(f"{c}_w")).alias(c)
        for c in EFFICIENCY_COLUMNS
    )


KERNEL_FIGURES_SLOT = Slot[pl.DataFrame]("kernel_figures")


def kernel_figures(trace: Trace, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """Per kernel (trace.kernels row order): w (its duration, ns) and EFFICIENCY_COLUMNS (Float64, null where the
    kernel does not carry the figure; an occupancy of 0 is Kineto's "not estimated")."""
    ix = TraceIndex.of(trace, index)
    return ix.get(KERNEL_FIGURES_SLOT, lambda: _kernel_figures(ix))


def efficiency_sum_exprs(columns: tuple[str, ...] = EFFICIENCY_COLUMNS) -> list[pl.Expr]:
    """The aggregations of efficiency_sums (``{c}_wsum``, ``{c}_w`` per figure of `columns`) over rows of
    kernel_figures' columns (w and EFFICIENCY_COLUMNS): a group_by of kernels by name here, of an operator's kernels
    in operators.py."""
    w = pl.col("w")
    return [
        e
        for c in columns
        for e in (
            (pl.col(c) * w * WSUM_SCALE).round().cast(pl.Int128).sum().alias(f"{c}_wsum"),
            pl.when(pl.col(c).is_not_null()).then(w).sum().cast(pl.Int64).alias(f"{c}_w"),
        )
    ]


def _efficiency_sums(ix: TraceIndex) -> pl.DataFrame:
    figures = kernel_figures(ix.trace, index=ix)
    carried = tuple(c for c in EFFICIENCY_COLUMNS if figures[c].null_count() < figures.height)
    if carried:
        # grouped by the Categorical names, made Strings once per name: a String per kernel cost ~300 MB at 650 k
        # kernels (owlv2 x150: CUDA kernel names run to hundreds of characters)
        names = ix.trace.kernels.select(pl.col("name").cast(pl.Categorical))
        parts = [names, figures.select("w", *carried)]
        sums = pl.concat(parts, how="horizontal").group_by("name").agg(efficiency_sum_exprs(carried))
        sums = sums.with_columns(pl.col("name").cast(pl.String))
    else:  # no kernel carries a figure: every sum is 0, the names are the index's (no grouping of every kernel)
        _, distinct = ix.kernel_name_codes()
        nulls = [None] if ix.trace.kernels["name"].null_count() else []
        sums = pl.DataFrame({"name": [*distinct, *nulls]}, schema={"name": pl.String})
    zeros = [
        e
        for c in EFFICIENCY_COLUMNS
        if c not in carried
        for e in (pl.lit(0, pl.Int128).alias(f"{c}_wsum"), pl.lit(0, pl.Int64).alias(f"{c}_w"))
    ]
    order = ["name", *(f"{c}_{part}" for c in EFFICIENCY_COLUMNS for part in ("wsum", "w"))]
    return sums.with_columns(zeros).select(order).sort("name", nulls_last=True)


def _kernel_figures(ix: TraceIndex) -> pl.DataFrame:
    k = ix.trace.kernels
    blocks = pl.col("grid_x").cast(pl.Float64) * pl.col("grid_y") * pl.col("grid_z")
    shared = pl.col("static_shared_bytes").fill_null(0) + pl.col("dynamic_shared_bytes").fill_null(0)
    no_shared = pl.col("static_shared_bytes").is_null() & pl.col("dynamic_shared_bytes").is_null()
    sm_count = _sm_count_per_kernel(ix)
    return k.select(
        (pl.col("end_ns") - pl.col("start_ns")).alias("w"),
        pl.when(sm_count > 0).then(blocks / sm_count).alias("blocks_per_sm"),
        pl.when(pl.col("est_occupancy_pct") > 0)
        .then(pl.col("est_occupancy_pct").cast(pl.Float64))
        .alias("est_occupancy_pct"),
        pl.col("registers_per_thread").cast(pl.Float64),
        pl.when(~no_shared).then(shared.cast(pl.Float64)).alias("shared_bytes"),
    )


def _sm_count_per_kernel(ix: TraceIndex) -> pl.Expr:
    """The SM count of each kernel's device (trace.devices' first row of its node, rank, device; null without).

    Matched through the few distinct (rank id, device) pairs of the kernels, not by a join of every kernel row
    on its node string (at 20 M small kernels the node strings and the join's frame held ~2 GB)."""
    trace = ix.trace
    devices = trace.devices
    keys = ["node", "rank", "device"]
    if not {"sm_count", *keys} <= set(devices.columns) or devices["sm_count"].null_count() == devices.height:
        return pl.lit(None, pl.Int32)
    sm = devices.select(pl.col("node").cast(pl.String), "rank", "device", "sm_count").unique(keys, keep="first")
    rank_keys, rank_id = ix.table_rank_ids("kernels")
    device = trace.kernels["device"].to_numpy().astype(np.int64)  # never null (schema)
    gid, (pair_rank, pair_device) = dense_ids([rank_id, device])
    pairs = pl.DataFrame(
        {
            "node": rank_keys["node"].gather(pair_rank),
            "rank": rank_keys["rank"].gather(pair_rank),
            "device": pl.Series(pair_device).cast(devices.schema["device"]),
        }
    )
    per_pair = pairs.join(sm.cast({"rank": pl.Int32}), on=keys, how="left", maintain_order="left")["sm_count"]
    return pl.lit(per_pair.gather(gid))
