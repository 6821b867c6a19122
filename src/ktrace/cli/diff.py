"""Compare two traces (A = baseline, B = candidate): step time, kernel time, the kernels that changed most, GPU
memory where both traces have a memory timeline (peak allocated/reserved bytes per device, the allocating
operators that changed most) and the rules that fire. Exits 5 on a regression: mean step time (or total kernel time without steps) up by more
than --threshold %, or a rule newly firing in B at --fail-on or above.

examples:
  ktrace diff baseline.ktrace candidate.ktrace
  ktrace diff a.pt.trace.json.gz b.pt.trace.json.gz --threshold 3 --fail-on warning
  ktrace diff a.ktrace b.ktrace --json > diff.json
  ktrace diff a.ktrace b.ktrace --markdown > diff.md
"""

from __future__ import annotations

import argparse
import json
import sys

from ktrace.cli.options import add_trace_argument, open_trace
from ktrace.cli.rules_options import add_rules_arguments, rules_config
from ktrace.model.errors import ExitCode, KtraceError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `ktrace diff`."""
    add_trace_argument(parser, "a")
    add_trace_argument(parser, "b")
    parser.add_argument(
        "--threshold",
        type=float,
        default=5.0,
        help="regression when step (or kernel) time grows by more than this %% (default 5)",
    )
    parser.add_argument(
        "--fail-on",
        choices=("info", "warning", "error", "never"),
        default="error",
        help="a rule newly firing at this severity or above is a regression (default: error)",
    )
    parser.add_argument("--top", type=int, default=15, help="kernels listed (default 15)")
    parser.add_argument("--json", action="store_true", help="print the diff as JSON")
    parser.add_argument("--markdown", action="store_true", help="print the diff as Markdown (for a PR comment)")
    add_rules_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Compare and print; exit 5 on a regression."""
    from ktrace.report.diff_report import build_diff, diff_document, render_diff_markdown, render_diff_terminal

    if args.threshold < 0:
        raise KtraceError("--threshold must be >= 0", ExitCode.USAGE)
    if args.top < 1:
        raise KtraceError("--top must be at least 1", ExitCode.USAGE)
    config = rules_config(args)
    from ktrace.cli.progress import progress_bar

    a, b = open_trace(args.a), open_trace(args.b)
    with progress_bar("comparing"):
        diff = build_diff(a, b, threshold_pct=args.threshold, top=args.top, config=config, fail_on=args.fail_on)
    if args.json:
        sys.stdout.write(json.dumps(diff_document(diff), indent=1, sort_keys=True, default=str))
        sys.stdout.write("\n")
    elif args.markdown:
        sys.stdout.write(render_diff_markdown(diff))
    else:
        from rich.console import Console

        render_diff_terminal(diff, Console())
    return int(ExitCode.FINDINGS) if diff.regression else 0
