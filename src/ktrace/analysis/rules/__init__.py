"""Rules: one module per rule family; each rule returns Findings with evidence."""

from __future__ import annotations

from ktrace.analysis.rules.base import SEVERITIES, Evidence, Finding, Param, Rule, RuleResult
from ktrace.analysis.rules.config import RulesConfig, apply_overrides, load_config
from ktrace.analysis.rules.engine import RULE_ORDER, RulesReport, all_rules, rule_by_name, run_rules

__all__ = [
    "RULE_ORDER",
    "SEVERITIES",
    "Evidence",
    "Finding",
    "Param",
    "Rule",
    "RuleResult",
    "RulesConfig",
    "RulesReport",
    "all_rules",
    "apply_overrides",
    "load_config",
    "rule_by_name",
    "run_rules",
]
