"""The rank-level views' tables as every renderer shows them: the top N rows and a count of the rest.

At 1,000+ ranks a table of every rank or step is unreadable: the report shows the TOP_RANKS ranks the others
waited for most (ties in one row), the TOP_RANKS ranks that are most slower than the median (the step-time view)
and the TOP_STEPS steps with the widest spread between their slowest and fastest rank, then says how many it left
out. The JSON document keeps every row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ktrace.analysis.rank_heatmap import RankHeatmap
from ktrace.analysis.stragglers import Stragglers
from ktrace.report.format import fmt_ns
from ktrace.report.rows import rows

TOP_RANKS = 10
"""Straggler rows in the report (the terminal summary shows 5)."""
TOP_STEPS = 10
"""Steps in the slowest/fastest table."""
STEP_COLUMNS = (
    "step",
    "ranks",
    "median_work_ns",
    "slowest_node",
    "slowest_rank",
    "slowest_work_ns",
    "fastest_node",
    "fastest_rank",
    "fastest_work_ns",
    "spread_pct",
)
BASIS_NOTE = {
    "steps": "work = step time less communication (ranks waiting for a straggler wait inside collectives)",
    "span": "no training steps: each rank's GPU span is one step; work = span less communication",
}


WAITED_TITLE = "Ranks the others waited for"
STEP_TIME_TITLE = "Stragglers: step-time view"
WAITED_HEADERS = ("ranks", "the others waited / step", "late collectives", "why (its window before them vs the median)")
LIST_RANKS = 8
"""Ranks named in one collapsed row; the rest are counted."""


def waited_rows(s: Stragglers, top: int = TOP_RANKS) -> tuple[list[dict[str, Any]], int]:
    """The `top` rows of waited_for (the rank the others waited for most first, ties in one row) and how many rows
    are left out."""
    return rows(s.waited_for.head(top)), max(0, s.waited_for.height - top)


def ranks_text(row: dict[str, Any]) -> str:
    """A waited_for row's ranks: "node001/13", or for tied ranks "ranks 5, 13, 21 (node000, node001)"."""
    ranks: list[int] = list(row.get("ranks") or [row["rank"]])
    nodes: list[str] = sorted(set(row.get("nodes") or [row["node"]]))
    if len(ranks) == 1:
        return f"{row['node']}/{row['rank']}"
    named = ", ".join(str(r) for r in ranks[:LIST_RANKS])
    more = f" and {len(ranks) - LIST_RANKS:,} more" if len(ranks) > LIST_RANKS else ""
    hosts = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3:,} more hosts" if len(nodes) > 3 else "")
    return f"ranks {named}{more} ({hosts})"


def waited_note(s: Stragglers) -> str:
    """What the waited_for table is and how its collectives were matched, or why it is empty."""
    w = s.waited
    if w is None:
        return ""
    if w.reason is not None:
        return f"nobody waited for a rank at the collectives: {w.reason}"
    caveat = f"; {w.caveat}" if w.caveat else ""
    return (
        "the rank that arrived last at a collective while the others waited inside it; waited = its start less "
        f"theirs, averaged over them, per step; collectives matched by {w.matched_by}{caveat}"
    )


WAITED_TERMINAL_COLUMNS = ("ranks", "waited_per_step_ns", "late_collectives")


def waited_terminal_rows(s: Stragglers, top: int) -> list[dict[str, Any]]:
    """waited_rows for the terminal's table (WAITED_TERMINAL_COLUMNS, its cells formatted by their unit) and `why`."""
    return [
        {
            "ranks": ranks_text(r),
            "waited_per_step_ns": r["waited_ns_per_step"],
            "late_collectives": r["late_collectives"],
            "why": r["why"],
        }
        for r in waited_rows(s, top)[0]
    ]


def waited_title(s: Stragglers) -> str:
    """The terminal's one-line title of the waited_for table: how the collectives were matched, or why it is empty."""
    w = s.waited
    if w is None or w.reason is not None:
        return f"{WAITED_TITLE.lower()} at the collectives: none ({w.reason if w else 'no collectives'})"
    return f"{WAITED_TITLE.lower()} at the collectives (matched by {w.matched_by})"


def waited_cells(s: Stragglers, top: int = TOP_RANKS) -> tuple[list[list[object]], int]:
    """waited_rows as table cells under WAITED_HEADERS, and how many rows are left out."""
    found, rest = waited_rows(s, top)
    cells: list[list[object]] = [
        [ranks_text(r), fmt_ns(r["waited_ns_per_step"]), r["late_collectives"], r["why"]] for r in found
    ]
    return cells, rest


def straggler_rows(s: Stragglers, top: int = TOP_RANKS) -> tuple[list[dict[str, Any]], int]:
    """The `top` ranks most slower than the median (as in the JSON) and how many ranks are left out."""
    return rows(s.table.head(top)), max(0, s.table.height - top)


def step_rows(s: Stragglers, top: int = TOP_STEPS) -> tuple[list[dict[str, Any]], int]:
    """The `top` steps with the widest spread (then by step number) and how many steps are left out."""
    widest = s.per_step.sort(["spread_pct", "step"], descending=[True, False]).head(top)
    return rows(widest), max(0, s.per_step.height - top)


def hosts_text(h: RankHeatmap) -> str:
    """ "3 hosts" / "1 host"."""
    n = len(h.hosts())
    return f"{n:,} host{'' if n == 1 else 's'}"


def rest_note(rest: int, what: str) -> str:
    """ "and 12 more ranks (in the JSON report)" or "" when nothing is left out."""
    return f"and {rest:,} more {what} (every row is in the JSON report)" if rest else ""


def percent_matrix(h: RankHeatmap, axis: str, value: str) -> list[list[int | None]]:
    """The heatmap matrix in whole percent (None where a rank has no such step): what the JSON and the plot hold,
    a few characters a cell so that 4,096 ranks x 200 bins stay a few MB."""
    m: npt.NDArray[np.float64] = np.round(100.0 * h.matrix(axis, value))
    missing = np.isnan(m)
    ints: list[list[int | None]] = np.where(missing, 0, m).astype(np.int64).tolist()
    for r, c in zip(*np.nonzero(missing), strict=True):
        ints[r][c] = None
    return ints


STRAGGLER_HEADERS = ("host", "rank", "slower %", "work / step", "step", "slowest in steps", "why (vs the median rank)")
STEP_HEADERS = ("step", "ranks", "median work", "slowest", "its work", "fastest", "its work", "spread %")


def straggler_cells(s: Stragglers, top: int = TOP_RANKS) -> tuple[list[list[object]], int]:
    """straggler_rows as table cells under STRAGGLER_HEADERS, and how many ranks are left out."""
    found, rest = straggler_rows(s, top)
    cells: list[list[object]] = [
        [
            r["node"],
            r["rank"],
            f"{r['slower_pct']:+.1f}",
            fmt_ns(r["work_mean_ns"]),
            fmt_ns(r["step_mean_ns"]),
            r["slowest_steps"],
            r["causes"],
        ]
        for r in found
    ]
    return cells, rest


def step_cells(s: Stragglers, top: int = TOP_STEPS) -> tuple[list[list[object]], int]:
    """step_rows as table cells under STEP_HEADERS, and how many steps are left out."""
    found, rest = step_rows(s, top)
    cells: list[list[object]] = [
        [
            r["step"],
            r["ranks"],
            fmt_ns(r["median_work_ns"]),
            f"{r['slowest_node']}/{r['slowest_rank']}",
            fmt_ns(r["slowest_work_ns"]),
            f"{r['fastest_node']}/{r['fastest_rank']}",
            fmt_ns(r["fastest_work_ns"]),
            f"{r['spread_pct']:.1f}",
        ]
        for r in found
    ]
    return cells, rest
