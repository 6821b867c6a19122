"""The report's content, computed once: a JSON-ready dict that the HTML, Markdown and JSON writers render.

Everything is aggregated (percentiles, histograms, binned series, top-N tables), never one row per event,
so a 10 M-kernel trace gives a report of the same size as a small one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from ktrace.analysis.rules.base import RuleContext
from ktrace.analysis.rules.config import RulesConfig
from ktrace.analysis.rules.engine import all_rules, report_to_dict, run_rules
from ktrace.analysis.rules.inputs import auto_bin_ns, steps, timeline_utilization
from ktrace.analysis.summary import FLOAT_DIGITS, Summary, summarize, summary_to_dict
from ktrace.model.errors import ProgressFn, no_progress
from ktrace.model.trace import Trace
from ktrace.report.identity import trace_identity

REPORT_VERSION = 1
"""Bumped when the JSON report's shape changes incompatibly."""
MAX_POINTS = 600
"""Longest series a plot gets (counters and utilization are averaged down to it)."""


def _round(values: np.ndarray) -> list[float]:
    return [round(float(v), FLOAT_DIGITS) for v in values]


def downsample(ts_ns: np.ndarray, value: np.ndarray, max_points: int = MAX_POINTS) -> tuple[list[float], list[float]]:
    """(seconds since the first sample, values) averaged into at most `max_points` equal-count buckets."""
    if ts_ns.size == 0:
        return [], []
    if ts_ns.size > max_points:
        edges = np.linspace(0, ts_ns.size, max_points + 1).astype(np.int64)
        counts = np.diff(edges)
        ts = np.add.reduceat(ts_ns.astype(np.float64), edges[:-1]) / counts
        value = np.add.reduceat(value.astype(np.float64), edges[:-1]) / counts
    else:
        ts = ts_ns.astype(np.float64)
    return _round((ts - float(ts_ns[0])) / 1e9), _round(value)


def utilization_series(ctx: RuleContext, t0_ns: int) -> list[dict[str, Any]]:
    """GPU (timeline and counters) and CPU (counters) utilization over time, one series per node/GPU."""
    out: list[dict[str, Any]] = []
    util = timeline_utilization(ctx, 0.0)
    for key, part in util.sort("node", "rank", "device", "ts_ns").group_by(["node", "rank", "device"],
                                                                              maintain_order=True):
        node, rank, device = key
        x, y = downsample(part["ts_ns"].to_numpy(), part["value"].to_numpy())
        offset = (int(part["ts_ns"][0]) - t0_ns) / 1e9
        out.append({"label": f"{node}/rank{rank}/GPU{device}", "source": "timeline",
                    "x_s": [round(v + offset, FLOAT_DIGITS) for v in x], "y_pct": y})
    counters = ctx.trace.counters.filter(pl.col("metric").cast(pl.String).is_in(["gpu.util", "cpu.util"]))
    for key, part in counters.sort("node", "metric", "instance", "ts_ns").group_by(
            [pl.col("node").cast(pl.String), pl.col("metric").cast(pl.String), "instance"], maintain_order=True):
        node, metric, instance = key
        x, y = downsample(part["ts_ns"].to_numpy(), part["value"].to_numpy())
        offset = (int(part["ts_ns"][0]) - t0_ns) / 1e9
        what = f"GPU{instance}" if metric == "gpu.util" else "CPU"
        out.append({"label": f"{node}/{what}", "source": f"counter {metric}",
                    "x_s": [round(v + offset, FLOAT_DIGITS) for v in x], "y_pct": y})
    return out


def step_histogram(ctx: RuleContext, bins: int = 30) -> dict[str, Any]:
    """Histogram of step durations in ms (all ranks)."""
    found = steps(ctx)
    if not found.height:
        return {"edges_ms": [], "counts": []}
    dur = ((found["end_ns"] - found["start_ns"]) / 1e6).to_numpy()
    counts, edges = np.histogram(dur, bins=max(1, min(bins, found.height)))
    return {"edges_ms": _round(edges), "counts": [int(c) for c in counts]}


def build_report(trace: Trace, *, config: RulesConfig | None = None, annotations: tuple[str, ...] = (),
                 top: int = 15, title: str = "", progress: ProgressFn = no_progress) -> dict[str, Any]:
    """Everything the report shows, as one JSON-ready dict with stable keys.

    Args:
        trace: the trace.
        config: rule thresholds (default: every rule with its defaults).
        annotations: regexes of ranges to histogram (SageMaker's custom histograms); default: the
            forward/backward/optimizer ranges when present.
        top: rows of the top-kernel tables.
        title: report title (default: the trace's source).
        progress: (done, total) over the report's stages.

    Returns:
        {"version", "title", "trace", "summary", "steps_histogram", "utilization", "rules", "rule_docs"}.
    """
    ctx = RuleContext(trace)
    progress(0, 3)
    patterns = annotations or default_annotations(trace)
    summary = summarize(trace, top=top, annotations=patterns)
    share_with_rules(ctx, summary)
    progress(1, 3)
    rules = run_rules(trace, config, context=ctx)
    progress(2, 3)
    span = trace.span_ns() or (0, 0)
    content = {
        "version": REPORT_VERSION,
        "title": title or f"ktrace profiling report ({trace.meta.source})",
        "trace": trace_identity(trace),
        "summary": summary_to_dict(summary),
        "steps_histogram": step_histogram(ctx),
        "utilization": {"bin_ms": round(auto_bin_ns(ctx, 0.0) / 1e6, 6),
                        "series": utilization_series(ctx, span[0])},
        "rules": report_to_dict(rules),
        "rule_docs": {r.name: {"params": [{"name": p.name, "default": p.default, "doc": p.doc} for p in r.params],
                               "source": r.source, "severity": r.severity} for r in all_rules()},
    }
    progress(3, 3)
    return content


def share_with_rules(ctx: RuleContext, summary: Summary) -> None:
    """Hand the rules what summarize() already computed with the very arguments the rules use (steps from
    steps.detect_steps, job phases over them, load balance over them), so the report computes each once."""
    ctx.cached("steps", lambda: summary.steps)
    ctx.cached("job_phases", lambda: summary.phases)
    if summary.load_balance is not None:
        ctx.cached("load_balance", lambda: summary.load_balance)


def default_annotations(trace: Trace) -> tuple[str, ...]:
    """Histogram patterns shown when the user names none: forward/backward/optimizer ranges if present."""
    if not trace.ranges.height:
        return ()
    names = trace.ranges.select(pl.col("name").cast(pl.String).unique())["name"]
    wanted = (r"^forward$", r"^backward$", r"^optimizer\.step$|^Optimizer\.step")
    return tuple(p for p in wanted if names.str.contains(p).any())
