"""The page every view lays out: sections of tables, figures, findings, text and notes, with the JSON they stand for.

Values stay numbers (ns, shares, counts) in the rows; a Column says what its unit is, and `presentation.cells`
formats a value for people in one way for every view. Trace text in rows and titles is raw (renderers escape for
their medium: rich Text, html.escape, Markdown escapes), so a scrubbed or odd name reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from ktrace.presentation.cells import Unit, column_label, unit_of

FigureKind = Literal["pie", "hbar", "bars", "histogram", "lines", "heatmap", "scatter", "icicle"]


@dataclass(frozen=True)
class Column:
    """One column of a table: the row key holding its values (the JSON's column name), its header and its unit."""

    key: str
    label: str = ""
    """Header for people; default: the key without its unit suffix, underscores as spaces."""
    unit: Unit | None = None
    """How a value is formatted (cells.Unit); default: read from the key's suffix (_ns, _pct, share, ...)."""

    @property
    def header(self) -> str:
        """The header a view prints."""
        return self.label or column_label(self.key)

    @property
    def kind(self) -> Unit:
        """The column's unit."""
        return self.unit or unit_of(self.key)


def columns(*keys: str) -> tuple[Column, ...]:
    """Columns with headers and units read from their keys."""
    return tuple(Column(k) for k in keys)


@dataclass(frozen=True)
class Table:
    """Rows of values under typed columns; `rest` more rows exist than are shown (the JSON has them all)."""

    key: str
    """Stable id (anchors, tests): "top_kernels_by_time"."""
    title: str
    columns: tuple[Column, ...]
    rows: tuple[Mapping[str, Any], ...]
    """Each row maps every column's key to its raw value (None: no value). A missing key is a KeyError."""
    bar: str | None = None
    """A share column (0-1) that views able to draw bars show as one."""
    rest: int = 0
    """Rows left out of `rows` (top-N tables)."""
    rest_what: str = "rows"
    """What the left-out rows are ("ranks", "kernels"), for the "... and N more" line."""
    lines: tuple[str, ...] = ()
    """Text that belongs under the table (causes, footnotes), one line each."""


@dataclass(frozen=True)
class Figure:
    """A plot's data; text views show tables or block characters instead, rich views draw it.

    `data` by kind: pie {labels, values}; hbar/bars {names, values, unit}; histogram {edges, counts, unit};
    lines {series: [{label, x, y}], x_title, y_title}; heatmap {rows (labels), columns (labels), z (rows x columns
    of 0-100 or None), hover (optional, same shape), z_title}; scatter {series: [{label, x, y, mode, sizes (optional),
    hover (optional)}], x_title, y_title, log (both axes)} (report.plots.scatter says what each key means); icicle {ids,
    parents ("" at a root), labels, values (a node holds its children's values)}.
    """

    key: str
    title: str
    kind: FigureKind
    data: Mapping[str, Any]


class Window(NamedTuple):
    """A time window a finding's evidence points at (epoch ns), and where (node/rank None: job-wide)."""

    start_ns: int
    end_ns: int | None
    node: str | None
    rank: int | None


@dataclass(frozen=True)
class Finding:
    """One rule finding as views show it (and as the Perfetto exporter marks it: rule, severity, message, times,
    place)."""

    rule: str
    severity: str
    """"error", "warning" or "info"."""
    message: str
    start_ns: int | None = None
    end_ns: int | None = None
    node: str | None = None
    rank: int | None = None
    recommendation: str = ""
    """What to do about it (the report shows it under the message)."""
    evidence: Table | None = None
    """The rows that show it (the report's evidence table)."""
    windows: tuple[Window, ...] = ()
    """Its evidence's time windows: what the TUI jumps to and the Perfetto export marks (presentation.findings)."""


@dataclass(frozen=True)
class RuleVerdict:
    """One rule's line in the rules table: its verdict, what it analysed and its findings."""

    rule: str
    verdict: str
    """"triggered", "ok", "skipped" or "error"."""
    why: str
    """The first finding's message, the skip reason, or the rule's description when it passed."""
    recommendation: str
    findings: tuple[Finding, ...] = ()
    datapoints: int = 0
    triggered: int = 0
    mode: str = ""
    """How it ran on a rank-by-rank job: "exact" or "per rank" (empty on one process)."""


@dataclass(frozen=True)
class Text:
    """A paragraph (a headline, an explanation)."""

    text: str
    style: Literal["plain", "dim", "note", "headline"] = "plain"


@dataclass(frozen=True)
class Note:
    """One note about the trace or the analysis, with how many times it was said (repeats grouped)."""

    text: str
    count: int = 1
    absent: bool = False
    """True for "the trace has no X" notes: views list them last, dimmed."""
    identical: bool = True
    """Whether every repeat said the same text (else they said it of other ranks or files)."""

    @property
    def line(self) -> str:
        """The note as one line: "... (x12)" when said 12 times alike, "... (and 11 more like it)" when said of 12
        ranks or files."""
        if self.count == 1:
            return self.text
        return f"{self.text} (x{self.count})" if self.identical else f"{self.text} (and {self.count - 1} more like it)"


Block = Table | Figure | Text | tuple[RuleVerdict, ...]


@dataclass(frozen=True)
class Section:
    """One section of a page: a titled run of blocks, and the part of the JSON document it stands for."""

    key: str
    """Stable id and anchor ("kernels", "critical-path", "rule-LowGPUUtilization")."""
    title: str
    blocks: tuple[Block, ...] = ()
    notes: tuple[Note, ...] = ()


@dataclass(frozen=True)
class Page:
    """Everything one view shows: a title, header facts (label, value), sections in order, page-wide notes, and the
    JSON document the page stands for (the stable contract: views that print JSON print this)."""

    title: str
    facts: tuple[tuple[str, str], ...]
    sections: tuple[Section, ...]
    notes: tuple[Note, ...] = ()
    document: Mapping[str, Any] = field(default_factory=dict)

    def section(self, key: str) -> Section | None:
        """The section of that key, if the page has it."""
        return next((s for s in self.sections if s.key == key), None)

    def tables(self) -> list[Table]:
        """Every table of the page, in order."""
        return [b for s in self.sections for b in s.blocks if isinstance(b, Table)]
