"""Which partition of a store is the job's first rank: the one whose median step the job's critical path takes
(critical_path.choose_window: the first (node, rank) with steps). Imports nothing: the rank-by-rank summary picks it
before it imports polars (fleet.early_start)."""

from __future__ import annotations

from collections.abc import Sequence


def first_partition(parts: Sequence[tuple[str, int]]) -> int:
    """The index in `parts` ((node, rank) pairs) of the first rank: the smallest (node, rank) of rank >= 0 (store
    order sorts rank=10 before rank=2), else of any rank."""
    ranked = [i for i, (_, rank) in enumerate(parts) if rank >= 0] or list(range(len(parts)))
    return min(ranked, key=lambda i: parts[i])
