"""numba group-scatter kernels: one pass of sums and a stable counting-sort scatter of derived values.

Public typed wrappers (numpy in, numpy out):

- ``duration_groups(gid, start, end, n_groups) -> (count, total, min, max, bounds, grouped)``: the durations
  end - start, with their per-group count/sum/min/max, laid out group by group (rows in order inside).
- ``launch_groups(api_row, api_start, api_end, start, gid, n_groups) -> (count, queued, totals, maxima, bounds,
  grouped)``: for every record with a launch (api_row >= 0), launch latency (start - api start), queue delay
  (start - api end) and api duration (api end - api start): per-group count, queued (delay > 0), sums and
  maxima ([3, n_groups]) and the values laid out group by group ([3, launched]).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit
from ktrace.analysis._kernels.groups import counting_order

I64 = npt.NDArray[np.int64]
_MIN = np.iinfo(np.int64).min
_MAX = np.iinfo(np.int64).max


@jit
def _duration_groups(
    gid: I64, start: I64, end: I64, n_groups: int
) -> tuple[I64, I64, I64, I64, I64, I64]:  # pragma: no cover - numba
    count = np.zeros(n_groups, np.int64)
    total = np.zeros(n_groups, np.int64)
    lo = np.full(n_groups, _MAX, np.int64)
    hi = np.full(n_groups, _MIN, np.int64)
    for i in range(gid.size):
        count[gid[i]] += 1
    bounds = np.zeros(n_groups + 1, np.int64)
    for g in range(n_groups):
        bounds[g + 1] = bounds[g] + count[g]
    fill = bounds[:-1].copy()
    out = np.empty(gid.size, np.int64)
    for i in range(gid.size):
        g = gid[i]
        v = end[i] - start[i]
        out[fill[g]] = v
        fill[g] += 1
        total[g] += v
        lo[g] = min(lo[g], v)
        hi[g] = max(hi[g], v)
    return count, total, lo, hi, bounds, out


def duration_groups(gid: I64, start: I64, end: I64, n_groups: int) -> tuple[I64, I64, I64, I64, I64, I64]:
    """Per-group statistics of end - start and the durations in group order.

    Args:
        gid: int64 group id per row in [0, n_groups).
        start: int64 start per row.
        end: int64 end per row.
        n_groups: number of groups.

    Returns:
        (count, sum, min, max) each int64[n_groups] (min/max are int64 extremes when empty), bounds
        int64[n_groups + 1], durations int64[n] (group g at bounds[g]:bounds[g+1], rows in order).
    """
    gid, start, end = _as64(gid), _as64(start), _as64(end)
    if not _duration_groups.skips_numba(gid.size):
        return _duration_groups(gid, start, end, int(n_groups))
    order, bounds = counting_order(gid, int(n_groups))
    grouped = (end - start)[order]
    return (np.diff(bounds), *_segment_sum_min_max(grouped, bounds), bounds, grouped)


@jit
def _launch_groups(
    api_row: I64, api_start: I64, api_end: I64, start: I64, gid: I64, n_groups: int
) -> tuple[I64, I64, I64, I64, I64, I64]:  # pragma: no cover - numba
    count = np.zeros(n_groups, np.int64)
    queued = np.zeros(n_groups, np.int64)
    totals = np.zeros((3, n_groups), np.int64)
    maxima = np.full((3, n_groups), _MIN, np.int64)
    for i in range(gid.size):
        if api_row[i] >= 0:
            count[gid[i]] += 1
    bounds = np.zeros(n_groups + 1, np.int64)
    for g in range(n_groups):
        bounds[g + 1] = bounds[g] + count[g]
    fill = bounds[:-1].copy()
    out = np.empty((3, bounds[n_groups]), np.int64)
    for i in range(gid.size):
        r = api_row[i]
        if r < 0:
            continue
        g = gid[i]
        p = fill[g]
        fill[g] += 1
        a0 = api_start[r]
        a1 = api_end[r]
        v0 = start[i] - a0
        v1 = start[i] - a1
        v2 = a1 - a0
        out[0, p] = v0
        out[1, p] = v1
        out[2, p] = v2
        if v1 > 0:
            queued[g] += 1
        totals[0, g] += v0
        totals[1, g] += v1
        totals[2, g] += v2
        maxima[0, g] = max(maxima[0, g], v0)
        maxima[1, g] = max(maxima[1, g], v1)
        maxima[2, g] = max(maxima[2, g], v2)
    return count, queued, totals, maxima, bounds, out


def launch_groups(
    api_row: I64, api_start: I64, api_end: I64, start: I64, gid: I64, n_groups: int
) -> tuple[I64, I64, I64, I64, I64, I64]:
    """Launch latency, queue delay and API duration of every launched record, grouped.

    Args:
        api_row: int64 per record: its launch's row in the api arrays, -1 without one.
        api_start: int64 api call start per api row.
        api_end: int64 api call end per api row.
        start: int64 record start.
        gid: int64 group id per record in [0, n_groups).
        n_groups: number of groups.

    Returns:
        (count, queued (queue delay > 0), totals [3, n_groups], maxima [3, n_groups] (int64 min when empty),
        bounds [n_groups + 1], values [3, launched]: group g's launched records at bounds[g]:bounds[g+1] in
        record order; rows 0/1/2 = launch latency, queue delay, api duration).
    """
    api_row, api_start, api_end, start, gid = map(_as64, (api_row, api_start, api_end, start, gid))
    if not _launch_groups.skips_numba(gid.size):
        return _launch_groups(api_row, api_start, api_end, start, gid, int(n_groups))
    launched = np.flatnonzero(api_row >= 0)
    order, bounds = counting_order(gid[launched], int(n_groups))
    launched = launched[order]  # group by group, record order inside
    rows = api_row[launched]
    a0, a1, at = api_start[rows], api_end[rows], start[launched]
    values = np.stack([at - a0, at - a1, a1 - a0])
    sums = [_segment_sum_min_max(v, bounds) for v in values]
    delayed = np.zeros(values.shape[1] + 1, np.int64)
    np.cumsum(values[1] > 0, out=delayed[1:])
    queued = delayed[bounds[1:]] - delayed[bounds[:-1]]
    totals, maxima = np.stack([t for t, _, _ in sums]), np.stack([m for _, _, m in sums])
    return np.diff(bounds), queued, totals, maxima, bounds, values


def _segment_sum_min_max(values: I64, bounds: I64) -> tuple[I64, I64, I64]:
    """Sum (wrapping as the kernels' int64 sums), min and max of each segment bounds[g]:bounds[g + 1] (int64
    extremes for an empty one): the numpy twin of the kernels' per-group accumulators."""
    sums = np.zeros(values.size + 1, np.int64)
    np.cumsum(values, out=sums[1:])
    lo = np.full(bounds.size - 1, _MAX, np.int64)
    hi = np.full(bounds.size - 1, _MIN, np.int64)
    filled = np.flatnonzero(bounds[1:] > bounds[:-1])
    if filled.size:
        lo[filled] = np.minimum.reduceat(values, bounds[filled])
        hi[filled] = np.maximum.reduceat(values, bounds[filled])
    return sums[bounds[1:]] - sums[bounds[:-1]], lo, hi


def _as64(a: npt.ArrayLike) -> I64:
    return np.ascontiguousarray(a, dtype=np.int64)
