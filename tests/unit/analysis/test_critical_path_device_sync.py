"""A cudaDeviceSynchronize that nsys exports as an event sync naming no event still ties the GPU to the CPU.

On the cloverleaf A100 export every cudaDeviceSynchronize has a CUPTI sync record of type EVENT_SYNCHRONIZE
with no event: the critical path of a step with 28 ms of kernels, each waited for, was 2.51 ms of CPU and one
kernel ("2.51 ms in a 32.46 ms window"), since an event sync with no event had no record to wait for.
"""

from __future__ import annotations

import polars as pl
import pytest
from real_traces import fixture_path

import ktrace
from ktrace.analysis.critical_path import critical_path
from ktrace.model import Trace, TraceBuilder

KERNEL_NS = (100_000, 150_000, 80_000, 200_000, 120_000, 90_000)
"""Irregular, so no periodic steps: the path is the whole trace's."""
KERNELS, CALL_NS = len(KERNEL_NS), 2_000


def _launch_and_wait(sync_call: str, sync_type: str) -> Trace:
    """For each of KERNEL_NS: launch a kernel that long, then `sync_call` until it ends (its sync record of
    `sync_type`, naming no event)."""
    b = TraceBuilder("n0", 0)
    starts, calls, names, corr = [], [], [], []
    t = 0
    for i, ns in enumerate(KERNEL_NS):
        calls += [(t, t + CALL_NS), (t + CALL_NS, t + 2 * CALL_NS + ns)]
        names += ["cudaLaunchKernel", sync_call]
        corr += [2 * i + 1, 2 * i + 2]
        starts.append(t + CALL_NS + 500)
        t += 3 * CALL_NS + ns
    b.add(
        "api",
        {
            "start_ns": [c[0] for c in calls],
            "end_ns": [c[1] for c in calls],
            "pid": [1] * len(calls),
            "tid": [1] * len(calls),
            "correlation_id": corr,
            "domain": ["runtime"] * len(calls),
            "name": names,
        },
    )
    b.add(
        "kernels",
        {
            "start_ns": starts,
            "end_ns": [s + ns for s, ns in zip(starts, KERNEL_NS, strict=True)],
            "device": [0] * KERNELS,
            "stream": [7] * KERNELS,
            "correlation_id": corr[::2],
            "name": ["k"] * KERNELS,
        },
    )
    b.add(
        "syncs",
        {
            "start_ns": [c[0] for c in calls[1::2]],
            "end_ns": [c[1] for c in calls[1::2]],
            "device": [0] * KERNELS,
            "stream": [None] * KERNELS,
            "sync_type": [sync_type] * KERNELS,
            "correlation_id": corr[1::2],
        },
    )
    return b.build()


def _gpu_ns(trace: Trace) -> int:
    cp = critical_path(trace)
    assert cp is not None
    return int(cp.composition.filter(pl.col("category") == "gpu_compute")["ns"].item())


@pytest.mark.parametrize("sync_type", ["event", "context"])
def test_every_waited_kernel_is_on_the_path(sync_type: str) -> None:
    assert _gpu_ns(_launch_and_wait("cudaDeviceSynchronize", sync_type)) == sum(KERNEL_NS)


def test_an_event_sync_of_another_call_naming_no_event_waits_for_nothing() -> None:
    assert _gpu_ns(_launch_and_wait("cudaEventSynchronize", "event")) == max(KERNEL_NS)  # one kernel, no chain


def test_cloverleaf_step_path_runs_through_its_kernels() -> None:
    trace = ktrace.open(fixture_path("cloverleaf"))
    cp = critical_path(trace)
    assert cp is not None
    gpu = cp.composition.filter(pl.col("category") == "gpu_compute")["ns"].item()
    assert gpu > 0.8 * (cp.end_ns - cp.start_ns)  # was 1.95 ms of 32.46 ms
    assert cp.length_ns <= cp.end_ns - cp.start_ns
