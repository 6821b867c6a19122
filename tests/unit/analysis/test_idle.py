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
        (7, 200, 250, 50, "sync_wait"),
        (7, 300, 400, 100, "host_wait"),
        (8, 260, 270, 10, "kernel_wait"),
    ]


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
        ("host_wait", 100, 1),
        ("kernel_wait", 0, 0),
        ("sync_wait", 50, 1),
        ("other", 0, 0),
    ]
    assert abs(s7["idle_ratio"].sum() - 1.0) < 1e-12
    assert br.filter(pl.col("stream") == 8).filter(pl.col("idle_ns") > 0)["idle_category"].to_list() == ["kernel_wait"]


def test_default_threshold_is_htas_30_us() -> None:
    g = idle.idle_gaps(handbuilt_trace()).sort("stream", "gap_start_ns")
    assert g["idle_category"].to_list() == ["kernel_wait", "host_wait", "kernel_wait"]


def test_idle_breakdown_every_rank() -> None:
    br = idle.idle_breakdown(two_rank_trace(), kernel_wait_ns=30)
    assert br.group_by("node", "rank").agg(pl.col("idle_ns").sum()).sort("rank").rows() == [
        ("n0", 0, 160),
        ("n1", 1, 160),
    ]


def test_gpu_gaps() -> None:
    g = idle.gpu_gaps(handbuilt_trace())
    assert g.select("gap_start_ns", "gap_end_ns", "gap_ns").rows() == [(300, 400, 100)]
    assert idle.gpu_gaps(handbuilt_trace(), min_gap_ns=101).height == 0
    assert idle.gpu_gaps(handbuilt_trace(), per="stream").select("stream", "gap_ns").rows() == [
        (7, 50),
        (7, 100),
        (8, 10),
    ]


def test_empty_trace() -> None:
    t = TraceBuilder().build()
    assert idle.idle_gaps(t).height == 0
    assert idle.idle_breakdown(t).height == 0
    assert idle.gpu_gaps(t).height == 0


def test_device_breakdown_sums_to_the_devices_idle_time() -> None:
    """Stream 7's sync wait [200,250) falls while stream 8 runs: the device only idles [300,400) (host wait)."""
    from ktrace.analysis.utilization import busy_time

    trace = handbuilt_trace()
    br = idle.device_idle_breakdown(trace, kernel_wait_ns=30)
    assert br.select("device", "idle_category", "idle_ns", "gaps").rows() == [
        (0, "host_wait", 100, 1),
        (0, "kernel_wait", 0, 0),
        (0, "sync_wait", 0, 0),
        (0, "other", 0, 0),
    ]
    assert br["idle_ns"].sum() == busy_time(trace, per="device")["idle_ns"].sum() == 100
    # the per-stream breakdown summed over the device counts idle wall time once per idle stream
    assert idle.idle_breakdown(trace, kernel_wait_ns=30)["idle_ns"].sum() == 160


def _disagreeing_streams(extra: bool) -> pl.DataFrame:
    """Stream 1 runs [0,100) and [300,400) (launched at 50); stream 2 runs [150,200) launched at 120, after the
    device went idle; with `extra`, stream 3 also starts at 150, launched at 90, before it went idle."""
    b = TraceBuilder("n", 0)
    kernels = {"start_ns": [0, 300, 150], "end_ns": [100, 400, 200], "stream": [1, 1, 2], "correlation_id": [1, 3, 2]}
    launches = {"start_ns": [0, 50, 120], "correlation_id": [1, 3, 2]}
    if extra:
        kernels = {k: [*v, x] for (k, v), x in zip(kernels.items(), (150, 160, 3, 4), strict=True)}
        launches = {k: [*v, x] for (k, v), x in zip(launches.items(), (90, 4), strict=True)}
    n, m = len(kernels["start_ns"]), len(launches["start_ns"])
    b.add("kernels", {**kernels, "device": [0] * n, "name": ["k"] * n})
    b.add(
        "api",
        {
            **launches,
            "end_ns": [s + 5 for s in launches["start_ns"]],
            "pid": [1] * m,
            "tid": [1] * m,
            "domain": ["runtime"] * m,
            "name": ["cudaLaunchKernel"] * m,
        },
    )
    return idle.device_idle_breakdown(b.build(), kernel_wait_ns=1000).filter(pl.col("idle_ns") > 0)


def test_a_device_gap_takes_the_cause_of_the_record_that_ends_it() -> None:
    # device gaps: [100,150) ended by stream 2's kernel, launched at 120 > 100: host_wait; [200,300) ended by
    # stream 1's, launched at 50: kernel_wait (100 < 1000). Stream 1 alone would call [100,300) kernel_wait.
    assert _disagreeing_streams(extra=False).select("idle_category", "idle_ns").rows() == [
        ("host_wait", 50),
        ("kernel_wait", 100),
    ]
    # two records end the gap at once: the earliest launch (90, before the device went idle) decides
    assert _disagreeing_streams(extra=True).select("idle_category", "idle_ns").rows() == [("kernel_wait", 150)]
