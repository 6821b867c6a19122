"""The passes behind the TUI timeline's track index, as public analysis API (the TUI never imports analysis._kernels).

- ``TrackScan`` / ``ChunkRows`` / ``ScanResult``: one pass over a table's rows, chunk by chunk: track key ids, rows
  per track, a coarse busy overview (see analysis._kernels.track_scan).
- ``copy_into`` / ``take_into``: fill a slice of a preallocated int64 array from one chunk, without the GIL.
- ``sort_by_track(track, start, n_tracks) -> (order, offsets)``: rows grouped by track, stably sorted by start.
- ``track_arrays(order, offsets, start, end, colour, split) -> TrackArrays``: per track, the sorted starts/ends,
  running max end, prefix sums and busy time the timeline draws from.

Importing this module compiles nothing; numba is loaded with it (import it in a worker, as the TUI does).
"""

from __future__ import annotations

from ktrace.analysis._kernels.track_scan import ChunkRows, ScanResult, TrackScan, copy_into, take_into
from ktrace.analysis._kernels.tracks import TrackArrays, sort_by_track, track_arrays

__all__ = [
    "ChunkRows",
    "ScanResult",
    "TrackArrays",
    "TrackScan",
    "copy_into",
    "sort_by_track",
    "take_into",
    "track_arrays",
]
