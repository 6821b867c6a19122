"""FleetSummary: the rank-by-rank summary's former shape (other fields, its own JSON), kept while the fleet report
(report.fleet_report, report.fleet_terminal), the fleet rules and `ktrace check|report` still read it; built from
rank_reduce.FleetResult (rank_reduce.as_fleet_summary), whose Summary is what `ktrace summary` shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from ktrace.analysis.log_histogram import RELATIVE_ERROR
from ktrace.analysis.phases import JobPhases
from ktrace.analysis.rank_heatmap import RankHeatmap
from ktrace.analysis.ranks import LoadBalance
from ktrace.analysis.stragglers import Stragglers
from ktrace.analysis.summary import record_to_dict

STRAGGLER_RATIO = 1.10
"""A rank is a straggler when its mean step time is this many times the median rank's (or, without steps,
its busy time is): 10 % slower than the typical rank."""


@dataclass(frozen=True)
class FleetSummary:
    """The summary of a many-rank job reduced from per-rank partials; the frames named as Summary's have its
    columns (and, but for the stated quantiles, its numbers)."""

    ranks: int
    kernels: int
    phases: JobPhases
    busy: pl.DataFrame
    """utilization.busy_time per device."""
    idle: pl.DataFrame
    """idle.device_idle_breakdown per device and cause."""
    idle_causes: pl.DataFrame
    """The job's idle time by cause: idle_category, idle_ns, gaps, idle_share (of the job's idle time)."""
    top_by_time: pl.DataFrame
    top_by_count: pl.DataFrame
    latency: pl.DataFrame
    """latency_stats by kind, one row per launch call; percentiles within log_histogram.RELATIVE_ERROR."""
    steps: pl.DataFrame
    """Step spans per rank (node, rank, step, name, start_ns, end_ns): the rank x step grid of the views."""
    step_stats: pl.DataFrame
    overlap: pl.DataFrame
    breakdown: pl.DataFrame
    """breakdown.temporal_breakdown per rank."""
    load_balance: LoadBalance | None
    """As Summary's: only with 2 or more ranks."""
    rank_table: pl.DataFrame
    """One row per rank: node, rank, kernels, kernel_time_ns, busy_ns, busy_share, steps, step_mean_ns,
    step_p50_ns, comm_ns, overlap_pct, idle_ns (its devices' idle), slowdown (step mean, else busy, / the median
    rank's), straggler (slowdown >= STRAGGLER_RATIO)."""
    rank_idle: pl.DataFrame
    """Idle time per rank and cause: node, rank, idle_category, idle_ns, gaps."""
    rank_kernels: pl.DataFrame
    """Each rank's top rank_partials.RANK_KERNELS kernels by time: node, rank, name, count, total_ns (exact;
    what makes a straggler slow)."""
    rank_heatmap: RankHeatmap | None = None
    """rank_heatmap.rank_heatmap of the whole job (time bins over its GPU span); only with 2 or more ranks."""
    stragglers: Stragglers | None = None
    """stragglers.stragglers of the whole job; only with 2 or more ranks."""
    engine: str = "in-process"
    """The engine the per-rank work ran on (set by ktrace.fleet's driver)."""
    notes: tuple[str, ...] = ()


def idle_causes(idle: pl.DataFrame) -> pl.DataFrame:
    """FleetSummary.idle_causes: the job's idle time by cause, from idle.device_idle_breakdown's rows."""
    job = idle.group_by("idle_category").agg(pl.col("idle_ns").sum(), pl.col("gaps").sum())
    total = pl.col("idle_ns").sum()
    return job.with_columns(idle_share=pl.when(total > 0).then(pl.col("idle_ns") / total).otherwise(0.0)).sort(
        ["idle_ns", "idle_category"], descending=[True, False]
    )


def rank_idle(idle: pl.DataFrame) -> pl.DataFrame:
    """FleetSummary.rank_idle: idle time per rank and cause."""
    keys = [pl.col("node").cast(pl.String), pl.col("rank").cast(pl.Int32), pl.col("idle_category").cast(pl.String)]
    return idle.group_by(keys).agg(pl.col("idle_ns").sum(), pl.col("gaps").sum()).sort("node", "rank", "idle_category")


def rank_table(balance: pl.DataFrame, overlap: pl.DataFrame, idle: pl.DataFrame) -> pl.DataFrame:
    """FleetSummary.rank_table from load_balance's per-rank rows, the overlap and the idle rows."""
    keys = ["node", "rank"]
    comm = overlap.select(pl.col("node").cast(pl.String), pl.col("rank").cast(pl.Int32), "comm_ns", "overlap_pct")
    rank_idle = idle.group_by(pl.col("node").cast(pl.String), pl.col("rank").cast(pl.Int32)).agg(
        idle_ns=pl.col("idle_ns").sum()
    )
    table = balance.join(comm, on=keys, how="left").join(rank_idle, on=keys, how="left")
    table = table.with_columns(pl.col("idle_ns").fill_null(0))
    basis = "step_mean_ns" if table["step_mean_ns"].drop_nulls().len() else "busy_ns"
    median = table[basis].cast(pl.Float64).median()
    slowdown = pl.col(basis).cast(pl.Float64) / median if median else pl.lit(None, pl.Float64)
    return table.with_columns(slowdown=slowdown).with_columns(
        straggler=pl.col("slowdown").fill_null(0.0) >= STRAGGLER_RATIO
    )


def fleet_to_dict(fleet: FleetSummary) -> dict[str, Any]:
    """A stable, JSON-ready dict of a FleetSummary, as summary_to_dict (step spans left out, the rank x step
    grid being long at thousands of ranks; the per-rank step statistics stay; the heatmap too: the report's JSON
    holds it in whole percent, report.content.rank_heatmap_dict), with the quantiles' bound."""
    out = record_to_dict(fleet, skip=("steps", "rank_heatmap"))
    out["quantile_relative_error"] = round(RELATIVE_ERROR, 6)
    return dict(sorted(out.items()))
