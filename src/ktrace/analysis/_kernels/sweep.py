"""numba sweep kernel: time spent with each subset of interval types active, per group, in one pass.

Public typed wrapper:

- ``type_coverage(bounds, start, end, type_idx, n_types) -> int64[n_groups, 2**n_types]``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit

I64 = npt.NDArray[np.int64]


@jit
def _merge_types(
    start: I64, end: I64, type_idx: I64, n_types: int, ms: I64, me: I64, counts: I64
) -> None:  # pragma: no cover - numba
    """Merge one group's start-sorted intervals per type into ms[t, :counts[t]], me[t, :counts[t]]."""
    counts[:] = 0
    for i in range(start.size):
        t = type_idx[i]
        if t < 0:
            continue
        k = counts[t]
        if k > 0 and start[i] <= me[t, k - 1]:
            if end[i] > me[t, k - 1]:
                me[t, k - 1] = end[i]
        else:
            ms[t, k] = start[i]
            me[t, k] = end[i]
            counts[t] = k + 1


@jit
def _sweep(ms: I64, me: I64, counts: I64, n_types: int, out: I64) -> None:  # pragma: no cover - numba
    """Sweep the per-type disjoint intervals: add each elapsed stretch to the mask of active types."""
    pos = np.zeros(n_types, np.int64)  # event index per type: 2k = start of k, 2k+1 = end of k
    state = 0
    prev = 0
    started = False
    while True:
        best = -1
        best_t = 0
        for t in range(n_types):
            if pos[t] < 2 * counts[t]:
                k = pos[t] >> 1
                tm = ms[t, k] if pos[t] & 1 == 0 else me[t, k]
                if best < 0 or tm < best_t:
                    best = t
                    best_t = tm
        if best < 0:
            return
        if started:
            out[state] += best_t - prev
        started = True
        prev = best_t
        state += (1 << best) if pos[best] & 1 == 0 else -(1 << best)
        pos[best] += 1


@jit
def _type_coverage(bounds: I64, start: I64, end: I64, type_idx: I64, n_types: int) -> I64:  # pragma: no cover
    n_groups = bounds.size - 1
    out = np.zeros((n_groups, 1 << n_types), np.int64)
    longest = 0
    for g in range(n_groups):
        longest = max(longest, bounds[g + 1] - bounds[g])
    ms = np.empty((n_types, longest), np.int64)
    me = np.empty((n_types, longest), np.int64)
    counts = np.zeros(n_types, np.int64)
    for g in range(n_groups):
        a, b = bounds[g], bounds[g + 1]
        _merge_types(start[a:b], end[a:b], type_idx[a:b], n_types, ms, me, counts)
        _sweep(ms, me, counts, n_types, out[g])
    return out


def type_coverage(bounds: I64, start: I64, end: I64, type_idx: I64, n_types: int) -> I64:
    """Time spent with exactly each set of types active, between a group's first and last typed interval.

    Intervals of one type merge when they overlap or touch; a type's union then sweeps against the
    others'. Equals merge_intervals per (group, type) followed by coverage_by_mask.

    Args:
        bounds: int64[n_groups + 1]: group g is rows bounds[g]:bounds[g+1].
        start: int64 interval starts, non-decreasing within each group.
        end: int64 interval ends (>= start).
        type_idx: int64 type per interval in [0, n_types), or -1 to ignore the interval.
        n_types: number of types (mask bit t = type t).

    Returns:
        int64[n_groups, 2**n_types]: ns with exactly that mask active (mask 0: none, between the
        group's first and last typed interval).
    """
    return _type_coverage(_as64(bounds), _as64(start), _as64(end), _as64(type_idx), int(n_types))


def _as64(a: npt.ArrayLike) -> I64:
    return np.ascontiguousarray(a, dtype=np.int64)
