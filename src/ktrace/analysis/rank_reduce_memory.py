"""memory_timeline of a many-rank job from every rank's (analysis.memory_timeline).

A rank's allocations are its own device's, so each device's figures (peak, when and under which operator, churn,
never freed, growth step over step) are its rank's; the client concatenates them, adds the allocating operators'
sums up over the ranks and takes their top, and divides the churn by the job's span as one process does. The
timeline's source is the job's: the allocator's events where any rank has them, else the NVML counters (a node's
own partition). What travels is what the summary's JSON keeps: the per-device, per-operator and growth tables
and the count of events; the series (one row per allocation) travels thinned per device to the report plot's
points (memory_timeline.plot_series), so the plot keeps each bin's peak but is not the one-process series.
NVML samples (a node's own partition: few) travel whole, and their growth is read on the client at the job's steps.

Exact but for the growth when ranks' steps differ in kind: an allocator's growth uses its rank's own steps, an
NVML series' the reduced Summary's (the job's step source, and the user's step pattern where given), where one
process reads phases.step_spans of the whole job without the pattern.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.memory_timeline import (
    TOP_OPERATORS,
    MemoryTimeline,
    every_operator_timeline,
    growth_at_steps,
    plot_series,
)
from ktrace.model.trace import Trace

PLOT_POINTS = 2000
"""Rows per device of the thinned series a rank sends (the report plots at most that many)."""
_DEVICE = ["node", "rank", "device"]
_NEVER_FREED = ("never_freed", "never_freed_bytes")


def memory_part(trace: Trace, *, index: TraceIndex | None = None) -> MemoryTimeline | None:
    """One slice's timeline, every allocating operator kept and its series thinned (`events` counts the rows)."""
    found = every_operator_timeline(trace, index=index)
    if found is None or found.source == "nvml":  # a node's samples: few, and the client needs them (growth)
        return found
    return replace(found, series=plot_series(found, PLOT_POINTS), events=found.event_count())


def merge_memory_parts(parts: Sequence[MemoryTimeline]) -> MemoryTimeline | None:
    """Several slices' parts as one (associative: the reduce merges them as they arrive). The job's source wins:
    the allocator's where some slice has its events; the operators' sums are added up (never-freed figures summed
    as known; job_memory_timeline nulls them where some slice has no addresses)."""
    kept = [p for p in parts if p.source == "allocator"] or list(parts)
    if not kept:
        return None
    if len(kept) == 1:
        return kept[0]
    ops = pl.concat([p.by_operator for p in kept], how="vertical_relaxed")
    summed = ops.group_by("operator").agg(
        pl.col("allocations", "allocated_bytes").sum(),
        *(pl.when(pl.col(c).is_not_null().any()).then(pl.col(c).sum()).alias(c) for c in _NEVER_FREED),
    )
    return MemoryTimeline(
        source=kept[0].source,
        running_sum=any(p.running_sum for p in kept),
        addresses=all(p.addresses for p in kept),
        series=pl.concat([p.series for p in kept], how="vertical_relaxed"),
        per_device=pl.concat([p.per_device for p in kept], how="vertical_relaxed"),
        by_operator=summed.select(ops.columns),
        growth=pl.concat([p.growth for p in kept], how="vertical_relaxed"),
        events=sum(p.event_count() for p in kept),
    )


def job_memory_timeline(
    part: MemoryTimeline | None, span: tuple[int, int] | None, steps: pl.DataFrame
) -> MemoryTimeline | None:
    """memory_timeline of the whole job from the merge of every rank's part, the job's span (Trace.span_ns) and
    its step spans (phases.step_spans: an NVML series' growth is read at the steps of its node's first rank)."""
    if part is None:
        return None
    growth = growth_at_steps(steps, part.series, nvml=True) if part.source == "nvml" else part.growth
    seconds = (span[1] - span[0]) / 1e9 if span and span[1] > span[0] else float("nan")
    per_device = part.per_device.sort(_DEVICE)
    by_operator = part.by_operator
    if part.source == "allocator":
        rates = [(pl.col(c) / seconds).alias(f"{c}_per_s") for c in ("allocations", "frees")]
        per_device = per_device.with_columns(rates)
    if not part.addresses:
        per_device = per_device.with_columns(pl.lit(None, pl.Int64).alias(c) for c in _NEVER_FREED)
        by_operator = by_operator.with_columns(pl.lit(None, pl.Int64).alias(c) for c in _NEVER_FREED)
    by_operator = by_operator.sort(["allocated_bytes", "operator"], descending=[True, False], nulls_last=True).head(
        TOP_OPERATORS
    )
    return replace(
        part,
        series=part.series.sort(*_DEVICE, "ts_ns", maintain_order=True),
        per_device=per_device,
        by_operator=by_operator,
        growth=growth.sort(*_DEVICE, "step"),
    )
