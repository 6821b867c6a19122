"""Naive twin of ktrace.analysis._kernels.periodic: statistics over each group's list of start-to-start gaps."""

from __future__ import annotations

import math
import statistics


def gap_spread(groups: list[list[int]]) -> list[float]:
    """Per group of start times (non-decreasing): sample std / mean of the consecutive differences; NaN with fewer
    than two differences or a zero mean."""
    out = []
    for starts in groups:
        gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
        mean = statistics.fmean(gaps) if len(gaps) >= 2 else 0.0
        out.append(statistics.stdev(gaps) / mean if mean else math.nan)
    return out
