"""Timeline rules about the GPU's time: GPU gaps with what the CPU was doing, communication not overlapped.

Sources: nsys `gpu_gaps` ("GPU Starvation", gap >= 500 ms, first and last gaps excluded) and the TB plugin's
communication recommendation / distributed view (analyses.md §3.2, §4, §6).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import numpy as np
import polars as pl

from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.rules.base import Evidence, Outcome, Param, ParamValue, Rule, Skip
from ktrace.analysis.rules.frames import evidence_rows
from ktrace.analysis.rules.inputs import gpu_gaps, temporal_breakdown
from ktrace.model.trace import Trace

CPU_TABLES = ("api", "ops", "ranges")
_CPU_BOUNDS = Slot[tuple[np.ndarray, np.ndarray]]("rules.cpu_bounds")


def _bounds(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return frame["start_ns"].to_numpy(), frame["end_ns"].to_numpy()


def _cpu_during(index: TraceIndex, node: str, rank: int, gs: int, ge: int) -> str:
    """What the CPU of (node, rank) did during [gs, ge): the names covering most of it, shortest first."""
    parts = []
    for name in CPU_TABLES:
        frame = index.trace.table(name)
        if not frame.height:
            continue
        starts, ends = index.get(_CPU_BOUNDS, partial(_bounds, frame), name)
        idx = np.flatnonzero((starts < ge) & (ends > gs))
        if idx.size == 0:
            continue
        rows = frame[idx].filter((pl.col("node").cast(pl.String) == node) & (pl.col("rank") == rank))
        if name == "ranges":
            rows = rows.filter(~pl.col("on_gpu"))
        parts.append(rows.select(pl.col("name").cast(pl.String), "start_ns", "end_ns"))
    if not parts:
        return "no CUDA call, operator or annotation on the CPU (Python, data loading or another thread)"
    overlap = pl.min_horizontal(pl.col("end_ns"), pl.lit(ge)) - pl.max_horizontal(pl.col("start_ns"), pl.lit(gs))
    top = (
        pl.concat(parts)
        .group_by("name")
        .agg(overlap.sum().alias("covered"), (pl.col("end_ns") - pl.col("start_ns")).min().alias("dur"))
        .with_columns((100 * pl.col("covered") / (ge - gs)).clip(0, 100).round(0).alias("share"))
        .filter(pl.col("share") >= 1)
        .sort(["share", "dur"], descending=[True, False])
        .head(3)
    )
    if not top.height:
        return "nothing that covers 1 % of the gap on the CPU"
    return "; ".join(f"{r['name']} ({r['share']:.0f} %)" for r in top.iter_rows(named=True))


def _gaps(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    gaps = gpu_gaps(index)
    if gaps is None:
        raise Skip("the trace has no GPU records")
    threshold_ns = float(p["gap_ms"]) * 1e6
    long = gaps.filter(pl.col("gap_ns") >= threshold_ns).sort("gap_ns", descending=True)
    total_ms = float(long["gap_ns"].sum() or 0) / 1e6
    fired = long.height >= int(p["min_count"])
    evidence = []
    for row in long.head(int(p["max_evidence"])).iter_rows(named=True):
        what = _cpu_during(index, row["node"], row["rank"], row["start_ns"], row["end_ns"])
        evidence.append(
            Evidence(
                kind="gap",
                start_ns=row["start_ns"],
                end_ns=row["end_ns"],
                node=row["node"],
                rank=row["rank"],
                device=row["device"],
                name=f"CPU: {what}",
                value=round(row["gap_ns"] / 1e6, 6),
            )
        )
    longest = f"; longest {long['gap_ns'][0] / 1e6:.1f} ms" if long.height else ""
    message = (
        f"{long.height} GPU idle gaps of at least {p['gap_ms']} ms ({total_ms:.1f} ms in all) between the "
        f"first and last GPU record of each device{longest}"
    )
    if evidence:
        message += f"; during it the CPU ran {evidence[0].name.removeprefix('CPU: ')}"  # type: ignore[union-attr]
    return Outcome(
        gaps.height,
        long.height,
        fired,
        message,
        tuple(evidence),
        details={
            "gaps_ms": [round(v / 1e6, 6) for v in long["gap_ns"].head(200).to_list()],
            "total_ms": round(total_ms, 6),
        },
    )


GPU_GAPS = Rule(
    name="GPUGaps",
    family="timeline",
    description="Spans where a GPU ran nothing (no kernel, memcpy or memset) for longer than gap_ms, between "
    "its first and last record, with what the CPU was doing meanwhile.",
    recommendation="Find what the CPU does in the gaps (evidence): overlap data loading with compute "
    "(DataLoader workers, prefetch), remove synchronizations, move logging/checkpointing off "
    "the critical path, and add NVTX ranges where the CPU side is unexplained.",
    params=(
        Param("gap_ms", 500.0, "an idle span counts as a gap from this many ms (nsys gpu_gaps: 500 ms)"),
        Param("min_count", 1, "fire when at least this many gaps are found"),
        Param("max_evidence", 10, "how many gaps to keep as evidence (longest first)"),
    ),
    check=_gaps,
    source="nsys analyze gpu_gaps",
    fleet_mode="per rank",
)


def _comm_overlap(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    return comm_overlap_outcome(temporal_breakdown(index), p)


def comm_overlap_outcome(tb: pl.DataFrame, p: Mapping[str, ParamValue]) -> Outcome:
    """The CommNotOverlapped rule on a temporal_breakdown frame (a trace's, or one reduced from a fleet's ranks)."""
    tb = tb.with_columns((pl.col("comm_only_ns") + pl.col("compute_comm_overlap_ns")).alias("comm_ns"))
    with_comm = tb.filter(pl.col("comm_ns") > 0)
    if not with_comm.height:
        raise Skip("the trace has no communication (NCCL) kernels")
    with_comm = with_comm.with_columns(
        (100 * pl.col("compute_comm_overlap_ns") / pl.col("comm_ns")).alias("overlap_pct"),
        (100 * pl.col("comm_only_ns") / pl.col("span_ns")).alias("exposed_pct"),
    )
    bad = with_comm.filter(
        (pl.col("overlap_pct") < float(p["min_overlap_pct"])) & (pl.col("exposed_pct") > float(p["max_exposed_pct"]))
    )
    worst = with_comm.sort("exposed_pct", descending=True).row(0, named=True)
    message = (
        f"{bad.height} of {with_comm.height} ranks leave communication exposed: worst {worst['node']}/rank "
        f"{worst['rank']} overlaps {worst['overlap_pct']:.1f} % of its {worst['comm_ns'] / 1e6:.2f} ms of "
        f"communication with compute, and {worst['exposed_pct']:.1f} % of its GPU time is communication "
        f"alone (thresholds: overlap < {p['min_overlap_pct']} %, exposed > {p['max_exposed_pct']} %)"
    )
    ev = bad.sort("exposed_pct", descending=True).select(
        pl.col("node").cast(pl.String), "rank", pl.col("exposed_pct").alias("value")
    )
    return Outcome(
        with_comm.height,
        bad.height,
        bad.height > 0,
        message,
        tuple(evidence_rows(ev, "rank")),
        details={
            "per_rank": [
                {
                    "node": str(r["node"]),
                    "rank": r["rank"],
                    "overlap_pct": round(r["overlap_pct"], 3),
                    "exposed_pct": round(r["exposed_pct"], 3),
                }
                for r in with_comm.head(64).iter_rows(named=True)
            ],
            "exposed_ms": round(float(with_comm["comm_only_ns"].sum()) / 1e6, 6),
        },
    )


COMM_NOT_OVERLAPPED = Rule(
    name="CommNotOverlapped",
    family="timeline",
    description="Communication kernels (NCCL) running while no compute kernel runs: time the GPU spends "
    "waiting on the network instead of hiding it behind compute.",
    recommendation="Overlap communication with compute: DDP bucketing (bucket_cap_mb) and gradient_as_bucket_view, "
    "FSDP forward/backward prefetch, a separate communication stream; reduce volume with "
    "gradient accumulation (no_sync), compression or larger per-GPU batches.",
    params=(
        Param(
            "min_overlap_pct",
            50.0,
            "a rank counts when less than this % of its communication time overlaps compute kernels",
        ),
        Param("max_exposed_pct", 10.0, "... and communication alone takes more than this % of its GPU span"),
    ),
    check=_comm_overlap,
    source="TB plugin distributed view; HTA get_comm_comp_overlap",
    fleet_mode="exact",
)

RULES: tuple[Rule, ...] = (GPU_GAPS, COMM_NOT_OVERLAPPED)
