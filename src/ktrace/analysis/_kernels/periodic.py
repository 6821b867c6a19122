"""numba kernel of the inferred steps: how regular each group's start-to-start intervals are.

Public typed wrapper:

- ``gap_spread(ordered, bounds) -> cv[n_groups]``: per contiguous group ordered[bounds[g]:bounds[g+1]] (start
  times, non-decreasing), the coefficient of variation (sample std / mean) of the differences between
  consecutive starts; NaN with fewer than two differences or a zero mean.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@jit
def _gap_spread(ordered: I64, bounds: I64) -> F64:  # pragma: no cover - numba
    n_groups = bounds.size - 1
    cv = np.full(n_groups, np.nan)
    for g in range(n_groups):
        a, b = bounds[g], bounds[g + 1]
        k = b - a - 1
        if k < 2:
            continue
        total = 0.0
        for i in range(a + 1, b):
            total += ordered[i] - ordered[i - 1]
        mean = total / k
        if mean == 0.0:
            continue
        squares = 0.0
        for i in range(a + 1, b):
            d = (ordered[i] - ordered[i - 1]) - mean
            squares += d * d
        cv[g] = np.sqrt(squares / (k - 1)) / mean
    return cv


def gap_spread(ordered: I64, bounds: I64) -> F64:
    """Coefficient of variation of each group's start-to-start intervals (see the module docstring)."""
    cv: F64 = _gap_spread(ordered, bounds)
    return cv
