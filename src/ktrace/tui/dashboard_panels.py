"""Dashboard panels drawn from ktrace.analysis results (SageMaker Profiler's panels) and rule findings."""

from __future__ import annotations

from typing import Any

import polars as pl
from rich.console import Group, RenderableType
from rich.text import Text

from ktrace.analysis.names import distinct_short_names
from ktrace.tui.charts import hbars, histogram, shares, sparkline
from ktrace.tui.dashboard_data import Panel, unavailable
from ktrace.tui.viewmodel import format_duration

PANEL_TITLES = ("GPU / CPU active share", "GPU utilization over time", "top 15 kernels by time",
                "top 15 kernels by count", "step time histogram", "precision", "activity share",
                "memory-op share")
MAX_FINDINGS = 12


def summary_panels(data: Any, error: str) -> list[Panel]:
    """All summary panels; unavailable ones say why."""
    if data is None:
        return [unavailable(t, error or "no summary") for t in PANEL_TITLES]
    s = data["summary"]
    out = [_active(s.active), _utilization(data["utilization"], data["utilization_error"]),
           _top(s.top_by_time, "time"), _top(s.top_by_count, "count"), _steps(data["step_histogram"], s),
           _precision(s.precision), _activity(s.activity), _memory(s.memory)]
    return out


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
        bar = "█" * int(round(share * 30))
        util = f"  mean util {r['mean_util']:.1f}%" if r.get("mean_util") is not None else ""
        lines.append(f"{who:<7} {where:<16} {r['method']:<8} ")
        lines.append(bar.ljust(30), style="#59a14f" if r["resource"] == "gpu" else "#4e79a7")
        lines.append(f" {100 * share:5.1f}% active{util}\n")
    return Panel(title, lines)


def _utilization(util: pl.DataFrame | None, error: str) -> Panel:
    title = PANEL_TITLES[1]
    if util is None:
        return unavailable(title, error or "not available")
    if util.height == 0:
        return unavailable(title, "no GPU records")
    keys = [c for c in ("node", "rank", "device") if c in util.columns]
    lines = Text()
    for key, group in util.sort("bin").group_by(keys, maintain_order=True):
        values = group["utilization"].to_list()
        mean = 100 * sum(values) / max(1, len(values))
        who = dict(zip(keys, key, strict=False))
        lines.append(f"{who.get('node', '')} r{who.get('rank', '?')} GPU{who.get('device', '?')}".ljust(18))
        lines.append(sparkline(values, width=90, top=1.0), style="#59a14f")
        lines.append(f" mean {mean:.1f}%\n")
    return Panel(title, lines)


def _top(top: pl.DataFrame, by: str) -> Panel:
    title = PANEL_TITLES[2 if by == "time" else 3]
    if _empty(top):
        return unavailable(title, "no kernels in this trace")
    full = top["name"].cast(pl.String).to_list()
    shown = distinct_short_names([n for n in full if n != "other"], 60)  # two kernels never read the same
    names = [shown.get(n, n) for n in full]
    if by == "time":
        values = top["total_ns"].to_list()
        texts = [f"{format_duration(v):>9} {100 * s:5.1f}%  ×{c:,}"
                 for v, s, c in zip(values, top["time_share"].to_list(), top["count"].to_list(), strict=False)]
    else:
        values = top["count"].to_list()
        texts = [f"{v:>9,} {100 * s:5.1f}%  {format_duration(t)}"
                 for v, s, t in zip(values, top["count_share"].to_list(), top["total_ns"].to_list(), strict=False)]
    return Panel(title, hbars(names, values, texts, width=36, label_width=60))


def _steps(hist: pl.DataFrame | None, s: Any) -> Panel:
    title = PANEL_TITLES[4]
    if _empty(hist) or _empty(s.steps):
        return unavailable(title, "no steps found (no ProfilerStep or step annotations)")
    assert hist is not None
    edges = [v / 1e6 for v in hist["bin_start_ns"].to_list()] + [hist["bin_end_ns"][-1] / 1e6]
    body: list[RenderableType] = [histogram(edges, hist["count"].to_list(), height=6, unit=" ms")]
    for r in s.step_stats.iter_rows(named=True):
        body.append(Text(f"{r['node']} rank {r['rank']}: {r['steps']} steps, mean {format_duration(r['mean_ns'])},"
                         f" p50 {format_duration(r['p50_ns'])}, p95 {format_duration(r['p95_ns'])},"
                         f" max {format_duration(r['max_ns'])}"))
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
    labels = [" ".join(str(v) for v in (r["op"], r["copy_kind"], r.get("host_memory")) if v)
              for r in frame.iter_rows(named=True)]
    bw = Text("\n".join(f"{lab}: {r['count']:,} ops, {r['bytes'] / 1e9:.2f} GB, {r['bandwidth_gbps'] or 0:.1f} GB/s"
                        for lab, r in zip(labels, frame.iter_rows(named=True), strict=False)))
    return Panel(PANEL_TITLES[7], Group(shares(labels, frame["time_ns"].to_list()), bw))


def findings_panel(report: Any, error: str) -> Panel:
    """The rules' findings, most severe first, with their evidence windows to jump to."""
    title = "rule findings"
    if report is None:
        return unavailable(title, error or "rules not available")
    findings = list(getattr(report, "findings", ()))
    if not findings:
        return Panel(title, Text("no rule fired", style="green"))
    text = Text()
    evidence: list[tuple[str, int, int]] = []
    colours = {"error": "red", "warning": "yellow", "info": "cyan"}
    for f in findings[:MAX_FINDINGS]:
        text.append(f"{f.severity.upper():<8}", style=f"bold {colours.get(f.severity, 'white')}")
        text.append(f"{f.rule}: {f.message}\n")
        text.append(f"        → {f.recommendation}\n", style="dim")
        window = next(((e.start_ns, e.end_ns) for e in f.evidence
                       if e.start_ns is not None and e.end_ns is not None), None)
        if window is not None:
            evidence.append((f"{f.rule} evidence", int(window[0]), int(window[1])))
    if len(findings) > MAX_FINDINGS:
        text.append(f"… and {len(findings) - MAX_FINDINGS} more (ktrace report lists all)\n", style="dim")
    return Panel(title, text, evidence)
