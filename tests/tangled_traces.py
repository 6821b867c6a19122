"""A small trace that tangles what the windowed exporters must get right (tests/unit/exporters' streaming tests):
CPU ranges overlapping without nesting on two threads, a run of ties in start, API calls sharing a correlation id
(the first launches), kernels starting before their launch call, some ids launching two kernels, overlap on a
stream, and the choice of one or two GPUs and streams."""

from __future__ import annotations

import numpy as np

from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace, TraceMeta


def tangled_trace(
    *,
    seed: int,
    ranges: int,
    range_names: int,
    ties: slice,
    calls: int,
    shared: int,
    kernel_ns: int,
    two_gpus: bool,
    two_streams: bool,
) -> Trace:
    """`ranges` ranges on tids 1 and 2 (starts `ties` equal), `calls` launch calls two to a correlation id, one
    kernel per id plus a second one (90 ns) for the first `shared` ids; kernels last `kernel_ns`, on GPUs 0 and 1
    alternately when `two_gpus`, on streams 7 and 8 alternately when `two_streams`."""
    b = TraceBuilder("n", 0, TraceMeta(source="synthetic", hosts=("n",)))
    rng = np.random.default_rng(seed)
    start = np.sort(rng.integers(0, 20_000, ranges)).astype(np.int64)
    start[ties] = start[ties.start]
    b.add(
        "ranges",
        {
            "start_ns": start.tolist(),
            "end_ns": (start + rng.integers(0, 900, ranges)).tolist(),
            "pid": [1] * ranges,
            "tid": [1 + (k % 2) for k in range(ranges)],
            "name": [f"r{k % range_names}" for k in range(ranges)],
            "domain": ["nvtx"] * ranges,
            "depth": [0] * ranges,
            "on_gpu": [False] * ranges,
        },
    )
    api_start = np.sort(rng.integers(0, 20_000, calls)).astype(np.int64)
    b.add(
        "api",
        {
            "start_ns": api_start.tolist(),
            "end_ns": (api_start + 50).tolist(),
            "pid": [1] * calls,
            "tid": [1] * calls,
            "correlation_id": [k // 2 for k in range(calls)],  # two calls share each id: the first launches
            "domain": ["runtime"] * calls,
            "name": ["cudaLaunchKernel"] * calls,
        },
    )
    k_start = api_start[::2] + rng.integers(-100, 400, calls // 2)  # some kernels start before their launch
    kernels = calls // 2 + shared
    b.add(
        "kernels",
        {
            "start_ns": np.concatenate([k_start, k_start[:shared]]).tolist(),  # ids launching two kernels each
            "end_ns": np.concatenate([k_start + kernel_ns, k_start[:shared] + 90]).tolist(),
            "device": [k % 2 if two_gpus else 0 for k in range(kernels)],
            "stream": [7 + (k % 2 if two_streams else 0) for k in range(kernels)],
            "correlation_id": list(range(calls // 2)) + list(range(shared)),
            "name": [f"k{k % 3}" for k in range(kernels)],
        },
    )
    return b.build()


def launch_calls(starts: list[int], ids: list[int]) -> Trace:
    """One rank's launch calls only: call k starts at starts[k] with correlation id ids[k] (Launches' input)."""
    b = TraceBuilder("n", 0, TraceMeta(source="synthetic", hosts=("n",)))
    n = len(ids)
    b.add(
        "api",
        {
            "start_ns": starts,
            "end_ns": [s + 1 for s in starts],
            "pid": [1] * n,
            "tid": [1] * n,
            "correlation_id": ids,
            "domain": ["runtime"] * n,
            "name": ["cudaLaunchKernel"] * n,
        },
    )
    return b.build()
