"""Range nesting shared by the importers: depth of each annotation among the ranges of its thread."""

from __future__ import annotations

import numpy as np

__all__ = ["nesting_depth"]


def nesting_depth(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Depth of each range among the ranges of its thread (0 = outermost).

    For properly nested ranges sorted by (start, -end), depth = how many ranges of the thread came
    before it minus how many of those had already ended. One searchsorted per thread, no per-row loop.
    """
    n = start.size
    depth = np.zeros(n, np.int32)
    if not n:
        return depth
    order = np.lexsort((-end, start, thread))
    sorted_thread = thread[order]
    bounds = np.flatnonzero(np.diff(sorted_thread)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, n], strict=True):
        idx = order[lo:hi]
        s = start[idx]
        ended = np.searchsorted(np.sort(end[idx]), s, side="right")
        depth[idx] = np.maximum(np.arange(hi - lo) - ended, 0)
    return depth
