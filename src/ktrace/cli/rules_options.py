"""Options shared by the verbs that run rules (report, check, diff): --rules FILE and --set RULE.PARAM=VALUE; `ktrace
summary` takes --rules alone, for its [gpu_peaks."NAME"] rows."""

from __future__ import annotations

import argparse
from typing import Any

RULES_HELP = (
    "TOML file of rule thresholds ([StepOutlier] stddev = 5, disable = [...]) and GPU peaks "
    '([gpu_peaks."H100"] bf16 = 700); see `ktrace check --list-rules`'
)


def add_rules_file_argument(parser: argparse.ArgumentParser, help_text: str = RULES_HELP) -> None:
    """--rules FILE."""
    parser.add_argument("--rules", metavar="FILE", help=help_text)


def add_rules_arguments(parser: argparse.ArgumentParser) -> None:
    """--rules FILE and repeated --set RULE.PARAM=VALUE."""
    add_rules_file_argument(parser)
    parser.add_argument(
        "--set",
        metavar="RULE.PARAM=VALUE",
        action="append",
        default=[],
        dest="set_params",
        help="override one rule parameter, e.g. --set GPUGaps.gap_ms=50 (repeatable; also "
        "RULE.severity=error and RULE.enabled=false)",
    )


def rules_config(args: argparse.Namespace) -> Any:
    """The RulesConfig named by --rules and --set (a verb without --set: the file's alone)."""
    from ktrace.analysis.rules.config import RulesConfig, apply_overrides, load_config
    from ktrace.analysis.rules.engine import all_rules

    rules = all_rules()
    config = load_config(args.rules, rules) if args.rules else RulesConfig()
    return apply_overrides(config, getattr(args, "set_params", []), rules)
