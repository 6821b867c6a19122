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


def add_launches(
    b: TraceBuilder,
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    correlation_id: np.ndarray,
    name: str = "cudaLaunchKernel",
    *,
    pid: int = PID,
    tid: int = TID,
) -> None:
    """Adds runtime API calls `name` (one per start) on thread `pid`/`tid` to `b`."""
    n = len(start_ns)
    b.add(
        "api",
        {
            "start_ns": start_ns,
            "end_ns": end_ns,
            "pid": [pid] * n,
            "tid": [tid] * n,
            "correlation_id": correlation_id,
            "domain": ["runtime"] * n,
            "name": [name] * n,
        },
    )


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
    add_launches(b, t0 + 10_000, t0 + 30_000, corr, "cudaGraphLaunch")
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


VLLM_ALL_REDUCE = (
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, "
    "__nv_bfloat16*, int, int)"
)
"""vLLM's custom all-reduce: a communication kernel by name (no NCCL in it, no collective args)."""


@dataclass(frozen=True)
class DecodeStep:
    """One annotated step `step_ns` long (a range named `step_name`, of `domain`) holding `tokens` decode
    iterations `period_ns` apart, each a 0.5 ms compute kernel and 2 ms after its start a 0.2 ms all-reduce
    (`all_reduce`, with Kineto's collective args when `nccl_args`); `outside` more iterations after the step,
    outside every range."""

    step_ns: int = 87_400_000
    period_ns: int = 3_830_000
    tokens: int = 22
    all_reduce: str = VLLM_ALL_REDUCE
    nccl_args: bool = False
    step_name: str = "ProfilerStep#0"
    domain: str = "profiler_step"
    outside: int = 0
    jitter_ns: int = 0
    """Every other compute kernel starts this much later (its period then varies; the all-reduce's does not)."""


def decode_step(step: DecodeStep = DecodeStep(), *, with_range: bool = True) -> Trace:
    """The trace of `step` (see DecodeStep) on one rank; without its range when not `with_range`."""
    b = TraceBuilder("vllm-node", 0)
    t0 = 1_000_000
    if with_range:
        b.add(
            "ranges",
            {
                "start_ns": [t0],
                "end_ns": [t0 + step.step_ns],
                "pid": [PID],
                "tid": [TID],
                "name": [step.step_name],
                "domain": [step.domain],
                "depth": [0],
                "on_gpu": [False],
            },
        )
    runs = step.tokens + step.outside
    starts = t0 + 100_000 + step.period_ns * np.arange(runs, dtype=np.int64)
    calls = np.concatenate([starts - 50_000, starts - 40_000])  # compute, then all-reduce, launched ahead
    corr = np.arange(1, 2 * runs + 1, dtype=np.int64)
    b.add(
        "ops",
        {
            "start_ns": starts - 60_000,
            "end_ns": starts - 30_000,
            "pid": [PID] * runs,
            "tid": [TID] * runs,
            "name": ["vllm::decode"] * runs,
            "category": ["cpu_op"] * runs,
        },
    )
    add_launches(b, calls, calls + 5_000, corr)
    jitter = step.jitter_ns * (np.arange(runs, dtype=np.int64) % 2)
    kernel_starts = np.concatenate([starts + jitter, starts + 2_000_000])
    b.add(
        "kernels",
        {
            "start_ns": kernel_starts,
            "end_ns": kernel_starts + np.concatenate([np.full(runs, 500_000), np.full(runs, 200_000)]),
            "device": np.zeros(2 * runs, np.int32),
            "stream": np.full(2 * runs, 7, np.int64),
            "correlation_id": corr,
            "name": ["decode_gemm"] * runs + [step.all_reduce] * runs,
            "collective": [None] * runs + (["allreduce" if step.nccl_args else None] * runs),
        },
    )
    return b.build()
