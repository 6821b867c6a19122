"""Terminal tables: rows of values laid out to the console's width, units formatted by column name, with share bars.

Names shrink first when the terminal is narrow (staying distinct), then the bar and the least useful columns go;
numbers are never cut. The terminal summary (report.terminal), the fleet summary and the diff print through here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text

from ktrace.analysis.names import distinct_short_names
from ktrace.analysis.units import format_bytes as format_bytes
from ktrace.model.display_text import printable
from ktrace.presentation.cells import column_label as column_label
from ktrace.presentation.cells import format_cell as format_cell
from ktrace.presentation.cells import format_value, is_numeric
from ktrace.presentation.page import Column, Table
from ktrace.presentation.page import columns as key_columns

BAR_WIDTH = 12
NAME_WIDTH = 80
"""Kernel names are shortened (templates and parameters collapsed) to at most this many characters in tables;
less when the terminal is narrower, but always so that two different kernels read differently."""
_COMFORTABLE_NAME = 30
"""The share bar and the droppable columns give way before a kernel name is cut below this width."""


def bar(share: float | None, width: int = BAR_WIDTH) -> str:
    """A horizontal bar for a 0-1 share."""
    if share is None:
        return ""
    full = max(0, min(width, round(share * width)))
    return "█" * full + "·" * (width - full)


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
    "tbps",
    "dtype",
    "algbw_gbps",
    "samples",
)
"""Columns given up, in this order, when even shrunk names do not fit the terminal (the diff's launch counts last:
at 80 columns they left its kernel names 14 characters)."""
_READABLE_NAME = 24
"""Before names are cut below this width, the droppable columns go."""
_MIN_FLEX = 12


def _natural(label: str, col: int, cells: list[list[str]], wrap_label: bool = False) -> int:
    shown = max(label.split(), key=len, default="") if wrap_label else label
    return max(len(shown), *(len(r[col]) for r in cells))


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
        flex = sorted((c for c in cs if c in _FLEXIBLE), key=lambda c: natural[c])
        left = width - fixed
        for i, c in enumerate(flex):  # narrowest first: the room a short one (a host) leaves goes to the next
            room = left // (len(flex) - i) - 3
            widths[c] = max(min(widths[c], floor), min(widths[c], room))
            left -= widths[c] + 3
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
    cols: list[str], cells: list[list[str]], kernels: list[str] | None, widths: dict[str, int] | int
) -> None:
    """Put each name column's names, shortened to its width (one width for all, or per column) and distinct;
    kernel names (column "name") are shortened from their full text each time (`kernels`), the others only cut."""
    for column in _NAMES:
        if column in cols and (isinstance(widths, int) or column in widths):
            at = cols.index(column)
            width = widths if isinstance(widths, int) else widths[column]
            full = kernels if column == "name" and kernels is not None else [r[at] for r in cells]
            for r, short in zip(cells, _kernel_names(full, width, plain=column != "name"), strict=True):
                r[at] = short


def _layout(
    width: int, cols: list[str], labels: list[str], cells: list[list[str]], share_bar: str | None
) -> tuple[dict[str, int], int, bool]:
    """(column widths, bar width, whether number headers wrap) for the table, kernel names set in `cells`."""
    kernels = [r[cols.index("name")] for r in cells] if "name" in cols else None
    _set_names(cols, cells, kernels, NAME_WIDTH)
    natural = {c: _natural(labels[i], i, cells) for i, c in enumerate(cols)}
    fitted = _fit(width, cols, natural, BAR_WIDTH if share_bar else 0, share_bar)
    wrap_labels = fitted is None  # still too wide: headers wrap at spaces ("comm / only") rather than numbers cut
    if fitted is None:
        natural = {c: _natural(labels[i], i, cells, wrap_label=True) for i, c in enumerate(cols)}
        fitted = _fit(width, cols, natural, 0)
        while fitted is None and len(cols) > 2:  # last resort: the right-most columns go, none is cut
            cols = cols[:-1]
            fitted = _fit(width, cols, natural, 0)
        fitted = fitted or ({c: natural[c] for c in cols}, 0)
    widths, bar_width = fitted
    _set_names(cols, cells, kernels, {c: w for c, w in widths.items() if w < natural[c]})
    return widths, bar_width, wrap_labels


def print_table(
    console: Console,
    title: str,
    rows: Sequence[Mapping[str, Any]] | None,
    columns: Sequence[str] | None = None,
    share_bar: str | None = None,
) -> None:
    """Print `rows` as a table of `columns` (keys; default: all, units read from the keys), with an optional bar
    for column `share_bar` (the diff and the fleet summary; the summary lays out its Page's tables)."""
    shown = list(columns or (rows[0].keys() if rows else ()))
    render_table(console, Table("", title, key_columns(*shown), tuple(rows or ()), bar=share_bar))


def rest_line(rest: int, what: str) -> str:
    """ "and 12 more ranks (every row is in the JSON report)"."""
    return f"and {rest:,} more {what} (every row is in the JSON report)"


def render_table(console: Console, table: Table) -> None:
    """Print a presentation Table: its title, its rows laid out to the console's width (each cell formatted by its
    column's unit, trace text made printable), its bar, then its lines and how many rows it left out.

    Names shrink first when the terminal is narrow (staying distinct), then the bar and the least useful
    columns go; numbers are never cut. A column (or the bar) that a row lacks is a KeyError.
    """
    title = escape(printable(table.title))
    if not table.rows:
        console.print(f"[bold]{title}[/]: [dim]none[/]")
    else:
        console.print(_rich_table(console.width, title, table))
    for line in table.lines:
        console.print(Text(printable(line)))
    if table.rest:
        console.print(Text(printable(rest_line(table.rest, table.rest_what)), style="dim"))


def _rich_table(width: int, title: str, table: Table) -> RichTable:
    cols = [c.key for c in table.columns]
    of: dict[str, Column] = {c.key: c for c in table.columns}
    # row[c.key]: a renamed column fails, never shows "-"
    cells = [[printable(format_value(c.kind, row[c.key])) for c in table.columns] for row in table.rows]
    widths, bar_width, wrap_labels = _layout(width, cols, [c.header for c in table.columns], cells, table.bar)
    out = RichTable(
        title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False
    )
    for key in widths:
        numeric = is_numeric(of[key].kind)
        out.add_column(
            of[key].header,
            no_wrap=not (numeric and wrap_labels),
            overflow="ellipsis",
            width=widths[key],
            min_width=widths[key] if numeric else None,
            justify="right" if numeric else "left",
        )
    if bar_width:
        out.add_column("", no_wrap=True, width=bar_width)
    index = [cols.index(key) for key in widths]
    for row, cells_of_row in zip(table.rows, cells, strict=True):
        shown = [cells_of_row[i] for i in index]
        if bar_width and table.bar:
            shown.append(bar(row[table.bar], bar_width))
        out.add_row(*(Text(cell) for cell in shown))  # Text: trace strings ([memory], <...>) are not markup
    return out


def _kernel_names(names: list[str], width: int, plain: bool = False) -> list[str]:
    """Kernel names in `width` characters, distinct; the "other" row keeps its word (`plain`: hosts, modules and
    metrics, only cut)."""
    shown = distinct_short_names([n for n in names if n != "other"], width, plain=plain)
    return [shown.get(n, n) for n in names]
