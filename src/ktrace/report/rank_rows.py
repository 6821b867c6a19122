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
from ktrace.presentation.summary_ranks import BASIS_NOTE as BASIS_NOTE
from ktrace.presentation.summary_ranks import TOP_RANKS as TOP_RANKS
from ktrace.presentation.summary_ranks import WAITED_TITLE as WAITED_TITLE
from ktrace.presentation.summary_ranks import ranks_text, straggler_rows, waited_rows
from ktrace.report.format import fmt_ns
from ktrace.report.rows import rows

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
STEP_TIME_TITLE = "Stragglers: step-time view"
WAITED_HEADERS = ("ranks", "the others waited / step", "late collectives", "why (its window before them vs the median)")


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


def waited_cells(s: Stragglers, top: int = TOP_RANKS) -> tuple[list[list[object]], int]:
    """waited_rows as table cells under WAITED_HEADERS, and how many rows are left out."""
    found, rest = waited_rows(s, top)
    cells: list[list[object]] = [
        [ranks_text(r), fmt_ns(r["waited_ns_per_step"]), r["late_collectives"], r["why"]] for r in found
    ]
    return cells, rest


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


STRAGGLER_HEADERS = ("ranks", "slower %", "work / step", "step", "slowest in steps", "why (vs the median rank)")
STEP_HEADERS = ("step", "ranks", "median work", "slowest", "its work", "fastest", "its work", "spread %")


def straggler_cells(s: Stragglers, top: int = TOP_RANKS) -> tuple[list[list[object]], int]:
    """The step-time view's top rows as table cells under STRAGGLER_HEADERS (Stragglers.step_time: ranks of equal
    figures in one row), and how many rows are left out."""
    found, rest = straggler_rows(s, top)  # each row's `ranks`: its ranks_text
    cells: list[list[object]] = [
        [
            r["ranks"],
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
