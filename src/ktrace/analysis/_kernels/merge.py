"""numba merge kernel: k-way merge of sorted runs of row indices, group by group, by (key, row).

Public typed wrapper:

- ``merge_runs(perm, run_bounds, group_runs, key) -> int64[n]``: every group's runs merged into one
  run ordered by (key[row], row); the runs must each be in that order already.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit

I64 = npt.NDArray[np.int64]


@jit
def _merge_two(src: I64, dst: I64, a: int, mid: int, b: int, key: I64) -> None:  # pragma: no cover - numba
    i, j, o = a, mid, a
    while i < mid and j < b:
        ki, kj = key[src[i]], key[src[j]]
        if ki < kj or (ki == kj and src[i] < src[j]):
            dst[o] = src[i]
            i += 1
        else:
            dst[o] = src[j]
            j += 1
        o += 1
    while i < mid:
        dst[o] = src[i]
        i += 1
        o += 1
    while j < b:
        dst[o] = src[j]
        j += 1
        o += 1


@jit
def _merge_group(src: I64, dst: I64, bounds: I64, key: I64) -> bool:  # pragma: no cover - numba
    """Bottom-up pairwise merges of the runs bounds[r]:bounds[r+1]; True when the result is in dst."""
    in_dst = False
    k = bounds.size - 1
    while k > 1:
        merged = np.empty((k + 1) // 2 + 1, np.int64)
        merged[0] = bounds[0]
        m = 0
        for j in range(0, k, 2):
            if j + 1 < k:
                _merge_two(src, dst, bounds[j], bounds[j + 1], bounds[j + 2], key)
                merged[m + 1] = bounds[j + 2]
            else:
                dst[bounds[j] : bounds[j + 1]] = src[bounds[j] : bounds[j + 1]]
                merged[m + 1] = bounds[j + 1]
            m += 1
        bounds = merged[: m + 1].copy()
        src, dst = dst, src
        in_dst = not in_dst
        k = m
    return in_dst


@jit
def _merge_runs(perm: I64, run_bounds: I64, group_runs: I64, key: I64) -> I64:  # pragma: no cover - numba
    out = perm.copy()
    buf = np.empty_like(perm)
    for g in range(group_runs.size - 1):
        r0, r1 = group_runs[g], group_runs[g + 1]
        if r1 - r0 <= 1:
            continue
        if _merge_group(out, buf, run_bounds[r0 : r1 + 1].copy(), key):
            a, b = run_bounds[r0], run_bounds[r1]
            out[a:b] = buf[a:b]
    return out


def merge_runs(perm: I64, run_bounds: I64, group_runs: I64, key: I64) -> I64:
    """Merge sorted runs of row indices into one sorted run per group.

    Args:
        perm: int64 row indices laid out run after run.
        run_bounds: int64[n_runs + 1]: run r is perm[run_bounds[r]:run_bounds[r+1]], in (key[row], row)
            order.
        group_runs: int64[n_groups + 1]: group g is runs group_runs[g] .. group_runs[g+1]-1 (contiguous).
        key: int64 sort key per row.

    Returns:
        int64 permutation: each group's rows in (key[row], row) order, groups in place.
    """
    perm, run_bounds, group_runs, key = _as64(perm), _as64(run_bounds), _as64(group_runs), _as64(key)
    if not _merge_runs.skips_numba(perm.size):
        return _merge_runs(perm, run_bounds, group_runs, key)
    # the numpy twin: one stable sort of every group's positions by (group, key, row); a group's positions
    # are contiguous, so each group's rows land back on its own positions
    first, last = run_bounds[group_runs[:-1]], run_bounds[group_runs[1:]]
    at = np.arange(perm.size, dtype=np.int64)
    group = np.searchsorted(first, at, "right") - 1
    inside = np.flatnonzero((group >= 0) & (at < last[np.maximum(group, 0)])) if first.size else at[:0]
    rows = perm[inside]
    out = perm.copy()
    out[inside] = rows[np.lexsort((rows, key[rows], group[inside]))]
    return out


def _as64(a: npt.ArrayLike) -> I64:
    return np.ascontiguousarray(a, dtype=np.int64)
