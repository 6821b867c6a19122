"""Plotly figure specs (plain dicts: data + layout) for the HTML report, built from the report's dashboard model.

Labels that come from the trace (kernel names, annotations, hosts) are HTML-escaped: plotly.js renders a
subset of HTML in labels, and a C++ kernel name full of `<...>` must show as text, never as markup.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
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
ROW_PX = 14
"""Pixels per heatmap row: one label a row, never overlapping."""
MAX_PLOT_PX = 30_000
"""Tallest heatmap drawn (browsers cap a canvas near 32,767 px): past ~2,100 ranks the rows get thinner and every
few rows is labelled (the hover names each)."""
MAX_HOST_LINES = 128
"""Hosts are separated by lines up to this many hosts (past it the lines would hide the rows)."""
SCROLL_PX = 900
"""A heatmap taller than this scrolls inside its section (about 60 rows)."""


def heatmap(
    title: str,
    busy: list[list[int | None]],
    comm: list[list[int | None]],
    ranks: Sequence[tuple[str, int]],
    x: list[float] | list[int],
    x_title: str,
) -> Figure:
    """One rank x step (or time) heatmap: a row per rank sorted by (host, rank), coloured by the share of the time
    the GPU was busy outside communication (busy % - communication %: a straggler computes while the others wait inside
    their collectives), the hover giving node/rank, the step (or time), busy %, communication % and that difference.

    Every row is labelled with its whole "node/rank" (HTML-escaped, never cut: the left margin grows to the
    longest) and the figure grows ROW_PX a row, so it is taller than SCROLL_PX past ~60 ranks and the report lets it
    scroll inside its section. Whole-number x (steps) gets whole-number ticks."""
    n = len(ranks)
    names = [html.escape(f"{h}/{r}") for h, r in ranks]
    row_px = max(1.0, min(ROW_PX, MAX_PLOT_PX / max(n, 1)))
    every = max(1, round(ROW_PX / row_px))
    xaxis: dict[str, Any] = {"title": {"text": x_title}, "side": "top"}
    steps = bool(x) and all(isinstance(v, int) for v in x)
    if steps:  # whole-number ticks, never -0.4 ... 0.4
        xaxis.update(tickmode="linear", tick0=x[0], dtick=max(1, -(-len(x) // MAX_INT_TICKS)), tickformat="d")
    where = "step %{x}" if steps else "%{x} s"
    outside = [
        [None if b is None or c is None else max(0, b - c) for b, c in zip(brow, crow, strict=True)]
        for brow, crow in zip(busy, comm, strict=True)
    ]
    height = int(max(300, row_px * n + 140))
    starts = [i for i in range(1, n) if ranks[i][0] != ranks[i - 1][0]]  # a line between hosts
    lines = [
        {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": i - 0.5, "y1": i - 0.5, "line": {"width": 1}}
        for i in starts
        if len(starts) < MAX_HOST_LINES
    ]
    return {
        "data": [
            {
                "type": "heatmap",
                "z": outside,
                "customdata": busy,
                "text": comm,
                "x": x,
                "y": names,
                "zmin": 0,
                "zmax": 100,
                "colorscale": "Viridis",
                "colorbar": {
                    "title": {"text": "busy outside<br>communication %"},
                    "lenmode": "pixels",
                    "len": min(300, height - 140),
                    "y": 1,
                    "yanchor": "top",
                },
                "hovertemplate": "node/rank %{y}<br>"
                + where
                + "<br>GPU busy %{customdata} %<br>communication %{text} %<br>busy outside communication %{z} %"
                "<extra></extra>",
            }
        ],
        "layout": _layout(
            title,
            height=height,
            margin={"l": 60, "r": 20, "t": 90, "b": 20},
            xaxis=xaxis,
            yaxis={
                "automargin": True,  # room for the longest "host/rank" (a fixed margin cut them on the left)
                "autorange": "reversed",
                "type": "category",
                "tickmode": "array",
                "tickvals": names[::every],
                "ticktext": names[::every],
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


MARKER_PX = (6.0, 40.0)
"""Smallest and largest marker of a scatter whose points are sized (by GPU time: area grows with the value)."""


def marker_sizes(values: Sequence[float]) -> list[float]:
    """Marker diameters in px whose areas follow `values` (the largest MARKER_PX[1], none under MARKER_PX[0])."""
    top = max((v for v in values if v > 0), default=0.0)
    low, high = MARKER_PX
    return [max(low, high * (max(v, 0.0) / top) ** 0.5) if top else low for v in values]


def scatter(title: str, series: Sequence[Mapping[str, Any]], x_title: str, y_title: str, *, log: bool) -> Figure:
    """Points and lines on shared axes (log-log when `log`): each series {label, x, y, mode ("markers", "lines" or
    "lines+markers"), sizes (optional: one value a point, markers' areas follow them), hover (optional: a text a
    point, from the trace, escaped)}."""
    data = []
    for s in series:
        trace: dict[str, Any] = {
            "type": "scatter",
            "mode": s["mode"],
            "name": safe_labels([s["label"]])[0],
            "x": list(s["x"]),
            "y": list(s["y"]),
        }
        if s.get("sizes") is not None:
            trace["marker"] = {"size": marker_sizes(list(s["sizes"])), "sizemode": "diameter", "opacity": 0.7}
        if s.get("hover") is not None:
            trace["text"] = safe_labels(list(s["hover"]), 4000)
            trace["hovertemplate"] = "%{text}<extra></extra>"
        data.append(trace)
    axis_type = {"type": "log"} if log else {"rangemode": "tozero"}
    return {
        "data": data,
        "layout": _layout(
            title,
            height=420,
            showlegend=True,
            legend={"orientation": "h", "y": -0.2},
            margin={"l": 70, "r": 20, "t": 50, "b": 90},
            xaxis={"title": {"text": x_title}, **axis_type},
            yaxis={"title": {"text": y_title}, **axis_type},
        ),
    }


def icicle(title: str, ids: list[str], parents: list[str], labels: list[str], values: list[int]) -> Figure:
    """A tree of samples drawn top down, each node as wide as its samples (a flame graph upside down); a click on a
    node zooms into it. `parents` is "" at a root; a node's value holds its children's."""
    hover = "%{label}<br>%{value:,} samples, %{percentRoot:.1%} of all<extra></extra>"
    trace = {
        "type": "icicle",
        "ids": ids,
        "parents": parents,
        "labels": safe_labels(labels),
        "values": values,
        "branchvalues": "total",
        "tiling": {"orientation": "v"},
        "hovertemplate": hover,
    }
    return {"data": [trace], "layout": _layout(title, height=520, margin={"l": 10, "r": 10, "t": 50, "b": 10})}
