"""Clock pairs: CLOCK_REALTIME and the CUPTI clock read together at the start and end of a capture.

CUPTI puts GPU timestamps on CLOCK_REALTIME on Linux (CLOCK_MONOTONIC_RAW on WSL), converting GPU time with a
linear fit; a pair at each end of the capture shows how far, and how fast, the GPU records' clock runs from
the host's (shared/reference/cupti.md §4). They go into the rank's partition.json and meta.json's
capture.clock_pairs; the clock estimator falls back on them when a multi-host trace has no collectives to match.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ktrace.model.clock import ClockPair

READS = 16
"""Reads per pair: the one that took least time between its two CLOCK_REALTIME reads is kept."""


def read_clock_pair(gpu_clock: Callable[[], int], reads: int = READS) -> ClockPair:
    """The tightest of `reads` (CLOCK_REALTIME, gpu_clock(), CLOCK_MONOTONIC) reads: realtime is the midpoint of
    the two realtime reads around gpu_clock(), error_ns half their distance."""
    best: tuple[int, int, int, int] | None = None
    for _ in range(max(1, reads)):
        before = time.time_ns()
        gpu = int(gpu_clock())
        after = time.time_ns()
        monotonic = time.monotonic_ns()
        if best is None or after - before < best[0]:
            best = (after - before, (before + after) // 2, gpu, monotonic)
    assert best is not None
    spread, realtime, gpu, monotonic = best
    return ClockPair(realtime_ns=realtime, gpu_ns=gpu, monotonic_ns=monotonic, error_ns=spread // 2)


MAX_GPU_CLOCK_OFFSET_NS = 1_000_000
"""A CUPTI clock further than this from CLOCK_REALTIME is worth a note (WSL, or a timestamp callback)."""


def clock_note(pairs: list[ClockPair], where: str) -> str | None:
    """A line for the user when the GPU records of `where` are not on its CLOCK_REALTIME, else None."""
    off = [p.gpu_ns - p.realtime_ns for p in pairs]
    worst = max(off, key=abs, default=0)
    if abs(worst) <= MAX_GPU_CLOCK_OFFSET_NS:
        return None
    return (
        f"{where}: the CUPTI clock is {worst / 1e6:+.3f} ms off CLOCK_REALTIME (WSL, or a CUPTI timestamp "
        "callback): its GPU records are not on the host's clock"
    )
