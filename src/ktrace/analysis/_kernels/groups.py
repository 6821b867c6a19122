"""numba group kernels: stable counting sort by group id, per-group sums and exact order statistics.

Public typed wrappers (numpy in, numpy out):

- ``counting_order(gid, n_groups) -> (perm, bounds)``: stable permutation putting rows in group order.
- ``unsorted_groups(bounds, values) -> bool[n_groups]``: groups whose values (in that order) decrease somewhere.
- ``group_sums(gid, values, n_groups) -> (count, sum, min, max)`` per group (int64).
- ``order_stats(values, bounds, ranks) -> int64[n_groups, m]``: the ranks[g, j]-th smallest value of each
  contiguous segment bounds[g]:bounds[g+1] (0-based), by radix selection (no full sort).
- ``pair_ids(a, b, lows, sizes) -> (ids, codes)``: dense ids of code pairs (plain numpy: no kernel).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit, jit_light

I64 = npt.NDArray[np.int64]
NUMPY_ORDER_ROWS = 1 << 18
"""counting_order uses numpy's stable argsort up to this many rows (~15 ms at 262 k; the same permutation): with
operators imported by default a small trace's CPU-side grouping passes the kernels' Python limit first, and
loading numba for that one sort cost ~0.6 s and ~90 MB (DLRM rank x10: 0.80 -> 1.39 s)."""
RADIX_BITS = 16
"""Buckets of the first selection pass: 2**16."""


@jit
def _counting_order(gid: I64, n_groups: int) -> tuple[I64, I64]:  # pragma: no cover - numba
    bounds = np.zeros(n_groups + 1, np.int64)
    for i in range(gid.size):
        bounds[gid[i] + 1] += 1
    for g in range(n_groups):
        bounds[g + 1] += bounds[g]
    fill = bounds[:-1].copy()
    perm = np.empty(gid.size, np.int64)
    for i in range(gid.size):
        g = gid[i]
        perm[fill[g]] = i
        fill[g] += 1
    return perm, bounds


def counting_order(gid: I64, n_groups: int) -> tuple[I64, I64]:
    """Stable counting sort by group id.

    Args:
        gid: int64 group id per row in [0, n_groups).
        n_groups: number of groups.

    Returns:
        (perm, bounds): rows perm[bounds[g]:bounds[g+1]] are group g's, in their original order.
    """
    gid = _as64(gid)
    if gid.size <= NUMPY_ORDER_ROWS or _counting_order.skips_numba(gid.size):
        bounds = np.zeros(int(n_groups) + 1, np.int64)
        np.cumsum(np.bincount(gid, minlength=int(n_groups)), out=bounds[1:])
        return np.argsort(gid, kind="stable").astype(np.int64, copy=False), bounds
    return _counting_order(gid, int(n_groups))


@jit_light
def _unsorted_groups(bounds: I64, values: I64) -> npt.NDArray[np.bool_]:  # pragma: no cover - numba
    n_groups = bounds.size - 1
    out = np.zeros(n_groups, np.bool_)
    for g in range(n_groups):
        for i in range(bounds[g] + 1, bounds[g + 1]):
            if values[i] < values[i - 1]:
                out[g] = True
                break
    return out


def unsorted_groups(bounds: I64, values: I64) -> npt.NDArray[np.bool_]:
    """Which contiguous segments bounds[g]:bounds[g+1] of `values` are not non-decreasing."""
    bounds, values = _as64(bounds), _as64(values)
    if not _unsorted_groups.skips_numba(max(bounds.size, values.size)):
        return _unsorted_groups(bounds, values)
    # a decrease at row i (values[i] < values[i - 1]) counts for the group holding both rows
    drops = np.flatnonzero(values[1:] < values[:-1]) + 1
    holder = np.searchsorted(bounds, drops, "right") - 1  # the last group starting at or before the row
    kept = (holder >= 0) & (holder < bounds.size - 1)
    holder, drops = holder[kept], drops[kept]
    out = np.zeros(max(bounds.size - 1, 0), np.bool_)
    out[holder[(bounds[holder] < drops) & (drops < bounds[holder + 1])]] = True
    return out


@jit
def _group_sums(gid: I64, values: I64, n_groups: int) -> tuple[I64, I64, I64, I64]:  # pragma: no cover
    count = np.zeros(n_groups, np.int64)
    total = np.zeros(n_groups, np.int64)
    lo = np.full(n_groups, np.iinfo(np.int64).max, np.int64)
    hi = np.full(n_groups, np.iinfo(np.int64).min, np.int64)
    for i in range(gid.size):
        g = gid[i]
        v = values[i]
        count[g] += 1
        total[g] += v
        if v < lo[g]:
            lo[g] = v
        if v > hi[g]:
            hi[g] = v
    return count, total, lo, hi


def group_sums(gid: I64, values: I64, n_groups: int) -> tuple[I64, I64, I64, I64]:
    """Count, exact int64 sum, min and max of `values` per group (min/max are int64 extremes when empty).

    Args:
        gid: int64 group id per row in [0, n_groups); any order.
        values: int64 values.
        n_groups: number of groups.

    Returns:
        (count, sum, min, max), each int64[n_groups].
    """
    return _group_sums(_as64(gid), _as64(values), int(n_groups))


@jit
def _select_segment(seg: I64, ranks: I64, out: I64) -> None:  # noqa: C901  # pragma: no cover - numba
    n = seg.size
    if n <= 4096:
        srt = np.sort(seg)
        for j in range(ranks.size):
            out[j] = srt[ranks[j]]
        return
    lo = seg.min()
    hi = seg.max()
    span = np.uint64(hi - lo)
    shift = 0
    while (span >> np.uint64(shift)) >= np.uint64(1 << RADIX_BITS):
        shift += 1
    hist = np.zeros((1 << RADIX_BITS) + 1, np.int64)
    for i in range(n):
        hist[np.int64(np.uint64(seg[i] - lo) >> np.uint64(shift)) + 1] += 1
    for b in range(1 << RADIX_BITS):
        hist[b + 1] += hist[b]
    # hist[b] = rows in buckets < b; find each rank's bucket, then sort only those buckets' rows.
    want = np.full(1 << RADIX_BITS, -1, np.int64)
    bucket_of = np.empty(ranks.size, np.int64)
    n_want = 0
    for j in range(ranks.size):
        b = np.searchsorted(hist, ranks[j], side="right") - 1
        bucket_of[j] = b
        if want[b] < 0:
            want[b] = n_want
            n_want += 1
    sizes = np.zeros(n_want, np.int64)
    firsts = np.zeros(n_want, np.int64)
    for b in range(1 << RADIX_BITS):
        if want[b] >= 0:
            sizes[want[b]] = hist[b + 1] - hist[b]
            firsts[want[b]] = hist[b]
    offsets = np.zeros(n_want + 1, np.int64)
    for w in range(n_want):
        offsets[w + 1] = offsets[w] + sizes[w]
    buf = np.empty(offsets[n_want], np.int64)
    fill = offsets[:-1].copy()
    for i in range(n):
        w = want[np.int64(np.uint64(seg[i] - lo) >> np.uint64(shift))]
        if w >= 0:
            buf[fill[w]] = seg[i]
            fill[w] += 1
    for w in range(n_want):
        buf[offsets[w] : offsets[w + 1]] = np.sort(buf[offsets[w] : offsets[w + 1]])
    for j in range(ranks.size):
        w = want[bucket_of[j]]
        out[j] = buf[offsets[w] + ranks[j] - firsts[w]]


@jit
def _order_stats(values: I64, bounds: I64, ranks: I64) -> I64:  # pragma: no cover - numba
    n_groups = bounds.size - 1
    out = np.zeros(ranks.shape, np.int64)
    for g in range(n_groups):
        if bounds[g + 1] > bounds[g]:
            _select_segment(values[bounds[g] : bounds[g + 1]], ranks[g], out[g])
    return out


def order_stats(values: I64, bounds: I64, ranks: I64) -> I64:
    """Exact order statistics of contiguous segments, without sorting them.

    Args:
        values: int64 values, one segment per group: values[bounds[g]:bounds[g+1]] (any order inside).
        bounds: int64[n_groups + 1] segment boundaries.
        ranks: int64[n_groups, m] (2-D) 0-based ranks wanted per group (each < the segment's length; rows of
            empty segments are ignored and return 0).

    Returns:
        int64[n_groups, m]: the ranks[g, j]-th smallest value of segment g.
    """
    r = np.ascontiguousarray(ranks, dtype=np.int64)
    if r.shape[0] == 0:
        return np.zeros(r.shape, np.int64)
    values, bounds = _as64(values), _as64(bounds)
    if _order_stats.runs_as_python(values.size) or _order_stats.skips_numba(values.size):
        return _sorted_order_stats(values, bounds, r)
    return _order_stats(values, bounds, r)


def _sorted_order_stats(values: I64, bounds: I64, ranks: I64) -> I64:
    """order_stats by one stable sort of (segment, value): where the kernel would run as Python, its radix
    selection costs ~10 us a row (the README demo's 4.3 k kernels: 0.12 s of latency_stats); numpy sorts them in
    well under a millisecond. Same values: the k-th smallest of a segment does not depend on how it is found."""
    sizes = np.diff(bounds)
    if not sizes.any():
        return np.zeros(ranks.shape, np.int64)
    segment = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    ordered = values[bounds[0] : bounds[-1]][np.lexsort((values[bounds[0] : bounds[-1]], segment))]
    at = (bounds[:-1] - bounds[0])[:, None] + ranks
    out: I64 = np.where(sizes[:, None] > 0, ordered[np.clip(at, 0, max(ordered.size - 1, 0))], 0)
    return out


def linear_quantiles(values: I64, bounds: I64, quantiles: tuple[float, ...]) -> npt.NDArray[np.float64]:
    """Quantiles per segment with linear interpolation, bit-identical to polars' ``quantile(q, "linear")``
    on the values cast to Float64 (NaN for empty segments).

    Args:
        values: int64 values in contiguous segments (any order inside).
        bounds: int64[n_groups + 1] segment boundaries.
        quantiles: fractions in [0, 1].

    Returns:
        float64[n_groups, len(quantiles)].
    """
    n = np.diff(np.asarray(bounds, dtype=np.int64))
    q = np.asarray(quantiles, dtype=np.float64)
    idx = (np.maximum(n, 1) - 1).astype(np.float64)[:, None] * q[None, :]
    base = np.floor(idx).astype(np.int64)
    top = np.ceil(idx).astype(np.int64)
    stats = order_stats(values, bounds, np.concatenate([base, top], axis=1)).astype(np.float64)
    lower, upper = stats[:, : q.size], stats[:, q.size :]
    out = np.where(base == top, lower, lower + (upper - lower) * (idx - base))
    out[n == 0] = np.nan
    return out


def _as64(a: npt.ArrayLike) -> I64:
    return np.ascontiguousarray(a, dtype=np.int64)


def pair_ids(a: I64, b: I64, lows: tuple[int, int], sizes: tuple[int, int]) -> tuple[I64, I64]:
    """Dense id of (a, b) pairs numbered in (a, b) order, through a table of sizes[0] * sizes[1] cells.

    Args:
        a: int64 first code per row, in [lows[0], lows[0] + sizes[0]).
        b: int64 second code per row (or a 1-element array: a constant), in [lows[1], lows[1] + sizes[1]).
        lows: smallest value of each.
        sizes: value range of each (keep the product small: it is allocated).

    Returns:
        (id per row, the mixed-radix code (a - lo_a) * size_b + (b - lo_b) of each id).
    """
    # numpy, not a numba kernel: three vectorized passes are as fast as a compiled loop, and dense_ids (the
    # one group numbering of the analyses) no longer loads numba on its own past PYTHON_MAX_ROWS rows (the
    # README demo's 24 k operators paid numba's ~0.45 s import and first cache load for this alone)
    a64, b64 = _as64(a), _as64(b)
    code = (a64 - lows[0]) * sizes[1]
    if b64.size > 1:
        code += b64 - lows[1]
    present = np.zeros(sizes[0] * sizes[1], np.bool_)
    present[code] = True
    uniq = np.flatnonzero(present).astype(np.int64)
    lut = np.cumsum(present, dtype=np.int64) - 1
    ids: I64 = lut[code]
    return ids, uniq
