"""A tiny hand-built trace whose analysis results are worked out by hand in the interval tests.

Timeline (ns), node "n0", rank 0, device 0, thread (pid 1, tid 1):

    stream 7:  k0 gemm [100,200)   k1 ncclKernel_AllReduce [250,300)   memcpy HtoD [400,450)
    stream 8:  k2 gemm [150,260)   k3 gemm [270,280)
    api:       k0 [10,20)  k1 [30,40)  k3 [45,48)  k2 [50,60)  cudaStreamSynchronize [210,240)  memcpy [380,390)
    ranges:    ProfilerStep#5 [0,100)  ProfilerStep#6 [100,500)  forward [5,35) depth 1  inner [25,35) depth 2
"""

from __future__ import annotations

from ktrace.model import Trace, TraceBuilder


def handbuilt(node: str = "n0", rank: int = 0, shift: int = 0) -> TraceBuilder:
    """The builder of the trace above (times shifted by `shift`), so tests can add more rows."""
    b = TraceBuilder(node, rank)
    s = shift
    b.add(
        "kernels",
        {
            "start_ns": [100 + s, 250 + s, 150 + s, 270 + s],
            "end_ns": [200 + s, 300 + s, 260 + s, 280 + s],
            "device": [0, 0, 0, 0],
            "stream": [7, 7, 8, 8],
            "correlation_id": [1, 2, 3, 5],
            "name": ["gemm", "ncclKernel_AllReduce_RING", "gemm", "gemm"],
        },
    )
    b.add(
        "memory",
        {
            "op": ["memcpy"],
            "start_ns": [400 + s],
            "end_ns": [450 + s],
            "device": [0],
            "stream": [7],
            "correlation_id": [4],
            "bytes": [1024],
            "copy_kind": ["HtoD"],
            "src_kind": ["pinned"],
            "dst_kind": ["device"],
        },
    )
    b.add(
        "api",
        {
            "start_ns": [10 + s, 30 + s, 45 + s, 50 + s, 210 + s, 380 + s],
            "end_ns": [20 + s, 40 + s, 48 + s, 60 + s, 240 + s, 390 + s],
            "pid": [1] * 6,
            "tid": [1] * 6,
            "correlation_id": [1, 2, 5, 3, 6, 4],
            "domain": ["runtime"] * 6,
            "name": ["cudaLaunchKernel"] * 4 + ["cudaStreamSynchronize", "cudaMemcpyAsync"],
        },
    )
    b.add(
        "ranges",
        {
            "start_ns": [0 + s, 100 + s, 5 + s, 25 + s],
            "end_ns": [100 + s, 500 + s, 35 + s, 35 + s],
            "pid": [1] * 4,
            "tid": [1] * 4,
            "name": ["ProfilerStep#5", "ProfilerStep#6", "forward", "inner"],
            "domain": ["profiler_step", "profiler_step", "nvtx", "nvtx"],
            "depth": [0, 0, 1, 2],
            "on_gpu": [False] * 4,
        },
    )
    return b


def handbuilt_trace() -> Trace:
    """The trace above."""
    return handbuilt().build()


def two_rank_trace() -> Trace:
    """The trace above on rank 0, and again shifted by 1000 ns on rank 1 of node "n1"."""
    b = handbuilt()
    other = handbuilt("n1", 1, shift=1000).build()
    for name in ("kernels", "memory", "api", "ranges"):
        b.add(name, other.to_arrow(name))
    return b.build()
