"""Hardware rules: how well the GPU time was used.

- RooflineGap: an operator (name, input shapes, dtype) holding at least `min_time_pct` % of the GPU time at below
  `max_pct_of_peak` % of its roofline (analysis.roofline: achieved TFLOP/s against min(peak, intensity x
  bandwidth) at its precision, or TB/s against the bandwidth for a bytes-only model). Evidence: the operator's
  calls (start, end, value = the GPU time of the kernels it launched, ms). The peak is the GPU's row of
  analysis.gpu_peaks, or the rules file's `[gpu_peaks."NAME"]` table; an unknown GPU skips the rule.
- LowOccupancy: kernels (by name) each holding at least `min_time_pct` % of the GPU kernel time at a
  time-weighted estimated achieved occupancy below `occupancy_pct` % (kernels.kernel_efficiency: Kineto's
  `est. achieved occupancy %`). Communication kernels are left out (NCCL runs a few blocks by design), and so is
  an occupancy of 0, which Kineto writes where it could not estimate one (a kernel that ran had a block resident).

Both are "per rank" rules: a share of GPU time is judged on each rank's own time (an operator slow on one rank is
that rank's finding), as every threshold on a share is on the rank-by-rank path. RooflineGap reads the modeled
calls through GAP_INPUTS: on a fleet task's rank, rank_rule_seeds holds its cut of the task's joined trace's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from ktrace.analysis.breakdown import communication_names
from ktrace.analysis.gpu_peaks import GpuPeaks, match_gpu
from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.kernels import kernel_efficiency, kernel_stats
from ktrace.analysis.roofline import KEYS, group_calls, keys_as_strings, modeled_calls, roofline_rows, trace_gpu
from ktrace.analysis.rules.base import Evidence, Outcome, Param, ParamValue, Rule, Skip
from ktrace.analysis.rules.frames import evidence_rows, fmt_names
from ktrace.model.trace import Trace


@dataclass(frozen=True)
class GapInputs:
    """What RooflineGap reads of a trace's roofline.ModeledCalls (its unmodeled time is not judged)."""

    coded: pl.DataFrame
    """ModeledCalls.coded: the outermost modeled calls, KEYS Categorical (an empty frame with a reason)."""
    gpu_time_ns: int
    """The GPU time of all records (the share's denominator)."""
    reason: str | None
    """Why there is no roofline (roofline.NO_OPERATORS, NO_SHAPES); None when there is one."""


GAP_INPUTS = Slot[GapInputs]("rules.roofline_gap_inputs")
"""A trace's GapInputs: modeled_calls' (shared with the summary's roofline), or seeded on a rank's index."""


def gap_inputs(trace: Trace, index: TraceIndex) -> GapInputs:
    """The GapInputs of `trace`, shared through its index (GAP_INPUTS)."""

    def compute() -> GapInputs:
        found = modeled_calls(trace, index)
        return GapInputs(found.coded, found.gpu_time_ns, found.reason)

    return index.get(GAP_INPUTS, compute)


def _roofline_gap(
    trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue], overrides: Mapping[str, GpuPeaks]
) -> Outcome:
    found = gap_inputs(trace, index)
    if found.reason is not None:
        raise Skip(found.reason)
    gpu = trace_gpu(trace)
    peaks = match_gpu(gpu, overrides)
    if peaks is None:
        named = f"GPU {gpu!r} is" if gpu else "the trace names no GPU, so it is"
        raise Skip(f'{named} not in the peak table (add it as [gpu_peaks."NAME"] in the rules file)')
    calls = keys_as_strings(found.coded)  # for the evidence
    rows = roofline_rows(group_calls(found.coded), peaks).with_columns(
        share_pct=100 * pl.col("gpu_time_ns") / max(found.gpu_time_ns, 1)
    )
    judged = rows.filter(pl.col("pct_of_peak").is_not_null())
    hit = judged.filter(
        (pl.col("share_pct") >= float(p["min_time_pct"])) & (pl.col("pct_of_peak") < float(p["max_pct_of_peak"]))
    )
    outcomes = tuple(_gap_outcome(trace, calls, row, judged.height, p) for row in hit.iter_rows(named=True))
    if not outcomes:
        return Outcome(judged.height, 0, False, details={"gpu": peaks.name})
    first, *rest = outcomes
    return Outcome(
        first.datapoints,
        len(outcomes),
        True,
        first.message,
        first.evidence,
        details={"gpu": peaks.name, "operators": [o.message for o in outcomes]},
        extra=tuple(Outcome(0, 0, True, o.message, o.evidence) for o in rest),
    )


def _gap_outcome(
    trace: Trace, calls: pl.DataFrame, row: Mapping[str, Any], judged: int, p: Mapping[str, ParamValue]
) -> Outcome:
    """One finding: the operator row of the roofline, with its calls as evidence."""
    mine = calls.filter(
        (pl.col("name") == row["name"])
        & pl.col("input_dims").eq_missing(pl.lit(row["input_dims"], pl.String))
        & (pl.col("dtype").eq_missing(pl.lit(row["dtype"], pl.String)))
    )
    ends = trace.ops.select(
        pl.col("node").cast(pl.String), "rank", "start_ns", "end_ns", pl.col(KEYS[0]).cast(pl.String)
    )
    evidence = (
        mine.select(pl.col("node").cast(pl.String), "rank", "start_ns", "name", "gpu_time_ns")
        .join(ends.unique(["node", "rank", "start_ns", "name"], keep="first"), on=["node", "rank", "start_ns", "name"])
        .sort("gpu_time_ns", "start_ns", descending=[True, False])
        .head(int(p["max_evidence"]))
        .select("node", "rank", "start_ns", "end_ns", "name", (pl.col("gpu_time_ns") / 1e6).alias("value"))
    )
    message = (
        f"{row['name']} {row['input_dims']} ({row['dtype']}): {row['share_pct']:.1f} % of the GPU time "
        f"({int(row['gpu_time_ns']) / 1e6:,.2f} ms in {row['calls']:,} calls) at {row['pct_of_peak']:.1f} % of its "
        f"roofline ({row['bound']}-bound; {int(row['lost_ns']) / 1e6:,.2f} ms above the roofline's time)"
    )
    return Outcome(judged, 1, True, message, tuple(evidence_rows(evidence, "operator")))


def _roofline_gap_defaults(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    return _roofline_gap(trace, index, p, {})


ROOFLINE_GAP = Rule(
    name="RooflineGap",
    family="hardware",
    description="An operator (name, input shapes, dtype) holds a large share of the GPU time far below its roofline.",
    recommendation="Look at the operator's kernels: a GEMM or attention far from the compute roof wants a fused or "
    "better-tiled kernel (torch.compile, FlashAttention/SDPA, shapes padded to multiples of 8/64, bf16/fp16 "
    "instead of fp32), a memory-bound op wants fusion with its neighbours so its bytes are read once. "
    "Evidence value: a call's GPU time (ms).",
    params=(
        Param("min_time_pct", 10.0, "judge an operator holding at least this % of all GPU time"),
        Param("max_pct_of_peak", 30.0, "report it when it reaches less than this % of its roofline"),
        Param("max_evidence", 10, "how many of the operator's calls to keep as evidence (longest GPU time first)"),
    ),
    check=_roofline_gap_defaults,
    peaks_check=_roofline_gap,
    source="ktrace (issue #28), after TraceLens's roofline per operator",
    fleet_mode="per rank",
)


def _low_occupancy(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    eff = kernel_efficiency(trace, index=index)
    if not eff.height or int(eff["occupancy_ns"].sum()) == 0:
        raise Skip(
            "no kernel carries an estimated achieved occupancy (Kineto writes `est. achieved occupancy %`; "
            "nsys exports and `ktrace run` captures do not)"
        )
    comm = communication_names(trace, index=index)
    stats = kernel_stats(trace, index=index).select("name", "count", "total_ns", "time_share")
    rows = (
        stats.join(eff, on="name", how="inner", nulls_equal=True)
        .filter(~pl.col("name").is_in(comm) & pl.col("est_occupancy_pct").is_not_null())
        .with_columns(share_pct=100 * pl.col("time_share"))
    )
    judged = rows.filter(pl.col("share_pct") >= float(p["min_time_pct"]))
    hit = judged.filter(pl.col("est_occupancy_pct") < float(p["occupancy_pct"])).sort("total_ns", descending=True)
    if not hit.height:
        return Outcome(judged.height, 0, False)
    names = hit["name"].to_list()
    message = (
        f"{hit.height:,} of {judged.height:,} kernels holding >= {float(p['min_time_pct']):g} % of the GPU time "
        f"run at an estimated achieved occupancy below {float(p['occupancy_pct']):g} %: "
        f"{100 * float(hit['time_share'].sum()):.1f} % of the GPU time ({fmt_names(names)})"
    )
    evidence = tuple(
        Evidence(kind="kernel", name=r["name"], value=round(float(r["est_occupancy_pct"]), 6))
        for r in hit.head(int(p["max_evidence"])).iter_rows(named=True)
    )
    details = {
        "kernels": hit.select(
            "name",
            "total_ns",
            "share_pct",
            "est_occupancy_pct",
            "blocks_per_sm",
            "registers_per_thread",
            "shared_bytes",
        ).to_dicts()
    }
    return Outcome(judged.height, hit.height, True, message, evidence, details=details)


LOW_OCCUPANCY = Rule(
    name="LowOccupancy",
    family="hardware",
    description="Kernels holding a large share of the GPU time run at a low estimated achieved occupancy.",
    recommendation="Few resident warps per SM leave latency unhidden: check the kernel's registers per thread and "
    "shared memory per block (kernel_efficiency; `ktrace summary --json` top kernels), launch more blocks "
    "(blocks per SM < 1 leaves SMs idle), or let the library pick another kernel (larger batch, other tile "
    "shapes, torch.backends.cudnn.benchmark). Evidence value: the kernel's time-weighted occupancy (%).",
    params=(
        Param("min_time_pct", 5.0, "judge a kernel (by name) holding at least this % of the GPU kernel time"),
        Param("occupancy_pct", 30.0, "report it when its time-weighted estimated achieved occupancy is below this %"),
        Param("max_evidence", 10, "how many kernels to keep as evidence (most GPU time first)"),
    ),
    check=_low_occupancy,
    source="ktrace (issue #28), after the PyTorch TensorBoard profiler's kernel view (est. achieved occupancy)",
    fleet_mode="per rank",
)

RULES: tuple[Rule, ...] = (ROOFLINE_GAP, LOW_OCCUPANCY)
