"""Every rule on the rank-by-rank path: rank_rule_part() on each rank's trace (map), reduce_rule_parts() (client).

Each rule says how it runs there (Rule.fleet_mode):

- "exact": each rank sends its small exact inputs (fleet_rules.ExactInputs) or nothing when the reduced Summary
  holds the input; the client runs the rule's check once on the job's inputs, so it reports what run_rules
  reports on the whole trace.
- "per rank": the rule runs on each rank's own trace in the worker; the client adds the results up: datapoints
  and triggered summed, a job-wide verdict (job_verdict: fired on K of N ranks, which) followed by the ranks'
  findings in rank order, each named by its rank ("node/rankR: ..."). A threshold on a share, percentile or
  count is then judged per rank: the rule fires when it fires on some rank, and a condition that only the job's
  total would meet does not fire.

A RuleParts holds no frame of events: per-rank results (findings with at most max_evidence evidence rows each)
and tables that grow with ranks and kernel names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rules.base import Evidence, Finding, Rule, RuleResult, severity_rank
from ktrace.analysis.rules.config import RulesConfig
from ktrace.analysis.rules.engine import RulesReport, all_rules, evaluate_check, run_rules
from ktrace.analysis.rules.fleet_rules import EXACT_CHECKS, ExactInputs, exact_inputs, merge_exact_inputs
from ktrace.analysis.summary import Summary
from ktrace.model.trace import Trace

MAX_DETAIL_ITEMS = 200
"""Longest list a per-rank rule's reduced details keep (the report plots at most that many bars)."""
NO_RANK = "no rank of the job has the data this rule needs"
MAX_RANK_FINDINGS = 8
"""Ranks whose own findings a "per rank" rule's job result keeps after its verdict, in rank order (a rule that
fires on every one of 4,096 ranks gives the verdict and 8 ranks' findings, not 4,096 lines)."""
MAX_VERDICT_RANKS = 64
"""Ranks the job-wide verdict lists as evidence (it counts them all)."""
MAX_NAMED = 8
"""Ranks the job-wide verdict names in its message (its evidence has one row per rank)."""


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


def _enabled(config: RulesConfig) -> list[Rule]:
    return [r for r in all_rules() if r.name not in config.disabled]


def rank_rule_part(trace: Trace, config: RulesConfig | None, *, index: TraceIndex | None = None) -> RuleParts:
    """The RuleParts of one rank's (one partition's) trace: run in the worker, beside analysis.rank_partials.

    Args:
        trace: one rank (or several whole ranks) of a job.
        config: thresholds, disabled rules and severities (None: the defaults).
        index: the trace's TraceIndex (shared with the rank's partial).

    Returns:
        RuleParts.
    """
    config = config or RulesConfig()
    ix = TraceIndex.of(trace, index)
    ranks = tuple(sorted((str(n), int(r)) for n, r in ix.rank_pairs().iter_rows()))
    per_rank = [r for r in _enabled(config) if r.fleet_mode == "per rank"]
    report = run_rules(trace, config, rules=per_rank, index=ix)
    label = rank_label(ranks)
    only = ranks[0] if len(ranks) == 1 else None
    results = tuple(replace(r, findings=tuple(_named(f, label, only) for f in r.findings)) for r in report.results)
    return RuleParts(ranks, results, exact_inputs(ix))


def _named(finding: Finding, label: str, only: tuple[str, int] | None) -> Finding:
    """`finding` with its message prefixed by the slice's label and, for a one-rank slice, evidence without a
    node or rank given that rank's."""
    evidence = finding.evidence
    if only is not None:
        evidence = tuple(_on_rank(e, only) for e in evidence)
    return replace(finding, message=f"{label}: {finding.message}", evidence=evidence)


def _on_rank(e: Evidence, at: tuple[str, int]) -> Evidence:
    node = e.node if e.node is not None else at[0]
    rank = e.rank if e.rank is not None or at[1] < 0 else at[1]
    return replace(e, node=node, rank=rank)


def reduce_rule_parts(
    parts: Sequence[RuleParts],
    summary: Summary,
    config: RulesConfig | None = None,
    *,
    job_health: Mapping[str, int] | None = None,
) -> RulesReport:
    """The job's RulesReport from every rank's RuleParts and the reduced Summary: every enabled rule in
    RULE_ORDER, as run_rules reports them ("exact" rules on the job's inputs, "per rank" rules added up over the
    ranks in (node, rank) order; see the module docstring). `job_health`: the whole store's health counts
    (model.store.read's meta.health; without them fleet_rules.merge_health rebuilds them from the ranks')."""
    config = config or RulesConfig()
    ordered = sorted(parts, key=lambda p: p.ranks)
    inputs = merge_exact_inputs([p.exact for p in ordered], job_health) if ordered else None
    results = []
    for rule in _enabled(config):
        if rule.fleet_mode == "exact" and inputs is not None:
            results.append(evaluate_check(rule, config, partial(EXACT_CHECKS[rule.name], inputs, summary)))
        else:
            found = [(p.ranks, r) for p in ordered for r in p.per_rank if r.rule == rule.name]
            results.append(_added_up(rule, config, found))
    return RulesReport(tuple(results))


RankResult = tuple[tuple[tuple[str, int], ...], RuleResult]
"""A "per rank" rule's result on one slice, with the slice's (node, rank) pairs."""


def _added_up(rule: Rule, config: RulesConfig, per_rank: Sequence[RankResult]) -> RuleResult:
    """One "per rank" rule's job result from its result on each rank: skipped when it ran on no rank (with the
    most frequent reason); else the job-wide verdict (job_verdict) when it fired on some rank, then the findings of
    the first MAX_RANK_FINDINGS ranks it fired on."""
    params = config.params_for(rule)
    ran = [(ranks, r) for ranks, r in per_rank if r.skipped is None]
    if not ran:
        reasons = Counter(r.skipped for _, r in per_rank if r.skipped)
        reason = reasons.most_common(1)[0][0] if reasons else NO_RANK
        return RuleResult(rule.name, rule.family, rule.description, params, 0, 0, (), skipped=reason)
    fired = [(ranks, r) for ranks, r in ran if r.findings]
    datapoints, triggered = sum(r.datapoints for _, r in ran), sum(r.triggered for _, r in ran)
    verdict = (job_verdict(rule, fired, len(ran), datapoints, triggered),) if fired else ()
    return RuleResult(
        rule.name,
        rule.family,
        rule.description,
        params,
        datapoints,
        triggered,
        verdict + tuple(f for _, r in fired[:MAX_RANK_FINDINGS] for f in r.findings),
        details=_details([r for _, r in ran], len(per_rank) - len(ran)),
    )


def job_verdict(rule: Rule, fired: Sequence[RankResult], ran: int, datapoints: int, triggered: int) -> Finding:
    """The job-wide finding of a "per rank" rule that fired on some ranks: on how many of the ranks it ran on, which
    (evidence: one per rank, value = the data points that met the condition there), at the worst severity of
    theirs; the ranks' own findings follow it."""
    labels = [rank_label(ranks) for ranks, _ in fired]
    shown = ", ".join(labels[:MAX_NAMED]) + (f" +{len(labels) - MAX_NAMED} more" if len(labels) > MAX_NAMED else "")
    follow = (
        "each rank's findings follow"
        if len(fired) <= MAX_RANK_FINDINGS
        else (f"the findings of the first {MAX_RANK_FINDINGS} follow")
    )
    severity = max((f.severity for _, r in fired for f in r.findings), key=severity_rank)
    evidence = tuple(
        Evidence(
            kind="rank",
            node=ranks[0][0] if len(ranks) == 1 else None,
            rank=ranks[0][1] if len(ranks) == 1 and ranks[0][1] >= 0 else None,
            name=rank_label(ranks),
            value=float(r.triggered),
        )
        for ranks, r in fired[:MAX_VERDICT_RANKS]
    )
    message = f"fired on {len(fired)} of the {ran} ranks it ran on ({shown}); {follow}"
    return Finding(rule.name, severity, message, rule.recommendation, evidence, datapoints, triggered)


def _details(ran: Sequence[RuleResult], skipped: int) -> dict[str, Any]:
    """The ranks' details added up: lists concatenated (gap lengths longest first) up to MAX_DETAIL_ITEMS, with
    how many ranks the rule ran and was skipped on; a rank's own numbers (shares, percentiles) are in its
    finding's message, not summed here."""
    lists: dict[str, list[Any]] = {}
    for r in ran:
        for key, value in r.details.items():
            if isinstance(value, list):
                lists.setdefault(key, []).extend(value)
    if "gaps_ms" in lists:
        lists["gaps_ms"].sort(reverse=True)
    out: dict[str, Any] = {k: v[:MAX_DETAIL_ITEMS] for k, v in lists.items()}
    out["ranks_evaluated"] = len(ran)
    out["ranks_skipped"] = skipped
    return out
