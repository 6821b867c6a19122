"""Naive pure-Python twins of ktrace.analysis._kernels.tracks (dicts and sorted(), one loop per definition)."""

from __future__ import annotations


def key_ids(rows: list[tuple[int, ...]]) -> tuple[list[int], list[int]]:
    """Dense ids in order of first appearance, and the first row of each id."""
    seen: dict[tuple[int, ...], int] = {}
    first: list[int] = []
    ids = []
    for i, key in enumerate(rows):
        if key not in seen:
            seen[key] = len(seen)
            first.append(i)
        ids.append(seen[key])
    return ids, first


def overview_bins(
    track: list[int],
    start: list[int],
    end: list[int],
    colour: list[int],
    n_tracks: int,
    t0: int,
    bin_ns: int,
    n_bins: int,
) -> tuple[list[list[int]], list[list[int]], list[list[int]], list[int]]:
    """Covered unit cells per bin (counted once per slice), first/last starting colour per bin, rows per track."""
    busy = [[0] * n_bins for _ in range(n_tracks)]
    first = [[-1] * n_bins for _ in range(n_tracks)]
    last = [[-1] * n_bins for _ in range(n_tracks)]
    starts: list[list[list[tuple[int, int, int]]]] = [[[] for _ in range(n_bins)] for _ in range(n_tracks)]
    counts = [0] * n_tracks
    for i, (t, s, e, c) in enumerate(zip(track, start, end, colour, strict=True)):
        counts[t] += 1
        for cell in range(s, e):
            b = (cell - t0) // bin_ns
            if cell >= t0 and b < n_bins:
                busy[t][b] += 1
        b = (s - t0) // bin_ns
        if s >= t0 and b < n_bins:
            starts[t][b].append((s, i, c))
    for t in range(n_tracks):
        for b in range(n_bins):
            if starts[t][b]:
                first[t][b] = min(starts[t][b])[2]
                last[t][b] = max(starts[t][b])[2]
    return busy, first, last, counts


def sort_by_track(track: list[int], start: list[int], n_tracks: int) -> tuple[list[int], list[int]]:
    """Rows sorted by (track, start, row), and the bounds of each track."""
    order = sorted(range(len(track)), key=lambda i: (track[i], start[i], i))
    offsets = [0]
    for t in range(n_tracks):
        offsets.append(offsets[-1] + sum(1 for x in track if x == t))
    return order, offsets


def busy_union(start: list[int], end: list[int]) -> int:
    """Covered unit cells of some slices."""
    cells: set[int] = set()
    for s, e in zip(start, end, strict=True):
        cells.update(range(s, e))
    return len(cells)


def first_row_of_codes(codes: list[int], size: int) -> list[int]:
    """The first row holding each code 0..size-1, -1 where a code never occurs."""
    out = [-1] * size
    for i, c in enumerate(codes):
        if out[c] < 0:
            out[c] = i
    return out
