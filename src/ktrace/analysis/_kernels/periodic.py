"""numba kernel of the inferred steps: how regular each group's start-to-start intervals are.

Public typed wrapper:

- ``gap_spread(ordered, bounds) -> cv[n_groups]``: per contiguous group ordered[bounds[g]:bounds[g+1]] (start
  times, non-decreasing), the coefficient of variation (sample std / mean) of the differences between
  consecutive starts; NaN with fewer than two differences or a zero mean.

Below KTRACE_NUMPY_KERNEL_ROWS starts, while numba is not loaded, a numpy twin gives the same floats (a step-less
or many-rank summary of more than 20,000 kernels then loads no numba for it): the kernel sums each group's
differences exactly (integers below 2**53) and its squared deviations one after another, as the twin does.
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
    if _gap_spread.skips_numba(ordered.size) and (twin := _gap_spread_numpy(ordered, bounds)) is not None:
        return twin
    cv: F64 = _gap_spread(ordered, bounds)
    return cv


SHORT_GROUP = 32
"""_sequential_sums adds up runs of at most this many values side by side (one numpy step per position), longer
runs one at a time."""


def _gap_spread_numpy(ordered: I64, bounds: I64) -> F64 | None:
    """The kernel's floats in numpy; None (the kernel runs) where a group spans 2**53 ns or more or its starts go
    back: there the kernel's running total of the differences is no longer the exact span."""
    cv = np.full(bounds.size - 1, np.nan)
    count = np.diff(bounds) - 1  # each group's differences
    groups = np.flatnonzero(count >= 2)
    if groups.size == 0:
        return cv
    k, first = count[groups], bounds[:-1][groups]
    span = ordered[first + k] - ordered[first]
    at = np.arange(int(k.sum()), dtype=np.int64) + np.repeat(first - _run_starts(k), k)  # each difference's start
    differences = ordered[at + 1] - ordered[at]
    if span.max() >= 1 << 53 or differences.min() < 0:
        return None
    mean = span / k  # the kernel's running total: exact integers below 2**53
    deviation = differences - np.repeat(mean, k)
    squares = _sequential_sums(deviation * deviation, k)
    spread = mean != 0.0
    cv[groups[spread]] = np.sqrt(squares[spread] / (k[spread] - 1)) / mean[spread]
    return cv


def _run_starts(lengths: I64) -> I64:
    return np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)


def _sequential_sums(values: F64, lengths: I64) -> F64:
    """The sum of each run of `values` (runs of `lengths`, in order), added one after another from 0.0 as the kernel
    does (numpy's own sums pair values up and round differently)."""
    sums = np.zeros(lengths.size)
    starts = _run_starts(lengths)
    for g in np.flatnonzero(lengths > SHORT_GROUP).tolist():
        sums[g] = np.cumsum(values[starts[g] : starts[g] + lengths[g]])[-1]
    short = np.flatnonzero(lengths <= SHORT_GROUP)
    short = short[np.argsort(-lengths[short], kind="stable")]  # longest first: the runs still going are a prefix
    longest_first = lengths[short]
    for position in range(int(longest_first[0]) if short.size else 0):
        going = short[: int(np.count_nonzero(longest_first > position))]
        sums[going] += values[starts[going] + position]
    return sums
