"""The operator screen's model (no widgets): the operator table, each top operator's kernels, the module table.

Built from the Summary the dashboard worker computes (analysis.operators.operator_summary), so the TUI shows
the numbers of `ktrace summary` and the report. Strings only: the widget makes cells of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ktrace.analysis.modules import NO_MODULES
from ktrace.analysis.summary import NO_OPERATORS, Summary
from ktrace.model.display_text import printable
from ktrace.model.units import format_ns

OPERATOR_HEADERS = ("operator", "calls", "CPU self", "GPU", "kernels", "launch->run")
KERNEL_HEADERS = ("kernel", "launches", "GPU")
MODULE_HEADERS = ("module", "calls", "CPU", "GPU own", "GPU nested")
SHAPE_HEADERS = ("operator", "input shapes", "calls", "CPU self", "GPU", "kernels")


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


def rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """A summary frame's rows as dicts."""
    return list(frame.iter_rows(named=True))


def _count(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else "-"


def operator_panel(summary: Summary) -> OperatorPanel:
    """The panel of a summary (see OperatorPanel)."""
    ops = summary.operators
    if ops is None:
        return OperatorPanel(note=NO_OPERATORS)
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
    return OperatorPanel(note, list(listed.values()), kernels, modules, modules_note, shapes)
