"""reduce_partials(): one FleetSummary from the RankPartials of every rank of a job (reduce side).

Exact (equal to `summarize()` of the whole job in one process): ranks, kernels, job phases, busy and idle per
device and their causes, kernel counts/sums/min/max/mean and shares, latency counts, queued counts, means and
maxima, step statistics per rank, comm/compute overlap per rank, load balance (busy and step spreads, the
utilization-histogram distance), the rank x time / rank x step heatmap and the straggler tables
(analysis.rank_views_reduce). Within log_histogram.RELATIVE_ERROR (< 0.27 %, see there): the kernel p50/p95
and the latency percentiles, read back from merged log-bin histograms.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.kernels import top_of_stats
from ktrace.analysis.latency import QUANTILES
from ktrace.analysis.log_histogram import RELATIVE_ERROR, grouped_quantiles, merge_histograms
from ktrace.analysis.phases import JobPhases, phases_of
from ktrace.analysis.rank_heatmap import RankHeatmap
from ktrace.analysis.rank_partials import LATENCY_METRICS, RankPartial
from ktrace.analysis.rank_views_reduce import ViewFold
from ktrace.analysis.ranks import HIST_BINS, LoadBalance, balance_of
from ktrace.analysis.stragglers import Stragglers
from ktrace.analysis.summary import record_to_dict

STRAGGLER_RATIO = 1.10
"""A rank is a straggler when its mean step time is this many times the median rank's (or, without steps,
its busy time is): 10 % slower than the typical rank."""
_SOURCE_ORDER = ("profiler_step", "annotation", "periodic")
_PATTERN_SOURCE_ORDER = ("annotation", "profiler_step", "periodic")
_STEP_COLUMNS = ("step_mean_ns", "step_p50_ns")
_KERNEL_STATS = (
    "name",
    "count",
    "total_ns",
    "min_ns",
    "mean_ns",
    "p50_ns",
    "p95_ns",
    "max_ns",
    "time_share",
    "count_share",
)
"""kernels.kernel_stats' columns, in its order."""


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


_COMPACT_EVERY = 64
"""Partials folded between two merges of the histograms and totals: the client holds the merged tables plus at
most this many ranks' worth, not every rank's histograms."""


@dataclass
class _Fold:
    """The reduce's running state: per-rank rows kept, histograms and totals merged as partials arrive."""

    per_rank: list[_RankRows] = field(default_factory=list)
    kernels: int = 0
    spans: list[tuple[int, int]] = field(default_factory=list)
    kernel_totals: list[pl.DataFrame] = field(default_factory=list)
    kernel_histogram: list[pl.DataFrame] = field(default_factory=list)
    latency_totals: list[pl.DataFrame] = field(default_factory=list)
    latency_histogram: list[pl.DataFrame] = field(default_factory=list)
    counters: dict[str, npt.NDArray[np.int64]] = field(default_factory=dict)
    busy_bins: dict[str, npt.NDArray[np.int64]] = field(default_factory=dict)
    notes: dict[str, None] = field(default_factory=dict)
    pattern: str | None = None
    views: ViewFold = field(default_factory=ViewFold)

    def add(self, p: RankPartial) -> None:
        self.per_rank.append(_RankRows.of(p))
        self.kernels += p.kernels
        self.spans += [p.span] if p.span is not None else []
        self.kernel_totals.append(p.kernel_totals)
        self.kernel_histogram.append(_named(p.kernel_histogram, p.kernel_totals["name"]))
        self.latency_totals.append(p.latency_totals)
        self.latency_histogram.append(p.latency_histogram)
        _add_histograms(self.counters, p.counter_histograms)
        _add_histograms(self.busy_bins, p.busy_histograms)
        self.notes.update(dict.fromkeys(p.notes))
        self.pattern = p.steps_pattern
        self.views.add(p)
        if len(self.kernel_totals) >= _COMPACT_EVERY:
            self.compact()

    def compact(self) -> None:
        self.kernel_totals = [_merge_kernel_totals(self.kernel_totals)]
        self.kernel_histogram = [merge_histograms(self.kernel_histogram, ["name"])]
        self.latency_totals = [_merge_latency_totals(self.latency_totals)]
        self.latency_histogram = [merge_histograms(self.latency_histogram, ["kind", "metric"])]
        self.views.compact()


@dataclass(frozen=True)
class _RankRows:
    """The per-rank rows of one partial the reduce keeps (small: a few rows, and the steps)."""

    rank_pairs: pl.DataFrame
    busy: pl.DataFrame
    idle: pl.DataFrame
    step_source: str
    step_spans: pl.DataFrame
    step_stats: pl.DataFrame
    overlap: pl.DataFrame
    breakdown: pl.DataFrame
    balance: pl.DataFrame
    top_kernels: pl.DataFrame

    def order(self) -> tuple[str, int]:
        """The first (node, rank) of the partial (partials arrive in any order)."""
        first = self.rank_pairs.sort("node", "rank").head(1)
        return (str(first["node"][0]), int(first["rank"][0])) if first.height else ("", -(2**31))

    @staticmethod
    def of(p: RankPartial) -> _RankRows:
        return _RankRows(
            p.rank_pairs,
            p.busy,
            p.idle,
            p.step_source,
            p.step_spans,
            p.step_stats,
            p.overlap,
            p.breakdown,
            p.balance,
            p.rank_kernels,
        )


def reduce_partials(partials: Iterable[RankPartial], *, top: int = 15) -> FleetSummary:
    """Merge the partials of every rank of one job (any order, consumed as they come) into its FleetSummary.

    Args:
        partials: one per partition (rank) of the job.
        top: kernels listed in the top tables, as summarize's.

    Returns:
        FleetSummary.

    Raises:
        ValueError: no partial.
    """
    fold = _Fold()
    for p in partials:
        fold.add(p)
    if not fold.per_rank:
        raise ValueError("reduce_partials needs the partial of at least one rank")
    fold.compact()
    rows = sorted(fold.per_rank, key=_RankRows.order)  # per-rank frames in (node, rank) order, as one process has
    pairs = _concat([r.rank_pairs for r in rows]).unique().sort("node", "rank")
    ranks = int((pairs["rank"] >= 0).sum()) if pairs.height else 0
    source = _step_source([r.step_source for r in rows], fold.pattern)
    kept = [r for r in rows if r.step_source == source]
    steps = _concat([r.step_spans for r in kept], rows[0].step_spans)
    stats = _kernel_stats(fold)
    balance = _balance(rows, source)
    idle = _concat([r.idle for r in rows])
    overlap = _concat([r.overlap for r in rows])
    heatmap, lag = fold.views.finish()
    return FleetSummary(
        ranks=ranks,
        kernels=fold.kernels,
        phases=_phases(fold.spans, steps, source),
        busy=_concat([r.busy for r in rows]),
        idle=idle,
        idle_causes=_idle_causes(idle),
        top_by_time=top_of_stats(stats, by="time", top=top),
        top_by_count=top_of_stats(stats, by="count", top=top),
        latency=_latency(fold),
        steps=steps,
        step_stats=_concat([r.step_stats for r in kept], rows[0].step_stats),
        overlap=overlap,
        breakdown=_concat([r.breakdown for r in rows]),
        load_balance=_load_balance(fold, balance) if ranks > 1 else None,
        rank_table=_rank_table(balance, overlap, idle),
        rank_idle=_rank_idle(idle),
        rank_kernels=_concat([r.top_kernels for r in rows]),
        rank_heatmap=heatmap if ranks > 1 else None,
        stragglers=lag if ranks > 1 else None,
        notes=tuple(fold.notes),
    )


def _concat(frames: Sequence[pl.DataFrame], empty: pl.DataFrame | None = None) -> pl.DataFrame:
    found = [f for f in frames if f.height]
    if not found:
        return (frames[0] if frames else (empty if empty is not None else pl.DataFrame())).clear()
    return pl.concat(found, how="vertical_relaxed")


def _named(hist: pl.DataFrame, names: pl.Series) -> pl.DataFrame:
    """A partial's kernel histogram keyed by name again (it travels keyed by the name's row in kernel_totals)."""
    lookup = pl.DataFrame({"name": names}).with_row_index("name_id").with_columns(pl.col("name_id").cast(pl.Int32))
    return hist.join(lookup, on="name_id", how="left").select("name", "bin", "count")


def _step_source(sources: Sequence[str], pattern: str | None) -> str:
    """The source detect_steps picks for the whole job: the first of its tries that any rank has."""
    order = _PATTERN_SOURCE_ORDER if pattern is not None else _SOURCE_ORDER
    return next((s for s in order if s in set(sources)), "none")


def _merge_kernel_totals(frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    return (
        _concat(frames)
        .group_by("name")
        .agg(pl.col("count").sum(), pl.col("total_ns").sum(), pl.col("min_ns").min(), pl.col("max_ns").max())
    )


def _kernel_stats(fold: _Fold) -> pl.DataFrame:
    """kernels.kernel_stats of the whole job: exact sums, counts, extremes and shares; p50/p95 from the merged
    duration histograms."""
    (merged,) = fold.kernel_totals
    if merged.height == 0:
        return merged.with_columns(
            *[pl.lit(None, pl.Float64).alias(c) for c in ("mean_ns", "p50_ns", "p95_ns", "time_share", "count_share")]
        ).select(_KERNEL_STATS)
    (hist,) = fold.kernel_histogram
    q = grouped_quantiles(hist, ["name"], (0.5, 0.95), "d").rename({"d_p50": "p50_ns", "d_p95": "p95_ns"})
    return (
        merged.join(q, on="name", how="left", nulls_equal=True)
        .with_columns(mean_ns=pl.col("total_ns") / pl.col("count").clip(1))
        .with_columns(
            time_share=pl.col("total_ns") / pl.col("total_ns").sum(),
            count_share=pl.col("count") / pl.col("count").sum(),
        )
        .select(_KERNEL_STATS)
        .sort(["total_ns", "name"], descending=[True, False])
    )


def _merge_latency_totals(frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    aggs: list[pl.Expr] = [pl.col("count").sum(), pl.col("queued").sum()]
    for m in LATENCY_METRICS:
        aggs += [pl.col(f"{m}_total").sum(), pl.col(f"{m}_max").max()]
    return _concat(frames).group_by("kind").agg(aggs)


def _latency(fold: _Fold) -> pl.DataFrame:
    """latency.latency_stats(by="kind", graph_runs="first") of the whole job."""
    (merged,) = fold.latency_totals
    (hist,) = fold.latency_histogram
    cols: list[pl.Expr | str] = ["kind", pl.col("count").cast(pl.UInt32), "queued"]
    for m in LATENCY_METRICS:
        q = grouped_quantiles(hist.filter(pl.col("metric") == m).drop("metric"), ["kind"], QUANTILES, m)
        merged = merged.join(q, on="kind", how="left")
        cols += [
            (pl.col(f"{m}_total") / pl.col("count").clip(1)).cast(pl.Float64).alias(f"{m}_mean"),
            *q.columns[1:],
            pl.col(f"{m}_max").cast(pl.Float64),
        ]
    return merged.select(cols).sort(["count", "kind"], descending=[True, False])


def _phases(spans: Sequence[tuple[int, int]], steps: pl.DataFrame, source: str) -> JobPhases:
    """phases.job_phases of the whole job."""
    span = (min(s for s, _ in spans), max(e for _, e in spans)) if spans else None
    return phases_of(span, steps, source)


def _balance(rows: Sequence[_RankRows], source: str) -> pl.DataFrame:
    """load_balance's per_rank frame of the job: ranks whose steps lost to another source have none (as in one
    process, where detect_steps picks one source for the whole job)."""
    no_steps = [pl.lit(0, pl.Int64).alias("steps"), *[pl.lit(None, pl.Float64).alias(c) for c in _STEP_COLUMNS]]
    frames = [r.balance if r.step_source == source != "none" else r.balance.with_columns(no_steps) for r in rows]
    return _concat(frames).sort(["node", "rank"])


def _load_balance(fold: _Fold, per_rank: pl.DataFrame) -> LoadBalance:
    """ranks.load_balance of the whole job (its histograms summed over the ranks)."""
    busy = {k: v.copy() for k, v in fold.busy_bins.items()}
    n_bins = max((int(v.sum()) for v in busy.values()), default=0)
    for v in busy.values():  # bins after a rank's last record up to the job's last are idle (bin 0)
        v[0] += n_bins - int(v.sum())
    return balance_of(per_rank, fold.counters, busy)


def _add_histograms(into: dict[str, npt.NDArray[np.int64]], more: dict[str, npt.NDArray[np.int64]]) -> None:
    for key, counts in more.items():
        into[key] = into.get(key, np.zeros(HIST_BINS, np.int64)) + counts


def _idle_causes(idle: pl.DataFrame) -> pl.DataFrame:
    job = idle.group_by("idle_category").agg(pl.col("idle_ns").sum(), pl.col("gaps").sum())
    total = pl.col("idle_ns").sum()
    return job.with_columns(idle_share=pl.when(total > 0).then(pl.col("idle_ns") / total).otherwise(0.0)).sort(
        ["idle_ns", "idle_category"], descending=[True, False]
    )


def _rank_idle(idle: pl.DataFrame) -> pl.DataFrame:
    keys = [pl.col("node").cast(pl.String), pl.col("rank").cast(pl.Int32), pl.col("idle_category").cast(pl.String)]
    return idle.group_by(keys).agg(pl.col("idle_ns").sum(), pl.col("gaps").sum()).sort("node", "rank", "idle_category")


def _rank_table(balance: pl.DataFrame, overlap: pl.DataFrame, idle: pl.DataFrame) -> pl.DataFrame:
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
