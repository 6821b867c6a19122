"""nn.Module view: per module frame name, calls, CPU time and the GPU work launched inside it.

Kineto writes a python_function frame `nn.Module: Linear_0` around each module's forward when the profiler
runs with_stack and with_modules (the name's suffix numbers the instances of one class). A GPU record belongs
to the innermost module frame on its launch call's thread containing the call's start (the operators'
attribution, op_attribution.innermost_of_records, with module frames as the ranges): `gpu_ns` counts what a
module launched itself; `gpu_inclusive_ns` adds what the modules nested in it launched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.op_attribution import I64, IS_MODULE, MODULE_PREFIX, enclosing_on_thread, innermost_of_records
from ktrace.model.trace import Trace

MODULE_OF_RECORD = Slot[I64]("module_of_record")
MODULE_COLUMNS = ("module", "calls", "cpu_total_ns", "gpu_ns", "gpu_inclusive_ns", "kernels", "gpu_records")
"""Columns of ModuleSummary.top_by_gpu_time, in order."""
NO_MODULES = (
    "operators.modules: no nn.Module frames in this trace (Kineto writes them as python_function events when "
    "the profiler runs with with_stack=True and with_modules=True)"
)


@dataclass(frozen=True)
class ModuleSummary:
    """The module view's counts and its top modules by GPU time (MODULE_COLUMNS)."""

    modules: int
    """Distinct module frame names."""
    frames: int
    """Module frames (calls) in the trace."""
    attributed: int
    """GPU records launched inside a module frame."""
    attributed_gpu_share: float
    """Share of all GPU record time (sum of durations) launched inside a module frame."""
    top_by_gpu_time: pl.DataFrame
    """The modules with the most inclusive GPU time: module (the frame name less `nn.Module: `), calls, CPU
    total time (sum of spans), GPU time of the records it launched itself and with its nested modules', kernel
    and record counts (its own). By inclusive GPU time, then name."""


def module_of_records(trace: Trace, *, index: TraceIndex | None = None) -> I64:
    """Row of trace.ops of the innermost nn.Module frame containing each GPU record's launch call (index
    order; -1 where none)."""
    ix = TraceIndex.of(trace, index)
    return ix.get(MODULE_OF_RECORD, lambda: innermost_of_records(ix, IS_MODULE))


def _inclusive(own: I64, parent: I64) -> I64:
    """Each frame's `own` plus that of every frame nested in it (deepest level first, one numpy pass each)."""
    depth = np.zeros(parent.size, np.int64)
    up = parent.copy()
    while (live := up >= 0).any():
        depth[live] += 1
        up[live] = parent[up[live]]
    total = own.copy()
    for level in range(int(depth.max(initial=0)), 0, -1):
        rows = np.flatnonzero(depth == level)
        np.add.at(total, parent[rows], total[rows])
    return total


def module_summary(trace: Trace, *, top: int = 15, index: TraceIndex | None = None) -> ModuleSummary | None:
    """The module view (see the module docstring); None when the trace has no nn.Module frames."""
    if trace.ops.height == 0:
        return None
    ix = TraceIndex.of(trace, index)
    rows = np.flatnonzero(trace.ops.select(IS_MODULE).to_series().fill_null(False).to_numpy())
    if rows.size == 0:
        return None
    frames = trace.ops.select("node", "rank", "pid", "tid", "start_ns", "end_ns", "name")[rows].with_columns(
        pl.col("name").cast(pl.String)
    )
    c = ix.gpu_columns()
    of = module_of_records(trace, index=ix)
    mine = np.flatnonzero(of >= 0)
    position = np.full(trace.ops.height, -1, np.int64)
    position[rows] = np.arange(rows.size)
    at = position[of[mine]]
    dur = c.end[mine] - c.start[mine]
    own = np.bincount(at, weights=dur, minlength=rows.size).astype(np.int64)
    per_frame = frames.select(
        pl.col("name").str.strip_prefix(MODULE_PREFIX).alias("module"),
        (pl.col("end_ns") - pl.col("start_ns")).alias("cpu"),
        pl.Series("gpu", own),
        pl.Series("inclusive", _inclusive(own, enclosing_on_thread(frames))),
        pl.Series("kernels", np.bincount(at, weights=mine < c.n_kernels, minlength=rows.size).astype(np.int64)),
        pl.Series("records", np.bincount(at, minlength=rows.size).astype(np.int64)),
    )
    per_name = per_frame.group_by("module").agg(
        calls=pl.len().cast(pl.Int64),
        cpu_total_ns=pl.col("cpu").sum(),
        gpu_ns=pl.col("gpu").sum(),
        gpu_inclusive_ns=pl.col("inclusive").sum(),
        kernels=pl.col("kernels").sum(),
        gpu_records=pl.col("records").sum(),
    )
    best = per_name.sort(["gpu_inclusive_ns", "module"], descending=[True, False]).head(top).select(MODULE_COLUMNS)
    total = int((c.end - c.start).sum())
    return ModuleSummary(
        modules=per_name.height,
        frames=int(rows.size),
        attributed=int(mine.size),
        attributed_gpu_share=float(dur.sum()) / total if total else 0.0,
        top_by_gpu_time=best,
    )
