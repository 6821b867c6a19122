"""The report's rules: the summary table of every rule's verdict, and one section per rule (its parameters, its
verdict, its findings with their evidence, and the plot its details call for), rules that found something first."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from ktrace.analysis.rules.base import Evidence, RuleResult
from ktrace.analysis.rules.engine import RulesReport
from ktrace.model.units import format_ns
from ktrace.presentation.page import Column, Figure, Finding, RuleVerdict, Section, Table, Text, Window
from ktrace.presentation.verdicts import finding_counts, param_text, recommendation, rule_doc, verdict

MAX_EVIDENCE_ROWS = 50
"""Evidence rows under a finding (the JSON report has them all)."""
MAX_GAP_BARS = 50

SUMMARY_COLUMNS = (
    Column("rule", unit="text"),
    Column("verdict", unit="text"),
    Column("description", unit="text"),
    Column("recommendation", unit="text"),
    Column("triggered", "times triggered", "number"),
    Column("datapoints", unit="number"),
    Column("parameters", unit="text"),
)
EVIDENCE_COLUMNS = (
    Column("kind", unit="text"),
    Column("when", unit="text"),
    Column("where", "node/rank", "text"),
    Column("device", unit="id"),
    Column("stream", unit="id"),
    Column("what", unit="text"),
    Column("value", unit="text"),
)
PARAMETER_COLUMNS = (Column("parameter", unit="text"), Column("value", unit="text"), Column("meaning", unit="text"))


def fmt_time(ns: int | None) -> str:
    """An epoch-ns timestamp as UTC time of day with ms."""
    if ns is None:
        return "-"
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def fmt_time_range(start_ns: int | None, end_ns: int | None) -> str:
    """ "start (+duration)" for evidence with a time range, "" without."""
    if start_ns is None:
        return ""
    if end_ns is None:
        return fmt_time(start_ns)
    return f"{fmt_time(start_ns)} (+{format_ns(end_ns - start_ns)})"


def evidence_value(value: float | int | None) -> str:
    """An evidence value (ms, counts, % or bytes: each rule's own) with 4 significant digits, thousands separated
    from 10,000 on: 2 decimals would show a 0.004 ms gap as 0.00."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


def rules_summary_section(rules: RulesReport, ordered: Sequence[RuleResult]) -> Section:
    """The rules summary: finding counts, then one row per rule (in `ordered`'s order)."""
    counts = finding_counts(rules)
    lead = f"{counts.error} errors, {counts.warning} warnings, {counts.info} notes from {len(ordered)} rules."
    found = tuple(
        {
            "rule": r.rule,
            "verdict": verdict(r),
            "description": r.description,
            "recommendation": recommendation(r),
            "triggered": r.triggered,
            "datapoints": r.datapoints,
            "parameters": param_text(r.params),
        }
        for r in ordered
    )
    return Section("rules", "Rules summary", (Text(lead), Table("rules_summary", "", SUMMARY_COLUMNS, found)))


def evidence_table(evidence: Sequence[Evidence]) -> Table | None:
    """A finding's evidence, the first MAX_EVIDENCE_ROWS rows (None without evidence)."""
    if not evidence:
        return None
    found = tuple(
        {
            "kind": e.kind,
            "when": fmt_time_range(e.start_ns, e.end_ns),
            "where": "/".join(str(v) for v in (e.node, e.rank) if v is not None),
            "device": e.device,
            "stream": e.stream,
            "what": e.name,
            "value": evidence_value(e.value),
        }
        for e in evidence[:MAX_EVIDENCE_ROWS]
    )
    rest = max(0, len(evidence) - MAX_EVIDENCE_ROWS)
    return Table("evidence", "", EVIDENCE_COLUMNS, found, rest=rest, rest_what="evidence rows")


def evidence_windows(evidence: Sequence[Evidence]) -> tuple[Window, ...]:
    """The time windows of a finding's evidence (every timed item, not only the rows the table shows)."""
    return tuple(Window(e.start_ns, e.end_ns, e.node, e.rank) for e in evidence if e.start_ns is not None)


def rule_verdict(result: RuleResult) -> RuleVerdict:
    """One rule's verdict with its findings (recommendation and evidence each)."""
    why = result.skipped or (result.findings[0].message if result.findings else result.description)
    findings = tuple(
        Finding(
            f.rule,
            f.severity,
            f.message,
            recommendation=f.recommendation,
            evidence=evidence_table(f.evidence),
            windows=evidence_windows(f.evidence),
        )
        for f in result.findings
    )
    return RuleVerdict(
        result.rule,
        verdict(result),
        why,
        recommendation(result),
        findings,
        datapoints=result.datapoints,
        triggered=result.triggered,
    )


def rule_section(result: RuleResult) -> Section:
    """One rule: its description, the parameters it ran with, its verdict and findings, and a plot where one helps."""
    rule = rule_doc(result.rule)
    meaning = {p.name: p.doc for p in rule.params} if rule else {}
    params = tuple({"parameter": k, "value": str(v), "meaning": meaning.get(k, "")} for k, v in result.params.items())
    blocks: tuple[Table | Figure | Text | tuple[RuleVerdict, ...], ...] = (
        Text(result.description),
        Table("parameters", "", PARAMETER_COLUMNS, params),
        (rule_verdict(result),),
        *rule_figures(result.rule, result.details),
    )
    return Section(f"rule-{result.rule}", f"Rule: {result.rule}", blocks)


def rule_figures(rule: str, details: Mapping[str, Any]) -> list[Figure]:
    """The one plot a rule's details call for: its step histogram, its longest gaps, busy share or sync share per
    rank (the details are each rule's own small JSON-ready numbers)."""
    key = f"rule-{rule}"
    if "histogram" in details and details["histogram"]["counts"]:
        hist = details["histogram"]
        data = {"edges": list(hist["edges_ms"]), "counts": list(hist["counts"]), "unit": "ms"}
        return [Figure(key, "Step durations", "histogram", data)]
    if rule == "GPUGaps" and details.get("gaps_ms"):
        gaps = list(details["gaps_ms"][:MAX_GAP_BARS])
        names = [f"#{i + 1}" for i in range(len(gaps))]
        return [Figure(key, "Longest GPU gaps", "bars", {"names": names, "values": gaps, "unit": "ms"})]
    if "busy_share_pct" in details:
        busy = details["busy_share_pct"]
        data = {"names": list(busy), "values": list(busy.values()), "unit": "% of trace span"}
        return [Figure(key, "GPU busy share per rank", "bars", data)]
    per_rank = details.get("per_rank")
    if per_rank and "pct" in per_rank[0]:
        names = [f"{x['node']}/{x['rank']}" for x in per_rank]
        data = {"names": names, "values": [x["pct"] for x in per_rank], "unit": "%"}
        return [Figure(key, "Sync calls, % of host timeline", "bars", data)]
    return []
