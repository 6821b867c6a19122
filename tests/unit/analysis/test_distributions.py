"""Activity distribution and memory-op distribution (pinned vs pageable, GB/s)."""

from __future__ import annotations

import pytest

from ktrace.analysis.distributions import ACTIVITIES, activity_distribution, memory_distribution
from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace


def _trace() -> Trace:
    b = TraceBuilder("n", 0)
    b.add("kernels", {"start_ns": [0, 50], "end_ns": [100, 150], "device": [0, 0], "name": ["k", "k"]})
    b.add(
        "memory",
        {
            "op": ["memcpy", "memcpy", "memcpy", "memset"],
            "start_ns": [200, 400, 600, 800],
            "end_ns": [300, 600, 700, 850],
            "device": [0] * 4,
            "bytes": [1000, 1000, 500, 64],
            "copy_kind": ["HtoD", "HtoD", "DtoH", "unknown"],
            "src_kind": ["pinned", "pageable", "device", "unknown"],
            "dst_kind": ["device", "device", "pageable", "device"],
        },
    )
    b.add("syncs", {"start_ns": [900], "end_ns": [950], "sync_type": ["stream"]})
    return b.build()


def test_activity_sums_durations() -> None:
    d = {r["activity"]: r for r in activity_distribution(_trace()).iter_rows(named=True)}
    assert list(d) == list(ACTIVITIES)
    assert d["kernels"]["time_ns"] == 200 and d["memcpy"]["time_ns"] == 400
    assert d["memset"]["time_ns"] == 50 and d["sync"]["count"] == 1
    assert d["memcpy"]["share"] == pytest.approx(400 / 700)


def test_memory_by_kind_host_memory_and_bandwidth() -> None:
    rows = {(r["op"], r["copy_kind"], r["host_memory"]): r for r in memory_distribution(_trace()).iter_rows(named=True)}
    assert set(rows) == {
        ("memcpy", "HtoD", "pinned"),
        ("memcpy", "HtoD", "pageable"),
        ("memcpy", "DtoH", "pageable"),
        ("memset", "-", "-"),
    }
    assert rows[("memcpy", "HtoD", "pinned")]["bandwidth_gbps"] == pytest.approx(10.0)  # 1000 B / 100 ns
    assert rows[("memcpy", "HtoD", "pageable")]["bandwidth_gbps"] == pytest.approx(5.0)
    assert rows[("memset", "-", "-")]["bytes"] == 64


def test_empty_trace() -> None:
    empty = TraceBuilder().build()
    assert activity_distribution(empty)["time_ns"].sum() == 0
    assert memory_distribution(empty).height == 0
