"""Naive pure-Python twin of ktrace.analysis._kernels.sequences."""

from __future__ import annotations


def first_fit_occurrences(seq: list[int], pos: list[int], length: int) -> list[bool]:
    """For each window in order: kept when no kept earlier window of the same sequence covers its start."""
    kept: list[bool] = []
    for i, (s, p) in enumerate(zip(seq, pos, strict=True)):
        covered = any(kept[j] and seq[j] == s and pos[j] <= p < pos[j] + length for j in range(i))
        kept.append(not covered)
    return kept
