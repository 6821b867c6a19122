"""The roofline's steps' FLOPs and modeled calls in memory that grows with the calls, not with steps x calls
(issue 29): the same numbers as the join of every step with every call of its rank, which they replace."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from tests.real_traces import fixture_path

import ktrace
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.roofline import modeled_calls, step_flops
from ktrace.analysis.steps import detect_steps
from ktrace.model import Trace


def joined_step_flops(trace: Trace, calls: pl.DataFrame) -> pl.DataFrame:
    """The steps' FLOPs as roofline computed them before: every step joined with every call of its (node, rank)."""
    steps = detect_steps(trace).select(
        pl.col("node").cast(pl.String), "rank", "step", "start_ns", "end_ns", "duration_ns"
    )
    in_step = (
        steps.join(
            calls.select(pl.col("node").cast(pl.String), "rank", pl.col("start_ns").alias("t"), "flops"),
            on=["node", "rank"],
        )
        .filter((pl.col("t") >= pl.col("start_ns")) & (pl.col("t") < pl.col("end_ns")))
        .group_by("node", "rank", "step")
        .agg(flops=pl.col("flops").sum())
    )
    return (
        steps.join(in_step, on=["node", "rank", "step"], how="left")
        .with_columns(pl.col("flops").fill_null(0))
        .select("node", "rank", "step", "duration_ns", "flops")
    )


@pytest.fixture(scope="module")
def owlv2() -> Trace:
    return ktrace.open(fixture_path("tracelens"))


def test_steps_flops_equal_the_join_on_a_real_trace(owlv2: Trace) -> None:
    ix = TraceIndex(owlv2)
    calls = modeled_calls(owlv2, ix).calls
    assert calls.height > 0
    found = step_flops(owlv2, ix, calls)
    assert found.equals(joined_step_flops(owlv2, calls))
    assert found["flops"].sum() > 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_calls_on_step_edges_null_flops_and_other_ranks_count_as_the_join_does(owlv2: Trace, seed: int) -> None:
    ix = TraceIndex(owlv2)
    steps = detect_steps(owlv2, index=ix)
    edges = np.concatenate([steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy()])
    rng = np.random.default_rng(seed)
    n = 2_000
    t = np.concatenate([edges, edges - 1, rng.integers(int(edges.min()) - 10, int(edges.max()) + 10, n)])
    flops = rng.integers(0, 1_000_000, t.size).astype(object)
    flops[rng.random(t.size) < 0.2] = None  # calls with a bytes-only model: no FLOPs
    node = str(steps["node"][0])
    calls = pl.DataFrame(
        {
            "node": [node if i % 7 else "elsewhere" for i in range(t.size)],
            "rank": pl.Series([0 if i % 5 else 1 for i in range(t.size)], dtype=pl.Int32),
            "start_ns": pl.Series(t, dtype=pl.Int64),
            "flops": pl.Series(list(flops), dtype=pl.Int64),
        }
    ).with_columns(pl.col("node").cast(pl.Categorical))
    assert step_flops(owlv2, ix, calls).equals(joined_step_flops(owlv2, calls))
