"""Number and time formatting shared by the HTML and Markdown reports."""

from __future__ import annotations

import datetime as dt


def fmt_ns(ns: float | None) -> str:
    """A duration in ns as a short human string (ns, µs, ms, s, min)."""
    if ns is None:
        return "-"
    a = abs(ns)
    if a < 1e3:
        return f"{ns:.0f} ns"
    if a < 1e6:
        return f"{ns / 1e3:.2f} µs"
    if a < 1e9:
        return f"{ns / 1e6:.2f} ms"
    if a < 600e9:
        return f"{ns / 1e9:.2f} s"
    return f"{ns / 60e9:.1f} min"


def fmt_num(value: object) -> str:
    """Integers with thousands separators, floats with 4 significant digits, anything else as text."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return str(value)


def fmt_time(ns: int | None) -> str:
    """An epoch-ns timestamp as UTC time of day with ms."""
    if ns is None:
        return "-"
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def fmt_time_range(start_ns: int | None, end_ns: int | None) -> str:
    """"start (+duration)" for evidence with a time range, "" without."""
    if start_ns is None:
        return ""
    if end_ns is None:
        return fmt_time(start_ns)
    return f"{fmt_time(start_ns)} (+{fmt_ns(end_ns - start_ns)})"
