"""utilization: busy time per device/stream, bins, active shares (hand-computed answers)."""

from __future__ import annotations

import polars as pl
from reference import intervals_ref
from reference.handbuilt_trace import handbuilt, handbuilt_trace, two_rank_trace

from ktrace.analysis import utilization
from ktrace.model import TraceBuilder
from ktrace.testing import SyntheticConfig, generate


def test_busy_time_per_device_counts_overlapping_streams_once() -> None:
    b = utilization.busy_time(handbuilt_trace(), per="device")
    assert b.select(
        "node", "rank", "device", "busy_ns", "first_ns", "last_ns", "span_ns", "idle_ns", "records"
    ).rows() == [("n0", 0, 0, 250, 100, 450, 350, 100, 5)]
    assert abs(b["busy_pct"][0] - 100 * 250 / 350) < 1e-9


def test_busy_time_per_stream() -> None:
    b = utilization.busy_time(handbuilt_trace(), per="stream")
    assert b.select("stream", "busy_ns", "span_ns", "records").rows() == [(7, 200, 350, 3), (8, 120, 130, 2)]


def test_busy_time_groups_ranks_separately() -> None:
    b = utilization.busy_time(two_rank_trace(), per="rank")
    assert b.select("node", "rank", "busy_ns", "first_ns").rows() == [("n0", 0, 250, 100), ("n1", 1, 250, 1100)]


def test_utilization_over_time_bins() -> None:
    u = utilization.utilization_over_time(handbuilt_trace(), bin_ns=100)
    assert u["bin_start_ns"].to_list() == [100, 200, 300, 400]
    assert u["busy_ns"].to_list() == [100, 100, 0, 50]
    assert u["utilization"].to_list() == [1.0, 1.0, 0.0, 0.5]


def test_utilization_over_time_aligns_ranks_on_one_origin() -> None:
    u = utilization.utilization_over_time(two_rank_trace(), bin_ns=500)
    assert u.filter(pl.col("rank") == 1)["busy_ns"].to_list() == [0, 0, 250]
    assert u.filter(pl.col("rank") == 0)["busy_ns"].to_list() == [250, 0, 0]


def test_busy_time_matches_naive_union_on_synthetic_trace() -> None:
    t = generate(SyntheticConfig(steps=3, kernels_per_step=40, ranks=2, seed=3))
    b = utilization.busy_time(t, per="device")
    act = utilization.gpu_activity(t)
    for _node, rank, device, busy in b.select("node", "rank", "device", "busy_ns").rows():
        rows = act.filter((pl.col("rank") == rank) & (pl.col("device") == device))
        lo = int(rows["start_ns"].min())  # type: ignore[arg-type]
        # Naive painting on a coarse grid is too slow at ns scale: compare with a sort-and-sweep in Python.
        spans = sorted(zip(rows["start_ns"].to_list(), rows["end_ns"].to_list(), strict=True))
        total, cur_s, cur_e = 0, spans[0][0], spans[0][1]
        for s, e in spans[1:]:
            if s > cur_e:
                total += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        total += cur_e - cur_s
        assert busy == total and lo >= 0


def test_union_reference_agrees_on_handbuilt() -> None:
    act = utilization.gpu_activity(handbuilt_trace())
    ref = intervals_ref.union_length([0] * act.height, act["start_ns"].to_list(), act["end_ns"].to_list(), 1)
    assert ref == [250]


def test_active_time_share_without_counters_uses_timeline() -> None:
    a = utilization.active_time_share(handbuilt_trace())
    gpu = a.filter(pl.col("resource") == "gpu")
    assert gpu.select("method", "instance").rows() == [("timeline", 0)]
    assert abs(gpu["active_share"][0] - 250 / 350) < 1e-12
    cpu = a.filter(pl.col("resource") == "cpu")
    # api [10,20) [30,40) [45,48) [50,60) [210,240) [380,390) and nvtx [5,35): union 5..40,45..48,50..60,
    # 210..240, 380..390 = 35 + 3 + 10 + 30 + 10 = 88 over span 5..390 = 385.
    assert cpu["method"].to_list() == ["timeline"]
    assert abs(cpu["active_share"][0] - 88 / 385) < 1e-12


def test_active_time_share_prefers_counters_for_cpu() -> None:
    b = handbuilt()
    b.add(
        "counters",
        {
            "ts_ns": [0, 10, 20, 30],
            "metric": ["cpu.util"] * 2 + ["gpu.util"] * 2,
            "instance": [-1, -1, 0, 0],
            "value": [0.0, 50.0, 10.0, 30.0],
        },
        rank=-1,
    )
    a = utilization.active_time_share(b.build())
    assert a.filter(pl.col("method") == "counter").select("resource", "active_share", "mean_util").rows() == [
        ("cpu", 0.5, 25.0),
        ("gpu", 1.0, 20.0),
    ]
    assert a.filter((pl.col("resource") == "cpu") & (pl.col("method") == "timeline")).height == 0


def test_empty_trace_gives_empty_frames() -> None:
    t = TraceBuilder().build()
    assert utilization.busy_time(t).height == 0
    assert utilization.utilization_over_time(t, 1000).height == 0
    assert utilization.active_time_share(t).height == 0


def test_busy_time_per_stream_with_wide_stream_ids() -> None:
    b = TraceBuilder(node="n", rank=0)
    b.add(
        "kernels",
        {
            "start_ns": [0, 10, 20],
            "end_ns": [5, 15, 30],
            "device": [0, 0, 0],
            "stream": [7, 2**40, 7],
            "correlation_id": [1, 2, 3],
            "name": ["k"] * 3,
        },
    )
    busy = utilization.busy_time(b.build(), "stream").sort("stream")  # 2**40 needs no 2**40-wide table
    assert busy["stream"].to_list() == [7, 2**40]
    assert busy["busy_ns"].to_list() == [15, 5]


def test_many_bins_over_few_intervals_take_the_compiled_kernel() -> None:
    """busy_per_bin loops over the bins an interval covers: 10 intervals over 2 M bins took 1.5 s as Python
    (the choice looked only at array lengths); the work size now includes the bins."""
    import numpy as np

    from ktrace.analysis._kernels import PYTHON_MAX_ROWS
    from ktrace.analysis._kernels.intervals import _busy_per_bin, busy_per_bin

    _busy_per_bin.compiled()  # the dispatcher first (from the real source), then count Python runs
    calls: list[str] = []
    original = _busy_per_bin.py_func
    _busy_per_bin.py_func = lambda *a: calls.append("python") or original(*a)  # type: ignore[method-assign]
    try:
        n_bins = PYTHON_MAX_ROWS + 1
        out = busy_per_bin(np.zeros(3, np.int64), np.array([0, 10, 20]), np.array([5, 15, 25]), 0, 1, n_bins, 1)
    finally:
        _busy_per_bin.py_func = original  # type: ignore[method-assign]
    assert calls == [] and out.shape == (1, n_bins) and int(out.sum()) == 15
