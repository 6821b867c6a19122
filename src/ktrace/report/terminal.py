"""Terminal summary: render a Summary (the dashboard numbers) as rich tables and bars on a Console."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from ktrace.analysis.summary import Summary, summary_to_dict

BAR_WIDTH = 20
NAME_WIDTH = 64
"""Kernel names are cut to this many characters (with an ellipsis) in tables."""


def format_ns(ns: float | None) -> str:
    """A duration in ns as a short human string: 850 ns, 12.4 µs, 3.21 ms, 1.50 s, 2.0 min."""
    if ns is None:
        return "-"
    a = abs(ns)
    if a < 1e3:
        return f"{ns:.0f} ns"
    if a < 1e6:
        return f"{ns / 1e3:.1f} µs"
    if a < 1e9:
        return f"{ns / 1e6:.2f} ms"
    if a < 120e9:
        return f"{ns / 1e9:.2f} s"
    return f"{ns / 60e9:.1f} min"


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


def _cell(column: str, value: Any) -> str:
    """One table cell, formatted by the column's unit suffix (_ns, share, _pct, _gbps, bytes)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    for suffix, fmt in _SUFFIX_FORMATS:
        if column.endswith(suffix):
            return fmt(value)
    if column == "bytes":
        return f"{int(value) / 1e6:,.1f} MB"
    if column == "name":
        text = str(value)
        return text if len(text) <= NAME_WIDTH else text[:NAME_WIDTH - 1] + "…"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _table(console: Console, title: str, rows: Sequence[dict[str, Any]] | None,
           columns: Sequence[str] | None = None, share_bar: str | None = None) -> None:
    """Print `rows` as a table of `columns` (default: all), with an optional bar for column `share_bar`."""
    if not rows:
        console.print(f"[bold]{title}[/]: [dim]none[/]")
        return
    cols = list(columns or rows[0].keys())
    table = Table(*cols, *([""] if share_bar else []), title=title, title_justify="left", title_style="bold")
    for row in rows:
        cells = [_cell(c, row.get(c)) for c in cols]
        if share_bar:
            cells.append(bar(row.get(share_bar)))
        table.add_row(*cells)
    console.print(table)


_LATENCY_METRICS = (("launch_latency_ns", "launch latency (API start -> run start)"),
                    ("queue_delay_ns", "queue delay (API end -> run start)"),
                    ("api_duration_ns", "launch API call duration"))


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
        console.print(f"[yellow]note:[/] {note}")
