"""The operator screen's model (no widgets): the operator table, each top operator's kernels, the module table.

Built from the Summary the dashboard worker computes (analysis.operators.operator_summary), so the TUI shows
the numbers of `ktrace summary` and the report. Strings only: the widget makes cells of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ktrace.analysis.modules import NO_MODULES
from ktrace.analysis.roofline import Roofline, unknown_gpu_note
from ktrace.analysis.summary import NO_OPERATORS, Summary
from ktrace.model.display_text import printable
from ktrace.model.units import format_ns
from ktrace.presentation.cells import format_value
from ktrace.presentation.page import Column
from ktrace.presentation.summary_hardware import ROOFLINE_COLUMNS

OPERATOR_HEADERS = ("operator", "calls", "CPU self", "GPU", "kernels", "launch->run")
KERNEL_HEADERS = ("kernel", "launches", "GPU")
MODULE_HEADERS = ("module", "calls", "CPU", "GPU own", "GPU nested")
SHAPE_HEADERS = ("operator", "input shapes", "calls", "CPU self", "GPU", "kernels")
_ROOFLINE_KEYS = ("name", "input_dims", "dtype", "tflops", "pct_of_peak", "bound")
TUI_ROOFLINE_COLUMNS: tuple[Column, ...] = tuple(
    Column("input_dims", "input shapes", "text")
    if key == "input_dims"
    else next(c for c in ROOFLINE_COLUMNS if c.key == key)
    for key in _ROOFLINE_KEYS
)
"""The roofline view's columns: summary_hardware's (one definition of each header and unit) with the shapes."""
ROOFLINE_HEADERS = ("operator", *(c.header for c in TUI_ROOFLINE_COLUMNS[1:]))
ROOFLINE_ROWS = 50
"""Roofline rows (by GPU time) the view lists; the summary JSON has roofline.TOP_OPERATORS."""


@dataclass(frozen=True)
class OperatorPanel:
    """What the operator screen shows."""

    note: str
    """One line: the counts, or why there are no operators."""
    operators: list[tuple[str, ...]] = field(default_factory=list)
    """OPERATOR_HEADERS cells: the top operators by GPU time, then those by CPU self time not already listed."""
    kernels: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    """Operator name -> KERNEL_HEADERS cells of its kernels (top operators by GPU time only; whole names, which the
    screen shortens to its width, distinct)."""
    modules: list[tuple[str, ...]] = field(default_factory=list)
    """MODULE_HEADERS cells, by GPU time with nested modules."""
    modules_note: str = ""
    shapes: list[tuple[str, ...]] = field(default_factory=list)
    """SHAPE_HEADERS cells of the top (operator, input shapes) rows by GPU time (empty without the by-shape view)."""
    roofline: list[tuple[str, ...]] = field(default_factory=list)
    """ROOFLINE_HEADERS cells of the top (operator, input shapes, dtype) rows of the roofline by GPU time."""
    roofline_note: str = ""
    """One line: the GPU and its peak, or why there is no roofline."""


def rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """A summary frame's rows as dicts."""
    return list(frame.iter_rows(named=True))


def _count(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else "-"


def roofline_cells(r: Roofline | None) -> tuple[list[tuple[str, ...]], str]:
    """The roofline view's rows (TUI_ROOFLINE_COLUMNS cells, the top ROOFLINE_ROWS by GPU time) and its note."""
    if r is None:
        return [], "roofline: not computed for this trace"
    if r.reason is not None:
        return [], r.reason
    cells = [
        tuple(printable(format_value(c.kind, row[c.key]).strip()) for c in TUI_ROOFLINE_COLUMNS)
        for row in rows(r.operators.head(ROOFLINE_ROWS))
    ]
    peak = None if r.peaks is None else r.peaks.tflops(r.precision)
    note = f"roofline, top by GPU time: {r.gpu or 'an unnamed GPU'}" + (
        f", {r.precision} peak {peak:,.0f} TFLOP/s" if peak is not None else ""
    )  # one line at 80 columns
    return cells, note if r.peaks is not None else unknown_gpu_note(r.gpu)


def operator_panel(summary: Summary) -> OperatorPanel:
    """The panel of a summary (see OperatorPanel)."""
    ops = summary.operators
    roofline, roofline_note = roofline_cells(summary.roofline)
    if ops is None:
        return OperatorPanel(note=NO_OPERATORS, roofline=roofline, roofline_note=roofline_note)
    listed: dict[str, tuple[str, ...]] = {}
    for r in rows(ops.top_by_gpu_time) + rows(ops.top_by_cpu_self_time):
        listed.setdefault(
            r["name"],
            (
                printable(r["name"]),
                _count(r["calls"]),
                format_ns(r["cpu_self_ns"]),
                format_ns(r["gpu_ns"]),
                _count(r["kernels"]),
                format_ns(r["launch_latency_mean_ns"]),
            ),
        )
    kernels: dict[str, list[tuple[str, ...]]] = {}
    for r in rows(ops.kernels_of_top):
        cells = (printable(r["kernel"]), _count(r["count"]), format_ns(r["gpu_ns"]))  # the screen shortens names
        kernels.setdefault(printable(r["operator"]), []).append(cells)
    mods = ops.modules
    modules: list[tuple[str, ...]] = [
        (
            printable(r["module"]),
            _count(r["calls"]),
            format_ns(r["cpu_total_ns"]),
            format_ns(r["gpu_ns"]),
            format_ns(r["gpu_inclusive_ns"]),
        )
        for r in (rows(mods.top_by_gpu_time) if mods else [])
    ]
    note = (
        f"{ops.operators:,} operators launched {ops.attributed:,} of {ops.records:,} GPU records "
        f"({100 * ops.attributed_gpu_share:.1f} % of GPU time)"  # one line at 80 columns
    )
    modules_note = (
        NO_MODULES
        if mods is None
        else f"{mods.modules:,} modules, {mods.frames:,} calls; {100 * mods.attributed_gpu_share:.1f} % of GPU time"
    )
    shapes: list[tuple[str, ...]] = [
        (
            printable(r["name"]),
            printable(r["input_dims"] or "-"),
            _count(r["calls"]),
            format_ns(r["cpu_self_ns"]),
            format_ns(r["gpu_ns"]),
            _count(r["kernels"]),
        )
        for r in (rows(ops.by_shape) if ops.by_shape is not None else [])
    ]
    if ops.source == "nvtx":
        note += " (no framework operators: the CPU NVTX ranges play their part)"
        modules_note = ""
    return OperatorPanel(note, list(listed.values()), kernels, modules, modules_note, shapes, roofline, roofline_note)
