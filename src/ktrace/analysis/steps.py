"""Training steps: detection, step-time statistics, outliers, and attribution of GPU work to steps and annotations.

API:

- ``detect_steps(trace, pattern=None, source="auto") -> pl.DataFrame``: node, rank, step, name,
  start_ns, end_ns, duration_ns, pid, tid, source ("profiler_step" | "annotation" | "periodic").
- ``step_stats(trace, steps=None) -> pl.DataFrame``: per (node, rank) count, total, mean, std, min,
  p50/p90/p95/p99, max of step durations.
- ``step_histogram(trace, steps=None, bins=20) -> pl.DataFrame``: bin_start_ns, bin_end_ns, count.
- ``step_outliers(trace, steps=None, stddev=3.0) -> pl.DataFrame``: every step with mean/std of its
  rank, z-score and is_outlier (duration > mean + stddev * std), SageMaker StepOutlier.
- ``step_outlier_verdict(trace, steps=None, stddev=3.0, n_outliers=10) -> StepOutlierVerdict``.
- ``step_of_launches(trace, frame, steps=None) -> pl.DataFrame``: adds `step` to a frame with
  node, rank, api_start_ns (the launch call's start).
- ``enclosing(ranges, points, keys, time_col) -> (ranges_sorted, index)``: innermost range per point.
  Its steps over arrays (group ids, the innermost range per point in chunks of points): steps_innermost.
- ``attribute_kernels(trace, steps=None) -> pl.DataFrame``: every GPU record with its step, the
  innermost CPU annotation enclosing its launch, and the innermost GPU-side annotation.

Step sources, in order for source="auto": ranges named ``ProfilerStep#N`` (PyTorch profiler);
ranges whose name matches `pattern` (default ANNOTATION_RE: "step 12", "train_step", "iteration_3");
else a periodic fallback: the kernel name whose start-to-start intervals have the smallest coefficient of
variation marks step boundaries (a heuristic, flagged "periodic": every view says the steps are inferred). A
communication kernel (NCCL, custom all-reduce) is never a marker, and a rank with a step range (any of the
above, or a range of the profiler_step domain) gets no inferred steps, even with source="periodic": the
periodic kernel of a long annotated step (a decode loop, one all-reduce per layer) marks no step.
Inferred steps must pass a confidence test, else the rank has no steps: the period repeats at least
PERIODIC_MIN_STEPS times, its intervals vary by at most PERIODIC_MAX_CV (std / mean), and the steps cover at
least PERIODIC_MIN_COVER of the rank's kernel span (first kernel start to last kernel end). A kernel that
runs a few times in one long step (a model run five times in one inference step, an irregular
initialization kernel) fails it; a loop of many similar iterations passes.
Matching ranges are taken from the thread with the most matches per rank. GPU work belongs to the
step whose range contains its launch call (as HTA's `iteration`), so asynchronous kernels running
after the CPU step ended still count for their step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.periodic_steps import PERIODIC_MAX_CV as PERIODIC_MAX_CV
from ktrace.analysis.periodic_steps import PERIODIC_MIN_COVER as PERIODIC_MIN_COVER
from ktrace.analysis.periodic_steps import PERIODIC_MIN_STEPS as PERIODIC_MIN_STEPS
from ktrace.analysis.periodic_steps import periodic_steps
from ktrace.analysis.steps_innermost import innermost_of_points, int64_values, key_ids
from ktrace.model.trace import Trace

PROFILER_STEP_RE = r"^ProfilerStep\s*#\s*(\d+)$"
ANNOTATION_RE = r"(?i)^(?:train(?:ing)?[_ ]?)?(?:step|iteration|iter)(?:[ _#:]*(\d+))?$"
QUANTILES = (0.5, 0.9, 0.95, 0.99)
_STEP_SCHEMA = {
    "node": pl.String,
    "rank": pl.Int32,
    "step": pl.Int64,
    "name": pl.String,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "duration_ns": pl.Int64,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "source": pl.String,
}
STEPS_SLOT = Slot[pl.DataFrame]("detect_steps")
STEP_SOURCES = ("profiler_step", "annotation", "periodic")
"""Where detected steps come from: ProfilerStep ranges, step-named ranges, or inferred from a periodic kernel."""


def detect_steps(
    trace: Trace,
    pattern: str | None = None,
    source: Literal["auto", "profiler_step", "annotation", "periodic"] = "auto",
    *,
    index: TraceIndex | None = None,
) -> pl.DataFrame:
    """Find the training steps of every rank.

    Args:
        trace: the trace.
        pattern: regex for step annotations (default ANNOTATION_RE); a first capture group of digits
            gives the step number, else steps are numbered 0.. per rank. Given a pattern, "auto"
            tries it before ProfilerStep ranges.
        source: force one method, or "auto".
        index: the trace's TraceIndex (the summary, the rules and the TUI all ask for the steps).

    Returns:
        Frame (schema _STEP_SCHEMA) sorted by node, rank, start_ns; empty if nothing is found.
    """
    ix = TraceIndex.of(trace, index)
    return ix.get(STEPS_SLOT, lambda: _detect_steps(trace, pattern, source, ix), pattern, source)


def _detect_steps(trace: Trace, pattern: str | None, source: str, index: TraceIndex) -> pl.DataFrame:
    cpu = trace.ranges.filter(~pl.col("on_gpu")).select(
        pl.col("node").cast(pl.String),
        "rank",
        pl.col("name").cast(pl.String),
        "start_ns",
        "end_ns",
        "pid",
        "tid",
        profiler_step=pl.col("domain").cast(pl.String) == "profiler_step",
    )
    tries: list[tuple[str, str]] = []
    if source in ("auto", "annotation") and pattern is not None:
        tries.append(("annotation", pattern))
    if source in ("auto", "profiler_step"):
        tries.append(("profiler_step", PROFILER_STEP_RE))
    if source in ("auto", "annotation") and pattern is None:
        tries.append(("annotation", ANNOTATION_RE))
    for name, regex in tries:
        found = _steps_from_ranges(cpu, regex, name)
        if found.height:
            return found
    if source in ("auto", "periodic"):
        return periodic_steps(index, _annotated_ranks(cpu, pattern), _STEP_SCHEMA)
    return pl.DataFrame(schema=_STEP_SCHEMA)


def _annotated_ranks(cpu: pl.DataFrame, pattern: str | None) -> pl.DataFrame:
    """node, rank of every rank with a CPU range that is a step (ProfilerStep#N, the profiler_step domain, a name
    matching `pattern` or ANNOTATION_RE): its steps are those, never inferred ones."""
    named = [pl.col("name").str.contains(r) for r in (PROFILER_STEP_RE, ANNOTATION_RE, pattern) if r is not None]
    is_step = pl.any_horizontal(pl.col("profiler_step"), *named)
    return cpu.filter(is_step).select("node", "rank").unique()


def _steps_from_ranges(cpu: pl.DataFrame, regex: str, source: str) -> pl.DataFrame:
    hits = cpu.filter(pl.col("name").str.contains(regex))
    if hits.height == 0:
        return pl.DataFrame(schema=_STEP_SCHEMA)
    best = (
        hits.group_by("node", "rank", "pid", "tid")
        .len()
        .sort("len", "tid", descending=[True, False])
        .unique(["node", "rank"], keep="first")
    )
    hits = hits.join(best.select("node", "rank", "pid", "tid"), on=["node", "rank", "pid", "tid"]).sort(
        "node", "rank", "start_ns"
    )
    number = (
        pl.col("name").str.extract(regex, 1).cast(pl.Int64, strict=False)
        if "(" in regex.replace("(?", "")
        else pl.lit(None, pl.Int64)
    )
    order = pl.int_range(pl.len(), dtype=pl.Int64).over("node", "rank")
    hits = hits.with_columns(
        step=pl.coalesce(number, order), duration_ns=pl.col("end_ns") - pl.col("start_ns"), source=pl.lit(source)
    )
    return hits.select(list(_STEP_SCHEMA)).cast(_STEP_SCHEMA)  # type: ignore[arg-type]


def _steps(trace: Trace, steps: pl.DataFrame | None, index: TraceIndex | None) -> pl.DataFrame:
    return detect_steps(trace, index=index) if steps is None else steps


def step_stats(trace: Trace, steps: pl.DataFrame | None = None, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """Step-duration statistics per (node, rank).

    Args:
        trace: the trace.
        steps: steps from detect_steps (detected with defaults if None).

    Returns:
        Frame: node, rank, source, steps, total_ns, mean_ns, std_ns (sample), min_ns, p50_ns, p90_ns,
        p95_ns, p99_ns, max_ns.
    """
    d = pl.col("duration_ns").cast(pl.Float64)
    return (
        _steps(trace, steps, index)
        .group_by("node", "rank", "source")
        .agg(
            pl.len().alias("steps"),
            pl.col("duration_ns").sum().alias("total_ns"),
            d.mean().alias("mean_ns"),
            d.std().alias("std_ns"),
            d.min().alias("min_ns"),
            *[d.quantile(q, interpolation="linear").alias(f"p{int(q * 100)}_ns") for q in QUANTILES],
            d.max().alias("max_ns"),
        )
        .sort("node", "rank")
    )


def step_histogram(
    trace: Trace, steps: pl.DataFrame | None = None, bins: int = 20, *, index: TraceIndex | None = None
) -> pl.DataFrame:
    """Histogram of step durations over all ranks (equal-width bins from min to max).

    Returns:
        Frame: bin_start_ns, bin_end_ns (floats), count.
    """
    d = _steps(trace, steps, index)["duration_ns"].to_numpy()
    if d.size == 0:
        return pl.DataFrame(schema={"bin_start_ns": pl.Float64, "bin_end_ns": pl.Float64, "count": pl.Int64})
    counts, edges = np.histogram(d, bins=bins)
    return pl.DataFrame({"bin_start_ns": edges[:-1], "bin_end_ns": edges[1:], "count": counts.astype(np.int64)})


def step_outliers(
    trace: Trace, steps: pl.DataFrame | None = None, stddev: float = 3.0, *, index: TraceIndex | None = None
) -> pl.DataFrame:
    """Every step with its rank's mean and (sample) standard deviation and an outlier flag.

    SageMaker Debugger StepOutlier: a step is an outlier when its duration exceeds mean + stddev * σ
    of its rank's steps (code default stddev=3; the AWS docs say 5).

    Returns:
        The steps frame plus mean_ns, std_ns, z, is_outlier.
    """
    return flag_step_outliers(_steps(trace, steps, index), stddev)


def flag_step_outliers(s: pl.DataFrame, stddev: float = 3.0) -> pl.DataFrame:
    """step_outliers of a steps frame (node, rank, duration_ns, ...): a trace's, or a fleet's reduced steps."""
    d = pl.col("duration_ns").cast(pl.Float64)
    s = s.with_columns(mean_ns=d.mean().over("node", "rank"), std_ns=d.std().over("node", "rank"))
    return s.with_columns(
        z=pl.when(pl.col("std_ns") > 0).then((d - pl.col("mean_ns")) / pl.col("std_ns")).otherwise(0.0)
    ).with_columns(is_outlier=pl.col("z") > stddev)


@dataclass(frozen=True)
class StepOutlierVerdict:
    """SageMaker StepOutlier rule outcome: fires when more than n_outliers steps are outliers."""

    steps: int
    outliers: int
    triggered: bool
    stddev: float
    n_outliers: int
    worst_step: int | None
    """Step number with the largest z-score (None without steps)."""
    worst_z: float


def step_outlier_verdict(
    trace: Trace,
    steps: pl.DataFrame | None = None,
    stddev: float = 3.0,
    n_outliers: int = 10,
    *,
    index: TraceIndex | None = None,
) -> StepOutlierVerdict:
    """Evaluate the StepOutlier rule (defaults from the rule's code: stddev=3, n_outliers=10)."""
    o = step_outliers(trace, steps, stddev, index=index)
    count = int(o["is_outlier"].sum()) if o.height else 0
    worst = o.sort("z", descending=True).row(0, named=True) if o.height else None
    return StepOutlierVerdict(
        steps=o.height,
        outliers=count,
        triggered=count > n_outliers,
        stddev=stddev,
        n_outliers=n_outliers,
        worst_step=None if worst is None else int(worst["step"]),
        worst_z=0.0 if worst is None else float(worst["z"]),
    )


def enclosing(
    ranges: pl.DataFrame, points: pl.DataFrame, keys: tuple[str, ...], time_col: str
) -> tuple[pl.DataFrame, npt.NDArray[np.int64]]:
    """Innermost range (same key columns, start <= t < end) for every point.

    Args:
        ranges: frame with keys, start_ns, end_ns (and anything else).
        points: frame with keys and time_col.
        keys: matching columns, "node" and "rank" first, then integer columns (no nulls).
        time_col: the point time column.

    Returns:
        (ranges sorted as the kernel saw them, int64 index into it per point in `points` order; -1
        where none).
    """
    r_gid, p_gid, n_groups = key_ids(ranges, points, keys)
    r_start, r_end = int64_values(ranges["start_ns"]), int64_values(ranges["end_ns"])
    order = np.lexsort((-r_end, r_start, r_gid))  # by group, start, then the outer (longer) range first
    r_gid, r_start, r_end = r_gid[order], r_start[order], r_end[order]
    return ranges[order], innermost_of_points(r_gid, r_start, r_end, p_gid, n_groups, int64_values(points[time_col]))


def _attach(
    points: pl.DataFrame, ranges: pl.DataFrame, idx: npt.NDArray[np.int64], cols: dict[str, str]
) -> pl.DataFrame:
    """Columns of ranges[idx] (renamed per `cols`) onto points; nulls where idx is -1."""
    ok = pl.Series(idx >= 0)
    safe = np.where(idx >= 0, idx, 0)
    new: list[pl.Series | pl.Expr] = []
    for src, dst in cols.items():
        if ranges.height == 0:
            new.append(pl.repeat(None, points.height, dtype=ranges.schema[src], eager=True).alias(dst))
        else:
            new.append(pl.when(ok).then(ranges[src].gather(safe)).otherwise(None).alias(dst))
    return points.with_columns(new)


def step_of_launches(
    trace: Trace, frame: pl.DataFrame, steps: pl.DataFrame | None = None, *, index: TraceIndex | None = None
) -> pl.DataFrame:
    """Add `step` (null outside every step) to a frame with node, rank and api_start_ns."""
    s = _steps(trace, steps, index)
    r, idx = enclosing(s.select("node", "rank", "start_ns", "end_ns", "step"), frame, ("node", "rank"), "api_start_ns")
    return _attach(frame, r, idx, {"step": "step"})


def attribute_kernels(
    trace: Trace, steps: pl.DataFrame | None = None, *, index: TraceIndex | None = None
) -> pl.DataFrame:
    """Every launched GPU record with its step and enclosing annotations.

    - step: the step whose range contains the launch call (null outside steps).
    - annotation / annotation_depth: the innermost CPU range (NVTX, user annotation; profiler-step
      ranges excluded) on the launching thread that contains the launch call's start.
    - gpu_annotation: the innermost GPU-side range (Kineto gpu_user_annotation) on the same device and
      stream containing the record's start (this one also applies to records without a launch).

    Args:
        trace: the trace.
        steps: steps from detect_steps (detected with defaults if None).
        index: the trace's TraceIndex.

    Returns:
        Frame: node, rank, device, stream, kind, row, name, start_ns, end_ns, correlation_id,
        api_start_ns (null without a launch), pid, tid, step, annotation, annotation_depth,
        gpu_annotation; sorted by node, rank, start_ns.
    """
    ix = TraceIndex.of(trace, index)
    act = ix.gpu_activity(with_names=True)  # in launch_rows' order: no join needed
    rows = ix.launch_rows()
    launch = trace.api.select(pl.col("start_ns").alias("api_start_ns"), "pid", "tid")
    if launch.height:
        hit = pl.Series(rows >= 0)
        launch = launch[np.maximum(rows, 0)]
        act = act.with_columns(pl.when(hit).then(launch[c]).otherwise(None).alias(c) for c in launch.columns)
    else:
        act = act.with_columns(pl.lit(None, pl.Int64).alias(c) for c in launch.columns)
    launched = act.filter(pl.col("api_start_ns").is_not_null())
    launched = step_of_launches(trace, launched, steps, index=ix)
    cpu = trace.ranges.filter(~pl.col("on_gpu") & (pl.col("domain").cast(pl.String) != "profiler_step")).select(
        pl.col("node").cast(pl.String),
        "rank",
        "pid",
        "tid",
        "start_ns",
        "end_ns",
        pl.col("name").cast(pl.String),
        "depth",
    )
    r, idx = enclosing(cpu, launched, ("node", "rank", "pid", "tid"), "api_start_ns")
    launched = _attach(launched, r, idx, {"name": "annotation", "depth": "annotation_depth"})
    rest = act.filter(pl.col("api_start_ns").is_null()).with_columns(
        step=pl.lit(None, pl.Int64), annotation=pl.lit(None, pl.String), annotation_depth=pl.lit(None, pl.Int32)
    )
    out = pl.concat([launched, rest], how="vertical_relaxed")
    gpu = trace.ranges.filter(pl.col("on_gpu")).select(
        pl.col("node").cast(pl.String),
        "rank",
        pl.col("device").fill_null(-1),
        pl.col("stream").fill_null(-1),
        "start_ns",
        "end_ns",
        pl.col("name").cast(pl.String),
    )
    r, idx = enclosing(gpu, out, ("node", "rank", "device", "stream"), "start_ns")
    out = _attach(out, r, idx, {"name": "gpu_annotation"})
    return out.select(
        "node",
        "rank",
        "device",
        "stream",
        "kind",
        "row",
        "name",
        "start_ns",
        "end_ns",
        "correlation_id",
        "api_start_ns",
        "pid",
        "tid",
        "step",
        "annotation",
        "annotation_depth",
        "gpu_annotation",
    ).sort("node", "rank", "start_ns")
