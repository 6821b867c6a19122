"""periodic.gap_spread: its numpy twin gives the kernel's Python source's floats bit for bit (groups short and long,
ties, zero gaps), and both agree with the naive twin in tests/reference to rounding."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st
from reference import periodic_ref

from ktrace.analysis import _kernels
from ktrace.analysis._kernels import periodic

EPOCH_NS = 1_764_000_000_000_000_000

starts = st.lists(st.integers(0, 5_000), max_size=80).map(sorted)


def _source_and_twin(ordered: np.ndarray, bounds: np.ndarray) -> list[np.ndarray]:
    """gap_spread as the kernel's Python source (no twin, no numba), then as its numpy twin."""
    settings = _kernels.PYTHON_MAX_ROWS, _kernels.NUMPY_MAX_ROWS
    runs = []
    try:
        for numpy_rows in (-1, 1 << 62):
            _kernels.PYTHON_MAX_ROWS, _kernels.NUMPY_MAX_ROWS = 1 << 62, numpy_rows
            runs.append(periodic.gap_spread(ordered, bounds))
    finally:
        _kernels.PYTHON_MAX_ROWS, _kernels.NUMPY_MAX_ROWS = settings
    return runs


@given(st.lists(starts, max_size=12), st.integers(0, 10**6))
@example([[i * i + i % 3 for i in range(40)], [5, 5, 5], [1, 2], [3, 9, 10, 100]], 0)  # one group past SHORT_GROUP
def test_the_twin_gives_the_kernels_floats(groups: list[list[int]], shift: int) -> None:
    ordered = np.array([EPOCH_NS + shift + t for g in groups for t in g], np.int64)
    bounds = np.concatenate(([0], np.cumsum([len(g) for g in groups]))).astype(np.int64)
    source, twin = _source_and_twin(ordered, bounds)
    np.testing.assert_array_equal(twin, source)  # (NaN where NaN; every other float equal)
    for got, want in zip(twin.tolist(), periodic_ref.gap_spread(groups), strict=True):
        assert (math.isnan(got) and math.isnan(want)) or math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)


def test_a_group_spanning_2_pow_53_ns_leaves_it_to_the_kernel() -> None:
    ordered = np.array([0, 1 << 52, 1 << 53], np.int64)
    assert periodic._gap_spread_numpy(ordered, np.array([0, 3], np.int64)) is None
    source, twin = _source_and_twin(ordered, np.array([0, 3], np.int64))
    np.testing.assert_array_equal(twin, source)
