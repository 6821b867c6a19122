"""The rules' findings as the JSON of `ktrace check --format json` and the report's `rules` key (stable keys)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ktrace.analysis.rules.base import Evidence, Finding, Rule
from ktrace.analysis.rules.engine import RulesReport, all_rules


def evidence_to_dict(e: Evidence) -> dict[str, Any]:
    """Evidence as a JSON-ready dict without the fields it does not have."""
    return {k: v for k, v in e.__dict__.items() if v is not None}


def finding_to_dict(f: Finding) -> dict[str, Any]:
    """A finding as a JSON-ready dict (stable keys)."""
    return {
        "rule": f.rule,
        "severity": f.severity,
        "message": f.message,
        "recommendation": f.recommendation,
        "datapoints": f.datapoints,
        "triggered": f.triggered,
        "evidence": [evidence_to_dict(e) for e in f.evidence],
    }


def report_to_dict(report: RulesReport, rules: Iterable[Rule] | None = None) -> dict[str, Any]:
    """The whole RulesReport as a JSON-ready dict: one entry per rule with its parameters and findings."""
    docs = {r.name: r for r in (rules if rules is not None else all_rules())}
    out = []
    for r in report.results:
        rule = docs.get(r.rule)
        out.append(
            {
                "rule": r.rule,
                "family": r.family,
                "description": r.description,
                "recommendation": rule.recommendation if rule else "",
                "params": dict(r.params),
                "datapoints": r.datapoints,
                "triggered": r.triggered,
                "status": "skipped" if r.skipped else ("fired" if r.fired else "ok"),
                "skipped": r.skipped,
                "findings": [finding_to_dict(f) for f in r.findings],
                "details": dict(r.details),
            }
        )
    return {
        "rules": out,
        "worst": report.worst(),
        "counts": {s: sum(1 for f in report.findings if f.severity == s) for s in ("error", "warning", "info")},
    }
