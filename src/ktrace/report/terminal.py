"""Terminal summary: render a Summary (the dashboard numbers) as rich tables and bars on a Console."""

from __future__ import annotations

from typing import Any

import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from ktrace.analysis.memory_timeline import peak_line
from ktrace.analysis.operators import OperatorSummary
from ktrace.analysis.phases import step_source_note
from ktrace.analysis.ranks import LoadBalance
from ktrace.analysis.stragglers import Stragglers
from ktrace.analysis.summary import ABSENT_DATA, Summary
from ktrace.analysis.units import format_bytes
from ktrace.model.display_text import printable, printable_tree
from ktrace.presentation import summary_critical_path as critical_path_view
from ktrace.presentation.summary_ranks import (
    BASIS_NOTE,
    WAITED_TERMINAL_COLUMNS,
    straggler_rows,
    waited_terminal_rows,
    waited_title,
)
from ktrace.report.format import fmt_ns as format_ns
from ktrace.report.rank_rows import rest_note
from ktrace.report.rows import json_float, phase_rows, rows
from ktrace.report.terminal_operators import module_table, shape_table
from ktrace.report.terminal_tables import format_cell, print_table

TERMINAL_STRAGGLERS = 5
"""Straggler rows in the terminal summary (the report shows 10; the JSON every rank)."""


_LATENCY_METRICS = (
    ("launch_latency_ns", "API start → run"),
    ("queue_delay_ns", "API end → run"),
    ("api_duration_ns", "API call"),
)


def latency_rows(wide: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """latency_stats' wide rows (one per kind) as one row per (kind, definition)."""
    out = []
    for row in wide:
        for prefix, label in _LATENCY_METRICS:
            stats = {f"{k[len(prefix) + 1 :]}_ns": v for k, v in row.items() if k.startswith(prefix + "_")}
            out.append({"kind": row["kind"], "definition": label, "count": row["count"], **stats})
    return out


def _counter_rows(stats: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Counter statistics for the terminal: one metric per line with its core/device index (cpu.core.util[3]),
    byte counters humanized."""
    out = []
    for r in stats:
        instance = r["instance"]
        metric = f"{r['metric']}[{instance}]" if isinstance(instance, int) and instance >= 0 else r["metric"]
        fmt = format_bytes if str(r["metric"]).endswith("_bytes") else (lambda v: f"{v:,.2f}")
        out.append(
            {
                "node": r["node"],
                "metric": metric,
                "samples": r["samples"],
                **{k: "-" if r[k] is None else fmt(float(r[k])) for k in ("min", "p50", "p95", "max", "mean")},
            }
        )
    return out


OPERATOR_ROWS = (10, 5)
"""The terminal's operator table: this many top operators by GPU time, then up to this many more by CPU self time."""


def _operator_rows(ops: OperatorSummary | None) -> list[dict[str, Any]] | None:
    """The summary's two top-operator lists as one table: by GPU time, then the CPU-heavy ones not already in it
    (CPU total time is in the JSON: in 80 columns the names need its room)."""
    if ops is None:
        return None
    by_gpu, by_cpu = OPERATOR_ROWS
    top = text_rows(ops.top_by_gpu_time)[:by_gpu]
    shown = {r["name"] for r in top}
    top += [r for r in text_rows(ops.top_by_cpu_self_time) if r["name"] not in shown][:by_cpu]
    return [
        {
            "name": r["name"],
            "calls": r["calls"],
            "cpu_self_ns": r["cpu_self_ns"],
            "gpu_ns": r["gpu_ns"],
            "kernels": r["kernels"],
            "latency_ns": r["launch_latency_mean_ns"],
        }
        for r in top
    ]


def text_rows(frame: pl.DataFrame | None) -> list[dict[str, Any]]:
    """A summary frame's rows (as in the JSON) with every trace string made printable for the terminal."""
    printable_rows: list[dict[str, Any]] = printable_tree(rows(frame))
    return printable_rows


def _header(console: Console, summary: Summary) -> None:
    phases = summary.phases
    console.print(
        f"[bold]source[/] {escape(printable(summary.source))}   [bold]ranks[/] {summary.ranks}   "
        f"[bold]kernels[/] {summary.kernels:,}   [bold]job[/] {format_ns(phases.duration_ns)}   "
        f"[bold]steps[/] {phases.steps}{' per rank' if summary.ranks > 1 else ''}"
        f"{step_source_note(phases.step_source)}"
    )
    for note in summary.notes:  # before the tables: a note (truncated input, lost records) changes how to read them
        if note not in ABSENT_DATA:  # what the trace lacks comes last (_absent)
            console.print(f"[yellow]note:[/] {escape(printable(note))}")
    phase_shares = [{"phase": name, "time_ns": ns, "share": pct / 100.0} for name, ns, pct in phase_rows(phases)]
    print_table(console, "job phases", phase_shares, share_bar="share")


def print_load_balance(console: Console, balance: LoadBalance | None, *, per_rank: bool = True) -> None:
    """The load-balance table (unless not `per_rank`) and its spreads (nothing with fewer than 2 ranks)."""
    if balance is None:
        return
    if per_rank:
        print_table(console, "load balance across ranks", text_rows(balance.per_rank))
    distance = json_float(balance.histogram_distance)
    console.print(
        f"busy spread {format_cell('busy_share', json_float(balance.busy_spread))}   step spread "
        f"{format_cell('step_share', json_float(balance.step_spread))}   utilization histogram distance "
        f"{'-' if distance is None else f'{distance:.3f}'} ({printable(balance.source)}; "
        "SageMaker flags > 0.5)"
    )


def print_stragglers(console: Console, lag: Stragglers | None) -> None:
    """The straggler table's top TERMINAL_STRAGGLERS ranks (the single-process and the fleet summary's)."""
    if lag is None:
        return
    waited = printable_tree(waited_terminal_rows(lag, TERMINAL_STRAGGLERS))
    print_table(console, waited_title(lag), waited, WAITED_TERMINAL_COLUMNS)
    for row in waited:  # the why on lines of its own, as the step-time view's causes below
        console.print(Text(f"  why {row['ranks']}: {row['why']}"))
    found: list[dict[str, Any]] = printable_tree(straggler_rows(lag, TERMINAL_STRAGGLERS)[0])
    rest = lag.table.height - len(found)
    columns = ["node", "rank", "slower_pct", "work_mean_ns", "step_mean_ns", "slowest_steps"]
    print_table(console, f"step-time view: stragglers ({BASIS_NOTE[lag.basis]})", found, columns)
    for row in found:  # the causes on lines of their own: kernel names need the width a table column lacks
        if row["causes"]:
            console.print(Text(f"  why {row['node']}/{row['rank']}: {row['causes']}"))
    if rest:
        console.print(f"[dim]{escape(rest_note(rest, 'ranks'))}[/]")


def _critical_path(console: Console, summary: Summary) -> None:
    cp = summary.critical_path
    if cp is None:
        return
    console.print(Text(printable(critical_path_view.headline(cp))))
    print_table(console, "critical path: composition", critical_path_view.composition_rows(cp), share_bar="share")
    items, what_if = critical_path_view.item_rows(cp, 5), critical_path_view.what_if_rows(cp)  # trace names
    print_table(console, "critical path: top items", printable_tree(items), share_bar="share")
    crossings = critical_path_view.crossing_rows(cp)
    if crossings:
        print_table(
            console,
            "critical path: late ranks (crossed: the path runs on the late rank; waited: the wait is on it)",
            printable_tree(crossings),
        )
    print_table(console, "critical path: what if (new longest path)", printable_tree(what_if))
    for note in critical_path_view.what_if_notes(cp):
        console.print(Text(printable(note)))


def render_summary(summary: Summary, console: Console, *, by_shape: bool = False) -> None:
    """Print the summary's tables on `console` (the numbers of summary_to_dict, trace text made printable);
    `by_shape` adds the operators by input shape (summary.operators.by_shape, when the summary has it)."""
    _header(console, summary)
    print_table(
        console,
        "active time (timeline = busy/span; counter = share of samples > 0 %; mean util = mean "
        "sample, lower than the active share when the device is partly busy)",
        text_rows(summary.active),
        ["resource", "method", "node", "rank", "instance", "active_share", "mean_util"],
        "active_share",
    )
    print_table(
        console,
        "GPU busy / idle per device",
        text_rows(summary.busy),
        ["node", "rank", "device", "busy_ns", "idle_ns", "span_ns", "busy_pct", "records"],
    )
    print_table(
        console,
        "GPU idle by cause (per device: each gap takes the cause of the record that ends it)",
        text_rows(summary.idle),
        share_bar="idle_share",
    )
    kcols = ["name", "count", "total_ns", "mean_ns", "p50_ns", "p95_ns", "max_ns", "time_share"]
    print_table(console, "top kernels by GPU time", text_rows(summary.top_by_time), kcols, "time_share")
    print_table(
        console,
        "top kernels by launch count",
        text_rows(summary.top_by_count),
        ["name", "count", "count_share", "total_ns", "mean_ns"],
        "count_share",
    )
    print_table(
        console,
        f"operators: top {OPERATOR_ROWS[0]} by GPU time, then by CPU self time (gpu = work each "
        "launched, innermost operator; latency = mean launch -> kernel start)",
        _operator_rows(summary.operators),
    )
    for extra in (module_table(summary.operators), shape_table(summary.operators) if by_shape else None):
        if extra is not None:
            print_table(console, extra.title, extra.rows)
            for line in extra.lines:
                console.print(Text(line))
    print_table(
        console,
        "launch-to-run latency (start->start = launch latency; end->start = queue delay)",
        latency_rows(text_rows(summary.latency)),
    )
    print_table(console, "step time per rank", text_rows(summary.step_stats))
    print_table(
        console,
        "kernel precision (communication/memory shown apart)",
        text_rows(summary.precision),
        ["precision", "excluded", "kernels", "time_ns", "time_share", "count_share"],
        "time_share",
    )
    print_table(console, "GPU activity (sum of durations)", text_rows(summary.activity), share_bar="share")
    print_table(console, "memory operations", text_rows(summary.memory), share_bar="time_share")
    if summary.memory_timeline is not None:
        console.print(escape(printable(peak_line(summary.memory_timeline, summary.phases.start_ns))))
    print_table(console, "communication / compute overlap", text_rows(summary.overlap))
    print_table(console, "counters", _counter_rows(text_rows(summary.counters)))
    print_load_balance(console, summary.load_balance)
    print_stragglers(console, summary.stragglers)
    _critical_path(console, summary)
    for h in summary.annotations:
        print_table(console, f"annotation {printable(h.pattern)!r}: {h.count} ranges", text_rows(h.stats))
    absent = [note for note in summary.notes if note in ABSENT_DATA]
    if absent:
        console.print("[dim]not in this trace:[/]")
        for note in absent:
            console.print(f"[dim]  {escape(printable(note))}[/]")
