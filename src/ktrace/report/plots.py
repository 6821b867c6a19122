"""Plotly figure specs (plain dicts: data + layout) for the HTML report, built from the report's dashboard model.

Labels that come from the trace (kernel names, annotations, hosts) are HTML-escaped: plotly.js renders a
subset of HTML in labels, and a C++ kernel name full of `<...>` must show as text, never as markup.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from ktrace.analysis.dashboard import UtilizationSeries
from ktrace.analysis.names import distinct_short_names

Figure = dict[str, Any]
LABEL_CHARS = 90


def safe_labels(texts: Sequence[object], limit: int = LABEL_CHARS) -> list[str]:
    """Trace strings made safe for plotly labels: cut where they differ (two labels never read the same, and a
    heatmap's category axis never merges two rows), then HTML-escaped."""
    strings = [str(t) for t in texts]
    short = distinct_short_names(strings, limit, plain=True)
    return [html.escape(short[s]) for s in strings]


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    # Titles sit left: plotly's tool bar is drawn top right and used to cover the end of a centred title.
    base: dict[str, Any] = {
        "title": {"text": html.escape(title), "x": 0.01, "xanchor": "left"},
        "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
        "height": 360,
        "template": None,
    }
    base.update(extra)
    return base


def legend_text(text: object) -> str:
    """A legend entry without the placeholder words of empty fields ("memset - -" -> "memset")."""
    words = [w for w in str(text).split(" ") if w not in ("", "-", "None", "null")]
    return " ".join(words) or str(text)


def pie(title: str, labels: list[Any], values: list[float]) -> Figure:
    """A pie chart (drawn only if some value is positive): percentages inside the slices, names in the legend,
    so that no label runs into the title or into another label."""
    return {
        "data": [
            {
                "type": "pie",
                "labels": safe_labels([legend_text(x) for x in labels]),
                "values": values,
                "sort": False,
                "hole": 0.35,
                "textinfo": "percent",
                "textposition": "inside",
                "insidetextorientation": "horizontal",
                "hoverinfo": "label+value+percent",
            }
        ],
        "layout": _layout(
            title,
            height=340,
            showlegend=True,
            margin={"l": 20, "r": 20, "t": 60, "b": 20},
            legend={"orientation": "v", "x": 1.02, "y": 0.5},
            uniformtext={"minsize": 10, "mode": "hide"},
        ),
    }


MAX_TICK_CHARS = 60


def hbar(title: str, names: list[Any], values: list[float], unit: str) -> Figure:
    """A horizontal bar chart, largest on top (top-N tables).

    Every bar is its own category (its row number): plotly stacks bars that share a label, so two kernels whose
    short names coincide would add up into one bar that does not exist. The tick text is the distinct short name,
    the hover text the full name.
    """
    full = [str(n) for n in names]
    short = distinct_short_names([n for n in full if n != "other"], MAX_TICK_CHARS)
    rows = list(range(len(full)))[::-1]
    return {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "y": rows,
                "x": values[::-1],
                "hovertext": safe_labels(full, 4000)[::-1],
                "hoverinfo": "x+text",
            }
        ],
        "layout": _layout(
            title,
            height=max(300, 24 * len(names) + 90),
            xaxis={"title": {"text": unit}},
            yaxis={
                "automargin": True,
                "tickmode": "array",
                "tickvals": rows,
                "ticktext": [html.escape(short.get(n, n)) for n in full][::-1],
            },
        ),
    }


def histogram(title: str, edges: list[float], counts: list[int], unit: str) -> Figure:
    """A histogram from precomputed bin edges and counts.

    A single bin (one step, or all equal) is drawn as one bar in an axis from 0, with a few round ticks, rather
    than a bar stretched over the whole width with ticks like 1,210.8.
    """
    centers = [(a + b) / 2 for a, b in zip(edges[:-1], edges[1:], strict=True)]
    widths = [b - a for a, b in zip(edges[:-1], edges[1:], strict=True)]
    xaxis: dict[str, Any] = {
        "title": {"text": unit},
        "tickformat": "~s" if max(map(abs, edges), default=0) >= 1e4 else "~g",
        "nticks": 8,
    }
    if len(counts) == 1:
        top = max(abs(e) for e in edges) * 1.25 or 1.0
        widths = [max(widths[0], top / 40)]
        xaxis["range"] = [min(0.0, edges[0]), top]
    return {
        "data": [{"type": "bar", "x": centers, "y": counts, "width": widths}],
        "layout": _layout(
            title,
            xaxis=xaxis,
            bargap=0.02,
            yaxis={
                "title": {"text": "count"},
                "rangemode": "tozero",
                **({"dtick": 1} if max(counts, default=0) <= 8 else {}),
            },
        ),
    }


def lines(title: str, series: Sequence[UtilizationSeries], y_title: str) -> Figure:
    """One line per utilization series (0-100 %)."""
    rows: list[tuple[str, list[float], list[float | None]]] = [(s.label, list(s.x_s), list(s.y_pct)) for s in series]
    return xy_lines(title, rows, y_title, yaxis={"range": [0, 105]})


def bars(title: str, names: list[Any], values: list[float], unit: str) -> Figure:
    """A vertical bar chart (per rank, per GPU)."""
    return {
        "data": [{"type": "bar", "x": safe_labels(names, 40), "y": values}],
        "layout": _layout(title, yaxis={"title": {"text": unit}}),
    }


MAX_INT_TICKS = 12
"""Most ticks on a whole-number (step) axis: every step up to 12 steps, every 2nd up to 24, ..."""
MAX_ROW_LABELS = 64
"""Up to this many ranks, every heatmap row is labelled "host/rank"; above, only the first row of each host."""


def heatmap(
    title: str,
    z: list[list[int | None]],
    hosts: Sequence[tuple[str, int, int]],
    ranks: Sequence[tuple[str, int]],
    x: list[float],
    x_title: str,
    value: str,
) -> Figure:
    """A rank x time (or step) heatmap in %, one row per rank sorted by (host, rank), hosts separated by lines.

    Every row is named "host/rank" (the hover shows it); the axis labels every row up to MAX_ROW_LABELS ranks and
    only the first rank of each host (of every few hosts past MAX_ROW_LABELS hosts) above, so that 4,096 ranks stay
    one readable image; the left margin grows to the longest label. Whole-number x (steps) gets whole-number ticks.
    """
    n = len(ranks)
    names = safe_labels([f"{h}/{r}" for h, r in ranks], 40)
    if n <= MAX_ROW_LABELS:
        tickvals, ticktext = names, names
    else:
        step = max(1, -(-len(hosts) // MAX_ROW_LABELS))
        shown = hosts[::step]
        tickvals = [names[a] for _, a, _ in shown]
        ticktext = safe_labels([f"{h} ({c} ranks)" for h, _, c in shown], 40)
    xaxis: dict[str, Any] = {"title": {"text": x_title}}
    if x and all(isinstance(v, int) for v in x):  # steps: whole-number ticks, never -0.4 ... 0.4
        xaxis.update(tickmode="linear", tick0=x[0], dtick=max(1, -(-len(x) // MAX_INT_TICKS)), tickformat="d")
    lines = [
        {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": a - 0.5, "y1": a - 0.5, "line": {"width": 1}}
        for _, a, _ in hosts[1:]
        if len(hosts) <= MAX_ROW_LABELS
    ]
    return {
        "data": [
            {
                "type": "heatmap",
                "z": z,
                "x": x,
                "y": names,
                "zmin": 0,
                "zmax": 100,
                "colorscale": "Viridis",
                "colorbar": {"title": {"text": html.escape(value)}},
                "hovertemplate": "%{y}<br>%{x}<br>%{z} %<extra></extra>",
            }
        ],
        "layout": _layout(
            title,
            height=min(900, max(300, 14 * n + 120)),
            xaxis=xaxis,
            yaxis={
                "automargin": True,  # room for the longest "host/rank" (a fixed margin cut them on the left)
                "autorange": "reversed",
                "type": "category",
                "tickmode": "array",
                "tickvals": tickvals,
                "ticktext": ticktext,
            },
            shapes=lines,
        ),
    }


def xy_lines(
    title: str,
    series: Sequence[tuple[str, list[float], list[float | None]]],
    y_title: str,
    yaxis: dict[str, Any] | None = None,
) -> Figure:
    """One line per (name, x in seconds since the trace start, y) series; y from 0 (or `yaxis`'s range)."""
    names = safe_labels([name for name, _, _ in series])
    data = [
        {"type": "scattergl" if len(x) > 2000 else "scatter", "mode": "lines", "name": name, "x": x, "y": y}
        for name, (_, x, y) in zip(names, series, strict=True)
    ]
    return {
        "data": data,
        "layout": _layout(
            title,
            height=380,
            xaxis={"title": {"text": "seconds since trace start"}},
            yaxis={"title": {"text": y_title}, **(yaxis or {"rangemode": "tozero"})},
        ),
    }
