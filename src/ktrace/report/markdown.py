"""The report as Markdown: the same sections and numbers as the HTML report, as tables (no plots), rendered from
the typed Report."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ktrace.analysis.dashboard import StepHistogram
from ktrace.analysis.names import distinct_short_names
from ktrace.analysis.phases import step_source_note
from ktrace.analysis.rank_heatmap import RankHeatmap
from ktrace.analysis.rules.base import Evidence, RuleResult
from ktrace.analysis.stragglers import Stragglers
from ktrace.model.display_text import printable, share_glyph
from ktrace.report import critical_path_view, memory, system_section
from ktrace.report.content import Report
from ktrace.report.format import fmt_ns, fmt_num, fmt_time_range
from ktrace.report.identity import identity_line
from ktrace.report.operator_tables import operator_tables
from ktrace.report.rank_rows import (
    BASIS_NOTE,
    STEP_HEADERS,
    STEP_TIME_TITLE,
    STRAGGLER_HEADERS,
    WAITED_HEADERS,
    WAITED_TITLE,
    hosts_text,
    rest_note,
    step_cells,
    straggler_cells,
    waited_cells,
    waited_note,
)
from ktrace.report.rows import evidence_cells, phase_rows, rows
from ktrace.report.verdicts import finding_counts, param_text, recommendation, verdict

MAX_EVIDENCE_ROWS = 20

MD_ESCAPES = str.maketrans(
    {
        "|": "\\|",
        "<": "&lt;",
        ">": "&gt;",
        "&": "&amp;",
        "\n": " ",
        "`": "\\`",
        "*": "\\*",
        "_": "\\_",
        "[": "\\[",
        "]": "\\]",
    }
)


CELL_CHARS = 120


def column_cells(values: Sequence[object], limit: int = CELL_CHARS) -> list[str]:
    """One column's cells: printable, those over `limit` cut where they differ from the column's others (two rows
    never read the same), and escaped so trace text cannot break the table or inject markup."""
    texts = ["" if v is None else printable(str(v)) for v in values]
    short = distinct_short_names(texts, limit, plain=True)
    return [short[t].translate(MD_ESCAPES) for t in texts]


def cell(value: object, limit: int = CELL_CHARS) -> str:
    """A cell or line of text on its own, made safe as `column_cells` does."""
    return column_cells([value], limit)[0]


def md_table(headers: Sequence[str], cells: Sequence[Sequence[object]]) -> list[str]:
    """A Markdown table (empty list when there are no rows)."""
    if not cells:
        return []
    width = max(len(r) for r in cells)
    columns = [column_cells([r[i] for r in cells if i < len(r)]) for i in range(width)]
    at = [0] * width  # the next unused cell of each column (a short row leaves its missing cells out)
    lines = []
    for r in cells:
        shown = []
        for i in range(len(r)):
            shown.append(columns[i][at[i]])
            at[i] += 1
        lines.append("| " + " | ".join(shown) + " |")
    return ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers), *lines, ""]


def _job(report: Report) -> list[str]:
    summary = report.dashboard.summary
    phases = summary.phases
    out = ["## Training job summary", ""]
    out += md_table(
        ["", "value"],
        [
            ["source", summary.source],
            ["ranks", summary.ranks],
            ["kernels", fmt_num(summary.kernels)],
            ["trace span", fmt_time_range(phases.start_ns, phases.end_ns)],
            [
                "steps per rank" if summary.ranks > 1 else "steps",
                f"{phases.steps}{step_source_note(phases.step_source)}",
            ],
        ],
    )
    out += md_table(
        ["phase", "time", "% of job"], [[name, fmt_ns(ns), f"{pct:.1f}"] for name, ns, pct in phase_rows(phases)]
    )
    return out + [f"_{cell(n)}_" for n in summary.notes] + [""]


def _system(report: Report) -> list[str]:
    usage = report.system_usage
    out = [f"## {system_section.TITLE}", "", cell(system_section.lead(report), 2000), ""]
    counters = system_section.counter_cells(report)
    if counters:
        out += ["### Sampled counters", "", *md_table(system_section.COUNTER_HEADERS, counters)]
    for title, headers, cells in system_section.event_tables(usage):
        out += [f"### {cell(title)}", "", *md_table(headers, cells)]
    missing = system_section.missing_counters_line(usage, report.dashboard.summary.source)
    return out + ([cell(missing, 2000), ""] if missing else [])


def _framework(report: Report) -> list[str]:
    summary = report.dashboard.summary
    out = ["## Framework metrics", ""]
    out += md_table(
        ["node", "rank", "steps", "min", "mean", "p50", "p95", "max"],
        [
            [
                r["node"],
                r["rank"],
                r["steps"],
                *(fmt_ns(r[k]) for k in ("min_ns", "mean_ns", "p50_ns", "p95_ns", "max_ns")),
            ]
            for r in rows(summary.step_stats)
        ],
    )
    out += md_table(
        ["launches", "count", "start→start p50", "p95", "end→start p50", "p95"],
        [
            [
                r["kind"],
                fmt_num(r["count"]),
                fmt_ns(r["launch_latency_ns_p50"]),
                fmt_ns(r["launch_latency_ns_p95"]),
                fmt_ns(r["queue_delay_ns_p50"]),
                fmt_ns(r["queue_delay_ns_p95"]),
            ]
            for r in rows(summary.latency)
        ],
    )
    return out


def _rules_summary(report: Report) -> list[str]:
    counts = finding_counts(report.dashboard.rules)
    out = ["## Rules summary", "", f"{counts.error} errors, {counts.warning} warnings, {counts.info} notes.", ""]
    return out + md_table(
        ["rule", "verdict", "description", "recommendation", "times triggered", "datapoints", "parameters"],
        [
            [
                r.rule,
                verdict(r),
                r.description,
                recommendation(r),
                fmt_num(r.triggered),
                fmt_num(r.datapoints),
                param_text(r.params),
            ]
            for r in report.dashboard.rules.results
        ],
    )


def _dashboard(report: Report) -> list[str]:
    summary = report.dashboard.summary
    out = ["## Dashboard", "", "### Active time", ""]
    out += md_table(
        ["resource", "node", "rank", "instance", "method", "active %"],
        [
            [r["resource"], r["node"], r["rank"], r["instance"], r["method"], f"{100 * r['active_share']:.1f}"]
            for r in rows(summary.active)
        ],
    )
    for title, top, share in (
        ("Top kernels by time", summary.top_by_time, "time_share"),
        ("Top kernels by launch count", summary.top_by_count, "count_share"),
    ):
        out += [f"### {title}", ""] + md_table(
            ["#", "kernel", "count", "total", "mean", "share %"],
            [
                [
                    r["position"] or "",
                    r["name"],
                    fmt_num(r["count"]),
                    fmt_ns(r["total_ns"]),
                    fmt_ns(r["mean_ns"]),
                    f"{100 * r[share]:.1f}",
                ]
                for r in rows(top)
            ],
        )
    out += _step_histogram(report.dashboard.step_histogram)
    out += ["### Kernel precision", ""] + md_table(
        ["precision", "kernels", "time", "share %"],
        [
            [r["precision"], fmt_num(r["kernels"]), fmt_ns(r["time_ns"]), f"{100 * r['time_share']:.1f}"]
            for r in rows(summary.precision)
        ],
    )
    out += ["### GPU activity", ""] + md_table(
        ["activity", "count", "time", "share %"],
        [
            [r["activity"], fmt_num(r["count"]), fmt_ns(r["time_ns"]), f"{100 * r['share']:.1f}"]
            for r in rows(summary.activity)
        ],
    )
    out += ["### Memory operations", ""] + md_table(
        ["op", "copy kind", "host memory", "count", "bytes", "time", "GB/s"],
        [
            [
                r["op"],
                r["copy_kind"],
                r["host_memory"],
                fmt_num(r["count"]),
                fmt_num(r["bytes"]),
                fmt_ns(r["time_ns"]),
                fmt_num(r["bandwidth_gbps"]),
            ]
            for r in rows(summary.memory)
        ],
    )
    for h in summary.annotations:
        out += [f"### Annotation durations: {cell(h.pattern)}", ""] + md_table(
            ["name", "count", "total", "mean", "p50", "max"],
            [
                [
                    r["name"],
                    fmt_num(r["count"]),
                    fmt_ns(r["total_ns"]),
                    fmt_ns(r["mean_ns"]),
                    fmt_ns(r["p50_ns"]),
                    fmt_ns(r["max_ns"]),
                ]
                for r in rows(h.stats)
            ],
        )
    return out


def _operators(report: Report) -> list[str]:
    out = ["## Operators and kernel sequences", ""]
    for t in operator_tables(report.dashboard.summary):
        out += [f"### {t.title}", ""] + ([cell(t.note, 1000), ""] if t.note else [])
        out += md_table(t.headers, t.cells)
    return out


def _step_histogram(hist: StepHistogram) -> list[str]:
    """The non-empty bins of the step-time histogram."""
    if not hist.counts:
        return []
    bins = zip(hist.edges_ms[:-1], hist.edges_ms[1:], hist.counts, strict=True)
    return ["### Step time distribution", ""] + md_table(
        ["from (ms)", "to (ms)", "steps"], [[f"{a:.3f}", f"{b:.3f}", n] for a, b, n in bins if n]
    )


def _evidence(evidence: Sequence[Evidence]) -> list[str]:
    return md_table(
        ["kind", "when", "node/rank", "device", "stream", "what", "value"],
        [evidence_cells(e) for e in evidence[:MAX_EVIDENCE_ROWS]],
    )


def _rule(result: RuleResult) -> list[str]:
    out = [f"### {result.rule}: {verdict(result)}", "", cell(result.description, 1000), ""]
    out += md_table(["parameter", "value"], [[k, v] for k, v in result.params.items()])
    if result.skipped:
        out += [f"Skipped: {cell(result.skipped, 500)}.", ""]
    for f in result.findings:
        out += [
            f"**{f.severity}**: {cell(f.message, 2000)}",
            "",
            f"_Recommendation_: {cell(f.recommendation, 2000)}",
            "",
        ]
        out += _evidence(f.evidence)
    return out


TEXT_HEATMAP_ROWS = 64
"""Rows of the Markdown heatmap: one per rank up to this many ranks, else one per host."""
TEXT_HEATMAP_COLS = 60


def text_heatmap(labels: Sequence[str], matrix: npt.NDArray[np.float64]) -> list[str]:
    """One line per row: its label, then one block character per column for a 0-1 share."""
    width = max((len(label) for label in labels), default=0)
    out = []
    for label, row in zip(labels, matrix, strict=True):
        chars = "".join(share_glyph(float(v)) for v in row)
        out.append(f"{label:<{width}} |{chars}|")
    return out


def ranks_markdown(report: Report) -> list[str]:
    """The Ranks section (2 or more ranks): text heatmaps, the straggler table and the slowest/fastest ranks per
    step, each table the top rows with a count of the rest."""
    return rank_views_markdown(report.dashboard.rank_heatmap, report.dashboard.summary.stragglers)


def rank_views_markdown(heat: RankHeatmap | None, lag: Stragglers | None) -> list[str]:
    """ranks_markdown of these rank views (the single-process report's and the fleet report's)."""
    if heat is None and lag is None:
        return []
    out = ["## Ranks", ""]
    if heat is not None:
        out += [
            f"{heat.ranks.height:,} ranks on {hosts_text(heat)}; time bins of {fmt_ns(heat.bins.bin_ns)}, "
            f"shown {TEXT_HEATMAP_COLS} to a line at most; one line per rank up to {TEXT_HEATMAP_ROWS} ranks, "
            "else one per host (the mean of its ranks); blocks from empty (0 %) to full (100 %).",
            "",
        ]
        for value, what in (("busy_share", "GPU busy"), ("comm_share", "Communication")):
            labels, m = heat.coarse("time", value, TEXT_HEATMAP_ROWS, TEXT_HEATMAP_COLS)
            safe = [printable(label).replace("`", "'") for label in labels]
            out += [f"### {what} share per rank over time", "", "```", *text_heatmap(safe, m), "```", ""]
    if lag is not None:
        ranks, more_ranks = straggler_cells(lag)
        steps, more_steps = step_cells(lag)
        waited, more_waited = waited_cells(lag)
        out += [f"### {WAITED_TITLE}", "", f"_{cell(waited_note(lag), 600)}_", ""]
        out += md_table(WAITED_HEADERS, waited) + ([rest_note(more_waited, "rows"), ""] if more_waited else [])
        out += [f"### {STEP_TIME_TITLE}", "", f"_{cell(BASIS_NOTE[lag.basis], 400)}_", ""]
        out += md_table(STRAGGLER_HEADERS, ranks) + ([rest_note(more_ranks, "ranks"), ""] if more_ranks else [])
        out += ["### Slowest and fastest rank per step (widest spread first)", ""]
        out += md_table(STEP_HEADERS, steps) + ([rest_note(more_steps, "steps"), ""] if more_steps else [])
    return out


def _memory(report: Report) -> list[str]:
    summary = report.dashboard.summary
    out = [f"## {memory.TITLE}", "", cell(memory.lead(summary), 2000), ""]
    m = summary.memory_timeline
    if m is not None:
        out += md_table(memory.DEVICE_HEADERS, memory.device_cells(m, summary.phases.start_ns))
        out += md_table(memory.OPERATOR_HEADERS, memory.operator_cells(m))
        out += md_table(memory.GROWTH_HEADERS, memory.growth_cells(m) if m.growth.height > 1 else [])
    return out


def _critical_path(report: Report) -> list[str]:
    return critical_path_view.markdown_lines(report.dashboard.summary.critical_path, md_table, cell)


def render_markdown(report: Report) -> str:
    """The report as one Markdown document."""
    out = [f"# {cell(report.title, 200)}", ""]
    about = identity_line(report.identity)
    if about:
        out += [" · ".join(f"**{cell(k)}** {cell(v, 400)}" for k, v in about), ""]
    for part in (
        _job,
        _system,
        _framework,
        _rules_summary,
        _dashboard,
        ranks_markdown,
        _critical_path,
        _operators,
        _memory,
    ):
        out += part(report)
    out += ["## Rules", ""]
    for result in report.dashboard.rules.results:
        out += _rule(result)
    return "\n".join(out).rstrip() + "\n"
