"""LaunchBoundOperators on a hand-built trace: three operators on one thread, each launching its own kernels.

aten::add_   [0, 1.6 ms)     30 kernels of 2 µs, each launched by a 5 µs call   -> tiny and launch-bound
aten::mm     [2, 10 ms)      30 kernels of 80 µs                                -> not tiny
aten::fill_  [19, 21 ms)     5 kernels of 2 µs                                  -> too few launches to judge
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import TraceMeta

OPERATORS = {
    "start_ns": [0, 2_000_000, 19_000_000],
    "end_ns": [1_600_000, 10_000_000, 21_000_000],
    "pid": [1] * 3,
    "tid": [1] * 3,
    "name": ["aten::add_", "aten::mm", "aten::fill_"],
}
"""The three operators' spans (ns after T0) on the launching thread."""


def _operator_trace(tb: Any, with_ops: bool = True, as_ranges: bool = False) -> Any:
    """The module docstring's trace; `as_ranges`: the operators as CPU NVTX ranges of a ktrace capture instead."""
    us, ms = tb.US, tb.MS

    def add(b: TraceBuilder) -> None:
        t0 = tb.T0
        tb.launches(b, t0 + ms + np.arange(30) * 20 * us, np.full(30, 2 * us), name="add_kernel")
        tb.launches(b, t0 + 3 * ms + np.arange(30) * 200 * us, np.full(30, 80 * us), name="gemm", first_corr=100)
        tb.launches(b, t0 + 20 * ms + np.arange(5) * 20 * us, np.full(5, 2 * us), name="fill_kernel", first_corr=200)
        spans = {**OPERATORS, "start_ns": [t0 + t for t in OPERATORS["start_ns"]]}
        spans["end_ns"] = [t0 + t for t in OPERATORS["end_ns"]]
        if as_ranges:
            b.add("ranges", {**spans, "domain": ["nvtx"] * 3, "depth": [0] * 3, "on_gpu": [False] * 3})
        elif with_ops:
            b.add("ops", spans)

    return tb.build(add, meta=TraceMeta(source="ktrace")) if as_ranges else tb.build(add)


def test_an_operator_of_tiny_launch_bound_kernels_is_named(tb: Any) -> None:
    result = tb.run_rule(_operator_trace(tb), "LaunchBoundOperators")
    assert result.fired and (result.datapoints, result.triggered) == (2, 1)
    (evidence,) = result.findings[0].evidence
    assert (evidence.kind, evidence.name, evidence.value) == ("operator", "aten::add_", 30.0)
    assert result.details["launches"] == 30 and result.details["gpu_ms"] == 30 * 0.002


def test_thresholds_decide(tb: Any) -> None:
    trace = _operator_trace(tb)
    assert not tb.run_rule(trace, "LaunchBoundOperators", "tiny_us=1").fired
    few = tb.run_rule(trace, "LaunchBoundOperators", "min_launches=5")
    assert few.triggered == 2 and [e.name for e in few.findings[0].evidence] == ["aten::add_", "aten::fill_"]


def test_without_operators_the_rule_says_why(tb: Any) -> None:
    result = tb.run_rule(_operator_trace(tb, with_ops=False), "LaunchBoundOperators")
    assert not result.fired and result.skipped and "operators" in result.skipped


def test_nvtx_ranges_stand_for_operators_where_there_are_none(tb: Any) -> None:
    """ktrace's own captures and nsys exports: the CPU NVTX ranges are judged, as the operator view shows them."""
    result = tb.run_rule(_operator_trace(tb, as_ranges=True), "LaunchBoundOperators")
    assert result.fired and (result.datapoints, result.triggered) == (2, 1)
    (evidence,) = result.findings[0].evidence
    assert (evidence.kind, evidence.name, evidence.value) == ("operator", "aten::add_", 30.0)
    assert "1 of 2 NVTX ranges with >= 20 kernel launches" in result.findings[0].message
