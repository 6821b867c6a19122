"""model.allocations.allocated_after (windows over each device's run once sorted) against the windows over the
device keys it replaced: the same frame, on events of several nodes, ranks and devices (null devices, a
Categorical or String node), tied times, devices with and without the allocator's totals, null byte counts."""

from __future__ import annotations

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from ktrace.model.allocations import DEVICE_KEYS, allocated_after


def by_device_keys(allocations: pl.DataFrame) -> pl.DataFrame:
    """The naive twin: allocated_after with its windows over the device key columns."""
    has_totals = pl.col("total_allocated").null_count().over(DEVICE_KEYS) == 0
    return (
        allocations.with_row_index("row")
        .sort(*DEVICE_KEYS, "ts_ns", "row")
        .with_columns(
            allocated_bytes=pl.when(has_totals)
            .then(pl.col("total_allocated"))
            .otherwise(pl.col("bytes").cum_sum().over(DEVICE_KEYS))
        )
    )


EVENT = st.tuples(
    st.sampled_from(["n1", "n0", "a"]),
    st.integers(0, 2),
    st.one_of(st.none(), st.integers(0, 2)),
    st.integers(0, 6),
    st.one_of(st.none(), st.integers(-64, 64)),
    st.one_of(st.none(), st.integers(0, 1000)),
)


@given(st.lists(EVENT, max_size=40), st.booleans(), st.sets(st.integers(0, 2)))
def test_allocated_after_matches_windows_over_device_keys(
    events: list[tuple[str, int, int | None, int, int | None, int | None]], categorical: bool, with_totals: set[int]
) -> None:
    node, rank, device, ts, size, total = (list(c) for c in zip(*events, strict=True)) if events else ([],) * 6
    # devices listed in with_totals record the allocator's total on every event, others only where drawn
    total = [(t or 0) if d in with_totals else t for d, t in zip(device, total, strict=True)]
    frame = pl.DataFrame(
        {"node": node, "rank": rank, "device": device, "ts_ns": ts, "bytes": size, "total_allocated": total},
        schema={
            "node": pl.Categorical if categorical else pl.String,
            "rank": pl.Int32,
            "device": pl.Int32,
            "ts_ns": pl.Int64,
            "bytes": pl.Int64,
            "total_allocated": pl.Int64,
        },
    )
    assert allocated_after(frame).equals(by_device_keys(frame))
