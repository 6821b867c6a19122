"""idle: HTA idle-time categories plus sync wait, and device gaps (hand-computed answers)."""

from __future__ import annotations

import polars as pl
from reference.handbuilt_trace import handbuilt, handbuilt_trace, two_rank_trace

from ktrace.analysis import idle
from ktrace.model import TraceBuilder


def test_idle_gaps_by_hand() -> None:
    g = idle.idle_gaps(handbuilt_trace(), kernel_wait_ns=30).sort("stream", "gap_start_ns")
    # stream 7: [200,250) sync call [210,240) in progress -> sync_wait; [300,400) memcpy launched at 380 -> host_wait
    # stream 8: [260,270) 10 ns < 30 -> kernel_wait
    assert g.select("stream", "gap_start_ns", "gap_end_ns", "idle_ns", "idle_category").rows() == [
        (7, 200, 250, 50, "sync_wait"), (7, 300, 400, 100, "host_wait"), (8, 260, 270, 10, "kernel_wait")]


def test_without_sync_call_long_gap_is_other() -> None:
    b = handbuilt()
    t = b.build()
    no_sync = t.api.filter(pl.col("name").cast(pl.String) != "cudaStreamSynchronize")
    t2 = TraceBuilder()
    for name in ("kernels", "memory", "ranges"):
        t2.add(name, t.to_arrow(name))
    t2.add("api", no_sync.to_arrow())
    g = idle.idle_gaps(t2.build(), kernel_wait_ns=30).sort("stream", "gap_start_ns")
    assert g["idle_category"].to_list() == ["other", "host_wait", "kernel_wait"]


def test_syncs_table_counts_as_sync_wait() -> None:
    b = handbuilt()
    b.add("syncs", {"start_ns": [290], "end_ns": [310], "device": [0], "stream": [7], "sync_type": ["stream"]})
    g = idle.idle_gaps(b.build(), kernel_wait_ns=30, sync_pattern="NoSuchApi").sort("stream", "gap_start_ns")
    # The [200,250) gap no longer sees the sync API; the [300,400) gap stays host_wait (launch at 380).
    assert g["idle_category"].to_list() == ["other", "host_wait", "kernel_wait"]


def test_idle_breakdown_sums_and_ratios() -> None:
    br = idle.idle_breakdown(handbuilt_trace(), kernel_wait_ns=30)
    s7 = br.filter(pl.col("stream") == 7)
    assert s7.select("idle_category", "idle_ns", "gaps").rows() == [
        ("host_wait", 100, 1), ("kernel_wait", 0, 0), ("sync_wait", 50, 1), ("other", 0, 0)]
    assert abs(s7["idle_ratio"].sum() - 1.0) < 1e-12
    assert br.filter(pl.col("stream") == 8).filter(pl.col("idle_ns") > 0)["idle_category"].to_list() == [
        "kernel_wait"]


def test_default_threshold_is_htas_30_us() -> None:
    g = idle.idle_gaps(handbuilt_trace()).sort("stream", "gap_start_ns")
    assert g["idle_category"].to_list() == ["kernel_wait", "host_wait", "kernel_wait"]


def test_idle_breakdown_every_rank() -> None:
    br = idle.idle_breakdown(two_rank_trace(), kernel_wait_ns=30)
    assert br.group_by("node", "rank").agg(pl.col("idle_ns").sum()).sort("rank").rows() == [
        ("n0", 0, 160), ("n1", 1, 160)]


def test_gpu_gaps() -> None:
    g = idle.gpu_gaps(handbuilt_trace())
    assert g.select("gap_start_ns", "gap_end_ns", "gap_ns").rows() == [(300, 400, 100)]
    assert idle.gpu_gaps(handbuilt_trace(), min_gap_ns=101).height == 0
    assert idle.gpu_gaps(handbuilt_trace(), per="stream").select("stream", "gap_ns").rows() == [
        (7, 50), (7, 100), (8, 10)]


def test_empty_trace() -> None:
    t = TraceBuilder().build()
    assert idle.idle_gaps(t).height == 0
    assert idle.idle_breakdown(t).height == 0
    assert idle.gpu_gaps(t).height == 0
