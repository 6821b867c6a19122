"""The HTML report's building blocks: a section (anchor, title, body HTML, figures), escaped table cells that wrap
only where they may, and a page Figure as a plotly spec. Every string from the trace goes through html.escape."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ktrace.presentation import page
from ktrace.report import plots

SEVERITY_CLASS = {"error": "sev-error", "warning": "sev-warning", "info": "sev-info"}


@dataclass
class Section:
    """One report section."""

    anchor: str
    title: str
    body: list[str] = field(default_factory=list)
    figures: list[plots.Figure] = field(default_factory=list)

    def figure(self, fig: plots.Figure) -> None:
        """Add a figure and a placeholder div where it is drawn."""
        self.body.append(f'<div class="plot" data-fig="{len(self.figures)}"></div>')
        self.figures.append(fig)


def esc(value: object) -> str:
    """HTML-escape any value."""
    return html.escape("" if value is None else str(value))


LONG_WORD = 24
"""A word longer than this (a kernel name, a regex) may break anywhere (class "long"); shorter words never break
("localhost", "warning"): a narrow column wraps between words."""
SLASH_BREAK_CHARS = 12
"""A word with a slash longer than this (host/rank/GPU, not "µs/step") may wrap after its slashes."""
_TAGS = re.compile(r"<[^>]*>")
_WORDS = re.compile(r"\S+")
_NUMBER_UNIT = re.compile(r"(?<=\d) (?=(?:ns|µs|ms|s|B|KB|MB|GB|TB|%)(?!\w))")
"""The space in "1.73 ms", "2.0 GB": kept on one line."""


def _word(found: re.Match[str]) -> str:
    """One escaped word of a cell, marked where a line may break inside it."""
    word = found.group()
    if len(html.unescape(word)) > LONG_WORD:
        return f'<span class="long">{word}</span>'
    return word.replace("/", "/<wbr>") if len(word) > SLASH_BREAK_CHARS else word


def _td(value: object, is_raw: bool) -> str:
    """One cell: text escaped, its long words marked, units kept with their numbers; raw HTML as given, the whole
    cell marked "long" when it holds a long word."""
    if not is_raw:
        return "<td>" + _NUMBER_UNIT.sub("&nbsp;", _WORDS.sub(_word, esc(value))) + "</td>"
    words = html.unescape(_TAGS.sub(" ", str(value))).split()
    return f'<td class="long">{value}</td>' if any(len(w) > LONG_WORD for w in words) else f"<td>{value}</td>"


def table(headers: Sequence[str], cells: Sequence[Sequence[object]], *, raw: Sequence[int] = ()) -> str:
    """An HTML table; cells are escaped unless their column index is in `raw` (already HTML)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_td(c, i in raw) for i, c in enumerate(r)) + "</tr>" for r in cells)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def rest_line(rest: int, what: str) -> str:
    """ "and 12 more ranks (every row is in the JSON report)": a table's left-out rows, in the HTML and Markdown
    reports."""
    return f"and {rest:,} more {what} (every row is in the JSON report)"


def figure_spec(figure: page.Figure) -> plots.Figure:
    """The plotly spec of a page Figure (its data by kind, as page.Figure documents it)."""
    d = figure.data
    if figure.kind == "pie":
        return plots.pie(figure.title, list(d["labels"]), list(d["values"]))
    if figure.kind == "hbar":
        return plots.hbar(figure.title, list(d["names"]), list(d["values"]), d["unit"])
    if figure.kind == "bars":
        return plots.bars(figure.title, list(d["names"]), list(d["values"]), d["unit"])
    if figure.kind == "histogram":
        return plots.histogram(figure.title, list(d["edges"]), list(d["counts"]), d.get("x_title") or d["unit"])
    if figure.kind == "lines":
        series = [(s["label"], list(s["x"]), list(s["y"])) for s in d["series"]]
        y_range = d.get("y_range")
        return plots.xy_lines(figure.title, series, d["y_title"], {"range": list(y_range)} if y_range else None)
    if figure.kind == "heatmap":
        ranks = [(str(n), int(r)) for n, r in d["ranks"]]
        hover = d["hover"]
        return plots.heatmap(figure.title, hover["busy"], hover["comm"], ranks, list(d["columns"]), d["x_title"])
    if figure.kind == "scatter":
        return plots.scatter(figure.title, list(d["series"]), d["x_title"], d["y_title"], log=bool(d.get("log")))
    if figure.kind == "icicle":
        return plots.icicle(figure.title, list(d["ids"]), list(d["parents"]), list(d["labels"]), list(d["values"]))
    raise ValueError(f"no HTML view of a {figure.kind} figure")
