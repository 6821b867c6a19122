"""numba gap kernel: categorize the idle gap before every GPU record of a stream (HTA's idle breakdown).

Public typed wrapper:

- ``gap_categories(bounds, records, syncs, group_sync, kernel_wait_ns) -> (category, idle_ns, totals, counts)``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit

I64 = npt.NDArray[np.int64]
NO_LAUNCH = np.iinfo(np.int64).min
"""api_start value of a record without a launch call."""
HOST_WAIT, KERNEL_WAIT, SYNC_WAIT, OTHER = 0, 1, 2, 3


class Records(NamedTuple):
    """GPU records sorted by (stream group, start): start, end and launch start (NO_LAUNCH if none)."""

    start: I64
    end: I64
    api_start: I64


class Spans(NamedTuple):
    """Disjoint sync spans sorted by (rank group, start); rank group r is rows bounds[r]:bounds[r+1]."""

    bounds: I64
    start: I64
    end: I64


@jit
def _in_sync(syncs: Spans, r: int, gap_start: int, gap_end: int) -> bool:  # pragma: no cover - numba
    a, b = syncs.bounds[r], syncs.bounds[r + 1]
    j = a + np.searchsorted(syncs.start[a:b], gap_end - 1, side="right") - 1
    return j >= a and syncs.end[j] > gap_start


@jit
def _gap_categories(
    bounds: I64, rec: Records, syncs: Spans, group_sync: I64, kernel_wait_ns: int
) -> tuple[npt.NDArray[np.int8], I64, I64, I64]:  # pragma: no cover
    n_groups = bounds.size - 1
    n = rec.start.size
    category = np.full(n, -1, np.int8)
    idle = np.zeros(n, np.int64)
    totals = np.zeros((n_groups, 4), np.int64)
    counts = np.zeros((n_groups, 4), np.int64)
    for g in range(n_groups):
        r = group_sync[g]
        for i in range(bounds[g] + 1, bounds[g + 1]):
            gs = rec.end[i - 1]
            ge = rec.start[i]
            api = rec.api_start[i]
            if api != NO_LAUNCH and api > gs:
                c = HOST_WAIT
            elif ge - gs < kernel_wait_ns:
                c = KERNEL_WAIT
            elif r >= 0 and _in_sync(syncs, r, gs, ge):
                c = SYNC_WAIT
            else:
                c = OTHER
            category[i] = c
            idle[i] = max(ge - gs, 0)
            totals[g, c] += idle[i]
            counts[g, c] += 1
    return category, idle, totals, counts


def gap_categories(
    bounds: I64, records: Records, syncs: Spans, group_sync: I64, kernel_wait_ns: int
) -> tuple[npt.NDArray[np.int8], I64, I64, I64]:
    """Category of the gap before each record (host_wait 0, kernel_wait 1, sync_wait 2, other 3).

    Gap before record i of a stream = [end of record i-1, start of record i). host_wait: its launch
    started after the previous record ended; kernel_wait: shorter than kernel_wait_ns; sync_wait: a
    sync span of the stream's rank overlaps the gap (the last span starting at or before gap end - 1
    ends after gap start); else other.

    Args:
        bounds: int64[n_groups + 1]: stream group g is records bounds[g]:bounds[g+1].
        records: Records sorted by (group, start).
        syncs: Spans per rank group.
        group_sync: int64 rank group (row of syncs.bounds) per stream group, -1 without sync spans.
        kernel_wait_ns: threshold of kernel_wait.

    Returns:
        (category int8 per record, -1 for each stream's first; idle ns per record (gap clipped at 0);
        idle ns [n_groups, 4]; gaps [n_groups, 4]).
    """
    rec = Records(*(_as64(a) for a in records))
    spans = Spans(*(_as64(a) for a in syncs))
    bounds, group_sync = _as64(bounds), _as64(group_sync)
    if not _gap_categories.skips_numba(max(rec.start.size, spans.start.size)):
        return _gap_categories(bounds, rec, spans, group_sync, int(kernel_wait_ns))
    return _gap_categories_numpy(bounds, rec, spans, group_sync, int(kernel_wait_ns))


def _gap_categories_numpy(
    bounds: I64, rec: Records, syncs: Spans, group_sync: I64, kernel_wait_ns: int
) -> tuple[npt.NDArray[np.int8], I64, I64, I64]:
    """The numpy twin of _gap_categories: every gap at once, the sync spans searched rank group by rank group."""
    n_groups = bounds.size - 1
    sizes = np.diff(bounds)
    group = np.repeat(np.arange(n_groups, dtype=np.int64), sizes)
    row = np.arange(bounds[0], bounds[-1], dtype=np.int64)
    later = row != np.repeat(bounds[:-1], sizes)  # every row but its group's first has a gap before it
    row, group = row[later], group[later]
    gap_start, gap_end, api = rec.end[row - 1], rec.start[row], rec.api_start[row]
    category = np.full(row.size, OTHER, np.int8)
    rank = group_sync[group]
    synced = np.flatnonzero(rank >= 0)
    by_rank = synced[np.argsort(rank[synced], kind="stable")]  # each rank's gaps once, not a scan per rank
    ranks, firsts = np.unique(rank[by_rank], return_index=True)
    cuts = np.append(firsts, by_rank.size).tolist()
    for r, lo, hi in zip(ranks.tolist(), cuts[:-1], cuts[1:], strict=True):
        a, b = int(syncs.bounds[r]), int(syncs.bounds[r + 1])
        if b == a:
            continue
        mine = by_rank[lo:hi]
        j = a + np.searchsorted(syncs.start[a:b], gap_end[mine] - 1, side="right") - 1
        hit = (j >= a) & (syncs.end[np.maximum(j, 0)] > gap_start[mine])
        category[mine[hit]] = SYNC_WAIT
    category[gap_end - gap_start < kernel_wait_ns] = KERNEL_WAIT
    category[(api != NO_LAUNCH) & (api > gap_start)] = HOST_WAIT
    idle = np.maximum(gap_end - gap_start, 0)
    cell = group * 4 + category
    totals = np.zeros(n_groups * 4, np.int64)
    np.add.at(totals, cell, idle)
    counts = np.bincount(cell, minlength=n_groups * 4).astype(np.int64)
    out_category = np.full(rec.start.size, -1, np.int8)
    out_idle = np.zeros(rec.start.size, np.int64)
    out_category[row], out_idle[row] = category, idle
    return out_category, out_idle, totals.reshape(n_groups, 4), counts.reshape(n_groups, 4)


def _as64(a: npt.ArrayLike) -> I64:
    return np.ascontiguousarray(a, dtype=np.int64)
