"""breakdown: HTA temporal breakdown and kernel-type breakdown (hand-computed answers)."""

from __future__ import annotations

from reference.handbuilt_trace import handbuilt_trace, two_rank_trace

from ktrace.analysis import breakdown
from ktrace.model import TraceBuilder


def test_kernel_types() -> None:
    a = breakdown.typed_activity(handbuilt_trace()).sort("kind", "start_ns")
    assert a["kernel_type"].to_list() == ["COMPUTATION", "COMPUTATION", "COMMUNICATION", "COMPUTATION", "MEMORY"]


def test_temporal_breakdown_by_hand() -> None:
    tb = breakdown.temporal_breakdown(handbuilt_trace())
    row = tb.row(0, named=True)
    # span 100..450; busy 250 -> idle 100; compute [100,260)+[270,280) = 170; non-compute 80 =
    # communication not under compute [260,270)+[280,300) 30 + memcpy 50.
    assert (row["span_ns"], row["idle_ns"], row["compute_ns"], row["non_compute_ns"]) == (350, 100, 170, 80)
    assert (row["compute_only_ns"], row["compute_comm_overlap_ns"], row["comm_only_ns"], row["memory_only_ns"]) == (
        150,
        20,
        30,
        50,
    )
    assert abs(row["idle_pct"] + row["compute_pct"] + row["non_compute_pct"] - 100) < 1e-9


def test_temporal_breakdown_per_rank() -> None:
    tb = breakdown.temporal_breakdown(two_rank_trace())
    assert tb.select("node", "rank", "idle_ns", "compute_ns").rows() == [("n0", 0, 100, 170), ("n1", 1, 100, 170)]


def test_kernel_type_breakdown_by_hand() -> None:
    kb = breakdown.kernel_type_breakdown(handbuilt_trace(), include_memory=False)
    assert dict(kb.select("kernel_type", "time_ns").rows()) == {
        "COMPUTATION": 150,
        "COMMUNICATION": 30,
        "COMPUTATION overlapping COMMUNICATION": 20,
    }
    kb = breakdown.kernel_type_breakdown(handbuilt_trace())
    assert dict(kb.select("kernel_type", "time_ns").rows())["MEMORY"] == 50
    assert abs(kb["share_pct"].sum() - 100) < 1e-9


def test_empty_trace() -> None:
    t = TraceBuilder().build()
    assert breakdown.temporal_breakdown(t).height == 0
    assert breakdown.kernel_type_breakdown(t).height == 0
