"""The rank-level views' tables as every renderer shows them: the top N rows and a count of the rest.

At 1,000+ ranks a table of every rank or step is unreadable: the report shows the TOP_RANKS ranks that are most
slower than the median and the TOP_STEPS steps with the widest spread between their slowest and fastest rank,
then says how many it left out. The JSON document keeps every row.
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
