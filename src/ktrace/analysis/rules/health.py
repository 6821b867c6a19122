"""Trace-health rules: dropped records, orphan GPU records and launches, clock problems.

A trace that lost records or has skewed clocks gives wrong answers silently (analyses.md §11.7, §12); these
rules say so next to the other verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rules.base import Evidence, Outcome, Param, ParamValue, Rule, Severity, Skip
from ktrace.analysis.rules.frames import named, names_matching, pct, top_evidence
from ktrace.analysis.rules.inputs import stream_prev_end
from ktrace.analysis.rules.launches import (
    kernel_rows,
    launched_api_keys,
    launched_calls,
    launches,
    record_evidence_frame,
)
from ktrace.model.trace import Trace

LOSS_WORDS = ("drop", "lost", "overflow", "truncat")
"""Health counts of records lost for good (an error)."""
WINDOW_WORDS = ("out_of_range", "out-of-range")
"""Health counts of records outside the capture window (a warning: the window cut them, as configured).
Kineto's blocklisted runtime calls are dropped by design and are not counted."""
CLOCK_WORDS = ("clock", "skew")
LAUNCH_API = r"(?i)(LaunchKernel|LaunchCooperativeKernel|^cuLaunch|GraphLaunch)"
EVIDENCE_COLUMNS = ("node", "rank", "device", "stream", "name", "start_ns", "end_ns")
START_MS = (pl.col("end_ns") - pl.col("start_ns")) / 1e6


def _health_keys(index: TraceIndex, words: tuple[str, ...]) -> dict[str, int]:
    return health_keys(index.trace.meta.health, words)


def health_keys(health: Mapping[str, int], words: tuple[str, ...]) -> dict[str, int]:
    """The non-zero counts of `health` whose name holds one of `words`, by name."""
    return {k: int(v) for k, v in sorted(health.items()) if v and any(w in k.lower() for w in words)}


def records(trace: Trace) -> int:
    """Rows of the event tables DroppedRecords weighs the lost records against."""
    return trace.kernels.height + trace.memory.height + trace.syncs.height + trace.api.height + trace.ranges.height


def _dropped(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    return dropped_outcome(trace.meta.health, records(trace), p)


def dropped_outcome(health: Mapping[str, int], n_records: int, p: Mapping[str, ParamValue]) -> Outcome:
    """The DroppedRecords rule on a trace's health counts and its number of records (a trace's, or a job's read
    rank by rank)."""
    lost = health_keys(health, LOSS_WORDS + WINDOW_WORDS)
    total = sum(lost.values())
    severity: Severity = "error" if health_keys(health, LOSS_WORDS) else "warning"
    evidence = tuple(Evidence(kind="health", name=k, value=float(v)) for k, v in lost.items())
    message = (
        f"{total:,} records were lost or dropped while recording or importing "
        f"({', '.join(f'{k}={v:,}' for k, v in lost.items())}); totals and gaps may be understated"
    )
    return Outcome(
        n_records + total,
        total,
        total > int(p["max_dropped"]),
        message,
        evidence,
        details={"health": dict(health)},
        severity=severity,
    )


DROPPED_RECORDS = Rule(
    name="DroppedRecords",
    family="health",
    severity="error",
    description="Records the profiler lost (CUPTI buffer overflow: error) or cut at the capture window "
    "(Kineto out-of-range events: warning), read from the trace's health counts.",
    recommendation="Shorten the capture window or the number of steps, raise the CUPTI buffer size "
    "(ktrace run --buffer-mb, Kineto's CUPTI buffer), or trace fewer activity kinds.",
    params=(Param("max_dropped", 0, "fire when more than this many records were dropped"),),
    check=_dropped,
    source="analyses.md §11.7 (trace health)",
    fleet_mode="exact",
)


def _orphans(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    t = trace
    if not t.kernels.height:
        raise Skip("the trace has no kernels")
    if not t.api.height:
        raise Skip("the trace has no CUDA API calls, so kernels cannot be matched to launches")
    matched = np.zeros(t.kernels.height, dtype=bool)
    matched[kernel_rows(index)[1]] = True
    orphans = t.kernels.select(*EVIDENCE_COLUMNS).filter(pl.Series(~matched))
    keys = ["node", "rank", "correlation_id"]
    is_call = named(t.api, "name", names_matching(t.api, "name", LAUNCH_API)).to_numpy()
    n_calls = int(is_call.sum())
    # every run of a graph launch has a GPU record; launched_calls counts such a launch once.
    unmatched_n = n_calls - launched_calls(index, is_call)
    unmatched = t.api.clear()
    if unmatched_n:  # rare: find which (a join, only when there is something to show)
        unmatched = (
            t.api.filter(pl.Series(is_call))
            .with_columns(pl.col("node").cast(pl.String))
            .join(launched_api_keys(index), on=keys, how="anti")
        )
    orphan_pct = pct(orphans.height, t.kernels.height)
    unmatched_pct = pct(unmatched_n, n_calls)
    limit = float(p["max_pct"])
    fired = orphan_pct > limit or unmatched_pct > limit
    message = (
        f"{orphans.height:,} of {t.kernels.height:,} kernels ({orphan_pct:.1f} %) have no launch call in the "
        f"trace and {unmatched_n:,} of {n_calls:,} launches ({unmatched_pct:.1f} %) have no "
        "GPU record; latency and attribution skip them"
    )
    limit_ev = int(p["max_evidence"])
    evidence = top_evidence(orphans, "kernel", START_MS, limit=limit_ev) + top_evidence(
        unmatched, "api", START_MS, limit=limit_ev
    )
    return Outcome(
        t.kernels.height + n_calls,
        orphans.height + unmatched_n,
        fired,
        message,
        evidence,
        details={"orphan_kernels": orphans.height, "launches_without_gpu_record": unmatched_n},
    )


ORPHAN_RECORDS = Rule(
    name="OrphanRecords",
    family="health",
    description="Kernels whose launch call is missing from the trace, and kernel launches with no GPU record.",
    recommendation="Start the profiler before the work of interest and stop it after the GPU is idle "
    "(torch.cuda.synchronize() before stopping); record the CUDA runtime API with the kernels.",
    params=(
        Param("max_pct", 1.0, "fire when more than this % of kernels (or of launches) are unmatched"),
        Param("max_evidence", 20, "how many unmatched records of each kind to keep as evidence"),
    ),
    check=_orphans,
    source="analyses.md §11.7; DESIGN.md (orphans counted in health)",
    fleet_mode="per rank",
)


def _backwards(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter(pl.col("end_ns") < pl.col("start_ns")) if frame.height else frame


def _clock(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    t = trace
    if not (t.kernels.height or t.memory.height):
        raise Skip("the trace has no GPU records")
    tol_ns = int(float(p["tolerance_us"]) * 1000)
    backwards = pl.concat([_backwards(f.select("start_ns", "end_ns", "name")) for f in (t.kernels, t.api)])
    start = index.gpu_columns().start[: t.kernels.height]  # the kernels' starts, as a view of the shared arrays
    overlapping = start + tol_ns < stream_prev_end(index)  # never for a stream's first kernel
    overlaps = t.kernels.select(*EVIDENCE_COLUMNS).filter(pl.Series(overlapping))
    lau = launches(index)
    early = record_evidence_frame(index, np.flatnonzero(lau.start - lau.api_start < -tol_ns))
    health = _health_keys(index, CLOCK_WORDS)
    datapoints = t.kernels.height + t.api.height + lau.size
    bad = backwards.height + overlaps.height + early.height + sum(health.values())
    fired = pct(bad, datapoints) > float(p["max_pct"]) or bool(health)
    message = (
        f"{early.height:,} GPU records start more than {p['tolerance_us']} µs before their launch call, "
        f"{overlaps.height:,} kernels overlap the previous kernel of their stream, {backwards.height:,} "
        "records end before they start"
        + (f"; health: {', '.join(f'{k}={v}' for k, v in health.items())}" if health else "")
    )
    limit = int(p["max_evidence"])
    evidence = (
        top_evidence(early, "kernel", -pl.col("launch_latency_ns") / 1e3, limit=limit)
        + top_evidence(overlaps, "kernel", (pl.col("end_ns") - pl.col("start_ns")) / 1e6, limit=limit)
        + tuple(Evidence(kind="health", name=k, value=float(v)) for k, v in health.items())
    )
    return Outcome(
        datapoints,
        bad,
        fired,
        message,
        evidence,
        details={
            "launch_after_run": early.height,
            "stream_overlaps": overlaps.height,
            "end_before_start": backwards.height,
        },
    )


CLOCK_PROBLEMS = Rule(
    name="ClockProblems",
    family="health",
    description="Timestamps that cannot be right: GPU work starting before its launch call, kernels overlapping "
    "on one stream, records ending before they start.",
    recommendation="CPU and GPU clocks disagree: re-record with a current profiler/driver (CUPTI clock sync), "
    "avoid merging traces from hosts with unsynchronized clocks, and distrust latency numbers "
    "from this trace.",
    params=(
        Param("tolerance_us", 5.0, "differences smaller than this many µs are ignored"),
        Param("max_pct", 0.5, "fire when more than this % of records show a problem"),
        Param("max_evidence", 20, "how many records of each problem to keep as evidence"),
    ),
    check=_clock,
    source="formats.md §1.7 (clock domains); analyses.md §11.7",
    fleet_mode="per rank",
)

RULES: tuple[Rule, ...] = (DROPPED_RECORDS, ORPHAN_RECORDS, CLOCK_PROBLEMS)
