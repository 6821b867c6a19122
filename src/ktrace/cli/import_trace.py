"""Convert a PyTorch-profiler (Kineto) JSON trace or an Nsight Systems SQLite export to a .ktrace folder.

SRC is a Kineto .json / .json.gz file, a folder of per-rank Kineto files (one multi-rank trace:
ranks from distributedInfo, else from names like worker3 / rank3), or an nsys .sqlite export.
Importing once makes every later command fast; `ktrace.open()` also reads SRC directly.
OUT appears only once it is complete; an existing OUT is replaced only with --force and only when it is a
.ktrace store (never SRC, never a folder holding anything else).
Secret-looking strings (tokens, keys, passwords in names, metadata, the environment, the command line) are
scrubbed on import; `ktrace info` shows how many values were scrubbed and what was dropped or orphaned (trace
health).

examples:
  ktrace import worker0.pt.trace.json.gz -o run.ktrace
  ktrace import ./profiler_logs/ -o job.ktrace            one trace from all per-rank files
  ktrace import train.json.gz -o run.ktrace --no-ops      lean: skip cpu_op and python_function
  ktrace import report.sqlite -o run.ktrace               an Nsight Systems export
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ktrace.model.errors import ExitCode, KtraceError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `ktrace import`."""
    parser.add_argument(
        "src", metavar="SRC", help="Kineto .json/.json.gz file or folder of per-rank files, or nsys .sqlite"
    )
    parser.add_argument("-o", "--output", metavar="OUT.ktrace", required=True, help="the .ktrace folder to write")
    parser.add_argument(
        "--no-ops",
        action="store_true",
        help="Kineto: skip cpu_op and python_function events (framework operators and Python frames, "
        "nn.Module frames among them; imported by default): a faster import and a smaller store, without "
        "the operator and module views",
    )
    parser.add_argument("--with-ops", action="store_true", help=argparse.SUPPRESS)  # the default since issue #15
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace OUT if it exists and is a .ktrace store (anything else is never replaced)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")


def run(args: argparse.Namespace) -> int:
    """Import SRC and write OUT; print a one-line summary (and the health counts that matter)."""
    from ktrace.cli.progress import progress_bar
    from ktrace.importers import detect, load
    from ktrace.model.outputs import STORE, Output
    from ktrace.model.store import write

    src, out = Path(args.src), Path(args.output)
    kind = detect(src)
    if kind == "ktrace":
        raise KtraceError(f"{src} is already a .ktrace store", ExitCode.USAGE)
    if args.no_ops and args.with_ops:
        raise KtraceError("--no-ops and --with-ops contradict each other", ExitCode.USAGE)
    options = {"with_ops": False} if args.no_ops and kind == "kineto" else {}
    # Checked and locked before the (long) import; written to a temporary sibling and renamed into place whole:
    # Ctrl-C or a full disk leave OUT as it was.
    output = Output(out, STORE, force=args.force, inputs=[src])
    with output.preparing(), progress_bar(f"importing {src.name}", enabled=False if args.no_progress else None) as bar:
        trace = load(src, progress=bar, **options)
    with output as staged:
        write(trace, staged.staging)
    if not args.quiet:
        _print_summary(trace, out)
    return int(ExitCode.OK)


def _print_summary(trace: object, out: Path) -> None:
    from ktrace.model.display_text import printable

    counts = trace.counts()  # type: ignore[attr-defined]
    meta = trace.meta  # type: ignore[attr-defined]
    ranks = len(trace.ranks)  # type: ignore[attr-defined]
    rows = ", ".join(
        f"{counts[k]:,} {k}" for k in ("kernels", "memory", "syncs", "api", "ranges", "ops") if counts.get(k)
    )
    print(f"wrote {out} ({meta.source}, {ranks} rank{'s' if ranks != 1 else ''}): {rows or 'no rows'}")
    health = {k: v for k, v in meta.health.items() if v}
    if health:
        print("health: " + printable(", ".join(f"{k}={v:,}" for k, v in sorted(health.items()))))
    for note in meta.notes:
        print(f"note: {printable(note)}", file=sys.stderr)
