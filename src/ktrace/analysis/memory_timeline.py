"""The memory timeline (issue #15): GPU memory in use over time per device, its peak and the operator allocating
at the peak, allocations never freed, allocator churn, and growth step over step.

The source is the caching allocator's events (trace.allocations: Kineto `[memory]`, nsys CUDA memory usage) when
the trace has them, else ktrace's NVML counters (`gpu.mem_used_bytes`), which say how much memory was in use but
not who allocated it (no operator, never-freed or churn figures then).

Allocated bytes after each event are the allocator's own total (Kineto's `Total Allocated`) where the source records
it on every event of the device, else the running sum of the events' bytes from the trace start: that sum counts only
what the trace saw (memory allocated before it started is unknown), which `MemoryTimeline.running_sum` says.
An allocation belongs to the innermost operator (cpu_op) on its thread containing its time
(`operators.operator_at`, the attribution the operator view uses for launches), and to the innermost nn.Module
frame there where the trace has them (Kineto with_modules: `op_attribution.innermost_at`, as the module view).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.op_attribution import IS_MODULE, MODULE_PREFIX, innermost_at
from ktrace.analysis.operators import operator_at
from ktrace.analysis.phases import step_spans
from ktrace.model.allocations import DEVICE_KEYS, allocated_after, new_device
from ktrace.model.schema import NODE_RANK
from ktrace.model.trace import Trace

_DEVICE = DEVICE_KEYS
NVML_METRIC = "gpu.mem_used_bytes"
TOP_OPERATORS = 10
"""Rows of MemoryTimeline.by_operator."""
PER_DEVICE_COLUMNS = (
    "node",
    "rank",
    "device",
    "peak_allocated_bytes",
    "peak_ns",
    "peak_operator",
    "peak_module",
    "peak_reserved_bytes",
    "end_allocated_bytes",
    "allocations",
    "frees",
    "allocated_bytes",
    "freed_bytes",
    "allocations_per_s",
    "frees_per_s",
    "never_freed",
    "never_freed_bytes",
)
"""Columns of MemoryTimeline.per_device, in order."""
_SERIES_SCHEMA = {
    "node": pl.String,
    "rank": pl.Int32,
    "device": pl.Int32,
    "ts_ns": pl.Int64,
    "allocated_bytes": pl.Int64,
    "reserved_bytes": pl.Int64,
    "bytes": pl.Int64,
    "operator": pl.Categorical,
    "module": pl.Categorical,
}


@dataclass(frozen=True)
class MemoryTimeline:
    """GPU memory over time per device (node, rank, device), from the allocator's events or NVML counters."""

    source: str
    """"allocator" (trace.allocations) or "nvml" (gpu.mem_used_bytes counters: rank is -1, the whole node)."""
    running_sum: bool
    """allocated_bytes are running sums of the events from the trace start (the source records no totals)."""
    addresses: bool
    """Every allocator event has an address, so frees are matched to allocations (never_freed is known)."""
    series: pl.DataFrame
    """One row per event (allocator) or sample (NVML), sorted by node, rank, device, time: ``node``, ``rank``,
    ``device``, ``ts_ns``, ``allocated_bytes`` (in use after it; NVML: used), ``reserved_bytes`` (null when
    unknown), ``bytes`` (+ allocated, - freed; null for NVML), ``operator`` (innermost cpu_op, null outside one), ``module`` (innermost nn.Module frame without its "nn.Module: "
    prefix, null outside one or without module frames); operator and module are Categorical (a String a row held
    ~70 MB more at 1.8 M events)."""
    per_device: pl.DataFrame
    """PER_DEVICE_COLUMNS: peak allocated bytes, when and under which operator and nn.Module (the first time it
    is reached),
    reserved bytes at the peak, allocated bytes after the last event; allocations and frees (count, bytes) and
    their rates over the trace's span (freed bytes are the bytes cycled through the allocator); allocations never
    freed within the trace (count, bytes; null without addresses). Counts and rates are null for NVML."""
    by_operator: pl.DataFrame
    """The top TOP_OPERATORS allocating operators by bytes allocated: ``operator`` (null: outside every operator),
    ``allocations``, ``allocated_bytes``, ``never_freed``, ``never_freed_bytes`` (null without addresses)."""
    growth: pl.DataFrame
    """Allocated bytes at the end of each training step (phases.step_spans) per device: ``node``, ``rank``,
    ``device``, ``step``, ``end_ns``, ``allocated_bytes``, ``growth_bytes`` (vs the previous step; null first).
    Empty without steps. NVML series use the steps of the node's first rank."""
    events: int | None = None
    """Events or samples the timeline was built from, where `series` holds fewer (the rank-by-rank timeline ships
    each device's series thinned, analysis.rank_reduce_memory); None: series.height."""

    def event_count(self) -> int:
        """Events or samples the timeline was built from."""
        return self.series.height if self.events is None else self.events


MEMORY_TIMELINE = Slot[MemoryTimeline | None]("memory_timeline")
_EVERY_OPERATOR = Slot[MemoryTimeline | None]("memory_timeline_every_operator")


def memory_timeline(trace: Trace, *, index: TraceIndex | None = None) -> MemoryTimeline | None:
    """The memory timeline of a trace (see MemoryTimeline); None when it has neither allocator events nor NVML
    memory counters."""
    ix = TraceIndex.of(trace, index)

    def top() -> MemoryTimeline | None:
        found = every_operator_timeline(ix.trace, index=ix)
        return None if found is None else replace(found, by_operator=found.by_operator.head(TOP_OPERATORS))

    return ix.get(MEMORY_TIMELINE, top)


def every_operator_timeline(trace: Trace, *, index: TraceIndex | None = None) -> MemoryTimeline | None:
    """memory_timeline with every allocating operator in `by_operator`, not its top TOP_OPERATORS (the rank-by-rank
    reduce adds them up over the ranks)."""
    ix = TraceIndex.of(trace, index)
    return ix.get(_EVERY_OPERATOR, lambda: _timeline(ix))


def _timeline(ix: TraceIndex) -> MemoryTimeline | None:
    trace = ix.trace
    if trace.allocations.height:
        return _from_allocator(ix)
    used = trace.counters.filter(pl.col("metric") == NVML_METRIC)
    return _from_nvml(ix, used) if used.height else None


def _from_allocator(ix: TraceIndex) -> MemoryTimeline:
    trace = ix.trace
    a = trace.allocations
    points = a.select("node", "rank", pl.col("pid").fill_null(-1), pl.col("tid").fill_null(-1), "ts_ns")
    names = trace.ops["name"]  # Categorical: only the gathered names become Strings (_names_at)
    operator = _names_at(names, operator_at(trace, points, "ts_ns"))
    modules = "category" in trace.ops.columns and trace.ops.select(IS_MODULE.fill_null(False).any()).item()
    module = _names_at(names, innermost_at(trace, points, "ts_ns", IS_MODULE) if modules else np.full(a.height, -1))
    events = allocated_after(
        a.select(
            pl.col("node").cast(pl.String),
            "rank",
            "device",
            "ts_ns",
            "address",
            "bytes",
            "total_allocated",
            pl.col("total_reserved").alias("reserved_bytes"),
        ).with_columns(operator.alias("operator"), _stripped(module, MODULE_PREFIX).alias("module"))
    )
    addresses = events["address"].null_count() == 0
    events = _with_never_freed(events) if addresses else events.with_columns(never_freed=pl.lit(None, pl.Boolean))
    span = trace.span_ns()
    seconds = (span[1] - span[0]) / 1e9 if span and span[1] > span[0] else float("nan")
    alloc, free = pl.col("bytes") > 0, pl.col("bytes") < 0
    nf = pl.col("never_freed")
    per_device = (
        # events come in device order (allocated_after): grouped by the device's run number, not hashed by node
        # String, rank and device a row (~20 MB at 368 k events, owlv2 x30)
        events.group_by(new_device().cum_sum().alias("run"), maintain_order=True)
        .agg(
            *(pl.col(c).first() for c in _DEVICE),
            peak_allocated_bytes=pl.col("allocated_bytes").max(),
            peak_ns=pl.col("ts_ns").get(pl.col("allocated_bytes").arg_max()),
            peak_operator=pl.col("operator").get(pl.col("allocated_bytes").arg_max()).cast(pl.String),
            peak_module=pl.col("module").get(pl.col("allocated_bytes").arg_max()).cast(pl.String),
            peak_reserved_bytes=pl.col("reserved_bytes").get(pl.col("allocated_bytes").arg_max()),
            end_allocated_bytes=pl.col("allocated_bytes").last(),
            allocations=alloc.sum().cast(pl.Int64),
            frees=free.sum().cast(pl.Int64),
            allocated_bytes=pl.col("bytes").filter(alloc).sum(),
            freed_bytes=-pl.col("bytes").filter(free).sum(),
            never_freed=nf.sum().cast(pl.Int64) if addresses else pl.lit(None, pl.Int64),
            never_freed_bytes=pl.col("bytes").filter(nf).sum() if addresses else pl.lit(None, pl.Int64),
        )
        .with_columns(allocations_per_s=pl.col("allocations") / seconds, frees_per_s=pl.col("frees") / seconds)
        .select(PER_DEVICE_COLUMNS)
    )
    allocs = events.select("operator", "bytes", "never_freed").filter(alloc)  # not every column of half the events
    by_operator = (
        allocs.group_by("operator")
        .agg(
            allocations=pl.len().cast(pl.Int64),
            allocated_bytes=pl.col("bytes").sum(),
            never_freed=nf.sum().cast(pl.Int64) if addresses else pl.lit(None, pl.Int64),
            never_freed_bytes=pl.col("bytes").filter(nf).sum() if addresses else pl.lit(None, pl.Int64),
        )
        .with_columns(pl.col("operator").cast(pl.String))
        .sort(["allocated_bytes", "operator"], descending=[True, False], nulls_last=True)
    )
    series = events.select(*_SERIES_SCHEMA)
    return MemoryTimeline(
        source="allocator",
        running_sum=bool(events["total_allocated"].null_count()),
        addresses=addresses,
        series=series,
        per_device=per_device,
        by_operator=by_operator,
        growth=_growth(ix, series, nvml=False),
    )


def _names_at(names: pl.Series, rows: np.ndarray) -> pl.Series:
    """The ops names of `rows` (null where -1), Categorical as trace.ops' names."""
    if not (rows >= 0).any():
        return pl.repeat(None, rows.size, dtype=pl.Categorical, eager=True)
    at = pl.Series(rows)
    return names.gather(at.set(at < 0, None)).cast(pl.Categorical)


def _stripped(names: pl.Series, prefix: str) -> pl.Series:
    """Categorical names less `prefix`: stripped once per distinct name, not once a row."""
    distinct = names.unique().drop_nulls()
    bare = distinct.cast(pl.String).str.strip_prefix(prefix)
    return names.replace_strict(distinct, bare, default=None, return_dtype=pl.Categorical)


def _with_never_freed(events: pl.DataFrame) -> pl.DataFrame:
    """`never_freed`: an allocation whose block is not freed later in the trace, i.e. the next event at its address
    (same device) is not a free (the caching allocator alternates allocation and free per block address)."""
    # events come sorted by device, time, row (allocated_after): a stable sort by (device, address) keeps each
    # block's events in that order, so a block's next event is the next position. In numpy on a device number and
    # the address: sorting and grouping the events by node, rank, device and address row-encoded the node's String
    # a row (~25 MB more at 368 k events, owlv2 x30)
    device = np.cumsum(events.select(new_device()).to_series().to_numpy())
    address = events["address"].to_numpy()
    order = np.lexsort((address, device))
    device, address = device[order], address[order]
    nbytes = events["bytes"].to_numpy()[order]
    freed_next = np.zeros(order.size, bool)
    freed_next[:-1] = (device[1:] == device[:-1]) & (address[1:] == address[:-1]) & (nbytes[1:] < 0)
    never_freed = np.empty(order.size, bool)
    never_freed[order] = (nbytes > 0) & ~freed_next
    return events.with_columns(never_freed=pl.Series(never_freed))


def _from_nvml(ix: TraceIndex, used: pl.DataFrame) -> MemoryTimeline:
    series = (
        used.select(
            pl.col("node").cast(pl.String),
            pl.lit(NODE_RANK, pl.Int32).alias("rank"),
            pl.col("instance").fill_null(-1).cast(pl.Int32).alias("device"),
            "ts_ns",
            pl.col("value").round(0).cast(pl.Int64).alias("allocated_bytes"),
            pl.lit(None, pl.Int64).alias("reserved_bytes"),
            pl.lit(None, pl.Int64).alias("bytes"),
            pl.lit(None, pl.Categorical).alias("operator"),
            pl.lit(None, pl.Categorical).alias("module"),
        )
        .with_row_index("row")
        .sort(*_DEVICE, "ts_ns", "row")
        .drop("row")
    )
    per_device = (
        series.group_by(_DEVICE, maintain_order=True)
        .agg(
            peak_allocated_bytes=pl.col("allocated_bytes").max(),
            peak_ns=pl.col("ts_ns").get(pl.col("allocated_bytes").arg_max()),
            end_allocated_bytes=pl.col("allocated_bytes").last(),
        )
        .with_columns(
            *(pl.lit(None, pl.Int64).alias(c) for c in ("peak_reserved_bytes", "allocations", "frees")),
            *(pl.lit(None, pl.Int64).alias(c) for c in ("allocated_bytes", "freed_bytes")),
            *(pl.lit(None, pl.Float64).alias(c) for c in ("allocations_per_s", "frees_per_s")),
            *(pl.lit(None, pl.Int64).alias(c) for c in ("never_freed", "never_freed_bytes")),
            peak_operator=pl.lit(None, pl.String),
            peak_module=pl.lit(None, pl.String),
        )
        .select(PER_DEVICE_COLUMNS)
    )
    by_operator = pl.DataFrame(
        schema={
            "operator": pl.String,
            "allocations": pl.Int64,
            "allocated_bytes": pl.Int64,
            "never_freed": pl.Int64,
            "never_freed_bytes": pl.Int64,
        }
    )
    return MemoryTimeline(
        source="nvml",
        running_sum=False,
        addresses=False,
        series=series,
        per_device=per_device,
        by_operator=by_operator,
        growth=_growth(ix, series, nvml=True),
    )


def _growth(ix: TraceIndex, series: pl.DataFrame, *, nvml: bool) -> pl.DataFrame:
    return growth_at_steps(step_spans(ix.trace, index=ix), series, nvml=nvml)


def growth_at_steps(steps: pl.DataFrame, series: pl.DataFrame, *, nvml: bool) -> pl.DataFrame:
    """MemoryTimeline.growth: allocated bytes at each step's end (the last event or sample at or before it) per
    device of its rank; `steps` as phases.step_spans gives them (node, rank, step, end_ns), `series` the
    timeline's."""
    steps = steps.select(pl.col("node").cast(pl.String), "rank", "step", "end_ns")
    if nvml:  # node-wide samples: the steps of each node's first rank
        first = steps.group_by("node").agg(pl.col("rank").min())
        steps = steps.join(first, on=["node", "rank"]).with_columns(pl.lit(NODE_RANK, pl.Int32).alias("rank"))
    devices = series.select(_DEVICE).filter(new_device()).unique()  # the runs' first rows: no whole-series unique
    at = steps.join(devices, on=["node", "rank"]).sort("end_ns")
    if not at.height:
        return pl.DataFrame(
            schema={
                "node": pl.String,
                "rank": pl.Int32,
                "device": pl.Int32,
                "step": pl.Int64,
                "end_ns": pl.Int64,
                "allocated_bytes": pl.Int64,
                "growth_bytes": pl.Int64,
            }
        )
    last = _last_before(series.select(*_DEVICE, "ts_ns", "allocated_bytes"), at["end_ns"]).sort("ts_ns")
    joined = at.join_asof(
        last, left_on="end_ns", right_on="ts_ns", by=list(_DEVICE), strategy="backward", check_sortedness=False
    )
    return (
        joined.sort(*_DEVICE, "step")
        .with_columns(growth_bytes=pl.col("allocated_bytes").diff().over(_DEVICE))
        .select(*_DEVICE, "step", "end_ns", "allocated_bytes", "growth_bytes")
    )


def _last_before(series: pl.DataFrame, ends: pl.Series) -> pl.DataFrame:
    """The rows of `series` (node, rank, device, ts_ns, ...) that can be a device's last event at or before one of
    `ends`: the last row of each device's run of events between two consecutive ends. The series as it is when it is
    not in device, time order. The as-of join of the steps then hashes a few rows, not every event (~30 MB at
    368 k events, owlv2 x30, for 30 steps)."""
    bounds = np.unique(ends.drop_nulls().to_numpy())
    ts = series["ts_ns"].to_numpy()
    new = series.select(new_device()).to_series().to_numpy()
    if series.height < 2 or not bool(((np.diff(ts) >= 0) | new[1:]).all()):
        return series
    between = np.searchsorted(bounds, ts, "left")  # how many ends lie before the event
    last = np.ones(series.height, bool)
    last[:-1] = new[1:] | (between[1:] != between[:-1])
    return series.filter(pl.Series(last))


def plot_series(timeline: MemoryTimeline, max_points: int = 2000) -> pl.DataFrame:
    """`timeline.series` thinned for a chart: per device at most ~max_points rows, the highest allocated (and
    reserved) bytes of each time bin, so peaks stay visible. Columns: node, rank, device, ts_ns,
    allocated_bytes, reserved_bytes."""
    s = timeline.series.select(*_DEVICE, "ts_ns", "allocated_bytes", "reserved_bytes")
    if s.height <= max_points:
        return s
    lo, hi = int(s["ts_ns"].min()), int(s["ts_ns"].max())  # type: ignore[arg-type]
    width = max(1, (hi - lo) // max(1, max_points) + 1)
    return (
        s.with_columns(((pl.col("ts_ns") - lo) // width).alias("bin"))
        .group_by(*_DEVICE, "bin")
        .agg(
            pl.col("ts_ns").get(pl.col("allocated_bytes").arg_max()),
            pl.col("allocated_bytes").max(),
            pl.col("reserved_bytes").max(),
        )
        .sort(*_DEVICE, "ts_ns")
        .drop("bin")
    )
