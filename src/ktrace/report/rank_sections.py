"""The HTML report's "Ranks" section (2 or more ranks): one heatmap with a row per rank (rank x step, rank x time
bin without steps) of GPU busy share with the communication share in its hover, scrolling inside the section past
~60 ranks; the slowest and fastest rank of each step, and the straggler table."""

from __future__ import annotations

from ktrace.analysis.rank_heatmap import RankHeatmap
from ktrace.analysis.stragglers import Stragglers
from ktrace.report import plots
from ktrace.report.content import Report
from ktrace.report.format import fmt_ns
from ktrace.report.rank_rows import (
    BASIS_NOTE,
    STEP_HEADERS,
    STRAGGLER_HEADERS,
    hosts_text,
    percent_matrix,
    rest_note,
    step_cells,
    straggler_cells,
)
from ktrace.report.sections import Section, esc, table


def ranks_section(report: Report) -> Section | None:
    """The section, or None for a trace of one rank."""
    return rank_views_section(report.dashboard.rank_heatmap, report.dashboard.summary.stragglers)


def rank_views_section(heat: RankHeatmap | None, lag: Stragglers | None) -> Section | None:
    """The section of these rank views (the single-process report's and the fleet report's), None without any."""
    if heat is None and lag is None:
        return None
    sec = Section("ranks", "Ranks")
    if heat is not None:
        per = "step" if heat.n_steps else f"time bin of {fmt_ns(heat.bins.bin_ns)}"
        sec.body.append(
            f"<p>{heat.ranks.height:,} ranks on {hosts_text(heat)}: one row per rank, sorted by host and rank, one "
            f"column per {esc(per)}. The colour is the share of the time the GPU was busy outside communication: a "
            "rank the others wait for computes while they wait inside their collectives. The hover gives busy and "
            "communication % too.</p>"
        )
        figure = _heatmap(heat)
        tall = figure["layout"]["height"] > plots.SCROLL_PX
        if tall:
            style = f"max-height:{plots.SCROLL_PX}px;overflow-y:auto;overflow-x:hidden;scrollbar-gutter:stable"
            sec.body.append(f'<div class="heatmap-scroll" style="{style}">')
        sec.figure(figure)
        if tall:
            sec.body.append("</div>")
    if lag is not None:
        sec.body += _straggler_tables(lag)
    return sec


def _heatmap(heat: RankHeatmap) -> plots.Figure:
    """Rank x step when the ranks have steps, else rank x time bin."""
    ranks = [(str(n), int(r)) for n, r in heat.ranks.iter_rows()]
    axis = "step" if heat.n_steps else "time"
    busy, comm = percent_matrix(heat, axis, "busy_share"), percent_matrix(heat, axis, "comm_share")
    if axis == "step":
        return plots.heatmap(
            "GPU busy outside communication % per rank and step", busy, comm, ranks, list(range(heat.n_steps)), "step"
        )
    x = [round((i + 0.5) * heat.bins.bin_ns / 1e9, 6) for i in range(heat.bins.n_bins)]
    return plots.heatmap(
        "GPU busy outside communication % per rank over time",
        busy,
        comm,
        ranks,
        x,
        "seconds since the first GPU record",
    )


def _straggler_tables(lag: Stragglers) -> list[str]:
    ranks, more_ranks = straggler_cells(lag)
    steps, more_steps = step_cells(lag)
    note = f"{BASIS_NOTE[lag.basis]}; slower % = mean work / the median rank's - 1."
    out = ["<h3>Stragglers</h3>", f'<p class="note">{esc(note)}</p>', table(STRAGGLER_HEADERS, ranks)]
    if more_ranks:
        out.append(f'<p class="note">{esc(rest_note(more_ranks, "ranks"))}</p>')
    out += ["<h3>Slowest and fastest rank per step (widest spread first)</h3>", table(STEP_HEADERS, steps)]
    if more_steps:
        out.append(f'<p class="note">{esc(rest_note(more_steps, "steps"))}</p>')
    return out
