"""Generated traces for the critical path and step inference (issue 26): a CUDA-graph training loop whose GPU work
runs past each step's CPU range, and one long ProfilerStep holding a regular NCCL kernel and a regular compute
kernel.

Built with TraceBuilder (no import), so a property test can draw their parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ktrace.model import Trace, TraceBuilder

PID, TID = 100, 101
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


@dataclass(frozen=True)
class GraphLoop:
    """A loop of `steps` contiguous ProfilerSteps of `step_ns`; each launches one CUDA graph (cudaGraphLaunch at
    10 µs into the step, one correlation id for all its kernels) of `nodes` kernels of `node_ns`, `gap_ns` apart
    on stream 7, the first starting `graph_start_ns` into the step (a graph longer than the rest of the step runs
    into the next one), and an operator `op_ns` long that holds the launch."""

    steps: int = 8
    nodes: int = 50
    node_ns: int = 12_000
    gap_ns: int = 1_000
    step_ns: int = 1_000_000
    graph_start_ns: int = 500_000
    op_ns: int = 40_000


def graph_loop(loop: GraphLoop = GraphLoop()) -> Trace:
    """The trace of `loop` (see GraphLoop); step i starts at i * step_ns + 1 ms."""
    b = TraceBuilder("gpu-node", 0)
    t0 = 1_000_000 + loop.step_ns * np.arange(loop.steps, dtype=np.int64)
    b.add(
        "ranges",
        {
            "start_ns": t0,
            "end_ns": t0 + loop.step_ns,
            "pid": [PID] * loop.steps,
            "tid": [TID] * loop.steps,
            "name": [f"ProfilerStep#{i}" for i in range(loop.steps)],
            "domain": ["profiler_step"] * loop.steps,
            "depth": [0] * loop.steps,
            "on_gpu": [False] * loop.steps,
        },
    )
    b.add(
        "ops",
        {
            "start_ns": t0 + 5_000,
            "end_ns": t0 + 5_000 + loop.op_ns,
            "pid": [PID] * loop.steps,
            "tid": [TID] * loop.steps,
            "name": ["aten::graph_replay"] * loop.steps,
            "category": ["cpu_op"] * loop.steps,
        },
    )
    corr = np.arange(1, loop.steps + 1, dtype=np.int64)
    b.add(
        "api",
        {
            "start_ns": t0 + 10_000,
            "end_ns": t0 + 30_000,
            "pid": [PID] * loop.steps,
            "tid": [TID] * loop.steps,
            "correlation_id": corr,
            "domain": ["runtime"] * loop.steps,
            "name": ["cudaGraphLaunch"] * loop.steps,
        },
    )
    node = np.tile(np.arange(loop.nodes, dtype=np.int64), loop.steps)
    start = np.repeat(t0 + loop.graph_start_ns, loop.nodes) + node * (loop.node_ns + loop.gap_ns)
    n = start.size
    b.add(
        "kernels",
        {
            "start_ns": start,
            "end_ns": start + loop.node_ns,
            "device": np.zeros(n, np.int32),
            "stream": np.full(n, 7, np.int64),
            "correlation_id": np.repeat(corr, loop.nodes),
            "name": [f"graph_node_{j % 5}" for j in node.tolist()],
            "graph_id": np.ones(n, np.int64),
            "graph_node_id": node,
        },
    )
    return b.build()
