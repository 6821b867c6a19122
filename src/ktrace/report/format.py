"""Number formatting of the report views not yet laid out from a Page (operator_tables, rank_rows, fleet)."""

from __future__ import annotations

from ktrace.model.units import format_ns as fmt_ns

__all__ = ["fmt_ns", "fmt_num"]


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
