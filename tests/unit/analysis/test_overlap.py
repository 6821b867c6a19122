"""overlap: comm/compute overlap and queue depth (hand-computed answers)."""

from __future__ import annotations

import polars as pl
from reference.handbuilt_trace import handbuilt_trace, two_rank_trace

from ktrace.analysis import overlap
from ktrace.model import TraceBuilder


def test_comm_compute_overlap_by_hand() -> None:
    o = overlap.comm_compute_overlap(handbuilt_trace()).row(0, named=True)
    assert (o["comm_ns"], o["compute_ns"], o["overlap_ns"], o["comm_only_ns"]) == (50, 170, 20, 30)
    assert o["overlap_pct"] == 40.0


def test_overlap_is_null_without_communication() -> None:
    b = TraceBuilder()
    b.add("kernels", {"start_ns": [1], "end_ns": [5], "device": [0], "stream": [7], "name": ["gemm"]})
    assert overlap.comm_compute_overlap(b.build())["overlap_pct"].to_list() == [None]


def test_queue_depth_until_end_by_hand() -> None:
    q = overlap.queue_depth(handbuilt_trace()).filter(pl.col("stream") == 7)
    assert q.select("ts_ns", "depth").rows() == [(10, 1), (30, 2), (200, 1), (300, 0), (380, 1), (450, 0)]


def test_queue_depth_until_start_is_htas_definition() -> None:
    q = overlap.queue_depth(handbuilt_trace(), until="start").filter(pl.col("stream") == 7)
    assert q.select("ts_ns", "depth").rows() == [(10, 1), (30, 2), (100, 1), (250, 0), (380, 1), (400, 0)]


def test_queue_depth_stats_by_hand() -> None:
    s = (
        overlap.queue_depth_stats(handbuilt_trace(), max_queue_length=2)
        .filter(pl.col("stream") == 7)
        .row(0, named=True)
    )
    assert s["max_depth"] == 2 and s["span_ns"] == 440 and s["time_at_max_ns"] == 170
    assert abs(s["mean_depth"] - 530 / 440) < 1e-12
    assert abs(s["sample_mean_depth"] - 5 / 6) < 1e-12


def test_queue_depth_per_rank() -> None:
    s = overlap.queue_depth_stats(two_rank_trace())
    assert s.select("node", "rank", "stream", "max_depth").rows() == [
        ("n0", 0, 7, 2),
        ("n0", 0, 8, 2),
        ("n1", 1, 7, 2),
        ("n1", 1, 8, 2),
    ]


def test_empty_trace() -> None:
    t = TraceBuilder().build()
    assert overlap.comm_compute_overlap(t).height == 0
    assert overlap.queue_depth(t).height == 0
    assert overlap.queue_depth_stats(t).height == 0
