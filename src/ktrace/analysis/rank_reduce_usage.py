"""System usage (analysis.system_usage) and utilization over time (dashboard.utilization_series) of a many-rank
job from every rank's, for the report rank by rank.

A device, a CPU thread and an allocator pool belong to one rank, so each rank computes its rows in the job's time
bins (UsageBins: the width one process picks from the longest device span, and the first GPU record's start,
both from the driver's first pass) and the client concatenates them in one process's order. The utilization
curves are each device's or each node counter's own (a counter whose samples several partitions hold would be
drawn as several curves). A rank's part grows with its devices, threads and counters, not with its events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from ktrace.analysis.dashboard import UtilizationSeries, counter_series, timeline_series
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rules.inputs import device_utilization
from ktrace.analysis.system_usage import SystemUsage, allocator_memory_stats, cpu_thread_load, gpu_busy_of
from ktrace.model.schema import COUNTER_METRICS
from ktrace.model.trace import Trace

_DEVICE = ["node", "rank", "device"]
_THREAD = ["node", "rank", "pid", "tid"]


@dataclass(frozen=True)
class UsageBins:
    """The job's time bins, from the driver's first pass (picklable: it travels to the workers)."""

    bin_ns: int
    """rules.inputs.bin_ns_of the job's longest device span."""
    gpu_start_ns: int
    """The job's first GPU record's start: bin 0 of every device's utilization."""
    origin_ns: int
    """The job's start (Trace.span_ns): the utilization curves' time 0."""
    too_many: bool = False
    """The job's span has too many bins for its devices (rules.inputs.timeline_utilization's guard): no curve."""


@dataclass(frozen=True)
class UsagePart:
    """One slice's system usage rows and utilization curves."""

    bin_ns: int
    gpu_busy: pl.DataFrame
    cpu_threads: pl.DataFrame
    gpu_memory: pl.DataFrame
    metrics: frozenset[str]
    """The counter metrics the slice has samples of."""
    timeline: tuple[tuple[tuple[str, int, int], UtilizationSeries], ...]
    counters: tuple[tuple[tuple[str, str, int], UtilizationSeries], ...]


def usage_part(trace: Trace, bins: UsageBins, *, index: TraceIndex | None = None) -> UsagePart:
    """The slice's UsagePart in the job's bins."""
    ix = TraceIndex.of(trace, index)
    util = device_utilization(ix, bins.bin_ns, bins.gpu_start_ns, empty=bins.too_many)
    return UsagePart(
        bin_ns=bins.bin_ns,
        gpu_busy=gpu_busy_of(util),
        cpu_threads=cpu_thread_load(ix, bins.bin_ns),
        gpu_memory=allocator_memory_stats(ix, bins.bin_ns),
        metrics=frozenset(trace.counters["metric"].cast(pl.String).unique().to_list()),
        timeline=tuple(timeline_series(util, bins.origin_ns)),
        counters=tuple(counter_series(trace.counters, bins.origin_ns)),
    )


def job_usage(parts: Sequence[UsagePart]) -> tuple[SystemUsage, tuple[UtilizationSeries, ...]] | None:
    """system_usage and dashboard.utilization_series of the whole job from every rank's part (None: no part)."""
    if not parts:
        return None
    present = frozenset().union(*(p.metrics for p in parts))
    threads = pl.concat([p.cpu_threads for p in parts], how="vertical_relaxed")
    usage = SystemUsage(
        bin_ns=parts[0].bin_ns,
        gpu_busy=pl.concat([p.gpu_busy for p in parts], how="vertical_relaxed").sort(_DEVICE),
        cpu_threads=threads.sort(["busy_ns", *_THREAD], descending=[True, False, False, False, False]),
        gpu_memory=pl.concat([p.gpu_memory for p in parts], how="vertical_relaxed").sort(_DEVICE),
        counters_missing=tuple(m for m in COUNTER_METRICS if m not in present),
    )
    timeline = sorted((item for p in parts for item in p.timeline), key=lambda item: item[0])
    counters = sorted((item for p in parts for item in p.counters), key=lambda item: item[0])
    return usage, tuple(s for _, s in timeline) + tuple(s for _, s in counters)
