"""Options shared by several verbs, defined once."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ktrace.model.trace import Trace


def add_trace_argument(parser: argparse.ArgumentParser, name: str = "trace", *, optional_with: str = "") -> None:
    """The positional TRACE argument every reading verb takes (optional when `optional_with` names the
    option that makes it unneeded)."""
    help_text = ("a .ktrace folder, a Kineto .json/.json.gz file or folder of per-rank files, "
                 "or an nsys .sqlite export")
    if optional_with:
        parser.add_argument(name, metavar=name.upper(), nargs="?", help=f"{help_text} (not needed with {optional_with})")
    else:
        parser.add_argument(name, metavar=name.upper(), help=help_text)


def add_json_flag(parser: argparse.ArgumentParser, what: str = "stable JSON instead of tables") -> None:
    """--json: machine-readable output on stdout."""
    parser.add_argument("--json", action="store_true", help=f"print {what}")


def open_trace(path: str, *, progress: bool = True) -> Trace:
    """Open a trace for a CLI verb, with a progress bar while importing foreign formats."""
    from ktrace.cli.progress import progress_bar
    from ktrace.importers import load

    with progress_bar(f"reading {path}", enabled=None if progress else False) as bar:
        return load(path, progress=bar)
