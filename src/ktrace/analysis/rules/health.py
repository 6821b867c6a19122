"""Trace-health rules: dropped records, orphan GPU records and launches, clock problems.

A trace that lost records or has skewed clocks gives wrong answers silently (analyses.md §11.7, §12); these
rules say so next to the other verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from ktrace.analysis.rules.base import Evidence, Outcome, Param, ParamValue, Rule, RuleContext, Severity, Skip
from ktrace.analysis.rules.frames import names_matching, pct, rows_named, top_evidence
from ktrace.analysis.rules.inputs import kernels_by_stream, launch_latency

LOSS_WORDS = ("drop", "lost", "overflow", "truncat")
"""Health counts of records lost for good (an error)."""
WINDOW_WORDS = ("out_of_range", "out-of-range")
"""Health counts of records outside the capture window (a warning: the window cut them, as configured).
Kineto's blocklisted runtime calls are dropped by design and are not counted."""
CLOCK_WORDS = ("clock", "skew")
LAUNCH_API = r"(?i)(LaunchKernel|LaunchCooperativeKernel|^cuLaunch|GraphLaunch)"
START_MS = (pl.col("end_ns") - pl.col("start_ns")) / 1e6


def _health_keys(ctx: RuleContext, words: tuple[str, ...]) -> dict[str, int]:
    health = ctx.trace.meta.health
    return {k: int(v) for k, v in sorted(health.items()) if v and any(w in k.lower() for w in words)}


def _records(ctx: RuleContext) -> int:
    t = ctx.trace
    return t.kernels.height + t.memory.height + t.syncs.height + t.api.height + t.ranges.height


def _dropped(ctx: RuleContext, p: Mapping[str, ParamValue]) -> Outcome:
    lost = _health_keys(ctx, LOSS_WORDS + WINDOW_WORDS)
    total = sum(lost.values())
    severity: Severity = "error" if _health_keys(ctx, LOSS_WORDS) else "warning"
    records = _records(ctx)
    evidence = tuple(Evidence(kind="health", name=k, value=float(v)) for k, v in lost.items())
    message = (f"{total:,} records were lost or dropped while recording or importing "
               f"({', '.join(f'{k}={v:,}' for k, v in lost.items())}); totals and gaps may be understated")
    return Outcome(records + total, total, total > int(p["max_dropped"]), message, evidence,
                   details={"health": dict(ctx.trace.meta.health)}, severity=severity)


DROPPED_RECORDS = Rule(
    name="DroppedRecords", family="health", severity="error",
    description="Records the profiler lost (CUPTI buffer overflow: error) or cut at the capture window "
                "(Kineto out-of-range events: warning), read from the trace's health counts.",
    recommendation="Shorten the capture window or the number of steps, raise the CUPTI buffer size "
                   "(ktrace run --buffer-mb, Kineto's CUPTI buffer), or trace fewer activity kinds.",
    params=(Param("max_dropped", 0, "fire when more than this many records were dropped"),),
    check=_dropped, source="analyses.md §11.7 (trace health)")


def _orphans(ctx: RuleContext, p: Mapping[str, ParamValue]) -> Outcome:
    t = ctx.trace
    if not t.kernels.height:
        raise Skip("the trace has no kernels")
    if not t.api.height:
        raise Skip("the trace has no CUDA API calls, so kernels cannot be matched to launches")
    lat = launch_latency(ctx)
    matched = np.zeros(t.kernels.height, dtype=bool)
    matched[lat.filter(pl.col("kind") == "kernel")["row"].to_numpy()] = True
    orphans = t.kernels.filter(pl.Series(~matched))
    keys = ["node", "rank", "correlation_id"]
    launches = rows_named(t.api, "name", LAUNCH_API)
    # launch_latency gives every run of a launch; graph_run == 0 picks one row per launch call.
    launched = lat.filter((pl.col("graph_run") == 0) & pl.col("api_name").is_in(
        names_matching(launches, "name", LAUNCH_API))).height if lat.height else 0
    unmatched_n = launches.height - launched
    unmatched = launches.clear()
    if unmatched_n:  # rare: find which (a join, only when there is something to show)
        ids = lat.select(pl.col("node").cast(pl.String), "rank", "correlation_id").unique()
        unmatched = launches.with_columns(pl.col("node").cast(pl.String)).join(ids, on=keys, how="anti")
    orphan_pct = pct(orphans.height, t.kernels.height)
    unmatched_pct = pct(unmatched_n, launches.height)
    limit = float(p["max_pct"])
    fired = orphan_pct > limit or unmatched_pct > limit
    message = (f"{orphans.height:,} of {t.kernels.height:,} kernels ({orphan_pct:.1f} %) have no launch call in the "
               f"trace and {unmatched_n:,} of {launches.height:,} launches ({unmatched_pct:.1f} %) have no "
               "GPU record; latency and attribution skip them")
    limit_ev = int(p["max_evidence"])
    evidence = (top_evidence(orphans, "kernel", START_MS, limit=limit_ev)
                + top_evidence(unmatched, "api", START_MS, limit=limit_ev))
    return Outcome(t.kernels.height + launches.height, orphans.height + unmatched_n, fired, message, evidence,
                   details={"orphan_kernels": orphans.height, "launches_without_gpu_record": unmatched_n})


ORPHAN_RECORDS = Rule(
    name="OrphanRecords", family="health",
    description="Kernels whose launch call is missing from the trace, and kernel launches with no GPU record.",
    recommendation="Start the profiler before the work of interest and stop it after the GPU is idle "
                   "(torch.cuda.synchronize() before stopping); record the CUDA runtime API with the kernels.",
    params=(Param("max_pct", 1.0, "fire when more than this % of kernels (or of launches) are unmatched"),
            Param("max_evidence", 20, "how many unmatched records of each kind to keep as evidence")),
    check=_orphans, source="analyses.md §11.7; DESIGN.md (orphans counted in health)")


def _backwards(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter(pl.col("end_ns") < pl.col("start_ns")) if frame.height else frame


def _clock(ctx: RuleContext, p: Mapping[str, ParamValue]) -> Outcome:
    t = ctx.trace
    if not (t.kernels.height or t.memory.height):
        raise Skip("the trace has no GPU records")
    tol_ns = int(float(p["tolerance_us"]) * 1000)
    backwards = pl.concat([_backwards(f.select("start_ns", "end_ns", "name")) for f in (t.kernels, t.api)])
    overlaps = kernels_by_stream(ctx).filter(pl.col("start_ns") < pl.col("prev_end_ns") - tol_ns)
    lat = launch_latency(ctx)
    early = lat.filter(pl.col("launch_latency_ns") < -tol_ns) if lat.height else lat
    health = _health_keys(ctx, CLOCK_WORDS)
    datapoints = t.kernels.height + t.api.height + lat.height
    bad = backwards.height + overlaps.height + early.height + sum(health.values())
    fired = pct(bad, datapoints) > float(p["max_pct"]) or bool(health)
    message = (f"{early.height:,} GPU records start more than {p['tolerance_us']} µs before their launch call, "
               f"{overlaps.height:,} kernels overlap the previous kernel of their stream, {backwards.height:,} "
               "records end before they start"
               + (f"; health: {', '.join(f'{k}={v}' for k, v in health.items())}" if health else ""))
    limit = int(p["max_evidence"])
    evidence = (top_evidence(early, "kernel", -pl.col("launch_latency_ns") / 1e3, limit=limit)
                + top_evidence(overlaps, "kernel", (pl.col("end_ns") - pl.col("start_ns")) / 1e6, limit=limit)
                + tuple(Evidence(kind="health", name=k, value=float(v)) for k, v in health.items()))
    return Outcome(datapoints, bad, fired, message, evidence,
                   details={"launch_after_run": early.height, "stream_overlaps": overlaps.height,
                            "end_before_start": backwards.height})


CLOCK_PROBLEMS = Rule(
    name="ClockProblems", family="health",
    description="Timestamps that cannot be right: GPU work starting before its launch call, kernels overlapping "
                "on one stream, records ending before they start.",
    recommendation="CPU and GPU clocks disagree: re-record with a current profiler/driver (CUPTI clock sync), "
                   "avoid merging traces from hosts with unsynchronized clocks, and distrust latency numbers "
                   "from this trace.",
    params=(Param("tolerance_us", 5.0, "differences smaller than this many µs are ignored"),
            Param("max_pct", 0.5, "fire when more than this % of records show a problem"),
            Param("max_evidence", 20, "how many records of each problem to keep as evidence")),
    check=_clock, source="formats.md §1.7 (clock domains); analyses.md §11.7")

RULES: tuple[Rule, ...] = (DROPPED_RECORDS, ORPHAN_RECORDS, CLOCK_PROBLEMS)
