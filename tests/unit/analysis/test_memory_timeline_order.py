"""The memory timeline's passes that lean on the events' device, time order (never_freed, the per-step growth),
checked against the plain whole-frame polars forms they replaced, on seeded random events over several devices with
repeated addresses and times (ties at the step ends), and on a series in device order but not in time order."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from ktrace.analysis.memory_timeline import _DEVICE, _with_never_freed, growth_at_steps
from ktrace.model.allocations import allocated_after


def _events(seed: int, n: int = 3000) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return allocated_after(
        pl.DataFrame(
            {
                "node": rng.choice(["b-host", "a-host"], n),
                "rank": rng.integers(0, 2, n).astype(np.int32),
                "device": rng.integers(0, 2, n).astype(np.int32),
                "ts_ns": rng.integers(0, 400, n),  # many events share a time
                "address": rng.integers(0, 12, n),  # and a block address
                "bytes": rng.choice([-64, 64, 128, -128], n),
                "total_allocated": pl.Series([None] * n, dtype=pl.Int64),
            }
        )
    )


def _never_freed_by_polars(events: pl.DataFrame) -> pl.Series:
    block = [*_DEVICE, "address"]
    following = pl.col("bytes").shift(-1).over(block)
    return (
        events.with_row_index("at")
        .sort(*block, "ts_ns", "row")
        .select("at", never_freed=(pl.col("bytes") > 0) & ~(following < 0).fill_null(False))
        .sort("at")["never_freed"]
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_never_freed_is_the_next_event_of_the_block_not_a_free(seed: int) -> None:
    events = _events(seed)
    assert _with_never_freed(events)["never_freed"].to_list() == _never_freed_by_polars(events).to_list()


def _steps(seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed + 100)
    ends = np.sort(rng.choice(np.arange(-10, 420), 12, replace=False))
    ends[3] = 200  # a step end on an event time
    return pl.DataFrame(
        {"node": ["a-host"] * 6 + ["b-host"] * 6, "rank": [0, 1] * 6, "step": list(range(12)), "end_ns": ends}
    ).with_columns(pl.col("rank").cast(pl.Int32))


def _growth_by_polars(steps: pl.DataFrame, series: pl.DataFrame) -> pl.DataFrame:
    at = steps.join(series.select(_DEVICE).unique(), on=["node", "rank"]).sort("end_ns")
    last = series.select(*_DEVICE, "ts_ns", "allocated_bytes").sort("ts_ns", maintain_order=True)
    joined = at.join_asof(
        last, left_on="end_ns", right_on="ts_ns", by=list(_DEVICE), strategy="backward", check_sortedness=False
    )
    return (
        joined.sort(*_DEVICE, "step")
        .with_columns(growth_bytes=pl.col("allocated_bytes").diff().over(_DEVICE))
        .select(*_DEVICE, "step", "end_ns", "allocated_bytes", "growth_bytes")
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("reversed_time", [False, True])
def test_growth_takes_each_device_last_event_at_or_before_the_step_end(seed: int, reversed_time: bool) -> None:
    series = _events(seed).select(*_DEVICE, "ts_ns", "allocated_bytes")
    # ties of time on a device are resolved by the series' order: one value per (device, time) keeps both
    # forms exact whatever order the whole-frame join took among tied rows
    series = series.unique([*_DEVICE, "ts_ns"], keep="last", maintain_order=True)
    if reversed_time:  # in device order, not in time order: no event may be left out
        series = series.sort(*_DEVICE, "ts_ns", descending=[False, False, False, True])
    steps = _steps(seed)
    assert growth_at_steps(steps, series, nvml=False).equals(_growth_by_polars(steps, series))
