"""latency: both launch-latency definitions, CUDA graphs, percentiles (hand-computed answers)."""

from __future__ import annotations

import polars as pl
from reference.handbuilt_trace import handbuilt, handbuilt_trace, two_rank_trace

from ktrace.analysis import latency
from ktrace.model import TraceBuilder


def test_launch_latency_both_definitions() -> None:
    lat = latency.launch_latency(handbuilt_trace()).sort("start_ns")
    assert lat.select("kind", "correlation_id", "launch_latency_ns", "queue_delay_ns", "api_duration_ns").rows() == [
        ("kernel", 1, 90, 80, 10),
        ("kernel", 3, 100, 90, 10),
        ("kernel", 2, 220, 210, 10),
        ("kernel", 5, 225, 222, 3),
        ("memcpy", 4, 20, 10, 10),
    ]
    assert lat["queued"].all() and not lat["is_graph"].any()


def test_join_is_per_rank() -> None:
    lat = latency.launch_latency(two_rank_trace())
    assert lat.group_by("rank").len().sort("rank")["len"].to_list() == [5, 5]
    assert lat.filter(pl.col("rank") == 1)["launch_latency_ns"].sort().to_list() == [20, 90, 100, 220, 225]


def test_negative_queue_delay_is_kept_and_not_queued() -> None:
    b = TraceBuilder()
    b.add(
        "kernels",
        {"start_ns": [15], "end_ns": [30], "device": [0], "stream": [7], "correlation_id": [1], "name": ["k"]},
    )
    b.add(
        "api",
        {
            "start_ns": [10],
            "end_ns": [20],
            "pid": [1],
            "tid": [1],
            "correlation_id": [1],
            "domain": ["runtime"],
            "name": ["cudaLaunchKernel"],
        },
    )
    lat = latency.launch_latency(b.build())
    assert lat.select("launch_latency_ns", "queue_delay_ns", "queued").rows() == [(5, -5, False)]


def graph_trace() -> TraceBuilder:
    b = TraceBuilder()
    b.add(
        "kernels",
        {
            "start_ns": [50, 20, 30],
            "end_ns": [60, 30, 40],
            "device": [0] * 3,
            "stream": [7] * 3,
            "correlation_id": [9] * 3,
            "name": ["c", "a", "b"],
        },
    )
    b.add(
        "api",
        {
            "start_ns": [0],
            "end_ns": [10],
            "pid": [1],
            "tid": [1],
            "correlation_id": [9],
            "domain": ["runtime"],
            "name": ["cudaGraphLaunch"],
        },
    )
    return b


def test_graph_launch_gives_every_run_its_latency() -> None:
    lat = latency.launch_latency(graph_trace().build()).sort("start_ns")
    assert lat.select("name", "launch_latency_ns", "queue_delay_ns", "graph_run", "is_graph").rows() == [
        ("a", 20, 10, 0, True),
        ("b", 30, 20, 1, True),
        ("c", 50, 40, 2, True),
    ]
    assert latency.latency_stats(graph_trace().build(), by="api")["count"].to_list() == [3]
    first = latency.latency_stats(graph_trace().build(), by="api", graph_runs="first")
    assert first.select("count", "launch_latency_ns_p50").rows() == [(1, 20.0)]


def test_latency_stats_by_name_and_stream() -> None:
    s = latency.latency_stats(handbuilt_trace(), by="name")
    gemm = s.filter(pl.col("name") == "gemm").row(0, named=True)
    # gemm launch latencies 90, 100, 225 -> p50 100, mean 415/3, max 225
    assert gemm["count"] == 3 and gemm["launch_latency_ns_p50"] == 100.0 and gemm["launch_latency_ns_max"] == 225
    assert abs(gemm["launch_latency_ns_mean"] - 415 / 3) < 1e-9
    by_stream = latency.latency_stats(handbuilt_trace(), by="stream")
    assert by_stream.select("stream", "count").rows() == [(7, 3), (8, 2)]


def test_latency_stats_by_step() -> None:
    s = latency.latency_stats(handbuilt_trace(), by="step").sort("step")
    assert s.select("step", "count").rows() == [(5, 4), (6, 1)]


def test_unlaunched_records_are_counted() -> None:
    b = handbuilt()
    b.add(
        "kernels",
        {"start_ns": [600], "end_ns": [610], "device": [0], "stream": [7], "correlation_id": [77], "name": ["orphan"]},
    )
    t = b.build()
    assert latency.unlaunched_count(t) == 1
    assert latency.launch_latency(t).height == 5


def test_empty_trace() -> None:
    t = TraceBuilder().build()
    assert latency.launch_latency(t).height == 0
    assert latency.latency_stats(t).height == 0
    assert latency.unlaunched_count(t) == 0
