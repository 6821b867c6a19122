"""GPU memory in a trace diff: peak allocated and reserved bytes per device, and the allocating operators, in
baseline A and candidate B (from each trace's memory timeline, analysis.memory_timeline).

Devices are matched by (host, rank, device), host being the node's place among the trace's nodes sorted by
name, so two runs of one job on differently named machines still pair up. Peak reserved bytes are the largest
reserved bytes the allocator reported (null where the source gives none: NVML counters, PyTorch without
allocator totals). Operators: bytes allocated under each innermost operator (null: outside every operator),
summed from the allocator events of the whole trace (not cut to either trace's top list), so every operator
has its exact A and B figures; NVML timelines have no operators.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.memory_timeline import MemoryTimeline, memory_timeline
from ktrace.model.trace import Trace

TOP_OPERATORS = 15
_KEY = ("host", "rank", "device")


@dataclass(frozen=True)
class MemoryDiff:
    """Memory of A and B (see the module docstring)."""

    source_a: str
    source_b: str
    """The timelines' sources: "allocator" or "nvml"."""
    devices: pl.DataFrame
    """Per device: ``node_a``, ``node_b`` (null where the trace lacks the device), ``rank``, ``device``,
    ``peak_allocated_a``, ``peak_allocated_b``, ``peak_allocated_delta``, ``peak_reserved_a``,
    ``peak_reserved_b``, ``peak_reserved_delta`` (bytes; deltas B - A, null where either is null), by rank,
    device."""
    operators: pl.DataFrame
    """The TOP_OPERATORS operators whose allocated bytes changed most: ``operator``, ``allocations_a``,
    ``allocations_b``, ``allocated_a``, ``allocated_b`` (bytes; 0 where the trace has none), ``allocated_delta``,
    by |delta| descending then operator. Empty unless both timelines come from the allocator."""


def diff_memory(
    a: Trace,
    b: Trace,
    *,
    top: int = TOP_OPERATORS,
    index_a: TraceIndex | None = None,
    index_b: TraceIndex | None = None,
) -> MemoryDiff | None:
    """A's and B's memory side by side; None unless both traces have a memory timeline."""
    ta = memory_timeline(a, index=index_a)
    tb = memory_timeline(b, index=index_b)
    if ta is None or tb is None:
        return None
    devices = _devices(ta, "a").join(_devices(tb, "b"), on=list(_KEY), how="full", coalesce=True)
    devices = devices.with_columns(
        (pl.col(f"peak_{m}_b") - pl.col(f"peak_{m}_a")).alias(f"peak_{m}_delta") for m in ("allocated", "reserved")
    )
    devices = devices.sort("rank", "device", "host").select(
        "node_a",
        "node_b",
        "rank",
        "device",
        *(f"peak_{m}_{s}" for m in ("allocated", "reserved") for s in ("a", "b", "delta")),
    )
    return MemoryDiff(ta.source, tb.source, devices, _operators(ta, tb, top))


def _devices(timeline: MemoryTimeline, side: str) -> pl.DataFrame:
    s = timeline.series
    reserved = s.group_by("node", "rank", "device").agg(pl.col("reserved_bytes").max().alias(f"peak_reserved_{side}"))
    peaks = timeline.per_device.select(
        "node", "rank", "device", pl.col("peak_allocated_bytes").alias(f"peak_allocated_{side}")
    )
    frame = peaks.join(reserved, on=["node", "rank", "device"], how="left")
    hosts = frame.select(pl.col("node").unique().sort()).with_row_index("host")
    return frame.join(hosts, on="node", how="left").select(
        pl.col("host").cast(pl.Int64),
        pl.col("rank").cast(pl.Int64),
        pl.col("device").cast(pl.Int64),
        pl.col("node").cast(pl.String).alias(f"node_{side}"),
        pl.col(f"peak_allocated_{side}").cast(pl.Int64),
        pl.col(f"peak_reserved_{side}").cast(pl.Int64),
    )


def _per_operator(timeline: MemoryTimeline, side: str) -> pl.DataFrame:
    allocs = timeline.series.filter(pl.col("bytes") > 0)
    by_operator = allocs.group_by("operator").agg(
        pl.len().cast(pl.Int64).alias(f"allocations_{side}"),
        pl.col("bytes").sum().cast(pl.Int64).alias(f"allocated_{side}"),
    )
    return by_operator.with_columns(pl.col("operator").cast(pl.String))  # the series' names are Categorical


def _operators(ta: MemoryTimeline, tb: MemoryTimeline, top: int) -> pl.DataFrame:
    schema = {
        "operator": pl.String,
        "allocations_a": pl.Int64,
        "allocations_b": pl.Int64,
        "allocated_a": pl.Int64,
        "allocated_b": pl.Int64,
        "allocated_delta": pl.Int64,
    }
    if ta.source != "allocator" or tb.source != "allocator":
        return pl.DataFrame(schema=schema)
    joined = _per_operator(ta, "a").join(
        _per_operator(tb, "b"), on="operator", how="full", nulls_equal=True, coalesce=True
    )
    joined = joined.with_columns(pl.col("allocations_a", "allocations_b", "allocated_a", "allocated_b").fill_null(0))
    delta = pl.col("allocated_b") - pl.col("allocated_a")
    return (
        joined.with_columns(allocated_delta=delta)
        .sort([delta.abs(), "operator"], descending=[True, False], nulls_last=True)
        .head(top)
        .select(list(schema))
        .cast(schema)  # type: ignore[arg-type]
    )
