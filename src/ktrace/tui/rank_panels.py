"""Dashboard panels of the rank-level views (2 or more ranks): the rank heatmap, one row per rank
(tui/rank_grid.py), and the straggler panel: the ranks the others waited for (when the stragglers analysis names
them), then the ranks slowest in step time. Each straggler line stands for a rank: choosing it shows that rank's
timeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl
from rich.text import Text

from ktrace.analysis.names import distinct_short_names
from ktrace.model.display_text import printable
from ktrace.model.units import format_ns
from ktrace.tui.rank_grid import LABEL, RankGrid, rank_grid

if TYPE_CHECKING:  # the analyses load in the dashboard worker, not when the TUI starts
    from ktrace.analysis.dashboard import Dashboard
    from ktrace.analysis.stragglers import Stragglers

STRAGGLERS = 5


@dataclass
class RankPanel:
    """A panel whose body lines may stand for ranks: choosing such a line shows that rank's timeline."""

    title: str
    body: Text
    ranks: list[tuple[str, int] | None] = field(default_factory=list)
    """(node, rank) of each body line, None for a line that is not a rank's."""


def rank_panels(dashboard: Dashboard | None) -> list[RankGrid | RankPanel]:
    """The heatmap grid and the straggler panel; none for a trace of one rank."""
    grid = rank_grid(dashboard)
    if dashboard is None or grid is None:
        return []
    out: list[RankGrid | RankPanel] = [grid]
    if dashboard.summary.stragglers is not None:
        out.append(straggler_panel(dashboard.summary.stragglers))
    return out


def straggler_panel(lag: Stragglers) -> RankPanel:
    """The ranks the others waited for (when the analysis names them: `waited_for`), then the step-time view: the
    ranks most slower than the median in work per step (work = step time less communication) and why, ranks of
    equal figures on one line (`Stragglers.step_time`, as the terminal summary shows them)."""
    waited = getattr(lag, "waited_for", None)
    waited = waited.head(STRAGGLERS) if isinstance(waited, pl.DataFrame) and waited.height else None
    step_time = lag.step_time
    top = step_time.head(STRAGGLERS)
    keys = [(str(n), int(r)) for n, r in top.select("node", "rank").iter_rows()]
    first = [] if waited is None else [(str(n), int(r)) for n, r in waited.select("node", "rank").iter_rows()]
    printed = {key: printable(f"{key[0]}/{key[1]}") for key in first + keys}
    names = distinct_short_names(list(printed.values()), LABEL, plain=True)
    tied = (
        []
        if waited is None
        else [_tie_label(r, names[printed[key]]) for r, key in zip(waited.iter_rows(named=True), first, strict=True)]
    )
    slow = [_tie_label(r, names[printed[key]]) for r, key in zip(top.iter_rows(named=True), keys, strict=True)]
    wide = max(4, *(len(n) for n in [*names.values(), *tied, *slow]))  # the rank column: as wide as its longest
    text = Text(no_wrap=True, overflow="ellipsis")  # one line per rank: the cursor and clicks count lines
    ranks: list[tuple[str, int] | None] = []
    if waited is not None:
        text.append("waited for: the rank the others waited for at the collectives\n", style="bold")
        text.append(f"{'waited/step':>11}  {'late coll.':>10}  {'rank':<{wide}} why\n", style="dim")
        ranks += [None, None]
        for r, key, label in zip(waited.iter_rows(named=True), first, tied, strict=True):
            text.append(f"{format_ns(r['waited_ns_per_step']):>11}  {r['late_collectives']:>10,}  ")
            text.append(f"{label:<{wide}} ")
            text.append(f"{printable(str(r['why']))}\n", style="dim")
            ranks.append(key)
        text.append("step time: the ranks slowest in work per step\n", style="bold")
        ranks.append(None)
    text.append(f"{'slower %':>8}  {'work/step':>9}  {'rank':<{wide}} why (vs the median rank)\n", style="bold")
    ranks.append(None)
    for r, key, label in zip(top.iter_rows(named=True), keys, slow, strict=True):
        text.append(f"{r['slower_pct']:+8.1f}  {format_ns(r['work_mean_ns']):>9}  {label:<{wide}} ")
        text.append(f"{printable(str(r['causes']))}\n", style="dim")
        ranks.append(key)
    rest = int(step_time.slice(len(keys))["ranks"].list.len().sum())  # the ranks of the rows left out
    if rest > 0:
        text.append(f"and {rest:,} more ranks (ktrace report has them all)\n", style="dim")
    basis = "per step" if lag.basis == "steps" else "whole GPU span"
    return RankPanel(f"stragglers ({'waited for, then step time, ' if waited is not None else ''}{basis})", text, ranks)


TIED = 4
"""Tied ranks named in one waited-for or step-time line; the rest are counted."""


def _tie_label(row: dict[str, Any], label: str) -> str:
    """A waited_for or step_time row's rank label, or for ranks tied in one row "ranks 5, 13, 21, 29 +1" (enter:
    the first)."""
    tied = list(row.get("ranks") or [])
    if len(tied) <= 1:
        return label
    more = f" +{len(tied) - TIED}" if len(tied) > TIED else ""
    return "ranks " + ", ".join(str(r) for r in tied[:TIED]) + more
