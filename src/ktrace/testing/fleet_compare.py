"""fleet_differences: where a FleetSummary (map-reduce) departs from the single-process Summary of the same job."""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl
from polars.testing import assert_frame_equal

from ktrace.analysis.log_histogram import RELATIVE_ERROR
from ktrace.analysis.rank_heatmap import RankHeatmap
from ktrace.analysis.rank_reduce import FleetSummary
from ktrace.analysis.summary import Summary

_SORTS = {
    "busy": ["node", "rank", "device"],
    "idle": ["node", "rank", "device", "idle_category"],
    "step_stats": ["node", "rank"],
    "steps": ["node", "rank", "step"],
    "overlap": ["node", "rank"],
}
_QUANTILE_COLUMNS = {"top_by_time": ("p50_ns", "p95_ns"), "top_by_count": ("p50_ns", "p95_ns")}


def _plain(frame: pl.DataFrame, sort: Sequence[str] | None) -> pl.DataFrame:
    frame = frame.with_columns(pl.col(pl.Categorical).cast(pl.String))
    return frame.sort(list(sort)) if sort and frame.height else frame


def _frame_difference(name: str, single: pl.DataFrame, fleet: pl.DataFrame, sort: Sequence[str] | None) -> list[str]:
    try:
        assert_frame_equal(_plain(single, sort), _plain(fleet, sort), check_dtypes=False)
    except AssertionError as exc:
        return [f"{name}: {exc}"]
    return []


def _quantile_difference(name: str, single: pl.DataFrame, fleet: pl.DataFrame, columns: Sequence[str]) -> list[str]:
    """Quantile columns within RELATIVE_ERROR of the exact ones (rows in the same order: the exact columns
    that sort them already compared equal)."""
    out = []
    for col in columns:
        for i, (exact, approx) in enumerate(zip(single[col].to_list(), fleet[col].to_list(), strict=True)):
            nan = any(isinstance(v, float) and math.isnan(v) for v in (exact, approx))
            if exact is None or approx is None or nan:
                if (exact is None or math.isnan(exact)) != (approx is None or math.isnan(approx)):
                    out.append(f"{name}.{col}[{i}]: {exact} vs {approx}")
                continue
            if abs(approx - exact) > RELATIVE_ERROR * abs(exact) + 1e-9:
                out.append(f"{name}.{col}[{i}]: {approx} not within {RELATIVE_ERROR:.4%} of {exact}")
    return out


def fleet_differences(single: Summary, fleet: FleetSummary, heatmap: RankHeatmap | None = None) -> list[str]:
    """Every difference between the single-process summary and the fleet summary of one job: exact equality of
    counts, sums, extremes, means, shares, steps, overlap, load balance, phases and the straggler tables, and,
    given the single-process `heatmap` (rank_heatmap.rank_heatmap of the job), of the rank heatmap; quantiles
    within log_histogram.RELATIVE_ERROR of the exact ones. Empty: the results are identical (as stated)."""
    out: list[str] = []
    for attr in ("ranks", "kernels", "phases"):
        if getattr(single, attr) != getattr(fleet, attr):
            out.append(f"{attr}: {getattr(single, attr)} vs {getattr(fleet, attr)}")
    for name, sort in _SORTS.items():
        out += _frame_difference(name, getattr(single, name), getattr(fleet, name), sort)
    for name, cols in _QUANTILE_COLUMNS.items():
        a, b = getattr(single, name), getattr(fleet, name)
        out += _frame_difference(name, a.drop(cols), b.drop(cols), None)
        if a.height == b.height:
            out += _quantile_difference(name, a, b, cols)
    lat_q = [c for c in single.latency.columns if "_p" in c]
    out += _frame_difference("latency", single.latency.drop(lat_q), fleet.latency.drop(lat_q), None)
    if single.latency.height == fleet.latency.height:
        out += _quantile_difference("latency", single.latency, fleet.latency, lat_q)
    out += _balance_differences(single, fleet)
    out += _view_differences("stragglers", single.stragglers, fleet.stragglers, ("basis",), _STRAGGLER_FRAMES)
    if heatmap is not None:
        out += heatmap_differences(heatmap, fleet.rank_heatmap)
    return out


_STRAGGLER_FRAMES = ("per_step", "table", "causes")
_HEATMAP_FRAMES = ("ranks", "by_time", "by_step")


def heatmap_differences(single: RankHeatmap | None, fleet: RankHeatmap | None) -> list[str]:
    """Where two rank heatmaps of one job differ: bins, rows and every share (exactly)."""
    return _view_differences("rank_heatmap", single, fleet, ("bins",), _HEATMAP_FRAMES)


def _view_differences(
    name: str, single: object | None, fleet: object | None, values: Sequence[str], frames: Sequence[str]
) -> list[str]:
    """Differences of a rank view (heatmap, stragglers): its `values` compared with ==, its `frames` exactly."""
    if single is None or fleet is None:
        return [] if single is fleet else [f"{name}: {single} vs {fleet}"]
    out = [
        f"{name}.{v}: {getattr(single, v)} vs {getattr(fleet, v)}"
        for v in values
        if getattr(single, v) != getattr(fleet, v)
    ]
    for frame in frames:
        out += _frame_difference(f"{name}.{frame}", getattr(single, frame), getattr(fleet, frame), None)
    return out


def _balance_differences(single: Summary, fleet: FleetSummary) -> list[str]:
    a, b = single.load_balance, fleet.load_balance
    if a is None or b is None:
        return [] if a is b else [f"load_balance: {a} vs {b}"]
    out = _frame_difference("load_balance.per_rank", a.per_rank, b.per_rank, ["node", "rank"])
    for attr in ("busy_spread", "step_spread", "histogram_distance", "worst_pair", "source"):
        if getattr(a, attr) != getattr(b, attr):
            out.append(f"load_balance.{attr}: {getattr(a, attr)} vs {getattr(b, attr)}")
    return out
