"""The HTML report's sections, in the order of SageMaker Debugger's report plus the Profiler dashboard panels.

Each section is (anchor, title, body HTML, figures). Every string from the trace goes through html.escape.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ktrace.analysis.distributions import memory_op_label
from ktrace.analysis.phases import step_source_note
from ktrace.report import plots
from ktrace.report.format import fmt_ns, fmt_num, fmt_time_range

SEVERITY_CLASS = {"error": "sev-error", "warning": "sev-warning", "info": "sev-info"}


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


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, raw: Sequence[int] = ()) -> str:
    """An HTML table; cells are escaped unless their column index is in `raw` (already HTML)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c if i in raw else esc(c)}</td>" for i, c in enumerate(r)) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def job_summary(c: dict[str, Any]) -> Section:
    """Training job summary: start, end, initialization / training loop / finalization."""
    s, p = c["summary"], c["summary"]["phases"]
    sec = Section("job", "Training job summary")
    sec.body.append(table(["", "value"], [
        ["source", s["source"]], ["ranks", s["ranks"]], ["kernels", fmt_num(s["kernels"])],
        ["trace span", fmt_time_range(p["start_ns"], p["end_ns"])],
        ["steps per rank" if s["ranks"] > 1 else "steps",
         f"{p['steps']}{step_source_note(p.get('step_source', 'none'))}"]]))
    sec.body.append(table(["phase", "time", "% of job"], [
        ["initialization", fmt_ns(p["init_ns"]), f"{p['init_pct']:.1f}"],
        ["training loop", fmt_ns(p["training_ns"]), f"{p['training_pct']:.1f}"],
        ["finalization", fmt_ns(p["finalize_ns"]), f"{p['finalize_pct']:.1f}"]]))
    for note in s.get("notes") or []:
        sec.body.append(f'<p class="note">{esc(note)}</p>')
    return sec


def system_usage(c: dict[str, Any]) -> Section:
    """System usage statistics per node: min/p50/p95/p99/max of every counter."""
    sec = Section("system", "System usage statistics")
    rows = [[r["node"], r["metric"], r.get("instance", ""), r["samples"], *(fmt_num(r[k]) for k in
             ("min", "p50", "p95", "p99", "max"))] for r in c["summary"]["counters"] or []]
    if rows:
        sec.body.append(table(["node", "metric", "instance", "samples", "min", "p50", "p95", "p99", "max"], rows))
    else:
        sec.body.append("<p>The trace has no counter samples (CPU/GPU utilization, memory, I/O). "
                        "<code>ktrace run</code> records them; Kineto traces do not.</p>")
    return sec


def framework_metrics(c: dict[str, Any]) -> Section:
    """Framework metrics: steps, launch latency, idle causes, GPU time split."""
    s = c["summary"]
    sec = Section("framework", "Framework metrics")
    if s["step_stats"]:
        sec.body.append("<h3>Step time per rank</h3>" + table(
            ["node", "rank", "steps", "min", "mean", "p50", "p95", "max"],
            [[r["node"], r["rank"], r["steps"], *(fmt_ns(r[k]) for k in ("min_ns", "mean_ns", "p50_ns", "p95_ns",
                                                                          "max_ns"))] for r in s["step_stats"]]))
    if s.get("latency"):
        sec.body.append("<h3>Launch→run latency</h3><p>start→start = run start − launch-call start; "
                        "end→start = run start − launch-call end (HTA's launch delay, nsys queue time).</p>")
        sec.body.append(table(["kind", "count", "start→start p50", "p95", "p99", "end→start p50", "p95", "p99"],
                              [[r["kind"], fmt_num(r["count"]),
                                *(fmt_ns(r.get(f"launch_latency_ns_p{q}")) for q in (50, 95, 99)),
                                *(fmt_ns(r.get(f"queue_delay_ns_p{q}")) for q in (50, 95, 99))]
                               for r in s["latency"]]))
    if s.get("idle"):
        idle = [r for r in s["idle"] if r.get("idle_ns")]
        if idle:
            sec.body.append("<h3>GPU idle time by cause, per device</h3><p>The gaps of each device's busy union "
                            "(every stream merged), so the causes add up to the device's idle time; a gap takes the "
                            "cause of the record that ends it.</p>" + table(
                ["node", "rank", "device", "cause", "idle", "gaps"],
                [[r.get("node"), r.get("rank"), r.get("device"), r.get("idle_category"), fmt_ns(r["idle_ns"]),
                  fmt_num(r.get("gaps"))] for r in idle[:60]]))
    return sec


def _status(r: dict[str, Any]) -> str:
    if r["status"] == "skipped":
        return '<span class="sev-skip">skipped</span>'
    if r["status"] == "ok":
        return '<span class="sev-ok">ok</span>'
    worst = max((f["severity"] for f in r["findings"]), key=("info", "warning", "error").index)
    return f'<span class="{SEVERITY_CLASS[worst]}">{esc(worst)}</span>'


def rules_summary(c: dict[str, Any]) -> Section:
    """The rules summary table: description, recommendation, triggers, datapoints, parameters."""
    sec = Section("rules", "Rules summary")
    counts = c["rules"]["counts"]
    sec.body.append(f"<p>{counts['error']} errors, {counts['warning']} warnings, {counts['info']} notes from "
                    f"{len(c['rules']['rules'])} rules.</p>")
    rows = []
    for r in c["rules"]["rules"]:
        params = ", ".join(f"{k}={v}" for k, v in r["params"].items() if k != "max_evidence")
        rows.append([f'<a href="#rule-{esc(r["rule"])}">{esc(r["rule"])}</a>', _status(r), esc(r["description"]),
                     esc(r["recommendation"]), esc(fmt_num(r["triggered"])), esc(fmt_num(r["datapoints"])),
                     esc(params)])
    sec.body.append(table(["rule", "verdict", "description", "recommendation", "times triggered", "datapoints",
                           "parameters"], rows, raw=range(7)))
    return sec


def _active_pies(sec: Section, active: list[dict[str, Any]]) -> None:
    for resource in ("gpu", "cpu"):
        rows = [r for r in active if r["resource"] == resource]
        if not rows:
            continue
        share = sum(r["active_share"] for r in rows) / len(rows)
        method = "/".join(sorted({r["method"] for r in rows}))
        sec.figure(plots.pie(f"{resource.upper()} active time ({method}, mean of {len(rows)})",
                             ["active", "idle"], [round(share, 6), round(1 - share, 6)]))


def dashboard(c: dict[str, Any]) -> Section:
    """The SageMaker Profiler dashboard panels."""
    s = c["summary"]
    sec = Section("dashboard", "Dashboard")
    _active_pies(sec, s["active"] or [])
    series = c["utilization"]["series"]
    if series:
        sec.figure(plots.lines(f"Utilization over time (timeline bins of {c['utilization']['bin_ms']:g} ms; "
                               "counters as sampled)", series[:32], "%"))
    for key, title, value, unit in (("top_by_time", "Top kernels by total time", "total_ns", "ms"),
                                    ("top_by_count", "Top kernels by launch count", "count", "launches")):
        rows = s[key] or []
        if rows:
            scale = 1e6 if unit == "ms" else 1
            sec.figure(plots.hbar(title, [r["name"] for r in rows], [r[value] / scale for r in rows], unit))
    hist = c["steps_histogram"]
    if hist["counts"]:
        sec.figure(plots.histogram("Step time distribution", hist["edges_ms"], hist["counts"], "step time (ms)"))
    for key, title, name_key, value_key in (("precision", "Kernel precision (share of compute time)", "precision",
                                             "time_ns"),
                                            ("activity", "GPU activity", "activity", "time_ns")):
        rows = [r for r in s[key] or [] if r[value_key] and not r.get("excluded")]
        if rows:
            sec.figure(plots.pie(title, [r[name_key] for r in rows], [r[value_key] for r in rows]))
    mem = [r for r in s["memory"] or [] if r["time_ns"]]
    if mem:
        labels = [memory_op_label(r["op"], r["copy_kind"], r["host_memory"]) for r in mem]
        sec.figure(plots.pie("GPU memory operations", labels, [r["time_ns"] for r in mem]))
    for h in s.get("annotations") or []:
        if h["count"]:
            sec.figure(plots.histogram(f"Annotation durations: {h['pattern']}", [e / 1e6 for e in h["edges_ns"]],
                                       h["counts"], "duration (ms)"))
    return sec


def _evidence_table(evidence: list[dict[str, Any]], limit: int) -> str:
    rows = [[e.get("kind", ""), fmt_time_range(e.get("start_ns"), e.get("end_ns")),
             "/".join(str(e[k]) for k in ("node", "rank") if k in e), e.get("device", ""), e.get("stream", ""),
             e.get("name", ""), fmt_num(e.get("value"))] for e in evidence[:limit]]
    return table(["kind", "when", "node/rank", "device", "stream", "what", "value"], rows)


def rule_section(r: dict[str, Any], docs: dict[str, Any]) -> Section:
    """One rule: description, parameters, verdict, findings with evidence, and a plot where it helps."""
    sec = Section(f"rule-{r['rule']}", f"Rule: {r['rule']}")
    sec.body.append(f"<p>{esc(r['description'])} {_status(r)}</p>")
    doc = {p["name"]: p["doc"] for p in docs.get("params", [])}
    sec.body.append(table(["parameter", "value", "meaning"], [[k, v, doc.get(k, "")] for k, v in r["params"].items()]))
    if r["status"] == "skipped":
        sec.body.append(f"<p>Skipped: {esc(r['skipped'])}.</p>")
    for f in r["findings"]:
        sec.body.append(f'<div class="finding {SEVERITY_CLASS[f["severity"]]}"><b>{esc(f["severity"])}</b>: '
                        f'{esc(f["message"])}<br><i>Recommendation:</i> {esc(f["recommendation"])}</div>')
        if f["evidence"]:
            sec.body.append(_evidence_table(f["evidence"], 50))
    if r["status"] == "ok":
        sec.body.append(f"<p>Did not fire: {esc(fmt_num(r['triggered']))} of {esc(fmt_num(r['datapoints']))} "
                        "datapoints met the condition.</p>")
    _rule_plot(sec, r)
    return sec


def _rule_plot(sec: Section, r: dict[str, Any]) -> None:
    d = r.get("details") or {}
    if "histogram" in d and d["histogram"]["counts"]:
        sec.figure(plots.histogram("Step durations", d["histogram"]["edges_ms"], d["histogram"]["counts"], "ms"))
    elif r["rule"] == "GPUGaps" and d.get("gaps_ms"):
        sec.figure(plots.bars("Longest GPU gaps", [f"#{i + 1}" for i in range(len(d["gaps_ms"][:50]))],
                              d["gaps_ms"][:50], "ms"))
    elif "busy_share_pct" in d:
        sec.figure(plots.bars("GPU busy share per rank", list(d["busy_share_pct"]),
                              list(d["busy_share_pct"].values()), "% of trace span"))
    elif "per_rank" in d and d["per_rank"] and "pct" in d["per_rank"][0]:
        sec.figure(plots.bars("Sync calls, % of host timeline", [f"{x['node']}/{x['rank']}" for x in d["per_rank"]],
                              [x["pct"] for x in d["per_rank"]], "%"))
