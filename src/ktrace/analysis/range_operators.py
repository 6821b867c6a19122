"""NVTX ranges as operators: the operator view of a trace without framework operators (ktrace's own captures,
Nsight Systems exports), where the CPU ranges (NVTX, ktrace.annotate) play the operators' part.

The ranges on CPU threads become the ops rows of a derived trace and go through the operator view unchanged
(operators.operator_summary): a GPU record belongs to the innermost range on its launch call's thread that
contains the call's start, and a range's self time is its span less its direct children's on the same thread.
Training-step ranges (ProfilerStep#N, which ktrace.step() writes) are steps, not operators, and are left out,
as Kineto leaves them out of its cpu_op events. Kineto traces keep their own rule (no cpu_op, no operators:
`--no-ops` means none), so only other sources fall back to their ranges.
"""

from __future__ import annotations

import dataclasses

import polars as pl

from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.op_attribution import has_operators
from ktrace.analysis.operators import OperatorSummary, operator_summary
from ktrace.analysis.steps import PROFILER_STEP_RE
from ktrace.model.trace import Trace, frame_schema

RANGE_OPERATORS = Slot[OperatorSummary | None]("range_operators")
RANGE_VIEW = Slot[tuple[Trace, TraceIndex] | None]("range_view")
NVTX_SOURCE = "nvtx"
"""OperatorSummary.source of a view built from ranges."""


def range_ops(trace: Trace) -> pl.DataFrame | None:
    """The trace's CPU ranges less its step ranges, as ops rows (category cpu_op, no external id, no shapes);
    None when a Kineto trace, a trace with framework operators, or one without such ranges."""
    if trace.meta.source == "kineto" or trace.ranges.height == 0:
        return None
    if has_operators(trace.ops):
        return None
    schema = frame_schema("ops")
    ranges = trace.ranges.filter(~pl.col("on_gpu") & ~pl.col("name").cast(pl.String).str.contains(PROFILER_STEP_RE))
    if ranges.height == 0:
        return None
    return ranges.select(
        "node",
        "rank",
        "start_ns",
        "end_ns",
        "pid",
        "tid",
        pl.col("name").cast(pl.String).cast(schema["name"]),
        pl.lit(None, pl.Int64).alias("external_id"),
        pl.lit(None, pl.Int64).alias("sequence_number"),
        pl.lit("cpu_op", pl.String).cast(schema["category"]).alias("category"),
        pl.lit(None, pl.String).cast(schema["input_dims"]).alias("input_dims"),
    )


def range_view(trace: Trace, *, index: TraceIndex | None = None) -> tuple[Trace, TraceIndex] | None:
    """The trace with its CPU ranges as its ops rows (range_ops) and that trace's own index (its launch join is
    the original's, computed again); None where range_ops is None. Shared under RANGE_VIEW: the operator view
    and the LaunchBoundOperators rule build it once per index."""
    ix = TraceIndex.of(trace, index)

    def compute() -> tuple[Trace, TraceIndex] | None:
        ops = range_ops(trace)
        if ops is None:
            return None
        derived = dataclasses.replace(trace, ops=ops)
        return derived, TraceIndex(derived)

    return ix.get(RANGE_VIEW, compute)


def range_operator_summary(trace: Trace, *, top: int = 15, index: TraceIndex | None = None) -> OperatorSummary | None:
    """The operator view with the CPU ranges as operators (see the module docstring), source "nvtx"; None when
    the trace has framework operators, is a Kineto trace or has no CPU ranges but steps.

    The result is shared under RANGE_OPERATORS, so the summary, the report and the TUI compute it once per index."""
    ix = TraceIndex.of(trace, index)
    return ix.get(RANGE_OPERATORS, lambda: _summary(trace, top, ix), top)


def _summary(trace: Trace, top: int, index: TraceIndex) -> OperatorSummary | None:
    view = range_view(trace, index=index)
    if view is None:
        return None
    found = operator_summary(view[0], top=top, index=view[1])
    return None if found is None else dataclasses.replace(found, source=NVTX_SOURCE)
