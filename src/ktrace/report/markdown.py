"""The report as Markdown: a renderer of the report's Page (presentation.report_page) through
presentation.layout.lay_out, as the HTML report is, so both show the same sections in the same order with the same
numbers; a plot is shown as the table of its numbers (none when a table of the page already shows them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ktrace.analysis.names import distinct_short_names
from ktrace.model.display_text import printable, share_glyph
from ktrace.presentation.cells import format_value
from ktrace.presentation.layout import lay_out
from ktrace.presentation.page import Column, Figure, Page, RuleVerdict, Section, Table, Text
from ktrace.presentation.report_model import Report
from ktrace.report.content import page
from ktrace.report.sections import rest_line

MD_ESCAPES = str.maketrans(
    {
        "|": "\\|",
        "<": "&lt;",
        ">": "&gt;",
        "&": "&amp;",
        "\n": " ",
        "`": "\\`",
        "*": "\\*",
        "_": "\\_",
        "[": "\\[",
        "]": "\\]",
    }
)


CELL_CHARS = 120


def column_cells(values: Sequence[object], limit: int = CELL_CHARS) -> list[str]:
    """One column's cells: printable, those over `limit` cut where they differ from the column's others (two rows
    never read the same), and escaped so trace text cannot break the table or inject markup."""
    texts = ["" if v is None else printable(str(v)) for v in values]
    short = distinct_short_names(texts, limit, plain=True)
    return [short[t].translate(MD_ESCAPES) for t in texts]


def cell(value: object, limit: int = CELL_CHARS) -> str:
    """A cell or line of text on its own, made safe as `column_cells` does."""
    return column_cells([value], limit)[0]


def md_table(headers: Sequence[str], cells: Sequence[Sequence[object]]) -> list[str]:
    """A Markdown table (empty list when there are no rows)."""
    if not cells:
        return []
    width = max(len(r) for r in cells)
    columns = [column_cells([r[i] for r in cells if i < len(r)]) for i in range(width)]
    at = [0] * width  # the next unused cell of each column (a short row leaves its missing cells out)
    lines = []
    for r in cells:
        shown = []
        for i in range(len(r)):
            shown.append(columns[i][at[i]])
            at[i] += 1
        lines.append("| " + " | ".join(shown) + " |")
    return ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers), *lines, ""]


TEXT_HEATMAP_COLS = 60


def text_heatmap(labels: Sequence[str], matrix: npt.NDArray[np.float64]) -> list[str]:
    """One line per row: its label, then one block character per column for a 0-1 share."""
    width = max((len(label) for label in labels), default=0)
    out = []
    for label, row in zip(labels, matrix, strict=True):
        chars = "".join(share_glyph(float(v)) for v in row)
        out.append(f"{label:<{width}} |{chars}|")
    return out


def coarse_columns(z: Sequence[Sequence[float | None]], max_cols: int = TEXT_HEATMAP_COLS) -> npt.NDArray[np.float64]:
    """A heatmap's 0-100 matrix as 0-1 shares, columns averaged in runs so that at most `max_cols` remain (a
    missing cell is NaN and left out of its run's mean; a run of none is drawn empty)."""
    m = np.array([[np.nan if v is None else float(v) / 100.0 for v in row] for row in z], dtype=np.float64)
    if m.ndim != 2 or m.shape[1] <= max_cols:
        return m
    group = -(-m.shape[1] // max_cols)
    out = np.full((m.shape[0], -(-m.shape[1] // group)), np.nan)
    for j in range(out.shape[1]):
        run = m[:, j * group : (j + 1) * group]
        known = ~np.isnan(run)
        counts = known.sum(axis=1)
        sums = np.where(known, run, 0.0).sum(axis=1)
        out[:, j] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return out


def heatmap_lines(figure: Figure) -> list[str]:
    """A heatmap Figure as text: a line per row (its label, then a block a column, from empty for 0 % to full for
    100 %; at most TEXT_HEATMAP_COLS columns, runs of columns averaged), in a code block."""
    d = figure.data
    m = coarse_columns(d["z"])
    safe = [printable(str(label)).replace("`", "'") for label in d["rows"]]
    shown = np.nan_to_num(m, nan=0.0)
    group = -(-len(d["columns"]) // max(1, m.shape[1])) if m.size else 1
    what = d.get("column_what", "column")
    per = f"{group} columns, each a {what}" if group > 1 else what
    note = (
        f"one line per {d.get('row_what', 'row')}, a block per {per}; {d['z_title']} from empty (0 %) to full (100 %)"
    )
    return [
        f"### {cell(figure.title, 200)}",
        "",
        f"_{cell(note, 400)}_",
        "",
        "```",
        *text_heatmap(safe, shown),
        "```",
        "",
    ]


def cell_text(column: Column, value: Any) -> str:
    """A cell as the report writes it: the one cell formatter, without the padding of fixed-width views."""
    return format_value(column.kind, value).strip()


def _share_pct(value: float, total: float) -> str:
    return f"{100 * value / total:.1f} %" if total else "-"


def figure_rows(figure: Figure) -> tuple[list[str], list[list[object]]]:
    """A plot's numbers as (headers, cells): a pie's slices with their share, bars' values, a histogram's non-empty
    bins, each line's points, mean and max."""
    d = figure.data
    if figure.kind == "pie":
        unit = d.get("unit", "number")
        values = [float(v) for v in d["values"]]
        total = sum(values)
        cells = [
            [label, format_value(unit, v).strip(), _share_pct(v, total)]
            for label, v in zip(d["labels"], values, strict=True)
        ]
        return ["slice", "value", "share"], cells
    if figure.kind in ("hbar", "bars"):
        return ["name", d["unit"]], [[n, f"{float(v):,.3f}"] for n, v in zip(d["names"], d["values"], strict=True)]
    if figure.kind == "histogram":
        edges, counts = d["edges"], d["counts"]
        bins = zip(edges[:-1], edges[1:], counts, strict=True)
        return [f"from ({d['unit']})", f"to ({d['unit']})", "count"], [
            [f"{a:.3f}", f"{b:.3f}", n] for a, b, n in bins if n
        ]
    if figure.kind == "lines":
        cells = []
        for s in d["series"]:
            ys = [float(y) for y in s["y"] if y is not None]
            mean, top = (f"{sum(ys) / len(ys):.1f}", f"{max(ys):.1f}") if ys else ("-", "-")
            cells.append([s["label"], len(s["x"]), mean, top])
        return ["series", "points", f"mean ({d['y_title']})", f"max ({d['y_title']})"], cells
    return [], []


class MarkdownRenderer:
    """Lays out a Page as Markdown (presentation.layout.Renderer); `end` gives the document."""

    def __init__(self) -> None:
        self.out: list[str] = []

    def begin(self, page: Page) -> None:
        """The title and the header facts."""
        self.out += [f"# {cell(page.title, 200)}", ""]
        if page.facts:
            self.out += [" · ".join(f"**{cell(k)}** {cell(v, 400)}" for k, v in page.facts), ""]
        self.out += [f"_{cell(n.line, 2000)}_" for n in page.notes]

    def section(self, section: Section) -> None:
        """The section's heading."""
        self.out += [f"## {cell(section.title, 200)}", ""]

    def table(self, table: Table) -> None:
        """The table's title, rows, what it left out and its lines."""
        if table.title:
            self.out += [f"### {cell(table.title, 200)}", ""]
        cells = [[cell_text(c, row[c.key]) for c in table.columns] for row in table.rows]
        self.out += md_table([c.header for c in table.columns], cells)
        if table.rest:
            self.out += [cell(rest_line(table.rest, table.rest_what), 400), ""]
        self.out += [line for text in table.lines for line in (cell(text, 2000), "")]

    def figure(self, figure: Figure) -> None:
        """The plot's numbers as a table, unless a table of the page shows them (`shown_in`); a heatmap as block
        characters, a line per row."""
        if figure.data.get("shown_in"):
            return
        if figure.kind == "heatmap":
            self.out += heatmap_lines(figure)
            return
        headers, cells = figure_rows(figure)
        if cells:
            self.out += [f"### {cell(figure.title, 200)}", "", *md_table(headers, cells)]

    def text(self, text: Text) -> None:
        """A paragraph (notes and dim text in italics)."""
        body = cell(text.text, 2000)
        self.out += [f"_{body}_" if text.style in ("note", "dim") else body, ""]

    def rules(self, verdicts: tuple[RuleVerdict, ...]) -> None:
        """Each rule's verdict, then its findings with their recommendation and evidence (or why it is quiet)."""
        for v in verdicts:
            self.out += [f"**Verdict**: {cell(v.verdict)}", ""]
            if v.verdict == "skipped":
                self.out += [f"Skipped: {cell(v.why, 500)}.", ""]
            for f in v.findings:
                self.out += [
                    f"**{f.severity}**: {cell(f.message, 2000)}",
                    "",
                    f"_Recommendation_: {cell(f.recommendation, 2000)}",
                    "",
                ]
                if f.evidence is not None:
                    self.table(f.evidence)
            if v.verdict == "ok":
                self.out += [f"Did not fire: {v.triggered:,} of {v.datapoints:,} datapoints met the condition.", ""]

    def section_end(self, section: Section) -> None:
        """The section's notes."""
        self.out += [f"_{cell(n.line, 2000)}_" for n in section.notes]
        if section.notes:
            self.out.append("")

    def end(self) -> str:
        """The document."""
        return "\n".join(self.out).rstrip() + "\n"


def render_markdown(report: Report) -> str:
    """The report as one Markdown document: report_page laid out by MarkdownRenderer."""
    return lay_out(page(report), MarkdownRenderer())
