"""RuleFold: the rules' reduce as the ranks' RuleParts arrive, in any order, holding a bounded state.

What it keeps does not grow with the ranks' findings: per "per rank" rule its sums, every fired rank's name and
count (a few bytes each), the findings of the MAX_RANK_FINDINGS lowest fired ranks and the details of the
MAX_DETAIL_ITEMS lowest ranks; the "exact" rules' inputs are merged every COMPACT_EVERY parts (their health
counts are kept per rank: fleet_rules.merge_health needs each).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ktrace.analysis.rules.base import Evidence, Finding, Rule, RuleResult, severity_rank
from ktrace.analysis.rules.config import RulesConfig
from ktrace.analysis.rules.engine import RulesReport, all_rules, evaluate_check
from ktrace.analysis.rules.fleet_rules import EXACT_CHECKS, ExactInputs, merge_exact_inputs, merge_health
from ktrace.analysis.summary import Summary

Ranks = tuple[tuple[str, int], ...]
"""The (node, rank) pairs of a slice, sorted."""

NO_RANK = "no rank of the job has the data this rule needs"
MAX_RANK_FINDINGS = 8
"""Ranks whose own findings a "per rank" rule's job result keeps after its verdict, in rank order (a rule that
fires on every one of 4,096 ranks gives the verdict and 8 ranks' findings, not 4,096 lines)."""
MAX_VERDICT_RANKS = 64
"""Ranks the job-wide verdict lists as evidence (it counts them all)."""
MAX_NAMED = 8
"""Ranks the job-wide verdict names in its message."""
MAX_DETAIL_ITEMS = 200
"""Longest list a per-rank rule's reduced details keep (the report plots at most that many bars)."""
LONGEST_FIRST = ("gaps_ms",)
"""Detail lists kept as the job's largest values (the longest gaps of any rank), not in rank order."""
COMPACT_EVERY = 64
"""Parts whose exact inputs are merged at once."""


@dataclass(frozen=True)
class RuleParts:
    """What one rank (or a slice of whole ranks) contributes to the job's rules."""

    ranks: tuple[tuple[str, int], ...]
    """The (node, rank) pairs of the slice, sorted (rank -1: a node's own records, such as its counters)."""
    per_rank: tuple[RuleResult, ...]
    """The "per rank" rules' results on this slice, findings named by the slice (rank_label)."""
    exact: ExactInputs
    """The "exact" rules' inputs that the Summary does not hold."""


def rank_label(ranks: Sequence[tuple[str, int]]) -> str:
    """How findings name a slice: "node/rankR" ("node" for a node's own records), several joined by ", "."""
    return ", ".join(node if rank < 0 else f"{node}/rank{rank}" for node, rank in ranks)


def _lowest(items: list[tuple[Ranks, Any]], keep: int) -> None:
    """Trim `items` to the `keep` of lowest ranks (amortized: sorted only past twice that)."""
    if len(items) > 2 * keep:
        items.sort(key=lambda item: item[0])
        del items[keep:]


@dataclass
class _Tally:
    """One "per rank" rule's results on the slices folded so far."""

    datapoints: int = 0
    triggered: int = 0
    ran: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    fired: list[tuple[Ranks, int]] = field(default_factory=list)
    severity: str | None = None
    findings: list[tuple[Ranks, tuple[Finding, ...]]] = field(default_factory=list)
    details: list[tuple[Ranks, Mapping[str, Any]]] = field(default_factory=list)
    longest: dict[str, list[float]] = field(default_factory=dict)

    def add(self, ranks: Ranks, r: RuleResult) -> None:
        if r.skipped is not None:
            self.skipped[r.skipped] += 1
            return
        self.ran += 1
        self.datapoints += r.datapoints
        self.triggered += r.triggered
        self.details.append((ranks, r.details))
        _lowest(self.details, MAX_DETAIL_ITEMS)
        for key in LONGEST_FIRST:
            if isinstance(r.details.get(key), list):
                kept = sorted([*self.longest.get(key, []), *r.details[key]], reverse=True)
                self.longest[key] = kept[:MAX_DETAIL_ITEMS]
        if r.findings:
            self.fired.append((ranks, r.triggered))
            self.findings.append((ranks, r.findings))
            _lowest(self.findings, MAX_RANK_FINDINGS)
            worst = max((f.severity for f in r.findings), key=severity_rank)
            if self.severity is None or severity_rank(worst) > severity_rank(self.severity):
                self.severity = worst

    def result(self, rule: Rule, config: RulesConfig) -> RuleResult:
        """The rule's job result: skipped (the most frequent reason) when it ran on no rank; else the sums, the
        job-wide verdict when it fired, and the lowest fired ranks' findings."""
        params = config.params_for(rule)
        if not self.ran:
            reason = self.skipped.most_common(1)[0][0] if self.skipped else NO_RANK
            return RuleResult(rule.name, rule.family, rule.description, params, 0, 0, (), skipped=reason)
        fired = sorted(self.fired, key=lambda f: f[0])
        findings = [f for _, found in sorted(self.findings, key=lambda f: f[0])[:MAX_RANK_FINDINGS] for f in found]
        verdict = (self.verdict(rule, fired),) if fired else ()
        return RuleResult(
            rule.name,
            rule.family,
            rule.description,
            params,
            self.datapoints,
            self.triggered,
            verdict + tuple(findings),
            details=self.added_details(),
        )

    def verdict(self, rule: Rule, fired: Sequence[tuple[Ranks, int]]) -> Finding:
        """The job-wide finding: on how many of the ranks it ran on it fired, which (evidence: one per rank, value =
        the data points that met the condition there), at the worst severity of theirs."""
        labels = [rank_label(ranks) for ranks, _ in fired]
        shown = ", ".join(labels[:MAX_NAMED]) + (f" +{len(labels) - MAX_NAMED} more" if len(labels) > MAX_NAMED else "")
        follow = (
            "each rank's findings follow"
            if len(fired) <= MAX_RANK_FINDINGS
            else f"the findings of the first {MAX_RANK_FINDINGS} follow"
        )
        evidence = tuple(
            Evidence(
                kind="rank",
                node=ranks[0][0] if len(ranks) == 1 else None,
                rank=ranks[0][1] if len(ranks) == 1 and ranks[0][1] >= 0 else None,
                name=rank_label(ranks),
                value=float(triggered),
            )
            for ranks, triggered in fired[:MAX_VERDICT_RANKS]
        )
        message = f"fired on {len(fired)} of the {self.ran} ranks it ran on ({shown}); {follow}"
        severity = self.severity or rule.severity
        return Finding(rule.name, severity, message, rule.recommendation, evidence, self.datapoints, self.triggered)  # type: ignore[arg-type]

    def added_details(self) -> dict[str, Any]:
        """The ranks' details added up: lists of the lowest ranks concatenated in rank order (LONGEST_FIRST ones:
        the job's largest values) up to MAX_DETAIL_ITEMS, with how many ranks the rule ran and was skipped on; a
        rank's own numbers (shares, percentiles) are in its finding's message, not summed here."""
        lists: dict[str, list[Any]] = {}
        for _, details in sorted(self.details, key=lambda d: d[0]):
            for key, value in details.items():
                if isinstance(value, list) and key not in LONGEST_FIRST:
                    lists.setdefault(key, []).extend(value)
        out: dict[str, Any] = {k: v[:MAX_DETAIL_ITEMS] for k, v in lists.items()}
        out.update(self.longest)
        out["ranks_evaluated"] = self.ran
        out["ranks_skipped"] = sum(self.skipped.values())
        return out


@dataclass
class RuleFold:
    """The rules' reduce state: add() each rank's RuleParts as it arrives, finish() once with the job's Summary."""

    config: RulesConfig = field(default_factory=RulesConfig)
    tallies: dict[str, _Tally] = field(default_factory=dict)
    exact: list[ExactInputs] = field(default_factory=list)
    health: list[Mapping[str, int]] = field(default_factory=list)
    parts: int = 0

    def add(self, part: RuleParts) -> None:
        """Fold one slice's RuleParts."""
        self.parts += 1
        for r in part.per_rank:
            self.tallies.setdefault(r.rule, _Tally()).add(part.ranks, r)
        self.exact.append(part.exact)
        self.health.append(part.exact.health)
        if len(self.exact) >= COMPACT_EVERY:
            self.exact = [merge_exact_inputs(self.exact, {})]

    def finish(self, summary: Summary, job_health: Mapping[str, int] | None = None) -> RulesReport:
        """Every enabled rule in RULE_ORDER: "exact" ones on the merged inputs (health: `job_health`, else
        fleet_rules.merge_health of the ranks'), "per rank" ones from their tallies."""
        health = dict(job_health) if job_health is not None else merge_health(self.health)
        inputs = merge_exact_inputs(self.exact, health) if self.exact else None
        results = []
        for rule in all_rules():
            if rule.name in self.config.disabled:
                continue
            if rule.fleet_mode == "exact" and inputs is not None:
                check = partial(EXACT_CHECKS[rule.name], inputs, summary)
                results.append(evaluate_check(rule, self.config, check))
            else:
                results.append(self.tallies.get(rule.name, _Tally()).result(rule, self.config))
        return RulesReport(tuple(results))
