"""numba kernels for the timeline's track index: dense key ids, coarse busy bins, rows grouped and sorted per track.

Public typed wrappers (numpy in, numpy out); all run without the GIL so the TUI's loader worker never stalls it:

- ``key_ids(a, b, c, d, e) -> (ids int32[n], first_row int64[k])``: a dense id per distinct key tuple, in order of
  first appearance (a key column given as a length-1 array is a constant).
- ``take(lut, codes) -> lut[codes]`` as int64 (a gather that does not hold the GIL).
- ``concat(a, b) -> a ++ b`` as int64.
- ``overview_bins(ids, remap, start, end, codes, lut, n_tracks, t0, bin_ns, n_bins) -> OverviewBins``: per
  track (remap[ids]) and time bin, covered ns and the colour (lut[codes]) of the first/last slice starting in it.
- ``sort_by_track(track, start, n_tracks) -> (order, offsets)``: rows grouped by track, stably sorted by start.
- ``track_arrays(order, offsets, start, end, colour, split) -> TrackArrays``: the sorted per-slice arrays.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
I8 = npt.NDArray[np.int8]
AnyInt = npt.NDArray[np.integer]


@jit
def _hash(k0: int, k1: int, k2: int, k3: int, k4: int) -> int:  # pragma: no cover - numba
    # shifts and xors only: no multiplication, so no overflow warning when the JIT is disabled
    h = k0 ^ (k1 << 11) ^ (k2 << 23) ^ (k3 << 37) ^ (k4 << 49)
    h ^= (h >> 17) ^ (k1 >> 5) ^ (k3 >> 9)
    h ^= h >> 31
    return h


@jit
def _key_ids(a: AnyInt, b: AnyInt, c: AnyInt, d: AnyInt, e: AnyInt) -> tuple[I32, I64]:  # pragma: no cover
    n = max(a.size, b.size, c.size, d.size, e.size)
    ids = np.empty(n, np.int32)
    cap = 64
    slots = np.full(cap, -1, np.int64)
    keys = np.empty((cap, 5), np.int64)
    first = np.empty(cap, np.int64)
    count = 0
    prev = -1
    for i in range(n):
        k0 = np.int64(a[min(i, a.size - 1)])
        k1 = np.int64(b[min(i, b.size - 1)])
        k2 = np.int64(c[min(i, c.size - 1)])
        k3 = np.int64(d[min(i, d.size - 1)])
        k4 = np.int64(e[min(i, e.size - 1)])
        if prev >= 0 and keys[prev, 0] == k0 and keys[prev, 1] == k1 and keys[prev, 2] == k2 \
                and keys[prev, 3] == k3 and keys[prev, 4] == k4:
            ids[i] = prev
            continue
        mask = cap - 1
        slot = _hash(k0, k1, k2, k3, k4) & mask
        while True:
            j = slots[slot]
            if j < 0:
                break
            if keys[j, 0] == k0 and keys[j, 1] == k1 and keys[j, 2] == k2 and keys[j, 3] == k3 and keys[j, 4] == k4:
                break
            slot = (slot + 1) & mask
        if j < 0:
            j = count
            keys[j, 0], keys[j, 1], keys[j, 2], keys[j, 3], keys[j, 4] = k0, k1, k2, k3, k4
            first[j] = i
            slots[slot] = j
            count += 1
            if 2 * count >= cap:  # grow and rehash
                cap *= 2
                mask = cap - 1
                slots = np.full(cap, -1, np.int64)
                grown = np.empty((cap, 5), np.int64)
                grown[:count] = keys[:count]
                keys = grown
                grown_first = np.empty(cap, np.int64)
                grown_first[:count] = first[:count]
                first = grown_first
                for q in range(count):
                    s = _hash(keys[q, 0], keys[q, 1], keys[q, 2], keys[q, 3], keys[q, 4]) & mask
                    while slots[s] >= 0:
                        s = (s + 1) & mask
                    slots[s] = q
        ids[i] = j
        prev = j
    return ids, first[:count].copy()


def key_ids(a: AnyInt, b: AnyInt, c: AnyInt, d: AnyInt, e: AnyInt) -> tuple[I32, I64]:
    """A dense id per distinct tuple (a[i], b[i], c[i], d[i], e[i]), numbered in order of first appearance.

    Args:
        a: integer key column (length n, or 1 for a constant); likewise b, c, d and e.
        b: second key column.
        c: third key column.
        d: fourth key column.
        e: fifth key column.

    Returns:
        (ids, first_row): int32 id per row, and for each id the row where its key first appears.
    """
    cols = [np.ascontiguousarray(x) for x in (a, b, c, d, e)]
    if any(x.size == 0 for x in cols):
        return np.empty(0, np.int32), np.empty(0, np.int64)
    return _key_ids(*cols)


@jit
def _take(lut: I64, codes: AnyInt) -> I64:  # pragma: no cover - numba
    out = np.empty(codes.size, np.int64)
    for i in range(codes.size):
        out[i] = lut[codes[i]]
    return out


def take(lut: I64, codes: AnyInt) -> I64:
    """lut[codes] as int64, without holding the GIL (numpy's fancy indexing may hold it for long stretches).

    Args:
        lut: int64 lookup table.
        codes: integer indices into lut (0 <= code < lut.size).

    Returns:
        int64 array of codes.size values.
    """
    return _take(np.ascontiguousarray(lut, np.int64), np.ascontiguousarray(codes))


@jit
def _concat(a: AnyInt, b: AnyInt) -> I64:  # pragma: no cover - numba
    out = np.empty(a.size + b.size, np.int64)
    for i in range(a.size):
        out[i] = a[i]
    for i in range(b.size):
        out[a.size + i] = b[i]
    return out


def concat(a: AnyInt, b: AnyInt) -> I64:
    """a followed by b, as int64 (a copy that does not hold the GIL).

    Args:
        a: first integer array.
        b: second integer array.

    Returns:
        int64 array of a.size + b.size values.
    """
    return _concat(np.ascontiguousarray(a), np.ascontiguousarray(b))


@jit
def _overview_bins(ids: AnyInt, remap: I64, start: I64, end: I64, codes: AnyInt, lut: I64, n_tracks: int, t0: int,
                   bin_ns: int, n_bins: int) -> tuple[I64, I64, I64, I64]:  # pragma: no cover - numba
    counts = np.zeros(n_tracks, np.int64)
    busy = np.zeros((n_tracks, n_bins), np.int64)
    full = np.zeros((n_tracks, n_bins + 1), np.int64)
    first_colour = np.full((n_tracks, n_bins), -1, np.int64)
    last_colour = np.full((n_tracks, n_bins), -1, np.int64)
    first_start = np.zeros((n_tracks, n_bins), np.int64)
    last_start = np.zeros((n_tracks, n_bins), np.int64)
    t1 = t0 + bin_ns * n_bins
    for i in range(start.size):
        t, s, e = remap[ids[i]], start[i], end[i]
        counts[t] += 1
        if t0 <= s < t1:
            b = (s - t0) // bin_ns
            if first_colour[t, b] < 0 or s < first_start[t, b]:
                first_start[t, b] = s
                first_colour[t, b] = lut[codes[i]]
            if last_colour[t, b] < 0 or s >= last_start[t, b]:
                last_start[t, b] = s
                last_colour[t, b] = lut[codes[i]]
        s, e = max(s, t0), min(e, t1)
        if e <= s:
            continue
        b0 = (s - t0) // bin_ns
        b1 = (e - 1 - t0) // bin_ns
        if b0 == b1:
            busy[t, b0] += e - s
        else:
            busy[t, b0] += t0 + (b0 + 1) * bin_ns - s
            busy[t, b1] += e - (t0 + b1 * bin_ns)
            full[t, b0 + 1] += 1
            full[t, b1] -= 1
    for t in range(n_tracks):
        run = 0
        for b in range(n_bins):
            run += full[t, b]
            busy[t, b] += run * bin_ns
    return busy, first_colour, last_colour, counts


class OverviewBins(NamedTuple):
    """Per track and time bin (int64[n_tracks, n_bins]), plus rows per track."""

    busy: I64
    """Covered ns: every slice's overlap with the bin (overlapping slices count twice)."""
    first_colour: I64
    """Colour of the slice starting first in the bin (the earliest row among equal starts); -1 if none."""
    last_colour: I64
    """Colour of the slice starting last in the bin (the latest row among equal starts); -1 if none."""
    counts: I64
    """int64[n_tracks]: rows per track."""


def overview_bins(ids: AnyInt, remap: I64, start: I64, end: I64, codes: AnyInt, lut: I64, n_tracks: int,
                  t0: int, bin_ns: int, n_bins: int) -> OverviewBins:
    """Per track and time bin [t0 + b*bin_ns, t0 + (b+1)*bin_ns): covered ns and first/last starting colours.

    One pass over rows in any order; each slice adds its overlap to every bin it covers in O(1) (a difference
    array for the bins it covers whole).

    Args:
        ids: integer key id per slice (from key_ids).
        remap: int64 track id per key id (0 <= track < n_tracks).
        start: int64 slice starts.
        end: int64 slice ends (>= start).
        codes: integer colour code per slice.
        lut: int64 colour seed (>= 0) per code.
        n_tracks: number of tracks.
        t0: start of bin 0.
        bin_ns: bin width (> 0).
        n_bins: number of bins.

    Returns:
        The OverviewBins.
    """
    out = _overview_bins(np.ascontiguousarray(ids), np.ascontiguousarray(remap, np.int64),
                         np.ascontiguousarray(start, np.int64), np.ascontiguousarray(end, np.int64),
                         np.ascontiguousarray(codes), np.ascontiguousarray(lut, np.int64), int(n_tracks), int(t0),
                         max(1, int(bin_ns)), int(n_bins))
    return OverviewBins(*out)


@jit
def _sort_by_track(track: I64, start: I64, n_tracks: int) -> tuple[I64, I64]:  # pragma: no cover - numba
    n = start.size
    offsets = np.zeros(n_tracks + 1, np.int64)
    for i in range(n):
        offsets[track[i] + 1] += 1
    for t in range(n_tracks):
        offsets[t + 1] += offsets[t]
    fill = offsets[:-1].copy()
    order = np.empty(n, np.int64)
    for i in range(n):
        t = track[i]
        order[fill[t]] = i
        fill[t] += 1
    for t in range(n_tracks):
        lo, hi = offsets[t], offsets[t + 1]
        for k in range(lo + 1, hi):
            if start[order[k]] < start[order[k - 1]]:
                seg = order[lo:hi].copy()
                keys = np.empty(hi - lo, np.int64)
                for q in range(hi - lo):
                    keys[q] = start[seg[q]]
                idx = np.argsort(keys, kind="mergesort")
                for q in range(hi - lo):
                    order[lo + q] = seg[idx[q]]
                break
    return order, offsets


def sort_by_track(track: I64, start: I64, n_tracks: int) -> tuple[I64, I64]:
    """Rows grouped by track (ascending id), each group stably sorted by start.

    Args:
        track: int64 track id per row (0 <= id < n_tracks).
        start: int64 start per row.
        n_tracks: number of tracks.

    Returns:
        (order, offsets): row indices, and int64[n_tracks + 1] bounds: track t is order[offsets[t]:offsets[t+1]].
    """
    return _sort_by_track(np.ascontiguousarray(track, np.int64), np.ascontiguousarray(start, np.int64),
                          int(n_tracks))


class TrackArrays(NamedTuple):
    """Per-slice arrays in `order` (concatenated over tracks); track t is [offsets[t], offsets[t+1])."""

    starts: I64
    ends: I64
    max_end: I64
    """Running maximum of ends within each track."""
    cum_ns: I64
    """Prefix sums of durations, n + n_tracks long: track t's (len + 1) sums start at offsets[t] + t."""
    colour: I64
    rows: I64
    """Row in the source table (order minus `split` for rows of the second table)."""
    table: I8
    """0 for rows < split, 1 for the others."""
    pos: I64
    """Inverse: position within its track of every input row (input row order)."""
    busy_ns: I64
    """Union length of each track's slices."""


@jit
def _track_arrays(order: I64, offsets: I64, start: I64, end: I64, colour: I64, split: int) -> tuple[
        I64, I64, I64, I64, I64, I64, I8, I64, I64]:  # pragma: no cover - numba
    n = order.size
    n_tracks = offsets.size - 1
    s_out, e_out, m_out = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    cum = np.zeros(n + n_tracks, np.int64)
    c_out, rows, pos = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    table = np.zeros(n, np.int8)
    busy = np.zeros(n_tracks, np.int64)
    for t in range(n_tracks):
        lo, hi = offsets[t], offsets[t + 1]
        run_max = np.int64(0)
        total = np.int64(0)
        union = np.int64(0)
        cum[lo + t] = 0
        for k in range(lo, hi):
            r = order[k]
            s, e = start[r], end[r]
            s_out[k], e_out[k], c_out[k] = s, e, colour[r]
            if k == lo:
                union += e - s if e > s else 0
                run_max = e
            else:
                lo_edge = s if s > run_max else run_max
                union += e - lo_edge if e > lo_edge else 0
                run_max = e if e > run_max else run_max
            m_out[k] = run_max
            total += e - s
            cum[k + t + 1] = total
            if r >= split:
                rows[k] = r - split
                table[k] = 1
            else:
                rows[k] = r
            pos[r] = k - lo
        busy[t] = union
    return s_out, e_out, m_out, cum, c_out, rows, table, pos, busy


def track_arrays(order: I64, offsets: I64, start: I64, end: I64, colour: I64, split: int) -> TrackArrays:
    """Gather per-slice arrays in track order, with running max of ends, prefix sums and each track's busy union.

    Args:
        order: row indices grouped by track (from sort_by_track).
        offsets: int64[n_tracks + 1] track bounds in order.
        start: int64 start per input row.
        end: int64 end per input row.
        colour: int64 colour seed per input row.
        split: rows >= split come from a second table (their `rows` are counted from split, `table` is 1).

    Returns:
        The TrackArrays.
    """
    out = _track_arrays(np.ascontiguousarray(order, np.int64), np.ascontiguousarray(offsets, np.int64),
                        np.ascontiguousarray(start, np.int64), np.ascontiguousarray(end, np.int64),
                        np.ascontiguousarray(colour, np.int64), int(split))
    return TrackArrays(*out)
