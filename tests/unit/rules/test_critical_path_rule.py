"""CPUBoundCriticalPath: fires when the CPU part of the critical path passes its threshold."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from ktrace.importers import load
from ktrace.model import Trace, TraceBuilder

MS = 1_000_000
FIX = Path(__file__).resolve().parents[3] / "fixtures" / "traces"


def _trace(op_ms: float, kernel_ms: float, *, sync: bool = True) -> Trace:
    """An operator [0, op_ms) launching one kernel at 1 ms that runs kernel_ms, then cudaStreamSynchronize
    waiting for it (with its sync record unless sync=False)."""
    b = TraceBuilder("n0", 0)
    end_k = int(1.1 * MS + kernel_ms * MS)
    b.add("ops", {"start_ns": [0], "end_ns": [int(op_ms * MS)], "pid": [1], "tid": [1], "name": ["aten::op"]})
    b.add(
        "api",
        {
            "start_ns": [1 * MS, int(op_ms * MS) + 1],
            "end_ns": [int(1.05 * MS), max(end_k, int(op_ms * MS) + 2) + 1],
            "pid": [1, 1],
            "tid": [1, 1],
            "correlation_id": [1, 2],
            "domain": ["runtime"] * 2,
            "name": ["cudaLaunchKernel", "cudaStreamSynchronize"],
        },
    )
    b.add(
        "kernels",
        {
            "start_ns": [int(1.1 * MS)],
            "end_ns": [end_k],
            "device": [0],
            "stream": [7],
            "correlation_id": [1],
            "name": ["k"],
        },
    )
    if sync:
        b.add(
            "syncs",
            {
                "start_ns": [int(op_ms * MS) + 1],
                "end_ns": [max(end_k, int(op_ms * MS) + 2)],
                "device": [0],
                "stream": [7],
                "sync_type": ["stream"],
                "correlation_id": [2],
            },
        )
    return b.build()


def test_fires_on_a_cpu_bound_path(tb: SimpleNamespace) -> None:
    result = tb.run_rule(_trace(op_ms=10, kernel_ms=1), "CPUBoundCriticalPath")
    assert result.fired
    assert result.details["cpu_share_pct"] > 99
    assert result.findings[0].evidence[0].name == "aten::op"


def test_quiet_when_the_gpu_dominates(tb: SimpleNamespace) -> None:
    """The sync waits for a 20 ms kernel: the path runs through it (launch + kernel), CPU share ~5 %."""
    result = tb.run_rule(_trace(op_ms=2, kernel_ms=20), "CPUBoundCriticalPath")
    assert not result.fired and result.skipped is None
    assert result.details["cpu_share_pct"] < 10


def test_threshold_is_configurable(tb: SimpleNamespace) -> None:
    trace = _trace(op_ms=2, kernel_ms=20)
    assert tb.run_rule(trace, "CPUBoundCriticalPath", "threshold_pct=1").fired


def test_skipped_without_sync_records(tb: SimpleNamespace) -> None:
    result = tb.run_rule(_trace(op_ms=10, kernel_ms=1, sync=False), "CPUBoundCriticalPath")
    assert result.skipped is not None and "synchronization" in result.skipped


def test_real_trace_simple_add(tb: SimpleNamespace) -> None:
    """HTA's simple_add (whole trace: no ProfilerStep): 99.9 % of the path is CPU (cudaMalloc and operators)."""
    result = tb.run_rule(load(FIX / "hta-critical-path" / "simple_add_trace.json.gz"), "CPUBoundCriticalPath")
    assert result.fired and result.details["cpu_share_pct"] > 99
