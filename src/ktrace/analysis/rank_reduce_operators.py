"""The operator view (operators.operator_summary, with its modules, Python frames and input shapes) of a many-rank
job from per-rank parts.

Every table of the view groups by a name (operator, (operator, input shapes), (operator, kernel), module, Python
frame), and each rank sends all of its groups with their sums; the client adds them up, so calls, times, counts
and their order are exact, and a mean launch latency is the sum over the count (within 1e-9). The operators'
source is the one one process picks: the framework operators (cpu_op) when any rank has them, else the CPU
ranges (range_operators, "nvtx"). A part grows with distinct names, not with events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.kernels import EFFICIENCY_COLUMNS, efficiency_means
from ktrace.analysis.modules import MODULE_COLUMNS, ModuleSummary, module_summary
from ktrace.analysis.op_attribution import IS_PYTHON_FRAME
from ktrace.analysis.operator_shapes import SHAPE_COLUMNS, has_shapes, operators_by_shape, top_by_shape
from ktrace.analysis.operators import (
    EFFICIENCY_SUMS,
    KERNEL_COLUMNS,
    OPERATOR_COLUMNS,
    OperatorSummary,
    OperatorView,
    operator_kernels,
    operator_table,
    top_operators,
)
from ktrace.analysis.python_frames import FRAME_COLUMNS, PythonFrameSummary, python_frame_summary
from ktrace.analysis.range_operators import NVTX_SOURCE, range_view
from ktrace.model.trace import Trace

_ALL = 2**31
"""`top` that keeps every row (the client picks the job's top)."""
_KERNELS_PER_OPERATOR = 5
_FRAME_TOP = 10
"""python_frame_summary's default top (what operator_summary shows)."""
_LATENCY_SUM = "launch_latency_sum_ns"


@dataclass(frozen=True)
class NamedPart:
    """A view grouped by name (modules, Python frames): every name's sums and the attribution counts."""

    per_name: pl.DataFrame
    calls: pl.DataFrame | None
    """Python frames: calls per frame name, launching or not (per_name has only those that launched); None for
    modules (per_name has every module)."""
    frames: int
    attributed: int
    attributed_gpu_ns: float


@dataclass(frozen=True)
class OperatorPart:
    """One slice's operator view in mergeable form; `source` None when the slice has no operators of that kind."""

    source: str | None
    records: int
    gpu_ns: int
    """All GPU records' time (the attribution shares' denominator)."""
    per_name: pl.DataFrame
    """OPERATOR_COLUMNS less the means (latency, launch figures), plus launch_latency_sum_ns and EFFICIENCY_SUMS."""
    attributed: int
    attributed_gpu_ns: float
    kernels: pl.DataFrame
    """KERNEL_COLUMNS of every operator and kernel."""
    shapes: pl.DataFrame | None
    """Per (name, input shapes) as per_name; None where not computed."""
    has_shapes: bool
    modules: NamedPart | None
    python_frames: NamedPart | None


def _with_latency_sum(frame: pl.DataFrame) -> pl.DataFrame:
    mean = pl.col("launch_latency_mean_ns")
    return frame.with_columns((mean * pl.col("kernels")).fill_null(0.0).alias(_LATENCY_SUM)).drop(
        mean.meta.output_name(), *EFFICIENCY_COLUMNS, strict=False
    )


def operator_part(trace: Trace, *, by_shape: bool = False, index: TraceIndex | None = None) -> OperatorPart:
    """The slice's OperatorPart: of its framework operators, else of its CPU ranges (range_operators)."""
    ix = TraceIndex.of(trace, index)
    c = ix.gpu_columns()
    total = int((c.end - c.start).sum())
    source: str | None = "cpu_op"
    found = operator_table(trace, ("name",), index=ix)
    t, tix = trace, ix
    if found is None:
        view = range_view(trace, index=ix)
        found = None if view is None else operator_table(view[0], ("name",), index=view[1])
        source = None if found is None else NVTX_SOURCE
        if view is not None:
            t, tix = view
    if found is None:
        empty = pl.DataFrame()
        return OperatorPart(None, c.size, total, empty, 0, 0.0, empty, None, False, None, None)
    frame, attributed, attributed_ns = found
    names = frame["name"].to_list()
    shaped = source == "cpu_op" and has_shapes(trace)
    shapes = operators_by_shape(trace, sums=True, index=ix) if source == "cpu_op" and (shaped or by_shape) else None
    return OperatorPart(
        source=source,
        records=c.size,
        gpu_ns=total,
        per_name=_with_latency_sum(frame.select(*OPERATOR_COLUMNS[: -len(EFFICIENCY_COLUMNS)], *EFFICIENCY_SUMS)),
        attributed=attributed,
        attributed_gpu_ns=attributed_ns,
        kernels=operator_kernels(t, names, per_operator=_ALL, index=tix),
        shapes=None if shapes is None else _with_latency_sum(shapes),
        has_shapes=shaped,
        modules=_modules_part(t, tix, total),
        python_frames=_frames_part(t, tix, total),
    )


def _modules_part(trace: Trace, ix: TraceIndex, total: int) -> NamedPart | None:
    m = module_summary(trace, top=_ALL, index=ix)
    if m is None:
        return None
    return NamedPart(m.top_by_gpu_time, None, m.frames, m.attributed, m.attributed_gpu_share * total)


def _frames_part(trace: Trace, ix: TraceIndex, total: int) -> NamedPart | None:
    p = python_frame_summary(trace, top=_ALL, index=ix)
    if p is None:
        return None
    names = trace.ops.filter(IS_PYTHON_FRAME.fill_null(False))["name"].cast(pl.String)
    calls = names.value_counts(name="calls").select(pl.col("name").alias("frame"), pl.col("calls").cast(pl.Int64))
    return NamedPart(p.top_by_gpu_time.drop("calls"), calls, p.frames, p.attributed, p.attributed_gpu_share * total)


def merge_operator_parts(parts: Sequence[OperatorPart], *, by_shape: bool = False) -> OperatorPart:
    """Several parts as one: the source one process picks (cpu_op over nvtx); sums per name."""
    source = "cpu_op" if any(p.source == "cpu_op" for p in parts) else (NVTX_SOURCE if parts else None)
    kept = [p for p in parts if p.source == source]
    records, total = sum(p.records for p in parts), sum(p.gpu_ns for p in parts)
    if not kept:
        empty = pl.DataFrame()
        return OperatorPart(None, records, total, empty, 0, 0.0, empty, None, False, None, None)
    shaped = any(p.has_shapes for p in kept)
    shapes = [p.shapes for p in kept if p.shapes is not None] if shaped or by_shape else []
    return OperatorPart(
        source=source,
        records=records,
        gpu_ns=total,
        per_name=_sum_by(_concat([p.per_name for p in kept]), ["name"]),
        attributed=sum(p.attributed for p in kept),
        attributed_gpu_ns=sum(p.attributed_gpu_ns for p in kept),
        kernels=_sum_by(_concat([p.kernels for p in kept]), ["operator", "kernel"]),
        shapes=_sum_by(_concat(shapes), ["name", "input_dims"]) if shapes else None,
        has_shapes=shaped,
        modules=_merge_named([p.modules for p in kept], "module"),
        python_frames=_merge_named([p.python_frames for p in kept], "frame"),
    )


def _concat(frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    found = [f for f in frames if f.height]
    return pl.concat(found, how="vertical_relaxed") if found else frames[0]


def _sum_by(frame: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    return frame.group_by(keys).agg(pl.exclude(keys).sum()) if frame.height else frame


def _merge_named(parts: Sequence[NamedPart | None], key: str) -> NamedPart | None:
    found = [p for p in parts if p is not None]
    if not found:
        return None
    return NamedPart(
        per_name=_sum_by(_concat([p.per_name for p in found]), [key]),
        calls=None
        if found[0].calls is None
        else _sum_by(_concat([p.calls for p in found if p.calls is not None]), [key]),
        frames=sum(p.frames for p in found),
        attributed=sum(p.attributed for p in found),
        attributed_gpu_ns=sum(p.attributed_gpu_ns for p in found),
    )


def _with_mean_latency(frame: pl.DataFrame) -> pl.DataFrame:
    mean = pl.when(pl.col("kernels") > 0).then(pl.col(_LATENCY_SUM) / pl.col("kernels")).otherwise(None)
    return frame.with_columns(mean.cast(pl.Float64).alias("launch_latency_mean_ns"))


def job_operators(part: OperatorPart, *, top: int = 15) -> OperatorSummary | None:
    """operator_summary (with_shapes applied) of the whole job from the merge of every rank's part."""
    if part.source is None:
        return None
    per_name = (
        _with_mean_latency(efficiency_means(part.per_name))
        .select(OPERATOR_COLUMNS)
        .sort(["gpu_ns", "cpu_self_ns", "name"], descending=[True, True, False])
    )
    share = part.attributed_gpu_ns / part.gpu_ns if part.gpu_ns else 0.0
    view = OperatorView(per_name, part.records, part.attributed, share)
    by_gpu = top_operators(view, "gpu", top)
    summary = OperatorSummary(
        operators=per_name.height,
        records=part.records,
        attributed=part.attributed,
        attributed_gpu_share=share,
        top_by_gpu_time=by_gpu,
        top_by_cpu_self_time=top_operators(view, "cpu_self", top),
        kernels_of_top=_kernels_of(part.kernels, by_gpu["name"].to_list()),
        modules=_job_modules(part.modules, part.gpu_ns, top),
        python_frames=_job_frames(part.python_frames, part.gpu_ns),
        source=part.source,
    )
    if part.shapes is None:
        return summary
    shapes = (
        _with_mean_latency(efficiency_means(part.shapes))
        .select(SHAPE_COLUMNS)
        .sort(["gpu_ns", "cpu_self_ns", "name", "input_dims"], descending=[True, True, False, False], nulls_last=True)
    )
    return replace(summary, by_shape=top_by_shape(shapes, top))


def _kernels_of(kernels: pl.DataFrame, operators: list[str]) -> pl.DataFrame:
    """operators.operator_kernels of the job: the top kernels of each named operator, in the order given."""
    order = pl.DataFrame(
        {"operator": operators, "order": range(len(operators))}, schema={"operator": pl.String, "order": pl.Int64}
    )
    if kernels.height == 0:
        return pl.DataFrame(schema={"operator": pl.String, "kernel": pl.String, "count": pl.Int64, "gpu_ns": pl.Int64})
    per = kernels.join(order, on="operator").sort(["order", "gpu_ns", "kernel"], descending=[False, True, False])
    return per.group_by("order", maintain_order=True).head(_KERNELS_PER_OPERATOR).select(KERNEL_COLUMNS)


def _job_modules(part: NamedPart | None, total: int, top: int) -> ModuleSummary | None:
    if part is None:
        return None
    best = part.per_name.sort(["gpu_inclusive_ns", "module"], descending=[True, False]).head(top)
    return ModuleSummary(
        modules=part.per_name.height,
        frames=part.frames,
        attributed=part.attributed,
        attributed_gpu_share=part.attributed_gpu_ns / total if total else 0.0,
        top_by_gpu_time=best.select(MODULE_COLUMNS),
    )


def _job_frames(part: NamedPart | None, total: int) -> PythonFrameSummary | None:
    if part is None:
        return None
    calls = part.calls if part.calls is not None else pl.DataFrame(schema={"frame": pl.String, "calls": pl.Int64})
    per_name = part.per_name.join(calls, on="frame", how="left")
    best = per_name.sort(["gpu_ns", "frame"], descending=[True, False]).head(_FRAME_TOP)
    return PythonFrameSummary(
        frames=part.frames,
        names=calls.height,
        attributed=part.attributed,
        attributed_gpu_share=part.attributed_gpu_ns / total if total else 0.0,
        top_by_gpu_time=best.select(FRAME_COLUMNS),
    )
