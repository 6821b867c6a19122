"""numba kernels for the timeline's track index: dense key ids, coarse busy bins, rows grouped and sorted per track.

Public typed wrappers (numpy in, numpy out); all run without the GIL so the TUI's loader worker never stalls it:

- ``key_ids(a, b, c, d, e) -> (ids int32[n], first_row int64[k])``: a dense id per distinct key tuple, in order of
  first appearance (a key column given as a length-1 array is a constant).
- ``take(lut, codes) -> lut[codes]`` as int64 (a gather that does not hold the GIL).
- ``concat(a, b) -> a ++ b`` as int64.
- ``overview_bins(ids, remap, start, end, codes, lut, n_tracks, t0, bin_ns, n_bins) -> OverviewBins``: per
  track (remap[ids]) and time bin, covered ns and the colour (lut[codes]) of the first/last slice starting in it.

``key_ids`` and ``overview_bins`` are one-array front ends of the chunked scan in track_scan (which the TUI uses).
- ``sort_by_track(track, start, n_tracks) -> (order, offsets)``: rows grouped by track, stably sorted by start.
- ``track_arrays(order, offsets, start, end, colour, split) -> TrackArrays``: the sorted per-slice arrays.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit
from ktrace.analysis._kernels.track_scan import ChunkRows, TrackScan

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
I8 = npt.NDArray[np.int8]
AnyInt = npt.NDArray[np.integer]


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
    n = max(x.size for x in cols)
    scan = TrackScan(n, 0, 1, 1, 0)
    zeros = np.zeros(n, np.int64)
    scan.add(ChunkRows(cols[0], cols[1], cols[2], cols[3], cols[4], zeros, zeros, zeros))
    out = scan.result()
    return out.ids, out.first_row


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


def overview_bins(
    ids: AnyInt,
    remap: I64,
    start: I64,
    end: I64,
    codes: AnyInt,
    lut: I64,
    n_tracks: int,
    t0: int,
    bin_ns: int,
    n_bins: int,
) -> OverviewBins:
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
    track = take(remap, ids)
    codes = np.ascontiguousarray(codes)
    scan = TrackScan(track.size, t0, bin_ns, n_bins, int(codes.max()) if codes.size else 0)
    one = np.zeros(1, np.int64)
    scan.add(
        ChunkRows(
            track, one, one, one, one, np.ascontiguousarray(start, np.int64), np.ascontiguousarray(end, np.int64), codes
        )
    )
    found = scan.result()
    by_key = found.keys[:, 0]
    lut = np.ascontiguousarray(lut, np.int64)
    out = OverviewBins(
        np.zeros((n_tracks, n_bins), np.int64),
        np.full((n_tracks, n_bins), -1, np.int64),
        np.full((n_tracks, n_bins), -1, np.int64),
        np.zeros(n_tracks, np.int64),
    )
    out.busy[by_key] = found.busy
    out.first_colour[by_key] = np.where(found.first_code >= 0, lut[np.maximum(found.first_code, 0)], -1)
    out.last_colour[by_key] = np.where(found.last_code >= 0, lut[np.maximum(found.last_code, 0)], -1)
    out.counts[by_key] = found.counts
    return out


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
    return _sort_by_track(np.ascontiguousarray(track, np.int64), np.ascontiguousarray(start, np.int64), int(n_tracks))


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
def _track_arrays(
    order: I64, offsets: I64, start: I64, end: I64, colour: I64, split: int
) -> tuple[I64, I64, I64, I64, I64, I64, I8, I64, I64]:  # pragma: no cover - numba
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
    out = _track_arrays(
        np.ascontiguousarray(order, np.int64),
        np.ascontiguousarray(offsets, np.int64),
        np.ascontiguousarray(start, np.int64),
        np.ascontiguousarray(end, np.int64),
        np.ascontiguousarray(colour, np.int64),
        int(split),
    )
    return TrackArrays(*out)
