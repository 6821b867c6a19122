"""The kernel statistics and launch latency of a many-rank job from its ranks' exact totals and log-bin histograms
(the reduce side of rank_partials' kernel_totals / kernel_histogram and latency_totals / latency_histogram).

Counts, sums, minima, maxima, means (sum / count) and shares are exact; quantiles are read back from the merged
histograms, within log_histogram.RELATIVE_ERROR.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ktrace.analysis.kernels import EFFICIENCY_COLUMNS, efficiency_means
from ktrace.analysis.latency import QUANTILES
from ktrace.analysis.log_histogram import COLUMNS, grouped_quantiles
from ktrace.analysis.rank_partials import LATENCY_METRICS

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
    *EFFICIENCY_COLUMNS,
)
"""kernels.kernel_stats' columns, in its order."""
_EFFICIENCY_SUMS = tuple(f"{c}_{part}" for c in EFFICIENCY_COLUMNS for part in ("wsum", "w"))


def named_histogram(hist: pl.DataFrame, names: pl.Series) -> pl.DataFrame:
    """A partial's kernel histogram keyed by name again (it travels keyed by the name's row in kernel_totals)."""
    lookup = pl.DataFrame({"name": names}).with_row_index("name_id").with_columns(pl.col("name_id").cast(pl.Int32))
    return hist.join(lookup, on="name_id", how="left").select("name", *COLUMNS)


def merge_kernel_totals(frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    return (
        _concat(frames)
        .group_by("name")
        .agg(
            pl.col("count").sum(),
            pl.col("total_ns").sum(),
            pl.col("min_ns").min(),
            pl.col("max_ns").max(),
            pl.col(_EFFICIENCY_SUMS).sum(),
        )
    )


def job_kernel_stats(merged: pl.DataFrame, hist: pl.DataFrame) -> pl.DataFrame:
    """kernels.kernel_stats of the whole job from the merged kernel totals and duration histograms (by name):
    exact sums, counts, extremes and shares; p50/p95 from the histograms."""
    if merged.height == 0:
        return merged.with_columns(
            *[
                pl.lit(None, pl.Float64).alias(c)
                for c in ("mean_ns", "p50_ns", "p95_ns", "time_share", "count_share", *EFFICIENCY_COLUMNS)
            ]
        ).select(_KERNEL_STATS)
    q = grouped_quantiles(hist, ["name"], (0.5, 0.95), "d").rename({"d_p50": "p50_ns", "d_p95": "p95_ns"})
    return (
        efficiency_means(merged.join(q, on="name", how="left", nulls_equal=True))
        .with_columns(mean_ns=pl.col("total_ns") / pl.col("count").clip(1))
        .with_columns(
            time_share=pl.col("total_ns") / pl.col("total_ns").sum(),
            count_share=pl.col("count") / pl.col("count").sum(),
        )
        .select(_KERNEL_STATS)
        .sort(["total_ns", "name"], descending=[True, False])
    )


def merge_latency_totals(frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    aggs: list[pl.Expr] = [pl.col("count").sum(), pl.col("queued").sum()]
    for m in LATENCY_METRICS:
        aggs += [pl.col(f"{m}_total").sum(), pl.col(f"{m}_max").max()]
    return _concat(frames).group_by("kind").agg(aggs)


def job_latency(merged: pl.DataFrame, hist: pl.DataFrame) -> pl.DataFrame:
    """latency.latency_stats(by="kind", graph_runs="first") of the whole job from the merged latency totals and
    histograms (by kind and metric)."""
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


def _concat(frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    found = [f for f in frames if f.height]
    return pl.concat(found, how="vertical_relaxed") if found else frames[0].clear()
