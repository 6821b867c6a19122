"""The dashboard's rank heatmap as a grid with one row per rank at any rank count (never one line per host): rank x
step (rank x time bin without steps), each column a GPU busy (green) and a communication (red) block, drawn a
window at a time so that 4,096 ranks scroll in any terminal. Outlier ranks (the ranks the others waited for, then
the ranks whose busy share, communication share or step time is furthest from the median rank's) are marked and
named in the first line.

`rank_grid(dashboard)` runs in the dashboard worker; `draw(grid, view, width)` draws one window (a `GridView`:
cursor, first row, rows, time/step bins per column, first column) for the widget in tui/widgets/rank_heatmap.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import polars as pl
from rich.text import Span, Text

from ktrace.analysis.names import distinct_short_names
from ktrace.model.display_text import BLOCK_LEVELS, printable, share_glyph
from ktrace.model.units import format_ns

if TYPE_CHECKING:  # the analyses load in the dashboard worker, not when the TUI starts
    from ktrace.analysis.dashboard import Dashboard
    from ktrace.analysis.rank_heatmap import RankHeatmap
    from ktrace.analysis.stragglers import Stragglers

LABEL = 26
"""Widest rank label ("host/rank", cut where labels differ)."""
OUTLIERS = 5
"""Ranks named in the outlier line."""
WAITED = 3
"""Of those, at most this many ranks the others waited for (first), the rest by their distance from the median."""
OUTLIER_MIN = 0.05
"""A rank is an outlier when a measure is at least this far (relative) from the median rank's."""
BUSY_STYLE, COMM_STYLE, OUTLIER_STYLE = "#59a14f", "#e15759", "bold yellow"
MAX_GLYPHS = 4
"""Widest cell: 4 busy and 4 communication glyphs."""
HEADER_LINES = 2
"""Lines above the rank rows: the outlier line and the axis line."""


@dataclass(frozen=True)
class Outlier:
    """A rank marked in the grid and named in its first line."""

    node: str
    rank: int
    why: str
    """ "waited for 1.2 ms/step", "comm -57 %", "step +21 %", "busy -8 %"."""


@dataclass(frozen=True)
class RankGrid:
    """Everything the heatmap widget draws: small (4,096 ranks x 200 bins of floats)."""

    title: str
    summary: str
    """ "64 ranks on 8 hosts, 12 steps"."""
    axis: str
    """ "step" or "time"."""
    bin_ns: int
    """Width of a time bin (axis "time")."""
    ranks: list[tuple[str, int]]
    """(node, rank) of each row, sorted by host and rank."""
    labels: list[str]
    """Each row's label, printable and distinct, at most LABEL characters."""
    busy: npt.NDArray[np.float64]
    """[rows, steps or bins] GPU busy share 0-1 (NaN: the rank has no such step)."""
    comm: npt.NDArray[np.float64]
    """[rows, steps or bins] communication share 0-1."""
    outliers: list[Outlier]
    label_width: int
    """Characters of the label column (the longest label)."""

    @property
    def n_bins(self) -> int:
        """Steps or time bins."""
        return int(self.busy.shape[1])

    def row_of(self, node: str, rank: int) -> int:
        """The row of a rank."""
        return self.ranks.index((node, rank))


@dataclass(frozen=True)
class GridView:
    """Which window of the grid is drawn."""

    cursor: int = 0
    top: int = 0
    rows: int = 12
    group: int = 0
    """Steps (time bins) per column; 0: as few as fit the width."""
    first_col: int = 0


def rank_grid(dashboard: Dashboard | None) -> RankGrid | None:
    """The grid of a dashboard with 2+ ranks, else None."""
    if dashboard is None or dashboard.rank_heatmap is None:
        return None
    return grid_of(dashboard.rank_heatmap, dashboard.summary.stragglers)


def grid_of(heat: RankHeatmap, lag: Stragglers | None) -> RankGrid:
    """The grid of a rank heatmap: rank x step when there are steps, else rank x time bin."""
    axis = "step" if heat.n_steps else "time"
    ranks = [(str(n), int(r)) for n, r in heat.ranks.iter_rows()]
    printed = [printable(f"{n}/{r}") for n, r in ranks]
    short = distinct_short_names(printed, LABEL, plain=True)  # long host names differ late
    busy, comm = heat.matrix(axis, "busy_share"), heat.matrix(axis, "comm_share")
    step_ns = _step_ns(heat, ranks) if axis == "step" else None
    n = heat.n_steps if axis == "step" else heat.bins.n_bins
    hosts = len(heat.hosts())
    what = f"{n:,} step{'' if n == 1 else 's'}" if axis == "step" else f"{format_ns(heat.bins.bin_ns * n)} of GPU time"
    labels = [short[p] for p in printed]
    return RankGrid(
        title="ranks: GPU busy and communication share " + ("per step" if axis == "step" else "over time"),
        summary=f"{len(ranks):,} ranks on {hosts:,} host{'' if hosts == 1 else 's'}, {what}",
        axis=axis,
        bin_ns=heat.bins.bin_ns,
        ranks=ranks,
        labels=labels,
        busy=busy,
        comm=comm,
        outliers=outliers(ranks, busy, comm, step_ns, lag),
        label_width=max((len(x) for x in labels), default=1),
    )


def _step_ns(heat: RankHeatmap, ranks: list[tuple[str, int]]) -> npt.NDArray[np.float64]:
    """Each rank's mean step time, in row order."""
    means = heat.by_step.group_by("node", "rank").agg(pl.col("step_ns").mean().alias("mean"))
    table = dict(zip(zip(means["node"].to_list(), means["rank"].to_list(), strict=True), means["mean"], strict=True))
    return np.array([table.get(key, np.nan) for key in ranks], dtype=np.float64)


def _row_means(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Mean of each row without NaN (NaN for a row of NaN only)."""
    seen = ~np.isnan(values)
    return np.where(seen.any(axis=1), np.where(seen, values, 0.0).sum(axis=1) / np.maximum(seen.sum(axis=1), 1), np.nan)


def outliers(
    ranks: list[tuple[str, int]],
    busy: npt.NDArray[np.float64],
    comm: npt.NDArray[np.float64],
    step_ns: npt.NDArray[np.float64] | None,
    lag: Stragglers | None,
) -> list[Outlier]:
    """The ranks the others waited for (stragglers.waited_for, when the analysis has it), then up to OUTLIERS ranks
    by how far (relative) their mean busy share, communication share or step time is from the median rank's, at
    least OUTLIER_MIN."""
    out = _waited_for(lag, set(ranks))
    measures = [("busy", _row_means(busy)), ("comm", _row_means(comm))]
    if step_ns is not None:
        measures.append(("step", step_ns))
    deviations, names = [], []
    for name, values in measures:
        median = float(np.nanmedian(values)) if not np.isnan(values).all() else 0.0
        if median > 0:
            deviations.append(np.nan_to_num((values - median) / median))
            names.append(name)
    if not deviations:
        return out[:OUTLIERS]
    dev = np.stack(deviations)  # [measures, ranks]
    worst = np.abs(dev).argmax(axis=0)
    score = np.abs(dev).max(axis=0)
    taken = {(o.node, o.rank) for o in out}
    for row in np.argsort(-score, kind="stable").tolist():
        if len(out) >= OUTLIERS or score[row] < OUTLIER_MIN:
            break
        if ranks[row] not in taken:
            pct = 100.0 * float(dev[worst[row], row])
            node, rank = ranks[row]
            out.append(Outlier(node, rank, f"{names[worst[row]]} {pct:+.0f} %"))
    return out


def _waited_for(lag: Stragglers | None, known: set[tuple[str, int]]) -> list[Outlier]:
    """The ranks the others waited for, worst first (empty until the stragglers analysis names them)."""
    frame = getattr(lag, "waited_for", None)
    if not isinstance(frame, pl.DataFrame) or not frame.height:
        return []
    out: list[Outlier] = []
    for r in frame.head(WAITED).iter_rows(named=True):
        key = (str(r["node"]), int(r["rank"]))
        if key in known:
            out.append(Outlier(key[0], key[1], f"waited for {format_ns(r['waited_ns_per_step'])}/step"))
    return out


def fit_group(grid: RankGrid, width: int) -> int:
    """Fewest steps (bins) per column that show every step in `width` characters."""
    return max(1, -(-grid.n_bins // cell_columns(grid, width)))


def cell_columns(grid: RankGrid, width: int) -> int:
    """Columns of two characters that fit beside the labels."""
    return max(1, (width - grid.label_width - 2) // 2)


def columns(grid: RankGrid, group: int) -> int:
    """Columns of the whole grid at `group` steps (bins) a column."""
    return max(1, -(-grid.n_bins // group))


def _grouped(values: npt.NDArray[np.float64], group: int) -> npt.NDArray[np.float64]:
    """[rows, columns]: the mean of each `group` consecutive columns, NaN left out."""
    rows, n = values.shape
    padded = np.full((rows, -(-n // group) * group), np.nan)
    padded[:, :n] = values
    blocks = padded.reshape(rows, -1, group)
    seen = ~np.isnan(blocks)
    total = np.where(seen, blocks, 0.0).sum(axis=2)
    return np.where(seen.any(axis=2), total / np.maximum(seen.sum(axis=2), 1), np.nan)


def draw(grid: RankGrid, view: GridView, width: int) -> Text:
    """The outlier line, the axis line and the view's rows of the grid, `width` characters wide."""
    group = view.group or fit_group(grid, width)
    shown = cell_columns(grid, width)
    first = max(0, min(view.first_col, columns(grid, group) - shown))
    lo, hi = first * group, min(grid.n_bins, (first + shown) * group)
    rows = range(view.top, min(len(grid.ranks), view.top + view.rows))
    busy = _grouped(grid.busy[rows.start : rows.stop, lo:hi], group)
    comm = _grouped(grid.comm[rows.start : rows.stop, lo:hi], group)
    text = Text(no_wrap=True, overflow="ellipsis")  # one line per row: the cursor and clicks count lines
    for i, head in enumerate((outlier_line(grid), Text(axis_line(grid, group, lo, hi), style="dim"))):
        head.truncate(width, overflow="ellipsis")
        text.append_text(head if i == 0 else Text("\n").append_text(head))
    marked = {(o.node, o.rank) for o in grid.outliers}
    glyphs = cell_glyphs(busy.shape[1], width - grid.label_width - 2)
    cells = _cell_strings(busy, comm, glyphs)
    # One string and its spans for every row: appending cell by cell took 60 ms a window at 4,096 ranks x 50 steps.
    parts: list[str] = []
    spans: list[Span] = []
    at = 0  # where the next row starts in the rows' string
    step = 2 * glyphs + (1 if glyphs > 1 else 0)
    for i, row in enumerate(rows):
        hot = grid.ranks[row] in marked
        label = ("!" if hot else " ") + grid.labels[row].ljust(grid.label_width)
        parts.append("\n" + label + " " + cells[i])
        start = at + 1
        spans.append(Span(start, start + 1, OUTLIER_STYLE))  # the "!" (reversed under the cursor: a bar)
        if hot:
            spans.append(Span(start + 1, start + len(label), OUTLIER_STYLE))
        if row == view.cursor:
            spans.append(Span(start, start + len(label), "reverse"))  # the label only: reversed cells hide shares
        first = start + len(label) + 1
        for c in range(busy.shape[1]):
            spans += [
                Span(first + c * step, first + c * step + glyphs, BUSY_STYLE),
                Span(first + c * step + glyphs, first + c * step + 2 * glyphs, COMM_STYLE),
            ]
        at += len(parts[-1])
    text.append_text(Text("".join(parts), spans=spans))
    return text


def _cell_strings(busy: npt.NDArray[np.float64], comm: npt.NDArray[np.float64], glyphs: int) -> list[str]:
    """Each row's columns: `glyphs` busy then communication blocks each, a space between columns when wider than
    two characters."""
    gap = " " if glyphs > 1 else ""
    b = np.char.multiply(_glyphs(busy), glyphs)
    c = np.char.multiply(_glyphs(comm), glyphs)
    return [
        "".join(f"{x}{y}{gap}" for x, y in zip(brow, crow, strict=True))
        for brow, crow in zip(b.tolist(), c.tolist(), strict=True)
    ]


def _glyphs(shares: npt.NDArray[np.float64]) -> npt.NDArray[np.str_]:
    """share_glyph of every share (vectorized)."""
    levels = np.array(
        [share_glyph(i / (len(BLOCK_LEVELS) - 1)) for i in range(len(BLOCK_LEVELS))] + [share_glyph(np.nan)]
    )
    index = np.round(np.clip(np.nan_to_num(shares), 0.0, 1.0) * (len(BLOCK_LEVELS) - 1)).astype(np.int64)
    return levels[np.where(np.isnan(shares), len(BLOCK_LEVELS), index)]


def cell_glyphs(cols: int, chars: int) -> int:
    """Glyphs of each share in a column: 1 (two characters a column) when the columns only just fit, else up to
    MAX_GLYPHS and a space between columns, so that a few steps fill a wide panel."""
    return max(1, min(MAX_GLYPHS, (chars // max(cols, 1) - 1) // 2))


def outlier_line(grid: RankGrid) -> Text:
    """ "outliers: rank 13 (comm -57 %), ..." (or that there are none)."""
    if not grid.outliers:
        return Text(f"outliers: none (every rank within {OUTLIER_MIN:.0%} of the median) · {grid.summary}", style="dim")
    unique = len({r for _, r in grid.ranks}) == len(grid.ranks)
    names = dict(zip(grid.ranks, grid.labels, strict=True))
    text = Text("outliers: ", style="bold")
    for i, o in enumerate(grid.outliers):
        who = f"rank {o.rank}" if unique else names[(o.node, o.rank)]
        text.append(("" if i == 0 else ", ") + f"{who} ({o.why})", style=OUTLIER_STYLE)
    return text


def axis_line(grid: RankGrid, group: int, lo: int, hi: int) -> str:
    """What the drawn columns cover, and the legend."""
    if grid.axis == "step":
        where = f"steps {lo}-{hi - 1} of {grid.n_bins}, {group} step{'' if group == 1 else 's'} a column"
    else:
        span = format_ns(grid.bin_ns * grid.n_bins)
        where = f"{format_ns(grid.bin_ns * lo)}-{format_ns(grid.bin_ns * hi)} of {span}, {format_ns(grid.bin_ns * group)} a column"
    return f"{where} · each: busy (green) comm (red) · +/- zoom, h/l pan, enter: timeline"
