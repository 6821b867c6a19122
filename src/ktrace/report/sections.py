"""The HTML report's sections, in the order of SageMaker Debugger's report plus the Profiler dashboard panels.

Each section is (anchor, title, body HTML, figures), rendered from the typed Report. Every string from the trace
goes through html.escape.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ktrace.analysis.dashboard import Dashboard, StepHistogram
from ktrace.analysis.distributions import memory_op_label
from ktrace.analysis.phases import step_source_note
from ktrace.analysis.rules.base import Evidence, RuleResult
from ktrace.analysis.summary import Summary
from ktrace.report import plots
from ktrace.report.content import Report
from ktrace.report.format import fmt_ns, fmt_num, fmt_time_range
from ktrace.report.rows import evidence_cells, json_float, phase_rows, rows
from ktrace.report.verdicts import finding_counts, param_text, recommendation, rule_doc, rule_status, verdict

SEVERITY_CLASS = {"error": "sev-error", "warning": "sev-warning", "info": "sev-info"}
MAX_EVIDENCE_ROWS = 50
MAX_GAP_BARS = 50
MAX_IDLE_ROWS = 60
MAX_SERIES = 32
"""Utilization curves drawn in one plot."""


@dataclass
class Section:
    """One report section."""

    anchor: str
    title: str
    body: list[str] = field(default_factory=list)
    figures: list[plots.Figure] = field(default_factory=list)

    def figure(self, fig: plots.Figure) -> None:
        """Add a figure and a placeholder div where it is drawn."""
        self.body.append(f'<div class="plot" data-fig="{len(self.figures)}"></div>')
        self.figures.append(fig)


def esc(value: object) -> str:
    """HTML-escape any value."""
    return html.escape("" if value is None else str(value))


LONG_WORD = 24
"""A word longer than this (a kernel name, a regex) may break anywhere (class "long"); shorter words never break
("localhost", "warning"): a narrow column wraps between words."""
SLASH_BREAK_CHARS = 12
"""A word with a slash longer than this (host/rank/GPU, not "µs/step") may wrap after its slashes."""
_TAGS = re.compile(r"<[^>]*>")
_WORDS = re.compile(r"\S+")
_NUMBER_UNIT = re.compile(r"(?<=\d) (?=(?:ns|µs|ms|s|B|KB|MB|GB|TB|%)(?!\w))")
"""The space in "1.73 ms", "2.0 GB": kept on one line."""


def _word(found: re.Match[str]) -> str:
    """One escaped word of a cell, marked where a line may break inside it."""
    word = found.group()
    if len(html.unescape(word)) > LONG_WORD:
        return f'<span class="long">{word}</span>'
    return word.replace("/", "/<wbr>") if len(word) > SLASH_BREAK_CHARS else word


def _td(value: object, is_raw: bool) -> str:
    """One cell: text escaped, its long words marked, units kept with their numbers; raw HTML as given, the whole
    cell marked "long" when it holds a long word."""
    if not is_raw:
        return "<td>" + _NUMBER_UNIT.sub("&nbsp;", _WORDS.sub(_word, esc(value))) + "</td>"
    words = html.unescape(_TAGS.sub(" ", str(value))).split()
    return f'<td class="long">{value}</td>' if any(len(w) > LONG_WORD for w in words) else f"<td>{value}</td>"


def table(headers: Sequence[str], cells: Sequence[Sequence[object]], *, raw: Sequence[int] = ()) -> str:
    """An HTML table; cells are escaped unless their column index is in `raw` (already HTML)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_td(c, i in raw) for i, c in enumerate(r)) + "</tr>" for r in cells)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def job_summary(report: Report) -> Section:
    """Training job summary: start, end, initialization / training loop / finalization."""
    summary = report.dashboard.summary
    phases = summary.phases
    sec = Section("job", "Training job summary")
    sec.body.append(
        table(
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
    )
    sec.body.append(
        table(["phase", "time", "% of job"], [[name, fmt_ns(ns), f"{pct:.1f}"] for name, ns, pct in phase_rows(phases)])
    )
    for note in summary.notes:
        sec.body.append(f'<p class="note">{esc(note)}</p>')
    return sec


def framework_metrics(report: Report) -> Section:
    """Framework metrics: steps, launch latency, idle causes, GPU time split."""
    summary = report.dashboard.summary
    sec = Section("framework", "Framework metrics")
    sec.body += [*_step_time_table(summary), *_latency_table(summary), *_idle_table(summary)]
    return sec


def _step_time_table(summary: Summary) -> list[str]:
    stats = rows(summary.step_stats)
    if not stats:
        return []
    durations = ("min_ns", "mean_ns", "p50_ns", "p95_ns", "max_ns")
    return [
        "<h3>Step time per rank</h3>"
        + table(
            ["node", "rank", "steps", "min", "mean", "p50", "p95", "max"],
            [[r["node"], r["rank"], r["steps"], *(fmt_ns(r[k]) for k in durations)] for r in stats],
        )
    ]


LATENCY_PERCENTILES = (50, 95, 99)


def _latency_table(summary: Summary) -> list[str]:
    latency = rows(summary.latency)
    if not latency:
        return []
    cells = [
        [
            r["kind"],
            fmt_num(r["count"]),
            *(fmt_ns(r[f"launch_latency_ns_p{q}"]) for q in LATENCY_PERCENTILES),
            *(fmt_ns(r[f"queue_delay_ns_p{q}"]) for q in LATENCY_PERCENTILES),
        ]
        for r in latency
    ]
    return [
        "<h3>Launch→run latency</h3><p>start→start = run start − launch-call start; "
        "end→start = run start − launch-call end (HTA's launch delay, nsys queue time).</p>",
        table(["kind", "count", "start→start p50", "p95", "p99", "end→start p50", "p95", "p99"], cells),
    ]


def _idle_table(summary: Summary) -> list[str]:
    idle = [r for r in rows(summary.idle) if r["idle_ns"]]
    if not idle:
        return []
    return [
        "<h3>GPU idle time by cause, per device</h3><p>The gaps of each device's busy union "
        "(every stream merged), so the causes add up to the device's idle time; a gap takes the "
        "cause of the record that ends it.</p>"
        + table(
            ["node", "rank", "device", "cause", "idle", "gaps"],
            [
                [r["node"], r["rank"], r["device"], r["idle_category"], fmt_ns(r["idle_ns"]), fmt_num(r["gaps"])]
                for r in idle[:MAX_IDLE_ROWS]
            ],
        )
    ]


def _verdict_html(result: RuleResult) -> str:
    """The rule's verdict as a coloured word: its worst severity, "ok" or "skipped"."""
    shown = verdict(result)
    if shown == "skipped":
        return '<span class="sev-skip">skipped</span>'
    if shown == "ok":
        return '<span class="sev-ok">ok</span>'
    return f'<span class="{SEVERITY_CLASS[shown]}">{esc(shown)}</span>'


def rules_summary(report: Report, ordered: Sequence[RuleResult]) -> Section:
    """The rules summary table: description, recommendation, triggers, datapoints, parameters."""
    sec = Section("rules", "Rules summary")
    counts = finding_counts(report.dashboard.rules)
    sec.body.append(
        f"<p>{counts.error} errors, {counts.warning} warnings, {counts.info} notes from {len(ordered)} rules.</p>"
    )
    cells = [
        [
            f'<a href="#rule-{esc(r.rule)}">{esc(r.rule)}</a>',
            _verdict_html(r),
            esc(r.description),
            esc(recommendation(r)),
            esc(fmt_num(r.triggered)),
            esc(fmt_num(r.datapoints)),
            esc(param_text(r.params)),
        ]
        for r in ordered
    ]
    sec.body.append(
        table(
            ["rule", "verdict", "description", "recommendation", "times triggered", "datapoints", "parameters"],
            cells,
            raw=range(7),
        )
    )
    return sec


def dashboard(report: Report) -> Section:
    """The SageMaker Profiler dashboard panels."""
    model = report.dashboard
    sec = Section("dashboard", "Dashboard")
    for figure in (
        *_active_pies(model.summary),
        *_utilization_plot(model),
        *_top_kernel_bars(model.summary),
        *_step_histogram(model.step_histogram),
        *_distribution_pies(model.summary),
        *_annotation_histograms(model.summary),
    ):
        sec.figure(figure)
    return sec


def _active_pies(summary: Summary) -> list[plots.Figure]:
    """One pie per resource (GPU, CPU): the mean active share over its devices."""
    active = rows(summary.active)
    pies = []
    for resource in ("gpu", "cpu"):
        shares = [r for r in active if r["resource"] == resource]
        if not shares:
            continue
        share = sum(r["active_share"] for r in shares) / len(shares)
        method = "/".join(sorted({r["method"] for r in shares}))
        pies.append(
            plots.pie(
                f"{resource.upper()} active time ({method}, mean of {len(shares)})",
                ["active", "idle"],
                [round(share, 6), round(1 - share, 6)],
            )
        )
    return pies


def _utilization_plot(model: Dashboard) -> list[plots.Figure]:
    if not model.utilization:
        return []
    return [
        plots.lines(
            f"Utilization over time (timeline bins of {model.utilization_bin_ms:g} ms; counters as sampled)",
            model.utilization[:MAX_SERIES],
            "%",
        )
    ]


def _top_kernel_bars(summary: Summary) -> list[plots.Figure]:
    figures = []
    by_time, by_count = rows(summary.top_by_time), rows(summary.top_by_count)
    if by_time:
        figures.append(
            plots.hbar(
                "Top kernels by total time", [r["name"] for r in by_time], [r["total_ns"] / 1e6 for r in by_time], "ms"
            )
        )
    if by_count:
        figures.append(
            plots.hbar(
                "Top kernels by launch count",
                [r["name"] for r in by_count],
                [float(r["count"]) for r in by_count],
                "launches",
            )
        )
    return figures


def _step_histogram(hist: StepHistogram) -> list[plots.Figure]:
    if not hist.counts:
        return []
    return [plots.histogram("Step time distribution", list(hist.edges_ms), list(hist.counts), "step time (ms)")]


def _distribution_pies(summary: Summary) -> list[plots.Figure]:
    """Kernel precision and GPU activity (excluded rows left out), memory operations; empty slices left out."""
    precision = [r for r in rows(summary.precision) if r["time_ns"] and not r["excluded"]]
    activity = [r for r in rows(summary.activity) if r["time_ns"]]
    memory = [r for r in rows(summary.memory) if r["time_ns"]]
    figures = []
    if precision:
        figures.append(
            plots.pie(
                "Kernel precision (share of compute time)",
                [r["precision"] for r in precision],
                [r["time_ns"] for r in precision],
            )
        )
    if activity:
        figures.append(plots.pie("GPU activity", [r["activity"] for r in activity], [r["time_ns"] for r in activity]))
    if memory:
        figures.append(
            plots.pie(
                "GPU memory operations",
                [memory_op_label(r["op"], r["copy_kind"], r["host_memory"]) for r in memory],
                [r["time_ns"] for r in memory],
            )
        )
    return figures


def _annotation_histograms(summary: Summary) -> list[plots.Figure]:
    return [
        plots.histogram(
            f"Annotation durations: {h.pattern}", [_ms(edge) for edge in h.edges_ns], list(h.counts), "duration (ms)"
        )
        for h in summary.annotations
        if h.count
    ]


def _ms(ns: float) -> float:
    rounded = json_float(ns)
    return 0.0 if rounded is None else rounded / 1e6


def _evidence_table(evidence: Sequence[Evidence]) -> str:
    return table(
        ["kind", "when", "node/rank", "device", "stream", "what", "value"],
        [evidence_cells(e) for e in evidence[:MAX_EVIDENCE_ROWS]],
    )


def rule_section(result: RuleResult) -> Section:
    """One rule: description, parameters, verdict, findings with evidence, and a plot where it helps."""
    sec = Section(f"rule-{result.rule}", f"Rule: {result.rule}")
    sec.body.append(f"<p>{esc(result.description)} {_verdict_html(result)}</p>")
    rule = rule_doc(result.rule)
    meaning = {p.name: p.doc for p in rule.params} if rule else {}
    sec.body.append(
        table(["parameter", "value", "meaning"], [[k, v, meaning.get(k, "")] for k, v in result.params.items()])
    )
    if rule_status(result) == "skipped":
        sec.body.append(f"<p>Skipped: {esc(result.skipped)}.</p>")
    for f in result.findings:
        sec.body.append(
            f'<div class="finding {SEVERITY_CLASS[f.severity]}"><b>{esc(f.severity)}</b>: '
            f"{esc(f.message)}<br><i>Recommendation:</i> {esc(f.recommendation)}</div>"
        )
        if f.evidence:
            sec.body.append(_evidence_table(f.evidence))
    if rule_status(result) == "ok":
        sec.body.append(
            f"<p>Did not fire: {esc(fmt_num(result.triggered))} of {esc(fmt_num(result.datapoints))} "
            "datapoints met the condition.</p>"
        )
    for figure in _rule_plot(result.rule, result.details):
        sec.figure(figure)
    return sec


def _rule_plot(rule: str, details: Mapping[str, Any]) -> list[plots.Figure]:
    """The one plot a rule's details call for: its step histogram, its longest gaps, busy share or sync share per
    rank (the details are each rule's own small JSON-ready numbers)."""
    if "histogram" in details and details["histogram"]["counts"]:
        return [
            plots.histogram("Step durations", details["histogram"]["edges_ms"], details["histogram"]["counts"], "ms")
        ]
    if rule == "GPUGaps" and details.get("gaps_ms"):
        gaps = details["gaps_ms"][:MAX_GAP_BARS]
        return [plots.bars("Longest GPU gaps", [f"#{i + 1}" for i in range(len(gaps))], gaps, "ms")]
    if "busy_share_pct" in details:
        busy = details["busy_share_pct"]
        return [plots.bars("GPU busy share per rank", list(busy), list(busy.values()), "% of trace span")]
    per_rank = details.get("per_rank")
    if per_rank and "pct" in per_rank[0]:
        return [
            plots.bars(
                "Sync calls, % of host timeline",
                [f"{x['node']}/{x['rank']}" for x in per_rank],
                [x["pct"] for x in per_rank],
                "%",
            )
        ]
    return []
