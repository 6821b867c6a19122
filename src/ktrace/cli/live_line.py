"""The line a reading verb prints on a capture `ktrace run` is still recording: "ktrace VERB: live, N s recorded".

Printed on stderr before the verb reads (stdout stays the verb's: tables, JSON); the trace's notes say it too.
"""

from __future__ import annotations

import argparse
import os
import sys

TRACE_ARGUMENTS = ("trace", "a", "b")
"""The verbs' names of their TRACE arguments (diff has two)."""


def say_if_live(verb: str, args: argparse.Namespace) -> None:
    """Print one line per TRACE argument of `args` that is a live capture (none for anything else)."""
    paths = [p for p in (getattr(args, name, None) for name in TRACE_ARGUMENTS) if isinstance(p, str) and p]
    if not any(os.path.isdir(p) for p in paths):
        return  # a capture is a folder: a trace file needs no look (nor model.live's import)
    from ktrace.model.live import live_capture_of, live_status

    for path in paths:
        try:
            status, capture = live_status(path), live_capture_of(path)
        except OSError:
            continue  # the verb says what is wrong with the path
        if status is not None:
            print(
                f"ktrace {verb}: {path}: {status.line} (`ktrace run` is still recording: this is what it has "
                "published so far)",
                file=sys.stderr,
            )
        elif capture is not None:  # `ktrace run --force -o PATH` records the replacement beside it
            now = live_status(capture)
            print(
                f"ktrace {verb}: {path}: the previous trace; `ktrace run --force` is recording its replacement in "
                f"{capture} ({now.line if now else 'live'})",
                file=sys.stderr,
            )
