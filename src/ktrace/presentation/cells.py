"""Units and cells: how every view writes a value for people, read from the column's key or given by its Column.

One definition for the terminal, HTML, Markdown and the TUI: durations with units (format_ns), shares in %, bytes
humanized, identifiers as they are, floats with two decimals, integers with thousands separators.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from ktrace.analysis.units import format_bytes
from ktrace.model.units import format_ns

Unit = Literal["ns", "share", "pct", "gbps", "bytes", "id", "text", "number"]
"""ns: integer nanoseconds; share: 0-1; pct: 0-100; gbps: GB/s; bytes; id: rank, device, stream... (as they are);
text: names and labels; number: counts and other quantities."""

_UNIT_SUFFIXES = ("_ns", "_pct", "_gbps", "_bytes")

ID_COLUMNS = frozenset({"rank", "device", "instance", "pid", "tid", "stream", "step"})
"""Identifiers: printed as they are (no thousands separators)."""

TEXT_COLUMNS = frozenset(
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
"""Columns of text (left-aligned; the rest are numbers, right-aligned)."""


def unit_of(column: str) -> Unit:
    """The unit a column's key implies (its suffix, or the id and text column names)."""
    if column in ID_COLUMNS:
        return "id"
    if column in TEXT_COLUMNS:
        return "text"
    if column.endswith("_ns"):
        return "ns"
    if column.endswith("share"):
        return "share"
    if column.endswith("_pct"):
        return "pct"
    if column.endswith("_gbps"):
        return "gbps"
    if column == "bytes" or column.endswith("_bytes"):
        return "bytes"
    return "number"


def column_label(column: str) -> str:
    """A header for people: unit suffixes dropped (cells carry units), underscores as spaces; a share in % keeps its
    "%", so it never reads like the time beside it (overlap_ns and overlap_pct were both "overlap")."""
    if column.endswith("_pct"):
        return column[: -len("_pct")].replace("_", " ") + " %"
    for suffix in _UNIT_SUFFIXES:
        if column.endswith(suffix):
            column = column[: -len(suffix)]
            break
    return column.replace("_", " ")


_FORMATS: dict[Unit, Callable[[Any], str]] = {
    "ns": lambda v: format_ns(float(v)),
    "share": lambda v: f"{100 * float(v):5.1f} %",
    "pct": lambda v: f"{float(v):5.1f} %",
    "gbps": lambda v: f"{float(v):.2f} GB/s",
    "bytes": lambda v: format_bytes(float(v)),
}


def format_value(unit: Unit, value: Any) -> str:
    """One cell: None as "-", booleans as yes/no, then by unit (a negative id is host-wide: "-")."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if unit == "id":
        return "-" if isinstance(value, int) and value < 0 else str(value)
    fmt = _FORMATS.get(unit)
    if fmt is not None:
        return fmt(value)
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def format_cell(column: str, value: Any) -> str:
    """A cell of a column known by its key alone (its unit read from the key)."""
    return format_value(unit_of(column), value)


def is_numeric(unit: Unit) -> bool:
    """Whether a column of this unit holds numbers (right-aligned, never cut)."""
    return unit not in ("text",)
