"""Hand-built multi-rank traces for the rank-level views: known shares, one planted straggler."""

from __future__ import annotations

import dataclasses

import polars as pl

from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace

STEP_NS = 1000
STEPS = 3
GEMM_NS = 300
"""Compute time per step of an ordinary rank; the rest of the step is spent in the all-reduce."""
SLOW_GEMM_NS = 700
"""Compute time per step of the straggler: the others wait for it inside the all-reduce."""
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
LAYOUT = (("a", 0), ("a", 1), ("b", 2), ("b", 3))
STRAGGLER = ("b", 2)


def fleet_trace(
    layout: tuple[tuple[str, int], ...] = LAYOUT, straggler: tuple[str, int] | None = STRAGGLER, steps: bool = True
) -> Trace:
    """Each rank: STEPS steps of STEP_NS, each a gemm from the step start, then the all-reduce to its end;
    the straggler's gemm is SLOW_GEMM_NS (and it runs one extra 'slow_copy_kernel' of 100 ns per step)."""
    b = TraceBuilder()
    for node, rank in layout:
        slow = (node, rank) == straggler
        gemm = SLOW_GEMM_NS if slow else GEMM_NS
        t0 = [i * STEP_NS for i in range(STEPS)]
        names, starts, ends, streams = [], [], [], []
        for t in t0:
            names += ["gemm", NCCL]
            starts += [t, t + gemm]
            ends += [t + gemm, t + STEP_NS]
            streams += [7, 9]
            if slow:
                names.append("slow_copy_kernel")
                starts.append(t)
                ends.append(t + 100)
                streams.append(8)
        n = len(names)
        b.add(
            "kernels",
            {"start_ns": starts, "end_ns": ends, "device": [0] * n, "stream": streams, "name": names},
            node=node,
            rank=rank,
        )
        if steps:
            b.add(
                "ranges",
                {
                    "start_ns": t0,
                    "end_ns": [t + STEP_NS for t in t0],
                    "pid": [1] * STEPS,
                    "tid": [1] * STEPS,
                    "name": [f"ProfilerStep#{i}" for i in range(STEPS)],
                    "domain": ["ktrace"] * STEPS,
                    "depth": [0] * STEPS,
                    "on_gpu": [False] * STEPS,
                },
                node=node,
                rank=rank,
            )
    return b.build()


def user_step_ranges(trace: Trace, rank: int, name: str = "train_step") -> Trace:
    """`trace` with rank `rank`'s ProfilerStep#N ranges renamed "{name} N" in a user domain: steps that only the
    annotation method (or a --steps-pattern) finds on that rank."""
    mine = pl.col("rank") == rank
    text = pl.col("name").cast(pl.String)
    ranges = trace.ranges.with_columns(
        pl.when(mine)
        .then(text.str.replace("ProfilerStep#", f"{name} "))
        .otherwise(text)
        .cast(trace.ranges.schema["name"])
        .alias("name"),
        pl.when(mine)
        .then(pl.lit("user"))
        .otherwise(pl.col("domain").cast(pl.String))
        .cast(trace.ranges.schema["domain"])
        .alias("domain"),
    )
    return dataclasses.replace(trace, ranges=ranges)
