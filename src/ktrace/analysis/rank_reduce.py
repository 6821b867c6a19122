"""reduce_partials(): the Summary of a many-rank job from the RankPartials of its ranks (reduce side).

The Summary is the one `summarize()` gives in one process, field by field (testing.fleet_compare checks it):

=================  =====================================================================================
field              how it is reduced
=================  =====================================================================================
source, ranks,     exact: the store's source; ranks and kernel rows counted.
kernels
phases             exact: the job's span and the step spans of the step source the whole job uses.
active             per rank, concatenated; CPU timeline rows dropped for nodes with a cpu.util counter.
busy, idle,        per device / per rank, concatenated in (node, rank) order.
overlap, steps,
step_stats
top_by_time,       job-wide: counts, sums, min, max exact, mean = sum / count, shares from the sums;
top_by_count       p50/p95 from merged log-bin histograms (within log_histogram.RELATIVE_ERROR).
latency            job-wide: counts, queued, means, maxima exact; percentiles from merged histograms.
precision          job-wide: the kernel counts and times per name, summed, classed as one process.
activity, memory   job-wide: counts, bytes, times summed; shares and bandwidth from the sums.
counters           per (node, metric, instance): exact where one partition holds the key; else counts,
                   min, max exact, mean = sum / count, percentiles from merged histograms.
load_balance       job-wide: per-rank rows concatenated, utilization histograms summed (exact).
operators          job-wide: every name's (operator, shapes, operator x kernel, module, Python frame) sums
                   added up (exact; mean latency = sum / count); the top tables taken from the sums.
kernel_sequences   job-wide: every sequence's occurrences, streams and time summed (a stream is one rank's).
annotations        job-wide: every rank's range durations, cut in the job's bins on the client (exact);
                   per name as top_by_time.
collectives        job-wide: every rank's NCCL kernels (a few columns) joined on the client, by_size and the
                   arrival skew computed on them as one process does (exact).
roofline           job-wide: modeled calls per (name, shapes, dtypes) summed (exact), the GPU and dominant
                   precision from the sums; MFU per step per rank (the job's step source).
notes              every rank's notes, once each, and what this path does not compute.
stragglers         job-wide: analysis.rank_views_reduce (exact).
critical_path      None here: fleet.summary_map sets the job's (fleet.critical_path_map: per-rank graphs
                   joined at the collectives on the client, equal to one process's) and its notes.
memory_timeline    per device (a rank's allocations are its device's), operators' sums added up, churn over the
                   job's span (analysis.rank_reduce_memory: the series thinned per device, growth per rank's steps).
=================  =====================================================================================

The client keeps the per-rank rows (a few per rank) and merges the job-wide parts every _COMPACT_EVERY partials,
so it holds no frame of events but the NCCL kernels' few columns (collectives), nor every rank's histograms.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.dashboard import UtilizationSeries
from ktrace.analysis.gpu_peaks import GpuPeaks
from ktrace.analysis.kernels import top_of_stats
from ktrace.analysis.log_histogram import merge_histograms
from ktrace.analysis.memory_timeline import MemoryTimeline
from ktrace.analysis.phases import JobPhases, phases_of
from ktrace.analysis.precision import classify_names, distribution_of
from ktrace.analysis.python_samples import PythonProfilePart, merge_python_parts, reduce_python_profiles
from ktrace.analysis.rank_heatmap import RankHeatmap
from ktrace.analysis.rank_partials import RankPartial
from ktrace.analysis.rank_reduce_annotations import AnnotationPart, job_annotations, merge_annotation_parts
from ktrace.analysis.rank_reduce_collectives import job_collectives, merge_collectives_parts
from ktrace.analysis.rank_reduce_kernels import (
    job_kernel_stats,
    job_latency,
    merge_kernel_totals,
    merge_latency_totals,
    named_histogram,
)
from ktrace.analysis.rank_reduce_memory import job_memory_timeline, merge_memory_parts
from ktrace.analysis.rank_reduce_operators import OperatorPart, job_operators, merge_operator_parts
from ktrace.analysis.rank_reduce_roofline import RooflinePart, job_roofline, merge_roofline_parts
from ktrace.analysis.rank_reduce_sequences import SequencePart, job_sequences, merge_sequences
from ktrace.analysis.rank_reduce_tables import (
    TablesPart,
    merge_tables,
    merged_active,
    merged_activity,
    merged_counters,
    merged_memory,
)
from ktrace.analysis.rank_reduce_usage import UsagePart, job_usage
from ktrace.analysis.rank_views_reduce import ViewFold, view_step_source
from ktrace.analysis.ranks import HIST_BINS, LoadBalance, balance_of
from ktrace.analysis.summary import NO_MEMORY_TIMELINE, Summary, absent_notes
from ktrace.analysis.system_usage import SystemUsage

__all__ = ["FleetResult", "reduce_partials"]

_SOURCE_ORDER = ("profiler_step", "annotation", "periodic")
_PATTERN_SOURCE_ORDER = ("annotation", "profiler_step", "periodic")
_STEP_COLUMNS = ("step_mean_ns", "step_p50_ns")


@dataclass(frozen=True)
class FleetResult:
    """The rank-by-rank summary of a job: its Summary, and what the views need beside it."""

    summary: Summary
    """The Summary summarize() gives of the whole job (see the module docstring)."""
    rank_heatmap: RankHeatmap | None
    """rank_heatmap.rank_heatmap of the whole job; only with 2 or more ranks."""
    rules: Any = None
    """The job's rules.engine.RulesReport (fleet.summary_map folds the partials' RuleParts as they arrive,
    rules.rank_rules.RuleFold, and sets it); None without rules. Not imported here: the rules import the reduce's
    modules."""
    engine: str = "in-process"
    """The engine the per-rank work ran on (set by ktrace.fleet's driver)."""
    system_usage: SystemUsage | None = None
    """system_usage.system_usage of the whole job (rank_reduce_usage), when the partials carry it (the report's)."""
    utilization: tuple[UtilizationSeries, ...] = ()
    """dashboard.utilization_series of the whole job, with system_usage."""


_COMPACT_EVERY = 64
"""Partials folded between two merges of the histograms and totals: the client holds the merged tables plus at
most this many ranks' worth, not every rank's histograms."""


@dataclass
class _Fold:
    """The reduce's running state: per-rank rows kept, histograms and totals merged as partials arrive."""

    per_rank: list[_RankRows] = field(default_factory=list)
    kernels: int = 0
    spans: list[tuple[int, int]] = field(default_factory=list)
    kernel_totals: list[pl.DataFrame] = field(default_factory=list)
    kernel_histogram: list[pl.DataFrame] = field(default_factory=list)
    latency_totals: list[pl.DataFrame] = field(default_factory=list)
    latency_histogram: list[pl.DataFrame] = field(default_factory=list)
    counters: dict[str, npt.NDArray[np.int64]] = field(default_factory=dict)
    busy_bins: dict[str, npt.NDArray[np.int64]] = field(default_factory=dict)
    notes: dict[str, None] = field(default_factory=dict)
    pattern: str | None = None
    views: ViewFold = field(default_factory=ViewFold)
    source: str = ""
    tables: list[TablesPart] = field(default_factory=list)
    sequences: list[SequencePart] = field(default_factory=list)
    operators: list[OperatorPart] = field(default_factory=list)
    roofline: list[RooflinePart] = field(default_factory=list)
    collectives: list[pl.DataFrame] = field(default_factory=list)
    view_sources: set[str] = field(default_factory=set)
    annotations: dict[str, list[AnnotationPart]] = field(default_factory=dict)
    memory: list[MemoryTimeline] = field(default_factory=list)
    usage: list[UsagePart] = field(default_factory=list)
    python: list[PythonProfilePart] = field(default_factory=list)
    by_shape: bool = False
    user_patterns: bool = True
    """False: the annotation patterns are the default candidates (only those some rank has are shown)."""

    def add(self, p: RankPartial) -> None:
        self.per_rank.append(_RankRows.of(p))
        self.kernels += p.kernels
        self.spans += [p.span] if p.span is not None else []
        self.kernel_totals.append(p.kernel_totals)
        self.kernel_histogram.append(named_histogram(p.kernel_histogram, p.kernel_totals["name"]))
        self.latency_totals.append(p.latency_totals)
        self.latency_histogram.append(p.latency_histogram)
        _add_histograms(self.counters, p.counter_histograms)
        _add_histograms(self.busy_bins, p.busy_histograms)
        self.notes.update(dict.fromkeys(p.notes))
        self.pattern = p.steps_pattern
        self.views.add(p)
        self.source = self.source or p.source
        self.tables += [p.tables] if p.tables is not None else []
        self.sequences += [p.sequences] if p.sequences is not None else []
        self.operators += [p.operators] if p.operators is not None else []
        self.roofline += [p.roofline] if p.roofline is not None else []
        self.collectives += [p.collectives] if p.collectives is not None else []
        self.view_sources.add(p.view_step_source)
        for a in p.annotations:
            self.annotations.setdefault(a.pattern, []).append(a)
        self.memory += [p.memory] if p.memory is not None else []
        self.usage += [p.usage] if p.usage is not None else []
        self.python += [p.python] if p.python is not None else []
        if len(self.kernel_totals) >= _COMPACT_EVERY:
            self.compact()

    def compact(self) -> None:
        self.kernel_totals = [merge_kernel_totals(self.kernel_totals)]
        self.kernel_histogram = [merge_histograms(self.kernel_histogram, ["name"])]
        self.latency_totals = [merge_latency_totals(self.latency_totals)]
        self.latency_histogram = [merge_histograms(self.latency_histogram, ["kind", "metric"])]
        self.views.compact()
        self.tables = [merge_tables(self.tables)] if self.tables else []
        self.sequences = [merge_sequences(self.sequences)] if self.sequences else []
        self.operators = [merge_operator_parts(self.operators, by_shape=self.by_shape)] if self.operators else []
        self.annotations = {k: [merge_annotation_parts(v)] for k, v in self.annotations.items()}
        self.roofline = [merge_roofline_parts(self.roofline)] if self.roofline else []
        self.collectives = [merge_collectives_parts(self.collectives)] if self.collectives else []
        merged = merge_memory_parts(self.memory)
        self.memory = [merged] if merged is not None else []
        python = merge_python_parts(self.python)
        self.python = [python] if python is not None else []


@dataclass(frozen=True)
class _RankRows:
    """The per-rank rows of one partial the reduce keeps (small: a few rows, and the steps)."""

    rank_pairs: pl.DataFrame
    busy: pl.DataFrame
    idle: pl.DataFrame
    step_source: str
    step_spans: pl.DataFrame
    step_stats: pl.DataFrame
    overlap: pl.DataFrame
    balance: pl.DataFrame

    def order(self) -> tuple[str, int]:
        """The first (node, rank) of the partial (partials arrive in any order)."""
        first = self.rank_pairs.sort("node", "rank").head(1)
        return (str(first["node"][0]), int(first["rank"][0])) if first.height else ("", -(2**31))

    @staticmethod
    def of(p: RankPartial) -> _RankRows:
        return _RankRows(p.rank_pairs, p.busy, p.idle, p.step_source, p.step_spans, p.step_stats, p.overlap, p.balance)


def reduce_partials(
    partials: Iterable[RankPartial],
    *,
    top: int = 15,
    by_shape: bool = False,
    gpu_peaks: Mapping[str, GpuPeaks] | None = None,
    default_annotations: bool = False,
) -> FleetResult:
    """Merge the partials of every rank of one job (any order, consumed as they come) into its Summary.

    Args:
        partials: one per partition (rank) of the job.
        top: kernels and operators listed in the top tables, as summarize's.
        by_shape: the operators by input shape even without shapes, as summarize's.
        gpu_peaks: gpu_peaks rows from a rules file, as summarize's (the roofline's peaks).
        default_annotations: the partials' annotation patterns are the default candidates
            (dashboard.default_annotations): only those some rank has are histogrammed.

    Returns:
        FleetResult.

    Raises:
        ValueError: no partial.
    """
    fold = _Fold(by_shape=by_shape, user_patterns=not default_annotations)
    for p in partials:
        fold.add(p)
    if not fold.per_rank:
        raise ValueError("reduce_partials needs the partial of at least one rank")
    fold.compact()
    rows = sorted(fold.per_rank, key=_RankRows.order)  # per-rank frames in (node, rank) order, as one process has
    pairs = _concat([r.rank_pairs for r in rows]).unique().sort("node", "rank")
    ranks = int((pairs["rank"] >= 0).sum()) if pairs.height else 0
    source = _step_source([r.step_source for r in rows], fold.pattern)
    kept = [r for r in rows if r.step_source == source]
    steps = _rank_rows([r.step_spans for r in kept], rows[0].step_spans)
    stats = job_kernel_stats(fold.kernel_totals[0], fold.kernel_histogram[0])
    balance = _balance(rows, source)
    heatmap, lag = fold.views.finish()
    summary = _summary(fold, rows, stats, ranks, steps, top, gpu_peaks)
    summary = replace(
        summary,
        phases=_phases(fold.spans, steps, source),
        steps=steps,
        step_stats=_rank_rows([r.step_stats for r in kept], rows[0].step_stats),
        load_balance=_load_balance(fold, balance) if ranks > 1 else None,
        stragglers=lag if ranks > 1 else None,
    )
    usage = job_usage(fold.usage)
    return FleetResult(
        system_usage=usage[0] if usage is not None else None,
        utilization=usage[1] if usage is not None else (),
        summary=summary,
        rank_heatmap=heatmap if ranks > 1 else None,
    )


def _summary(
    fold: _Fold,
    rows: Sequence[_RankRows],
    stats: pl.DataFrame,
    ranks: int,
    steps: pl.DataFrame,
    top: int,
    gpu_peaks: Mapping[str, GpuPeaks] | None,
) -> Summary:
    """The Summary's fields but the steps' (reduce_partials sets those)."""
    (tables,) = fold.tables
    (sequences,) = fold.sequences
    (operators,) = fold.operators
    (roofline,) = fold.roofline
    (comm,) = fold.collectives
    ops = job_operators(operators, top=top)
    kernel_sequences = job_sequences(sequences)
    annotations = job_annotations([parts[0] for parts in fold.annotations.values()], fold.user_patterns)
    memory = job_memory_timeline(merge_memory_parts(fold.memory), _span(fold.spans), steps)
    notes = tuple(fold.notes) + absent_notes(ops, kernel_sequences) + ((NO_MEMORY_TIMELINE,) if memory is None else ())
    return Summary(
        source=fold.source,
        ranks=ranks,
        kernels=fold.kernels,
        phases=JobPhases(0, 0, 0, 0, 0, 0),
        active=merged_active(tables),
        busy=_rank_rows([r.busy for r in rows]),
        idle=_rank_rows([r.idle for r in rows]),
        top_by_time=top_of_stats(stats, by="time", top=top),
        top_by_count=top_of_stats(stats, by="count", top=top),
        latency=job_latency(fold.latency_totals[0], fold.latency_histogram[0]),
        steps=steps,
        step_stats=steps,
        precision=distribution_of(_precisions(stats)),
        activity=merged_activity(tables),
        memory=merged_memory(tables),
        counters=merged_counters(tables),
        overlap=_rank_rows([r.overlap for r in rows]),
        load_balance=None,
        operators=ops,
        kernel_sequences=kernel_sequences,
        annotations=annotations,
        notes=notes,
        roofline=job_roofline(roofline, view_step_source(sorted(fold.view_sources)), gpu_peaks),
        collectives=job_collectives(comm),
        memory_timeline=memory,
        python_profile=reduce_python_profiles(fold.python),
    )


def _precisions(stats: pl.DataFrame) -> pl.DataFrame:
    """precision.kernel_precisions of the job from its kernel stats (a name's class is the name's)."""
    per_name = stats.select("name", "count", time_ns="total_ns")
    classes = classify_names(per_name["name"])
    return per_name.join(classes, on="name", how="left").select(
        "name", "precision", pl.col("count").cast(pl.Int64), pl.col("time_ns").cast(pl.Int64)
    )


def _concat(frames: Sequence[pl.DataFrame], empty: pl.DataFrame | None = None) -> pl.DataFrame:
    found = [f for f in frames if f.height]
    if not found:
        return (frames[0] if frames else (empty if empty is not None else pl.DataFrame())).clear()
    return pl.concat(found, how="vertical_relaxed")


def _rank_rows(frames: Sequence[pl.DataFrame], empty: pl.DataFrame | None = None) -> pl.DataFrame:
    """The partials' per-rank frames as one, in (node, rank) order and each rank's rows in their order: a partial
    of several ranks holds them in its partitions' order (rank=10 before rank=8), so the job's frame does not
    depend on how the ranks were cut into tasks."""
    found = _concat(frames, empty)
    if not found.height or "node" not in found.columns:
        return found
    return found.sort(pl.col("node").cast(pl.String), "rank", maintain_order=True)


def _step_source(sources: Sequence[str], pattern: str | None) -> str:
    """The source detect_steps picks for the whole job: the first of its tries that any rank has."""
    order = _PATTERN_SOURCE_ORDER if pattern is not None else _SOURCE_ORDER
    return next((s for s in order if s in set(sources)), "none")


def _span(spans: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
    """The whole job's Trace.span_ns from its partials'."""
    return (min(s for s, _ in spans), max(e for _, e in spans)) if spans else None


def _phases(spans: Sequence[tuple[int, int]], steps: pl.DataFrame, source: str) -> JobPhases:
    """phases.job_phases of the whole job."""
    return phases_of(_span(spans), steps, source)


def _balance(rows: Sequence[_RankRows], source: str) -> pl.DataFrame:
    """load_balance's per_rank frame of the job: ranks whose steps lost to another source have none (as in one
    process, where detect_steps picks one source for the whole job)."""
    no_steps = [pl.lit(0, pl.Int64).alias("steps"), *[pl.lit(None, pl.Float64).alias(c) for c in _STEP_COLUMNS]]
    frames = [r.balance if r.step_source == source != "none" else r.balance.with_columns(no_steps) for r in rows]
    return _concat(frames).sort(["node", "rank"])


def _load_balance(fold: _Fold, per_rank: pl.DataFrame) -> LoadBalance:
    """ranks.load_balance of the whole job (its histograms summed over the ranks)."""
    busy = {k: v.copy() for k, v in fold.busy_bins.items()}
    n_bins = max((int(v.sum()) for v in busy.values()), default=0)
    for v in busy.values():  # bins after a rank's last record up to the job's last are idle (bin 0)
        v[0] += n_bins - int(v.sum())
    return balance_of(per_rank, fold.counters, busy)


def _add_histograms(into: dict[str, npt.NDArray[np.int64]], more: dict[str, npt.NDArray[np.int64]]) -> None:
    for key, counts in more.items():
        into[key] = into.get(key, np.zeros(HIST_BINS, np.int64)) + counts
