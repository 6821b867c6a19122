"""The "exact" rules on the rank-by-rank path: their inputs, reduced exactly from every rank, and their checks.

A rule is "exact" (Rule.fleet_mode) when the job-wide input its threshold reads is the reduced Summary's
(StepOutlier: every rank's step spans; MaxInitializationTime: the job phases; LoadBalancing: the job's
LoadBalance), or a small per-rank table each rank sends in its ExactInputs and the client adds up
(CPUBoundCriticalPath: the job's critical path; CommNotOverlapped: the per-rank temporal breakdown; FP32Matmul: the count and GPU time per kernel name and
precision, and the GPUs' compute capability; DroppedRecords: the records and the health counts). Each check is the
one the rule runs on a whole trace, so the verdict, datapoints and findings are those of one process.

Health counts: a store keeps the job's in meta.json (imports) and each process's in its partition.json
(`ktrace run`); a rank read alone carries the store's plus its own. The job's are those of the whole store read
(`job_health`, given by the driver); without them they are rebuilt from the ranks' (merge_health).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rules.base import Outcome, ParamValue, Skip
from ktrace.analysis.rules.critical_path import cpu_bound_outcome
from ktrace.analysis.rules.health import dropped_outcome, records
from ktrace.analysis.rules.inputs import kernel_precisions, temporal_breakdown
from ktrace.analysis.rules.sagemaker import max_init_outcome, step_outlier_outcome
from ktrace.analysis.rules.sagemaker_capacity import load_balancing_outcome
from ktrace.analysis.rules.timeline_gpu import comm_overlap_outcome
from ktrace.analysis.rules.timeline_latency import compute_major, fp32_matmul_outcome
from ktrace.analysis.summary import Summary


@dataclass(frozen=True)
class ExactInputs:
    """What one rank (or a slice of whole ranks) sends for the "exact" rules whose input the Summary lacks; its
    size grows with ranks and distinct kernel names, not with events."""

    breakdown: pl.DataFrame
    """breakdown.temporal_breakdown per rank (CommNotOverlapped)."""
    precisions: pl.DataFrame
    """precision.kernel_precisions: name, precision, count, time_ns (FP32Matmul)."""
    compute_major: int | None
    """The GPUs' highest compute capability major (FP32Matmul), None when the devices table does not say."""
    records: int = 0
    """Rows of the event tables (DroppedRecords)."""
    health: Mapping[str, int] = field(default_factory=dict)
    """The trace's health counts as read (DroppedRecords): for a rank of a store, the store's and its own."""


def exact_inputs(index: TraceIndex) -> ExactInputs:
    """The ExactInputs of the trace of `index` (computed through the rules' shared index)."""
    trace = index.trace
    return ExactInputs(
        temporal_breakdown(index), kernel_precisions(index), compute_major(trace), records(trace), trace.meta.health
    )


def merge_exact_inputs(parts: Sequence[ExactInputs], job_health: Mapping[str, int] | None = None) -> ExactInputs:
    """The job's ExactInputs from its ranks': breakdown rows by (node, rank), per-name counts and times summed
    (in kernel_precisions' order: time descending, then name), the highest compute capability, records summed,
    and `job_health` (the whole store's health counts), else merge_health of the ranks'."""
    if not parts:
        raise ValueError("no rank's inputs to merge")
    breakdown = pl.concat([p.breakdown for p in parts], how="vertical_relaxed").sort(
        "node", "rank", maintain_order=True
    )
    precisions = (
        pl.concat([p.precisions for p in parts], how="vertical_relaxed")
        .group_by("name", "precision")
        .agg(pl.col("count").sum().cast(pl.Int64), pl.col("time_ns").sum().cast(pl.Int64))
        .sort(["time_ns", "name"], descending=[True, False])
    )
    majors = [p.compute_major for p in parts if p.compute_major is not None]
    health = dict(job_health) if job_health is not None else merge_health([p.health for p in parts])
    return ExactInputs(breakdown, precisions, max(majors) if majors else None, sum(p.records for p in parts), health)


def merge_health(counts: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """The job's health counts from its ranks' as read (each the store's count S plus its own R_i): a count every
    rank has alike is the store's (S); else S + sum(R_i), taking S as the smallest rank's (exact when some rank
    has none of that count of its own, as a capture's node or an idle rank has; an undercount otherwise: pass the
    store's counts to merge_exact_inputs)."""
    keys = sorted({k for c in counts for k in c})
    out = {}
    for key in keys:
        values = [int(c.get(key, 0)) for c in counts]
        low = min(values)
        out[key] = values[0] if low == max(values) else sum(values) - (len(values) - 1) * low
    return out


ExactCheck = Callable[[ExactInputs, Summary, Mapping[str, ParamValue]], Outcome]


def _step_outlier(inputs: ExactInputs, summary: Summary, p: Mapping[str, ParamValue]) -> Outcome:
    return step_outlier_outcome(summary.steps, p)


def _max_init(inputs: ExactInputs, summary: Summary, p: Mapping[str, ParamValue]) -> Outcome:
    return max_init_outcome(summary.phases, p)


def _load_balancing(inputs: ExactInputs, summary: Summary, p: Mapping[str, ParamValue]) -> Outcome:
    if summary.load_balance is None:
        raise Skip("the trace has fewer than two ranks with GPU utilization")
    return load_balancing_outcome(summary.load_balance, p)


def _comm_overlap(inputs: ExactInputs, summary: Summary, p: Mapping[str, ParamValue]) -> Outcome:
    return comm_overlap_outcome(inputs.breakdown, p)


def _fp32_matmul(inputs: ExactInputs, summary: Summary, p: Mapping[str, ParamValue]) -> Outcome:
    return fp32_matmul_outcome(inputs.precisions, inputs.compute_major, p)


def _dropped(inputs: ExactInputs, summary: Summary, p: Mapping[str, ParamValue]) -> Outcome:
    return dropped_outcome(inputs.health, inputs.records, p)


def _cpu_bound(inputs: ExactInputs, summary: Summary, p: Mapping[str, ParamValue]) -> Outcome:
    return cpu_bound_outcome(summary.critical_path, p)


EXACT_CHECKS: dict[str, ExactCheck] = {
    "StepOutlier": _step_outlier,
    "MaxInitializationTime": _max_init,
    "LoadBalancing": _load_balancing,
    "CommNotOverlapped": _comm_overlap,
    "FP32Matmul": _fp32_matmul,
    "DroppedRecords": _dropped,
    "CPUBoundCriticalPath": _cpu_bound,
}
"""Rule name -> its check on the job's reduced inputs (the rules whose fleet_mode is "exact")."""
