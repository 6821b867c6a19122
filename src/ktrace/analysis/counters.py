"""Counter statistics per node, metric and instance: min, p50, p95, p99, max over any time window."""

from __future__ import annotations

import polars as pl

from ktrace.model.trace import Trace


def counter_stats(
    trace: Trace,
    *,
    start_ns: int | None = None,
    end_ns: int | None = None,
    metrics: list[str] | None = None,
    per_instance: bool = True,
) -> pl.DataFrame:
    """Statistics of every counter over the window [start_ns, end_ns) (SageMaker's system usage table).

    Args:
        trace: the trace.
        start_ns: first sample time included (default: the first sample).
        end_ns: first sample time excluded (default: past the last sample).
        metrics: only these metric names (default: all).
        per_instance: one row per instance (GPU/core index); False pools the instances of a metric.

    Returns:
        ``node``, ``metric``, [``instance``,] ``samples``, ``min``, ``p50``, ``p95``, ``p99``, ``max``,
        ``mean`` (floats; percentiles by linear interpolation), sorted by node, metric, instance.
    """
    frame = trace.counters.lazy()
    if start_ns is not None:
        frame = frame.filter(pl.col("ts_ns") >= start_ns)
    if end_ns is not None:
        frame = frame.filter(pl.col("ts_ns") < end_ns)
    if metrics is not None:
        frame = frame.filter(pl.col("metric").cast(pl.String).is_in(metrics))
    keys = ["node", "metric", "instance"] if per_instance else ["node", "metric"]
    value = pl.col("value")
    return (
        frame.with_columns(node=pl.col("node").cast(pl.String), metric=pl.col("metric").cast(pl.String))
        .group_by(keys)
        .agg(
            samples=pl.len().cast(pl.Int64),
            min=value.min(),
            p50=value.quantile(0.5, "linear"),
            p95=value.quantile(0.95, "linear"),
            p99=value.quantile(0.99, "linear"),
            max=value.max(),
            mean=value.mean(),
        )
        .sort(keys, nulls_last=True)
        .collect()
    )
