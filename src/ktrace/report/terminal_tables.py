"""Terminal tables: rows of values laid out to the console's width, units formatted by column name, with share bars.

Names shrink first when the terminal is narrow (staying distinct), then the bar and the least useful columns go;
numbers are never cut. The terminal summary (report.terminal), the fleet summary and the diff print through here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ktrace.analysis.names import distinct_short_names
from ktrace.analysis.units import format_bytes
from ktrace.report.format import fmt_ns as format_ns

BAR_WIDTH = 12
NAME_WIDTH = 80
"""Kernel names are shortened (templates and parameters collapsed) to at most this many characters in tables;
less when the terminal is narrower, but always so that two different kernels read differently."""
_COMFORTABLE_NAME = 30
"""The share bar and the droppable columns give way before a kernel name is cut below this width."""

_UNIT_SUFFIXES = ("_ns", "_pct", "_gbps", "_bytes")


def _label(column: str) -> str:
    """A column header for people: unit suffixes dropped (cells carry units), underscores as spaces; a share in %
    keeps its "%", so it never reads like the time beside it (overlap_ns and overlap_pct were both "overlap")."""
    if column.endswith("_pct"):
        return column[: -len("_pct")].replace("_", " ") + " %"
    for suffix in _UNIT_SUFFIXES:
        if column.endswith(suffix):
            column = column[: -len(suffix)]
            break
    return column.replace("_", " ")


def bar(share: float | None, width: int = BAR_WIDTH) -> str:
    """A horizontal bar for a 0-1 share."""
    if share is None:
        return ""
    full = max(0, min(width, round(share * width)))
    return "█" * full + "·" * (width - full)


_SUFFIX_FORMATS: tuple[tuple[str, Callable[[Any], str]], ...] = (
    ("_ns", lambda v: format_ns(float(v))),
    ("share", lambda v: f"{100 * float(v):5.1f} %"),
    ("_pct", lambda v: f"{float(v):5.1f} %"),
    ("_gbps", lambda v: f"{float(v):.2f} GB/s"),
)


_ID_COLUMNS = frozenset({"rank", "device", "instance", "pid", "tid", "stream", "step"})
"""Identifiers: printed as they are (no thousands separators)."""


def _cell(column: str, value: Any) -> str:
    """One table cell, formatted by the column's unit suffix (_ns, share, _pct, _gbps, bytes)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if column in _ID_COLUMNS:
        return "-" if isinstance(value, int) and value < 0 else str(value)  # -1: host-wide, not one rank/core
    for suffix, fmt in _SUFFIX_FORMATS:
        if column.endswith(suffix):
            return fmt(value)
    if column == "bytes" or column.endswith("_bytes"):
        return format_bytes(float(value))
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def format_cell(column: str, value: Any) -> str:
    """A cell as the terminal tables show it (for other human formats of the same rows: the fleet report)."""
    return _cell(column, value)


def column_label(column: str) -> str:
    """A column header as the terminal tables show it (unit suffixes dropped, underscores as spaces)."""
    return _label(column)


_TEXT_COLUMNS = frozenset(
    {
        "name",
        "node",
        "resource",
        "method",
        "phase",
        "kind",
        "definition",
        "precision",
        "idle_cause",
        "op",
        "copy_kind",
        "host_memory",
        "activity",
        "metric",
        "measure",
        "status",
        "rule",
        "a",
        "b",
        "causes",
        "module",
        "shapes",
    }
)
_FLEXIBLE = frozenset({"name", "node", "metric", "causes", "module"})
"""Text columns that shrink (with an ellipsis) when the terminal is narrow; numbers never do."""
_DROPPABLE = (
    "p50_ns",
    "max_ns",
    "method",
    "mean_util",
    "records",
    "span_ns",
    "p90_ns",
    "min_ns",
    "std_ns",
    "excluded",
    "gaps",
    "count_share",
    "source",
    "p95_ns",
    "time_share",
    "p99_ns",
    "count_a",
    "count_b",
)
"""Columns given up, in this order, when even shrunk names do not fit the terminal (the diff's launch counts last:
at 80 columns they left its kernel names 14 characters)."""
_READABLE_NAME = 24
"""Before names are cut below this width, the droppable columns go."""
_MIN_FLEX = 12


def _natural(c: str, col: int, cells: list[list[str]], wrap_label: bool = False) -> int:
    label = max(_label(c).split(), key=len, default="") if wrap_label else _label(c)
    return max(len(label), *(len(r[col]) for r in cells))


def _fit(
    width: int, cols: list[str], natural: dict[str, int], bar_width: int, bar_of: str | None = None
) -> tuple[dict[str, int], int] | None:
    """Width of each column to show, and the bar width, so that the table fits `width` characters (None: no fit).

    Numbers keep their full width; the text columns yield first, then the bar (never shown without its number,
    column `bar_of`), then the droppable columns.
    """

    def layout(cs: list[str], bw: int, floor: int) -> tuple[dict[str, int], int]:
        widths = {c: natural[c] for c in cs}
        # Each column costs its width plus 3 (padding and the divider); the outer edges are not drawn.
        fixed = sum(w + 3 for c, w in widths.items() if c not in _FLEXIBLE) + (bw + 3 if bw else 0) - 1
        flex = [c for c in cs if c in _FLEXIBLE]
        room = (width - fixed) // max(1, len(flex)) - 3
        for c in flex:
            widths[c] = max(min(widths[c], floor), min(widths[c], room))
        return widths, fixed + sum(widths[c] + 3 for c in flex)

    for floor, bw in ((_COMFORTABLE_NAME, bar_width), (_COMFORTABLE_NAME, 0), (_READABLE_NAME, 0), (_MIN_FLEX, 0)):
        shown = list(cols)
        widths, total = layout(shown, bw, floor)
        for c in _DROPPABLE:
            if total <= width or (bw and c == bar_of):
                break
            if c in shown and len(shown) > 2:
                shown.remove(c)
                widths, total = layout(shown, bw, floor)
        if total <= width:
            return widths, bw
    return None


_NAMES = ("name", "node", "metric", "module")
"""The flexible columns that hold names: cut by the distinct-name shortener (rich would cut two names alike)."""


def _set_names(
    cols: list[str], cells: list[list[str]], rows: Sequence[dict[str, Any]], widths: dict[str, int] | int
) -> None:
    """Put each name column's names, shortened to its width (one width for all, or per column) and distinct."""
    for column in _NAMES:
        if column in cols and (isinstance(widths, int) or column in widths):
            at = cols.index(column)
            width = widths if isinstance(widths, int) else widths[column]
            full = [str(row.get(column)) if column == "name" else r[at] for row, r in zip(rows, cells, strict=True)]
            for r, short in zip(cells, _kernel_names(full, width, plain=column != "name"), strict=True):
                r[at] = short


def _layout(
    width: int, cols: list[str], cells: list[list[str]], rows: Sequence[dict[str, Any]], share_bar: str | None
) -> tuple[dict[str, int], int, bool]:
    """(column widths, bar width, whether number headers wrap) for the table, kernel names set in `cells`."""
    _set_names(cols, cells, rows, NAME_WIDTH)
    natural = {c: _natural(c, i, cells) for i, c in enumerate(cols)}
    fitted = _fit(width, cols, natural, BAR_WIDTH if share_bar else 0, share_bar)
    wrap_labels = fitted is None  # still too wide: headers wrap at spaces ("comm / only") rather than numbers cut
    if fitted is None:
        natural = {c: _natural(c, i, cells, wrap_label=True) for i, c in enumerate(cols)}
        fitted = _fit(width, cols, natural, 0)
        while fitted is None and len(cols) > 2:  # last resort: the right-most columns go, none is cut
            cols = cols[:-1]
            fitted = _fit(width, cols, natural, 0)
        fitted = fitted or ({c: natural[c] for c in cols}, 0)
    widths, bar_width = fitted
    _set_names(cols, cells, rows, {c: w for c, w in widths.items() if w < natural[c]})
    return widths, bar_width, wrap_labels


def print_table(
    console: Console,
    title: str,
    rows: Sequence[dict[str, Any]] | None,
    columns: Sequence[str] | None = None,
    share_bar: str | None = None,
) -> None:
    """Print `rows` as a table of `columns` (default: all), with an optional bar for column `share_bar`.

    Names shrink first when the terminal is narrow (staying distinct), then the bar and the least useful
    columns go; numbers are never cut. A column (or `share_bar`) that a row lacks is a KeyError.
    """
    if not rows:
        console.print(f"[bold]{escape(title)}[/]: [dim]none[/]")
        return
    cols = list(columns or rows[0].keys())
    cells = [[_cell(c, row[c]) for c in cols] for row in rows]  # row[c]: a renamed column fails, never shows "-"
    widths, bar_width, wrap_labels = _layout(console.width, cols, cells, rows, share_bar)
    shown = list(widths)
    table = Table(
        title=escape(title),
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    for c in shown:
        numeric = c not in _TEXT_COLUMNS
        table.add_column(
            _label(c),
            no_wrap=not (numeric and wrap_labels),
            overflow="ellipsis",
            width=widths[c],
            min_width=widths[c] if numeric else None,
            justify="right" if numeric else "left",
        )
    if bar_width:
        table.add_column("", no_wrap=True, width=bar_width)
    index = [cols.index(c) for c in shown]
    for row, cells_of_row in zip(rows, cells, strict=True):
        out = [cells_of_row[i] for i in index]
        if bar_width and share_bar:
            out.append(bar(row[share_bar], bar_width))
        table.add_row(*(Text(cell) for cell in out))  # Text: trace strings ([memory], <...>) are not markup
    console.print(table)


def _kernel_names(names: list[str], width: int, plain: bool = False) -> list[str]:
    """Kernel names in `width` characters, distinct; the "other" row keeps its word (`plain`: hosts, modules and
    metrics, only cut)."""
    shown = distinct_short_names([n for n in names if n != "other"], width, plain=plain)
    return [shown.get(n, n) for n in names]
