"""Top kernels by time and count, with the "other" row, per trace and per rank."""

from __future__ import annotations

import pytest

from ktrace.analysis.kernels import OTHER, kernel_stats, top_kernels
from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace


def _trace() -> Trace:
    b = TraceBuilder("n", 0)
    # a: 3 launches of 10, 20, 30 ns; b: 1 launch of 100; c: 5 launches of 1.
    durs = {"a": [10, 20, 30], "b": [100], "c": [1] * 5}
    starts, ends, names = [], [], []
    t = 0
    for name, ds in durs.items():
        for d in ds:
            starts.append(t)
            ends.append(t + d)
            names.append(name)
            t += 1000
    b.add("kernels", {"start_ns": starts, "end_ns": ends, "device": [0] * len(names), "name": names})
    b.add("kernels", {"start_ns": [0], "end_ns": [7], "device": [0], "name": ["a"]}, rank=1)
    return b.build()


def test_stats_match_hand_computed_values() -> None:
    s = {r["name"]: r for r in kernel_stats(_trace()).iter_rows(named=True)}
    assert s["a"]["count"] == 4 and s["a"]["total_ns"] == 67 and s["a"]["min_ns"] == 7 and s["a"]["max_ns"] == 30
    assert s["a"]["p50_ns"] == pytest.approx(15.0)  # 7, 10, 20, 30 -> linear median 15
    assert s["b"]["time_share"] == pytest.approx(100 / 172)
    assert s["c"]["count_share"] == pytest.approx(5 / 10)


def test_top_by_time_and_count_with_other_row() -> None:
    by_time = top_kernels(_trace(), by="time", top=1)
    assert by_time["name"].to_list() == ["b", OTHER]
    other = by_time.row(1, named=True)
    assert other["count"] == 9 and other["total_ns"] == 72 and other["p50_ns"] is None
    assert other["mean_ns"] == pytest.approx(8.0) and other["position"] is None
    by_count = top_kernels(_trace(), by="count", top=2)
    assert by_count["name"].to_list() == ["c", "a", OTHER]
    assert by_count["time_share"].sum() == pytest.approx(1.0)


def test_top_all_and_per_rank() -> None:
    assert top_kernels(_trace(), top=0).height == 3
    assert top_kernels(_trace(), top=3)["name"].to_list() == ["b", "a", "c"]
    per = top_kernels(_trace(), top=1, per_rank=True)
    assert per.select("rank", "name").rows() == [(0, "b"), (0, OTHER), (1, "a")]
    with pytest.raises(ValueError):
        top_kernels(_trace(), by="bytes")  # type: ignore[arg-type]
