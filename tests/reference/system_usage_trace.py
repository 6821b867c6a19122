"""A hand-built trace for the system usage read from events (analysis.system_usage), every figure worked out by hand.

Times in ms after T. The GPU span is 4 ms, so the bins are 1 ms wide (auto_bin_ns: span / 100, at least 1 ms).

GPU 0 (bins from its first record, T+0.3): K1 [0.3, 1.3) K2 [1.3, 1.8) K3 [3.3, 4.3)
    busy per bin [0.3,1.3) 100 %, [1.3,2.3) 50 %, [2.3,3.3) 0 %, [3.3,4.3) 100 %
    -> 4 bins, min 0, p50 75, p95 100 (linear), max 100, mean 62.5

CPU (bins from the first operator or launch of any thread, T-1):
    tid 1 "main": ops A [-1, -0.5) B [0, 1); launches L1 [0.2, 0.21) (K1, inside B), L2 [1.0, 1.25) (K2),
        L3 [2.0, 2.01) (K3)
        operators 2, operator time 1.5 ms; launches 3, launch time 0.27 ms; busy (union) 1.76 ms; span 3.01 ms
        whole bins inside [-1, 2.01): [-1,0) 50 %, [0,1) 100 %, [1,2) 25 % -> p50 50, p95 95, p99 99, max 100
    tid 2 (no name): op C [0, 0.5): operators 1, busy 0.5 ms, no whole bin (null percentiles)

Allocator, GPU 0: +100 at 0 (100), +300 at 1.5 (400), -300 at 2.2 (100), +50 at 3.5 (150). Sampled at each 1 ms
boundary after the first event: 1 -> 100, 2 -> 400, 3 -> 100: 3 samples, p50 100, p95 370, p99 394; peak 400.

Counters: one cpu.util sample (every other metric of schema.COUNTER_METRICS is missing).
"""

from __future__ import annotations

from ktrace.model import Trace, TraceBuilder
from ktrace.model.trace import TraceMeta

T = 1_700_000_000_000_000_000
MS = 1_000_000


def at(ms: float) -> int:
    """T + `ms` milliseconds, in ns."""
    return T + round(ms * MS)


def _add_spans(b: TraceBuilder, table: str, spans: list[tuple[float, float]], **columns: list[object]) -> None:
    """Rows of `table` spanning (start, end) ms after T, with the other columns as given."""
    b.add(table, {"start_ns": [at(s) for s, _ in spans], "end_ns": [at(e) for _, e in spans], **columns})


def system_usage_trace(*, counters: bool = True, source: str = "kineto") -> Trace:
    b = TraceBuilder("n0", 0, TraceMeta(source=source))
    kernels = [(0.3, 1.3), (1.3, 1.8), (3.3, 4.3)]
    _add_spans(b, "kernels", kernels, device=[0] * 3, stream=[7] * 3, correlation_id=[1, 2, 3], name=["k1", "k2", "k3"])
    launches = [(0.2, 0.21), (1.0, 1.25), (2.0, 2.01)]  # of kernels 1, 2, 3
    launch_columns = {"domain": ["runtime"] * 3, "name": ["cudaLaunchKernel"] * 3}
    _add_spans(b, "api", launches, pid=[1] * 3, tid=[1] * 3, correlation_id=[1, 2, 3], **launch_columns)
    ops = [(-1.0, -0.5), (0.0, 1.0), (0.0, 0.5)]
    _add_spans(b, "ops", ops, pid=[1] * 3, tid=[1, 1, 2], name=["aten::a", "aten::b", "aten::c"])
    b.add("threads", {"pid": [1], "tid": [1], "name": ["main"]})
    events = [(0.0, 100, 100), (1.5, 300, 400), (2.2, -300, 100), (3.5, 50, 150)]
    b.add(
        "allocations",
        {
            "ts_ns": [at(t) for t, _, _ in events],
            "device": [0] * 4,
            "pid": [1] * 4,
            "tid": [1] * 4,
            "address": [0xA, 0xB, 0xB, 0xC],
            "bytes": [n for _, n, _ in events],
            "total_allocated": [total for _, _, total in events],
            "total_reserved": [None] * 4,
        },
    )
    if counters:
        b.add("counters", {"ts_ns": [at(0)], "metric": ["cpu.util"], "instance": [-1], "value": [40.0]}, rank=-1)
    return b.build()
