"""A window cut (`ktrace export --window`) keeps the Python samples inside it, as it keeps counter samples."""

from __future__ import annotations

import dataclasses

import polars as pl

from ktrace.exporters.selection import select
from ktrace.testing.synthetic import SyntheticConfig, generate


def test_a_window_keeps_the_samples_inside_it() -> None:
    trace = generate(SyntheticConfig(seed=2))
    lo, hi = trace.span_ns() or (0, 0)
    node, rank = next((n, r) for n, r in trace.ranks if r >= 0)
    ts = [lo + (hi - lo) * i // 10 for i in range(10)]
    samples = pl.DataFrame(
        {"node": [node] * 10, "rank": [rank] * 10, "ts_ns": ts, "pid": [1] * 10, "tid": [1] * 10, "stack": ["f"] * 10},
        schema_overrides={"node": pl.Categorical, "rank": pl.Int32, "stack": pl.Categorical},
    )
    cut = select(dataclasses.replace(trace, samples=samples), window=(ts[3], ts[6]))
    assert cut.samples["ts_ns"].to_list() == ts[3:7]
