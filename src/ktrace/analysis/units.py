"""Quantities written for people, shared by the terminal summary, the report and the TUI."""

from __future__ import annotations


def format_bytes(value: float | None) -> str:
    """A byte count for people: B, KB, MB, GB, TB (powers of 1000, like the GB/s columns); "-" when unknown."""
    if value is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if abs(value) < 1000:
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1000
    return f"{value:,.1f} TB"
