"""Terminal summary: render a Summary (the dashboard numbers) as rich tables and bars on a Console."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import polars as pl
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ktrace.analysis.memory_timeline import peak_line
from ktrace.analysis.names import distinct_short_names
from ktrace.analysis.operators import OperatorSummary
from ktrace.analysis.phases import step_source_note
from ktrace.analysis.ranks import LoadBalance
from ktrace.analysis.stragglers import Stragglers
from ktrace.analysis.summary import ABSENT_DATA, Summary
from ktrace.analysis.units import format_bytes
from ktrace.model.display_text import printable, printable_tree
from ktrace.report import critical_path_view
from ktrace.report.format import fmt_ns as format_ns
from ktrace.report.rank_rows import BASIS_NOTE, rest_note, straggler_rows
from ktrace.report.rows import json_float, phase_rows, rows
from ktrace.report.terminal_operators import module_table, shape_table

BAR_WIDTH = 12
TERMINAL_STRAGGLERS = 5
"""Straggler rows in the terminal summary (the report shows 10; the JSON every rank)."""
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
)
"""Columns given up, in this order, when even shrunk names do not fit the terminal."""
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

    for floor, bw in ((_COMFORTABLE_NAME, bar_width), (_COMFORTABLE_NAME, 0), (_MIN_FLEX, 0)):
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


def _set_names(cols: list[str], cells: list[list[str]], rows: Sequence[dict[str, Any]], width: int) -> None:
    if "name" in cols:
        at = cols.index("name")
        for r, short in zip(cells, _kernel_names([str(row.get("name")) for row in rows], width), strict=True):
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
    if "name" in widths and widths["name"] < natural["name"]:
        _set_names(cols, cells, rows, widths["name"])
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


def _kernel_names(names: list[str], width: int) -> list[str]:
    """Kernel names in `width` characters, distinct; the "other" row keeps its word."""
    shown = distinct_short_names([n for n in names if n != "other"], width)
    return [shown.get(n, n) for n in names]


_LATENCY_METRICS = (
    ("launch_latency_ns", "API start → run"),
    ("queue_delay_ns", "API end → run"),
    ("api_duration_ns", "API call"),
)


def latency_rows(wide: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """latency_stats' wide rows (one per kind) as one row per (kind, definition)."""
    out = []
    for row in wide:
        for prefix, label in _LATENCY_METRICS:
            stats = {f"{k[len(prefix) + 1 :]}_ns": v for k, v in row.items() if k.startswith(prefix + "_")}
            out.append({"kind": row["kind"], "definition": label, "count": row["count"], **stats})
    return out


def _counter_rows(stats: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Counter statistics for the terminal: one metric per line with its core/device index (cpu.core.util[3]),
    byte counters humanized."""
    out = []
    for r in stats:
        instance = r["instance"]
        metric = f"{r['metric']}[{instance}]" if isinstance(instance, int) and instance >= 0 else r["metric"]
        fmt = format_bytes if str(r["metric"]).endswith("_bytes") else (lambda v: f"{v:,.2f}")
        out.append(
            {
                "node": r["node"],
                "metric": metric,
                "samples": r["samples"],
                **{k: "-" if r[k] is None else fmt(float(r[k])) for k in ("min", "p50", "p95", "max", "mean")},
            }
        )
    return out


OPERATOR_ROWS = (10, 5)
"""The terminal's operator table: this many top operators by GPU time, then up to this many more by CPU self time."""


def _operator_rows(ops: OperatorSummary | None) -> list[dict[str, Any]] | None:
    """The summary's two top-operator lists as one table: by GPU time, then the CPU-heavy ones not already in it
    (CPU total time is in the JSON: in 80 columns the names need its room)."""
    if ops is None:
        return None
    by_gpu, by_cpu = OPERATOR_ROWS
    top = text_rows(ops.top_by_gpu_time)[:by_gpu]
    shown = {r["name"] for r in top}
    top += [r for r in text_rows(ops.top_by_cpu_self_time) if r["name"] not in shown][:by_cpu]
    return [
        {
            "name": r["name"],
            "calls": r["calls"],
            "cpu_self_ns": r["cpu_self_ns"],
            "gpu_ns": r["gpu_ns"],
            "kernels": r["kernels"],
            "latency_ns": r["launch_latency_mean_ns"],
        }
        for r in top
    ]


def text_rows(frame: pl.DataFrame | None) -> list[dict[str, Any]]:
    """A summary frame's rows (as in the JSON) with every trace string made printable for the terminal."""
    printable_rows: list[dict[str, Any]] = printable_tree(rows(frame))
    return printable_rows


def _header(console: Console, summary: Summary) -> None:
    phases = summary.phases
    console.print(
        f"[bold]source[/] {escape(printable(summary.source))}   [bold]ranks[/] {summary.ranks}   "
        f"[bold]kernels[/] {summary.kernels:,}   [bold]job[/] {format_ns(phases.duration_ns)}   "
        f"[bold]steps[/] {phases.steps}{' per rank' if summary.ranks > 1 else ''}"
        f"{step_source_note(phases.step_source)}"
    )
    for note in summary.notes:  # before the tables: a note (truncated input, lost records) changes how to read them
        if note not in ABSENT_DATA:  # what the trace lacks comes last (_absent)
            console.print(f"[yellow]note:[/] {escape(printable(note))}")
    phase_shares = [{"phase": name, "time_ns": ns, "share": pct / 100.0} for name, ns, pct in phase_rows(phases)]
    print_table(console, "job phases", phase_shares, share_bar="share")


def print_load_balance(console: Console, balance: LoadBalance | None, *, per_rank: bool = True) -> None:
    """The load-balance table (unless not `per_rank`) and its spreads (nothing with fewer than 2 ranks)."""
    if balance is None:
        return
    if per_rank:
        print_table(console, "load balance across ranks", text_rows(balance.per_rank))
    distance = json_float(balance.histogram_distance)
    console.print(
        f"busy spread {_cell('busy_share', json_float(balance.busy_spread))}   step spread "
        f"{_cell('step_share', json_float(balance.step_spread))}   utilization histogram distance "
        f"{'-' if distance is None else f'{distance:.3f}'} ({printable(balance.source)}; "
        "SageMaker flags > 0.5)"
    )


def print_stragglers(console: Console, lag: Stragglers | None) -> None:
    """The straggler table's top TERMINAL_STRAGGLERS ranks (the single-process and the fleet summary's)."""
    if lag is None:
        return
    found: list[dict[str, Any]] = printable_tree(straggler_rows(lag, TERMINAL_STRAGGLERS)[0])
    rest = lag.table.height - len(found)
    columns = ["node", "rank", "slower_pct", "work_mean_ns", "step_mean_ns", "slowest_steps"]
    print_table(console, f"stragglers ({BASIS_NOTE[lag.basis]})", found, columns)
    for row in found:  # the causes on lines of their own: kernel names need the width a table column lacks
        if row["causes"]:
            console.print(Text(f"  why {row['node']}/{row['rank']}: {row['causes']}"))
    if rest:
        console.print(f"[dim]{escape(rest_note(rest, 'ranks'))}[/]")


def _critical_path(console: Console, summary: Summary) -> None:
    cp = summary.critical_path
    if cp is None:
        return
    console.print(Text(printable(critical_path_view.headline(cp))))
    print_table(console, "critical path: composition", critical_path_view.composition_rows(cp), share_bar="share")
    items, what_if = critical_path_view.item_rows(cp, 5), critical_path_view.what_if_rows(cp)  # trace names
    print_table(console, "critical path: top items", printable_tree(items), share_bar="share")
    crossings = critical_path_view.crossing_rows(cp)
    if crossings:
        print_table(
            console,
            "critical path: late ranks (crossed: the path runs on the late rank; waited: the wait is on it)",
            printable_tree(crossings),
        )
    print_table(console, "critical path: what if (new longest path)", printable_tree(what_if))


def render_summary(summary: Summary, console: Console, *, by_shape: bool = False) -> None:
    """Print the summary's tables on `console` (the numbers of summary_to_dict, trace text made printable);
    `by_shape` adds the operators by input shape (summary.operators.by_shape, when the summary has it)."""
    _header(console, summary)
    print_table(
        console,
        "active time (timeline = busy/span; counter = share of samples > 0 %; mean util = mean "
        "sample, lower than the active share when the device is partly busy)",
        text_rows(summary.active),
        ["resource", "method", "node", "rank", "instance", "active_share", "mean_util"],
        "active_share",
    )
    print_table(
        console,
        "GPU busy / idle per device",
        text_rows(summary.busy),
        ["node", "rank", "device", "busy_ns", "idle_ns", "span_ns", "busy_pct", "records"],
    )
    print_table(
        console,
        "GPU idle by cause (per device: each gap takes the cause of the record that ends it)",
        text_rows(summary.idle),
        share_bar="idle_share",
    )
    kcols = ["name", "count", "total_ns", "mean_ns", "p50_ns", "p95_ns", "max_ns", "time_share"]
    print_table(console, "top kernels by GPU time", text_rows(summary.top_by_time), kcols, "time_share")
    print_table(
        console,
        "top kernels by launch count",
        text_rows(summary.top_by_count),
        ["name", "count", "count_share", "total_ns", "mean_ns"],
        "count_share",
    )
    print_table(
        console,
        f"operators: top {OPERATOR_ROWS[0]} by GPU time, then by CPU self time (gpu = work each "
        "launched, innermost operator; latency = mean launch -> kernel start)",
        _operator_rows(summary.operators),
    )
    for extra in (module_table(summary.operators), shape_table(summary.operators) if by_shape else None):
        if extra is not None:
            print_table(console, extra.title, extra.rows)
            for line in extra.lines:
                console.print(Text(line))
    print_table(
        console,
        "launch-to-run latency (start->start = launch latency; end->start = queue delay)",
        latency_rows(text_rows(summary.latency)),
    )
    print_table(console, "step time per rank", text_rows(summary.step_stats))
    print_table(
        console,
        "kernel precision (communication/memory shown apart)",
        text_rows(summary.precision),
        ["precision", "excluded", "kernels", "time_ns", "time_share", "count_share"],
        "time_share",
    )
    print_table(console, "GPU activity (sum of durations)", text_rows(summary.activity), share_bar="share")
    print_table(console, "memory operations", text_rows(summary.memory), share_bar="time_share")
    if summary.memory_timeline is not None:
        console.print(escape(printable(peak_line(summary.memory_timeline, summary.phases.start_ns))))
    print_table(console, "communication / compute overlap", text_rows(summary.overlap))
    print_table(console, "counters", _counter_rows(text_rows(summary.counters)))
    print_load_balance(console, summary.load_balance)
    print_stragglers(console, summary.stragglers)
    _critical_path(console, summary)
    for h in summary.annotations:
        print_table(console, f"annotation {printable(h.pattern)!r}: {h.count} ranges", text_rows(h.stats))
    absent = [note for note in summary.notes if note in ABSENT_DATA]
    if absent:
        console.print("[dim]not in this trace:[/]")
        for note in absent:
            console.print(f"[dim]  {escape(printable(note))}[/]")
