"""The HTML report's operator section: the operator tables (report.operator_tables) and two bar plots, top
operators by GPU time and by CPU self time."""

from __future__ import annotations

from ktrace.report import plots
from ktrace.report.content import Report
from ktrace.report.operator_tables import operator_tables
from ktrace.report.rows import rows
from ktrace.report.sections import Section, esc, table


def operators_section(report: Report) -> Section:
    """Operators, the kernels they launched, modules and frequent kernel sequences."""
    summary = report.dashboard.summary
    sec = Section("operators", "Operators and kernel sequences")
    ops = summary.operators
    if ops is not None:
        for title, frame, column in (
            ("Top operators by GPU time", ops.top_by_gpu_time, "gpu_ns"),
            ("Top operators by CPU self time", ops.top_by_cpu_self_time, "cpu_self_ns"),
        ):
            top = rows(frame)
            if top:
                sec.figure(plots.hbar(title, [r["name"] for r in top], [r[column] / 1e6 for r in top], "ms"))
    for t in operator_tables(summary):
        sec.body.append(f"<h3>{esc(t.title)}</h3>")
        if t.note:
            sec.body.append(f"<p>{esc(t.note)}</p>")
        if t.cells:
            sec.body.append(table(t.headers, t.cells))
    return sec
