"""Write a profiling report: training job summary, system usage, framework metrics, the rules' verdicts with
evidence, and the SageMaker-Profiler-style dashboard (utilization over time, top kernels, step-time histogram,
precision / activity / memory-op pies, annotation histograms).

The output file appears only once complete and its folder is created if missing; an existing file is replaced
only with --force, and only when it is a ktrace report of the same format.
The HTML report is one self-contained file with interactive plots that works offline (plotly.js inlined).
Markdown and JSON carry the same content (JSON is a stable contract: sorted keys, rounded floats).

examples:
  ktrace report run.ktrace -o report.html
  ktrace report worker0.pt.trace.json.gz -o report.md --format md
  ktrace report run.ktrace --format json > report.json
  ktrace report run.ktrace -o r.html --rules rules.toml --set GPUGaps.gap_ms=50 --annotate 'backward'
  ktrace report job.ktrace -o fleet.html --workers 8   a many-rank store, rank by rank

A .ktrace store of 16 ranks or more (or with --workers/--cluster) is analysed rank by rank (ktrace.fleet), for
speed and memory: the report has the same sections, rules and JSON keys as one process's (each rule says in
rule_docs whether it is "exact" or judged "per rank"), system usage, utilization curves and critical path
included. The default title names the trace, its hosts, ranks and GPUs.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ktrace.cli.fleet_options import add_engine_arguments, fleet_result_of
from ktrace.cli.options import add_no_ops_flag, add_trace_argument, open_trace, use_returning_allocators
from ktrace.cli.rules_options import add_rules_arguments, rules_config
from ktrace.model.errors import ExitCode, KtraceError

if TYPE_CHECKING:
    from ktrace.analysis.rank_reduce import FleetResult
    from ktrace.presentation.identity import TraceIdentity
    from ktrace.presentation.report_model import Report

FORMATS = ("html", "md", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `ktrace report`."""
    add_trace_argument(parser)
    add_no_ops_flag(parser)
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="where to write (default: stdout for md/json; report.html for html)"
    )
    parser.add_argument(
        "-f",
        "--format",
        choices=FORMATS,
        help="html, md or json (default: from the output file's extension, else html)",
    )
    parser.add_argument(
        "--annotate",
        metavar="REGEX",
        action="append",
        default=[],
        help="add a histogram of the durations of the ranges matching REGEX (repeatable; "
        "default: forward/backward/optimizer.step when present)",
    )
    parser.add_argument("--top", type=int, default=15, help="rows in the top-kernel panels (default 15)")
    parser.add_argument("--title", default="", help="report title")
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace the output file if it exists and is a ktrace report of the same format",
    )
    add_rules_arguments(parser)
    add_engine_arguments(parser)


def output_format(args: argparse.Namespace) -> str:
    """The format asked for, or the one the output file's extension implies."""
    if args.format:
        return str(args.format)
    suffix = Path(args.output).suffix.lower() if args.output else ""
    return {".md": "md", ".markdown": "md", ".json": "json"}.get(suffix, "html")


def render(report: Report, fmt: str) -> str:
    """The report text in format `fmt`."""
    if fmt == "md":
        from ktrace.report.markdown import render_markdown

        return render_markdown(report)
    if fmt == "json":
        from ktrace.report.json_report import render_json

        return render_json(report)
    from ktrace.report.html import render_html

    return render_html(report)


def report_title(trace: str, identity: TraceIdentity, ranks: int) -> str:
    """The default title: the trace's file or store name, its hosts (named up to 3, else counted), ranks and GPUs."""
    hosts = ", ".join(identity.hosts) if len(identity.hosts) <= 3 else f"{len(identity.hosts)} hosts"
    about = [hosts, f"{ranks} rank{'s' if ranks != 1 else ''}", ", ".join(identity.gpus)]
    return f"ktrace profiling report: {Path(trace).name} ({'; '.join(a for a in about if a)})"


def store_identity(path: str) -> TraceIdentity:
    """The files, hosts and GPUs of a store, from its meta.json and devices tables alone (no events are read)."""
    from ktrace.model import store
    from ktrace.model.schema import TABLES
    from ktrace.presentation.identity import trace_identity

    return trace_identity(store.read(path, skip=[t for t in TABLES if t != "devices"]))


def fleet_report(result: FleetResult, identity: TraceIdentity, title: str) -> Report:
    """The Report of a store analysed rank by rank: the Dashboard one process builds, from the reduced Summary,
    rules, rank heatmap, system usage and utilization curves (summarize_store(system_usage=True))."""
    from ktrace.analysis.dashboard import Dashboard, steps_histogram
    from ktrace.analysis.rules.engine import RulesReport
    from ktrace.presentation.report_model import Report

    summary, usage = result.summary, result.system_usage
    if usage is None:
        raise ValueError("fleet_report needs the result's system usage (summarize_store(system_usage=True))")
    dashboard = Dashboard(
        summary=summary,
        step_histogram=steps_histogram(summary.steps),
        utilization_bin_ms=round(usage.bin_ns / 1e6, 6),
        utilization=result.utilization,
        rules=result.rules or RulesReport(()),
        annotations=tuple(h.pattern for h in summary.annotations),
        rank_heatmap=result.rank_heatmap,
    )
    return Report(dashboard, title, identity, usage)


def run(args: argparse.Namespace) -> int:
    """Build the report and write it."""
    use_returning_allocators(args.trace)
    from ktrace.cli.progress import progress_bar
    from ktrace.presentation.report_model import build_report
    from ktrace.presentation.verdicts import finding_counts

    if args.top < 1:
        raise KtraceError("--top must be at least 1", ExitCode.USAGE)
    from ktrace.model import outputs

    config = rules_config(args)
    fmt = output_format(args)
    target = args.output or ("report.html" if fmt == "html" else None)
    kind = {"md": outputs.MD_REPORT, "json": outputs.JSON_REPORT}.get(fmt, outputs.HTML_REPORT)
    # Checked and locked before the analysis, not after it.
    output = None if target is None else outputs.Output(target, kind, force=args.force, inputs=[Path(args.trace)])
    with output.preparing() if output else contextlib.nullcontext():
        result = fleet_result_of(
            args, top=args.top, annotations=tuple(args.annotate) or None, rules_config=config, system_usage=True
        )
        if result is not None:
            identity = store_identity(args.trace)
            title = args.title or report_title(args.trace, identity, result.summary.ranks)
            report = fleet_report(result, identity, title)
        else:
            trace = open_trace(args.trace, with_ops=not args.no_ops)
            with progress_bar("analysing") as bar:
                report = build_report(
                    trace, config=config, annotations=tuple(args.annotate), top=args.top, title=args.title, progress=bar
                )
            if not args.title:
                report = replace(
                    report, title=report_title(args.trace, report.identity, report.dashboard.summary.ranks)
                )
        text = render(report, fmt)
        rules = report.dashboard.rules
    if output is None:
        sys.stdout.write(text)
        return 0
    with output:
        outputs.write_atomically(output.target, text.encode())
    counts = finding_counts(rules)
    print(
        f"wrote {target} ({len(text.encode()) / 1e6:.1f} MB): {counts.error} errors, "
        f"{counts.warning} warnings, {counts.info} notes",
        file=sys.stderr,
    )
    return 0
