"""Naive pure-Python twins of ktrace.analysis._kernels.intervals (one Python loop per definition)."""

from __future__ import annotations


def merge_intervals(group: list[int], start: list[int], end: list[int]) -> list[tuple[int, int, int]]:
    """Disjoint union per group, by painting a set of covered [t, t+1) unit cells."""
    cells: dict[int, set[int]] = {}
    for g, s, e in zip(group, start, end, strict=True):
        cells.setdefault(g, set()).update(range(s, e))
    out: list[tuple[int, int, int]] = []
    for g in sorted(cells):
        ts = sorted(cells[g])
        i = 0
        while i < len(ts):
            j = i
            while j + 1 < len(ts) and ts[j + 1] == ts[j] + 1:
                j += 1
            out.append((g, ts[i], ts[j] + 1))
            i = j + 1
    return out


def union_length(group: list[int], start: list[int], end: list[int], n_groups: int) -> list[int]:
    """Covered unit cells per group."""
    cells: list[set[int]] = [set() for _ in range(n_groups)]
    for g, s, e in zip(group, start, end, strict=True):
        cells[g].update(range(s, e))
    return [len(c) for c in cells]


def busy_per_bin(
    group: list[int], start: list[int], end: list[int], t0: int, bin_ns: int, n_bins: int, n_groups: int
) -> list[list[int]]:
    """Covered unit cells per bin (the intervals are disjoint within a group)."""
    out = [[0] * n_bins for _ in range(n_groups)]
    for g, s, e in zip(group, start, end, strict=True):
        for t in range(s, e):
            b = (t - t0) // bin_ns
            if t >= t0 and b < n_bins:
                out[g][b] += 1
    return out


def coverage_by_mask(
    group: list[int], time: list[int], delta: list[int], n_groups: int, n_masks: int
) -> list[list[int]]:
    """For every unit time cell between a group's first and last event, the mask of active kinds."""
    out = [[0] * n_masks for _ in range(n_groups)]
    events: dict[int, list[tuple[int, int]]] = {}
    for g, t, d in zip(group, time, delta, strict=True):
        events.setdefault(g, []).append((t, d))
    for g, ev in events.items():
        lo, hi = min(t for t, _ in ev), max(t for t, _ in ev)
        for cell in range(lo, hi):
            mask = sum(d for t, d in ev if t <= cell)
            out[g][mask] += 1
    return out
