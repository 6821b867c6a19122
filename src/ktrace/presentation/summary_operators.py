"""The operators' sections: the terminal's operator table (top by GPU time, then the CPU-heavy ones), the
nn.Modules, the operators by input shape, and the report's fuller operator tables (both top lists, the kernels
of the top operators, modules and frequent kernel sequences).

Input shapes are too long for an 80-column cell, so the by-shape table names each distinct shape (s1, s2, ...)
and the shapes follow the table, one line each.
"""

from __future__ import annotations

from typing import Any

from ktrace.analysis.modules import NO_MODULES
from ktrace.analysis.names import short_kernel_name
from ktrace.analysis.operator_shapes import NO_SHAPES
from ktrace.analysis.operators import OperatorSummary
from ktrace.analysis.summary import NO_OPERATORS, NO_SEQUENCES, Summary
from ktrace.presentation.page import Column, Section, Table
from ktrace.presentation.summary_tables import frame_rows, rows_table

OPERATOR_ROWS = (10, 5)
"""The terminal's operator table: this many top operators by GPU time, then up to this many more by CPU self time."""
MODULE_ROWS = 10
"""nn.Modules listed in the terminal (the JSON and the report list `--top`)."""
SHAPE_ROWS = 15
"""(operator, input shapes) rows listed in the terminal with --by-shape."""
SEQUENCE_NAME_WIDTH = 36
"""Characters of each kernel's short name in a sequence (three fit a Markdown cell of 120)."""
OPERATOR_NOTE = (
    "GPU = time of the kernels, memcpys and memsets whose launch call lies inside the operator (innermost "
    "operator on the launching thread); launch->run = mean time from the launch call to its kernel's start."
)
SHAPE_NOTE = (
    "Input shapes as the profiler recorded them (Kineto Input Dims, record_shapes=True), one row per operator "
    "name and shapes; the rows of a name add up to its row above."
)
NVTX_NOTE = (
    "This trace has no framework operators: its CPU ranges (NVTX, ktrace.annotate; step ranges left out) play "
    "their part."
)


def operator_rows(ops: OperatorSummary) -> list[dict[str, Any]]:
    """The summary's two top-operator lists as one: by GPU time, then the CPU-heavy ones not already in it (CPU
    total time is in the JSON: in 80 columns the names need its room)."""
    by_gpu, by_cpu = OPERATOR_ROWS
    top = frame_rows(ops.top_by_gpu_time)[:by_gpu]
    shown = {r["name"] for r in top}
    top += [r for r in frame_rows(ops.top_by_cpu_self_time) if r["name"] not in shown][:by_cpu]
    return [
        {
            "name": r["name"],
            "calls": r["calls"],
            "cpu_self_ns": r["cpu_self_ns"],
            "gpu_ns": r["gpu_ns"],
            "kernels": r["kernels"],
            "latency_ns": r["launch_latency_mean_ns"],
        }
        for r in top
    ]


def module_table(ops: OperatorSummary | None) -> Table | None:
    """The top nn.Modules by GPU time (with what their nested modules launched); None without module frames."""
    mods = None if ops is None else ops.modules
    if mods is None:
        return None
    found = [
        {
            "module": r["module"],
            "calls": r["calls"],
            "cpu_ns": r["cpu_total_ns"],
            "gpu_ns": r["gpu_inclusive_ns"],
            "own_gpu_ns": r["gpu_ns"],
            "kernels": r["kernels"],
        }
        for r in frame_rows(mods.top_by_gpu_time.head(MODULE_ROWS))
    ]
    title = (
        f"nn.Modules: top {len(found)} of {mods.modules:,} by GPU time (cpu = span; gpu = what the module and "
        "the modules nested in it launched; own = itself)"
    )
    return rows_table("modules", title, found)


def shape_table(ops: OperatorSummary | None) -> Table | None:
    """The top (operator, input shapes) rows by GPU time, shapes named s1, s2, ... and listed below; an empty
    table when the operators are NVTX ranges (no shapes); None without operators."""
    if ops is None:
        return None
    if ops.by_shape is None:  # NVTX ranges stand in for the operators: they carry no input shapes
        return rows_table(
            "operator_shapes", f"operators by input shape ({ops.source} operators carry no input shapes)", []
        )
    found = frame_rows(ops.by_shape.head(SHAPE_ROWS))
    label: dict[str | None, str] = {None: "-"}
    for r in found:
        label.setdefault(r["input_dims"], f"s{len(label)}")
    shaped = [
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
    lines = tuple(f"  {name} {dims}" for dims, name in label.items() if dims is not None)
    title = f"operators by input shape: top {len(shaped)} by GPU time (shapes = Input Dims, listed below)"
    return rows_table("operator_shapes", title, shaped, lines=lines or (f"  {NO_SHAPES}",))


def operators_section(summary: Summary, *, by_shape: bool = False) -> Section:
    """The terminal's operator table, the nn.Modules (with module frames) and, when `by_shape`, the operators by
    input shape."""
    ops = summary.operators
    title = (
        f"operators: top {OPERATOR_ROWS[0]} by GPU time, then by CPU self time (gpu = work each launched, innermost "
        "operator; latency = mean launch -> kernel start)"
    )
    blocks: list[Table] = [rows_table("operators", title, [] if ops is None else operator_rows(ops))]
    for extra in (module_table(ops), shape_table(ops) if by_shape else None):
        if extra is not None:
            blocks.append(extra)
    return Section("operators", "Operators", tuple(blocks))


def _share_pct(value: float) -> str:
    return f"{100 * value:.1f}"


_OPERATOR_COLUMNS = (
    Column("name", "operator"),
    Column("calls"),
    Column("cpu_total_ns", "CPU total"),
    Column("cpu_self_ns", "CPU self"),
    Column("gpu_ns", "GPU"),
    Column("kernels"),
    Column("gpu_records", "GPU records"),
    Column("launch_latency_mean_ns", "launch->run"),
)


def operator_report_tables(summary: Summary) -> tuple[Table, ...]:
    """The report's operator tables: by GPU time, by CPU self time (the first says what GPU time means), by input
    shape (when the summary has it), the kernels of the top operators, nn.Modules (Kineto operators) and frequent
    kernel sequences; a table without rows says in `lines` why."""
    ops = summary.operators
    out: list[Table] = []
    if ops is None:
        out.append(Table("operators_by_gpu", "Operators", (), (), lines=(NO_OPERATORS,)))
    else:
        intro = (
            f"{ops.operators:,} operator names; {ops.attributed:,} of {ops.records:,} GPU records "
            f"({_share_pct(ops.attributed_gpu_share)} % of GPU time) launched inside one. {OPERATOR_NOTE}"
            + (f" {NVTX_NOTE}" if ops.source == "nvtx" else "")
        )
        for key, title, frame in (
            ("operators_by_gpu", "Top operators by GPU time", ops.top_by_gpu_time),
            ("operators_by_cpu_self", "Top operators by CPU self time", ops.top_by_cpu_self_time),
        ):
            out.append(Table(key, title, _OPERATOR_COLUMNS, tuple(frame_rows(frame)), lines=() if out else (intro,)))
        if ops.by_shape is not None:
            shaped = (_OPERATOR_COLUMNS[0], Column("input_dims", "input shapes", "text"), *_OPERATOR_COLUMNS[1:])
            title = "Top operators by input shape (by GPU time)"
            out.append(Table("operators_by_shape", title, shaped, tuple(frame_rows(ops.by_shape)), lines=(SHAPE_NOTE,)))
        kernel_columns = (
            Column("operator", unit="text"),
            Column("kernel", unit="text"),
            Column("count", "launches"),
            Column("gpu_ns", "GPU"),
        )
        title = "Kernels of the top operators (by GPU time)"
        out.append(Table("operator_kernels", title, kernel_columns, tuple(frame_rows(ops.kernels_of_top))))
        if ops.source == "cpu_op":
            out.append(_modules_table(ops))
    out.append(_sequences_table(summary))
    return tuple(out)


def _modules_table(ops: OperatorSummary) -> Table:
    mods = ops.modules
    if mods is None:
        return Table("modules", "Modules (nn.Module)", (), (), lines=(NO_MODULES,))
    note = (
        f"{mods.modules:,} modules, {mods.frames:,} calls; {mods.attributed:,} GPU records "
        f"({_share_pct(mods.attributed_gpu_share)} % of GPU time) launched inside one. GPU own = launched by the "
        "module itself (innermost module frame); with nested = plus its submodules'."
    )
    module_columns = (
        Column("module"),
        Column("calls"),
        Column("cpu_total_ns", "CPU total"),
        Column("gpu_ns", "GPU own"),
        Column("gpu_inclusive_ns", "GPU with nested"),
        Column("kernels"),
    )
    title = "Modules (nn.Module) by GPU time with nested modules"
    return Table("modules", title, module_columns, tuple(frame_rows(mods.top_by_gpu_time)), lines=(note,))


def _sequences_table(summary: Summary) -> Table:
    seq = summary.kernel_sequences
    if seq is None:
        return Table("kernel_sequences", "Frequent kernel sequences", (), (), lines=(NO_SEQUENCES,))
    note = (
        f"Runs of {seq.length} consecutive kernels on one stream repeated most often (non-overlapping "
        f"occurrences; {seq.distinct:,} distinct sequences repeat): fusion candidates."
    )
    found = [
        {**r, "kernels": " → ".join(short_kernel_name(k, SEQUENCE_NAME_WIDTH) for k in r["kernels"])}
        for r in frame_rows(seq.top)
    ]
    sequence_columns = (
        Column("kernels", unit="text"),
        Column("count"),
        Column("streams"),
        Column("total_ns", "total"),
        Column("mean_ns", "mean"),
        Column("time_share", "share"),
    )
    return Table("kernel_sequences", "Frequent kernel sequences", sequence_columns, tuple(found), lines=(note,))
