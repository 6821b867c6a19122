"""Roofline per operator and MFU per step: how close the operators' kernels came to the GPU's peak.

An operator call with a cost model (op_cost) owns the GPU records launched inside it, its nested calls' included
(the innermost-operator attribution of operators.operator_of_records, lifted to the outermost modeled call that
contains it: aten::linear owns its aten::addmm's kernel, so no FLOP is counted twice). Calls are grouped per
(name, input shapes, dtypes): calls, FLOPs, bytes, the GPU time of the records they own, achieved TFLOP/s and
TB/s, arithmetic intensity, the share of the roofline (min(peak, intensity x bandwidth), or of the bandwidth for
a bytes-only model) reached, and whether the roofline's ridge puts them compute- or memory-bound. GPU time in
no modeled call is "no model", per innermost operator name.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ktrace.analysis.gpu_peaks import GpuPeaks, match_gpu
from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.op_attribution import IS_OPERATOR, THREAD, enclosing_on_thread, innermost_at
from ktrace.analysis.op_cost import MODELED, Call, OpCost, op_cost
from ktrace.analysis.operators import operator_of_records
from ktrace.analysis.steps import detect_steps
from ktrace.analysis.utilization import named as names_in
from ktrace.model.trace import Trace

KEYS = ("name", "input_dims", "input_types")
ROOFLINE_COLUMNS = (
    "name",
    "input_dims",
    "dtype",
    "calls",
    "flops",
    "bytes",
    "gpu_time_ns",
    "tflops",
    "tbps",
    "intensity",
    "pct_of_peak",
    "bound",
    "lost_ns",
)
"""Columns of Roofline.operators: lost_ns is the GPU time above the roofline's (max(FLOPs / peak, bytes /
bandwidth)); pct_of_peak, bound and lost_ns are null without the GPU's peak at the row's precision."""
NO_SHAPES = (
    "roofline: no operator carries its input shapes and dtypes (Kineto records them when the profiler runs "
    "with record_shapes=True)"
)
NO_OPERATORS = "roofline: no framework operators in this trace (they come from Kineto cpu_op events)"


@dataclass(frozen=True)
class Roofline:
    """The roofline of a trace's modeled operators and its model FLOPs utilization."""

    gpu: str | None
    """The GPU's name as the trace gives it (the most common of its devices)."""
    peaks: GpuPeaks | None
    """That GPU's row of gpu_peaks (None for a GPU the table does not know: no percentages)."""
    operators: pl.DataFrame
    """ROOFLINE_COLUMNS, by GPU time descending."""
    per_step: pl.DataFrame
    """node, rank, step, duration_ns, flops, mfu (null without the peak): model FLOPs started in the step over
    the step's time x the peak at `precision`."""
    precision: str | None
    """The dominant precision (most FLOPs), which MFU is measured against."""
    no_model: pl.DataFrame
    """name (innermost operator), calls, gpu_time_ns of GPU time no modeled call owns, by GPU time descending."""
    gpu_time_ns: int
    """All GPU record time of the trace (no_model's share is against it)."""
    reason: str | None = None
    """Why the roofline is empty (no shapes, no operators); None otherwise."""


def trace_gpu(trace: Trace) -> str | None:
    """The most common GPU name among the trace's devices; None without one."""
    names = [n for n in trace.devices["name"].to_list() if n] if "name" in trace.devices.columns else []
    return Counter(names).most_common(1)[0][0] if names else None


def call_cost(name: str, dims: str | None, types: str | None, concrete: str | None) -> OpCost | None:
    """op_cost of one call from the ops columns' JSON texts; None for a text that is not the lists Kineto writes
    (shapes: lists of non-negative ints; types and concrete inputs: strings) or inputs the model cannot use."""
    if dims is None or types is None:
        return None
    try:
        shapes, names = json.loads(dims), json.loads(types)
        values = json.loads(concrete) if concrete else []
    except ValueError:
        return None
    if not (_all(shapes, list) and _all(names, str) and _all(values, str)):
        return None
    if not all(type(n) is int and n >= 0 for shape in shapes for n in shape):
        return None
    try:
        return op_cost(name, Call(shapes, names, values))
    except (ValueError, TypeError, IndexError, ArithmeticError):  # inputs that do not fit the model: no model
        return None


def _all(value: Any, kind: type) -> bool:
    return isinstance(value, list) and all(isinstance(v, kind) for v in value)


def _owner_of_records(trace: Trace, record_op: np.ndarray, tops: np.ndarray) -> np.ndarray:
    """The outermost modeled call (ops row, among `tops`: disjoint on each thread) containing each record's
    innermost operator (record_op: ops row, -1 for none); -1 where no modeled call contains it."""
    inner = np.unique(record_op[record_op >= 0])
    if inner.size == 0 or tops.size == 0:
        return np.full(record_op.size, -1, np.int64)
    is_top = np.zeros(trace.ops.height, bool)
    is_top[tops] = True
    points = trace.ops.select(*THREAD, "start_ns")[inner]
    owner = innermost_at(trace, points, "start_ns", pl.lit(pl.Series(is_top)))  # per `inner` row, not per ops row
    return np.where(record_op >= 0, owner[np.searchsorted(inner, np.maximum(record_op, 0))], -1)


def _empty(gpu: str | None, peaks: GpuPeaks | None, total: int, reason: str) -> Roofline:
    return Roofline(gpu, peaks, pl.DataFrame(), pl.DataFrame(), None, pl.DataFrame(), total, reason)


def roofline(
    trace: Trace, *, index: TraceIndex | None = None, overrides: dict[str, GpuPeaks] | None = None
) -> Roofline:
    """The roofline of `trace` (see Roofline); `overrides` are gpu_peaks rows from a rules file."""
    ix = TraceIndex.of(trace, index)
    gpu = trace_gpu(trace)
    peaks = match_gpu(gpu, overrides)
    found = modeled_calls(trace, ix)
    if found.reason is not None:
        return _empty(gpu, peaks, found.gpu_time_ns, found.reason)
    precision = dominant_precision(dtype_flops(found.coded))
    return Roofline(
        gpu=gpu,
        peaks=peaks,
        operators=roofline_rows(group_calls(found.coded), peaks),
        per_step=with_mfu(step_flops(trace, ix, found.coded), peaks, precision),
        precision=precision,
        no_model=found.no_model,
        gpu_time_ns=found.gpu_time_ns,
    )


@dataclass(frozen=True)
class ModeledCalls:
    """The outermost modeled operator calls of a trace (KEYS, node, rank, start_ns, flops, bytes, dtype,
    gpu_time_ns), the GPU time no modeled call owns (Roofline.no_model), the GPU time of all records, and why
    there is no roofline (NO_OPERATORS, NO_SHAPES; None when there is one)."""

    coded: pl.DataFrame
    """The calls with their KEYS Categorical, as trace.ops has them: what the index holds (the KEYS as Strings, a
    call's shapes and types in full, were 18 MB of the summary's end at 3.9 M events, owlv2 x30)."""
    no_model: pl.DataFrame
    gpu_time_ns: int
    reason: str | None

    @property
    def calls(self) -> pl.DataFrame:
        """The calls with their KEYS as Strings (made at each use: roofline() itself reads `coded`)."""
        return keys_as_strings(self.coded)


def keys_as_strings(coded: pl.DataFrame) -> pl.DataFrame:
    """Modeled calls (ModeledCalls.coded) with their KEYS as Strings."""
    keys = [k for k in KEYS if k in coded.columns]
    return coded.with_columns(pl.col(keys).cast(pl.String)) if keys else coded


def no_roofline_reason(ops: pl.DataFrame, operators: int) -> str | None:
    """Why a trace whose ops table is `ops`, `operators` of its rows operators, has no roofline (NO_OPERATORS,
    NO_SHAPES), None when it has one."""
    if operators == 0:
        return NO_OPERATORS
    if not {"input_dims", "input_types"} <= set(ops.columns) or ops["input_types"].null_count() == ops.height:
        return NO_SHAPES
    return None


MODELED_CALLS = Slot[ModeledCalls]("modeled_calls")
"""The trace's ModeledCalls, computed once per index: the summary's roofline, the RooflineGap rule and a rank's
roofline part read the same one."""


def modeled_calls(trace: Trace, ix: TraceIndex) -> ModeledCalls:
    """The ModeledCalls of `trace` (roofline's first half; the fleet reduce adds them up over ranks), shared
    through the index (MODELED_CALLS)."""
    return ix.get(MODELED_CALLS, lambda: _modeled_calls(trace, ix))


def _modeled_calls(trace: Trace, ix: TraceIndex) -> ModeledCalls:
    c = ix.gpu_columns()
    duration = (c.end - c.start).astype(np.int64)
    total = int(duration.sum())
    ops = trace.ops
    rows = np.flatnonzero(ops.select(IS_OPERATOR).to_series().to_numpy()) if ops.height else np.zeros(0, np.int64)
    reason = no_roofline_reason(ops, rows.size)
    if reason is not None:
        return ModeledCalls(pl.DataFrame(), pl.DataFrame(), total, reason)
    # tested once per distinct name (utilization.named): a String per row cost ~20 B (13 M operator rows at 20 M)
    named = rows[names_in(ops.select(pl.col("name").gather(rows)), "name", sorted(MODELED)).to_numpy()]
    # the calls' keys stay categorical (their codes, 4 bytes a call): strings only for the distinct calls
    keyed = ops.select(*KEYS, pl.col("concrete_inputs") if "concrete_inputs" in ops.columns else pl.lit(None))[named]
    codes = keyed.select(pl.all().to_physical())
    firsts = codes.with_row_index("row").unique(subset=codes.columns, keep="first", maintain_order=True)
    distinct = keyed[firsts["row"]].select(pl.all().cast(pl.String))
    costs = [call_cost(*r) for r in distinct.iter_rows()]
    cost_id = codes.join(firsts.drop("row").with_row_index("cost_id"), on=codes.columns, how="left", nulls_equal=True)[
        "cost_id"
    ].to_numpy()
    del keyed, codes, firsts
    modeled = np.array([c is not None for c in costs], bool)[cost_id]  # per distinct call, not per call
    top = np.flatnonzero(modeled)[
        enclosing_on_thread(ops.select(*THREAD, "start_ns", "end_ns")[named[modeled]]) < 0
    ]  # positions in `named` of outermost calls
    record_op = operator_of_records(trace, index=ix)
    record_owner = _owner_of_records(trace, record_op, named[top])
    owned = record_owner >= 0
    # per outermost call (named[top] is sorted), not per ops row: two whole-table arrays were ~215 MB at x150
    owned_ns = np.bincount(np.searchsorted(named[top], record_owner[owned]), duration[owned], top.size)
    per_cost = pl.DataFrame(
        [(c.flops, c.bytes, c.precision) if c is not None else (None, None, None) for c in costs],
        schema={"flops": pl.Int64, "bytes": pl.Int64, "dtype": pl.String},
        orient="row",
    )
    calls = ops.select(*KEYS, "node", "rank", "start_ns")[named[top]].with_columns(
        *per_cost.select(pl.all().gather(pl.Series(cost_id[top], dtype=pl.Int64))).get_columns(),
        gpu_time_ns=pl.Series(owned_ns.astype(np.int64), dtype=pl.Int64),
    )
    lost = (record_op >= 0) & ~owned
    return ModeledCalls(calls, _no_model(ops, record_op[lost], duration[lost]), total, None)


def _no_model(ops: pl.DataFrame, op_rows: np.ndarray, duration: np.ndarray) -> pl.DataFrame:
    found = pl.DataFrame({"pos": op_rows, "gpu_time_ns": duration}).with_columns(
        name=ops["name"].gather(op_rows).cast(pl.String)
    )
    return (
        found.group_by("name")
        .agg(calls=pl.col("pos").n_unique().cast(pl.Int64), gpu_time_ns=pl.col("gpu_time_ns").sum())
        .sort(["gpu_time_ns", "name"], descending=[True, False])
    )


def dtype_flops(calls: pl.DataFrame) -> pl.DataFrame:
    """FLOPs per dtype of modeled calls (dtype, flops)."""
    return calls.filter(pl.col("dtype").is_not_null()).group_by("dtype").agg(pl.col("flops").sum())


def dominant_precision(per_dtype: pl.DataFrame) -> str | None:
    """The dtype with the most FLOPs (dtype_flops' frame, a trace's or a job's summed), None without FLOPs."""
    by = per_dtype.sort(["flops", "dtype"], descending=[True, False])
    return by["dtype"][0] if by.height and by["flops"][0] > 0 else None


def _peak_of(peaks: GpuPeaks | None, precision: str | None) -> float | None:
    return None if peaks is None else peaks.tflops(precision)


def group_calls(calls: pl.DataFrame) -> pl.DataFrame:
    """Modeled calls per KEYS (String or Categorical; String in the result), in order of their first call: dtype
    (the first call's), calls, flops, bytes_sum, bytes_nulls (calls without a byte count), gpu_time_ns; the groups
    of several ranks add up."""
    return (
        calls.group_by(KEYS, maintain_order=True)
        .agg(
            pl.col("dtype").first(),
            calls=pl.len().cast(pl.Int64),
            flops=pl.col("flops").sum(),
            bytes_sum=pl.col("bytes").sum(),
            bytes_nulls=pl.col("bytes").null_count().cast(pl.Int64),
            gpu_time_ns=pl.col("gpu_time_ns").sum(),
        )
        .with_columns(pl.col(KEYS).cast(pl.String))
    )


def roofline_rows(grouped: pl.DataFrame, peaks: GpuPeaks | None) -> pl.DataFrame:
    """Roofline.operators (ROOFLINE_COLUMNS) of group_calls' frame."""
    grouped = grouped.with_columns(bytes=pl.when(pl.col("bytes_nulls") == 0).then(pl.col("bytes_sum")))
    peak = pl.Series([_peak_of(peaks, p) for p in grouped["dtype"]], dtype=pl.Float64)
    hbm = pl.lit(peaks.hbm_tbps if peaks else None, pl.Float64)
    ns = pl.when(pl.col("gpu_time_ns") > 0).then(pl.col("gpu_time_ns"))
    intensity = pl.when(pl.col("bytes") > 0).then(pl.col("flops") / pl.col("bytes"))
    flop_bound = pl.col("flops") > 0
    attainable = pl.min_horizontal(pl.col("peak"), intensity * hbm)  # TFLOP/s: FLOP/byte x TB/s
    ideal_ns = pl.max_horizontal(pl.col("flops") / (pl.col("peak") * 1e3), pl.col("bytes") / (hbm * 1e3))
    return (
        grouped.with_columns(peak=peak)
        .with_columns(tflops=pl.col("flops") / ns / 1e3, tbps=pl.col("bytes") / ns / 1e3, intensity=intensity)
        .with_columns(
            pct_of_peak=pl.when(flop_bound)
            .then(100 * pl.col("tflops") / pl.when(intensity.is_not_null()).then(attainable).otherwise(pl.col("peak")))
            .otherwise(100 * pl.col("tbps") / hbm),
            bound=pl.when(~flop_bound & pl.col("bytes").is_not_null() & hbm.is_not_null())
            .then(pl.lit("memory"))
            .when(flop_bound & intensity.is_not_null() & pl.col("peak").is_not_null() & hbm.is_not_null())
            .then(pl.when(intensity >= pl.col("peak") / hbm).then(pl.lit("compute")).otherwise(pl.lit("memory"))),
            lost_ns=(pl.col("gpu_time_ns") - ideal_ns).clip(lower_bound=0).round().cast(pl.Int64),
        )
        .select(ROOFLINE_COLUMNS)
        .sort(["gpu_time_ns", "flops", "name", "input_dims"], descending=[True, True, False, False], nulls_last=True)
    )


def step_flops(trace: Trace, ix: TraceIndex, calls: pl.DataFrame) -> pl.DataFrame:
    """node, rank, step, duration_ns, flops: the model FLOPs of the calls started in each step (detect_steps').

    Per (node, rank), the calls sorted by start and their running FLOPs: a step's FLOPs are the difference at its
    two ends (two binary searches). Joining every step with every call of its rank grew as steps x calls: 100 M
    rows (~6 GB) at 20 M events."""
    steps = detect_steps(trace, index=ix).select(
        pl.col("node").cast(pl.String), "rank", "step", "start_ns", "end_ns", "duration_ns"
    )
    started = calls.select(
        pl.col("node").cast(pl.String), "rank", pl.col("start_ns").alias("t"), pl.col("flops").fill_null(0)
    ).drop_nulls(["node", "rank", "t"])
    running = {
        key: (part["t"].to_numpy(), np.concatenate([[0], np.cumsum(part["flops"].to_numpy(), dtype=np.int64)]))
        for key, part in started.sort("t").partition_by("node", "rank", as_dict=True, maintain_order=True).items()
    }
    flops = np.zeros(steps.height, np.int64)
    for key, part in steps.with_row_index("i").partition_by("node", "rank", as_dict=True).items():
        if key not in running:
            continue
        t, total = running[key]
        lo = np.searchsorted(t, part["start_ns"].fill_null(0).to_numpy(), "left")
        hi = np.searchsorted(t, part["end_ns"].fill_null(0).to_numpy(), "left")
        alive = (hi > lo) & part["start_ns"].is_not_null().to_numpy() & part["end_ns"].is_not_null().to_numpy()
        flops[part["i"].to_numpy()] = np.where(alive, total[hi] - total[np.minimum(lo, hi)], 0)
    return steps.with_columns(flops=pl.Series(flops, dtype=pl.Int64)).select(
        "node", "rank", "step", "duration_ns", "flops"
    )


def with_mfu(per_step: pl.DataFrame, peaks: GpuPeaks | None, precision: str | None) -> pl.DataFrame:
    """Roofline.per_step: step_flops' frame with the MFU against the peak at `precision`."""
    peak = _peak_of(peaks, precision)
    return (
        per_step.with_columns(mfu=pl.col("flops") / (pl.col("duration_ns") * pl.lit(peak, pl.Float64) * 1e3))
        .select("node", "rank", "step", "duration_ns", "flops", "mfu")
        .sort("node", "rank", "step")
    )


def top_lost(operators: pl.DataFrame, top: int = 10) -> pl.DataFrame:
    """The `top` roofline rows by GPU time lost against their roofline (lost_ns; rows without it left out)."""
    found = operators.filter(pl.col("lost_ns") > 0).sort(["lost_ns", "name"], descending=[True, False])
    return found.select("name", "input_dims", "dtype", "gpu_time_ns", "lost_ns", "pct_of_peak", "bound").head(top)


def unknown_gpu_note(gpu: str | None) -> str:
    """Why a roofline has no percentages."""
    named = f"GPU {gpu!r} is not" if gpu else "the trace names no GPU, so it is not"
    return f"roofline: {named} in the peak table (gpu_peaks): FLOPs, bytes and time without percentages or MFU"
