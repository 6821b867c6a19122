"""`ktrace report` of a many-rank store: the FleetSummary and the rules run on it, as Markdown, HTML or JSON.

One table model (FleetTable) feeds every format, so they show the same numbers (rows as the JSON has them,
report.rows). The rank-level views (rank x time / rank x step heatmaps, stragglers, slowest and fastest rank per
step) follow, drawn by the single-process report's own renderers (rank_sections.rank_views_section,
markdown.rank_views_markdown, content.rank_heatmap_dict) from FleetSummary.rank_heatmap / .stragglers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ktrace.analysis.log_histogram import RELATIVE_ERROR
from ktrace.analysis.rank_reduce import FleetSummary, fleet_to_dict
from ktrace.analysis.rules.engine import RulesReport, report_to_dict
from ktrace.report.content import REPORT_VERSION, rank_heatmap_dict, rule_docs
from ktrace.report.format import fmt_ns
from ktrace.report.html import DRAW, STYLE, plotly_js, script_json
from ktrace.report.markdown import md_table, rank_views_markdown
from ktrace.report.rank_sections import rank_views_section
from ktrace.report.rows import phase_rows, rows
from ktrace.report.sections import esc, table
from ktrace.report.terminal_tables import column_label, format_cell
from ktrace.presentation.verdicts import triggered_first, verdict

RANK_ROWS = 50
"""Ranks in the report's rank table (slowest first); every rank is in the JSON."""


@dataclass(frozen=True)
class FleetTable:
    """One table of the fleet report: a title, its column headers and the cells, formatted for people as the
    terminal summary formats them (times with units, shares in %); the JSON keeps the numbers."""

    title: str
    headers: tuple[str, ...]
    cells: tuple[tuple[object, ...], ...]


def _unit_last(column: str) -> str:
    """launch_latency_ns_p50 -> launch_latency_p50_ns: the unit where format_cell and column_label look for it."""
    return column.replace("_ns_", "_") + "_ns" if "_ns_" in column else column


def _frame_table(title: str, records: list[dict[str, Any]], columns: Sequence[str]) -> FleetTable:
    return FleetTable(
        title,
        tuple(column_label(_unit_last(c)) for c in columns),
        tuple(tuple(format_cell(_unit_last(c), r.get(c)) for c in columns) for r in records),
    )


def fleet_tables(fleet: FleetSummary, rules: RulesReport) -> list[FleetTable]:
    """Every table of the fleet report, in order."""
    phases = FleetTable(
        "Training job summary",
        ("phase", "time", "% of job"),
        tuple((p, fmt_ns(ns), f"{pct:.1f}") for p, ns, pct in phase_rows(fleet.phases)),
    )
    lb = fleet.load_balance
    balance = FleetTable(
        "Load balance",
        ("busy spread", "step spread", "utilization histogram distance", "worst pair", "source"),
        ()
        if lb is None
        else (
            (
                format_cell("busy_spread_share", lb.busy_spread),
                format_cell("step_spread_share", lb.step_spread),
                "-" if lb.histogram_distance is None else f"{lb.histogram_distance:.3f}",
                " vs ".join(lb.worst_pair or ()),
                lb.source,
            ),
        ),
    )
    slowest = fleet.rank_table.sort("slowdown", descending=True, nulls_last=True).head(RANK_ROWS)
    rank_cols = (
        "node",
        "rank",
        "slowdown",
        "straggler",
        "step_mean_ns",
        "busy_ns",
        "idle_ns",
        "comm_ns",
        "overlap_pct",
    )
    lat_cols = ("kind", "count", "launch_latency_ns_mean", "launch_latency_ns_p50", "launch_latency_ns_p99")
    kernel_cols = ("name", "count", "total_ns", "mean_ns", "p50_ns", "p95_ns", "max_ns", "time_share")
    results = triggered_first(rules.results)
    return [
        phases,
        _frame_table(
            "GPU idle by cause (whole job)", rows(fleet.idle_causes), ("idle_category", "idle_ns", "gaps", "idle_share")
        ),
        _frame_table("Top kernels by GPU time", rows(fleet.top_by_time), kernel_cols),
        _frame_table("Launch-to-run latency", rows(fleet.latency), lat_cols),
        _frame_table(f"Ranks, slowest first (top {slowest.height} of {fleet.ranks})", rows(slowest), rank_cols),
        balance,
        FleetTable(
            "Rules on the reduced tables",
            ("rule", "verdict", "why"),
            tuple((r.rule, verdict(r), r.skipped or "; ".join(f.message for f in r.findings)) for r in results),
        ),
    ]


def _intro(fleet: FleetSummary) -> str:
    return (
        f"{fleet.ranks} ranks, {fleet.kernels:,} kernels, analysed rank by rank on {fleet.engine}. Counts, sums, "
        f"means and maxima equal the single-process analysis; percentiles come from merged log-bin histograms, "
        f"within {100 * RELATIVE_ERROR:.2f} % of the exact ones."
    )


def render_fleet_markdown(fleet: FleetSummary, rules: RulesReport, title: str) -> str:
    """The fleet report as Markdown."""
    out = [f"# {title or 'ktrace fleet report'}", "", _intro(fleet), ""]
    for t in fleet_tables(fleet, rules):
        out += [f"## {t.title}", ""] + (md_table(t.headers, t.cells) or ["(none)", ""])
    out += rank_views_markdown(fleet.rank_heatmap, fleet.stragglers)
    return "\n".join(out)


def render_fleet_html(fleet: FleetSummary, rules: RulesReport, title: str) -> str:
    """The fleet report as one self-contained HTML document: the tables, then the rank views (their heatmaps
    drawn by the inlined plotly.js, as in the single-process report)."""
    body = "".join(
        f"<section><h2>{esc(t.title)}</h2>{table(t.headers, t.cells) if t.cells else '<p>(none)</p>'}</section>"
        for t in fleet_tables(fleet, rules)
    )
    ranks = rank_views_section(fleet.rank_heatmap, fleet.stragglers)
    scripts = ""
    if ranks is not None:
        body += f'<section id="{esc(ranks.anchor)}"><h2>{esc(ranks.title)}</h2>{"".join(ranks.body)}</section>'
        if ranks.figures:
            figures = script_json({ranks.anchor: ranks.figures})
            scripts = f'<script type="application/json" id="ktrace-figures">{figures}</script><script>{DRAW}</script>'
    name = esc(title or "ktrace fleet report")
    head_js = f"<script>{plotly_js()}</script>" if scripts else ""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{name}</title><style>{STYLE}</style>'
        f"{head_js}</head><body><header><h1>{name}</h1><div>{esc(_intro(fleet))}</div></header><main>{body}</main>"
        f"{scripts}</body></html>"
    )


def render_fleet_json(fleet: FleetSummary, rules: RulesReport, title: str) -> str:
    """The fleet report as JSON: {"version", "title", "fleet": rank_reduce.fleet_to_dict, "rules": the rules'
    report_to_dict, "rule_docs", "rank_heatmap": content.rank_heatmap_dict} (the single-process report's keys,
    with "fleet" for "summary"; the straggler tables are in "fleet", as in the single-process "summary")."""
    document = {
        "version": REPORT_VERSION,
        "title": title,
        "fleet": fleet_to_dict(fleet),
        "rank_heatmap": rank_heatmap_dict(fleet.rank_heatmap),
        "rules": report_to_dict(rules),
        "rule_docs": rule_docs(),
    }
    return json.dumps(document, indent=1, sort_keys=True, default=str) + "\n"
