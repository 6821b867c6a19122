"""System usage from the timeline itself (issue 26): what a trace without counter samples still says about its GPUs,
CPU threads and GPU memory, as statistics over fixed time bins (SageMaker Debugger's p50/p95/p99 per node, read
from the events instead of sampled counters).

- GPU busy % per device: the union of its kernels, memcpy and memset per bin (rules.inputs.timeline_utilization:
  the whole bins between the device's first and last record).
- CPU-side load per thread: framework operators (cpu_op) and the API calls that launched GPU work; the union of both
  per bin over the thread's whole bins, with the operator time (their union) and the launch calls' count and time.
- GPU memory in use per device from the caching allocator's events (memory_timeline, source "allocator"): the
  allocated bytes at each bin boundary inside the device's first..last event.
- The counter metrics (schema.COUNTER_METRICS) the trace has no sample of: only `ktrace run` records them.

Bins are the dashboard's utilization bins (rules.inputs.auto_bin_ns: the GPU span / 100, 1-500 ms). Percentiles
are linear interpolations over the bins; a group without one whole bin has null statistics (bins 0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.memory_timeline import memory_timeline
from ktrace.analysis.op_attribution import IS_OPERATOR
from ktrace.analysis.rules.inputs import auto_bin_ns, timeline_utilization
from ktrace.analysis.utilization import MAX_BINS
from ktrace.model.schema import COUNTER_METRICS
from ktrace.model.trace import Trace

QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
"""The percentiles of every per-bin statistic (column prefix, quantile)."""
_THREAD = ("node", "rank", "pid", "tid")
_DEVICE = ("node", "rank", "device")
_SYSTEM_USAGE = Slot["SystemUsage"]("system_usage")


@dataclass(frozen=True)
class SystemUsage:
    """System usage read from a trace's events, per GPU, CPU thread and GPU memory pool."""

    bin_ns: int
    """Width of the time bins the percentiles are taken over."""
    gpu_busy: pl.DataFrame
    """Per (node, rank, device): ``bins``, ``min_pct``, ``p50_pct``, ``p95_pct``, ``p99_pct``, ``max_pct``,
    ``mean_pct`` (GPU busy % of the bins)."""
    cpu_threads: pl.DataFrame
    """Per (node, rank, pid, tid) with an operator or a launch call: ``thread`` (its name, null when unknown),
    ``operators`` (count), ``operator_ns`` (their union), ``launches`` (API calls that launched GPU work),
    ``launch_ns`` (their summed duration), ``busy_ns`` (union of operators and launches), ``span_ns`` (first
    to last), ``bins``, ``p50_pct``, ``p95_pct``, ``p99_pct``, ``max_pct`` (busy % of the bins); sorted by
    busy_ns, most first."""
    gpu_memory: pl.DataFrame
    """Per (node, rank, device) with allocator events: ``bins``, ``p50_bytes``, ``p95_bytes``, ``p99_bytes``
    (allocated bytes at the bin boundaries), ``peak_bytes`` (the highest after any event); empty without
    allocator events."""
    counters_missing: tuple[str, ...]
    """COUNTER_METRICS with no sample in the trace, in that order."""


def system_usage(trace: Trace, *, index: TraceIndex | None = None) -> SystemUsage:
    """The system usage a trace's events show (see SystemUsage); computed once per index."""
    ix = TraceIndex.of(trace, index)
    return ix.get(_SYSTEM_USAGE, lambda: _system_usage(ix))


def _system_usage(ix: TraceIndex) -> SystemUsage:
    bin_ns = auto_bin_ns(ix, 0.0)
    present = set(ix.trace.counters["metric"].cast(pl.String).unique().to_list())
    return SystemUsage(
        bin_ns=bin_ns,
        gpu_busy=gpu_busy_stats(ix),
        cpu_threads=cpu_thread_load(ix, bin_ns),
        gpu_memory=allocator_memory_stats(ix, bin_ns),
        counters_missing=tuple(m for m in COUNTER_METRICS if m not in present),
    )


def _stats(value: pl.Expr, suffix: str) -> list[pl.Expr]:
    """p50/p95/p99 and max of `value` (over bins) named p50_<suffix>, ..., max_<suffix>."""
    out = [value.quantile(q, "linear").alias(f"{name}_{suffix}") for name, q in QUANTILES]
    return [*out, value.max().alias(f"max_{suffix}")]


def gpu_busy_stats(ix: TraceIndex) -> pl.DataFrame:
    """GPU busy % per device over the dashboard's time bins (SystemUsage.gpu_busy)."""
    return gpu_busy_of(timeline_utilization(ix, 0.0))


def gpu_busy_of(util: pl.DataFrame) -> pl.DataFrame:
    """SystemUsage.gpu_busy from rules.inputs.timeline_utilization's frame (or a rank's, in the job's bins)."""
    value = pl.col("value")
    return (
        util.group_by(_DEVICE)
        .agg(
            pl.len().cast(pl.Int64).alias("bins"),
            value.min().alias("min_pct"),
            *_stats(value, "pct"),
            value.mean().alias("mean_pct"),
        )
        .select(*_DEVICE, "bins", "min_pct", "p50_pct", "p95_pct", "p99_pct", "max_pct", "mean_pct")
        .sort(_DEVICE)
    )


def _thread_intervals(ix: TraceIndex) -> pl.DataFrame:
    """Every framework operator and launch call: node (String), rank, pid, tid, start_ns, end_ns, is_launch."""
    trace = ix.trace
    cols = (pl.col("node").cast(pl.String), "rank", "pid", "tid", "start_ns", "end_ns")
    ops = trace.ops.filter(IS_OPERATOR.fill_null(True)).select(*cols).with_columns(is_launch=pl.lit(False))
    rows = ix.launch_rows()
    launch_rows = np.unique(rows[rows >= 0])
    launches = trace.api[launch_rows].select(*cols).with_columns(is_launch=pl.lit(True))
    return pl.concat([ops, launches], how="vertical_relaxed")


def union_coverage(start: npt.NDArray[np.int64], end: npt.NDArray[np.int64]) -> Callable[[Any], Any]:
    """For intervals sorted by start: C(t), the time their union covers before t (vectorized over t)."""
    reach = np.maximum.accumulate(end)
    breaks = np.flatnonzero(start[1:] > reach[:-1]) + 1  # a gap before these: a new merged interval starts
    ms, me = start[np.r_[0, breaks]], reach[np.r_[breaks - 1, end.size - 1]]
    before = np.concatenate([[0], np.cumsum(me - ms)])

    def covered(t: Any) -> Any:
        i = np.maximum(np.searchsorted(ms, t, side="right") - 1, 0)  # the last merged interval starting by t
        return before[i] + np.clip(t - ms[i], 0, me[i] - ms[i])

    return covered


def cpu_thread_load(ix: TraceIndex, bin_ns: int) -> pl.DataFrame:
    """Operator and launch load per CPU thread (SystemUsage.cpu_threads), with busy % percentiles over the
    thread's whole bins (from its first operator or launch). Plain numpy per thread: no interval kernel."""
    intervals = _thread_intervals(ix)
    if not intervals.height:
        return _empty_threads()
    rows: list[dict[str, Any]] = []
    binned: list[pl.DataFrame] = []
    for gid, (key, part) in enumerate(intervals.sort("start_ns").group_by(_THREAD, maintain_order=True)):
        start, end = part["start_ns"].to_numpy(), part["end_ns"].to_numpy()
        launch = part["is_launch"].to_numpy()
        covered = union_coverage(start, end)
        first, last = int(start[0]), int(end.max())
        ops = ~launch
        rows.append(
            {
                "gid": gid,
                **dict(zip(_THREAD, key, strict=True)),
                "operators": int(ops.sum()),
                "operator_ns": int(union_coverage(start[ops], end[ops])(end[ops].max())) if ops.any() else 0,
                "launches": int(launch.sum()),
                "launch_ns": int((end - start)[launch].sum()),
                "busy_ns": int(covered(last)),
                "span_ns": last - first,
            }
        )
        n_bins = (last - first) // bin_ns
        if 0 < n_bins <= MAX_BINS:
            edges = first + np.arange(n_bins + 1, dtype=np.int64) * bin_ns
            share = 100.0 * np.diff(covered(edges)) / bin_ns
            binned.append(pl.DataFrame({"gid": np.full(n_bins, gid, np.int64), "value": share}))
    per = pl.DataFrame(rows, schema_overrides={"node": pl.String, "rank": pl.Int32})
    binned_all = pl.concat(binned) if binned else pl.DataFrame(schema={"gid": pl.Int64, "value": pl.Float64})
    value = pl.col("value")
    stats = binned_all.group_by("gid").agg(pl.len().cast(pl.Int64).alias("bins"), *_stats(value, "pct"))
    names = ix.trace.threads.select(
        pl.col("node").cast(pl.String), "rank", "pid", "tid", pl.col("name").cast(pl.String)
    )
    return (
        per.join(stats, on="gid", how="left")
        .join(names.unique(subset=list(_THREAD), keep="first"), on=list(_THREAD), how="left")
        .with_columns(pl.col("bins").fill_null(0))
        .select(
            *_THREAD,
            pl.col("name").alias("thread"),
            "operators",
            "operator_ns",
            "launches",
            "launch_ns",
            "busy_ns",
            "span_ns",
            "bins",
            "p50_pct",
            "p95_pct",
            "p99_pct",
            "max_pct",
        )
        .sort(["busy_ns", *_THREAD], descending=[True, False, False, False, False])
    )


def _empty_threads() -> pl.DataFrame:
    ints = ("operators", "operator_ns", "launches", "launch_ns", "busy_ns", "span_ns", "bins")
    floats = ("p50_pct", "p95_pct", "p99_pct", "max_pct")
    return pl.DataFrame(
        schema={
            "node": pl.String,
            "rank": pl.Int32,
            "pid": pl.Int64,
            "tid": pl.Int64,
            "thread": pl.String,
            **dict.fromkeys(ints, pl.Int64),
            **dict.fromkeys(floats, pl.Float64),
        }
    )


def allocator_memory_stats(ix: TraceIndex, bin_ns: int) -> pl.DataFrame:
    """Allocated GPU memory per device from the allocator's events, sampled at bin boundaries
    (SystemUsage.gpu_memory)."""
    timeline = memory_timeline(ix.trace, index=ix)
    samples: dict[str, list[int]] = {c: [] for c in (*_DEVICE, "allocated_bytes")}
    peaks: dict[str, list[int]] = {c: [] for c in (*_DEVICE, "peak_bytes")}
    if timeline is not None and timeline.source == "allocator":
        for key, part in timeline.series.group_by(_DEVICE, maintain_order=True):
            ts, allocated = part["ts_ns"].to_numpy(), part["allocated_bytes"].to_numpy()
            boundaries = np.arange(int(ts[0]) + bin_ns, int(ts[-1]) + 1, bin_ns, dtype=np.int64)
            at = allocated[np.searchsorted(ts, boundaries, side="right") - 1]  # in use at each boundary
            for column, value in zip(_DEVICE, key, strict=True):
                samples[column] += [value] * at.size
                peaks[column].append(value)
            samples["allocated_bytes"] += at.tolist()
            peaks["peak_bytes"].append(int(allocated.max()))
    keys = {"node": pl.String, "rank": pl.Int32, "device": pl.Int32}
    value = pl.col("allocated_bytes")
    stats = (
        pl.DataFrame(samples, schema={**keys, "allocated_bytes": pl.Int64})
        .group_by(_DEVICE)
        .agg(
            pl.len().cast(pl.Int64).alias("bins"),
            *(value.quantile(q, "linear").alias(f"{n}_bytes") for n, q in QUANTILES),
        )
    )
    return (
        pl.DataFrame(peaks, schema={**keys, "peak_bytes": pl.Int64})
        .join(stats, on=list(_DEVICE), how="left")
        .with_columns(pl.col("bins").fill_null(0))
        .select(*_DEVICE, "bins", "p50_bytes", "p95_bytes", "p99_bytes", "peak_bytes")
        .sort(_DEVICE)
    )
