"""Naive pure-Python twins of ktrace.analysis._kernels.queue."""

from __future__ import annotations


def running_depth(group: list[int], delta: list[int]) -> list[int]:
    """Depth after each event: the sum of deltas of the same group up to and including it."""
    return [
        sum(d for g2, d in zip(group[: i + 1], delta[: i + 1], strict=True) if g2 == g) for i, g in enumerate(group)
    ]


def level_stats(
    group: list[int], time: list[int], level: list[int], n_groups: int, threshold: int
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Walk every unit cell of each group's covered time and read the level in force there."""
    wsum, span, above, mx = [0] * n_groups, [0] * n_groups, [0] * n_groups, [0] * n_groups
    for g in range(n_groups):
        pts = [(t, lv) for g2, t, lv in zip(group, time, level, strict=True) if g2 == g]
        if not pts:
            continue
        mx[g] = max(0, max(lv for _, lv in pts))
        for cell in range(pts[0][0], pts[-1][0]):
            lv = [lv for t, lv in pts if t <= cell][-1]
            wsum[g] += lv
            span[g] += 1
            above[g] += lv >= threshold
    return wsum, span, above, mx
