"""Write a trace as a native Perfetto trace, Chrome JSON, or Parquet/CSV tables.

Perfetto (.pftrace, .pftrace.gz) is the format to open in https://ui.perfetto.dev: one process per rank with its
threads (CUDA API calls, NVTX ranges, nested), a GPU group per device with a track per stream (kernels, memcpy,
memset), an arrow from every launch to the GPU work it caused, a Steps track, and counter tracks (CPU, memory, I/O,
network, GPU utilization/memory/power). Chrome JSON is for tools that read only JSON. Parquet/CSV write one file per
table into the output folder (for DuckDB, pandas, spreadsheets), a multi-host trace's times on one clock. Kineto
(-f kineto) writes PyTorch-profiler JSON, one file per rank as torch.profiler does, for HTA, TraceLens and scripts
written against it: -o run.json (or .json.gz) for a trace of one rank, else a folder of rank<N>.json files; what
Kineto has no slot for (counters, ...) is left out, and the export says what.

The format comes from -f, else from the output's extension (.pftrace[.gz], .json[.gz], a folder: parquet).
The output appears only once complete (Ctrl-C or a full disk leave an older one as it was); its folder is
created if missing. An existing output is replaced only with --force, and only when it is an export of the
same format (never the input, never another file or folder).

examples:
  ktrace export run.ktrace -o run.pftrace.gz                  open in ui.perfetto.dev
  ktrace export worker0.pt.trace.json.gz -f perfetto -o run.pftrace
  ktrace export run.ktrace -f chrome -o run.json              for chrome://tracing and JSON-only tools
  ktrace export run.ktrace -f parquet -o tables/              kernels.parquet, api.parquet, ... in tables/
  ktrace export run.ktrace -f kineto -o kineto/               rank0.json, rank1.json, ... for HTA and TraceLens
  ktrace export run.ktrace -f kineto -o rank1.json.gz --ranks 1
  ktrace export run.ktrace -o cut.pftrace --window 1.5:3 --ranks 0,1
                                                              seconds 1.5 to 3 after the trace start, ranks 0 and 1
  ktrace export run.ktrace -o run.pftrace --findings          the report's rule findings as instant events
  ktrace export run.ktrace -o run.pftrace --critical-path     the median step's critical path as markers
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ktrace.cli.options import add_trace_argument, open_trace, use_returning_allocators
from ktrace.model.errors import ExitCode

FORMATS = ("perfetto", "chrome", "parquet", "csv", "kineto")
_SUFFIXES = {"perfetto": ".pftrace", "chrome": ".json", "parquet": "", "csv": "", "kineto": ""}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `ktrace export`."""
    add_trace_argument(parser)
    parser.add_argument(
        "-f", "--format", choices=FORMATS, help="output format (default: from the output's extension, else perfetto)"
    )
    parser.add_argument(
        "-o",
        "--output",
        help="output file (perfetto, chrome, kineto of one rank: .json; add .gz to compress) or folder "
        "(parquet, csv, kineto: rank<N>.json files); default: the input's name in the current folder",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace the output if it exists and is a ktrace export of the same format"
    )
    parser.add_argument(
        "--window",
        metavar="START:END",
        help="keep only what overlaps this window: seconds from the trace start (1.5:3, 10:) or absolute epoch ns",
    )
    parser.add_argument("--ranks", metavar="LIST", help="keep only these ranks, e.g. 0,1,3 or 0-3")
    parser.add_argument(
        "--findings",
        action="store_true",
        help="run the rules and draw the findings `ktrace report` lists as instant events, one per evidence window "
        "(perfetto)",
    )
    parser.add_argument(
        "--critical-path",
        action="store_true",
        help="mark the critical path of the median step (runs of CPU, launch, gap and GPU time) as instant "
        "events on the Findings track (perfetto)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def infer_format(output: str | None) -> str:
    """The format an output path implies (perfetto when it says nothing)."""
    if output is None:
        return "perfetto"
    name = output.lower()
    if name.endswith((".json", ".json.gz")):
        return "chrome"
    if name.endswith(".csv"):
        return "csv"
    if name.endswith((".pftrace", ".pftrace.gz", ".perfetto-trace", ".pb", ".pb.gz")):
        return "perfetto"
    if name.endswith("/") or Path(output).is_dir():
        return "parquet"
    return "perfetto"


def default_output(trace_path: str, fmt: str) -> str:
    """<input name without extensions>.<format suffix> in the current folder (a folder for tables)."""
    stem = Path(trace_path.rstrip("/")).name
    for ext in (".gz", ".json", ".sqlite", ".ktrace"):
        stem = stem.removesuffix(ext)
    return stem + (_SUFFIXES[fmt] or f"-{fmt}")


def output_format(fmt: str, output: str = "") -> Any:
    """The OutputFormat of an export format to `output` (which existing outputs --force may replace)."""
    from ktrace.model import outputs

    if fmt == "kineto":
        from ktrace.exporters.kineto_json import KINETO_FILE, KINETO_FOLDER, is_file_target

        return KINETO_FILE if is_file_target(output) else KINETO_FOLDER
    if fmt in ("parquet", "csv"):
        from ktrace.model.schema import TABLES

        return outputs.table_folder(TABLES, fmt)
    return outputs.PERFETTO if fmt == "perfetto" else outputs.CHROME


def load_findings(trace: Any) -> list[Any]:
    """The findings `ktrace report` lists (every rule with its defaults, laid out by presentation.findings), one
    mark per evidence window; or [] with a one-line note when a rule fails: a failing rule must not cost the user
    the export."""
    from ktrace.analysis.rules import run_rules
    from ktrace.presentation.findings import marks, rules_findings

    try:
        rules = run_rules(trace)
    except Exception as exc:
        print(
            f"ktrace export: note: the rules failed ({type(exc).__name__}: {exc}); exporting without findings",
            file=sys.stderr,
        )
        return []
    return list(marks(rules_findings(rules)))


def critical_path_findings(trace: Any) -> list[Any]:
    """Markers of the median step's critical path (analysis.critical_path_marks), [] when there is none."""
    from ktrace.analysis.critical_path import critical_path
    from ktrace.analysis.critical_path_marks import path_marks

    cp = critical_path(trace)
    if cp is None:
        print("ktrace export: note: no critical path (no CPU operators or runtime calls)", file=sys.stderr)
        return []
    return list(path_marks(cp))


def run(args: argparse.Namespace) -> int:
    """Open, cut, export; print one line saying what was written."""
    use_returning_allocators()  # no trace: 50 ms for one rank too (ONE_RANK_JEMALLOC's 0: ~50 % more export CPU)
    from ktrace.cli.progress import progress_bar
    from ktrace.exporters.selection import parse_ranks, parse_window, select
    from ktrace.model.outputs import Output

    fmt = args.format or infer_format(args.output)
    output = args.output or default_output(args.trace, fmt)
    ranks = parse_ranks(args.ranks) if args.ranks else None
    target = Output(output, output_format(fmt, output), force=args.force, inputs=[Path(args.trace)])  # checked, locked
    with target.preparing():
        trace: Any = open_trace(args.trace, progress=not args.no_progress)
        if args.window or ranks is not None:
            span = trace.span_ns()
            window = parse_window(args.window, span[0] if span else 0) if args.window else None
            trace = select(trace, window=window, ranks=ranks)
            if not any(n for name, n in trace.counts().items() if name not in ("threads", "devices")):
                print(
                    "ktrace export: note: nothing left after --window/--ranks; writing an empty trace", file=sys.stderr
                )
        findings: list[Any] = []
        if args.findings:
            with progress_bar("checking rules", enabled=False if args.no_progress else None):
                findings = load_findings(trace)
        if args.critical_path:
            findings += critical_path_findings(trace)
        if fmt == "kineto":
            _check_kineto_target(trace, output)
    if findings and fmt != "perfetto":
        print(f"ktrace export: note: findings are drawn only in perfetto exports, not {fmt}", file=sys.stderr)
    with progress_bar(f"writing {output}", enabled=False if args.no_progress else None) as bar, target:
        # Files are written whole by the exporters (a temporary sibling renamed); table folders are staged here.
        summary = _export(trace, str(target.staging), fmt, findings, bar)
    print(f"wrote {output}: {summary}")
    return int(ExitCode.OK)


def _check_kineto_target(trace: Any, output: str) -> None:
    """A Kineto .json file holds one rank: refuse (exit 2) a trace of several before writing anything."""
    from ktrace.exporters.kineto_json import is_file_target
    from ktrace.model.errors import KtraceError
    from ktrace.model.schema import NODE_RANK

    ranks = sorted({r for _, r in trace.ranks if r != NODE_RANK})
    if is_file_target(output) and len(ranks) > 1:
        raise KtraceError(
            f"{output}: a Kineto .json file holds one rank and the trace has {len(ranks)}: give a folder "
            f"(-o DIR), or one rank (--ranks {ranks[0]})",
            ExitCode.USAGE,
        )


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1_000_000 else f"{n / 1e3:.0f} kB"


def _export(trace: Any, output: str, fmt: str, findings: list[Any], bar: Any) -> str:
    if fmt == "perfetto":
        from ktrace.exporters.perfetto import export_perfetto

        s = export_perfetto(trace, output, findings=findings, progress=bar)
        text = f"{s.slices:,} slices, {s.flows:,} flows, {s.counters:,} counter values, {s.tracks:,} tracks"
        if s.instants:
            text += f", {s.instants:,} findings"
        if s.overlap_slices:
            text += f" ({s.overlap_slices:,} overlapping slices on '(overlap n)' tracks)"
        return text + f", {_size(s.bytes)}"
    if fmt == "chrome":
        from ktrace.exporters.chrome_json import export_chrome_json

        c = export_chrome_json(trace, output, progress=bar)
        return f"{c['slices']:,} slices, {c['flows']:,} flows, {c['counters']:,} counter values"
    if fmt == "kineto":
        from ktrace.exporters.kineto_json import export_kineto, left_out
        from ktrace.model.display_text import printable

        lost = left_out(trace)
        if lost:  # (names the trace's range domains: trace text)
            print(f"ktrace export: note: {printable(lost)}", file=sys.stderr)
        k = export_kineto(trace, output, progress=bar)
        written = f"{len(k.files)} rank files" if len(k.files) > 1 else "1 rank file"
        return f"{written}, {k.events:,} events, {k.flows:,} flows, {_size(k.bytes)}"
    from ktrace.exporters.tables import export_tables

    files = export_tables(trace, output, fmt, progress=bar)
    return f"{len(files)} {fmt} files{_clock_words(trace)}"


def _clock_words(trace: Any) -> str:
    """What clock a multi-host export's times are on (nothing for one host)."""
    from ktrace.exporters.tables import clock_state
    from ktrace.model.display_text import printable

    state, alignment = clock_state(trace), trace.meta.clock_alignment
    if state == "aligned":
        return f", times on {printable(alignment.reference_host)}'s clock ({len(alignment.hosts)} hosts aligned)"
    if state == "as_recorded":
        why = "KTRACE_CLOCK=raw" if alignment is not None and alignment.shifts else "not aligned: ktrace info says why"
        return f", times as each host recorded them ({why})"
    return ""
