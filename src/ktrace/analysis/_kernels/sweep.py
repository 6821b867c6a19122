"""numba sweep kernel: time spent with each subset of interval types active, per group, in one pass.

Public typed wrapper:

- ``type_coverage(bounds, start, end, type_idx, n_types) -> int64[n_groups, 2**n_types]``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit
from ktrace.analysis._kernels.intervals import merged_runs

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
    bounds, start, end, type_idx = _as64(bounds), _as64(start), _as64(end), _as64(type_idx)
    covered = (
        _type_coverage_numpy(bounds, start, end, type_idx, int(n_types))
        if _type_coverage.skips_numba(start.size)
        else None
    )
    if covered is None:
        return _type_coverage(bounds, start, end, type_idx, int(n_types))
    return covered


def _type_coverage_numpy(bounds: I64, start: I64, end: I64, type_idx: I64, n_types: int) -> I64 | None:
    """The numpy twin of _type_coverage (None where merged_runs cannot lay the ends out: the kernel runs).

    Each (group, type)'s intervals merged (merged_runs, rows in start order), their starts (+2**type) and ends
    (-2**type) ordered by (group, time): the stretch between two events of a group counts for the mask after
    the first. Events at one time may come in another order than the kernel's; the masks between them last 0 ns.
    """
    n_groups = bounds.size - 1
    out = np.zeros((n_groups, 1 << n_types), np.int64)
    sizes = np.diff(bounds)
    group = np.repeat(np.arange(n_groups, dtype=np.int64), sizes)
    rows = np.arange(bounds[0], bounds[-1], dtype=np.int64)
    typed = type_idx[rows] >= 0
    rows, group = rows[typed], group[typed]
    key = group * n_types + type_idx[rows]
    by_key = np.argsort(key, kind="stable")  # start order inside each (group, type)
    rows, key = rows[by_key], key[by_key]
    runs = merged_runs(key, start[rows], end[rows])
    if runs is None:
        return None
    first, run_end = runs
    if first.size == 0:
        return out
    run_key = key[first]
    times = np.stack([start[rows[first]], run_end], axis=1).ravel()
    bit = np.left_shift(1, run_key % n_types)
    delta = np.stack([bit, -bit], axis=1).ravel()
    event_group = np.repeat(run_key // n_types, 2)
    order = np.lexsort((times, event_group))
    times, delta, event_group = times[order], delta[order], event_group[order]
    mask = np.cumsum(delta)  # each group's events add up to 0: the mask after each event, group by group
    same = event_group[1:] == event_group[:-1]
    flat = out.reshape(-1)
    np.add.at(flat, (event_group[1:] << n_types)[same] + mask[:-1][same], (times[1:] - times[:-1])[same])
    return out


def _as64(a: npt.ArrayLike) -> I64:
    return np.ascontiguousarray(a, dtype=np.int64)
