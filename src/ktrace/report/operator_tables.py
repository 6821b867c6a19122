"""The report's operator section as plain tables (title, headers, cells, note), one definition for the HTML
(report.operator_section) and Markdown (report.markdown) renderers, so both show the same rows and numbers.

Reads the Summary's typed fields (operators, their modules and kernels, kernel sequences) through
report.rows.rows, as the JSON has them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ktrace.analysis.modules import NO_MODULES
from ktrace.analysis.names import short_kernel_name
from ktrace.analysis.summary import NO_OPERATORS, NO_SEQUENCES, Summary
from ktrace.presentation.summary_operators import NVTX_NOTE, OPERATOR_NOTE, SEQUENCE_NAME_WIDTH, SHAPE_NOTE
from ktrace.report.format import fmt_ns, fmt_num
from ktrace.report.rows import rows


@dataclass(frozen=True)
class Table:
    """One table of the operator section; `note` says what it shows or why it is empty."""

    title: str
    headers: tuple[str, ...]
    cells: list[list[object]]
    note: str = ""


_OPERATOR_HEADERS = ("operator", "calls", "CPU total", "CPU self", "GPU", "kernels", "GPU records", "launch->run")


def _share(value: float) -> str:
    return f"{100 * value:.1f}"


def _operator_cells(r: dict[str, Any]) -> list[object]:
    """calls, CPU total and self time, GPU time, kernels, GPU records and latency of one operator row."""
    return [
        fmt_num(r["calls"]),
        fmt_ns(r["cpu_total_ns"]),
        fmt_ns(r["cpu_self_ns"]),
        fmt_ns(r["gpu_ns"]),
        fmt_num(r["kernels"]),
        fmt_num(r["gpu_records"]),
        fmt_ns(r["launch_latency_mean_ns"]),
    ]


def operator_tables(summary: Summary) -> list[Table]:
    """Operators (by GPU time, by CPU self time), the kernels of the top ones, modules, kernel sequences."""
    ops = summary.operators
    out: list[Table] = []
    if ops is None:
        out.append(Table("Operators", (), [], NO_OPERATORS))
    else:
        intro = (
            f"{fmt_num(ops.operators)} operator names; {fmt_num(ops.attributed)} of {fmt_num(ops.records)} GPU "
            f"records ({_share(ops.attributed_gpu_share)} % of GPU time) launched inside one. {OPERATOR_NOTE}"
            + (f" {NVTX_NOTE}" if ops.source == "nvtx" else "")
        )
        for title, frame in (
            ("Top operators by GPU time", ops.top_by_gpu_time),
            ("Top operators by CPU self time", ops.top_by_cpu_self_time),
        ):
            cells: list[list[object]] = [[r["name"], *_operator_cells(r)] for r in rows(frame)]
            out.append(Table(title, _OPERATOR_HEADERS, cells, intro if not out else ""))
        if ops.by_shape is not None:
            out.append(
                Table(
                    "Top operators by input shape (by GPU time)",
                    (_OPERATOR_HEADERS[0], "input shapes", *_OPERATOR_HEADERS[1:]),
                    [[r["name"], r["input_dims"] or "-", *_operator_cells(r)] for r in rows(ops.by_shape)],
                    SHAPE_NOTE,
                )
            )
        out.append(
            Table(
                "Kernels of the top operators (by GPU time)",
                ("operator", "kernel", "launches", "GPU"),
                [
                    [r["operator"], r["kernel"], fmt_num(r["count"]), fmt_ns(r["gpu_ns"])]
                    for r in rows(ops.kernels_of_top)
                ],
            )
        )
        if ops.source == "cpu_op":
            out.append(_modules_table(summary))
    out.append(_sequences_table(summary))
    return out


def _modules_table(summary: Summary) -> Table:
    mods = summary.operators.modules if summary.operators else None
    if mods is None:
        return Table("Modules (nn.Module)", (), [], NO_MODULES)
    note = (
        f"{fmt_num(mods.modules)} modules, {fmt_num(mods.frames)} calls; {fmt_num(mods.attributed)} GPU records "
        f"({_share(mods.attributed_gpu_share)} % of GPU time) launched inside one. GPU own = launched by the "
        "module itself (innermost module frame); with nested = plus its submodules'."
    )
    return Table(
        "Modules (nn.Module) by GPU time with nested modules",
        ("module", "calls", "CPU total", "GPU own", "GPU with nested", "kernels"),
        [
            [
                r["module"],
                fmt_num(r["calls"]),
                fmt_ns(r["cpu_total_ns"]),
                fmt_ns(r["gpu_ns"]),
                fmt_ns(r["gpu_inclusive_ns"]),
                fmt_num(r["kernels"]),
            ]
            for r in rows(mods.top_by_gpu_time)
        ],
        note,
    )


def _sequences_table(summary: Summary) -> Table:
    seq = summary.kernel_sequences
    if seq is None:
        return Table("Frequent kernel sequences", (), [], NO_SEQUENCES)
    note = (
        f"Runs of {seq.length} consecutive kernels on one stream repeated most often (non-overlapping "
        f"occurrences; {fmt_num(seq.distinct)} distinct sequences repeat): fusion candidates."
    )
    return Table(
        "Frequent kernel sequences",
        ("kernels", "count", "streams", "total", "mean", "share %"),
        [
            [
                " → ".join(short_kernel_name(k, SEQUENCE_NAME_WIDTH) for k in r["kernels"]),
                fmt_num(r["count"]),
                fmt_num(r["streams"]),
                fmt_ns(r["total_ns"]),
                fmt_ns(r["mean_ns"]),
                _share(r["time_share"]),
            ]
            for r in rows(seq.top)
        ],
        note,
    )
