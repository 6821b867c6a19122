"""The critical path in the reports: one headline, the composition, the items on the path and the what-ifs.

Row builders shared by the terminal summary, the Markdown report and the HTML section (the JSON has the same
numbers under the summary's critical_path key), so every view shows the same figures.
"""

from __future__ import annotations

from typing import Any

from ktrace.analysis.critical_path import CriticalPath
from ktrace.analysis.names import distinct_short_names
from ktrace.model.units import format_ns
from ktrace.report import plots
from ktrace.report.content import Report
from ktrace.report.rows import rows
from ktrace.report.sections import Section, esc, table

ITEM_ROWS = 10
NOTE_SHORTFALL = 0.05
"""A what-if gets a note (what_if_notes) when its saving falls short of the time it takes off the path by more
than this share of the path."""
NOTE_TARGET_CHARS = 60
MODEL_NOTE = (
    "HTA's graph model: a thread's time between top-level operators weighs nothing and waits in blocking calls "
    "count through the GPU work they wait for, so the path can be shorter than the window."
)
CATEGORY_LABELS = {
    "cpu": "CPU (operators, runtime calls)",
    "launch_delay": "launch delay",
    "gpu_gap": "gap between GPU records",
    "gpu_compute": "GPU compute",
    "communication": "communication",
    "memory": "memcpy / memset",
    "sync": "sync edges (weightless)",
    "rank_wait": "waiting for another rank",
}


def headline(cp: CriticalPath) -> str:
    """One line: what the window is and how long its critical path is, and its largest share."""
    window = cp.end_ns - cp.start_ns
    top = max(cp.composition.iter_rows(named=True), key=lambda r: r["ns"])
    share = f"; {top['share'] * 100:.0f} % {CATEGORY_LABELS[top['category']]}" if top["ns"] else ""
    where = f"{cp.node} rank {cp.rank}" if cp.ranks == 1 else f"joined by collectives, ends on {cp.node} rank {cp.rank}"
    beyond = (
        f" (with {format_ns(cp.beyond_window_ns)} of GPU work launched in it that ran past it)"
        if cp.beyond_window_ns
        else ""
    )
    return (
        f"critical path of {cp.label} ({where}): {format_ns(cp.length_ns)} in a {format_ns(window)} window{beyond}, "
        f"{cp.path_events:,} events on it{share}"
    )


def composition_rows(cp: CriticalPath) -> list[dict[str, Any]]:
    """Categories with time or edges on the path: kind (label), time_ns, share, edges."""
    return [
        {"kind": CATEGORY_LABELS[r["category"]], "time_ns": r["ns"], "share": r["share"], "edges": r["edges"]}
        for r in rows(cp.composition)
        if r["ns"] or r["edges"]
    ]


def item_rows(cp: CriticalPath, limit: int = ITEM_ROWS) -> list[dict[str, Any]]:
    """The operators, runtime calls and GPU records with the most time on the path: kind, name, time_ns,
    share (of the path), edges."""
    return [
        {
            "kind": r["kind"],
            "name": r["name"],
            "time_ns": r["ns"],
            "share": r["ns"] / cp.length_ns if cp.length_ns else 0.0,
            "edges": r["edges"],
        }
        for r in rows(cp.items)[:limit]
    ]


def what_if_rows(cp: CriticalPath) -> list[dict[str, Any]]:
    """kind (the change), name (its target), length_ns (the new path), saved_ns, saved_share."""
    return [
        {
            "kind": r["change"],
            "name": r["target"],
            "length_ns": r["length_ns"],
            "saved_ns": r["saved_ns"],
            "saved_share": r["saved_ns"] / cp.length_ns if cp.length_ns else 0.0,
        }
        for r in rows(cp.what_if)
    ]


def what_if_notes(cp: CriticalPath) -> list[str]:
    """Why a what-if saves less than the time it takes off the path: one line per change whose saving falls short
    of that time by more than NOTE_SHORTFALL of the path (the next longest path is then nearly as long)."""
    out = []
    what_if = rows(cp.what_if)
    targets = distinct_short_names([r["target"] for r in what_if], NOTE_TARGET_CHARS, plain=True)
    for r in what_if:
        short = r["removed_ns"] - r["saved_ns"]
        if r["removed_ns"] <= 0 or short <= NOTE_SHORTFALL * cp.length_ns:
            continue
        where = "" if r["next_rank"] is None else f", ending on {r['next_node']} rank {r['next_rank']}"
        out.append(
            f"{r['change']} {targets[r['target']]}: takes {format_ns(r['removed_ns'])} off this "
            f"path, yet saves {format_ns(r['saved_ns'])}: another path, {format_ns(r['length_ns'])} long (mostly "
            f"{CATEGORY_LABELS[r['next_category']]}{where}), is then the longest"
        )
    return out


def crossing_rows(cp: CriticalPath) -> list[dict[str, Any]]:
    """Where the path meets another rank: kind (crossed / waited), name (the collective), late (node/rank),
    waiting (node/rank), waited_ns, cause (the late rank's largest item on the path before it: kind and name;
    None for a wait) and cause_time_ns (None for a wait)."""
    if cp.crossings is None:
        return []
    return [
        {
            "kind": r["on_path"],
            "name": r["collective"],
            "late": f"{r['late_node']}/{r['late_rank']}",
            "waiting": f"{r['waiting_node']}/{r['waiting_rank']}",
            "waited_ns": r["waited_ns"],
            "cause": f"{r['cause_kind']} {r['cause_name']}".strip() or None,
            "cause_time_ns": r["cause_ns"] if (r["cause_kind"] or r["cause_name"]) else None,
        }
        for r in rows(cp.crossings)
    ]


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


CROSSING_NOTE = (
    "crossed: the path passes to the rank that entered the collective last, and runs through what made it late; "
    "waited: the wait itself is on the path (the late rank's recorded work does not explain it)."
)
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
