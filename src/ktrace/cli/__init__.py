"""The `ktrace` command: verbs are listed here and each verb's module is imported only when it runs.

`ktrace --help` imports nothing heavy (no polars, pyarrow, numba, textual or cupti): a test checks it.
Each verb module defines `add_arguments(parser)` and `run(args) -> int`.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import sys
import textwrap
from collections.abc import Sequence

VERBS: dict[str, tuple[str, str]] = {
    "run": ("ktrace.cli.run", "record a command: kernels, launches, memory ops, syncs, NVTX, counters"),
    "import": ("ktrace.cli.import_trace", "convert a Kineto JSON or nsys SQLite trace to a .ktrace folder"),
    "info": ("ktrace.cli.info", "what a trace holds: source, span, ranks, devices, rows per table, health"),
    "summary": ("ktrace.cli.summary", "where the time went: the dashboard numbers in the terminal"),
    "report": ("ktrace.cli.report", "a self-contained HTML (or Markdown/JSON) profiling report with rules"),
    "check": ("ktrace.cli.check", "run the rules; exit non-zero on findings (for CI)"),
    "diff": ("ktrace.cli.diff", "compare two traces: steps, top kernels, rules"),
    "export": ("ktrace.cli.export", "write Perfetto, Chrome JSON, Parquet or CSV"),
    "view": ("ktrace.cli.view", "browse a trace in the terminal (Textual TUI)"),
    "ctl": ("ktrace.cli.ctl", "change what a running capture records: --start, --stop, --steps A:B"),
}

ANALYSIS_EXTRA = frozenset({"numba", "llvmlite", "plotly", "textual", "perfetto", "google"})
"""Top-level modules of the `analysis` extra (pyproject.toml; google is protobuf's): a capture-only install lacks
them, and a verb that needs one exits 6 with a one-line error. (isal, also in the extra, is never required.)"""

EPILOG = """\
A TRACE is a .ktrace folder, a PyTorch-profiler (Kineto) .json/.json.gz file or folder of per-rank
files, or an Nsight Systems .sqlite export.

examples:
  ktrace run -o run.ktrace -- python train.py     record a training job
  ktrace summary run.ktrace                       where the time went
  ktrace view worker0.pt.trace.json.gz            browse a PyTorch profiler trace
  ktrace report run.ktrace -o report.html         profiling report with rule verdicts
  ktrace export run.ktrace -f perfetto -o run.pftrace   open in ui.perfetto.dev

Run `ktrace VERB --help` for a verb's options.
"""


def _version() -> str:
    from ktrace import __version__

    return __version__


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written (examples, lists), but a prose paragraph (lines not indented, up to a
    blank line or a line ending in ':') with a line wider than the terminal is re-filled to it, so `--help` on an
    80-column terminal breaks between words instead of wherever the terminal cuts."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out: list[str] = []
        paragraph: list[str] = []

        def flush() -> None:
            if any(len(indent + line) > width for line in paragraph):
                out.extend(textwrap.wrap(" ".join(paragraph), width, initial_indent=indent, subsequent_indent=indent))
            else:
                out.extend(indent + line for line in paragraph)
            paragraph.clear()

        for line in text.splitlines():
            if not line.strip() or line[0].isspace():
                flush()
                out.append(indent + line if line.strip() else "")
                continue
            paragraph.append(line)
            if line.endswith(":"):
                flush()
        flush()
        return "\n".join(out)


def top_parser() -> argparse.ArgumentParser:
    """The top-level parser: lists verbs without importing them."""
    parser = argparse.ArgumentParser(
        prog="ktrace", description="GPU kernel-trace timeline analyzer.", epilog=EPILOG, formatter_class=HelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"ktrace {_version()}")
    sub = parser.add_subparsers(title="verbs", dest="verb", metavar="VERB")
    for name, (_, help_text) in VERBS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def verb_parser(verb: str) -> tuple[argparse.ArgumentParser, object]:
    """The parser of one verb, with its module (imported here, lazily)."""
    module_name, help_text = VERBS[verb]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(
        prog=f"ktrace {verb}", description=(module.__doc__ or help_text).strip(), formatter_class=HelpFormatter
    )
    module.add_arguments(parser)
    return parser, module


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (see ktrace.model.errors.ExitCode)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["help"] and len(args) > 1 and args[1] in VERBS:
        args = [args[1], "--help"]
    if not args or args[0] in ("-h", "--help", "help"):
        top_parser().print_help()
        return 0
    if args[0] == "--version":
        print(f"ktrace {_version()}")
        return 0
    if args[0].startswith("-"):
        top_parser().error(f"unknown option {args[0]!r}; options go after the verb (ktrace VERB --help)")
    verb = args[0]
    if verb not in VERBS:
        matches = [v for v in VERBS if v.startswith(verb)]
        if len(matches) != 1:
            top_parser().error(f"unknown verb {verb!r} (choose from {', '.join(VERBS)})")
        verb = matches[0]
    return _run_verb(verb, args[1:])


SHORT_VERBS = frozenset({"import", "info", "summary", "report", "check", "diff", "export"})
"""Verbs that read, analyse, write and exit: they run with fewer full garbage collections (cli.options'
fewer_collections); `run`, `view`, `ctl` and any `--follow` keep Python's default, as they may run for hours."""


def short_command_collections(verb: str, rest: list[str]) -> contextlib.AbstractContextManager[None]:
    """cli.options.fewer_collections for a SHORT_VERBS verb (not followed), else nothing."""
    if verb not in SHORT_VERBS or any(len(a) > 3 and "--follow".startswith(a) for a in rest):  # (abbreviated too)
        return contextlib.nullcontext()
    from ktrace.cli.options import fewer_collections

    return fewer_collections()


def _run_verb(verb: str, rest: list[str]) -> int:
    from ktrace.model.errors import ExitCode, KtraceError

    try:
        with short_command_collections(verb, rest):
            parser, module = verb_parser(verb)
            ns = parser.parse_args(rest)
            from ktrace.cli.live_line import say_if_live

            say_if_live(verb, ns)
            code = module.run(ns)  # type: ignore[attr-defined]
        sys.stdout.flush()  # a closed pipe (`ktrace summary | head`) or a full disk shows here, not at exit
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing not in ANALYSIS_EXTRA:
            raise
        print(
            f"ktrace {verb}: error: needs {missing}, which this install lacks "
            "(a capture-only install): pip install 'ktrace[analysis]'",
            file=sys.stderr,
        )
        return int(ExitCode.MISSING_DEPENDENCY)
    except KtraceError as exc:
        from ktrace.model.display_text import printable

        print(f"ktrace {verb}: error: {printable(str(exc))}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print(f"ktrace {verb}: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:  # the reader went away (`| head`): end quietly, like Unix tools
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG):
            raise
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        where = exc.filename or "standard output"
        print(f"ktrace {verb}: error: cannot write {where}: {exc.strerror}", file=sys.stderr)
        return int(ExitCode.FAILURE)
    return int(code or 0)
