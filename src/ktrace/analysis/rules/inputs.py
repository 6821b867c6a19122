"""What the rules read: analysis results memoized per RuleContext, in the column names the rules use.

Every analysis a rule needs is called here, once per trace, and shared by all rules (and by the report,
which hands its context to run_rules). Rules never recompute what an analysis provides.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ktrace.analysis.rules.base import RuleContext


def launch_latency(ctx: RuleContext) -> pl.DataFrame:
    """Every GPU record joined to its launch call, both latency definitions
    (ktrace.analysis.latency.launch_latency: kind, name, row, start_ns, duration_ns, api_start_ns,
    api_end_ns, api_duration_ns, launch_latency_ns = start->start, queue_delay_ns = end->start, ...)."""
    def compute() -> pl.DataFrame:
        from ktrace.analysis.latency import launch_latency as analyse

        return analyse(ctx.trace)

    frame: pl.DataFrame = ctx.cached("launch_latency", compute)
    return frame


def kernel_precisions(ctx: RuleContext) -> pl.DataFrame:
    """Per kernel name: precision class, count, time_ns (ktrace.analysis.precision.kernel_precisions)."""
    def compute() -> pl.DataFrame:
        from ktrace.analysis.precision import kernel_precisions as analyse

        return analyse(ctx.trace)

    frame: pl.DataFrame = ctx.cached("kernel_precisions", compute)
    return frame


def kernels_by_stream(ctx: RuleContext) -> pl.DataFrame:
    """Kernels sorted by (node, rank, device, stream, start) with `prev_end_ns`: when the stream's previous
    kernel ended (null for a stream's first kernel). Streams run kernels in order, so a kernel cannot start
    before prev_end_ns; rules use it to tell waiting-for-the-stream from waiting-for-the-launch."""
    def compute() -> pl.DataFrame:
        place = ["node", "rank", "device", "stream"]
        return (ctx.trace.kernels.select(*place, "start_ns", "end_ns", "name").with_row_index("row")
                .sort(*place, "start_ns")
                .with_columns(pl.col("end_ns").shift(1).over(place).alias("prev_end_ns")))

    frame: pl.DataFrame = ctx.cached("kernels_by_stream", compute)
    return frame


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
        from ktrace.analysis.utilization import utilization_over_time

        bin_ns = auto_bin_ns(ctx, bin_ms)
        span = busy_time(ctx)
        if not span.height:
            return pl.DataFrame(schema={"node": pl.String, "rank": pl.Int32, "device": pl.Int32, "ts_ns": pl.Int64,
                                        "value": pl.Float64})
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
