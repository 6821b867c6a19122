"""The rules `ktrace check` runs on a many-rank store's FleetSummary (reduced per-rank tables, analysis.rank_reduce).

A rule runs there when its input is one the reduce gives exactly (LoadBalancing: the job's LoadBalance;
CommNotOverlapped: the per-rank temporal breakdown; StepOutlier: every rank's step spans; MaxInitializationTime:
the job phases); every other rule needs events the client never holds and is reported as skipped with
NEEDS_ONE_PROCESS, so the output says which rules ran.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

from ktrace.analysis.rank_reduce import FleetSummary
from ktrace.analysis.rules.base import Outcome, ParamValue, RuleResult, Skip
from ktrace.analysis.rules.config import RulesConfig
from ktrace.analysis.rules.engine import RulesReport, all_rules, evaluate_check
from ktrace.analysis.rules.sagemaker import max_init_outcome, step_outlier_outcome
from ktrace.analysis.rules.sagemaker_capacity import load_balancing_outcome
from ktrace.analysis.rules.timeline_gpu import comm_overlap_outcome

NEEDS_ONE_PROCESS = (
    "needs the single-process path (the whole trace in memory): run ktrace check without --workers/--cluster "
    "on a store of fewer than 16 ranks, or on a cut of it (ktrace export --ranks)"
)

FleetCheck = Callable[[FleetSummary, Mapping[str, ParamValue]], Outcome]


def _load_balancing(fleet: FleetSummary, p: Mapping[str, ParamValue]) -> Outcome:
    if fleet.load_balance is None:
        raise Skip("the trace has fewer than two ranks with GPU utilization")
    return load_balancing_outcome(fleet.load_balance, p)


def _comm_overlap(fleet: FleetSummary, p: Mapping[str, ParamValue]) -> Outcome:
    return comm_overlap_outcome(fleet.breakdown, p)


def _step_outlier(fleet: FleetSummary, p: Mapping[str, ParamValue]) -> Outcome:
    return step_outlier_outcome(fleet.steps, p)


def _max_init(fleet: FleetSummary, p: Mapping[str, ParamValue]) -> Outcome:
    return max_init_outcome(fleet.phases, p)


FLEET_CHECKS: dict[str, FleetCheck] = {
    "StepOutlier": _step_outlier,
    "MaxInitializationTime": _max_init,
    "LoadBalancing": _load_balancing,
    "CommNotOverlapped": _comm_overlap,
}
"""Rule name -> its check on a FleetSummary (the same outcome as on the whole trace)."""


def run_fleet_rules(fleet: FleetSummary, config: RulesConfig | None = None) -> RulesReport:
    """Every enabled rule, in report order: those of FLEET_CHECKS evaluated on `fleet`, the others skipped with
    NEEDS_ONE_PROCESS."""
    config = config or RulesConfig()
    results = []
    for rule in all_rules():
        if rule.name in config.disabled:
            continue
        check = FLEET_CHECKS.get(rule.name)
        if check is None:
            params = config.params_for(rule)
            results.append(
                RuleResult(rule.name, rule.family, rule.description, params, 0, 0, (), skipped=NEEDS_ONE_PROCESS)
            )
        else:
            results.append(evaluate_check(rule, config, partial(check, fleet)))
    return RulesReport(tuple(results))
