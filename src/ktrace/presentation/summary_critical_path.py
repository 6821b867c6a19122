"""The critical path's section: one headline, the composition, the items on the path, the late ranks it crosses,
the what-ifs and why a what-if saves less than it takes off the path.

Row builders shared by every view (the JSON has the same numbers under the summary's critical_path key).
"""

from __future__ import annotations

from typing import Any

from ktrace.analysis.critical_path import CriticalPath
from ktrace.analysis.names import distinct_short_names
from ktrace.model.units import format_ns
from ktrace.presentation.page import Section, Table, Text
from ktrace.presentation.summary_tables import frame_rows, rows_table

ITEM_ROWS = 10
"""Items on the path in the report (the terminal shows TERMINAL_ITEMS)."""
TERMINAL_ITEMS = 5
NOTE_SHORTFALL = 0.05
"""A what-if gets a note (what_if_notes) when its saving falls short of the time it takes off the path by more
than this share of the path."""
NOTE_TARGET_CHARS = 60
MODEL_NOTE = (
    "HTA's graph model: a thread's time between top-level operators weighs nothing and waits in blocking calls "
    "count through the GPU work they wait for, so the path can be shorter than the window."
)
CROSSING_NOTE = (
    "crossed: the path passes to the rank that entered the collective last, and runs through what made it late; "
    "waited: the wait itself is on the path (the late rank's recorded work does not explain it)."
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
        for r in frame_rows(cp.composition)
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
        for r in frame_rows(cp.items)[:limit]
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
        for r in frame_rows(cp.what_if)
    ]


def what_if_notes(cp: CriticalPath) -> list[str]:
    """Why a what-if saves less than the time it takes off the path: one line per change whose saving falls short
    of that time by more than NOTE_SHORTFALL of the path (the next longest path is then nearly as long)."""
    out = []
    what_if = frame_rows(cp.what_if)
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
        for r in frame_rows(cp.crossings)
    ]


def critical_path_tables(cp: CriticalPath, items: int = ITEM_ROWS) -> tuple[Table, ...]:
    """Composition, the top `items` on the path, the late ranks it crosses (when it crosses any), the what-ifs."""
    out = [
        rows_table("critical_path_composition", "critical path: composition", composition_rows(cp), bar="share"),
        rows_table("critical_path_items", "critical path: top items", item_rows(cp, items), bar="share"),
    ]
    crossings = crossing_rows(cp)
    if crossings:
        out.append(
            rows_table(
                "critical_path_crossings",
                "critical path: late ranks (crossed: the path runs on the late rank; waited: the wait is on it)",
                crossings,
                units={"late": "text", "waiting": "text", "cause": "text"},
            )
        )
    out.append(rows_table("critical_path_what_if", "critical path: what if (new longest path)", what_if_rows(cp)))
    return tuple(out)


def critical_path_section(cp: CriticalPath | None, items: int = TERMINAL_ITEMS) -> Section | None:
    """Headline, tables and what-if notes of the median step's critical path; None without one (the summary's
    notes say why)."""
    if cp is None:
        return None
    blocks: tuple[Table | Text, ...] = (
        Text(headline(cp)),
        *critical_path_tables(cp, items),
        *(Text(n) for n in what_if_notes(cp)),
    )
    return Section("critical_path", "Critical path", blocks)
