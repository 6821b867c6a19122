"""Trace diff: per-kernel status and per-step deltas."""

from __future__ import annotations

import pytest

from ktrace.analysis.diff import trace_diff
from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace


def _trace(kernels: dict[str, int], step_len: int) -> Trace:
    b = TraceBuilder("n", 0)
    names = list(kernels)
    b.add(
        "kernels",
        {"start_ns": [0] * len(names), "end_ns": list(kernels.values()), "device": [0] * len(names), "name": names},
    )
    b.add(
        "ranges",
        {
            "start_ns": [0, 1000],
            "end_ns": [step_len, 1000 + step_len],
            "pid": [1, 1],
            "tid": [1, 1],
            "name": ["ProfilerStep#0", "ProfilerStep#1"],
            "domain": ["ktrace"] * 2,
            "depth": [0, 0],
            "on_gpu": [False, False],
        },
    )
    return b.build()


def test_kernel_status_and_step_delta() -> None:
    a = _trace({"same": 100, "slower": 100, "gone": 50}, 500)
    b = _trace({"same": 102, "slower": 200, "new": 10}, 600)
    d = trace_diff(a, b)
    status = dict(zip(d.kernels["name"], d.kernels["status"], strict=True))
    assert status == {"same": "unchanged", "slower": "increased", "gone": "removed", "new": "added"}
    assert d.kernels["name"][0] == "slower"
    slower = d.kernels.row(0, named=True)
    assert slower["delta_ns"] == 100 and slower["delta_pct"] == pytest.approx(100.0)
    assert d.steps["delta_ns"].to_list() == [100.0, 100.0]
    assert (d.kernel_time_a_ns, d.kernel_time_b_ns) == (250, 312)
    assert d.step_mean_b_ns == pytest.approx(600.0)
