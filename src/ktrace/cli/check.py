"""Run the rules on a trace and exit non-zero when a finding reaches --fail-on (for CI).

Prints one line per finding: `SEVERITY RULE: message`, then a one-line tally on stderr. Exit codes:
0 no finding at or above --fail-on, 5 otherwise (see `ktrace --help` for the others).

examples:
  ktrace check run.ktrace                              fail on errors only
  ktrace check run.ktrace --fail-on warning            fail on warnings too
  ktrace check run.ktrace --rules rules.toml --set StepOutlier.n_outliers=3
  ktrace check --list-rules                            every rule with its parameters and defaults
  ktrace check run.ktrace --json                       findings as JSON
  ktrace check job.ktrace --workers 8                  a many-rank store, rank by rank

On a .ktrace store of 16 ranks or more (or with --workers/--cluster) every rule runs rank by rank
(ktrace.fleet): an "exact" rule on inputs reduced from every rank (the verdict one process gives), a "per rank"
rule on each rank's own trace, its findings named by their rank (`--list-rules` says which is which); the tally
line names the engine.
"""

from __future__ import annotations

import argparse
import json
import sys

from ktrace.cli.fleet_options import add_engine_arguments, fleet_result_of
from ktrace.cli.options import add_json_flag, add_no_ops_flag, add_trace_argument, open_trace
from ktrace.cli.rules_options import add_rules_arguments, rules_config
from ktrace.model.errors import ExitCode, KtraceError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `ktrace check`."""
    add_trace_argument(parser, optional_with="--list-rules")
    add_no_ops_flag(parser)
    add_rules_arguments(parser)
    parser.add_argument(
        "--fail-on",
        choices=("info", "warning", "error", "never"),
        default="error",
        help="lowest severity that makes the exit code non-zero (default: error)",
    )
    add_json_flag(parser, "the findings as JSON")
    parser.add_argument("--list-rules", action="store_true", help="list every rule with its parameters and exit")
    parser.add_argument("--verbose", "-v", action="store_true", help="also print rules that passed or were skipped")
    add_engine_arguments(parser)


def list_rules() -> str:
    """Every rule, its description and its documented parameters with defaults."""
    from ktrace.analysis.rules.engine import all_rules

    lines = []
    for rule in all_rules():
        lines.append(
            f"{rule.name} [{rule.family}, {rule.severity}; rank by rank: {rule.fleet_mode}]: {rule.description}"
        )
        lines.extend(f"    {p.name} = {p.default!r}  # {p.doc}" for p in rule.params)
    return "\n".join(lines) + "\n"


def finding_line(f: object) -> str:
    """`SEVERITY RULE: message` on one line."""
    from ktrace.model.display_text import printable

    message = printable(" ".join(str(f.message).split()))  # type: ignore[attr-defined]
    return f"{f.severity.upper():7} {f.rule}: {message}"  # type: ignore[attr-defined]


def run(args: argparse.Namespace) -> int:
    """Evaluate the rules and print the findings."""
    from ktrace.analysis.rules.engine import run_rules
    from ktrace.presentation.rules_json import report_to_dict

    if args.list_rules:
        sys.stdout.write(list_rules())
        return 0
    if not args.trace:
        raise KtraceError("a TRACE is required (or --list-rules)", ExitCode.USAGE)
    config = rules_config(args)
    fleet = fleet_result_of(args, rules_config=config)
    if fleet is not None and fleet.rules is not None:
        report = fleet.rules
    else:
        from ktrace.cli.progress import progress_bar

        trace = open_trace(args.trace, with_ops=not args.no_ops)
        with progress_bar("checking"):
            report = run_rules(trace, config)
    from ktrace.model.display_text import printable

    if args.json:
        json.dump(report_to_dict(report), sys.stdout, indent=1, sort_keys=True, default=str)
        sys.stdout.write("\n")
    else:
        for f in report.findings:
            print(finding_line(f))
        if args.verbose:
            for r in report.results:
                if not r.findings:
                    print(f"{'SKIPPED' if r.skipped else 'OK':7} {r.rule}: {printable(r.skipped or 'did not fire')}")
    fail = args.fail_on != "never" and report.count(args.fail_on) > 0
    n = {s: sum(1 for f in report.findings if f.severity == s) for s in ("error", "warning", "info")}
    print(
        f"{len(report.results)} rules: {n['error']} errors, {n['warning']} warnings, {n['info']} notes"
        + (f"; failing (--fail-on {args.fail_on})" if fail else "")
        + (f"; rank by rank on {fleet.engine}" if fleet is not None else ""),
        file=sys.stderr,
    )
    return int(ExitCode.FINDINGS) if fail else 0
