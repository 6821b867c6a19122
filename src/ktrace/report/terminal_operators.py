"""The terminal summary's tables after the operator table: the nn.Module table (when the trace has module
frames) and, with `ktrace summary --by-shape`, the operators by input shape.

Rows come from the Summary's typed fields as the JSON has them (report.rows), every trace string made
printable; report.terminal prints them with its print_table (names shortened to the terminal's width). Input
shapes are too long for an 80-column cell, so the by-shape table names each distinct shape (s1, s2, ...) and
the shapes follow the table, one line each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ktrace.analysis.operator_shapes import NO_SHAPES
from ktrace.analysis.operators import OperatorSummary
from ktrace.model.display_text import printable, printable_tree
from ktrace.report.rows import rows

MODULE_ROWS = 10
"""nn.Modules listed in the terminal (the JSON and the report list `--top`)."""
SHAPE_ROWS = 15
"""(operator, input shapes) rows listed in the terminal with --by-shape."""


@dataclass(frozen=True)
class TerminalTable:
    """One table for report.terminal.print_table, and the lines printed under it."""

    title: str
    rows: list[dict[str, Any]]
    lines: tuple[str, ...] = ()


def module_table(ops: OperatorSummary | None) -> TerminalTable | None:
    """The top nn.Modules by GPU time (with what their nested modules launched); None without module frames."""
    mods = None if ops is None else ops.modules
    if mods is None:
        return None
    found: list[dict[str, Any]] = printable_tree(rows(mods.top_by_gpu_time.head(MODULE_ROWS)))
    table = [
        {
            "module": r["module"],
            "calls": r["calls"],
            "cpu_ns": r["cpu_total_ns"],
            "gpu_ns": r["gpu_inclusive_ns"],
            "own_gpu_ns": r["gpu_ns"],
            "kernels": r["kernels"],
        }
        for r in found
    ]
    title = (
        f"nn.Modules: top {len(table)} of {mods.modules:,} by GPU time (cpu = span; gpu = what the module and "
        "the modules nested in it launched; own = itself)"
    )
    return TerminalTable(title, table)


def shape_table(ops: OperatorSummary | None) -> TerminalTable | None:
    """The top (operator, input shapes) rows by GPU time, shapes named s1, s2, ... and listed below; an empty
    table when the operators are NVTX ranges (no shapes); None without operators."""
    if ops is None:
        return None
    if ops.by_shape is None:  # NVTX ranges stand in for the operators: they carry no input shapes
        return TerminalTable(f"operators by input shape ({ops.source} operators carry no input shapes)", [])
    found: list[dict[str, Any]] = printable_tree(rows(ops.by_shape.head(SHAPE_ROWS)))
    label: dict[str | None, str] = {None: "-"}
    for r in found:
        label.setdefault(r["input_dims"], f"s{len(label)}")
    table = [
        {
            "name": r["name"],
            "shapes": label[r["input_dims"]],
            "calls": r["calls"],
            "cpu_self_ns": r["cpu_self_ns"],
            "gpu_ns": r["gpu_ns"],
            "kernels": r["kernels"],
        }
        for r in found
    ]
    lines = tuple(f"  {name} {printable(str(dims))}" for dims, name in label.items() if dims is not None)
    title = f"operators by input shape: top {len(table)} by GPU time (shapes = Input Dims, listed below)"
    return TerminalTable(title, table, lines or (f"  {NO_SHAPES}",))
