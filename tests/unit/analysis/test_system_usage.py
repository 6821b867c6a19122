"""System usage read from a trace's events (issue 26 item 6), on the hand-built trace of
tests/reference/system_usage_trace.py, whose docstring works out every figure."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from reference.system_usage_trace import MS, system_usage_trace

from ktrace.analysis.system_usage import system_usage, union_coverage
from ktrace.model.schema import COUNTER_METRICS


def test_gpu_busy_percentiles_over_the_bins() -> None:
    usage = system_usage(system_usage_trace())
    assert usage.bin_ns == MS
    (row,) = usage.gpu_busy.to_dicts()
    assert (row["node"], row["rank"], row["device"], row["bins"]) == ("n0", 0, 0, 4)
    got = [row[k] for k in ("min_pct", "p50_pct", "p95_pct", "p99_pct", "max_pct", "mean_pct")]
    assert got == pytest.approx([0.0, 75.0, 100.0, 100.0, 100.0, 62.5])


def test_cpu_thread_operator_and_launch_load() -> None:
    main, other = system_usage(system_usage_trace()).cpu_threads.to_dicts()  # busiest first
    assert (main["tid"], main["thread"], other["tid"], other["thread"]) == (1, "main", 2, None)
    assert (main["operators"], main["operator_ns"], main["launches"], main["launch_ns"]) == (2, 1.5 * MS, 3, 0.27 * MS)
    assert (main["busy_ns"], main["span_ns"], main["bins"]) == (1.76 * MS, 3.01 * MS, 3)
    got = [main[k] for k in ("p50_pct", "p95_pct", "p99_pct", "max_pct")]
    assert got == pytest.approx([50.0, 95.0, 99.0, 100.0])
    assert (other["operators"], other["launches"], other["busy_ns"], other["bins"]) == (1, 0, 0.5 * MS, 0)
    assert other["p50_pct"] is None


def test_allocated_memory_sampled_at_bin_boundaries() -> None:
    (row,) = system_usage(system_usage_trace()).gpu_memory.to_dicts()
    assert (row["device"], row["bins"], row["peak_bytes"]) == (0, 3, 400)
    assert [row["p50_bytes"], row["p95_bytes"], row["p99_bytes"]] == pytest.approx([100, 370, 394])


def test_missing_counters_are_named() -> None:
    assert system_usage(system_usage_trace()).counters_missing == tuple(m for m in COUNTER_METRICS if m != "cpu.util")
    assert system_usage(system_usage_trace(counters=False)).counters_missing == COUNTER_METRICS


def test_a_trace_without_gpu_or_cpu_events_gives_empty_tables() -> None:
    from ktrace.model import TraceBuilder

    usage = system_usage(TraceBuilder().build())
    assert usage.gpu_busy.is_empty() and usage.cpu_threads.is_empty() and usage.gpu_memory.is_empty()
    assert "p50_pct" in usage.cpu_threads.columns and "p50_bytes" in usage.gpu_memory.columns


@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 15)), min_size=1, max_size=12),
    st.lists(st.integers(-5, 90), min_size=1, max_size=8),
)
def test_union_coverage_matches_a_point_count(spans: list[tuple[int, int]], times: list[int]) -> None:
    """C(t) is the number of unit points [x, x+1) before t that some interval covers (touching ones merge)."""
    spans = sorted(spans)
    start = np.array([s for s, _ in spans], np.int64)
    end = start + np.array([d for _, d in spans], np.int64)
    covered = union_coverage(start, end)(np.array(times, np.int64))
    expected = [sum(any(s <= x < e for s, e in zip(start, end, strict=True)) for x in range(-5, t)) for t in times]
    assert covered.tolist() == expected
