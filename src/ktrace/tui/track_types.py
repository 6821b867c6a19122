"""The timeline's row type and what the loader hands over, below every other TUI module (no import cycle).

`Track` is one timeline row's sorted arrays; `BuiltTracks` and `Links` are what the loader worker
(ktrace.tui.index_build) builds and the track index (ktrace.tui.tracks) attaches. The viewmodel, the overview, the
index and the loader all read these types, so they live here rather than in any of them. No textual here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]

TABLE_CODES: tuple[str, ...] = ("kernels", "memory", "api", "ranges", "ops", "syncs")
"""Source table of a slice, by its code in Track.table."""

_EMPTY_I64 = np.empty(0, np.int64)
_EMPTY_I8 = np.empty(0, np.int8)


@dataclass(eq=False)
class Track:
    """One timeline row: sorted slices (or counter samples) and where each came from."""

    key: str
    """Stable id, e.g. "node0/0/gpu0/s7"."""
    label: str
    """Short name for the row head."""
    kind: str
    """"stream", "api", "ranges", "ops" or "counter"."""
    node: str
    rank: int
    starts: NDArray[np.int64]
    """Slice start times (or sample times of a counter), sorted ascending."""
    ends: NDArray[np.int64]
    """Slice end times (equal to starts for a counter)."""
    max_end: NDArray[np.int64]
    """Running maximum of ends: slice i or an earlier one still runs at t iff max_end[i] > t."""
    cum_ns: NDArray[np.int64]
    """Prefix sums of durations (len n + 1): busy time of slices [i, j) is cum_ns[j] - cum_ns[i]."""
    table: NDArray[np.int8]
    """Source table code (TABLE_CODES) per slice."""
    rows: NDArray[np.int64]
    """Row index in the source table per slice."""
    colour: NDArray[np.int64]
    """Colour seed per slice (name dictionary code)."""
    values: NDArray[np.float64] | None = None
    """Counter values (counter tracks only)."""
    busy_ns: int = 0
    """Union of the track's slices in ns (0 for counters; estimated from the overview until ready)."""
    ready: bool = True
    """False while only the overview is known (the arrays above are empty until the loader attaches them)."""
    count: int = 0
    """Number of slices or samples (known before the arrays)."""
    kernel_count: int = 0
    """How many of the slices are kernels."""

    @property
    def size(self) -> int:
        """Number of slices or samples."""
        return int(self.starts.size) if self.ready else self.count


def pending_track(
    key: str, label: str, kind: str, node: str, rank: int, count: int, kernel_count: int, busy_ns: int
) -> Track:
    """A track whose slices are counted but not indexed yet (drawn from the overview meanwhile)."""
    return Track(
        key,
        label,
        kind,
        node,
        rank,
        _EMPTY_I64,
        _EMPTY_I64,
        _EMPTY_I64,
        np.zeros(1, np.int64),
        _EMPTY_I8,
        _EMPTY_I64,
        _EMPTY_I64,
        None,
        busy_ns,
        False,
        count,
        kernel_count,
    )


def make_track(
    key: str,
    label: str,
    kind: str,
    node: str,
    rank: int,
    starts: NDArray[np.int64],
    ends: NDArray[np.int64],
    table: NDArray[np.int8],
    rows: NDArray[np.int64],
    colour: NDArray[np.int64],
    values: NDArray[np.float64] | None = None,
) -> Track:
    """A Track from unsorted slices: sorts by start (stable) and precomputes the running arrays."""
    if starts.size > 1 and bool(np.any(starts[1:] < starts[:-1])):
        order = np.argsort(starts, kind="stable")
        starts, ends, table, rows, colour = starts[order], ends[order], table[order], rows[order], colour[order]
        values = None if values is None else values[order]
    max_end = np.maximum.accumulate(ends) if ends.size else ends
    dur = ends - starts
    cum = np.zeros(starts.size + 1, np.int64)
    np.cumsum(dur, out=cum[1:])
    busy = 0
    if kind != "counter" and starts.size:
        prev = np.concatenate(([starts[0]], max_end[:-1]))
        busy = int(np.maximum(0, ends - np.maximum(starts, prev)).sum())
    return Track(
        key,
        label,
        kind,
        node,
        rank,
        starts,
        ends,
        max_end,
        cum,
        table,
        rows,
        colour,
        values,
        busy,
        True,
        int(starts.size),
        int((table == 0).sum()) if kind != "counter" else 0,
    )


@dataclass
class BuiltTracks:
    """Indexed tracks (global id -> Track) and, per table, (track id, position) of every row."""

    tracks: dict[int, Track]
    place: dict[str, tuple[I64, I64]]


@dataclass
class Links:
    """Correlation lookups: table -> (sorted keys, row order)."""

    corr: dict[str, tuple[I64, I64]]
    node_ids: dict[str, int]
