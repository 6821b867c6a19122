"""A critical path agrees with itself (issue 26, item 2): its length fits the time it was chosen from, and what it
lists adds up to its composition.

On a CUDA-graph trace the summary said "216.81 ms in a 216.12 ms window" (a step's graph runs past the step's CPU
range, and the path runs through it), and listed one kernel at 85.98 ms while GPU compute on the whole path was
34.46 ms (the gaps after a kernel were counted as the kernel's time). step_traces.graph_loop writes such a loop.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from step_traces import GraphLoop, add_launches, graph_loop

from ktrace.analysis.critical_path import CriticalPath, critical_path
from ktrace.analysis.critical_path_summary import critical_path_notes
from ktrace.analysis.steps import detect_steps
from ktrace.model import Trace, TraceBuilder
from ktrace.presentation.summary_critical_path import headline

GPU_BOUND = GraphLoop(nodes=77, graph_start_ns=100_000)
"""Each step's graph runs 1.0 ms, starting 100 µs into the 1 ms step: the GPU is never idle, and the path through
a step's graph ends 100 µs into the next step."""


def _items_within_composition(cp: CriticalPath) -> None:
    """Each family of items holds at most its composition categories' time."""
    ns = dict(zip(cp.composition["category"], cp.composition["ns"], strict=True))
    per_kind = dict(cp.items.group_by("kind").agg(pl.col("ns").sum()).iter_rows())
    assert per_kind.get("kernel", 0) <= ns["gpu_compute"] + ns["communication"]
    assert per_kind.get("memcpy", 0) + per_kind.get("memset", 0) <= ns["memory"]
    assert per_kind.get("operator", 0) + per_kind.get("runtime", 0) <= ns["cpu"]


def _adds_up(cp: CriticalPath) -> None:
    assert int(cp.path_segments["weight_ns"].sum()) == cp.length_ns
    assert int(cp.composition["ns"].sum()) == cp.length_ns
    if cp.backward_edges() == 0:  # a record that starts before its launch call may count time twice (noted)
        assert cp.length_ns <= cp.end_ns - cp.start_ns
    _items_within_composition(cp)


def test_a_path_through_a_graph_that_runs_past_its_step_fits_its_window() -> None:
    cp = critical_path(graph_loop(GPU_BOUND))
    assert cp is not None and cp.scope == "step"
    graph_ns = GPU_BOUND.nodes * (GPU_BOUND.node_ns + GPU_BOUND.gap_ns) - GPU_BOUND.gap_ns
    assert cp.length_ns > GPU_BOUND.step_ns  # the CPU before the launch and the whole graph
    _adds_up(cp)
    assert cp.beyond_window_ns == GPU_BOUND.graph_start_ns + graph_ns - GPU_BOUND.step_ns
    assert cp.end_ns - cp.start_ns == GPU_BOUND.step_ns + cp.beyond_window_ns
    assert "100.00 µs of GPU work launched in it that ran past it" in headline(cp)


def test_a_kernel_on_the_path_holds_its_own_time_not_the_gap_after_it() -> None:
    loop = GraphLoop(nodes=10, node_ns=2_000, gap_ns=8_000)
    cp = critical_path(graph_loop(loop))
    assert cp is not None
    kernels = cp.items.filter(pl.col("kind") == "kernel")
    gpu = cp.composition.filter(pl.col("category") == "gpu_compute")["ns"].item()
    assert gpu == loop.nodes * loop.node_ns
    assert int(kernels["ns"].sum()) == gpu  # each of graph_node_0..4 runs twice for 2 µs: 4 µs, not 4 + 8 + 8
    assert kernels["ns"].to_list() == [2 * loop.node_ns] * 5


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.integers(1, 4),
    nodes=st.integers(1, 60),
    node_ns=st.integers(1_000, 20_000),
    gap_ns=st.integers(0, 20_000),
    start=st.integers(0, 900_000),
    op_ns=st.integers(1_000, 900_000),
)
@example(steps=1, nodes=56, node_ns=17_801, gap_ns=39, start=0, op_ns=1_000)  # graph before its launch: 1 ns over
def test_graph_loops_add_up(steps: int, nodes: int, node_ns: int, gap_ns: int, start: int, op_ns: int) -> None:
    graph_ns = nodes * (node_ns + gap_ns)
    step_ns = max(1_000_000, graph_ns)  # a graph never overlaps the next step's on the stream
    loop = GraphLoop(steps, nodes, node_ns, gap_ns, step_ns, start, op_ns)
    cp = critical_path(graph_loop(loop))
    assert cp is not None
    _adds_up(cp)


def _enqueued_loop(iterations: int) -> Trace:
    """A CPU that launches a whole loop first (2 kernels of 1 ms per iteration, launched 5 µs apart), then the GPU
    runs it: each GPU-time step between two runs of `first` holds no CPU event."""
    b = TraceBuilder("n0", 0)
    n = 2 * iterations
    calls = 5_000 * np.arange(n, dtype=np.int64)
    starts = 1_000_000 + 1_000_000 * np.arange(n, dtype=np.int64)
    add_launches(b, calls, calls + 4_000, np.arange(n), pid=1, tid=1)
    b.add(
        "kernels",
        {
            "start_ns": starts,
            "end_ns": starts + 990_000,
            "device": [0] * n,
            "stream": [7] * n,
            "correlation_id": np.arange(n),
            "name": ["first", "second"] * iterations,
        },
    )
    return b.build()


def test_an_inferred_step_is_analysed_from_the_calls_that_launched_it() -> None:
    trace = _enqueued_loop(12)
    assert set(detect_steps(trace)["source"]) == {"periodic"}
    cp = critical_path(trace)
    assert cp is not None and cp.scope == "step"  # was None: no CPU event in the step's GPU time
    _adds_up(cp)
    gpu = cp.composition.filter(pl.col("category") == "gpu_compute")["ns"].item()
    assert gpu == 2 * 990_000  # the step's two kernels


def test_a_path_longer_than_its_window_has_a_backward_edge_and_a_note() -> None:
    """A kernel that starts (100 ns) before the call that launched it (400 ns, in an operator from 0): clock skew.
    The operator's 400 ns before the call and the kernel's 900 ns both count: 1.3 µs in a 1 µs window."""
    b = TraceBuilder("n0", 0)
    b.add("ops", {"start_ns": [0], "end_ns": [500], "pid": [1], "tid": [1], "name": ["aten::op"]})
    api = {"start_ns": [400], "end_ns": [450], "pid": [1], "tid": [1], "correlation_id": [1]}
    b.add("api", api | {"domain": ["runtime"], "name": ["cudaLaunchKernel"]})
    b.add(
        "kernels",
        {"start_ns": [100], "end_ns": [1000], "device": [0], "stream": [7], "correlation_id": [1], "name": ["k"]},
    )
    cp = critical_path(b.build())
    assert cp is not None and (cp.length_ns, cp.end_ns - cp.start_ns) == (1300, 1000)
    assert cp.backward_edges() == 1
    assert any("1 edges of the path run backwards in time" in n for n in critical_path_notes(cp))
    assert not any("backwards" in n for n in critical_path_notes(critical_path(graph_loop())))
