"""LaunchBoundOperators on a hand-built trace: three operators on one thread, each launching its own kernels.

aten::add_   [0, 1.6 ms)     30 kernels of 2 µs, each launched by a 5 µs call   -> tiny and launch-bound
aten::mm     [2, 10 ms)      30 kernels of 80 µs                                -> not tiny
aten::fill_  [19, 21 ms)     5 kernels of 2 µs                                  -> too few launches to judge
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ktrace.model.builder import TraceBuilder


def _operator_trace(tb: Any, with_ops: bool = True) -> Any:
    us, ms = tb.US, tb.MS

    def add(b: TraceBuilder) -> None:
        t0 = tb.T0
        tb.launches(b, t0 + ms + np.arange(30) * 20 * us, np.full(30, 2 * us), name="add_kernel")
        tb.launches(b, t0 + 3 * ms + np.arange(30) * 200 * us, np.full(30, 80 * us), name="gemm", first_corr=100)
        tb.launches(b, t0 + 20 * ms + np.arange(5) * 20 * us, np.full(5, 2 * us), name="fill_kernel", first_corr=200)
        if with_ops:
            b.add(
                "ops",
                {
                    "start_ns": [t0, t0 + 2 * ms, t0 + 19 * ms],
                    "end_ns": [t0 + 1600 * us, t0 + 10 * ms, t0 + 21 * ms],
                    "pid": [1] * 3,
                    "tid": [1] * 3,
                    "name": ["aten::add_", "aten::mm", "aten::fill_"],
                },
            )

    return tb.build(add)


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
