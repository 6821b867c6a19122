"""The dashboard of a trace, computed once: one typed model that every view renders.

``build_dashboard(trace) -> Dashboard`` runs summarize() and the rules over one TraceIndex and adds the
panels the summary does not hold (step-time histogram, utilization series), each with one definition. The
terminal summary, the HTML, Markdown and JSON reports and the TUI's dashboard tab all render this model
(pyinstrument's "one session, many renderers"), so every view shows the same numbers under the same names.

Everything is aggregated (percentiles, histograms, binned series, top-N tables), never one row per event,
so a 10 M-kernel trace gives a dashboard of the same size as a small one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rank_heatmap import RankHeatmap, rank_heatmap
from ktrace.analysis.rules.config import RulesConfig
from ktrace.analysis.rules.engine import RulesReport, run_rules
from ktrace.analysis.rules.inputs import auto_bin_ns, steps, timeline_utilization
from ktrace.analysis.summary import FLOAT_DIGITS, Summary, summarize
from ktrace.model.errors import ProgressFn, no_progress
from ktrace.model.trace import Trace

MAX_POINTS = 600
"""Longest series a plot gets (counters and utilization are averaged down to it)."""
STEP_BINS = 30
"""Bins of the step-time histogram (fewer when there are fewer steps)."""


@dataclass(frozen=True)
class StepHistogram:
    """Step durations of every rank (the training steps of phases.step_spans) in equal-width bins."""

    edges_ms: tuple[float, ...]
    """Bin edges in ms (one more than counts); empty without steps."""
    counts: tuple[int, ...]


@dataclass(frozen=True)
class UtilizationSeries:
    """One utilization curve: a GPU from the kernel timeline, or a GPU/CPU counter."""

    label: str
    """"node/rankR/GPUd" (timeline) or "node/GPUi", "node/CPU" (counters)."""
    source: str
    """"timeline", "counter gpu.util" or "counter cpu.util"."""
    x_s: tuple[float, ...]
    """Seconds since the trace start."""
    y_pct: tuple[float, ...]
    """Utilization in % (0-100)."""


@dataclass(frozen=True)
class Dashboard:
    """Every number the dashboard views show."""

    summary: Summary
    """summarize(): phases, shares, busy/idle, top kernels, latency, steps, distributions, counters."""
    step_histogram: StepHistogram
    utilization_bin_ms: float
    """Width of the timeline utilization bins (GPU span / 100, clamped to 1-500 ms)."""
    utilization: tuple[UtilizationSeries, ...]
    """Timeline series per (node, rank, GPU), then counter series per node and GPU/CPU."""
    rules: RulesReport
    annotations: tuple[str, ...]
    """The range patterns histogrammed in summary.annotations."""
    rank_heatmap: RankHeatmap | None = None
    """rank_heatmap.rank_heatmap: busy and communication share per rank x time bin and rank x step; only with
    2 or more ranks (the straggler tables are summary.stragglers)."""


def build_dashboard(
    trace: Trace,
    *,
    config: RulesConfig | None = None,
    annotations: tuple[str, ...] = (),
    top: int = 15,
    progress: ProgressFn = no_progress,
    index: TraceIndex | None = None,
) -> Dashboard:
    """Compute the dashboard of `trace`.

    Args:
        trace: the trace.
        config: rule thresholds (default: every rule with its defaults).
        annotations: regexes of ranges to histogram (SageMaker's custom histograms); default: the
            forward/backward/optimizer ranges when present.
        top: rows of the top-kernel tables.
        progress: (done, total) over the stages (summary, rules, panels).
        index: the trace's TraceIndex (summary, rules and panels share it; one is built if None).

    Returns:
        Dashboard.
    """
    ix = TraceIndex.of(trace, index)
    progress(0, 3)
    patterns = annotations or default_annotations(trace)
    peaks = config.gpu_peaks if config is not None else None
    summary = summarize(trace, top=top, annotations=patterns, gpu_peaks=peaks, index=ix)
    progress(1, 3)
    rules = run_rules(trace, config, index=ix)
    progress(2, 3)
    span = trace.span_ns() or (0, 0)
    dashboard = Dashboard(
        summary=summary,
        step_histogram=step_histogram(ix),
        utilization_bin_ms=round(auto_bin_ns(ix, 0.0) / 1e6, 6),
        utilization=utilization_series(ix, span[0]),
        rules=rules,
        annotations=patterns,
        rank_heatmap=rank_heatmap(trace, index=ix) if summary.ranks > 1 else None,
    )
    progress(3, 3)
    return dashboard


def _round(values: npt.NDArray[np.float64]) -> tuple[float, ...]:
    return tuple(round(float(v), FLOAT_DIGITS) for v in values)


def downsample(
    ts_ns: npt.NDArray[np.int64], value: npt.NDArray[np.float64], max_points: int = MAX_POINTS
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(seconds since the first sample, values) averaged into at most `max_points` equal-count buckets."""
    if ts_ns.size == 0:
        return (), ()
    if ts_ns.size > max_points:
        edges = np.linspace(0, ts_ns.size, max_points + 1).astype(np.int64)
        counts = np.diff(edges)
        ts = np.add.reduceat(ts_ns.astype(np.float64), edges[:-1]) / counts
        value = np.add.reduceat(value.astype(np.float64), edges[:-1]) / counts
    else:
        ts = ts_ns.astype(np.float64)
    return _round((ts - float(ts_ns[0])) / 1e9), _round(value)


def utilization_series(index: TraceIndex, t0_ns: int) -> tuple[UtilizationSeries, ...]:
    """GPU (timeline and counters) and CPU (counters) utilization over time, one series per node/GPU."""
    timeline = timeline_series(timeline_utilization(index, 0.0), t0_ns)
    return tuple(s for _, s in timeline) + tuple(s for _, s in counter_series(index.trace.counters, t0_ns))


def timeline_series(util: pl.DataFrame, t0_ns: int) -> list[tuple[tuple[str, int, int], UtilizationSeries]]:
    """The GPU timeline's series of rules.inputs.timeline_utilization's frame, each with its (node, rank,
    device), in that order."""
    out = []
    for key, part in util.sort("node", "rank", "device", "ts_ns").group_by(
        ["node", "rank", "device"], maintain_order=True
    ):
        node, rank, device = key
        x, y = downsample(part["ts_ns"].to_numpy(), part["value"].to_numpy())
        offset = (int(part["ts_ns"][0]) - t0_ns) / 1e9
        label = f"{node}/rank{rank}/GPU{device}"
        series = UtilizationSeries(label, "timeline", tuple(round(v + offset, FLOAT_DIGITS) for v in x), y)
        out.append(((str(node), int(rank), int(device)), series))
    return out


def counter_series(counters: pl.DataFrame, t0_ns: int) -> list[tuple[tuple[str, str, int], UtilizationSeries]]:
    """The gpu.util and cpu.util counters' series, each with its (node, metric, instance), in that order."""
    out = []
    util = counters.filter(pl.col("metric").cast(pl.String).is_in(["gpu.util", "cpu.util"]))
    for key, part in util.sort("node", "metric", "instance", "ts_ns").group_by(
        [pl.col("node").cast(pl.String), pl.col("metric").cast(pl.String), "instance"], maintain_order=True
    ):
        node, metric, instance = key
        x, y = downsample(part["ts_ns"].to_numpy(), part["value"].to_numpy())
        offset = (int(part["ts_ns"][0]) - t0_ns) / 1e9
        what = f"GPU{instance}" if metric == "gpu.util" else "CPU"
        series = UtilizationSeries(
            f"{node}/{what}", f"counter {metric}", tuple(round(v + offset, FLOAT_DIGITS) for v in x), y
        )
        out.append(((str(node), str(metric), -1 if instance is None else int(instance)), series))
    return out


def step_histogram(index: TraceIndex, bins: int = STEP_BINS) -> StepHistogram:
    """Histogram of step durations in ms (all ranks; as many bins as steps when there are fewer)."""
    return steps_histogram(steps(index), bins)


def steps_histogram(found: pl.DataFrame, bins: int = STEP_BINS) -> StepHistogram:
    """step_histogram of step spans (start_ns, end_ns): a trace's, or a Summary's `steps` reduced rank by rank."""
    if not found.height:
        return StepHistogram((), ())
    dur = ((found["end_ns"] - found["start_ns"]) / 1e6).to_numpy()
    counts, edges = np.histogram(dur, bins=max(1, min(bins, found.height)))
    return StepHistogram(_round(edges), tuple(int(c) for c in counts))


def default_annotations(trace: Trace) -> tuple[str, ...]:
    """Histogram patterns shown when the user names none: forward/backward/optimizer ranges if present."""
    if not trace.ranges.height:
        return ()
    names = trace.ranges.select(pl.col("name").cast(pl.String).unique())["name"]
    wanted = (r"^forward$", r"^backward$", r"^optimizer\.step$|^Optimizer\.step")
    return tuple(p for p in wanted if names.str.contains(p).any())
