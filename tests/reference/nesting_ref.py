"""Naive pure-Python twins of ktrace.analysis._kernels.nesting and ktrace.model.nesting.nesting_depth."""

from __future__ import annotations


def innermost_enclosing(
    r_group: list[int], r_start: list[int], r_end: list[int], p_group: list[int], p_time: list[int]
) -> list[int]:
    """For each point, among ranges of its group with start <= t < end, the one starting last
    (ties: the one listed last, i.e. the shorter one given the (start, -end) order); -1 if none."""
    out = []
    for g, t in zip(p_group, p_time, strict=True):
        best = -1
        for j, (rg, rs, re) in enumerate(zip(r_group, r_start, r_end, strict=True)):
            if rg == g and rs <= t < re and (best < 0 or rs >= r_start[best]):
                best = j
        out.append(best)
    return out


def enclosing_parents(group: list[int], start: list[int], end: list[int]) -> list[int]:
    """For each range i (ranges sorted by group, start, -end), the largest j < i of its group with
    end[j] > start[i] (an earlier range still open where i starts); -1 if none."""
    out = []
    for i in range(len(start)):
        best = -1
        for j in range(i):
            if group[j] == group[i] and start[j] <= start[i] < end[j]:
                best = j
        out.append(best)
    return out


def nesting_depth(thread: list[int], start: list[int], end: list[int]) -> list[int]:
    """For properly nested ranges: how many other ranges of the same thread enclose each one (start_j <= start_i
    and end_i <= end_j); of identical ranges, the one listed first encloses the later ones."""
    out = []
    for i, (t, s, e) in enumerate(zip(thread, start, end, strict=True)):
        out.append(
            sum(
                1
                for j, (tj, sj, ej) in enumerate(zip(thread, start, end, strict=True))
                if j != i and tj == t and sj <= s and e <= ej and ((sj, ej) != (s, e) or j < i)
            )
        )
    return out
