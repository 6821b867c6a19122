"""The HTML report's "Ranks" section (2 or more ranks): rank x time and rank x step heatmaps of GPU busy and
communication share, the slowest and fastest rank of each step, and the straggler table."""

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

SHARES = (("busy_share", "GPU busy"), ("comm_share", "communication"))


def ranks_section(report: Report) -> Section | None:
    """The section, or None for a trace of one rank."""
    return rank_views_section(report.dashboard.rank_heatmap, report.dashboard.summary.stragglers)


def rank_views_section(heat: RankHeatmap | None, lag: Stragglers | None) -> Section | None:
    """The section of these rank views (the single-process report's and the fleet report's), None without any."""
    if heat is None and lag is None:
        return None
    sec = Section("ranks", "Ranks")
    if heat is not None:
        sec.body.append(
            f"<p>{heat.ranks.height:,} ranks on {hosts_text(heat)}, sorted by host and rank; "
            f"time bins of {esc(fmt_ns(heat.bins.bin_ns))}.</p>"
        )
        for figure in _heatmaps(heat):
            sec.figure(figure)
    if lag is not None:
        sec.body += _straggler_tables(lag)
    return sec


def _heatmaps(heat: RankHeatmap) -> list[plots.Figure]:
    hosts, ranks = heat.hosts(), [(str(n), int(r)) for n, r in heat.ranks.iter_rows()]
    x_time = [round((i + 0.5) * heat.bins.bin_ns / 1e9, 6) for i in range(heat.bins.n_bins)]
    out = [
        plots.heatmap(
            f"{what} share per rank over time (%)",
            percent_matrix(heat, "time", value),
            hosts,
            ranks,
            x_time,
            "seconds since the first GPU record",
            "%",
        )
        for value, what in SHARES
    ]
    if heat.n_steps:
        out += [
            plots.heatmap(
                f"{what} share per rank and step (%)",
                percent_matrix(heat, "step", value),
                hosts,
                ranks,
                list(range(heat.n_steps)),
                "step",
                "%",
            )
            for value, what in SHARES
        ]
    return out


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
