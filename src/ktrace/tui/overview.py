"""A coarse overview of every slice track (busy ns and colours per fixed time bin), drawn until tracks are indexed.

Built in one pass over the unsorted rows (ktrace.analysis.timeline_tracks.TrackScan), it lets the first screen
appear long before every track is sorted. Drawing a row from it costs O(width) whatever the number of slices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ktrace.tui.viewmodel import LEVELS, SOLID, RowPaint, Viewport

N_BINS = 4096
"""Bins over the trace's span: about 20 per column of a fitted 200-column timeline."""


@dataclass(frozen=True)
class Overview:
    """Per track and bin: cumulative busy ns, first starting colour, and the colour carried in from the left."""

    t0: int
    bin_ns: int
    cum_busy: NDArray[np.float64]
    """(tracks, bins + 1): busy ns of bins [0, b) (slices overlapping each other count twice)."""
    first_colour: NDArray[np.int64]
    """(tracks, bins): colour of the first slice starting in the bin, -1 if none."""
    carried: NDArray[np.int64]
    """(tracks, bins + 1): colour of the last slice starting in an earlier bin, -1 if none."""
    next_start: NDArray[np.int64]
    """(tracks, bins + 1): the first bin >= b where a slice starts (bins if none)."""

    @property
    def n_bins(self) -> int:
        """Number of bins."""
        return int(self.first_colour.shape[1])

    @classmethod
    def from_bins(
        cls,
        t0: int,
        bin_ns: int,
        busy: NDArray[np.int64],
        first_colour: NDArray[np.int64],
        last_colour: NDArray[np.int64],
    ) -> Overview:
        """The overview from overview_bins' (busy, first_colour, last_colour) arrays."""
        n_tracks, n_bins = busy.shape
        cum = np.zeros((n_tracks, n_bins + 1), np.float64)
        np.cumsum(busy, axis=1, out=cum[:, 1:])
        bins = np.arange(n_bins + 1, dtype=np.int64)
        has_last = np.concatenate((np.zeros((n_tracks, 1), bool), last_colour >= 0), axis=1)
        last_bin = np.maximum.accumulate(np.where(has_last, bins, 0), axis=1)
        padded_last = np.concatenate((np.full((n_tracks, 1), -1, np.int64), last_colour), axis=1)
        carried = np.take_along_axis(padded_last, last_bin, axis=1)
        has_first = np.concatenate((first_colour >= 0, np.ones((n_tracks, 1), bool)), axis=1)
        rev = np.where(has_first, bins, n_bins)[:, ::-1]
        next_start = np.minimum.accumulate(rev, axis=1)[:, ::-1]
        return cls(int(t0), int(bin_ns), cum, first_colour, carried, np.ascontiguousarray(next_start))


def paint_overview(ov: Overview, track_id: int, vp: Viewport) -> RowPaint:
    """Cells of a not-yet-indexed track from the overview: the same glyphs as paint_track, at bin resolution.

    A bin's starts are drawn in the column holding the bin's left edge; its busy time is spread evenly over it.
    """
    bounds = vp.bounds()
    n_bins = ov.n_bins
    x = np.clip((bounds - ov.t0) / ov.bin_ns, 0.0, float(n_bins))
    cum = np.interp(x, np.arange(n_bins + 1, dtype=np.float64), ov.cum_busy[track_id])
    col_ns = np.maximum(1, bounds[1:] - bounds[:-1])
    frac = np.minimum(1.0, np.maximum(0.0, cum[1:] - cum[:-1]) / col_ns)
    lo = np.ceil(x[:-1]).astype(np.int64)
    hi = np.ceil(x[1:]).astype(np.int64)
    nxt = ov.next_start[track_id][lo]
    starting = nxt < hi
    first = ov.first_colour[track_id][np.minimum(nxt, n_bins - 1)]
    carried = np.maximum(ov.carried[track_id][lo], 0)
    colour = np.where(starting, first, np.where(frac > 0, carried, -1)).astype(np.int64)
    busy = (frac > 0) | starting
    level = np.where(busy, np.maximum(1, np.round(frac * 8)).astype(np.int64), 0)
    glyphs = [LEVELS[v] for v in level.tolist()]
    return RowPaint(glyphs, colour, busy & (frac >= SOLID), [])
