"""Trace diff: two traces -> per-kernel and per-step deltas (baseline A vs candidate B)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ktrace.model.trace import Trace

STATUSES = ("added", "removed", "increased", "decreased", "unchanged")
"""Kernel status in B relative to A."""


@dataclass(frozen=True)
class TraceDiff:
    """What changed from trace A (baseline) to trace B."""

    kernels: pl.DataFrame
    """Per kernel name; see diff_kernels."""
    steps: pl.DataFrame
    """Per step index; see diff_steps."""
    kernel_time_a_ns: int
    kernel_time_b_ns: int
    step_mean_a_ns: float | None
    step_mean_b_ns: float | None


def diff_kernels(a: Trace, b: Trace, *, tolerance: float = 0.05) -> pl.DataFrame:
    """Per kernel name: counts, total and mean time in A and B, the delta and a status.

    Args:
        a: baseline trace.
        b: candidate trace.
        tolerance: relative change of total time under which a kernel is "unchanged".

    Returns:
        ``name``, ``count_a``, ``count_b``, ``total_ns_a``, ``total_ns_b``, ``mean_ns_a``, ``mean_ns_b``,
        ``delta_ns`` (B - A total), ``delta_pct`` (vs A; null for added kernels), ``status`` (STATUSES),
        sorted by |delta_ns| descending, then name.
    """

    def per_name(t: Trace, suffix: str) -> pl.DataFrame:
        dur = pl.col("end_ns") - pl.col("start_ns")
        return t.kernels.group_by(pl.col("name").cast(pl.String)).agg(
            pl.len().cast(pl.Int64).alias(f"count_{suffix}"),
            dur.sum().cast(pl.Int64).alias(f"total_ns_{suffix}"),
            dur.mean().cast(pl.Float64).alias(f"mean_ns_{suffix}"),
        )

    joined = (
        per_name(a, "a")
        .join(per_name(b, "b"), on="name", how="full", coalesce=True)
        .with_columns(pl.col("count_a", "count_b", "total_ns_a", "total_ns_b").fill_null(0))
    )
    delta = pl.col("total_ns_b") - pl.col("total_ns_a")
    rel = pl.when(pl.col("total_ns_a") > 0).then(delta / pl.col("total_ns_a")).otherwise(None)
    status = (
        pl.when(pl.col("count_a") == 0)
        .then(pl.lit("added"))
        .when(pl.col("count_b") == 0)
        .then(pl.lit("removed"))
        .when(rel > tolerance)
        .then(pl.lit("increased"))
        .when(rel < -tolerance)
        .then(pl.lit("decreased"))
        .otherwise(pl.lit("unchanged"))
    )
    return (
        joined.with_columns(delta_ns=delta, delta_pct=100.0 * rel, status=status)
        .sort([delta.abs(), "name"], descending=[True, False])
        .select(
            "name",
            "count_a",
            "count_b",
            "total_ns_a",
            "total_ns_b",
            "mean_ns_a",
            "mean_ns_b",
            "delta_ns",
            "delta_pct",
            "status",
        )
    )


def diff_steps(a: Trace, b: Trace, *, pattern: str | None = None) -> pl.DataFrame:
    """Per step index: mean step duration over the ranks in A and B and the delta.

    Returns:
        ``step``, ``dur_ns_a``, ``dur_ns_b`` (null where a trace has no such step), ``delta_ns``,
        ``delta_pct``, sorted by step.
    """
    from ktrace.analysis.phases import step_spans

    def per_step(t: Trace, suffix: str) -> pl.DataFrame:
        return (
            step_spans(t, pattern=pattern)
            .group_by("step")
            .agg((pl.col("end_ns") - pl.col("start_ns")).mean().cast(pl.Float64).alias(f"dur_ns_{suffix}"))
        )

    joined = per_step(a, "a").join(per_step(b, "b"), on="step", how="full", coalesce=True)
    delta = pl.col("dur_ns_b") - pl.col("dur_ns_a")
    return joined.with_columns(delta_ns=delta, delta_pct=100.0 * delta / pl.col("dur_ns_a")).sort("step")


def trace_diff(a: Trace, b: Trace, *, tolerance: float = 0.05, pattern: str | None = None) -> TraceDiff:
    """Kernel and step differences between baseline `a` and candidate `b` (see diff_kernels, diff_steps)."""
    kernels = diff_kernels(a, b, tolerance=tolerance)
    steps = diff_steps(a, b, pattern=pattern)

    def mean(col: str) -> float | None:
        s = steps[col].drop_nulls()
        return float(s.mean()) if s.len() else None  # type: ignore[arg-type]

    return TraceDiff(
        kernels,
        steps,
        int(kernels["total_ns_a"].sum()),
        int(kernels["total_ns_b"].sum()),
        mean("dur_ns_a"),
        mean("dur_ns_b"),
    )
