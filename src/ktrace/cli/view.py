"""Browse a trace in the terminal: host/device tree, timeline, kernel table and dashboard (Textual TUI).

The window opens at once; the trace is read and indexed in the background. Press ? in the app for every key,
ctrl+p for the command palette, q to quit.

examples:
  ktrace view run.ktrace
  ktrace view worker0.pt.trace.json.gz
  ktrace view profile.sqlite --no-analyses     timeline only, skip the dashboard's analyses
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ktrace.cli.options import add_no_ops_flag, add_trace_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `ktrace view`."""
    add_trace_argument(parser)
    parser.add_argument(
        "--no-analyses",
        action="store_true",
        help="do not compute the dashboard (summary and rules); faster on huge traces",
    )
    add_no_ops_flag(parser)


def run(args: argparse.Namespace) -> int:
    """Check the path, then run the app until the user quits; the app's exit code is returned."""
    from ktrace.importers import detect
    from ktrace.model.errors import ExitCode, KtraceError

    path = Path(args.trace)
    detect(path)  # raises a one-line TraceFormatError for a missing or unreadable path, before the screen opens
    if not sys.stdout.isatty():
        raise KtraceError(
            "ktrace view needs a terminal (use `ktrace summary` or `ktrace info` in scripts)", ExitCode.USAGE
        )
    from ktrace.tui.app import make_app

    app = make_app(path, analyses=not args.no_analyses, with_ops=not args.no_ops)
    app.run()
    return int(app.return_code or 0)
