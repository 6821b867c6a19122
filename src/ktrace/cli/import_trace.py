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
  ktrace import ./ranks/ -o job.ktrace --workers 8        8 ranks at a time, one partition per rank
  ktrace import ./ranks/ -o job.ktrace --cluster tcp://sched:8786   on a Dask cluster (pip install 'ktrace[dask]')

One Kineto file is written as it is read, its tables in chunks: memory stays under ~1 GB whatever its size.
A folder is imported rank by rank: each rank's partition is written as soon as it is decoded (memory: one rank
per worker). Interrupted, the ranks already written wait in .ktrace-resume-OUT beside OUT; the same command
resumes from them, --force starts over. On a cluster, SRC and OUT must be on a filesystem every worker sees.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ktrace.model.errors import ExitCode, KtraceError

if TYPE_CHECKING:
    from ktrace.fleet.engines import Engine
    from ktrace.model.outputs import Output
    from ktrace.model.trace import TraceMeta


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `ktrace import`."""
    from ktrace.cli.fleet_options import add_cluster_timeout

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
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="a folder: import N rank files at once, in this process and N-1 worker processes (default: one per core, "
        "at most one per 4 MB of files; 1: in this process only)",
    )
    parser.add_argument(
        "--cluster",
        metavar="ADDR",
        help="a folder: import on the Dask cluster whose scheduler is ADDR (tcp://host:8786; needs ktrace[dask])",
    )
    add_cluster_timeout(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")


def run(args: argparse.Namespace) -> int:
    """Import SRC and write OUT; print a one-line summary (and the health counts that matter)."""
    engine = _early_engine(args)
    if engine is None:
        return _run(args, None)
    with engine:  # closed with the exception that ends it: a Ctrl-C stops the workers at once
        return _run(args, engine)


def _early_engine(args: argparse.Namespace) -> Engine | None:
    """A folder imported by 2+ workers: the worker processes, started first, import the importer (~0.5 s each)
    while this process imports it too and lists the rank files; the folder's import then runs on them. (Their
    number from the folder's .json/.json.gz files, as `auto_workers` counts the rank files without --workers.)"""
    from ktrace.fleet.engines import ProcessEngine, auto_workers

    src = Path(args.src)
    if args.cluster is not None or (args.workers is not None and args.workers < 2):
        return None
    try:
        sizes = [p.stat().st_size for p in src.iterdir() if p.name.endswith((".json", ".json.gz"))]
    except OSError:
        return None  # not a folder, or unreadable: said where the import reads it
    count = min(len(sizes), args.workers if args.workers is not None else auto_workers(sizes))
    if count < 2:
        return None
    engine = ProcessEngine(count, in_client=True)
    engine.warm_up("ktrace.fleet.rank_import")
    return engine


def _run(args: argparse.Namespace, engine: Engine | None) -> int:
    from ktrace.cli.progress import progress_bar
    from ktrace.fleet.engines import check_engine_options
    from ktrace.importers import load, locate_listed
    from ktrace.model.outputs import STORE, Output
    from ktrace.model.store import write

    src, out = Path(args.src), Path(args.output)
    kind, _, files = locate_listed(src)  # a folder's rank files listed once, for detection and import
    if kind == "ktrace":
        raise KtraceError(f"{src} is already a .ktrace store", ExitCode.USAGE)
    if args.no_ops and args.with_ops:
        raise KtraceError("--no-ops and --with-ops contradict each other", ExitCode.USAGE)
    options = {"with_ops": False} if args.no_ops and kind == "kineto" else {}
    check_engine_options(args.workers, args.cluster)
    if (args.workers is not None or args.cluster) and not (kind == "kineto" and src.is_dir()):
        raise KtraceError(
            f"--workers/--cluster spread the ranks of a folder of Kineto files; {src.name} is one {kind} trace",
            ExitCode.USAGE,
        )
    # Checked and locked before the (long) import; written to a temporary sibling and renamed into place whole:
    # Ctrl-C or a full disk leave OUT as it was.
    output = Output(out, STORE, force=args.force, inputs=[src])
    enabled = False if args.no_progress else None
    if kind == "kineto" and src.is_dir():
        return _import_folder(args, src, output, enabled, engine, files)
    if kind == "kineto":
        return _import_kineto_file(args, src, output, enabled)
    with output.preparing(), progress_bar(f"importing {src.name}", enabled=enabled) as bar:
        trace = load(src, progress=bar, **options)
    with output as staged:
        write(trace, staged.staging)
    if not args.quiet:
        _print_summary(trace.counts(), trace.meta, len(trace.ranks), out)
    return int(ExitCode.OK)


def _import_kineto_file(args: argparse.Namespace, src: Path, output: Output, enabled: bool | None) -> int:
    """One Kineto file, its tables written as it is read (memory does not grow with the file)."""
    from ktrace.cli.progress import progress_bar
    from ktrace.importers.kineto_streaming import import_to_store

    with output as staged, progress_bar(f"importing {src.name}", enabled=enabled) as bar:
        result = import_to_store(src, staged.staging, progress=bar, with_ops=not args.no_ops)
    if not args.quiet:
        _print_summary(result.counts, result.meta, result.ranks, Path(args.output))
    return int(ExitCode.OK)


def _import_folder(
    args: argparse.Namespace, src: Path, output: Output, enabled: bool | None, engine: Engine | None, files: list[Path]
) -> int:
    """A folder of rank files: one task per rank on the engine --workers/--cluster pick (ktrace.fleet)."""
    from ktrace.cli.fleet_options import cluster_of
    from ktrace.cli.progress import progress_bar
    from ktrace.fleet.folder_import import import_folder, resume_folder

    try:
        with progress_bar(f"importing {src.name} (rank by rank)", enabled=enabled) as bar:
            result = import_folder(
                src,
                output,
                with_ops=not args.no_ops,
                force=args.force,
                workers=args.workers,
                cluster=cluster_of(args),
                progress=bar,
                engine=engine,
                files=files,
            )
    except KeyboardInterrupt:
        kept = resume_folder(output.target)
        if kept.is_dir() and any(kept.iterdir()):
            print(f"ranks imported so far are kept in {kept}: run the same command to resume", file=sys.stderr)
        raise
    if not args.quiet:
        _print_summary(result.counts, result.meta, result.ranks, Path(args.output))
        if result.resumed:
            print(f"resumed: {result.resumed} rank file(s) kept from the interrupted import")
    return int(ExitCode.OK)


def _print_summary(counts: dict[str, int], meta: TraceMeta, ranks: int, out: Path) -> None:
    from ktrace.model.display_text import printable
    from ktrace.presentation.notes import grouped_notes

    rows = ", ".join(
        f"{counts[k]:,} {k}" for k in ("kernels", "memory", "syncs", "api", "ranges", "ops") if counts.get(k)
    )
    print(f"wrote {out} ({meta.source}, {ranks} rank{'s' if ranks != 1 else ''}): {rows or 'no rows'}")
    health = {k: v for k, v in meta.health.items() if v}
    if health:
        print("health: " + printable(", ".join(f"{k}={v:,}" for k, v in sorted(health.items()))))
    for note in grouped_notes(meta.notes):  # 64 ranks' "128 kernel(s) have no launch call": one line
        print(f"note: {printable(note.line)}", file=sys.stderr)
