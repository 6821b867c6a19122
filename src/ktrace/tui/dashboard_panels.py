"""Dashboard panels drawn from the dashboard model (ktrace.analysis.dashboard: SageMaker Profiler's panels and the
rule findings), with the report's definitions, names and duration format (ktrace.model.units.format_ns)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.text import Text

from ktrace.analysis.distributions import memory_op_label
from ktrace.analysis.names import distinct_short_names
from ktrace.analysis.phases import step_source_note
from ktrace.model.units import format_ns
from ktrace.tui.charts import hbars, histogram, shares, sparkline

if TYPE_CHECKING:  # the analyses load in the dashboard worker, not when the TUI starts
    from ktrace.analysis.dashboard import Dashboard, StepHistogram, UtilizationSeries
    from ktrace.analysis.rules.base import Finding
    from ktrace.analysis.summary import Summary

ACTIVE_BAR = 20
"""Cells of an active-share bar: a timeline row (label 33 + bar + " 98.7% active") fits an 80-column terminal."""
PANEL_TITLES = (
    "GPU / CPU active share",
    "utilization over time",
    "top 15 kernels by time",
    "top 15 kernels by count",
    "step time histogram",
    "precision",
    "activity share",
    "memory-op share",
)
ACTIVE_MEANING = {
    "timeline": "timeline: % active = share of the time from the first to the last record with any kernel or copy "
    "running (CPU: any API call, operator or range)\n",
    "counter": "counter: % active = share of the samples above 0 %; mean util = mean of the sampled %, so a GPU that "
    "always runs one small kernel is 100 % active with a low mean util\n",
}
"""What each method's figures mean (ktrace.analysis.utilization.active_time_share), under the active-share rows."""
UTILIZATION_MEAN = (
    "mean = mean of the points drawn: a GPU's busy % per whole bin between its first and last record "
    "(≈ its timeline % active), or a counter's samples\n"
)
"""What the utilization panel's `mean` is, so that it is not read as a second, different active share."""
MAX_FINDINGS = 12
NAME_COLUMNS = 60
"""The most columns a kernel name takes in the top-kernel bars."""
SPARK_WIDTH = 160
"""The most columns of the utilization time axis (fewer when the panel is narrower)."""


@dataclass
class Panel:
    """One dashboard panel: a title, what to draw, and evidence windows (label, start_ns, end_ns) to jump to."""

    title: str
    body: RenderableType
    evidence: list[tuple[str, int, int]] = field(default_factory=list)
    available: bool = True


def unavailable(title: str, why: str) -> Panel:
    """A panel saying why it is empty."""
    return Panel(title, Text(why, style="italic dim"), available=False)


def summary_panels(dashboard: Dashboard | None, error: str, summary: Summary | None = None) -> list[Panel]:
    """All summary panels; unavailable ones say why. Without a dashboard (its analyses failed) the panels of
    `summary` alone, when summarize() itself succeeded."""
    s = dashboard.summary if dashboard is not None else summary
    if s is None:
        return [unavailable(t, error or "no summary") for t in PANEL_TITLES]
    util = (
        _utilization(dashboard.utilization, dashboard.utilization_bin_ms)
        if dashboard is not None
        else unavailable(PANEL_TITLES[1], error)
    )
    steps = _steps(dashboard.step_histogram, s) if dashboard is not None else unavailable(PANEL_TITLES[4], error)
    return [
        _active(s.active),
        util,
        _top(s.top_by_time, "time"),
        _top(s.top_by_count, "count"),
        steps,
        _precision(s.precision),
        _activity(s.activity),
        _memory(s.memory),
    ]


def _empty(frame: pl.DataFrame | None) -> bool:
    return frame is None or frame.height == 0


def _active(active: pl.DataFrame) -> Panel:
    title = PANEL_TITLES[0]
    if _empty(active):
        return unavailable(title, "no GPU or CPU activity in this trace")
    lines = Text()
    for r in active.sort("resource", "method", "node", "rank", "instance").iter_rows(named=True):
        who = f"{r['resource'].upper()} {r['instance'] if r['instance'] >= 0 else 'all'}"
        where = f"{r['node']}" + (f" rank {r['rank']}" if r["rank"] >= 0 else "")
        share = r["active_share"] or 0.0
        bar = "█" * int(round(share * ACTIVE_BAR))
        util = f"  mean util {r['mean_util']:.1f}%" if r.get("mean_util") is not None else ""
        lines.append(f"{who:<7} {where:<16} {r['method']:<8} ")
        lines.append(bar.ljust(ACTIVE_BAR), style="#59a14f" if r["resource"] == "gpu" else "#4e79a7")
        lines.append(f" {100 * share:5.1f}% active{util}\n")
    for method in sorted(set(active["method"].to_list()), reverse=True):
        lines.append(ACTIVE_MEANING.get(method, ""), style="dim")
    return Panel(title, lines)


def _utilization(series: tuple[UtilizationSeries, ...], bin_ms: float) -> Panel:
    """The report's utilization series: timeline bins per GPU (whole bins inside its first..last record), then
    gpu.util / cpu.util counters as sampled."""
    title = PANEL_TITLES[1]
    if not series:
        return unavailable(title, "no GPU records and no utilization counters")
    return Panel(title, UtilizationChart(series, bin_ms))


@dataclass(frozen=True)
class UtilizationChart:
    """The utilization series on one time axis, as wide as the panel allows (at most SPARK_WIDTH columns): drawn
    when rich knows the width, so that an 80-column terminal gets one line per series instead of two."""

    series: tuple[UtilizationSeries, ...]
    bin_ms: float

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        series = self.series
        width = min(28, max(len(s.label) for s in series) + 1)
        x0 = min(s.x_s[0] for s in series if s.x_s)
        x1 = max(s.x_s[-1] for s in series if s.x_s)
        steps = [b - a for s in series for a, b in zip(s.x_s, s.x_s[1:], strict=False) if b > a]
        room = max(10, min(SPARK_WIDTH, options.max_width - width - len(" mean 100.0%")))
        columns = min(room, round((x1 - x0) / min(steps)) + 1) if steps else 1  # one column per bin if fewer
        lines = Text(f"timeline bins of {self.bin_ms:g} ms; counters as sampled; {x0:g} s to {x1:g} s\n", style="dim")
        lines.append(UTILIZATION_MEAN, style="dim")
        labels = distinct_short_names([s.label for s in series], width - 1, plain=True)  # long hosts differ late
        for s in series:
            mean = sum(s.y_pct) / max(1, len(s.y_pct))
            lines.append(labels[s.label].ljust(width))
            lines.append(
                _on_time_axis(s, x0, x1, columns).ljust(columns),
                style="#59a14f" if s.source != "counter cpu.util" else "#4e79a7",
            )
            lines.append(f" mean {mean:.1f}%\n")
        yield lines


def _on_time_axis(s: UtilizationSeries, x0: float, x1: float, width: int) -> str:
    """The series as block glyphs on one time axis shared by every series (max per column; blank where the series
    has no point: before a GPU's first or after its last record), so the rows line up in time."""
    cols: list[float | None] = [None] * width
    scale = (width - 1) / (x1 - x0) if x1 > x0 else 0.0
    for x, y in zip(s.x_s, s.y_pct, strict=True):
        c = min(width - 1, round((x - x0) * scale))
        cols[c] = y if cols[c] is None else max(y, cols[c] or 0.0)
    return "".join(" " if v is None else sparkline([v], width=1, top=100.0) for v in cols)


def _top(top: pl.DataFrame, by: str) -> Panel:
    title = PANEL_TITLES[2 if by == "time" else 3]
    if _empty(top):
        return unavailable(title, "no kernels in this trace")
    names = top["name"].cast(pl.String).to_list()
    if by == "time":
        values = top["total_ns"].to_list()
        texts = [
            f"{format_ns(v):>9} {100 * s:5.1f}%  ×{c:,}"
            for v, s, c in zip(values, top["time_share"].to_list(), top["count"].to_list(), strict=False)
        ]
    else:
        values = top["count"].to_list()
        texts = [
            f"{v:>9,} {100 * s:5.1f}%  {format_ns(t)}"
            for v, s, t in zip(values, top["count_share"].to_list(), top["total_ns"].to_list(), strict=False)
        ]
    return Panel(title, KernelBars(tuple(names), tuple(values), tuple(texts)))


@dataclass(frozen=True)
class KernelBars:
    """Top kernels as bars as wide as the panel: names get up to 60 columns (cut where they differ, never alike),
    the bar the rest, so an 80-column terminal gets one line per kernel and a 160-column one longer bars."""

    names: tuple[str, ...]
    values: tuple[float, ...]
    texts: tuple[str, ...]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        room = options.max_width - max(map(len, self.texts), default=0) - 2
        label = max(12, min(NAME_COLUMNS, max(map(len, self.names), default=0), room * 3 // 5))
        full = list(self.names)
        shown = distinct_short_names([n for n in full if n != "other"], label)  # "other" keeps its word
        labels = [shown.get(n, n) for n in full]
        yield hbars(labels, self.values, self.texts, width=max(8, room - label), label_width=label)


def _steps(hist: StepHistogram, s: Summary) -> Panel:
    """The report's step-time histogram (training steps of every rank) and the step statistics per rank."""
    title = PANEL_TITLES[4]
    if not hist.counts:
        return unavailable(title, "no steps found (no ProfilerStep or step annotations)")
    body: list[RenderableType] = [histogram(list(hist.edges_ms), list(hist.counts), height=6, unit=" ms")]
    if s.phases.steps_inferred:
        body.insert(0, Text(f"steps{step_source_note(s.phases.step_source)}: no step ranges in the trace"))
    for r in s.step_stats.iter_rows(named=True):
        body.append(
            Text(
                f"{r['node']} rank {r['rank']}: {r['steps']} steps, mean {format_ns(r['mean_ns'])},"
                f" p50 {format_ns(r['p50_ns'])}, p95 {format_ns(r['p95_ns'])},"
                f" max {format_ns(r['max_ns'])}"
            )
        )
    return Panel(title, Group(*body))


def _precision(frame: pl.DataFrame) -> Panel:
    if _empty(frame):
        return unavailable(PANEL_TITLES[5], "no kernels")
    kept = frame.filter(~pl.col("excluded")) if "excluded" in frame.columns else frame
    return Panel(PANEL_TITLES[5], shares(kept["precision"].cast(pl.String).to_list(), kept["time_ns"].to_list()))


def _activity(frame: pl.DataFrame) -> Panel:
    if _empty(frame) or frame["time_ns"].sum() == 0:
        return unavailable(PANEL_TITLES[6], "no GPU activity")
    return Panel(PANEL_TITLES[6], shares(frame["activity"].cast(pl.String).to_list(), frame["time_ns"].to_list()))


def _memory(frame: pl.DataFrame) -> Panel:
    if _empty(frame):
        return unavailable(PANEL_TITLES[7], "no memcpy or memset in this trace")
    labels = [memory_op_label(r["op"], r["copy_kind"], r["host_memory"]) for r in frame.iter_rows(named=True)]
    bw = Text(
        "\n".join(
            f"{lab}: {r['count']:,} ops, {r['bytes'] / 1e9:.2f} GB, {r['bandwidth_gbps'] or 0:.1f} GB/s"
            for lab, r in zip(labels, frame.iter_rows(named=True), strict=False)
        )
    )
    return Panel(PANEL_TITLES[7], Group(shares(labels, frame["time_ns"].to_list()), bw))


def findings_panel(dashboard: Dashboard | None, error: str) -> Panel:
    """The rules' findings, most severe first, grouped by rule: each finding's line, then the rule's
    recommendation once (a rule that fires per GPU or per rank gives the same advice each time), with the evidence
    windows to jump to."""
    title = "rule findings"
    if dashboard is None:
        return unavailable(title, error or "rules not available")
    findings = list(dashboard.rules.findings)
    if not findings:
        return Panel(title, Text("no rule fired", style="green"))
    text = Text()
    evidence: list[tuple[str, int, int]] = []
    colours = {"error": "red", "warning": "yellow", "info": "cyan"}
    by_rule: dict[str, list[Finding]] = {}
    for f in findings[:MAX_FINDINGS]:
        by_rule.setdefault(f.rule, []).append(f)
    for rule, group in by_rule.items():
        for f in group:
            text.append(f"{f.severity.upper():<8}", style=f"bold {colours.get(f.severity, 'white')}")
            text.append(f"{rule}: {f.message}\n")
            window = next(
                ((e.start_ns, e.end_ns) for e in f.evidence if e.start_ns is not None and e.end_ns is not None), None
            )
            if window is not None:
                evidence.append((f"{rule} evidence", int(window[0]), int(window[1])))
        for advice in dict.fromkeys(f.recommendation for f in group if f.recommendation):
            text.append(f"        → {advice}\n", style="dim")
    if len(findings) > MAX_FINDINGS:
        text.append(f"… and {len(findings) - MAX_FINDINGS} more (ktrace report lists all)\n", style="dim")
    return Panel(title, text, evidence)
