"""Python-frame view (issue #15): which line of Python code launched the GPU work.

Kineto writes a python_function frame per Python call when the profiler runs with_stack=True, named
`file.py(line): function`. A GPU record (kernel, memcpy, memset) belongs to the innermost such frame on its launch
call's thread containing the call's start (op_attribution.innermost_of_records, as operators and modules), nn.Module
frames (the module view has them) and built-in calls (`<built-in method softmax of Tensor object at 0x...>`: the C
function, named with an object address) left out: the line of Python source that called into the framework. `gpu_ns` counts what a frame
launched itself, innermost, so the rows of the table add up to the attributed GPU time.

Cost: one sorted containment pass over the launches (steps.enclosing; the nesting kernel walks only the frames that
contain a launch: the README demo's 65 k frames hold its 4.3 k launches), no self-time pass over the frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.op_attribution import I64, IS_PYTHON_FRAME, innermost_of_records
from ktrace.model.trace import Trace

FRAME_OF_RECORD = Slot[I64]("python_frame_of_record")
FRAME_COLUMNS = ("frame", "calls", "gpu_ns", "kernels", "gpu_records")
"""Columns of PythonFrameSummary.top_by_gpu_time, in order."""
NO_PYTHON_FRAMES = (
    "operators.python_frames: no Python frames in this trace (Kineto writes them as python_function events when "
    "the profiler runs with with_stack=True)"
)


@dataclass(frozen=True)
class PythonFrameSummary:
    """The Python-frame view's counts and its top frames by GPU time (FRAME_COLUMNS)."""

    frames: int
    """Python source frames (calls; nn.Module frames and built-in calls left out) in the trace."""
    names: int
    """Distinct frame names (`file.py(line): function`)."""
    attributed: int
    """GPU records launched inside a Python frame."""
    attributed_gpu_share: float
    """Share of all GPU record time (sum of durations) launched inside a Python frame."""
    top_by_gpu_time: pl.DataFrame
    """The frame names whose innermost frames launched the most GPU time: frame (the name), calls (frames of that
    name), GPU time (sum of durations), kernel and record counts. By GPU time, then name; names without GPU work
    left out."""


def python_frame_of_records(trace: Trace, *, index: TraceIndex | None = None) -> I64:
    """Row of trace.ops of the innermost Python source frame (op_attribution.IS_PYTHON_FRAME) containing each GPU
    record's launch call (index order; -1 where none)."""
    ix = TraceIndex.of(trace, index)
    return ix.get(FRAME_OF_RECORD, lambda: innermost_of_records(ix, IS_PYTHON_FRAME))


def python_frame_summary(trace: Trace, *, top: int = 10, index: TraceIndex | None = None) -> PythonFrameSummary | None:
    """The Python-frame view (see the module docstring); None when the trace has no Python frames."""
    if trace.ops.height == 0 or "category" not in trace.ops.columns:
        return None
    ix = TraceIndex.of(trace, index)
    is_frame = trace.ops.select(IS_PYTHON_FRAME.fill_null(False)).to_series()
    frames = int(is_frame.sum())
    if frames == 0:
        return None
    c = ix.gpu_columns()
    of = python_frame_of_records(trace, index=ix)
    mine = np.flatnonzero(of >= 0)
    names = trace.ops["name"]
    launched = pl.DataFrame(
        {
            "frame": names.gather(pl.Series(of[mine])).cast(pl.String),
            "dur": c.end[mine] - c.start[mine],
            "kernel": mine < c.n_kernels,
        }
    )
    calls = (
        names.filter(is_frame).value_counts(name="calls").select(pl.col("name").cast(pl.String).alias("frame"), "calls")
    )
    per_name = (
        launched.group_by("frame")
        .agg(gpu_ns=pl.col("dur").sum(), kernels=pl.col("kernel").sum().cast(pl.Int64), gpu_records=pl.len())
        .join(calls, on="frame", how="left")
        .with_columns(pl.col("calls", "gpu_records").cast(pl.Int64))
    )
    best = per_name.sort(["gpu_ns", "frame"], descending=[True, False]).head(top).select(FRAME_COLUMNS)
    total = int((c.end - c.start).sum())
    return PythonFrameSummary(
        frames=frames,
        names=calls.height,
        attributed=int(mine.size),
        attributed_gpu_share=float(launched["dur"].sum()) / total if total else 0.0,
        top_by_gpu_time=best,
    )
