"""numba queue kernels: a running count over +1/-1 events and its time-weighted statistics, per group.

Public typed wrappers:

- ``running_depth(group, delta) -> int64[n]``: depth after each event (resets per group).
- ``level_stats(group, time, level, n_groups, threshold) -> (weighted_sum, span, time_at_or_above, max)``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit

I64 = npt.NDArray[np.int64]


@jit
def _running_depth(group: I64, delta: I64) -> I64:  # pragma: no cover - numba
    n = delta.size
    out = np.empty(n, np.int64)
    acc = 0
    for i in range(n):
        if i == 0 or group[i] != group[i - 1]:
            acc = 0
        acc += delta[i]
        out[i] = acc
    return out


def running_depth(group: I64, delta: I64) -> I64:
    """Cumulative sum of delta that restarts at 0 at each new group.

    Args:
        group: int64 group id per event; events sorted by (group, time).
        delta: int64 change per event (+1 enqueue, -1 dequeue).

    Returns:
        int64 depth after each event.
    """
    return _running_depth(_as64(group), _as64(delta))


@jit
def _level_stats(
    group: I64, time: I64, level: I64, n_groups: int, threshold: int
) -> tuple[I64, I64, I64, I64]:  # pragma: no cover - numba
    wsum = np.zeros(n_groups, np.int64)
    span = np.zeros(n_groups, np.int64)
    above = np.zeros(n_groups, np.int64)
    mx = np.zeros(n_groups, np.int64)
    n = time.size
    for i in range(n):
        g = group[i]
        if level[i] > mx[g]:
            mx[g] = level[i]
        if i + 1 < n and group[i + 1] == g:
            dt = time[i + 1] - time[i]
            wsum[g] += dt * level[i]
            span[g] += dt
            if level[i] >= threshold:
                above[g] += dt
    return wsum, span, above, mx


def level_stats(group: I64, time: I64, level: I64, n_groups: int, threshold: int) -> tuple[I64, I64, I64, I64]:
    """Time-weighted statistics of a step function given as (time, level) change points per group.

    The level holds from each change point to the next one of the same group.

    Args:
        group: int64 group id in [0, n_groups); sorted by (group, time).
        time: int64 change times.
        level: int64 level from that time on.
        n_groups: number of groups.
        threshold: level counted by time_at_or_above.

    Returns:
        (sum of level*dt, covered time, time with level >= threshold, max level), each int64[n_groups].
    """
    return _level_stats(_as64(group), _as64(time), _as64(level), int(n_groups), int(threshold))


def _as64(a: npt.ArrayLike) -> I64:
    return np.ascontiguousarray(a, dtype=np.int64)
