"""Naive pure-Python twin of ktrace.analysis._kernels.longest_path: memoized recursion over predecessors."""

from __future__ import annotations

import sys


def longest_distances(n: int, edges: list[tuple[int, int, int]]) -> list[int]:
    """Longest path length ending at each node (0 for a node without predecessors); edges (src, dst, weight)."""
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for u, v, w in edges:
        preds[v].append((u, w))
    memo: dict[int, int] = {}
    sys.setrecursionlimit(max(1000, 4 * n + 100))

    def dist(v: int) -> int:
        if v not in memo:
            memo[v] = max((dist(u) + w for u, w in preds[v]), default=0)
        return memo[v]

    return [dist(v) for v in range(n)]
