"""The job-wide small tables of the summary (active shares, GPU activity, memory operations, counters), each as a
part one rank's trace contributes (map side) and the merge of every rank's parts (reduce side).

Counts, sums, minima and maxima add up exactly; shares are taken from the merged sums as the single-process
analyses take them. A counter (node, metric, instance) read whole by one rank keeps its exact row; one spread over
several partitions (a node's counters written beside more than one of its ranks) has its percentiles read back
from merged log-bin histograms (log_histogram.RELATIVE_ERROR) and its mean from the exact sum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from ktrace.analysis.counters import counter_stats
from ktrace.analysis.distributions import (
    activity_distribution,
    memory_distribution,
    with_activity_share,
    with_memory_shares,
)
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.log_histogram import grouped_quantiles, histogram, merge_histograms
from ktrace.analysis.utilization import active_time_share
from ktrace.model.trace import Trace

COUNTER_KEYS = ("node", "metric", "instance")
"""counters.counter_stats' keys (per instance)."""
_COUNTER_QUANTILES = (0.5, 0.95, 0.99)
_MEMORY_KEYS = ("op", "copy_kind", "host_memory")


@dataclass(frozen=True)
class TablesPart:
    """One slice's share of the job-wide small tables."""

    active: pl.DataFrame
    """utilization.active_time_share of the slice (rows per node and rank: concatenated)."""
    activity: pl.DataFrame
    """distributions.activity_distribution's activity, count, time_ns."""
    memory: pl.DataFrame
    """distributions.memory_distribution's op, copy_kind, host_memory, count, bytes, time_ns."""
    counters: pl.DataFrame
    """counters.counter_stats of the slice, with ``sum`` (the values' sum) for the mean of a merged key."""
    counter_histogram: pl.DataFrame
    """Counter values on log bins: node, metric, instance, bin, count."""


def tables_part(trace: Trace, *, index: TraceIndex | None = None) -> TablesPart:
    """The slice's TablesPart."""
    ix = TraceIndex.of(trace, index)
    values = trace.counters.select(
        pl.col("node").cast(pl.String), pl.col("metric").cast(pl.String), "instance", "value"
    )
    sums = values.group_by(COUNTER_KEYS).agg(sum=pl.col("value").sum().cast(pl.Float64))
    stats = counter_stats(trace)
    return TablesPart(
        active=active_time_share(trace, index=ix),
        activity=activity_distribution(trace).select("activity", "count", "time_ns"),
        memory=memory_distribution(trace).select(*_MEMORY_KEYS, "count", "bytes", "time_ns"),
        counters=stats.join(sums, on=list(COUNTER_KEYS), how="left", nulls_equal=True),
        counter_histogram=histogram(values, COUNTER_KEYS, "value"),
    )


def merge_tables(parts: Sequence[TablesPart]) -> TablesPart:
    """Several parts as one (the reduce folds every 64 partials into one this way): exact sums; a counter key
    seen in more than one part keeps only its mergeable columns until merged_counters reads it back."""
    counters = _concat([p.counters for p in parts])
    return TablesPart(
        active=_concat([p.active for p in parts]),
        activity=_concat([p.activity for p in parts]).group_by("activity", maintain_order=True).agg(pl.all().sum()),
        memory=_concat([p.memory for p in parts]).group_by(_MEMORY_KEYS).agg(pl.all().sum()),
        counters=counters,
        counter_histogram=merge_histograms([p.counter_histogram for p in parts], COUNTER_KEYS),
    )


def merged_active(part: TablesPart) -> pl.DataFrame:
    """active_time_share of the whole job: the CPU timeline rows are dropped for nodes with a cpu.util counter
    anywhere in the job (one process has them only for nodes without one)."""
    a = part.active
    counted = a.filter((pl.col("resource") == "cpu") & (pl.col("method") == "counter"))["node"].unique()
    cpu_timeline = (pl.col("resource") == "cpu") & (pl.col("method") == "timeline")
    kept = a.filter(~(cpu_timeline & pl.col("node").is_in(counted.implode())))
    return kept.sort("resource", "node", "rank", "instance", "method")


def merged_activity(part: TablesPart) -> pl.DataFrame:
    """activity_distribution of the whole job."""
    return with_activity_share(part.activity.select("activity", "count", "time_ns"))


def merged_memory(part: TablesPart) -> pl.DataFrame:
    """memory_distribution of the whole job."""
    return with_memory_shares(part.memory)


def merged_counters(part: TablesPart) -> pl.DataFrame:
    """counter_stats of the whole job (see the module docstring)."""
    keys = list(COUNTER_KEYS)
    rows = part.counters
    if rows.height == 0:
        return rows.drop("sum")
    seen = rows.group_by(keys).agg(pl.len().alias("parts"))
    rows = rows.join(seen, on=keys, how="left", nulls_equal=True)
    single = rows.filter(pl.col("parts") == 1).drop("parts", "sum")
    spread = rows.filter(pl.col("parts") > 1)
    if spread.height == 0:
        return single.sort(keys, nulls_last=True)
    merged = spread.group_by(keys).agg(
        pl.col("samples").sum(), pl.col("min").min(), pl.col("max").max(), pl.col("sum").sum()
    )
    q = grouped_quantiles(part.counter_histogram, keys, _COUNTER_QUANTILES, "v").rename(
        {"v_p50": "p50", "v_p95": "p95", "v_p99": "p99"}
    )
    merged = merged.join(q, on=keys, how="left", nulls_equal=True).with_columns(mean=pl.col("sum") / pl.col("samples"))
    return pl.concat([single, merged.select(single.columns)], how="vertical_relaxed").sort(keys, nulls_last=True)


def _concat(frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    found = [f for f in frames if f.height]
    return pl.concat(found, how="vertical_relaxed") if found else frames[0]
