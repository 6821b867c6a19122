"""Run the rules over a trace: `run_rules(trace, config) -> RulesReport`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rules.base import Finding, Outcome, ParamValue, Rule, RuleResult, Skip, severity_rank
from ktrace.analysis.rules.config import RulesConfig
from ktrace.model.errors import ProgressFn, no_progress
from ktrace.model.trace import Trace

RULE_ORDER: tuple[str, ...] = (
    "StepOutlier",
    "LowGPUUtilization",
    "CPUBottleneck",
    "IOBottleneck",
    "BatchSize",
    "Dataloader",
    "GPUMemoryIncrease",
    "LoadBalancing",
    "MaxInitializationTime",
    "PageableMemcpy",
    "SyncMemcpy",
    "ExcessiveSync",
    "MemoryGrowth",
    "GPUGaps",
    "LaunchBoundKernels",
    "LaunchBoundOperators",
    "HighLaunchLatency",
    "FP32Matmul",
    "CommNotOverlapped",
    "CPUBoundCriticalPath",
    "RooflineGap",
    "LowOccupancy",
    "DroppedRecords",
    "OrphanRecords",
    "ClockProblems",
)
"""Every built-in rule, in report order: SageMaker Debugger's, timeline rules, hardware rules, trace health."""


def all_rules() -> tuple[Rule, ...]:
    """Every built-in rule, in report order: SageMaker Debugger's, then timeline rules, hardware rules, trace health."""
    from ktrace.analysis.rules import (
        critical_path,
        hardware,
        health,
        memory,
        sagemaker,
        sagemaker_capacity,
        sagemaker_counters,
        timeline,
        timeline_gpu,
        timeline_latency,
        timeline_ops,
    )

    found = {
        r.name: r
        for m in (
            sagemaker,
            sagemaker_counters,
            sagemaker_capacity,
            timeline,
            memory,
            timeline_gpu,
            timeline_latency,
            critical_path,
            timeline_ops,
            hardware,
            health,
        )
        for r in m.RULES
    }
    return tuple(found[name] for name in RULE_ORDER)


def rule_by_name(name: str) -> Rule:
    """The built-in rule called `name` (case-insensitive); KeyError if there is none."""
    for rule in all_rules():
        if rule.name.lower() == name.lower():
            return rule
    raise KeyError(name)


@dataclass(frozen=True)
class RulesReport:
    """Results of every rule that ran, in rule order."""

    results: tuple[RuleResult, ...]

    @property
    def findings(self) -> tuple[Finding, ...]:
        """All findings, most severe first, then in rule order."""
        ordered = [f for r in self.results for f in r.findings]
        return tuple(sorted(ordered, key=lambda f: -severity_rank(f.severity)))

    def worst(self) -> str | None:
        """The highest severity among the findings, or None when nothing fired."""
        found = self.findings
        return found[0].severity if found else None

    def count(self, at_least: str = "info") -> int:
        """Number of findings with severity >= `at_least`."""
        floor = severity_rank(at_least)
        return sum(1 for f in self.findings if severity_rank(f.severity) >= floor)

    def result(self, rule: str) -> RuleResult:
        """The result of the rule called `rule`; KeyError if it did not run."""
        for r in self.results:
            if r.rule == rule:
                return r
        raise KeyError(rule)


def _finding(rule: Rule, outcome: Outcome, severity: str) -> Finding:
    return Finding(
        rule=rule.name,
        severity=outcome.severity or severity,  # type: ignore[arg-type]
        message=outcome.message,
        recommendation=rule.recommendation,
        evidence=outcome.evidence,
        datapoints=outcome.datapoints,
        triggered=outcome.triggered,
    )


def evaluate(rule: Rule, trace: Trace, index: TraceIndex, config: RulesConfig) -> RuleResult:
    """Run one rule on (trace, index); a rule whose data is absent comes back `skipped` with the reason. A rule
    measured against the GPU's peak gets the configuration's gpu_peaks rows (Rule.peaks_check)."""
    peaks_check = rule.peaks_check
    if peaks_check is not None:
        return evaluate_check(rule, config, lambda params: peaks_check(trace, index, params, config.gpu_peaks))
    return evaluate_check(rule, config, lambda params: rule.check(trace, index, params))


def evaluate_check(rule: Rule, config: RulesConfig, check: Callable[[Mapping[str, ParamValue]], Outcome]) -> RuleResult:
    """`rule`'s result from `check(params)`: its own check on a trace, or one on a fleet's reduced tables."""
    params = config.params_for(rule)
    try:
        outcome = check(params)
    except Skip as why:
        return RuleResult(rule.name, rule.family, rule.description, params, 0, 0, (), skipped=str(why))
    severity = config.severity.get(rule.name, rule.severity)
    outcomes = [outcome, *outcome.extra]
    findings = tuple(_finding(rule, o, severity) for o in outcomes if o.fired)
    if severity != rule.severity:  # a configured severity wins over the check's own escalation
        findings = tuple(
            Finding(
                f.rule,
                severity,  # type: ignore[arg-type]
                f.message,
                f.recommendation,
                f.evidence,
                f.datapoints,
                f.triggered,
            )
            for f in findings
        )
    datapoints = sum(o.datapoints for o in outcomes)
    triggered = sum(o.triggered for o in outcomes)
    return RuleResult(
        rule.name, rule.family, rule.description, params, datapoints, triggered, findings, details=outcome.details
    )


def run_rules(
    trace: Trace,
    config: RulesConfig | None = None,
    *,
    rules: Sequence[Rule] | None = None,
    progress: ProgressFn = no_progress,
    index: TraceIndex | None = None,
) -> RulesReport:
    """Evaluate the rules on `trace`.

    Args:
        trace: the trace to judge.
        config: thresholds, disabled rules and severities; None means every rule with its defaults.
        rules: the rules to consider (default: all_rules()).
        progress: called with (rules done, rules total).
        index: the trace's TraceIndex (the report and the TUI share their analysis results with the rules).

    Returns:
        A RulesReport with one RuleResult per enabled rule.
    """
    config = config or RulesConfig()
    chosen = [r for r in (rules if rules is not None else all_rules()) if r.name not in config.disabled]
    ix = TraceIndex.of(trace, index)
    results = []
    for i, rule in enumerate(chosen):
        results.append(evaluate(rule, trace, ix, config))
        progress(i + 1, len(chosen))
    return RulesReport(tuple(results))
