"""Terminal summary: render a Summary (the dashboard numbers) as rich tables and bars on a Console."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ktrace.analysis.names import short_kernel_name
from ktrace.analysis.summary import Summary, summary_to_dict
from ktrace.report.format import fmt_ns as format_ns

BAR_WIDTH = 12
NAME_WIDTH = 48
"""Kernel names are shortened (templates and parameters collapsed) to this many characters in tables."""

_UNIT_SUFFIXES = ("_ns", "_pct", "_gbps", "_bytes")


def _label(column: str) -> str:
    """A column header for people: unit suffixes dropped (cells carry units), underscores as spaces."""
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
        return str(value)
    for suffix, fmt in _SUFFIX_FORMATS:
        if column.endswith(suffix):
            return fmt(value)
    if column == "bytes":
        return f"{int(value) / 1e6:,.1f} MB"
    if column == "name":
        return short_kernel_name(str(value), NAME_WIDTH)
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


_TEXT_COLUMNS = frozenset({"name", "node", "resource", "method", "phase", "kind", "definition", "precision",
                           "idle_cause", "op", "copy_kind", "host_memory", "activity", "metric"})
_FLEXIBLE = frozenset({"name", "node"})
"""Columns that shrink (with an ellipsis) when the terminal is narrow; every other column keeps its width."""
_DROPPABLE = ("p50_ns", "max_ns", "instance", "method", "mean_util", "records", "span_ns", "p90_ns", "min_ns",
              "excluded", "gaps", "count_share", "source", "time_share")
"""Columns given up, in this order, when even shrunk names do not fit the terminal."""
_MIN_FLEX = 18


def _natural(c: str, col: int, cells: list[list[str]]) -> int:
    return max(len(_label(c)), *(len(r[col]) for r in cells))


def _fit(console: Console, cols: list[str], cells: list[list[str]], bar_width: int) -> tuple[
        dict[str, int], int]:
    """Width of each column to show, and the bar width, so that the table fits the console."""
    def layout(cs: list[str], bw: int) -> tuple[dict[str, int], int]:
        widths = {c: _natural(c, cols.index(c), cells) for c in cs}
        # Each column costs its width plus 3 (padding and the divider); the outer edges are not drawn.
        fixed = sum(w + 3 for c, w in widths.items() if c not in _FLEXIBLE) + (bw + 3 if bw else 0) - 1
        flex = [c for c in cs if c in _FLEXIBLE]
        room = (console.width - fixed) // max(1, len(flex)) - 3
        for c in flex:
            widths[c] = max(_MIN_FLEX, min(widths[c], NAME_WIDTH, room))
        return widths, fixed + sum(widths[c] + 3 for c in flex)

    shown = list(cols)
    widths, total = layout(shown, bar_width)
    if total > console.width and bar_width:
        bar_width = 0
        widths, total = layout(shown, bar_width)
    for c in _DROPPABLE:
        if total <= console.width:
            break
        if c in shown:
            shown.remove(c)
            widths, total = layout(shown, bar_width)
    return widths, bar_width


def _table(console: Console, title: str, rows: Sequence[dict[str, Any]] | None,
           columns: Sequence[str] | None = None, share_bar: str | None = None) -> None:
    """Print `rows` as a table of `columns` (default: all), with an optional bar for column `share_bar`.

    Names shrink first when the terminal is narrow, then the bar and the least useful columns go.
    """
    if not rows:
        console.print(f"[bold]{escape(title)}[/]: [dim]none[/]")
        return
    cols = list(columns or rows[0].keys())
    cells = [[_cell(c, row.get(c)) for c in cols] for row in rows]
    widths, bar_width = _fit(console, cols, cells, BAR_WIDTH if share_bar else 0)
    shown = list(widths)
    table = Table(title=escape(title), title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False)
    for c in shown:
        table.add_column(_label(c), no_wrap=True, overflow="ellipsis", width=widths[c],
                         justify="left" if c in _TEXT_COLUMNS else "right")
    if bar_width:
        table.add_column("", no_wrap=True, width=bar_width)
    index = [cols.index(c) for c in shown]
    for row, cells_of_row in zip(rows, cells, strict=True):
        out = [cells_of_row[i] for i in index]
        if bar_width and share_bar:
            out.append(bar(row.get(share_bar), bar_width))
        table.add_row(*(Text(cell) for cell in out))  # Text: trace strings ([memory], <...>) are not markup
    console.print(table)


_LATENCY_METRICS = (("launch_latency_ns", "API start → run"),
                    ("queue_delay_ns", "API end → run"),
                    ("api_duration_ns", "API call"))


def _latency_rows(rows: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """latency_stats' wide rows (one per kind) as one row per (kind, definition)."""
    if rows is None:
        return None
    out = []
    for row in rows:
        for prefix, label in _LATENCY_METRICS:
            stats = {f"{k[len(prefix) + 1:]}_ns": v for k, v in row.items() if k.startswith(prefix + "_")}
            out.append({"kind": row.get("kind"), "definition": label, "count": row.get("count"), **stats})
    return out


def _header(console: Console, d: dict[str, Any]) -> None:
    p = d["phases"]
    console.print(f"[bold]source[/] {d['source']}   [bold]ranks[/] {d['ranks']}   "
                  f"[bold]kernels[/] {d['kernels']:,}   [bold]job[/] {format_ns(p['duration_ns'])}   "
                  f"[bold]steps[/] {p['steps']}")
    phases = [{"phase": name, "time_ns": p[f"{key}_ns"], "share": p[f"{key}_pct"] / 100.0}
              for name, key in (("initialization", "init"), ("training loop", "training"),
                                ("finalization", "finalize"))]
    _table(console, "job phases", phases, share_bar="share")


def render_summary(summary: Summary, console: Console) -> None:
    """Print the summary's tables on `console` (the numbers are those of summary_to_dict)."""
    d = summary_to_dict(summary)
    _header(console, d)
    _table(console, "active time (timeline = busy/span; counter = samples > 0 %)", d["active"],
           ["resource", "method", "node", "rank", "instance", "active_share", "mean_util"], "active_share")
    _table(console, "GPU busy / idle per device", d["busy"],
           ["node", "rank", "device", "busy_ns", "idle_ns", "span_ns", "busy_pct", "records"])
    _table(console, "GPU idle by cause (per device)", d["idle"], share_bar="idle_share")
    kcols = ["name", "count", "total_ns", "mean_ns", "p50_ns", "p95_ns", "max_ns", "time_share"]
    _table(console, "top kernels by GPU time", d["top_by_time"], kcols, "time_share")
    _table(console, "top kernels by launch count", d["top_by_count"],
           ["name", "count", "count_share", "total_ns", "mean_ns"], "count_share")
    _table(console, "launch-to-run latency (start->start = launch latency; end->start = queue delay)",
           _latency_rows(d["latency"]))
    _table(console, "step time per rank", d["step_stats"])
    _table(console, "kernel precision (communication/memory shown apart)", d["precision"],
           ["precision", "excluded", "kernels", "time_ns", "time_share", "count_share"], "time_share")
    _table(console, "GPU activity (sum of durations)", d["activity"], share_bar="share")
    _table(console, "memory operations", d["memory"], share_bar="time_share")
    _table(console, "communication / compute overlap", d["overlap"])
    _table(console, "counters", d["counters"])
    lb = d["load_balance"]
    if lb is not None:
        _table(console, "load balance across ranks", lb["per_rank"])
        dist = lb["histogram_distance"]
        console.print(f"busy spread {_cell('busy_share', lb['busy_spread'])}   step spread "
                      f"{_cell('step_share', lb['step_spread'])}   utilization histogram distance "
                      f"{'-' if dist is None else f'{dist:.3f}'} ({lb['source']}; SageMaker flags > 0.5)")
    for h in d["annotations"]:
        _table(console, f"annotation {h['pattern']!r}: {h['count']} ranges", h["stats"])
    for note in d["notes"]:
        console.print(f"[yellow]note:[/] {escape(note)}")
