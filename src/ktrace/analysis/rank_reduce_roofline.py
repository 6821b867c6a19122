"""The roofline (roofline.roofline) of a many-rank job from per-rank parts.

Each rank sends its modeled calls grouped per (name, input shapes, dtypes) with their calls, FLOPs, bytes and GPU
time (roofline.group_calls), its FLOPs per dtype, its steps' FLOPs and times (roofline.step_flops), its GPU time
without a model per operator name and its GPUs' names. The client adds the groups up (exact), picks the job's GPU
(the most common device name) and dominant precision from the sums, and computes the rows and each step's MFU as
one process does. Steps are those of the step source the whole job uses (rank_views_reduce.view_step_source).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from ktrace.analysis.gpu_peaks import GpuPeaks, match_gpu
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.roofline import (
    KEYS,
    NO_OPERATORS,
    NO_SHAPES,
    Roofline,
    dominant_precision,
    dtype_flops,
    group_calls,
    modeled_calls,
    roofline_rows,
    step_flops,
    with_mfu,
)
from ktrace.model.trace import Trace


@dataclass(frozen=True)
class RooflinePart:
    """One slice's roofline inputs (see the module docstring); `reason` as roofline's, None when modeled."""

    gpus: tuple[tuple[str, int], ...]
    """(device name, devices) in the devices table's order."""
    reason: str | None
    gpu_time_ns: int
    groups: pl.DataFrame
    per_dtype: pl.DataFrame
    steps: pl.DataFrame
    """step_flops' rows, each tagged with its slice's step source (``source``)."""
    no_model: pl.DataFrame


def roofline_part(trace: Trace, step_source: str, *, index: TraceIndex | None = None) -> RooflinePart:
    """The slice's RooflinePart; `step_source` is the source its steps came from (detect_steps' without a
    pattern, RankPartial.view_step_source)."""
    ix = TraceIndex.of(trace, index)
    names = [n for n in trace.devices["name"].to_list() if n] if "name" in trace.devices.columns else []
    found = modeled_calls(trace, ix)
    gpus = tuple(Counter(names).items())
    if found.reason is not None:
        empty = pl.DataFrame()
        return RooflinePart(gpus, found.reason, found.gpu_time_ns, empty, empty, empty, empty)
    steps = step_flops(trace, ix, found.coded).with_columns(source=pl.lit(step_source, pl.String))
    groups = group_calls(found.coded)  # these read the KEYS coded, as roofline() does (Strings made after grouping)
    return RooflinePart(gpus, None, found.gpu_time_ns, groups, dtype_flops(found.coded), steps, found.no_model)


def merge_roofline_parts(parts: Sequence[RooflinePart]) -> RooflinePart:
    """Several parts (in (node, rank) order) as one: groups, FLOPs, steps and unmodeled time added up; the reason
    one process would give (no operators anywhere, else no shapes anywhere)."""
    gpus: Counter[str] = Counter()
    for p in parts:
        gpus.update(dict(p.gpus))
    total = sum(p.gpu_time_ns for p in parts)
    modeled = [p for p in parts if p.reason is None]
    if not modeled:
        reason = NO_SHAPES if any(p.reason == NO_SHAPES for p in parts) else NO_OPERATORS
        empty = pl.DataFrame()
        return RooflinePart(tuple(gpus.items()), reason, total, empty, empty, empty, empty)
    groups = _concat([p.groups for p in modeled])
    if groups.height:
        groups = groups.group_by(KEYS, maintain_order=True).agg(
            pl.col("dtype").first(), pl.col("calls", "flops", "bytes_sum", "bytes_nulls", "gpu_time_ns").sum()
        )
    return RooflinePart(
        gpus=tuple(gpus.items()),
        reason=None,
        gpu_time_ns=total,
        groups=groups,
        per_dtype=_sum_by(_concat([p.per_dtype for p in modeled]), ["dtype"]),
        steps=_concat([p.steps for p in modeled]),
        no_model=_sum_by(_concat([p.no_model for p in modeled]), ["name"]),
    )


def job_roofline(part: RooflinePart, step_source: str, overrides: Mapping[str, GpuPeaks] | None = None) -> Roofline:
    """roofline.roofline of the whole job from the merge of every rank's part; `step_source` is the job's
    (rank_views_reduce.view_step_source), `overrides` gpu_peaks rows from a rules file (summarize's gpu_peaks)."""
    gpu = Counter(dict(part.gpus)).most_common(1)[0][0] if part.gpus else None
    peaks = match_gpu(gpu, dict(overrides) if overrides else None)
    if part.reason is not None:
        empty = pl.DataFrame()
        return Roofline(gpu, peaks, empty, empty, None, empty, part.gpu_time_ns, part.reason)
    precision = dominant_precision(part.per_dtype)
    steps = part.steps.filter(pl.col("source") == step_source).drop("source") if part.steps.height else part.steps
    no_model = part.no_model.sort(["gpu_time_ns", "name"], descending=[True, False])
    return Roofline(
        gpu=gpu,
        peaks=peaks,
        operators=roofline_rows(part.groups, peaks),
        per_step=with_mfu(steps, peaks, precision),
        precision=precision,
        no_model=no_model,
        gpu_time_ns=part.gpu_time_ns,
    )


def _concat(frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    found = [f for f in frames if f.height]
    return pl.concat(found, how="vertical_relaxed") if found else frames[0]


def _sum_by(frame: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    return frame.group_by(keys).agg(pl.exclude(keys).sum()) if frame.height else frame
