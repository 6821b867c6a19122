"""The rules' verdicts as every report shows them: a rule's status, its worst finding, the report order, counts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from ktrace.analysis.rules.base import Rule, RuleResult
from ktrace.analysis.rules.engine import RulesReport, all_rules

SEVERITIES = ("info", "warning", "error")
"""Finding severities, least severe first."""
VERDICT_ORDER = ("error", "warning", "info", "ok", "skipped")
"""Report order: the rules whose worst finding is an error first, then warnings, notes, quiet rules, skipped ones."""

RuleStatus = Literal["fired", "ok", "skipped"]


def rule_status(result: RuleResult) -> RuleStatus:
    """ "skipped" (the data it needs is absent), "fired" (it has findings) or "ok" (it ran and found nothing)."""
    if result.skipped:
        return "skipped"
    return "fired" if result.fired else "ok"


def verdict(result: RuleResult) -> str:
    """The severity of the rule's worst finding when it fired, else its status ("ok" or "skipped")."""
    status = rule_status(result)
    if status != "fired":
        return status
    return max((f.severity for f in result.findings), key=SEVERITIES.index)


def triggered_first(results: Iterable[RuleResult]) -> list[RuleResult]:
    """`results` ordered errors, warnings, notes, then ok, then skipped (stable within each)."""
    return sorted(results, key=lambda r: VERDICT_ORDER.index(verdict(r)))


@dataclass(frozen=True)
class FindingCounts:
    """Findings per severity."""

    error: int
    warning: int
    info: int


def finding_counts(rules: RulesReport) -> FindingCounts:
    """How many findings of each severity the rules produced."""
    severities = [f.severity for f in rules.findings]
    return FindingCounts(
        error=severities.count("error"), warning=severities.count("warning"), info=severities.count("info")
    )


def rule_doc(name: str) -> Rule | None:
    """The registered rule called `name` (its recommendation and parameter docs), None if there is none."""
    return next((r for r in all_rules() if r.name == name), None)


def param_text(params: Mapping[str, object]) -> str:
    """The parameters a rule ran with, "name=value, ..." (max_evidence left out: it shapes output, not verdicts)."""
    return ", ".join(f"{k}={v}" for k, v in params.items() if k != "max_evidence")


def recommendation(result: RuleResult) -> str:
    """The registered rule's recommendation ("" for a rule that is not registered)."""
    rule = rule_doc(result.rule)
    return rule.recommendation if rule else ""
