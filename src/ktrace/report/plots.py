"""Plotly figure specs (plain dicts: data + layout) for the HTML report, built from the report content.

Labels that come from the trace (kernel names, annotations, hosts) are HTML-escaped: plotly.js renders a
subset of HTML in labels, and a C++ kernel name full of `<...>` must show as text, never as markup.
"""

from __future__ import annotations

import html
from typing import Any

Figure = dict[str, Any]
LABEL_CHARS = 90


def label(text: object, limit: int = LABEL_CHARS) -> str:
    """A trace string made safe for a plotly label: shortened, then HTML-escaped."""
    s = str(text)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return html.escape(s)


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"title": {"text": html.escape(title)}, "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
                            "height": 360, "template": None}
    base.update(extra)
    return base


def pie(title: str, labels: list[Any], values: list[float]) -> Figure:
    """A pie chart (drawn only if some value is positive)."""
    return {"data": [{"type": "pie", "labels": [label(x) for x in labels], "values": values, "sort": False,
                      "hole": 0.35, "textinfo": "label+percent"}],
            "layout": _layout(title, height=320, showlegend=True)}


def hbar(title: str, names: list[Any], values: list[float], unit: str) -> Figure:
    """A horizontal bar chart, largest on top (top-N tables)."""
    return {"data": [{"type": "bar", "orientation": "h", "y": [label(n, 60) for n in names][::-1],
                      "x": values[::-1], "hovertext": [label(n, 400) for n in names][::-1],
                      "hoverinfo": "x+text"}],
            "layout": _layout(title, height=max(300, 24 * len(names) + 90), xaxis={"title": {"text": unit}},
                              yaxis={"automargin": True})}


def histogram(title: str, edges: list[float], counts: list[int], unit: str) -> Figure:
    """A histogram from precomputed bin edges and counts."""
    centers = [(a + b) / 2 for a, b in zip(edges[:-1], edges[1:], strict=True)]
    widths = [b - a for a, b in zip(edges[:-1], edges[1:], strict=True)]
    return {"data": [{"type": "bar", "x": centers, "y": counts, "width": widths}],
            "layout": _layout(title, xaxis={"title": {"text": unit}}, yaxis={"title": {"text": "count"}},
                              bargap=0.02)}


def lines(title: str, series: list[dict[str, Any]], y_title: str) -> Figure:
    """One line per series ({"label", "x_s", "y_pct"})."""
    data = [{"type": "scattergl" if len(s["x_s"]) > 2000 else "scatter", "mode": "lines", "name": label(s["label"]),
             "x": s["x_s"], "y": s["y_pct"]} for s in series]
    return {"data": data, "layout": _layout(title, height=380, xaxis={"title": {"text": "seconds since trace start"}},
                                            yaxis={"title": {"text": y_title}, "range": [0, 105]})}


def bars(title: str, names: list[Any], values: list[float], unit: str) -> Figure:
    """A vertical bar chart (per rank, per GPU)."""
    return {"data": [{"type": "bar", "x": [label(n, 40) for n in names], "y": values}],
            "layout": _layout(title, yaxis={"title": {"text": unit}})}
