"""numba interval kernels: merge (busy union), union length, busy time per bin, coverage by state mask.

Public typed wrappers (numpy in, numpy out); every input is sorted as each docstring says:

- ``merge_intervals(group, start, end) -> (group, start, end)`` of the disjoint union per group.
- ``union_length(group, start, end, n_groups) -> int64[n_groups]``.
- ``busy_per_bin(group, start, end, t0, bin_ns, n_bins, n_groups) -> int64[n_groups, n_bins]``.
- ``coverage_by_mask(group, time, delta, n_groups, n_masks) -> int64[n_groups, n_masks]``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit, jit_light

I64 = npt.NDArray[np.int64]


@jit
def _merge(group: I64, start: I64, end: I64) -> tuple[I64, I64, I64]:  # pragma: no cover - numba
    n = start.size
    og = np.empty(n, np.int64)
    os_ = np.empty(n, np.int64)
    oe = np.empty(n, np.int64)
    k = -1
    for i in range(n):
        g, s, e = group[i], start[i], end[i]
        if k >= 0 and og[k] == g and s <= oe[k]:
            if e > oe[k]:
                oe[k] = e
        else:
            k += 1
            og[k] = g
            os_[k] = s
            oe[k] = e
    return og[: k + 1], os_[: k + 1], oe[: k + 1]


def merge_intervals(group: I64, start: I64, end: I64) -> tuple[I64, I64, I64]:
    """Disjoint union of intervals per group (touching intervals merge).

    Args:
        group: int64 group id per interval; input sorted by (group, start).
        start: int64 interval starts.
        end: int64 interval ends (>= start).

    Returns:
        (group, start, end) of the merged intervals, sorted by (group, start).
    """
    g, s, e = _as64(group), _as64(start), _as64(end)
    runs = merged_runs(g, s, e) if _merge.skips_numba(g.size) else None
    if runs is None:
        return _merge(g, s, e)
    first, reach = runs
    return g[first], s[first], reach


def merged_runs(group: I64, start: I64, end: I64) -> tuple[I64, I64] | None:
    """The numpy twin of _merge: the first row of each merged interval and its end (the largest end of its
    rows), or None when the ends of all groups cannot be laid out on one int64 axis, or when a row ends before it
    starts (a clock-skewed record that an import keeps): then the kernel runs, whose run restarts its largest end
    at each new run, where this running maximum would carry an earlier run's end over a shorter row.

    An interval starts a new run unless it is in the previous row's group and starts at or before the largest
    end so far in that group: a running maximum over the ends, each group's shifted above every earlier one's."""
    if group.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if (end < start).any():
        return None
    cut = np.flatnonzero(group[1:] != group[:-1]) + 1
    firsts = np.concatenate([[0], cut])
    low = np.minimum.reduceat(np.minimum(start, end), firsts)
    high = np.maximum.reduceat(np.maximum(start, end), firsts)
    widths = [int(h) - int(lo) + 1 for lo, h in zip(low.tolist(), high.tolist(), strict=True)]
    if sum(widths) >= 1 << 62:
        return None
    lift = np.cumsum([0, *widths[:-1]], dtype=np.int64) - low  # group k's times onto [offset_k, offset_k + width_k)
    lift = np.repeat(lift, np.diff(np.append(firsts, group.size)))
    reach = np.maximum.accumulate(end + lift)
    opens = np.ones(group.size, np.bool_)
    opens[1:] = start[1:] + lift[1:] > reach[:-1]
    opens[firsts] = True
    first = np.flatnonzero(opens)
    last = np.append(first[1:], group.size) - 1
    merged_end: I64 = reach[last] - lift[last]
    return first, merged_end


@jit_light
def _union_length(group: I64, start: I64, end: I64, n_groups: int) -> I64:  # pragma: no cover - numba
    out = np.zeros(n_groups, np.int64)
    n = start.size
    if n == 0:
        return out
    cg, cs, ce = group[0], start[0], end[0]
    for i in range(1, n):
        g, s, e = group[i], start[i], end[i]
        if g == cg and s <= ce:
            if e > ce:
                ce = e
        else:
            out[cg] += ce - cs
            cg, cs, ce = g, s, e
    out[cg] += ce - cs
    return out


def union_length(group: I64, start: I64, end: I64, n_groups: int) -> I64:
    """Length of the union of intervals per group (busy time, overlaps counted once).

    Args:
        group: int64 group id in [0, n_groups); input sorted by (group, start).
        start: int64 interval starts.
        end: int64 interval ends.
        n_groups: number of groups.

    Returns:
        int64 array of n_groups union lengths.
    """
    group, start, end = _as64(group), _as64(start), _as64(end)
    runs = merged_runs(group, start, end) if _union_length.skips_numba(group.size) else None
    if runs is None:
        return _union_length(group, start, end, int(n_groups))
    first, reach = runs
    out = np.zeros(int(n_groups), np.int64)
    np.add.at(out, group[first], reach - start[first])
    return out


@jit
def _busy_per_bin(
    group: I64, start: I64, end: I64, t0: int, bin_ns: int, n_bins: int, n_groups: int
) -> I64:  # pragma: no cover - numba
    out = np.zeros((n_groups, n_bins), np.int64)
    t_end = t0 + bin_ns * n_bins
    for i in range(start.size):
        s = max(start[i], t0)
        e = min(end[i], t_end)
        if e <= s:
            continue
        g = group[i]
        b = (s - t0) // bin_ns
        while s < e:
            edge = t0 + (b + 1) * bin_ns
            stop = min(e, edge)
            out[g, b] += stop - s
            s = stop
            b += 1
    return out


def busy_per_bin(group: I64, start: I64, end: I64, t0: int, bin_ns: int, n_bins: int, n_groups: int) -> I64:
    """Time covered by (already disjoint) intervals in each fixed bin [t0 + k*bin_ns, t0 + (k+1)*bin_ns).

    Args:
        group: int64 group id per interval in [0, n_groups); intervals disjoint within a group
            (pass the output of merge_intervals); any order.
        start: int64 interval starts.
        end: int64 interval ends.
        t0: start of bin 0.
        bin_ns: bin width (> 0).
        n_bins: number of bins; time outside them is ignored.
        n_groups: number of groups.

    Returns:
        int64 array [n_groups, n_bins] of covered ns per bin.
    """
    if bin_ns <= 0:
        raise ValueError("bin_ns must be > 0")
    g, s, e = _as64(group), _as64(start), _as64(end)
    # its loop walks every bin an interval covers: the work is up to n_bins x n_groups, not len(group)
    rows = len(g) + int(n_bins) * int(n_groups)
    if _busy_per_bin.skips_numba(rows):
        out = busy_per_bin_numpy(g, s, e, int(t0), int(bin_ns), int(n_bins), int(n_groups))
        if out is not None:
            return out
    return _busy_per_bin.sized(rows, g, s, e, int(t0), int(bin_ns), int(n_bins), int(n_groups))


def busy_per_bin_numpy(
    group: I64, start: I64, end: I64, t0: int, bin_ns: int, n_bins: int, n_groups: int
) -> I64 | None:
    """The numpy twin of _busy_per_bin (a rank's or the job's activity heatmap: every multi-rank summary ran it,
    and loaded numba for it), or None where a group's intervals overlap (the kernel's contract is disjoint ones;
    it then runs as before). Per group, the covered time before each bin edge x is the lengths of the intervals
    starting at or before x, less what the last of them runs past x; a bin's is the difference at its edges."""
    out = np.zeros((n_groups, n_bins), np.int64)
    t_end = t0 + bin_ns * n_bins
    s, e = np.maximum(start, t0), np.minimum(end, t_end)
    kept = e > s
    order = np.lexsort((s[kept], group[kept]))
    g, s, e = group[kept][order], s[kept][order], e[kept][order]
    if ((g[1:] == g[:-1]) & (s[1:] < e[:-1])).any():
        return None
    edges = t0 + bin_ns * np.arange(n_bins + 1, dtype=np.int64)
    bounds = np.searchsorted(g, np.arange(n_groups + 1, dtype=np.int64))
    for k in np.flatnonzero(np.diff(bounds)).tolist():
        gs, ge = s[bounds[k] : bounds[k + 1]], e[bounds[k] : bounds[k + 1]]
        lengths = np.zeros(gs.size + 1, np.int64)
        np.cumsum(ge - gs, out=lengths[1:])
        j = np.searchsorted(gs, edges, "right")  # intervals starting at or before each edge
        past = np.where(j > 0, ge[np.maximum(j - 1, 0)] - edges, 0)
        out[k] = np.diff(lengths[j] - np.maximum(past, 0))
    return out


@jit
def _coverage_by_mask(group: I64, time: I64, delta: I64, n_groups: int, n_masks: int) -> I64:  # pragma: no cover
    out = np.zeros((n_groups, n_masks), np.int64)
    n = time.size
    state = 0
    for i in range(n):
        if i > 0 and group[i] == group[i - 1]:
            out[group[i], state] += time[i] - time[i - 1]
        else:
            state = 0
        state += delta[i]
    return out


def coverage_by_mask(group: I64, time: I64, delta: I64, n_groups: int, n_masks: int) -> I64:
    """Time spent in each state of a bit mask swept over +bit/-bit events, per group.

    Each kind k of interval contributes +2**k at its start and -2**k at its end; the intervals of
    one kind must be disjoint within a group (merge them first), so the running sum is a bit mask
    of the kinds active. State 0 (nothing active) is counted between the group's first and last
    event.

    Args:
        group: int64 group id per event in [0, n_groups); sorted by (group, time).
        time: int64 event times.
        delta: int64 +2**k / -2**k per event.
        n_groups: number of groups.
        n_masks: 2**(number of kinds).

    Returns:
        int64 array [n_groups, n_masks]: ns spent with exactly that set of kinds active.
    """
    return _coverage_by_mask(_as64(group), _as64(time), _as64(delta), int(n_groups), int(n_masks))


def _as64(a: npt.ArrayLike) -> I64:
    return np.ascontiguousarray(a, dtype=np.int64)
