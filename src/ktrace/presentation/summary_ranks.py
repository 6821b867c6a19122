"""The summary's sections across ranks: load balance (per rank, and its spreads) and the stragglers: the ranks the
others waited for at the collectives, then the step-time view.

The rank tables (the top N, ties in one row, and how many are left out) are defined here once: the terminal
summary shows them with each rank's why on a line of its own, the report (presentation.report_ranks) with a why
column.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ktrace.presentation.cells import Unit, format_value
from ktrace.presentation.page import Section, Table, Text
from ktrace.presentation.summary_tables import capped, frame_rows, frame_table, json_float, rows_table

if TYPE_CHECKING:  # (types only: the multi-rank analyses are imported where a summary has 2+ ranks)
    from ktrace.analysis.ranks import LoadBalance
    from ktrace.analysis.stragglers import Stragglers

TOP_RANKS = 10
"""Straggler rows in the report (the terminal summary shows TERMINAL_STRAGGLERS; the JSON every rank)."""
TERMINAL_STRAGGLERS = 5
"""Straggler rows in the terminal summary."""
BASIS_NOTE = {
    "steps": "work = step time less communication (ranks waiting for a straggler wait inside collectives)",
    "span": "no training steps: each rank's GPU span is one step; work = span less communication",
}
WAITED_TITLE = "Ranks the others waited for"
LIST_RANKS = 5
"""Ranks named in one collapsed row; the rest are counted (every rank is in the JSON)."""
STRAGGLER_COLUMNS = ("ranks", "slower_pct", "work_mean_ns", "step_mean_ns", "slowest_steps")
WAITED_TERMINAL_COLUMNS = ("ranks", "waited_per_step_ns", "late_collectives")


def waited_rows(s: Stragglers, top: int = TOP_RANKS) -> tuple[list[dict[str, Any]], int]:
    """The `top` rows of waited_for (the rank the others waited for most first, ties in one row) and how many rows
    are left out."""
    return frame_rows(s.waited_for.head(top)), max(0, s.waited_for.height - top)


def ranks_text(row: dict[str, Any]) -> str:
    """A waited_for row's ranks, short enough for an 80-column table: "node001/13"; tied ranks "ranks 5, 13
    (node000)" or "ranks 5, 13, 21, 29, 37 +3 on 8 hosts"."""
    ranks: list[int] = list(row.get("ranks") or [row["rank"]])
    nodes = sorted(set(row.get("nodes") or [row["node"]]))
    if len(ranks) == 1:
        return f"{row['node']}/{row['rank']}"
    named = ", ".join(str(r) for r in ranks[:LIST_RANKS])
    more = f" +{len(ranks) - LIST_RANKS:,}" if len(ranks) > LIST_RANKS else ""
    where = f" ({nodes[0]})" if len(nodes) == 1 else f" on {len(nodes):,} hosts"
    return f"ranks {named}{more}{where}"


def waited_terminal_rows(s: Stragglers, top: int) -> list[dict[str, Any]]:
    """waited_rows for the terminal's table (WAITED_TERMINAL_COLUMNS) and `why`."""
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


def straggler_rows(s: Stragglers, top: int = TOP_RANKS) -> tuple[list[dict[str, Any]], int]:
    """The `top` rows of the step-time view (Stragglers.step_time: ranks of equal figures in one row, `ranks` its
    ranks_text), most slower than the median first, and how many rows are left out."""
    found = [{**r, "ranks": ranks_text(r)} for r in frame_rows(s.step_time.head(top))]
    return found, max(0, s.step_time.height - top)


def spreads_line(balance: LoadBalance) -> str:
    """Busy and step spread and the utilization histograms' largest distance, in one line."""
    distance = json_float(balance.histogram_distance)
    return (
        f"busy spread {format_value('share', json_float(balance.busy_spread))}   step spread "
        f"{format_value('share', json_float(balance.step_spread))}   utilization histogram distance "
        f"{'-' if distance is None else f'{distance:.3f}'} ({balance.source}; SageMaker flags > 0.5)"
    )


def load_balance_section(balance: LoadBalance | None, *, per_rank: bool = True) -> Section | None:
    """The load balance across ranks (its per-rank table unless not `per_rank`) and its spreads; None with fewer
    than 2 ranks."""
    if balance is None:
        return None
    found = frame_table("load_balance", "load balance across ranks", balance.per_rank)
    table = (capped(found, "busy_ns", descending=False, first="least busy"),) if per_rank else ()
    return Section("load_balance", "Load balance across ranks", (*table, Text(spreads_line(balance))))


def waited_note(s: Stragglers) -> str:
    """What the waited_for table is and how its collectives were matched (the report's line under it)."""
    w = s.waited
    if w is None or w.reason is not None:
        return ""
    caveat = f"; {w.caveat}" if w.caveat else ""
    return (
        "the rank that arrived last at a collective while the others waited inside it; waited = its start less "
        f"theirs, averaged over them, per step; collectives matched by {w.matched_by}{caveat}"
    )


def waited_table(lag: Stragglers, top: int, *, why_column: bool = False) -> Table:
    """The `top` ranks the others waited for at the collectives (ties in one row); each one's why on a line of its
    own (a terminal lacks the width), or as a last column (`why_column`: the report, with a line saying what the
    table is)."""
    found = waited_terminal_rows(lag, top)
    title = waited_title(lag)
    if why_column:
        note = waited_note(lag)
        why: tuple[str, ...] = (note,) if note else ()
        keys: tuple[str, ...] = (*WAITED_TERMINAL_COLUMNS, "why")
        title = title[0].upper() + title[1:]
    else:
        why, keys = tuple(f"  why {r['ranks']}: {r['why']}" for r in found), WAITED_TERMINAL_COLUMNS
    rest = max(0, lag.waited_for.height - top)
    return rows_table(
        "waited_for",
        title,
        found,
        keys,
        units={"ranks": "text", "why": "text"},
        rest=rest,
        rest_what="ranks",
        lines=why,
    )


STEP_TIME_LABELS = {"work_mean_ns": "work / step", "step_mean_ns": "step time"}


def straggler_table(lag: Stragglers, top: int, *, why_column: bool = False) -> Table:
    """The step-time view: the `top` ranks most slower than the median (ties in one row), their causes on lines of
    their own (kernel names need the width a terminal's column lacks) or as a last column (`why_column`: the
    report, with what the view is on a line under it), and how many ranks are left out."""
    found, rest = straggler_rows(lag, top)
    if why_column:
        title = "Stragglers: step-time view"
        why: tuple[str, ...] = (f"{BASIS_NOTE[lag.basis]}; slower % = mean work / the median rank's - 1",)
        keys: tuple[str, ...] = (*STRAGGLER_COLUMNS, "causes")
    else:
        title = f"step-time view: stragglers ({BASIS_NOTE[lag.basis]})"
        why, keys = tuple(f"  why {r['ranks']}: {r['causes']}" for r in found if r["causes"]), STRAGGLER_COLUMNS
    units: dict[str, Unit] = {"ranks": "text", "causes": "text"}
    table = rows_table("stragglers", title, found, keys, units=units, rest=rest, rest_what="ranks", lines=why)
    labelled = tuple(replace(c, label=STEP_TIME_LABELS.get(c.key, c.label)) for c in table.columns)
    return replace(table, columns=labelled)


def stragglers_section(lag: Stragglers | None, top: int = TERMINAL_STRAGGLERS) -> Section | None:
    """The ranks the others waited for, then the step-time view; None with fewer than 2 ranks."""
    if lag is None:
        return None
    return Section("stragglers", "Stragglers", (waited_table(lag, top), straggler_table(lag, top)))
