"""critical_path_ranks.rank_spans (reduced per rank id before any node is a string) against its naive twin: every
row's node cast to a string, then grouped."""

from __future__ import annotations

import polars as pl
import pytest

from ktrace.analysis.critical_path_ranks import rank_spans
from ktrace.model.trace import Trace
from ktrace.testing.fleet import FleetConfig, generate_fleet
from ktrace.testing.synthetic import SyntheticConfig, generate


def naive_rank_spans(trace: Trace) -> pl.DataFrame:
    parts = [
        t.select(pl.col("node").cast(pl.String), pl.col("rank").cast(pl.Int64), "start_ns", "end_ns")
        for t in (trace.ops, trace.api)
        if t.height
    ]
    if not parts:
        return pl.DataFrame()
    spans = pl.concat(parts).group_by("node", "rank").agg(pl.col("start_ns").min(), pl.col("end_ns").max())
    return spans.sort("node", "rank")


@pytest.mark.parametrize(
    "trace",
    [
        generate_fleet(FleetConfig(ranks=16, hosts=4, steps=3)).trace,
        generate(SyntheticConfig(ranks=6, nodes=2, steps=2)),
        generate(SyntheticConfig(steps=2)),
    ],
    ids=["fleet-16", "synthetic-6", "one-rank"],
)
def test_rank_spans_equal_the_naive_spans(trace: Trace) -> None:
    found = rank_spans(trace)
    assert found.height and found.equals(naive_rank_spans(trace))


def test_a_trace_without_cpu_events_has_no_spans() -> None:
    trace = generate(SyntheticConfig(steps=1))
    empty = Trace(**{name: trace.table(name).clear() for name in trace.counts()}, meta=trace.meta)
    assert rank_spans(empty).equals(naive_rank_spans(empty))
