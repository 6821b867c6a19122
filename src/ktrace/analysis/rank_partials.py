"""rank_partial(): the small, picklable tables one rank's trace contributes to a fleet summary (map side).

Each table is computed by the same analysis the single-process summary runs (busy_time, device_idle_breakdown,
kernel_stats, launch_latency, detect_steps/step_stats, comm_compute_overlap, load_balance), on the one rank's
trace, so the reduce (analysis.rank_reduce) agrees with `summarize()` of the whole job by construction: these
analyses group per (node, rank, ...), and what does not (kernel and latency quantiles, the job's span, the
step source chosen for the whole job) is carried in a mergeable form. The rank views' map sides
(rank_heatmap_part in the job's time bins, stragglers_part) ride along. A partial holds no frame of events: its
size grows with distinct kernel names, histogram bins and steps, not with the rank's events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.idle import device_idle_breakdown
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.kernels import efficiency_sums, kernel_stats
from ktrace.analysis.latency import launch_latency
from ktrace.analysis.log_histogram import histogram
from ktrace.analysis.memory_timeline import MemoryTimeline
from ktrace.analysis.overlap import comm_compute_overlap
from ktrace.analysis.phases import normalize_steps
from ktrace.analysis.python_samples import PythonProfilePart, python_profile_part
from ktrace.analysis.rank_activity import HeatmapBins, gpu_bins
from ktrace.analysis.rank_heatmap import rank_heatmap_part
from ktrace.analysis.rank_reduce_annotations import AnnotationPart, annotation_part
from ktrace.analysis.rank_reduce_collectives import collectives_part
from ktrace.analysis.rank_reduce_memory import memory_part
from ktrace.analysis.rank_reduce_operators import OperatorPart, operator_part
from ktrace.analysis.rank_reduce_roofline import RooflinePart, roofline_part
from ktrace.analysis.rank_reduce_sequences import SequencePart, sequence_part
from ktrace.analysis.rank_reduce_tables import TablesPart, tables_part
from ktrace.analysis.rank_reduce_usage import UsageBins, UsagePart, usage_part
from ktrace.analysis.ranks import load_balance, utilization_histograms, utilization_samples
from ktrace.analysis.steps import detect_steps, step_stats
from ktrace.analysis.stragglers import StragglerPart, stragglers_part
from ktrace.analysis.utilization import busy_time
from ktrace.model.trace import Trace

LATENCY_METRICS = ("launch_latency_ns", "queue_delay_ns", "api_duration_ns")
"""The launch-latency columns the summary's latency table reports (latency.latency_stats)."""


@dataclass(frozen=True)
class RankPartial:
    """What one rank (or any slice of a job with whole ranks) contributes to the fleet summary."""

    span: tuple[int, int] | None
    """(first start, last end) of this slice (Trace.span_ns)."""
    job_span: tuple[int, int] | None
    """The whole job's span the busy shares and utilization bins were computed over (None: the slice's own)."""
    steps_pattern: str | None
    """The step regex the steps were detected with (its presence changes which step source wins)."""
    rank_pairs: pl.DataFrame
    """``node`` (String), ``rank`` (Int32) of every rank present (TraceIndex.rank_pairs)."""
    kernels: int
    """Kernel rows."""
    busy: pl.DataFrame
    """utilization.busy_time per device."""
    idle: pl.DataFrame
    """idle.device_idle_breakdown."""
    kernel_totals: pl.DataFrame
    """kernels.kernel_stats' exact columns per name: name, count, total_ns, min_ns, max_ns, and the launch figures'
    time-weighted sums (kernels.efficiency_sums: ``{figure}_wsum``, ``{figure}_w``)."""
    kernel_histogram: pl.DataFrame
    """Kernel durations per name on log bins (log_histogram.histogram): name_id (the row of the name in
    kernel_totals: a long name travels once, not once per bin), bin, count."""
    latency_totals: pl.DataFrame
    """Per kind, one row per launch call (graph_run 0): kind, count, queued, and per latency metric
    ``{metric}_total`` (Int64 sum) and ``{metric}_max``."""
    latency_histogram: pl.DataFrame
    """Per kind and metric on log bins: kind, metric, bin, count."""
    step_source: str
    """steps.detect_steps' source on this slice ("none" without steps)."""
    step_spans: pl.DataFrame
    """phases.normalize_steps of the steps: node, rank, step, name, start_ns, end_ns."""
    step_stats: pl.DataFrame
    """steps.step_stats per rank."""
    overlap: pl.DataFrame
    """overlap.comm_compute_overlap per rank."""
    balance: pl.DataFrame
    """ranks.load_balance(span=job_span).per_rank."""
    counter_histograms: dict[str, npt.NDArray[np.int64]]
    """10-bin histograms of gpu.util samples per "node/gpuN" (ranks.utilization_histograms)."""
    busy_histograms: dict[str, npt.NDArray[np.int64]]
    """10-bin histograms of the busy fraction per time bin of the job span, per "node/rank"; their counts are
    the bins up to this slice's last GPU record (the reduce pads to the job's last)."""
    heatmap_bins: HeatmapBins
    """The job's heatmap time bins (rank_activity.gpu_bins of the whole job) the heatmap rows were cut in."""
    view_step_source: str
    """detect_steps' source without a pattern, as the rank views (phases.step_spans) see the steps."""
    heatmap: pl.DataFrame
    """rank_heatmap.rank_heatmap_part in heatmap_bins: this slice's rows of the rank x time and rank x step maps."""
    stragglers: StragglerPart
    """stragglers.stragglers_part: this slice's step work, top kernels and waits."""
    notes: tuple[str, ...]
    source: str = ""
    """The trace's meta.source (kineto, nsys, ktrace)."""
    tables: TablesPart | None = None
    """Active shares, GPU activity, memory operations and counters (rank_reduce_tables)."""
    sequences: SequencePart | None = None
    """Every kernel sequence with its counts (rank_reduce_sequences)."""
    operators: OperatorPart | None = None
    """The operator view by name (rank_reduce_operators)."""
    collectives: pl.DataFrame | None = None
    """The slice's NCCL kernels, a few columns (rank_reduce_collectives)."""
    roofline: RooflinePart | None = None
    """Modeled operator calls grouped, steps' FLOPs, unmodeled time, GPU names (rank_reduce_roofline)."""
    annotations: tuple[AnnotationPart, ...] = ()
    """One per annotation pattern: its ranges' durations and totals (rank_reduce_annotations)."""
    memory: MemoryTimeline | None = None
    """The slice's memory timeline, every allocating operator kept, its series thinned (rank_reduce_memory)."""
    usage: UsagePart | None = None
    """The slice's system usage and utilization curves in the job's bins (rank_reduce_usage), when asked for."""
    python: PythonProfilePart | None = None
    """The slice's Python samples by stack and by step (python_samples); None without samples."""
    rules: Any = None
    """rules.rank_rules.RuleParts of the slice (rank_rule_part), set by the driver (fleet.summary_map) when the
    rules are asked for; None otherwise. Not imported here: the rules import the reduce's modules."""


def rank_partial(
    trace: Trace,
    *,
    job_span: tuple[int, int] | None = None,
    steps_pattern: str | None = None,
    heatmap_bins: HeatmapBins | None = None,
    annotations: Sequence[str] = (),
    by_shape: bool = False,
    usage_bins: UsageBins | None = None,
    index: TraceIndex | None = None,
) -> RankPartial:
    """The fleet-summary tables of one rank's trace (see RankPartial).

    Args:
        trace: one rank (or several whole ranks) of a job.
        job_span: the whole job's (start, end) (driver: from the store's partition footers); default this trace's.
        steps_pattern: regex of step range names, as summarize's.
        heatmap_bins: the whole job's rank_activity.gpu_bins (driver: rank_activity.job_bins of the partitions'
            spans); default this trace's.
        annotations: the patterns to histogram (their ranges' durations: the client cuts the job's bins).
        by_shape: the operators by input shape even without shapes (summarize's by_shape).
        usage_bins: the job's time bins for the system usage and utilization curves (the report's); None: none.
        index: the trace's TraceIndex.

    Returns:
        RankPartial.
    """
    ix = TraceIndex.of(trace, index)
    found = detect_steps(trace, pattern=steps_pattern, index=ix)
    counters, fractions = utilization_samples(trace, span=job_span, index=ix)
    stats = kernel_stats(trace, index=ix)
    bins = heatmap_bins if heatmap_bins is not None else gpu_bins(trace, index=ix)
    view_steps = found if steps_pattern is None else detect_steps(trace, index=ix)
    view_source = str(view_steps["source"][0]) if view_steps.height else "none"
    return RankPartial(
        span=trace.span_ns(),
        job_span=job_span,
        steps_pattern=steps_pattern,
        rank_pairs=ix.rank_pairs().select(pl.col("node").cast(pl.String), pl.col("rank").cast(pl.Int32)),
        kernels=trace.kernels.height,
        busy=busy_time(trace, per="device", index=ix),
        idle=device_idle_breakdown(trace, index=ix),
        kernel_totals=stats.select("name", "count", "total_ns", "min_ns", "max_ns").join(
            efficiency_sums(trace, index=ix), on="name", how="left", nulls_equal=True, maintain_order="left"
        ),
        kernel_histogram=_kernel_histogram(trace, stats["name"]),
        latency_totals=_latency_totals(ix),
        latency_histogram=_latency_histogram(ix),
        step_source=str(found["source"][0]) if found.height else "none",
        step_spans=normalize_steps(found),
        step_stats=step_stats(trace, steps=found),
        overlap=comm_compute_overlap(trace, index=ix),
        balance=load_balance(trace, pattern=steps_pattern, span=job_span, index=ix).per_rank,
        counter_histograms=utilization_histograms(counters),
        busy_histograms=utilization_histograms(fractions),
        heatmap_bins=bins,
        view_step_source=view_source,
        heatmap=rank_heatmap_part(trace, bins, index=ix),
        stragglers=stragglers_part(trace, index=ix),
        notes=tuple(trace.meta.notes),
        source=trace.meta.source,
        tables=tables_part(trace, index=ix),
        sequences=sequence_part(trace, index=ix),
        operators=operator_part(trace, by_shape=by_shape, index=ix),
        roofline=roofline_part(trace, view_source, index=ix),
        collectives=collectives_part(trace),
        annotations=tuple(annotation_part(trace, p) for p in annotations),
        memory=memory_part(trace, index=ix),
        usage=None if usage_bins is None else usage_part(trace, usage_bins, index=ix),
        python=python_profile_part(trace, index=ix),
    )


def _kernel_histogram(trace: Trace, names: pl.Series) -> pl.DataFrame:
    ids = pl.DataFrame({"name": names}).with_row_index("name_id").with_columns(pl.col("name_id").cast(pl.Int32))
    k = trace.kernels.select(pl.col("name").cast(pl.String), duration_ns=pl.col("end_ns") - pl.col("start_ns"))
    coded = k.join(ids, on="name", how="left", nulls_equal=True).select("name_id", "duration_ns")
    return histogram(coded, ["name_id"], "duration_ns")


def _first_runs(ix: TraceIndex) -> pl.DataFrame:
    """launch_latency's rows of one per launch call (latency_stats(graph_runs="first"))."""
    lat = launch_latency(ix.trace, index=ix).filter(pl.col("graph_run") == 0)
    return lat.select(pl.col("kind").cast(pl.String), "queued", *LATENCY_METRICS)


def _latency_totals(ix: TraceIndex) -> pl.DataFrame:
    aggs: list[pl.Expr] = [pl.len().cast(pl.Int64).alias("count"), pl.col("queued").sum().cast(pl.Int64)]
    for m in LATENCY_METRICS:
        aggs += [pl.col(m).sum().cast(pl.Int64).alias(f"{m}_total"), pl.col(m).max().cast(pl.Int64).alias(f"{m}_max")]
    return _first_runs(ix).group_by("kind").agg(aggs).sort("kind")


def _latency_histogram(ix: TraceIndex) -> pl.DataFrame:
    long = _first_runs(ix).unpivot(index="kind", on=list(LATENCY_METRICS), variable_name="metric", value_name="ns")
    return histogram(long, ["kind", "metric"], "ns")
