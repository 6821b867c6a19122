"""The integer-coded periodic step inference (analysis.periodic_steps) equals its naive polars twin.

The twin is the former implementation (a frame of every kernel's node and name strings, sorted and grouped by
polars), which held ~2.1 GB at 20 M kernels: same steps, same marker choice, on several ranks with collectives.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from ktrace.analysis import steps
from ktrace.analysis.breakdown import communication_names
from ktrace.analysis.index import TraceIndex
from ktrace.model import TraceBuilder
from ktrace.model.trace import Trace


def naive_periodic_steps(trace: Trace) -> pl.DataFrame:
    k = trace.kernels.select(
        pl.col("node").cast(pl.String),
        "rank",
        pl.col("name").cast(pl.String),
        "start_ns",
        "end_ns",
        communication=pl.col("collective").is_not_null(),
    )
    span = k.group_by("node", "rank").agg(span=pl.col("end_ns").max() - pl.col("start_ns").min())
    k = k.filter(~pl.col("communication") & ~pl.col("name").is_in(communication_names(trace))).drop("communication")
    gaps = k.sort("node", "rank", "name", "start_ns").with_columns(
        gap=pl.col("start_ns").diff().over("node", "rank", "name")
    )
    score = (
        gaps.group_by("node", "rank", "name")
        .agg(
            n=pl.len(),
            cv=pl.col("gap").std() / pl.col("gap").mean(),
            covered=pl.col("start_ns").max() - pl.col("start_ns").min(),
        )
        .join(span, on=["node", "rank"])
        .filter(
            (pl.col("n") > steps.PERIODIC_MIN_STEPS)
            & (pl.col("cv") <= steps.PERIODIC_MAX_CV)
            & (pl.col("covered") >= steps.PERIODIC_MIN_COVER * pl.col("span"))
        )
        .sort("cv", "n", "name")
        .unique(["node", "rank"], keep="first")
    )
    marks = (
        k.drop("end_ns")
        .join(score.select("node", "rank", "name"), on=["node", "rank", "name"])
        .sort("node", "rank", "start_ns")
    )
    out = marks.with_columns(end_ns=pl.col("start_ns").shift(-1).over("node", "rank")).drop_nulls("end_ns")
    return out.select(
        "node",
        pl.col("rank").cast(pl.Int32),
        step=pl.int_range(pl.len(), dtype=pl.Int64).over("node", "rank"),
        name="name",
        start_ns="start_ns",
        end_ns="end_ns",
        duration_ns=pl.col("end_ns") - pl.col("start_ns"),
    )


def ranks_trace(seed: int) -> Trace:
    """Three ranks of a jittered loop of kernels (one an NCCL all-reduce, one sometimes unnamed), shuffled rows."""
    rng = np.random.default_rng(seed)
    names, starts, ranks = [], [], []
    for rank in range(3):
        t = int(rng.integers(0, 1000))
        for _ in range(int(rng.integers(3, 12))):
            length = int(1_000_000 * (1 + rng.uniform(-0.05 * rank, 0.05 * rank)))
            for j, name in enumerate(("gemm", "relu", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "sgd", None)):
                if name is None and rng.random() < 0.5:
                    continue
                names.append(name)
                starts.append(t + j * length // 5 + int(rng.integers(0, 3)))
                ranks.append(rank)
            t += length
    order = rng.permutation(len(starts))
    n = len(starts)
    b = TraceBuilder()
    b.add(
        "kernels",
        {
            "start_ns": [starts[i] for i in order],
            "end_ns": [starts[i] + 50_000 for i in order],
            "rank": [ranks[i] for i in order],
            "device": [0] * n,
            "stream": [7] * n,
            "name": [names[i] for i in order],
        },
    )
    return b.build()


@pytest.mark.parametrize("seed", range(12))
def test_periodic_steps_equal_the_naive_twin(seed: int) -> None:
    trace = ranks_trace(seed)
    found = steps.detect_steps(trace, source="periodic", index=TraceIndex(trace))
    naive = naive_periodic_steps(trace)
    assert found.drop("pid", "tid", "source").equals(naive)
    assert (found["source"] == "periodic").all()
