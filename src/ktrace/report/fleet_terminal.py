"""Terminal summary of a many-rank job: render a FleetSummary (the map-reduce path of `ktrace summary`)."""

from __future__ import annotations

import polars as pl
from rich.console import Console
from rich.markup import escape

from ktrace.analysis.log_histogram import RELATIVE_ERROR
from ktrace.analysis.phases import step_source_note
from ktrace.analysis.rank_reduce import FleetSummary
from ktrace.model.display_text import printable
from ktrace.report.format import fmt_ns as format_ns
from ktrace.report.rows import phase_rows
from ktrace.report.terminal import latency_rows, print_load_balance, print_stragglers, text_rows
from ktrace.report.terminal_tables import print_table

RANK_ROWS = 20
"""Ranks listed in the terminal's rank table: the slowest first (every rank is in the JSON)."""


def fleet_header(fleet: FleetSummary) -> str:
    """The first line: ranks, kernels, job length, steps, and the engine that ran the per-rank work."""
    phases = fleet.phases
    return (
        f"[bold]fleet[/] {fleet.ranks} ranks   [bold]kernels[/] {fleet.kernels:,}   "
        f"[bold]job[/] {format_ns(phases.duration_ns)}   [bold]steps[/] {phases.steps} per rank"
        f"{step_source_note(phases.step_source)}   [bold]engine[/] {escape(fleet.engine)}"
    )


def render_fleet_summary(fleet: FleetSummary, console: Console) -> None:
    """Print the fleet summary's tables on `console` (the numbers of rank_reduce.fleet_to_dict)."""
    console.print(fleet_header(fleet))
    for note in fleet.notes:
        console.print(f"[yellow]note:[/] {escape(printable(note))}")
    phase_shares = [{"phase": name, "time_ns": ns, "share": pct / 100.0} for name, ns, pct in phase_rows(fleet.phases)]
    print_table(console, "job phases", phase_shares, share_bar="share")
    busy = fleet.busy.select(pl.col("busy_ns").sum(), pl.col("idle_ns").sum(), pl.col("span_ns").sum(), pl.len())
    job = [{"devices": busy["len"][0], **{c: busy[c][0] for c in ("busy_ns", "idle_ns", "span_ns")}}]
    print_table(console, "GPU busy / idle over every device of the job", job)
    print_table(console, "GPU idle by cause (whole job)", text_rows(fleet.idle_causes), share_bar="idle_share")
    kcols = ["name", "count", "total_ns", "mean_ns", "p50_ns", "p95_ns", "max_ns", "time_share"]
    print_table(console, "top kernels by GPU time", text_rows(fleet.top_by_time), kcols, "time_share")
    print_table(
        console,
        "launch-to-run latency (start->start = launch latency; end->start = queue delay)",
        latency_rows(text_rows(fleet.latency)),
    )
    console.print(
        f"percentiles from merged log-bin histograms: within {100 * RELATIVE_ERROR:.2f} % of the exact ones; "
        "counts, sums, means and maxima exact"
    )
    slowest = fleet.rank_table.sort("slowdown", descending=True, nulls_last=True).head(RANK_ROWS)
    cols = ["node", "rank", "slowdown", "straggler", "step_mean_ns", "busy_ns", "idle_ns", "comm_ns", "overlap_pct"]
    print_table(console, f"ranks, slowest first (top {min(RANK_ROWS, slowest.height)})", text_rows(slowest), cols)
    print_load_balance(console, fleet.load_balance, per_rank=False)  # the rank table above has its rows
    print_stragglers(console, fleet.stragglers)
