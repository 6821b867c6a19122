"""Every rule on the rank-by-rank path: rank_rule_part() on each rank's trace (map), reduce_rule_parts() (client).

Each rule says how it runs there (Rule.fleet_mode):

- "exact": each rank sends its small exact inputs (fleet_rules.ExactInputs) or nothing when the reduced Summary
  holds the input; the client runs the rule's check once on the job's inputs, so it reports what run_rules
  reports on the whole trace.
- "per rank": the rule runs on each rank's own trace in the worker; the client adds the results up: datapoints
  and triggered summed, a job-wide verdict (fired on K of N ranks, which) followed by the first ranks'
  findings in rank order, each named by its rank ("node/rankR: ..."). A threshold on a share, percentile or
  count is then judged per rank: the rule fires when it fires on some rank, and a condition that only the job's
  total would meet does not fire.

A RuleParts holds no frame of events: per-rank results (findings with at most max_evidence evidence rows each)
and tables that grow with ranks and kernel names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rules.base import Evidence, Finding, Rule
from ktrace.analysis.rules.config import RulesConfig
from ktrace.analysis.rules.engine import RulesReport, all_rules, run_rules
from ktrace.analysis.rules.fleet_rules import exact_inputs
from ktrace.analysis.rules.rank_rule_seeds import seed_rule_inputs
from ktrace.analysis.rules.rank_rules_fold import MAX_RANK_FINDINGS, NO_RANK, RuleFold, RuleParts, rank_label
from ktrace.analysis.summary import Summary
from ktrace.model.trace import Trace

__all__ = [
    "MAX_RANK_FINDINGS",
    "NO_RANK",
    "RuleFold",
    "RuleParts",
    "rank_label",
    "rank_rule_part",
    "rank_rule_parts",
    "reduce_rule_parts",
]


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


def rank_rule_parts(
    joined: TraceIndex, indexes: Sequence[TraceIndex], parts: Sequence[tuple[str, int]], config: RulesConfig | None
) -> tuple[RuleParts, ...]:
    """The RuleParts of each rank of a fleet task (rank_rule_part on each of `indexes`, the ranks' own traces'),
    their costliest inputs cut from `joined`, the index of the task's trace that joins them (rank_rule_seeds;
    `parts`: their (node, rank), in the joined trace's order)."""
    seed_rule_inputs(joined, indexes, parts)
    return tuple(rank_rule_part(ix.trace, config, index=ix) for ix in indexes)


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
    (model.store.read's meta.health; without them fleet_rules.merge_health rebuilds them from the ranks').
    A driver that folds the parts as they arrive uses rank_rules_fold.RuleFold (what this does) directly."""
    fold = RuleFold(config or RulesConfig())
    for part in parts:
        fold.add(part)
    return fold.finish(summary, job_health)
