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

import numpy as np
import polars as pl

from ktrace.analysis.columns import dense_ids, name_codes
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.op_attribution import IS_OPERATOR
from ktrace.analysis.operators import OPERATOR_COLUMNS, OperatorSummary, operator_of_records, operator_self_ns
from ktrace.model.trace import Trace

SHAPE_COLUMNS = ("name", "input_dims", *OPERATOR_COLUMNS[1:])
NO_SHAPES = (
    "by input shape: none (Kineto records operators' input shapes when the profiler runs with record_shapes=True)"
)
"""Why a trace's operators have no input shapes (the summary's table and the TUI say it)."""
"""Columns of operators_by_shape's frame, in order (the operator view's, with input_dims after the name)."""


def has_shapes(trace: Trace) -> bool:
    """Whether any framework operator of the trace carries its input shapes (ops.input_dims not null)."""
    ops = trace.ops
    if ops.height == 0 or "input_dims" not in ops.columns:
        return False
    return bool(ops.select((IS_OPERATOR & pl.col("input_dims").is_not_null()).any()).item())


def operators_by_shape(trace: Trace, *, index: TraceIndex | None = None) -> pl.DataFrame | None:
    """Per (operator name, input shapes) (SHAPE_COLUMNS): calls, CPU total and self time, the GPU time, kernel
    and record counts of what those calls launched, and the mean launch -> run latency of their kernels (null
    without kernels). By GPU time, then CPU self time, descending, then name and shapes. None without operators."""
    ops = trace.ops
    if ops.height == 0:
        return None
    operator = ops.select(IS_OPERATOR.fill_null(False)).to_series().to_numpy()
    if not operator.any():
        return None
    ix = TraceIndex.of(trace, index)
    name_code, names = name_codes(ops["name"])
    dims = ops["input_dims"] if "input_dims" in ops.columns else pl.Series("input_dims", [None] * ops.height, pl.String)
    dims_code, shapes = name_codes(dims)  # Categorical as imported: a String cast of 0.9 M rows cost ~45 MB at x10
    group, (group_name, group_dims) = dense_ids([name_code, dims_code])
    n = group_name.size
    start, end = ops["start_ns"].to_numpy().astype(np.int64), ops["end_ns"].to_numpy().astype(np.int64)
    weight = operator.astype(np.int64)
    calls = np.bincount(group, weights=weight, minlength=n)
    cpu_total = np.bincount(group, weights=(end - start) * weight, minlength=n)
    cpu_self = np.bincount(group, weights=operator_self_ns(trace, index=ix) * weight, minlength=n)

    c = ix.gpu_columns()
    op_of = operator_of_records(trace, index=ix)
    mine = np.flatnonzero(op_of >= 0)
    at = group[op_of[mine]]
    kernel = mine < c.n_kernels
    latency = np.where(kernel, c.start[mine] - ix.api_times()[0][np.maximum(ix.launch_rows()[mine], 0)], 0)
    kernels = np.bincount(at, weights=kernel, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_latency = np.bincount(at, weights=latency, minlength=n) / kernels
    frame = pl.DataFrame(
        {
            "name": pl.Series([names[k] for k in group_name.tolist()], dtype=pl.String),
            "input_dims": pl.Series([shapes[k] if k >= 0 else None for k in group_dims.tolist()], dtype=pl.String),
            "calls": calls.astype(np.int64),
            "cpu_total_ns": cpu_total.astype(np.int64),
            "cpu_self_ns": cpu_self.astype(np.int64),
            "gpu_ns": np.bincount(at, weights=c.end[mine] - c.start[mine], minlength=n).astype(np.int64),
            "kernels": kernels.astype(np.int64),
            "gpu_records": np.bincount(at, minlength=n).astype(np.int64),
            "launch_latency_mean_ns": pl.Series(np.where(kernels > 0, mean_latency, np.nan)).fill_nan(None),
        }
    )
    return frame.filter(pl.col("calls") > 0).sort(
        ["gpu_ns", "cpu_self_ns", "name", "input_dims"], descending=[True, True, False, False], nulls_last=True
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
