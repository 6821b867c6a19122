"""numba nesting kernel: the innermost range enclosing each point, per group (thread, rank, stream).

Public typed wrapper:

- ``innermost_enclosing(r_group, r_start, r_end, p_group, p_time) -> int64[n_points]`` (index of
  the range, -1 when none);
- ``enclosing_parents(group, start, end) -> int64[n_ranges]`` (index of the range directly enclosing each
  range's start, -1 when none).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit_light

I64 = npt.NDArray[np.int64]


@jit_light
def _innermost(r_group: I64, r_start: I64, r_end: I64, p_group: I64, p_time: I64) -> I64:  # pragma: no cover
    n_p = p_time.size
    n_r = r_start.size
    out = np.full(n_p, -1, np.int64)
    stack = np.empty(max(n_r, 1), np.int64)
    top = 0
    j = 0
    cur = -1
    for i in range(n_p):
        g, t = p_group[i], p_time[i]
        if g != cur:
            cur = g
            top = 0
            while j < n_r and r_group[j] < g:
                j += 1
        while j < n_r and r_group[j] == g and r_start[j] <= t:
            stack[top] = j
            top += 1
            j += 1
        while top > 0 and r_end[stack[top - 1]] <= t:
            top -= 1
        if top > 0:
            out[i] = stack[top - 1]
    return out


def innermost_enclosing(r_group: I64, r_start: I64, r_end: I64, p_group: I64, p_time: I64) -> I64:
    """For each point, the innermost range of its group with start <= t < end.

    "Innermost" is the latest-starting range still open at t (for properly nested ranges, the
    deepest). Ranges that partly overlap are handled: a range already closed is skipped even if a
    later one is still open.

    Args:
        r_group: int64 group id per range; ranges sorted by (group, start, end descending).
        r_start: int64 range starts.
        r_end: int64 range ends.
        p_group: int64 group id per point; points sorted by (group, time).
        p_time: int64 point times.

    Returns:
        int64 index (into the ranges as passed) per point, -1 where no range encloses it.
    """
    r_group, r_start, r_end, p_group, p_time = map(_as64, (r_group, r_start, r_end, p_group, p_time))
    if _innermost.skips_numba(max(r_start.size, p_time.size)):
        twin = _innermost_numpy(r_group, r_start, r_end, p_group, p_time)
        if twin is not None:
            return twin
    held = _holding_a_point(r_group, r_start, r_end, p_group, p_time)
    if held is None:
        return _innermost(r_group, r_start, r_end, p_group, p_time)
    if held.size == 0:
        return np.full(p_time.size, -1, np.int64)
    found: I64 = _innermost(r_group[held], r_start[held], r_end[held], p_group, p_time)
    return np.where(found >= 0, held[np.maximum(found, 0)], -1)


def _holding_a_point(r_group: I64, r_start: I64, r_end: I64, p_group: I64, p_time: I64) -> I64 | None:
    """Indices of the ranges that contain at least one point (sorted searches on one (group, time) key), or
    None when that is not worth finding (no more ranges than points) or the key would overflow.

    Dropping the others leaves every answer of _innermost unchanged: a range that contains no point is never
    returned, and when it is on the stack at a point's time it is closed (popped, as a missing one would
    be) or below an open range (never reached). The README demo's 65 k Python frames hold 4.3 k launches:
    the Python loop then runs over the frames that contain one, not all of them."""
    if r_start.size <= p_time.size or p_time.size == 0:
        return None
    axis = _group_time_axis(r_group, r_start, r_end, p_group, p_time)
    if axis is None:
        return None
    low, span = axis
    keys = p_group * span + (p_time - low)  # ascending: points come sorted by (group, time)
    base = r_group * span - low
    first = np.searchsorted(keys, base + r_start, "left")
    held: I64 = np.flatnonzero(np.searchsorted(keys, base + np.maximum(r_end, r_start), "left") > first)
    return held


@jit_light
def _parents(group: I64, start: I64, end: I64) -> I64:  # pragma: no cover
    n = start.size
    out = np.full(n, -1, np.int64)
    stack = np.empty(max(n, 1), np.int64)
    top = 0
    for i in range(n):
        while top > 0 and (group[stack[top - 1]] != group[i] or end[stack[top - 1]] <= start[i]):
            top -= 1
        if top > 0:
            out[i] = stack[top - 1]
        stack[top] = i
        top += 1
    return out


def enclosing_parents(group: I64, start: I64, end: I64) -> I64:
    """For each range, the range directly enclosing its start: the latest earlier range (in the given order)
    of its group still open at that start (start <= t < end).

    Args:
        group: int64 group id per range; ranges sorted by (group, start, end descending), so a parent
            comes before its children.
        start: int64 range starts.
        end: int64 range ends.

    Returns:
        int64 index (into the ranges as passed) of each range's parent, -1 for a top-level range.
    """
    group, start, end = _as64(group), _as64(start), _as64(end)
    new_run = np.append(True, group[1:] != group[:-1])
    if not _parents.skips_numba(start.size) or not (new_run[1:] | (start[1:] >= start[:-1])).all():
        return _parents(group, start, end)
    # the kernel's stack after range i holds i, then i's parent, then its parent...: with starts in order, the
    # range it finds for i is the latest earlier range of i's run of equal groups that ends after i's start
    run_first = np.arange(start.size, dtype=np.int64)
    run_first[~new_run[: start.size]] = 0
    np.maximum.accumulate(run_first, out=run_first)
    earlier = np.arange(-1, start.size - 1, dtype=np.int64)
    return last_above(end, earlier, start, run_first)


def _innermost_numpy(r_group: I64, r_start: I64, r_end: I64, p_group: I64, p_time: I64) -> I64 | None:
    """The numpy twin of _innermost, None where the (group, time) key would overflow (the kernel runs then):
    for a point, the latest range of its group starting at or before it that ends after it."""
    if r_start.size == 0 or p_time.size == 0:
        return np.full(p_time.size, -1, np.int64)
    axis = _group_time_axis(r_group, r_start, r_start, p_group, p_time)
    if axis is None:
        return None
    low, span = axis
    if not (_in_order(r_group, r_start) and _in_order(p_group, p_time)):
        return None
    last_started = np.searchsorted(r_group * span + (r_start - low), p_group * span + (p_time - low), "right") - 1
    return last_above(r_end, last_started, p_time, np.searchsorted(r_group, p_group, "left"))


def _group_time_axis(r_group: I64, r_low: I64, r_high: I64, p_group: I64, p_time: I64) -> tuple[int, int] | None:
    """(low, span) that lay (group, time) pairs on one int64 axis, group * span + (time - low), for ranges' times
    from r_low to r_high and the points' times (none empty); None where a group is negative or the axis would
    overflow int64 (the kernel runs then)."""
    low = min(int(r_low.min()), int(p_time.min()))
    span = max(int(r_high.max()), int(p_time.max())) - low + 1
    groups = max(int(r_group.max()), int(p_group.max())) + 1
    if min(int(r_group.min()), int(p_group.min())) < 0 or groups * span >= 1 << 62:
        return None
    return low, span


def _in_order(group: I64, time: I64) -> bool:
    """Whether rows are sorted by (group, time), as the kernels' callers sort them."""
    later_group = group[1:] > group[:-1]
    return bool((later_group | ((group[1:] == group[:-1]) & (time[1:] >= time[:-1]))).all())


def last_above(values: I64, upto: I64, threshold: I64, floor: I64, chunk: int = 1 << 13) -> I64:
    """For each query q, the largest j with floor[q] <= j <= upto[q] and values[j] > threshold[q] (-1 if none).

    `upto` must not decrease. The values go in chunks of `chunk` rows: a query whose answer is in its own chunk
    finds it by binary lifting over the chunk's window maxima (levels k: the largest of the 2**k values ending
    at a row, cut at the chunk's start); one whose answer is earlier takes the latest of the earlier rows larger
    than every row after them (their values fall as their rows rise: one search), which the chunk then updates.
    Memory: ~log2(chunk) arrays of a chunk's rows, plus the earlier rows kept (at most one per level of
    nesting in the callers' use; all of them where the values strictly fall).
    """
    out = np.full(upto.size, -1, np.int64)
    kept_rows, kept_values = np.empty(0, np.int64), np.empty(0, np.int64)
    q0 = int(np.searchsorted(upto, 0, "left"))
    for a in range(0, values.size, chunk):
        b = min(a + chunk, values.size)
        q1 = int(np.searchsorted(upto, b, "left"))
        window = values[a:b]
        if q1 > q0:
            levels = [window]
            while 1 << len(levels) <= window.size:
                prev, step = levels[-1], 1 << (len(levels) - 1)
                levels.append(np.concatenate([prev[:step], np.maximum(prev[step:], prev[:-step])]))
            at = upto[q0:q1] - a
            limit = threshold[q0:q1]
            for k in range(len(levels) - 1, -1, -1):
                live = np.flatnonzero(at >= 0)
                skip = live[levels[k][at[live]] <= limit[live]]
                at[skip] -= 1 << k
            earlier = np.flatnonzero(at < 0)
            larger = np.searchsorted(-kept_values, -limit[earlier], "left")  # kept rows with a value above
            found = np.where(at >= 0, at + a, -1)
            found[earlier] = np.append(-1, kept_rows)[larger]
            out[q0:q1] = np.where(found >= floor[q0:q1], found, -1)
        q0 = q1
        after = np.maximum.accumulate(window[::-1])[::-1]  # the largest value at or after each row of the chunk
        stays = kept_values > after[0]
        tops = np.flatnonzero(window > np.append(after[1:], np.iinfo(np.int64).min))
        kept_rows = np.concatenate([kept_rows[stays], tops + a])
        kept_values = np.concatenate([kept_values[stays], window[tops]])
    return out


def _as64(a: npt.ArrayLike) -> I64:
    return np.ascontiguousarray(a, dtype=np.int64)
