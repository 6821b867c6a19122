"""What the rules read: analysis results shared through the trace's TraceIndex, in the column names the rules use.

Every analysis a rule needs is called here with the rules' index, so it is computed once per trace and
shared by all rules (and by summarize(), the report and the TUI when they hand the same index to run_rules).
Rules never recompute what an analysis provides; launched records come from the index's launch join as
arrays (rules.launches).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.annotation_histograms import matching_ranges
from ktrace.analysis.breakdown import temporal_breakdown as analyse_breakdown
from ktrace.analysis.columns import node_rank_ids, time_order
from ktrace.analysis.idle import gpu_gaps as analyse_gaps
from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.phases import JobPhases, step_spans
from ktrace.analysis.phases import job_phases as analyse_phases
from ktrace.analysis.precision import kernel_precisions as analyse_precisions
from ktrace.analysis.ranks import LoadBalance
from ktrace.analysis.ranks import load_balance as analyse_balance
from ktrace.analysis.rules.frames import top_evidence
from ktrace.analysis.steps import flag_step_outliers
from ktrace.analysis.utilization import busy_time as analyse_busy
from ktrace.analysis.utilization import utilization_over_time

_PRECISIONS = Slot[pl.DataFrame]("rules.kernel_precisions")
_PREV_END = Slot[npt.NDArray[np.int64]]("rules.stream_prev_end")
_TIMELINE_UTIL = Slot[pl.DataFrame]("rules.timeline_utilization")
_GAPS = Slot[pl.DataFrame | None]("rules.gpu_gaps")


def kernel_precisions(index: TraceIndex) -> pl.DataFrame:
    """Per kernel name: precision class, count, time_ns (ktrace.analysis.precision.kernel_precisions)."""
    return index.get(_PRECISIONS, lambda: analyse_precisions(index.trace, index=index))


FIRST_ON_STREAM = np.iinfo(np.int64).min
"""stream_prev_end's value for a stream's first kernel."""


def stream_prev_end(index: TraceIndex) -> npt.NDArray[np.int64]:
    """Per kernel (trace.kernels row order): when the previous kernel of its (node, rank, device, stream)
    ended, FIRST_ON_STREAM for a stream's first kernel; kernels of a stream are taken in (start, row) order.
    Streams run kernels in order, so a kernel cannot start before this; rules use it to tell
    waiting-for-the-stream from waiting-for-the-launch.

    Built from the index's per-stream order (TraceIndex.row_groups): numpy over int64 arrays, no sort of its own.
    """

    def compute() -> npt.NDArray[np.int64]:
        cols = index.gpu_columns()
        groups = index.row_groups("stream")
        n = cols.n_kernels
        memory_at = np.flatnonzero(groups.perm >= n)  # few: memory ops, dropped from the per-stream order
        order = np.delete(groups.perm, memory_at) if memory_at.size else groups.perm
        bounds = groups.bounds - np.searchsorted(memory_at, groups.bounds)
        out = np.empty(n, dtype=np.int64)
        out[order[1:]] = cols.end[order[:-1]]
        firsts = bounds[:-1][bounds[:-1] < bounds[1:]]  # each stream's first kernel
        out[order[firsts]] = FIRST_ON_STREAM
        return out

    return index.get(_PREV_END, compute)


def steps(index: TraceIndex) -> pl.DataFrame:
    """Training steps: node, rank, step, name, start_ns, end_ns (ktrace.analysis.phases.step_spans)."""
    return step_spans(index.trace, index=index)


def first_step_ns(index: TraceIndex) -> int | None:
    """Start of the first training step on any rank, None when no step was found."""
    found = steps(index)
    return int(found["start_ns"].min()) if found.height else None  # type: ignore[arg-type]


def job_phases(index: TraceIndex) -> JobPhases:
    """Initialization / training loop / finalization (ktrace.analysis.phases.job_phases)."""
    return analyse_phases(index.trace, index=index)


def busy_time(index: TraceIndex) -> pl.DataFrame:
    """GPU busy time per (node, rank, device) (ktrace.analysis.utilization.busy_time)."""
    return analyse_busy(index.trace, per="device", index=index)


def auto_bin_ns(index: TraceIndex, bin_ms: float) -> int:
    """`bin_ms` in ns, or for 0 the GPU span / 100 clamped to 1-500 ms."""
    return bin_ns_of(busy_time(index) if bin_ms <= 0 else None, bin_ms)


def bin_ns_of(busy: pl.DataFrame | None, bin_ms: float = 0.0) -> int:
    """auto_bin_ns from a busy_time per device frame (a trace's, or a Summary's `busy`, also reduced rank by rank):
    `bin_ms` in ns, or for 0 the longest device span / 100 clamped to 1-500 ms."""
    if bin_ms > 0:
        return int(bin_ms * 1e6)
    span = int(busy["span_ns"].max() or 0) if busy is not None and busy.height else 0  # type: ignore[arg-type]
    return int(min(500e6, max(1e6, span / 100)))


def timeline_utilization(index: TraceIndex, bin_ms: float) -> pl.DataFrame:
    """Per (node, rank, device) and time bin: ts_ns (bin start) and value = GPU busy % of the bin, from the
    kernel timeline (ktrace.analysis.utilization.utilization_over_time). Only whole bins inside each device's
    first..last GPU record are kept (partial edge bins would read as idle)."""

    def compute() -> pl.DataFrame:
        from ktrace.analysis.utilization import MAX_BINS

        bin_ns = auto_bin_ns(index, bin_ms)
        span = busy_time(index)
        whole = int(span["last_ns"].max() or 0) - int(span["first_ns"].min() or 0) if span.height else 0  # type: ignore[arg-type]
        # clocks days apart (traces of two runs in one folder): no common timeline to bin; the rules that need
        # one say the data is missing
        too_many = whole // bin_ns * span.height > MAX_BINS
        return device_utilization(index, bin_ns, empty=too_many)

    return index.get(_TIMELINE_UTIL, compute, bin_ms)


def device_utilization(
    index: TraceIndex, bin_ns: int, t0_ns: int | None = None, *, empty: bool = False
) -> pl.DataFrame:
    """timeline_utilization's frame in bins of `bin_ns` from `t0_ns` (default: the first GPU record's start): the
    rank-by-rank path cuts each rank in the job's bins (fleet.summary_map). `empty`: no rows (the job has too many
    bins to cut), with the frame's columns."""
    span = busy_time(index)
    if empty or not span.height:
        return pl.DataFrame(
            schema={"node": pl.String, "rank": pl.Int32, "device": pl.Int32, "ts_ns": pl.Int64, "value": pl.Float64}
        )
    util = utilization_over_time(index.trace, bin_ns, per="device", t0_ns=t0_ns, index=index).with_columns(
        pl.col("node").cast(pl.String)
    )
    span = span.select(pl.col("node").cast(pl.String), "rank", "device", "first_ns", "last_ns")
    return (
        util.join(span, on=["node", "rank", "device"], how="inner")
        .filter((pl.col("bin_start_ns") >= pl.col("first_ns")) & (pl.col("bin_start_ns") + bin_ns <= pl.col("last_ns")))
        .select(
            pl.col("node").cast(pl.String),
            "rank",
            "device",
            pl.col("bin_start_ns").alias("ts_ns"),
            (100.0 * pl.col("utilization")).alias("value"),
        )
    )


def load_balance(index: TraceIndex) -> LoadBalance:
    """Load balance across ranks (ktrace.analysis.ranks.load_balance)."""
    return analyse_balance(index.trace, index=index)


def utilization_histograms(index: TraceIndex) -> int:
    """How many utilization histograms load_balance compares, without computing them: the gpu.util counter
    series (node, GPU) when there are 2 or more, else the ranks with GPU records. Below 2 its
    histogram_distance is None."""
    counters = index.trace.counters
    util = counters.filter(pl.col("metric") == "gpu.util") if counters.height else counters
    series = util.select("node", "instance").unique().height if util.height else 0
    if series >= 2:
        return series
    return int(index.gpu_columns().rank_keys.height)  # (node, rank) pairs of the kernels and memory ops


def temporal_breakdown(index: TraceIndex) -> pl.DataFrame:
    """Per rank: idle/compute/communication split (ktrace.analysis.breakdown.temporal_breakdown)."""
    return analyse_breakdown(index.trace, index=index)


def outlier_steps(spans: pl.DataFrame, stddev: float) -> pl.DataFrame:
    """step_outliers of step spans (a trace's, or a fleet's reduced ones): the outliers, with duration_ms."""
    found = spans.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"))
    flagged = flag_step_outliers(found, stddev)
    return flagged.filter(pl.col("is_outlier")).with_columns((pl.col("duration_ns") / 1e6).alias("duration_ms"))


def dataloader_time(index: TraceIndex, pattern: str) -> dict[str, Any] | None:
    """Data-loading time: union of the ranges matching `pattern` per rank, against the training loop
    (ktrace.analysis.annotation_histograms.matching_ranges); None when no range matches."""
    from ktrace.analysis._kernels.intervals import union_length

    found = matching_ranges(index.trace, pattern, on_gpu=False)
    if not found.height:
        return None
    keys, (gid,) = node_rank_ids([found])
    start = found["start_ns"].to_numpy().astype(np.int64)
    perm, _ = time_order(gid, keys.height, start)
    loader_ns = int(
        union_length(gid[perm], start[perm], found["end_ns"].to_numpy().astype(np.int64)[perm], keys.height).sum()
    )
    phases = job_phases(index)
    ranks = max(1, keys.height)
    loop_ns = int(phases.training_ns or phases.duration_ns) * ranks
    evidence = top_evidence(found, "range", pl.col("dur_ns") / 1e6, limit=10)
    return {"loader_ns": loader_ns, "loop_ns": loop_ns, "ranges": found.height, "evidence": evidence}


def gpu_gaps(index: TraceIndex) -> pl.DataFrame | None:
    """Idle spans between the busy intervals of each GPU: node, rank, device, start_ns, end_ns, gap_ns
    (ktrace.analysis.idle.gpu_gaps). None when the trace has no GPU records."""

    def compute() -> pl.DataFrame | None:
        if not (index.trace.kernels.height or index.trace.memory.height):
            return None
        found = analyse_gaps(index.trace, per="device", index=index)
        return found.rename({"gap_start_ns": "start_ns", "gap_end_ns": "end_ns"})

    return index.get(_GAPS, compute)
