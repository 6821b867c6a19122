"""Number and time formatting shared by the HTML and Markdown reports."""

from __future__ import annotations

import datetime as dt

from ktrace.model.units import format_ns as fmt_ns

__all__ = ["fmt_ns", "fmt_num", "fmt_time", "fmt_time_range"]


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
    """ "start (+duration)" for evidence with a time range, "" without."""
    if start_ns is None:
        return ""
    if end_ns is None:
        return fmt_time(start_ns)
    return f"{fmt_time(start_ns)} (+{fmt_ns(end_ns - start_ns)})"
