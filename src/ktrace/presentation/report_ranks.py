"""The report's "Ranks" section (2 or more ranks), built once for every view: one heatmap Figure with a row per rank
(rank x step, or rank x time bin without steps) of the GPU's busy share outside communication, busy and
communication % in its hover; then the ranks the others waited for, the step-time view and the slowest and fastest
rank of each step, each the top rows with a count of the rest (the JSON report keeps every row).

The HTML report draws the Figure with plotly (scrolling inside the section past ~60 ranks), the Markdown report as a
text heatmap with a line per rank; both lay the tables out as they are.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ktrace.analysis.rank_heatmap import RankHeatmap
from ktrace.analysis.stragglers import Stragglers
from ktrace.model.units import format_ns
from ktrace.presentation.page import Block, Figure, Section, Table, Text
from ktrace.presentation.summary_ranks import TOP_RANKS, straggler_table, waited_table
from ktrace.presentation.summary_tables import frame_rows, rows_table

RANKS_KEY = "ranks"
TOP_STEPS = 10
"""Steps in the slowest/fastest table."""
STEP_COLUMNS = (
    "step",
    "ranks",
    "median_work_ns",
    "slowest",
    "slowest_work_ns",
    "fastest",
    "fastest_work_ns",
    "spread_pct",
)
Z_TITLE = "busy outside communication %"


def percent_matrix(h: RankHeatmap, axis: str, value: str) -> list[list[int | None]]:
    """The heatmap matrix in whole percent (None where a rank has no such step): what the JSON and the plot hold,
    a few characters a cell so that 4,096 ranks x 200 bins stay a few MB."""
    m: npt.NDArray[np.float64] = np.round(100.0 * h.matrix(axis, value))
    missing = np.isnan(m)
    ints: list[list[int | None]] = np.where(missing, 0, m).astype(np.int64).tolist()
    for r, c in zip(*np.nonzero(missing), strict=True):
        ints[r][c] = None
    return ints


def hosts_text(h: RankHeatmap) -> str:
    """ "3 hosts" / "1 host"."""
    n = len(h.hosts())
    return f"{n:,} host{'' if n == 1 else 's'}"


def heatmap_figure(heat: RankHeatmap) -> Figure:
    """Rank x step when the ranks have steps, else rank x time bin: z = busy % less communication % (a rank the
    others wait for computes while they wait inside their collectives), busy and communication % as hover."""
    axis = "step" if heat.n_steps else "time"
    busy, comm = percent_matrix(heat, axis, "busy_share"), percent_matrix(heat, axis, "comm_share")
    z = [
        [None if b is None or c is None else max(0, b - c) for b, c in zip(brow, crow, strict=True)]
        for brow, crow in zip(busy, comm, strict=True)
    ]
    ranks = [[str(n), int(r)] for n, r in heat.ranks.iter_rows()]
    if axis == "step":
        title, x_title, column_what = "GPU busy outside communication % per rank and step", "step", "step"
        x: list[int] | list[float] = list(range(heat.n_steps))
    else:
        title, x_title = "GPU busy outside communication % per rank over time", "seconds since the first GPU record"
        column_what = f"time bin of {format_ns(heat.bins.bin_ns)}"
        x = [round((i + 0.5) * heat.bins.bin_ns / 1e9, 6) for i in range(heat.bins.n_bins)]
    data: dict[str, Any] = {
        "rows": [f"{n}/{r}" for n, r in ranks],
        "row_what": "rank",
        "ranks": ranks,
        "columns": x,
        "x_title": x_title,
        "column_what": column_what,
        "z": z,
        "hover": {"busy": busy, "comm": comm},
        "z_title": Z_TITLE,
    }
    return Figure("rank_heatmap", title, "heatmap", data)


def heatmap_text(heat: RankHeatmap) -> Text:
    """What the heatmap shows, in one paragraph."""
    per = "step" if heat.n_steps else f"time bin of {format_ns(heat.bins.bin_ns)}"
    return Text(
        f"{heat.ranks.height:,} ranks on {hosts_text(heat)}: one row per rank, sorted by host and rank, one column "
        f"per {per}. The colour is the share of the time the GPU was busy outside communication: a rank the others "
        "wait for computes while they wait inside their collectives. The hover gives busy and communication % too."
    )


def step_table(lag: Stragglers, top: int = TOP_STEPS) -> Table:
    """The `top` steps with the widest spread between their slowest and fastest rank (then by step number)."""
    widest = lag.per_step.sort(["spread_pct", "step"], descending=[True, False]).head(top)
    found = [
        {
            **r,
            "slowest": f"{r['slowest_node']}/{r['slowest_rank']}",
            "fastest": f"{r['fastest_node']}/{r['fastest_rank']}",
        }
        for r in frame_rows(widest)
    ]
    return rows_table(
        "slowest_fastest",
        "Slowest and fastest rank per step (widest spread first)",
        found,
        STEP_COLUMNS,
        units={"step": "id", "ranks": "number", "slowest": "text", "fastest": "text"},
        rest=max(0, lag.per_step.height - top),
        rest_what="steps",
    )


def ranks_section(heat: RankHeatmap | None, lag: Stragglers | None, top: int = TOP_RANKS) -> Section | None:
    """The section (see the module doc); None for a trace of one rank."""
    if heat is None and lag is None:
        return None
    blocks: list[Block] = []
    if heat is not None:
        blocks += [heatmap_text(heat), heatmap_figure(heat)]
    if lag is not None:
        blocks += [waited_table(lag, top, why_column=True), straggler_table(lag, top, why_column=True), step_table(lag)]
    return Section(RANKS_KEY, "Ranks", tuple(blocks))
