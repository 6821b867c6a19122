"""The critical path in the HTML and Markdown reports, from the rows of presentation.summary_critical_path (which
the terminal summary lays out too), so every view shows the same figures."""

from __future__ import annotations

from typing import Any

from ktrace.analysis.critical_path import CriticalPath
from ktrace.model.units import format_ns
from ktrace.presentation.summary_critical_path import (
    CROSSING_NOTE,
    MODEL_NOTE,
    composition_rows,
    headline,
    item_rows,
    what_if_rows,
)
from ktrace.presentation.summary_critical_path import NOTE_SHORTFALL as NOTE_SHORTFALL
from ktrace.presentation.summary_critical_path import crossing_rows as crossing_rows
from ktrace.presentation.summary_critical_path import what_if_notes as what_if_notes
from ktrace.report import plots
from ktrace.report.content import Report
from ktrace.report.sections import Section, esc, table


def _crossing_cells(cp: CriticalPath) -> list[list[Any]]:
    return [
        [
            r["kind"],
            r["name"],
            r["late"],
            r["waiting"],
            format_ns(r["waited_ns"]),
            r["cause"] or "-",  # a wait: nothing the late rank recorded explains it
            "-" if r["cause_time_ns"] is None else format_ns(r["cause_time_ns"]),
        ]
        for r in crossing_rows(cp)
    ]


CROSSING_HEADERS = [
    "on path",
    "collective",
    "late rank",
    "waiting rank",
    "waited",
    "late because of",
    "its time on path",
]


def markdown_lines(cp: CriticalPath | None, md_table: Any, cell: Any) -> list[str]:
    """The Markdown report's critical-path section (md_table and cell are markdown's helpers)."""
    out = ["## Critical path", ""]
    if cp is None:
        return out + ["No CPU operators or runtime calls to build a dependency graph from.", ""]
    out += [cell(headline(cp), 1000), "", MODEL_NOTE, ""]
    out += md_table(
        ["part", "time", "share", "edges"],
        [[r["kind"], format_ns(r["time_ns"]), f"{r['share'] * 100:.1f} %", r["edges"]] for r in composition_rows(cp)],
    )
    out += ["", "### On the critical path", ""]
    out += md_table(
        ["kind", "name", "time", "share"],
        [[r["kind"], r["name"], format_ns(r["time_ns"]), f"{r['share'] * 100:.1f} %"] for r in item_rows(cp)],
    )
    if crossing_rows(cp):
        out += ["", "### Late ranks on the path", "", CROSSING_NOTE, ""]
        out += md_table(CROSSING_HEADERS, _crossing_cells(cp))
    what_if = what_if_rows(cp)
    if what_if:
        out += ["", "### What if", ""]
        out += md_table(
            ["change", "target", "new length", "saved"],
            [[r["kind"], r["name"], format_ns(r["length_ns"]), format_ns(r["saved_ns"])] for r in what_if],
        )
        notes = what_if_notes(cp)  # trace names (hosts, kernels): escaped as every Markdown cell is
        out += ["", *(cell(n, 1000) for n in notes)] if notes else []
    return out + [""]


def html_section(report: Report) -> Section:
    """The HTML report's critical-path section: headline, composition bar, top items and what-ifs."""
    sec = Section("critical-path", "Critical path")
    cp = report.dashboard.summary.critical_path
    if cp is None:
        sec.body.append("<p>No CPU operators or runtime calls to build a dependency graph from.</p>")
        return sec
    sec.body.append(f"<p>{esc(headline(cp))}</p><p>{esc(MODEL_NOTE)}</p>")
    parts = [r for r in composition_rows(cp) if r["time_ns"]]
    sec.figure(
        plots.hbar("Critical path composition", [r["kind"] for r in parts], [r["time_ns"] / 1e6 for r in parts], "ms")
    )
    sec.body.append(
        table(
            ["kind", "name", "time on path", "share", "edges"],
            [
                [r["kind"], r["name"], format_ns(r["time_ns"]), f"{r['share'] * 100:.1f} %", r["edges"]]
                for r in item_rows(cp)
            ],
        )
    )
    if crossing_rows(cp):
        sec.body.append(f"<h3>Late ranks on the path</h3><p>{esc(CROSSING_NOTE)}</p>")
        sec.body.append(table(CROSSING_HEADERS, _crossing_cells(cp)))
    what_if = what_if_rows(cp)
    if what_if:
        sec.body.append("<h3>What if</h3>")
        sec.body.append(
            table(
                ["change", "target", "new length", "saved", "saved share"],
                [
                    [
                        r["kind"],
                        r["name"],
                        format_ns(r["length_ns"]),
                        format_ns(r["saved_ns"]),
                        f"{r['saved_share'] * 100:.1f} %",
                    ]
                    for r in what_if
                ],
            )
        )
        sec.body.extend(f"<p>{esc(note)}</p>" for note in what_if_notes(cp))
    return sec
