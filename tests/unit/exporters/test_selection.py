"""--window and --ranks: parsing and cutting a trace."""

from __future__ import annotations

import polars as pl
import pytest

from ktrace.exporters.selection import parse_ranks, parse_window, select
from ktrace.model.errors import ExitCode, KtraceError
from ktrace.model.trace import Trace

T0 = 1_700_000_000_000_000_000


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("1.5:3", (T0 + 1_500_000_000, T0 + 3_000_000_000)),
        (":0.25", (None, T0 + 250_000_000)),
        ("2:", (T0 + 2_000_000_000, None)),
        (f"{T0 + 5}:{T0 + 9}", (T0 + 5, T0 + 9)),
    ],
)
def test_parse_window(spec: str, expected: tuple[int | None, int | None]) -> None:
    assert parse_window(spec, T0) == expected


@pytest.mark.parametrize(
    "spec", ["3", "a:b", "3:1", "1:2:3", "inf:", "-inf:0", "nan:1", "1e300:", ":1e10", "99999999999999999999999:"]
)
def test_bad_window_is_a_usage_error(spec: str) -> None:
    with pytest.raises(KtraceError) as err:
        parse_window(spec, T0)
    assert err.value.exit_code == ExitCode.USAGE


def test_parse_ranks() -> None:
    assert parse_ranks("0,1,3") == [0, 1, 3]
    assert parse_ranks("3, 0-2") == [0, 1, 2, 3]
    for bad in ("", "x", "1-", "0-2000000000", "3-1", "2147483648"):  # 0-2000000000 once took 22 GB
        with pytest.raises(KtraceError) as err:
            parse_ranks(bad)
        assert err.value.exit_code == ExitCode.USAGE


def test_select_ranks_keeps_their_node_counters(synthetic_trace: Trace) -> None:
    cut = select(synthetic_trace, ranks=[1])
    assert {r for _, r in cut.ranks} == {-1, 1}
    assert cut.kernels.height == synthetic_trace.kernels.filter(synthetic_trace.kernels["rank"] == 1).height
    assert cut.counters.height == synthetic_trace.counters.height
    with pytest.raises(KtraceError, match="not in the trace"):
        select(synthetic_trace, ranks=[9])


def test_select_window_keeps_rows_overlapping_it_whole(synthetic_trace: Trace) -> None:
    k = synthetic_trace.kernels.sort("start_ns")
    mid = k.row(k.height // 2, named=True)
    lo, hi = mid["start_ns"] + 1, mid["start_ns"] + 2
    cut = select(synthetic_trace, window=(lo, hi))
    expected = k.filter((k["end_ns"] >= lo) & (k["start_ns"] <= hi))
    assert 0 < cut.kernels.height == expected.height
    assert cut.kernels.sort("start_ns")["start_ns"].to_list() == expected["start_ns"].to_list()
    assert (
        cut.counters.height
        == synthetic_trace.counters.filter(
            (synthetic_trace.counters["ts_ns"] >= lo) & (synthetic_trace.counters["ts_ns"] <= hi)
        ).height
    )


def test_select_window_keeps_the_allocator_events_inside_it() -> None:
    from reference.memory_trace import EVENTS, T, memory_trace

    cut = select(memory_trace(), window=(T + 30, T + 80))
    assert cut.allocations["ts_ns"].to_list() == [T + t for t, *_ in EVENTS if 30 <= t <= 80]
    assert select(memory_trace(), ranks=[0]).allocations.height == len(EVENTS)


def test_a_window_keeps_the_memory_allocated_before_it() -> None:
    """Allocator events without the allocator's totals (PyTorch 1.9) are summed from the trace start: a window cut
    at GPU 0's free at t=50 must carry what was allocated before it (100 bytes remain, not -500)."""
    from reference.memory_trace import memory_trace

    from ktrace.model.allocations import allocated_after

    whole = allocated_after(memory_trace(totals=False).allocations)
    lo = sorted(whole["ts_ns"].to_list())[4]  # the 5th event: GPU 0 frees 500 bytes
    cut = allocated_after(select(memory_trace(totals=False), window=(lo, None)).allocations)
    assert cut.filter(pl.col("device") == 0)["allocated_bytes"][0] == 100  # 100 + 300 + 500 - 300 - 500
    assert cut["allocated_bytes"].to_list() == whole.filter(pl.col("ts_ns") >= lo)["allocated_bytes"].to_list()
