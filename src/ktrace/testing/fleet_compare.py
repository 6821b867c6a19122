"""fleet_differences: where the rank-by-rank (map-reduce) Summary departs from the single-process Summary of the
same job, field by field; key_paths: the JSON keys of a summary, for the same-shape checks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

import numpy as np
import polars as pl
from polars.testing import assert_frame_equal

from ktrace.analysis.critical_path import CriticalPath
from ktrace.analysis.log_histogram import RELATIVE_ERROR
from ktrace.analysis.memory_timeline import MemoryTimeline
from ktrace.analysis.rank_heatmap import RankHeatmap
from ktrace.analysis.rank_reduce import FleetResult
from ktrace.analysis.summary import Summary

MEAN_RTOL = 1e-9
"""Means (sum / count on the client, a mean of the values in one process) and shares agree within this."""
_SORTS = {
    "busy": ["node", "rank", "device"],
    "idle": ["node", "rank", "device", "idle_category"],
    "step_stats": ["node", "rank"],
    "steps": ["node", "rank", "step"],
    "overlap": ["node", "rank"],
}
_QUANTILES: dict[str, tuple[str, ...]] = {
    "top_by_time": ("p50_ns", "p95_ns"),
    "top_by_count": ("p50_ns", "p95_ns"),
    "counters": ("p50", "p95", "p99"),
}
_SKIPPED = frozenset({"notes", "load_balance", "stragglers", "operators", "kernel_sequences", "annotations"})


def _plain(frame: pl.DataFrame, sort: Sequence[str] | None) -> pl.DataFrame:
    frame = frame.with_columns(pl.col(pl.Categorical).cast(pl.String))
    return frame.sort(list(sort)) if sort and frame.height else frame


def frame_difference(
    name: str,
    single: pl.DataFrame,
    fleet: pl.DataFrame,
    sort: Sequence[str] | None = None,
    quantiles: Sequence[str] = (),
) -> list[str]:
    """Where two frames differ: integer and text columns exactly, float columns within MEAN_RTOL, the
    `quantiles` columns within log_histogram.RELATIVE_ERROR."""
    a, b = _plain(single, sort), _plain(fleet, sort)
    q = [c for c in quantiles if c in a.columns]
    try:
        assert_frame_equal(
            a.drop(q), b.drop(q, strict=False), check_dtypes=False, check_exact=False, rel_tol=MEAN_RTOL, abs_tol=1e-12
        )
    except AssertionError as exc:
        return [f"{name}: {exc}"]
    return _quantile_difference(name, a, b, q) if a.height == b.height else []


def _quantile_difference(name: str, single: pl.DataFrame, fleet: pl.DataFrame, columns: Sequence[str]) -> list[str]:
    """Quantile columns within RELATIVE_ERROR of the exact ones (rows in the same order: the exact columns
    that sort them already compared equal)."""
    out = []
    for col in columns:
        for i, (exact, approx) in enumerate(zip(single[col].to_list(), fleet[col].to_list(), strict=True)):
            if _missing(exact) or _missing(approx):
                if _missing(exact) != _missing(approx):
                    out.append(f"{name}.{col}[{i}]: {exact} vs {approx}")
                continue
            if abs(approx - exact) > RELATIVE_ERROR * abs(exact) + 1e-9:
                out.append(f"{name}.{col}[{i}]: {approx} not within {RELATIVE_ERROR:.4%} of {exact}")
    return out


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _close(name: str, a: Any, b: Any) -> list[str]:
    """Plain values: floats within MEAN_RTOL, anything else equal."""
    if isinstance(a, float) and isinstance(b, float):
        return [] if math.isclose(a, b, rel_tol=MEAN_RTOL, abs_tol=1e-12) else [f"{name}: {a} vs {b}"]
    return [] if a == b else [f"{name}: {a} vs {b}"]


def record_differences(name: str, single: Any, fleet: Any, quantiles: Sequence[str] = ()) -> list[str]:
    """Where two records of one dataclass (OperatorSummary, LoadBalance, ...) differ, field by field: frames by
    frame_difference, nested records recursively, other values by _close."""
    if single is None or fleet is None:
        return [] if single is fleet else [f"{name}: {single} vs {fleet}"]
    out: list[str] = []
    for f in fields(single):
        a, b = getattr(single, f.name), getattr(fleet, f.name)
        if isinstance(a, pl.DataFrame) and isinstance(b, pl.DataFrame):
            out += frame_difference(f"{name}.{f.name}", a, b, quantiles=quantiles)
        elif hasattr(a, "__dataclass_fields__"):
            out += record_differences(f"{name}.{f.name}", a, b, quantiles)
        else:
            out += _close(f"{name}.{f.name}", a, b)
    return out


def fleet_differences(single: Summary, fleet: FleetResult, heatmap: RankHeatmap | None = None) -> list[str]:
    """Every difference between the single-process Summary and the rank-by-rank result of one job: counts, sums,
    extremes and frames exact, means and shares within MEAN_RTOL, percentiles within log_histogram.RELATIVE_ERROR;
    the critical path exactly, the memory timeline as memory_timeline_differences says, the notes alike. Given the single-process `heatmap`
    (rank_heatmap.rank_heatmap of the job), the rank heatmap too. Empty: the results agree (as stated)."""
    s = fleet.summary
    out: list[str] = []
    for f in fields(Summary):
        a, b = getattr(single, f.name), getattr(s, f.name)
        if f.name in _SKIPPED:
            continue
        elif f.name == "critical_path":
            out += critical_path_differences(a, b)
        elif f.name == "memory_timeline":
            out += memory_timeline_differences(a, b)
        elif f.name == "latency":
            out += frame_difference(f.name, a, b, quantiles=[c for c in a.columns if "_p" in c])
        elif isinstance(a, pl.DataFrame):
            out += frame_difference(f.name, a, b, _SORTS.get(f.name), _QUANTILES.get(f.name, ()))
        else:
            out += record_differences(f.name, a, b) if hasattr(a, "__dataclass_fields__") else _close(f.name, a, b)
    out += record_differences("load_balance", single.load_balance, s.load_balance)
    out += record_differences("stragglers", single.stragglers, s.stragglers)
    out += record_differences("operators", single.operators, s.operators)
    out += record_differences("kernel_sequences", single.kernel_sequences, s.kernel_sequences)
    out += _annotation_differences(single, s)
    out += _note_differences(single.notes, s.notes)
    if heatmap is not None:
        out += heatmap_differences(heatmap, fleet.rank_heatmap)
    return out


def _annotation_differences(single: Summary, fleet: Summary) -> list[str]:
    if len(single.annotations) != len(fleet.annotations):
        return [f"annotations: {len(single.annotations)} vs {len(fleet.annotations)} patterns"]
    out: list[str] = []
    for a, b in zip(single.annotations, fleet.annotations, strict=True):
        out += record_differences(f"annotations[{a.pattern}]", a, b, ("p50_ns", "p95_ns"))
    return out


def _note_differences(single: Sequence[str], fleet: Sequence[str]) -> list[str]:
    """The notes of one process, in order."""
    return [] if list(fleet) == list(single) else [f"notes: {list(fleet)} vs {list(single)}"]


def memory_timeline_differences(single: MemoryTimeline | None, fleet: MemoryTimeline | None) -> list[str]:
    """Where two memory timelines differ: every table and figure exactly (rates within MEAN_RTOL), the events
    counted alike; the series, which the rank-by-rank path ships thinned per device, only by each device's
    highest allocated bytes (the plot keeps each bin's peak)."""
    if single is None or fleet is None:
        return [] if single is fleet else [f"memory_timeline: {single} vs {fleet}"]
    out = []
    for f in ("source", "running_sum", "addresses"):
        out += _close(f"memory_timeline.{f}", getattr(single, f), getattr(fleet, f))
    out += _close("memory_timeline.events", single.event_count(), fleet.event_count())
    for f in ("per_device", "by_operator", "growth"):
        out += frame_difference(f"memory_timeline.{f}", getattr(single, f), getattr(fleet, f))
    a, b = (
        t.series.group_by("node", "rank", "device").agg(pl.col("allocated_bytes").max()).sort("node", "rank", "device")
        for t in (single, fleet)
    )
    return out + frame_difference("memory_timeline.series (peaks)", a, b)


def critical_path_differences(single: CriticalPath | None, fleet: CriticalPath | None) -> list[str]:
    """The fields of two critical paths that differ, each compared exactly (frames and arrays whole)."""
    if single is None or fleet is None:
        return [] if single is fleet else [f"critical_path: {single} vs {fleet}"]
    out = []
    for f in fields(single):
        a, b = getattr(single, f.name), getattr(fleet, f.name)
        if isinstance(a, pl.DataFrame) or isinstance(b, pl.DataFrame):
            same = isinstance(a, pl.DataFrame) and isinstance(b, pl.DataFrame) and a.equals(b)
        elif isinstance(a, np.ndarray):
            same = np.array_equal(a, b)
        else:
            same = a == b
        out += [] if same else [f"critical_path.{f.name}: {a} vs {b}"]
    return out


_HEATMAP_FRAMES = ("ranks", "by_time", "by_step")


def heatmap_differences(single: RankHeatmap | None, fleet: RankHeatmap | None) -> list[str]:
    """Where two rank heatmaps of one job differ: bins, rows and every share (exactly)."""
    if single is None or fleet is None:
        return [] if single is fleet else [f"rank_heatmap: {single} vs {fleet}"]
    out = [] if single.bins == fleet.bins else [f"rank_heatmap.bins: {single.bins} vs {fleet.bins}"]
    for frame in _HEATMAP_FRAMES:
        try:
            assert_frame_equal(getattr(single, frame), getattr(fleet, frame), check_dtypes=False)
        except AssertionError as exc:
            out.append(f"rank_heatmap.{frame}: {exc}")
    return out


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """Every key path of a JSON-ready value (summary_to_dict's): "a.b" for dict keys, "a[].b" inside lists (every
    row's keys), so two summaries of one job at different rank counts can be compared by shape."""
    if isinstance(value, dict):
        out = set()
        for k, v in value.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            out |= {path} | key_paths(v, path)
        return out
    if isinstance(value, list):
        return set().union(*(key_paths(v, f"{prefix}[]") for v in value)) if value else set()
    return set()
