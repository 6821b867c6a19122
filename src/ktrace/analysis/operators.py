"""Framework operators (Kineto cpu_op): which operator launched each GPU record, and the operator view.

A GPU record (kernel, memcpy, memset) belongs to the innermost operator whose thread and time span contain
the start of its launch call (the api row of the launch join, TraceIndex.launch_rows). An operator's CPU
self time is its span less the parts of its direct children (same thread) that lie inside it. Python frames
(ops.category python_function) share the ops table but are not operators: modules.py reads the nn.Module ones.

Operators are grouped by name here; operator_shapes.py groups them by (name, input shapes) (ops.input_dims, which
the importer keeps as raw JSON text, unparsed), and range_operators.py builds this same view from CPU ranges
(NVTX) for traces without operators.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.kernels import EFFICIENCY_COLUMNS, efficiency_means, efficiency_sum_exprs, kernel_figures
from ktrace.analysis.modules import ModuleSummary, module_summary
from ktrace.analysis.op_attribution import I64, IS_OPERATOR, enclosing_on_thread, innermost_at, innermost_of_records
from ktrace.analysis.python_frames import PythonFrameSummary, python_frame_summary
from ktrace.model.trace import Trace

OPERATOR_OF_RECORD = Slot[I64]("operator_of_record")
OPERATOR_SELF_NS = Slot[I64]("operator_self_ns")
OPERATOR_COLUMNS = (
    "name",
    "calls",
    "cpu_total_ns",
    "cpu_self_ns",
    "gpu_ns",
    "kernels",
    "gpu_records",
    "launch_latency_mean_ns",
    *EFFICIENCY_COLUMNS,
)
"""Columns of OperatorView.per_name, in order."""
EFFICIENCY_SUMS = tuple(f"{c}_{part}" for c in EFFICIENCY_COLUMNS for part in ("wsum", "w"))
"""operator_table's sums behind EFFICIENCY_COLUMNS (kernels.efficiency_sums; kernels.efficiency_means reads them)."""


@dataclass(frozen=True)
class OperatorView:
    """Per operator name: calls, CPU time, and the GPU work it launched (innermost-operator attribution)."""

    per_name: pl.DataFrame
    """One row per operator name (OPERATOR_COLUMNS): calls; CPU total (sum of spans) and self time; GPU time
    (sum of durations) of the kernels, memcpys and memsets it launched, their count and kernel count; mean
    launch -> run latency (kernel start - launch call start) of its kernels (null without kernels); the
    time-weighted blocks per SM, est. achieved occupancy, registers per thread and shared memory of its kernels
    (kernels.EFFICIENCY_COLUMNS, null where none carries the figure). Sorted by GPU time, then CPU self time,
    descending."""
    records: int
    """GPU records in the trace (kernels + memory operations)."""
    attributed: int
    """Records attributed to an operator."""
    attributed_gpu_share: float
    """Share of all GPU record time (sum of durations) whose launch lies inside an operator."""


def operator_of_records(trace: Trace, *, index: TraceIndex | None = None) -> I64:
    """Row of trace.ops of the innermost operator containing each GPU record's launch call.

    Records are in the index's GPU-record order (kernels then memory operations, each in table order).
    The operator must be on the launch call's thread (node, rank, pid, tid) with start <= call start < end;
    Python frames (ops.category python_function) are not operators (see innermost_of_records).

    Returns:
        int64 ops row per record; -1 for a record without a launch call or outside every operator.
    """
    ix = TraceIndex.of(trace, index)
    return ix.get(OPERATOR_OF_RECORD, lambda: innermost_of_records(ix, IS_OPERATOR))


def operator_at(trace: Trace, points: pl.DataFrame, time_col: str) -> I64:
    """Row of trace.ops of the innermost framework operator containing each point (same thread, start <= t < end,
    t the point's `time_col`): the attribution every operator view shares (allocator events by their own time).

    Returns:
        int64 ops row per point (in `points` order); -1 outside every operator.
    """
    return innermost_at(trace, points, time_col, IS_OPERATOR)


def operator_self_ns(trace: Trace, *, index: TraceIndex | None = None) -> I64:
    """CPU self time of each operator (ops row of category cpu_op): its span less its direct children's spans
    clipped to it (>= 0); 0 for a Python frame (not computed: nothing reads it).

    Operators and Python frames nest apart (a child is of the same category, on the same thread), so the
    pass runs on the operators alone: an operator's self time is the same with or without the trace's Python
    frames, and a trace with with_stack (the README demo: 65 k frames beside 24 k operators) pays nothing more."""
    ops = trace.ops
    self_ns = np.zeros(ops.height, np.int64)
    self_ns[np.flatnonzero(ops.select(IS_OPERATOR).to_series().to_numpy())] = self_ns_of_operators(trace, index=index)
    return self_ns


def self_ns_of_operators(trace: Trace, *, index: TraceIndex | None = None) -> I64:
    """operator_self_ns of the operators' rows only (IS_OPERATOR, in table order), as the index keeps it: one
    int64 per ops row held ~100 MB at 13 M ops rows, three quarters of them Python frames (owlv2 x150)."""
    ix = TraceIndex.of(trace, index)
    return ix.get(OPERATOR_SELF_NS, lambda: _self_ns(ix.trace.ops))


def _self_ns(ops: pl.DataFrame) -> I64:
    rows = np.flatnonzero(ops.select(IS_OPERATOR).to_series().to_numpy())
    if rows.size == 0:
        return np.zeros(0, np.int64)
    # the spans' frame lives only through the nesting pass; the times are then taken alone and read in place
    # (astype copies were two more int64 arrays per operator: ~11 MB at 670 k operators, owlv2 x30)
    enclosing = enclosing_on_thread(ops.select("node", "rank", "pid", "tid", "start_ns", "end_ns")[rows])
    times = ops.select("start_ns", "end_ns")[rows]
    start = np.asarray(times["start_ns"].to_numpy(), np.int64)
    end = np.asarray(times["end_ns"].to_numpy(), np.int64)
    child = np.flatnonzero(enclosing >= 0)
    parent = enclosing[child]
    del enclosing
    clipped = np.minimum(end[child], end[parent])
    clipped -= start[child]
    del child
    inside = np.zeros(rows.size, np.int64)
    np.add.at(inside, parent, clipped)
    del parent, clipped
    self_ns: I64 = end - start
    self_ns -= inside
    np.maximum(self_ns, 0, out=self_ns)
    return self_ns


def operator_view(trace: Trace, *, index: TraceIndex | None = None) -> OperatorView | None:
    """The operator view of a trace (see OperatorView); None when the trace has no operators."""
    found = operator_table(trace, ("name",), index=index)
    if found is None:
        return None
    per_name, attributed, attributed_gpu_ns = found
    per_name = (
        efficiency_means(per_name)
        .select(OPERATOR_COLUMNS)
        .sort(["gpu_ns", "cpu_self_ns", "name"], descending=[True, True, False])
    )
    c = TraceIndex.of(trace, index).gpu_columns()
    total = int((c.end - c.start).sum())
    return OperatorView(
        per_name=per_name,
        records=c.size,
        attributed=attributed,
        attributed_gpu_share=attributed_gpu_ns / total if total else 0.0,
    )


def operator_table(
    trace: Trace, keys: tuple[str, ...], *, index: TraceIndex | None = None
) -> tuple[pl.DataFrame, int, float] | None:
    """Per group of framework operators with the same `keys` (ops columns: the name, or the name and the input
    shapes): calls, CPU total and self time, and the GPU time, kernel and record counts and mean launch -> run
    latency of the GPU records they launched (operator_of_records), and their kernels' EFFICIENCY_SUMS (the
    means: kernels.efficiency_means). Unsorted; key columns as String.

    Returns (the frame, GPU records attributed to an operator, their GPU time in ns); None without operators."""
    if trace.ops.height == 0:
        return None
    ix = TraceIndex.of(trace, index)
    c = ix.gpu_columns()
    op_of = operator_of_records(trace, index=ix)
    launch = ix.launch_rows()
    api_start = ix.api_times()[0]
    operator_rows = np.flatnonzero(trace.ops.select(IS_OPERATOR.fill_null(False)).to_series().to_numpy())
    if operator_rows.size == 0:
        return None
    self_ns = self_ns_of_operators(trace, index=ix)  # (its nesting pass's peak before any frame here is built)
    # the keys are grouped by their codes (a Categorical's UInt32; several keys: one Int64, group_key), each group
    # keeps one of its rows, and only the groups' keys become Strings: a String per op row cost ~20-40 MB, grouping
    # two Categoricals row-encoded their texts and two UInt32 columns their codes (~33 MB at 730 k operators,
    # owlv2 x30; one Int64 key ~11). Only the operators' rows are taken (Python frames are ~3/4 of owlv2's ops
    # rows: ~250 MB less at 20 M events).
    spans = trace.ops.select(*[pl.col(k).to_physical() for k in keys], "start_ns", "end_ns")[operator_rows]
    group = group_key(spans.select(keys))
    by, on = ([group.alias(GROUP)], [GROUP]) if group is not None else ([pl.col(k) for k in keys], list(keys))
    cpu = (
        spans.select(
            *by,
            (pl.col("end_ns") - pl.col("start_ns")).alias("dur"),
            pl.Series("self", self_ns),
            pl.Series("row", operator_rows),
        )
        .group_by(on)
        .agg(calls=pl.len(), cpu_total_ns=pl.col("dur").sum(), cpu_self_ns=pl.col("self").sum(), row=pl.first("row"))
    )
    del spans, self_ns
    mine = np.flatnonzero(op_of >= 0)
    is_kernel = mine < c.n_kernels
    at = pl.Series(op_of[mine])
    figures = kernel_figures(trace, index=ix).drop("w").select(pl.all().gather(pl.Series(np.where(is_kernel, mine, 0))))
    records = pl.concat(
        [
            trace.ops.select(pl.col(k).to_physical().gather(at) for k in keys).select(
                *by,
                dur=pl.Series(c.end[mine] - c.start[mine]),
                kernel=pl.Series(is_kernel),
                latency=pl.Series(np.where(is_kernel, c.start[mine] - api_start[launch[mine]], 0)),
            ),
            figures,
        ],
        how="horizontal",
    ).with_columns(
        pl.col("dur").alias("w"), *[pl.when(pl.col("kernel")).then(pl.col(f)).alias(f) for f in EFFICIENCY_COLUMNS]
    )
    gpu = records.group_by(on).agg(
        pl.col("dur").sum().alias("gpu_ns"),
        pl.col("kernel").sum().cast(pl.Int64).alias("kernels"),
        pl.len().alias("gpu_records"),
        pl.col("latency").filter(pl.col("kernel")).mean().alias("launch_latency_mean_ns"),
        *efficiency_sum_exprs(),
    )
    joined = cpu.join(gpu, on=on, how="left", nulls_equal=True)
    texts = trace.ops.select(pl.col(*keys).gather(joined["row"]).cast(pl.String))
    frame = pl.concat([texts, joined.drop(*on, "row")], how="horizontal").with_columns(
        pl.col("gpu_ns", "kernels", "gpu_records").fill_null(0).cast(pl.Int64),
        pl.col([f"{f}_w" for f in EFFICIENCY_COLUMNS]).fill_null(0),
        pl.col("calls").cast(pl.Int64),
    )
    return frame, int(mine.size), float(records["dur"].sum())


GROUP = "group"
"""operator_table's column of group_key (several keys as one)."""


def group_key(codes: pl.DataFrame) -> pl.Expr | None:
    """One Int64 per row, equal exactly where the rows' `codes` are (columns of non-negative integers, nulls
    allowed): each column's code + 1 (null: 0) in mixed radix. None for a single column (grouped as it is), for a
    column that is not of such integers, or when the radixes pass 2^62."""
    if codes.width < 2 or not all(d.is_integer() for d in codes.dtypes):
        return None
    bounds = codes.select(pl.all().min().name.suffix("_lo"), pl.all().max().name.suffix("_hi")).row(0)
    key, radix = pl.lit(0, pl.Int64), 1
    for name, lo, hi in reversed(list(zip(codes.columns, bounds[: codes.width], bounds[codes.width :], strict=True))):
        if lo is not None and lo < 0:
            return None
        key = key + (pl.col(name).cast(pl.Int64).fill_null(-1) + 1) * radix
        radix *= (hi if hi is not None else -1) + 2
        if radix >= 1 << 62:
            return None
    return key


def top_operators(view: OperatorView, by: str, top: int = 15) -> pl.DataFrame:
    """The `top` operator names by "gpu" time or by "cpu_self" time (names without any of it left out)."""
    col = {"gpu": "gpu_ns", "cpu_self": "cpu_self_ns"}[by]
    other = "cpu_self_ns" if by == "gpu" else "gpu_ns"
    rows = view.per_name.filter(pl.col(col) > 0)
    return rows.sort([col, other, "name"], descending=[True, True, False]).head(top)


KERNEL_COLUMNS = ("operator", "kernel", "count", "gpu_ns")
"""Columns of operator_kernels' frame, in order."""


def operator_kernels(
    trace: Trace, operators: list[str], *, per_operator: int = 5, index: TraceIndex | None = None
) -> pl.DataFrame:
    """The kernels each named operator launched (innermost-operator attribution): per (operator, kernel
    name), launches and GPU time, the `per_operator` longest in total per operator, operators in the order
    given, kernels by GPU time then name (KERNEL_COLUMNS)."""
    ix = TraceIndex.of(trace, index)
    op_of = operator_of_records(trace, index=ix)
    c = ix.gpu_columns()
    codes, kernel_names = ix.kernel_name_codes()
    mine = np.flatnonzero(op_of[: c.n_kernels] >= 0)
    names = trace.ops["name"].gather(pl.Series(op_of[mine])).cast(pl.String)
    frame = pl.DataFrame(
        {"operator": names, "code": codes[mine], "dur": c.end[mine] - c.start[mine]},
        schema={"operator": pl.String, "code": pl.Int64, "dur": pl.Int64},
    )
    rank = pl.DataFrame(
        {"operator": operators, "order": np.arange(len(operators))}, schema={"operator": pl.String, "order": pl.Int64}
    )
    per = (
        frame.join(rank, on="operator")
        .group_by("operator", "order", "code")
        .agg(count=pl.len().cast(pl.Int64), gpu_ns=pl.col("dur").sum())
        .sort(["order", "gpu_ns", "code"], descending=[False, True, False])
    )
    top = per.group_by("order", maintain_order=True).head(per_operator)
    lookup = [*kernel_names, ""]  # code -1: a kernel without a name
    return top.with_columns(kernel=pl.Series([lookup[k] for k in top["code"].to_list()], dtype=pl.String)).select(
        KERNEL_COLUMNS
    )


@dataclass(frozen=True)
class OperatorSummary:
    """What the summary shows of the operator view: the attribution counts and the two top tables."""

    operators: int
    """Distinct operator names."""
    records: int
    attributed: int
    attributed_gpu_share: float
    top_by_gpu_time: pl.DataFrame
    """top_operators(view, "gpu")."""
    top_by_cpu_self_time: pl.DataFrame
    """top_operators(view, "cpu_self")."""
    kernels_of_top: pl.DataFrame
    """operator_kernels of the operators of top_by_gpu_time (5 kernels each at most)."""
    modules: ModuleSummary | None
    """modules.module_summary: the nn.Module view; None when the trace has no module frames."""
    by_shape: pl.DataFrame | None = None
    """operator_shapes.top_by_shape: the top (name, input shapes) rows; None unless asked for or the trace
    records shapes (operator_shapes.with_shapes)."""
    source: str = "cpu_op"
    """What played the operators' part: "cpu_op" (the ops table) or "nvtx" (CPU ranges: range_operators)."""
    python_frames: PythonFrameSummary | None = None
    """python_frames.python_frame_summary: the innermost Python frames' view; None without Python frames."""


def operator_summary(trace: Trace, *, top: int = 15, index: TraceIndex | None = None) -> OperatorSummary | None:
    """The operator view's counts and top tables; None when the trace has no operators."""
    ix = TraceIndex.of(trace, index)
    view = operator_view(trace, index=ix)
    if view is None:
        return None
    by_gpu = top_operators(view, "gpu", top)
    return OperatorSummary(
        operators=view.per_name.height,
        records=view.records,
        attributed=view.attributed,
        attributed_gpu_share=view.attributed_gpu_share,
        top_by_gpu_time=by_gpu,
        top_by_cpu_self_time=top_operators(view, "cpu_self", top),
        kernels_of_top=operator_kernels(trace, by_gpu["name"].to_list(), index=ix),
        modules=module_summary(trace, top=top, index=ix),
        python_frames=python_frame_summary(trace, index=ix),
    )
