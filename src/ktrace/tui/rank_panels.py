"""Dashboard panels of the rank-level views (2 or more ranks): a rank x time heatmap of GPU busy and communication
share in block characters, one line per rank (per host, or per run of hosts, when there are many), and the
straggler table. Each heatmap line and straggler row stands for a rank: choosing it shows that rank's timeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from rich.text import Text

from ktrace.analysis.names import distinct_short_names
from ktrace.model.display_text import printable, share_glyph
from ktrace.model.units import format_ns

if TYPE_CHECKING:  # the analyses load in the dashboard worker, not when the TUI starts
    from ktrace.analysis.dashboard import Dashboard
    from ktrace.analysis.rank_heatmap import RankHeatmap
    from ktrace.analysis.stragglers import Stragglers

HEATMAP_ROWS = 16
"""Heatmap lines: one per rank up to this many ranks, else per host (or run of hosts)."""
HEATMAP_COLS = 40
"""Time columns: with a 26-cell label a line fits an 80-column terminal's panel."""
WIDER_COLS = (80, 120)
"""More time columns for wider panels (a 140- and a 160-column terminal): the heatmap takes the width it has."""
LABEL = 26
STRAGGLERS = 5
BUSY_STYLE, COMM_STYLE = "#59a14f", "#e15759"


@dataclass
class RankPanel:
    """A panel whose body lines may stand for ranks: choosing such a line shows that rank's timeline."""

    title: str
    body: Text
    ranks: list[tuple[str, int] | None] = field(default_factory=list)
    """(node, rank) of each body line, None for a line that is not a rank's."""
    wider: dict[int, Text] = field(default_factory=dict)
    """Bodies with the same lines drawn wider, by the panel width they need (the widest that fits is shown)."""

    def body_for(self, width: int) -> Text:
        """The widest body that fits `width` columns."""
        fits = [need for need in self.wider if need <= width]
        return self.wider[max(fits)] if fits else self.body


def rank_panels(dashboard: Dashboard | None) -> list[RankPanel]:
    """The heatmap and straggler panels; none for a trace of one rank."""
    if dashboard is None or dashboard.rank_heatmap is None:
        return []
    heat = heatmap_panel(dashboard.rank_heatmap)
    heat.wider = {LABEL + 1 + cols: heatmap_panel(dashboard.rank_heatmap, cols).body for cols in WIDER_COLS}
    out = [heat]
    if dashboard.summary.stragglers is not None:
        out.append(straggler_panel(dashboard.summary.stragglers))
    return out


def _cells(values: np.ndarray, style: str) -> Text:
    out = Text()
    for v in values.tolist():
        out.append(share_glyph(v), style=style)
    return out


def heatmap_panel(heat: RankHeatmap, cols: int = HEATMAP_COLS) -> RankPanel:
    """Busy (green) and communication (red) share per rank over the GPU span, one rank (or host group) a line, in
    at most `cols` time columns."""
    span = heat.bins.bin_ns * heat.bins.n_bins
    text = Text(
        f"{heat.ranks.height:,} ranks on {len(heat.hosts()):,} hosts, {format_ns(span)} of GPU time\n",
        no_wrap=True,
        overflow="ellipsis",
    )
    ranks: list[tuple[str, int] | None] = [None]
    for value, what, style in (("busy_share", "GPU busy", BUSY_STYLE), ("comm_share", "communication", COMM_STYLE)):
        labels, shares, first = heat.coarse_rows("time", value, HEATMAP_ROWS, cols)
        text.append(f"{what} share (blank 0 % … █ 100 %) · enter: that rank's timeline\n", style="dim")
        ranks.append(None)
        printed = [printable(label) for label in labels]
        shown = distinct_short_names(printed, LABEL, plain=True)  # long host names differ late
        for label, row, at in zip(printed, shares, first, strict=True):
            text.append(shown[label].ljust(LABEL) + " ")
            text.append_text(_cells(row, style))
            text.append("\n")
            node, rank = heat.ranks.row(at)
            ranks.append((str(node), int(rank)))
    return RankPanel("ranks: GPU busy and communication share over time", text, ranks)


def straggler_panel(lag: Stragglers) -> RankPanel:
    """The ranks most slower than the median (work = step time less communication) and why."""
    text = Text(no_wrap=True, overflow="ellipsis")  # one line per rank: the cursor and clicks count lines
    text.append(f"{'slower %':>8}  {'work/step':>9}  {'rank':<{LABEL}} why (vs the median rank)\n", style="bold")
    ranks: list[tuple[str, int] | None] = [None]
    top = lag.table.head(STRAGGLERS)
    printed = [printable(f"{n}/{r}") for n, r in top.select("node", "rank").iter_rows()]
    names = distinct_short_names(printed, LABEL, plain=True)
    for r, label in zip(top.iter_rows(named=True), printed, strict=True):
        who = names[label]
        text.append(f"{r['slower_pct']:+8.1f}  {format_ns(r['work_mean_ns']):>9}  {who:<{LABEL}} ")
        text.append(f"{printable(str(r['causes']))}\n", style="dim")
        ranks.append((str(r["node"]), int(r["rank"])))
    rest = lag.table.height - (len(ranks) - 1)
    if rest > 0:
        text.append(f"and {rest:,} more ranks (ktrace report has them all)\n", style="dim")
    return RankPanel(f"stragglers ({'per step' if lag.basis == 'steps' else 'whole GPU span'})", text, ranks)
