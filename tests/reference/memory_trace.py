"""A hand-built trace with GPU allocations and frees on two threads inside nested ops (the memory timeline's tests).

Times are ns after T = 1000; rank 0, pid 1. Ops (row): tid 1: 0 forward [0,100), 1 aten::empty [10,20), 2 aten::mm
[30,60); tid 2: 3 aten::zeros [25,45). Steps: ProfilerStep#0 [0,50), ProfilerStep#1 [50,125).

    t    tid dev addr  bytes  innermost op (own thread)   allocated after (dev 0, running sum)
    12   1   0   A     +100   aten::empty                 100
    26   2   0   B     +300   aten::zeros (not forward)   400
    35   1   0   C     +500   aten::mm                    900   <- peak
    40   2   0   B     -300   aten::zeros                 600
    50   1   0   C     -500   aten::mm                    100   (end of step 0: 100)
    70   1   0   B     +200   forward                     300   (B reused)
    80   2   1   A    +1000   none                        (device 1: 1000, never freed)
    120  1   0   D      +50   none                        350   (end of step 1: 350)
    130  1   0   E      -64   none                        286   (E was allocated before the trace)

Never freed on device 0: A (100), B's second block (200), D (50). The allocator's totals, where given, are the
running sum plus the 64 bytes of E allocated before the trace.
"""

from __future__ import annotations

from ktrace.model import Trace, TraceBuilder

T = 1000
EVENTS = [  # t, tid, device, address, bytes
    (12, 1, 0, 0xA, 100),
    (26, 2, 0, 0xB, 300),
    (35, 1, 0, 0xC, 500),
    (40, 2, 0, 0xB, -300),
    (50, 1, 0, 0xC, -500),
    (70, 1, 0, 0xB, 200),
    (80, 2, 1, 0xA, 1000),
    (120, 1, 0, 0xD, 50),
    (130, 1, 0, 0xE, -64),
]


def memory_trace(*, totals: bool = True, addresses: bool = True) -> Trace:
    b = TraceBuilder("n0", 0)
    b.add(
        "ops",
        {
            "start_ns": [T + 0, T + 10, T + 30, T + 25],
            "end_ns": [T + 100, T + 20, T + 60, T + 45],
            "pid": [1] * 4,
            "tid": [1, 1, 1, 2],
            "name": ["forward", "aten::empty", "aten::mm", "aten::zeros"],
        },
    )
    b.add(
        "ranges",
        {
            "start_ns": [T, T + 50],
            "end_ns": [T + 50, T + 125],
            "pid": [1, 1],
            "tid": [1, 1],
            "name": ["ProfilerStep#0", "ProfilerStep#1"],
            "domain": ["profiler_step"] * 2,
            "depth": [0, 0],
            "on_gpu": [False, False],
        },
    )
    running = {0: 64, 1: 0}
    total = []
    for _, _, dev, _, n in EVENTS:
        running[dev] += n
        total.append(running[dev])
    b.add(
        "allocations",
        {
            "ts_ns": [T + e[0] for e in EVENTS],
            "device": [e[2] for e in EVENTS],
            "pid": [1] * len(EVENTS),
            "tid": [e[1] for e in EVENTS],
            "address": [e[3] if addresses else None for e in EVENTS],
            "bytes": [e[4] for e in EVENTS],
            "total_allocated": total if totals else [None] * len(EVENTS),
            "total_reserved": [2048] * len(EVENTS) if totals else [None] * len(EVENTS),
        },
    )
    return b.build()
