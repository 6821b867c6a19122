"""Where the time went: the dashboard numbers of a trace in the terminal (or as stable JSON).

Shows the job phases (initialization / training loop / finalization), GPU and CPU active shares,
busy and idle time per GPU and the causes of idle time, the top kernels by time and by launch count,
launch-to-run latency percentiles, step times, the kernel precision, GPU activity and memory-operation
distributions, counter statistics, for multi-rank jobs the load balance, and the critical path of the
median step (what it is made of, what is on it, and what a 2x faster kernel or a removed sync would gain).

examples:
  ktrace summary run.ktrace
  ktrace summary worker0.pt.trace.json.gz --top 25
  ktrace summary run.ktrace --steps-pattern '^train_step_\\d+$'
  ktrace summary run.ktrace --json | jq '.precision'
  ktrace summary run.ktrace --annotation backward --annotation 'forward|optimizer'
  ktrace summary resnet.pt.trace.json.gz --by-shape   operators per (name, input shapes)
  ktrace summary job.ktrace --workers 8                 rank by rank in 8 processes
  ktrace summary job.ktrace --cluster tcp://sched:8786  rank by rank on a Dask cluster
  ktrace summary run.ktrace --rules rules.toml          the roofline with the file's gpu_peaks

A .ktrace store of 16 ranks or more (or any store with --workers/--cluster) is summarized rank by rank, for
speed and memory only: each worker opens only its own partitions and the client merges small per-rank tables
(ktrace.fleet). It gives the same summary, JSON keys and all: counts, sums, means and maxima equal the
single-process ones; percentiles come from merged log-bin histograms, within 0.27 %; the job's critical path is
one process's (each rank's graph of the chosen step, joined at the collectives on the client), and so is the
memory timeline (each device's from its rank; the series behind its plot is thinned per device).

JSON keys are sorted and floats rounded to 6 decimals, so the output diffs cleanly between runs.
Durations are integer ns, shares are 0-1, *_pct are percentages.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import TYPE_CHECKING, Any

from ktrace.cli.fleet_options import add_engine_arguments, fleet_result_of
from ktrace.cli.options import (
    add_json_flag,
    add_no_ops_flag,
    add_trace_argument,
    open_trace,
    terminal_console,
    use_returning_allocators,
)
from ktrace.cli.rules_options import add_rules_file_argument, rules_config
from ktrace.model.errors import ExitCode, KtraceError

if TYPE_CHECKING:
    from ktrace.analysis.summary import Summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `ktrace summary`."""
    add_trace_argument(parser)
    add_no_ops_flag(parser)
    add_json_flag(parser)
    parser.add_argument(
        "--top",
        type=int,
        default=15,
        metavar="N",
        help="kernels listed by time and by count; the rest is one 'other' row (default 15)",
    )
    parser.add_argument(
        "--steps-pattern",
        metavar="REGEX",
        default=None,
        help="regex of the range names that are training steps (default: ProfilerStep#N)",
    )
    parser.add_argument(
        "--annotation",
        action="append",
        default=[],
        metavar="REGEX",
        help="also histogram the durations of ranges matching REGEX (repeatable)",
    )
    parser.add_argument(
        "--by-shape",
        action="store_true",
        help="also list the top operators per (name, input shapes) (Kineto record_shapes=True); the JSON has "
        "operators.by_shape whenever the trace records shapes",
    )
    add_rules_file_argument(
        parser,
        'a rules TOML file (as check and report take) whose [gpu_peaks."NAME"] rows add a GPU to the roofline\'s peak '
        "table or override one of its rows; the summary runs no rules",
    )
    add_engine_arguments(parser)


def _check_regex(value: str | None, option: str) -> None:
    if value is None:
        return
    try:
        re.compile(value)
    except re.error as exc:
        raise KtraceError(f"{option}: not a valid regex: {exc}", ExitCode.USAGE) from None


def run(args: argparse.Namespace) -> int:
    """Summarize the trace and print tables or JSON."""
    use_returning_allocators(args.trace)
    if args.top < 1:
        raise KtraceError("--top must be at least 1", ExitCode.USAGE)
    _check_regex(args.steps_pattern, "--steps-pattern")
    for pattern in args.annotation:
        _check_regex(pattern, "--annotation")
    options = _summary_options(args)
    fleet = fleet_result_of(args, **options, also_import=(_PAGE,))
    summary = fleet.summary if fleet is not None else _one_process(args, options)
    from ktrace.presentation.summary_page import summary_page

    page = summary_page(summary, by_shape=args.by_shape)
    if args.json:  # the document the page stands for: summary_to_dict
        sys.stdout.write(json.dumps(dict(page.document), indent=1, sort_keys=True))  # one write, not one a token
        sys.stdout.write("\n")
        return 0
    from ktrace.report.terminal import render_page

    render_page(page, terminal_console())
    return 0


_PAGE = "ktrace.presentation.summary_page"
"""What lays the summary out (imported while the rank-by-rank path's workers start)."""


def _summary_options(args: argparse.Namespace) -> dict[str, Any]:
    """What summarize and the rank-by-rank summary both take: --top, --steps-pattern, --annotation, --by-shape and
    the --rules file's gpu_peaks."""
    return {
        "top": args.top,
        "steps_pattern": args.steps_pattern,
        "annotations": tuple(args.annotation),
        "by_shape": args.by_shape,
        "gpu_peaks": rules_config(args).gpu_peaks if args.rules else None,
    }


def _one_process(args: argparse.Namespace, options: dict[str, Any]) -> Summary:
    from ktrace.analysis.summary import summarize
    from ktrace.cli.progress import progress_bar

    trace = open_trace(args.trace, with_ops=not args.no_ops)
    with progress_bar("analysing"):
        return summarize(trace, **options)
