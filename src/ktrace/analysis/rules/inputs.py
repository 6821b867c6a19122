"""What the rules read: analysis results memoized per RuleContext, in the column names the rules use.

Every analysis a rule needs is called here, once per trace, and shared by all rules (and by the report,
which hands its context to run_rules): the memo is the analyses' own per-trace memo, so a result summarize()
computed is not computed again. Rules never recompute what an analysis provides; launched records come from
the analyses' shared launch join as arrays (rules.launches).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.rules.base import RuleContext


def kernel_precisions(ctx: RuleContext) -> pl.DataFrame:
    """Per kernel name: precision class, count, time_ns (ktrace.analysis.precision.kernel_precisions)."""
    def compute() -> pl.DataFrame:
        from ktrace.analysis.precision import kernel_precisions as analyse

        return analyse(ctx.trace)

    frame: pl.DataFrame = ctx.cached("kernel_precisions", compute)
    return frame


FIRST_ON_STREAM = np.iinfo(np.int64).min
"""stream_prev_end's value for a stream's first kernel."""


def stream_prev_end(ctx: RuleContext) -> npt.NDArray[np.int64]:
    """Per kernel (trace.kernels row order): when the previous kernel of its (node, rank, device, stream)
    ended, FIRST_ON_STREAM for a stream's first kernel; kernels of a stream are taken in (start, row) order.
    Streams run kernels in order, so a kernel cannot start before this; rules use it to tell
    waiting-for-the-stream from waiting-for-the-launch.

    Built from the analyses' shared per-stream order (ktrace.analysis.columns.row_groups, memoized per trace):
    numpy over int64 arrays, no sort of its own.
    """
    def compute() -> npt.NDArray[np.int64]:
        from ktrace.analysis.columns import gpu_columns, row_groups

        cols = gpu_columns(ctx.trace)
        groups = row_groups(ctx.trace, "stream")
        n = cols.n_kernels
        memory_at = np.flatnonzero(groups.perm >= n)  # few: memory ops, dropped from the per-stream order
        order = np.delete(groups.perm, memory_at) if memory_at.size else groups.perm
        bounds = groups.bounds - np.searchsorted(memory_at, groups.bounds)
        out = np.empty(n, dtype=np.int64)
        out[order[1:]] = cols.end[order[:-1]]
        firsts = bounds[:-1][bounds[:-1] < bounds[1:]]  # each stream's first kernel
        out[order[firsts]] = FIRST_ON_STREAM
        return out

    found: npt.NDArray[np.int64] = ctx.cached("stream_prev_end", compute)
    return found


def steps(ctx: RuleContext) -> pl.DataFrame:
    """Training steps: node, rank, step, name, start_ns, end_ns (ktrace.analysis.phases.step_spans)."""
    def compute() -> pl.DataFrame:
        from ktrace.analysis.phases import step_spans

        return step_spans(ctx.trace)

    frame: pl.DataFrame = ctx.cached("steps", compute)
    return frame


def first_step_ns(ctx: RuleContext) -> int | None:
    """Start of the first training step on any rank, None when no step was found."""
    found = steps(ctx)
    return int(found["start_ns"].min()) if found.height else None  # type: ignore[arg-type]


def job_phases(ctx: RuleContext) -> Any:
    """Initialization / training loop / finalization (ktrace.analysis.phases.job_phases)."""
    def compute() -> Any:
        from ktrace.analysis.phases import job_phases as analyse

        return analyse(ctx.trace, steps=steps(ctx))

    return ctx.cached("job_phases", compute)


def busy_time(ctx: RuleContext) -> pl.DataFrame:
    """GPU busy time per (node, rank, device) (ktrace.analysis.utilization.busy_time)."""
    def compute() -> pl.DataFrame:
        from ktrace.analysis.utilization import busy_time as analyse

        return analyse(ctx.trace, per="device")

    frame: pl.DataFrame = ctx.cached("busy_time", compute)
    return frame


def auto_bin_ns(ctx: RuleContext, bin_ms: float) -> int:
    """`bin_ms` in ns, or for 0 the GPU span / 100 clamped to 1-500 ms."""
    if bin_ms > 0:
        return int(bin_ms * 1e6)
    busy = busy_time(ctx)
    span = int(busy["span_ns"].max() or 0) if busy.height else 0  # type: ignore[arg-type]
    return int(min(500e6, max(1e6, span / 100)))


def timeline_utilization(ctx: RuleContext, bin_ms: float) -> pl.DataFrame:
    """Per (node, rank, device) and time bin: ts_ns (bin start) and value = GPU busy % of the bin, from the
    kernel timeline (ktrace.analysis.utilization.utilization_over_time). Only whole bins inside each device's
    first..last GPU record are kept (partial edge bins would read as idle)."""
    def compute() -> pl.DataFrame:
        from ktrace.analysis.utilization import MAX_BINS, utilization_over_time

        bin_ns = auto_bin_ns(ctx, bin_ms)
        span = busy_time(ctx)
        empty = pl.DataFrame(schema={"node": pl.String, "rank": pl.Int32, "device": pl.Int32, "ts_ns": pl.Int64,
                                     "value": pl.Float64})
        if not span.height:
            return empty
        whole = int(span["last_ns"].max() or 0) - int(span["first_ns"].min() or 0)  # type: ignore[arg-type]
        if whole // bin_ns * span.height > MAX_BINS:  # clocks days apart (traces of two runs in one folder):
            return empty  # no common timeline to bin; the rules that need one say the data is missing
        util = utilization_over_time(ctx.trace, bin_ns, per="device").with_columns(pl.col("node").cast(pl.String))
        span = span.select(pl.col("node").cast(pl.String), "rank", "device", "first_ns", "last_ns")
        return (util.join(span, on=["node", "rank", "device"], how="inner")
                .filter((pl.col("bin_start_ns") >= pl.col("first_ns"))
                        & (pl.col("bin_start_ns") + bin_ns <= pl.col("last_ns")))
                .select(pl.col("node").cast(pl.String), "rank", "device", pl.col("bin_start_ns").alias("ts_ns"),
                        (100.0 * pl.col("utilization")).alias("value")))

    frame: pl.DataFrame = ctx.cached(f"timeline_utilization:{bin_ms}", compute)
    return frame


def load_balance(ctx: RuleContext) -> Any:
    """Load balance across ranks (ktrace.analysis.ranks.load_balance)."""
    def compute() -> Any:
        from ktrace.analysis.ranks import load_balance as analyse

        return analyse(ctx.trace, steps=steps(ctx))

    return ctx.cached("load_balance", compute)


def utilization_histograms(ctx: RuleContext) -> int:
    """How many utilization histograms load_balance compares, without computing them: the gpu.util counter
    series (node, GPU) when there are 2 or more, else the ranks with GPU records. Below 2 its
    histogram_distance is None."""
    counters = ctx.trace.counters
    util = counters.filter(pl.col("metric") == "gpu.util") if counters.height else counters
    series = util.select("node", "instance").unique().height if util.height else 0
    if series >= 2:
        return series
    from ktrace.analysis.columns import gpu_columns

    return int(gpu_columns(ctx.trace).rank_keys.height)  # (node, rank) pairs of the kernels and memory ops


def temporal_breakdown(ctx: RuleContext) -> pl.DataFrame:
    """Per rank: idle/compute/communication split (ktrace.analysis.breakdown.temporal_breakdown)."""
    def compute() -> pl.DataFrame:
        from ktrace.analysis.breakdown import temporal_breakdown as analyse

        return analyse(ctx.trace)

    frame: pl.DataFrame = ctx.cached("temporal_breakdown", compute)
    return frame


def step_outliers(ctx: RuleContext, stddev: float) -> pl.DataFrame:
    """Steps slower than mean + stddev x σ of their rank (ktrace.analysis.steps.step_outliers):
    node, rank, step, name, start_ns, end_ns, duration_ms."""
    from ktrace.analysis.steps import step_outliers as analyse

    found = steps(ctx).with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"))
    flagged = analyse(ctx.trace, found, stddev)
    return flagged.filter(pl.col("is_outlier")).with_columns((pl.col("duration_ns") / 1e6).alias("duration_ms"))


def dataloader_time(ctx: RuleContext, pattern: str) -> dict[str, Any] | None:
    """Data-loading time: union of the ranges matching `pattern` per rank, against the training loop
    (ktrace.analysis.annotation_histograms.matching_ranges); None when no range matches."""
    from ktrace.analysis.annotation_histograms import matching_ranges
    from ktrace.analysis.rules.frames import top_evidence
    from ktrace.analysis.utilization import grouped

    found = matching_ranges(ctx.trace, pattern, on_gpu=False)
    if not found.height:
        return None
    from ktrace.analysis._kernels.intervals import union_length

    g = grouped(found.select("node", "rank", "start_ns", "end_ns"), ("node", "rank"))
    loader_ns = int(union_length(g.gid, g.frame["start_ns"].to_numpy(), g.frame["end_ns"].to_numpy(),
                                 g.n_groups).sum())
    phases = job_phases(ctx)
    ranks = max(1, g.n_groups)
    loop_ns = int(phases.training_ns or phases.duration_ns) * ranks
    evidence = top_evidence(found, "range", pl.col("dur_ns") / 1e6, limit=10)
    return {"loader_ns": loader_ns, "loop_ns": loop_ns, "ranges": found.height, "evidence": evidence}


def gpu_gaps(ctx: RuleContext) -> pl.DataFrame | None:
    """Idle spans between the busy intervals of each GPU: node, rank, device, start_ns, end_ns, gap_ns
    (ktrace.analysis.idle.gpu_gaps). None when the trace has no GPU records."""
    def compute() -> pl.DataFrame | None:
        from ktrace.analysis.idle import gpu_gaps as analyse

        if not (ctx.trace.kernels.height or ctx.trace.memory.height):
            return None
        return analyse(ctx.trace, per="device").rename({"gap_start_ns": "start_ns", "gap_end_ns": "end_ns"})

    frame: pl.DataFrame | None = ctx.cached("gpu_gaps", compute)
    return frame
