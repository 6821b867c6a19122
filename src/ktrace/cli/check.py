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
  ktrace check --follow run.ktrace                     while `ktrace run` records: each finding of the last
                                                       60 s once when it fires and once when it clears
  ktrace check --follow run.ktrace --window 10steps --json    the last 10 steps, as JSON lines
  ktrace check --follow run.ktrace --stall 600         also an error when no step began for 10 minutes

--follow reads the store every --every seconds (default 5) as `ktrace run` has published it, runs the rules on the
window (--window: the last 60 s recorded by default, or the last N steps; judged once the capture holds that much,
in this process at any rank count) and prints a line when a rule fires and
when it clears: `TIME FIRED|CLEARED SEVERITY RULE: message (window)`, or with --json one object per line
{"event": "fired"|"cleared", "rule", "severity", "message", "window": {"seconds"|"steps", "start_ns", "end_ns"}}. It ends
when the capture is finalized (exit 5 if a finding at --fail-on or above fired meanwhile, else 0) or on Ctrl-C
(exit 0). While the capture records it also tells StalledTraining (an error, as SageMaker Debugger's
StalledTrainingRule): no training step began, or without steps no kernel, operator, range or API call, for --stall
seconds of the clock (default 1800; 0: never) - a job that hangs while its counters go on. `ktrace run
--on-finding RULE=stop` follows the same way and ends the job when RULE fires (StalledTraining=stop included).

On a .ktrace store of 16 ranks or more (or with --workers/--cluster) every rule runs rank by rank
(ktrace.fleet): an "exact" rule on inputs reduced from every rank (the verdict one process gives), a "per rank"
rule on each rank's own trace, its findings named by their rank (`--list-rules` says which is which); the tally
line names the engine.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ktrace.cli.fleet_options import add_engine_arguments, fleet_result_of
from ktrace.cli.follow_rules import DEFAULT_WINDOW, EVENT_RULE_COLUMN, EVERY_S, STALL_HELP, STALL_S, WINDOW_HELP
from ktrace.cli.options import add_json_flag, add_no_ops_flag, add_trace_argument, open_trace, use_returning_allocators
from ktrace.cli.rules_options import add_rules_arguments, rules_config
from ktrace.model.errors import ExitCode, KtraceError

if TYPE_CHECKING:
    from ktrace.analysis.rules.config import RulesConfig
    from ktrace.analysis.rules.follow import FollowEvent


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
    live = parser.add_argument_group("following a capture while it records")
    live.add_argument(
        "--follow", action="store_true", help="judge a `ktrace run` store while it grows, until it is finalized"
    )
    live.add_argument("--window", default=DEFAULT_WINDOW, metavar="60s|Nsteps", help=WINDOW_HELP)
    live.add_argument(
        "--every", type=float, default=EVERY_S, metavar="S", help="seconds between two looks (default: 5)"
    )
    live.add_argument("--stall", type=float, default=STALL_S, metavar="S", help=STALL_HELP)


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


FOLD_INDENT = 8
"""A folded finding's next lines start under its rule name (after `SEVERITY `)."""


def folded(line: str, width: int | None, indent: int = FOLD_INDENT) -> str:
    """`line` folded at spaces to `width` columns, the next lines indented `indent` columns (under the rule);
    unchanged without a width (output to a pipe or file keeps one line per finding, for grep)."""
    import textwrap

    if width is None or len(line) <= width:
        return line
    return textwrap.fill(line, width, subsequent_indent=" " * indent, break_long_words=False, break_on_hyphens=False)


def terminal_width() -> int | None:
    """The terminal's width when stdout is one (COLUMNS wins, as for the summary), else None."""
    import shutil

    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def run(args: argparse.Namespace) -> int:
    """Evaluate the rules and print the findings."""
    use_returning_allocators(args.trace)
    from ktrace.analysis.rules.engine import run_rules
    from ktrace.presentation.rules_json import report_to_dict

    if args.list_rules:
        sys.stdout.write(list_rules())
        return 0
    if not args.trace:
        raise KtraceError("a TRACE is required (or --list-rules)", ExitCode.USAGE)
    config = rules_config(args)
    if args.follow:
        return follow(args, config)
    fleet = fleet_result_of(args, rules_config=config)
    if fleet is not None and fleet.rules is not None:
        report = fleet.rules
    else:
        from ktrace.cli.progress import progress_bar

        trace = open_trace(args.trace, with_ops=not args.no_ops)
        with progress_bar("checking"):
            report = run_rules(trace, config)
        _say_stop(trace.meta.notes)
    from ktrace.model.display_text import printable

    if args.json:
        sys.stdout.write(json.dumps(report_to_dict(report), indent=1, sort_keys=True, default=str))
        sys.stdout.write("\n")
    else:
        width = terminal_width()
        for f in report.findings:
            print(folded(finding_line(f), width))
        if args.verbose:
            for r in report.results:
                if not r.findings:
                    passed = f"{'SKIPPED' if r.skipped else 'OK':7} {r.rule}: {printable(r.skipped or 'did not fire')}"
                    print(folded(passed, width))
    fail = args.fail_on != "never" and report.count(args.fail_on) > 0
    n = {s: sum(1 for f in report.findings if f.severity == s) for s in ("error", "warning", "info")}
    print(
        f"{len(report.results)} rules: {n['error']} errors, {n['warning']} warnings, {n['info']} notes"
        + (f"; failing (--fail-on {args.fail_on})" if fail else "")
        + (f"; rank by rank on {fleet.engine}" if fleet is not None else ""),
        file=sys.stderr,
    )
    return int(ExitCode.FINDINGS) if fail else 0


def _say_stop(notes: Sequence[str]) -> None:
    """`stopped by RULE: message` on stderr when a rule stopped the recorded job (`ktrace run --on-finding`)."""
    from ktrace.analysis.rules.follow import stopped_by
    from ktrace.model.display_text import printable

    stop = stopped_by(notes)
    if stop is not None:
        print(f"ktrace check: the job was {printable(stop)}", file=sys.stderr)


def follow(args: argparse.Namespace, config: RulesConfig) -> int:
    """`check --follow`: print each finding of the window once when it fires and once when it clears."""
    from ktrace.analysis.rules.base import severity_rank
    from ktrace.cli.follow_rules import (
        WindowJudge,
        check_every,
        check_stall,
        event_json,
        event_line,
        follow_store,
        follow_window,
    )

    root = Path(args.trace)
    if not root.exists():
        raise KtraceError(f"{root}: no such .ktrace folder (--follow reads a `ktrace run` store)", ExitCode.NOT_FOUND)
    if not root.is_dir():
        raise KtraceError(f"{root}: --follow reads a `ktrace run` store (a .ktrace folder)", ExitCode.USAGE)
    if args.workers is not None or args.cluster:
        raise KtraceError("--follow judges the window in this process: drop --workers/--cluster", ExitCode.USAGE)
    judge = WindowJudge(root, follow_window(args.window), config, skip_ops=args.no_ops, stall_s=check_stall(args.stall))
    every = check_every(args.every, "--every")
    floor = severity_rank(args.fail_on) if args.fail_on != "never" else None
    failing = False
    width = terminal_width()

    def emit(event: FollowEvent) -> None:
        nonlocal failing
        print(event_json(event) if args.json else folded(event_line(event), width, EVENT_RULE_COLUMN), flush=True)
        failing = failing or (event.event == "fired" and floor is not None and severity_rank(event.severity) >= floor)

    print(
        f"ktrace check: following {args.trace}, judging the {judge.follower.window.label} every {every:g} s "
        "(Ctrl-C ends)",
        file=sys.stderr,
        flush=True,
    )
    try:
        ended = follow_store(judge, every, emit)
    except KeyboardInterrupt:
        print("ktrace check: stopped following (Ctrl-C)", file=sys.stderr)
        return 0
    _say_stop(judge.notes)
    standing = ", ".join(judge.follower.standing) or "none"
    print(
        f"ktrace check: {ended}; firing at the end: {standing}"
        + (f"; failing (--fail-on {args.fail_on})" if failing else ""),
        file=sys.stderr,
    )
    return int(ExitCode.FINDINGS) if failing else 0
