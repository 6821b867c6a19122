"""Operators by input shape: the operator view per (operator name, input shapes).

Kineto records each operator's input shapes (`args["Input Dims"]`) when the profiler runs with
record_shapes=True; the importer keeps them as ops.input_dims (normalized JSON text, "[[8, 3, 224, 224], []]",
null without shapes). One row per (name, input_dims) with the operator view's columns and attribution
(operators.operator_of_records, operators.operator_self_ns: a kernel belongs to the innermost operator
containing its launch), so a name's rows sum to its row of OperatorView.per_name. Operators without shapes
form one row per name with input_dims null.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.kernels import efficiency_means
from ktrace.analysis.op_attribution import IS_OPERATOR
from ktrace.analysis.operators import EFFICIENCY_SUMS, OPERATOR_COLUMNS, OperatorSummary, operator_table
from ktrace.model.trace import Trace

SHAPE_COLUMNS = ("name", "input_dims", *OPERATOR_COLUMNS[1:])
"""Columns of operators_by_shape's frame, in order (the operator view's, with input_dims after the name)."""
NO_SHAPES = (
    "by input shape: none (Kineto records operators' input shapes when the profiler runs with record_shapes=True)"
)
"""Why a trace's operators have no input shapes (the summary's table and the TUI say it)."""


def has_shapes(trace: Trace) -> bool:
    """Whether any framework operator of the trace carries its input shapes (ops.input_dims not null)."""
    ops = trace.ops
    if ops.height == 0 or "input_dims" not in ops.columns:
        return False
    return bool(ops.select((IS_OPERATOR & pl.col("input_dims").is_not_null()).any()).item())


def operators_by_shape(trace: Trace, *, sums: bool = False, index: TraceIndex | None = None) -> pl.DataFrame | None:
    """Per (operator name, input shapes) (SHAPE_COLUMNS): calls, CPU total and self time, the GPU time, kernel
    and record counts of what those calls launched, and the mean launch -> run latency of their kernels (null
    without kernels), and the time-weighted launch figures of their kernels (with `sums`, also the EFFICIENCY_SUMS
    behind them, which add up over ranks). By GPU time, then CPU self time, descending, then name and shapes.
    None without operators."""
    if "input_dims" not in trace.ops.columns:  # (a store written before ops.input_dims)
        trace = replace(trace, ops=trace.ops.with_columns(input_dims=pl.lit(None, pl.String)))
        index = None
    found = operator_table(trace, ("name", "input_dims"), index=index)
    if found is None:
        return None
    return (
        efficiency_means(found[0])
        .select(*SHAPE_COLUMNS, *(EFFICIENCY_SUMS if sums else ()))
        .sort(["gpu_ns", "cpu_self_ns", "name", "input_dims"], descending=[True, True, False, False], nulls_last=True)
    )


def top_by_shape(by_shape: pl.DataFrame, top: int = 15) -> pl.DataFrame:
    """The `top` (name, input shapes) rows by GPU time, then CPU self time (rows with neither left out)."""
    return by_shape.filter((pl.col("gpu_ns") > 0) | (pl.col("cpu_self_ns") > 0)).head(top)


def with_shapes(
    trace: Trace, summary: OperatorSummary | None, *, asked: bool, top: int = 15, index: TraceIndex | None = None
) -> OperatorSummary | None:
    """`summary` with its by_shape table (top_by_shape) when `asked` or when the trace records shapes; as it is
    otherwise (so traces without shapes summarize as before)."""
    if summary is None or summary.source != "cpu_op" or not (asked or has_shapes(trace)):
        return summary
    by_shape = operators_by_shape(trace, index=index)
    return summary if by_shape is None else replace(summary, by_shape=top_by_shape(by_shape, top))
