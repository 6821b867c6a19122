"""How durations are written for people in the summaries: terminal summary, reports and the TUI dashboard (the TUI's
table, details and status bar still use tui.viewmodel.format_duration, which keeps fewer digits)."""

from __future__ import annotations


def format_ns(ns: float | None) -> str:
    """A duration in ns as a short human string (ns, µs, ms, s, min): "958 ns", "2.62 ms", "1.5 min"."""
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
