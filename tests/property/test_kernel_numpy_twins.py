"""The kernels' numpy twins (taken while numba is not loaded, up to NUMPY_MAX_ROWS rows) give the kernels' own
results: nesting.last_above in any chunk size against a naive scan, and the interval, nesting, sweep and gap
twins against the kernels' Python source on times of the epoch's scale (~1.7e18 ns), where a key mixing group
and time could overflow."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ktrace.analysis import _kernels
from ktrace.analysis._kernels import gaps, intervals, nesting, sweep

EPOCH_NS = 1_764_000_000_000_000_000


@pytest.fixture(autouse=True)
def kernels_as_source() -> Iterator[None]:
    """Small inputs run as the kernels' Python source when NUMPY_MAX_ROWS is -1, as the twins otherwise."""
    before = _kernels.PYTHON_MAX_ROWS, _kernels.NUMPY_MAX_ROWS
    _kernels.PYTHON_MAX_ROWS = 1 << 62
    try:
        yield
    finally:
        _kernels.PYTHON_MAX_ROWS, _kernels.NUMPY_MAX_ROWS = before


def source_and_twin(func: Callable[..., Any], *args: Any) -> tuple[Any, Any]:
    """`func(*args)` through the kernel's Python source, then through its numpy twin."""
    _kernels.NUMPY_MAX_ROWS = -1
    source = func(*args)
    _kernels.NUMPY_MAX_ROWS = 1 << 62
    return source, func(*args)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=60),
    st.lists(st.integers(0, 40), max_size=60),
    st.integers(1, 9),
)
def test_last_above_matches_a_scan(rows: list[tuple[int, int]], thresholds: list[int], chunk: int) -> None:
    values = np.array([v for v, _ in rows], np.int64)
    n = values.size
    upto = np.sort(np.array([u % (n + 1) - 1 for _, u in rows][: len(thresholds)], np.int64))
    limit = np.array(thresholds[: upto.size], np.int64)
    upto = upto[: limit.size]
    floor = np.array([t % (u + 2) for t, u in zip(limit.tolist(), upto.tolist(), strict=True)], np.int64)
    want = [
        next((j for j in range(u, f - 1, -1) if values[j] > t), -1)
        for u, t, f in zip(upto.tolist(), limit.tolist(), floor.tolist(), strict=True)
    ]
    assert nesting.last_above(values, upto, limit, floor, chunk=chunk).tolist() == want


@st.composite
def epoch_intervals(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group, start, end) sorted by (group, start, end descending), times around EPOCH_NS."""
    rows = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 80), st.integers(0, 30)), max_size=40))
    rows = sorted(((g, EPOCH_NS + s, EPOCH_NS + s + d) for g, s, d in rows), key=lambda r: (r[0], r[1], -r[2]))
    arr = np.array(rows, np.int64).reshape(-1, 3)
    return arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy()


@given(epoch_intervals(), st.lists(st.tuples(st.integers(0, 4), st.integers(0, 120)), max_size=40))
def test_twins_match_the_kernels_at_epoch_times(
    ranges: tuple[np.ndarray, np.ndarray, np.ndarray], points: list[tuple[int, int]]
) -> None:
    group, start, end = ranges
    p = np.array(sorted((g, EPOCH_NS + t) for g, t in points), np.int64).reshape(-1, 2)
    assert same(*source_and_twin(intervals.merge_intervals, group, start, end))
    assert same(*source_and_twin(intervals.union_length, group, start, end, 4))
    assert same(*source_and_twin(nesting.enclosing_parents, group, start, end))
    assert same(*source_and_twin(nesting.innermost_enclosing, group, start, end, p[:, 0].copy(), p[:, 1].copy()))
    bounds = np.concatenate([[0], np.cumsum(np.bincount(group, minlength=4))]).astype(np.int64)
    types = (start + end) % 3 - 1
    assert same(*source_and_twin(sweep.type_coverage, bounds, start, end, types, 2))
    launch = np.where(types < 0, gaps.NO_LAUNCH, start - 5 * types)
    syncs = gaps.Spans(np.array([0, 1], np.int64), np.array([EPOCH_NS + 20], np.int64), np.array([EPOCH_NS + 60]))
    records = gaps.Records(start, end, launch)
    group_sync = np.array([0, -1, 0, 0], np.int64)
    assert same(*source_and_twin(gaps.gap_categories, bounds, records, syncs, group_sync, 3))


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 60), st.integers(-30, 30)), max_size=30))
@example([(0, 1, 2), (0, 9, -2), (0, 11, -5), (0, 20, 1)])  # a row ending before it starts after a longer run
def test_interval_twins_match_the_kernels_when_rows_end_before_they_start(rows: list[tuple[int, int, int]]) -> None:
    """An import keeps a clock-skewed record (end < start, e.g. nsys' END before START): the interval twins take the
    kernel's path then, so a summary's numbers do not depend on whether numba was loaded."""
    ordered = sorted(((g, s, s + d) for g, s, d in rows), key=lambda r: (r[0], r[1], -r[2]))
    arr = np.array(ordered, np.int64).reshape(-1, 3)
    group, start, end = arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy()
    assert same(*source_and_twin(intervals.merge_intervals, group, start, end))
    assert same(*source_and_twin(intervals.union_length, group, start, end, 3))
    bounds = np.concatenate([[0], np.cumsum(np.bincount(group, minlength=3))]).astype(np.int64)
    types = (start + end) % 3 - 1
    assert same(*source_and_twin(sweep.type_coverage, bounds, start, end, types, 2))


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 200), st.integers(0, 20), st.booleans()), max_size=50),
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 200), st.integers(1, 30)), max_size=12),
    st.lists(st.integers(-1, 2), min_size=6, max_size=6),
)
def test_gap_twin_matches_the_kernel_over_ranks(
    recs: list[tuple[int, int, int, bool]], spans: list[tuple[int, int, int]], group_sync: list[int]
) -> None:
    """Six device groups on three ranks' sync spans (a group without a rank: -1), each rank's gaps searched in
    its own spans."""
    rows = sorted((g, EPOCH_NS + s, EPOCH_NS + s + d, launched) for g, s, d, launched in recs)
    group = np.array([r[0] for r in rows], np.int64)
    start = np.array([r[1] for r in rows], np.int64)
    end = np.array([r[2] for r in rows], np.int64)
    launch = np.array([r[1] - 3 if r[3] else gaps.NO_LAUNCH for r in rows], np.int64)
    bounds = np.concatenate([[0], np.cumsum(np.bincount(group, minlength=6))]).astype(np.int64)
    by_rank = sorted((r, EPOCH_NS + s, EPOCH_NS + s + d) for r, s, d in spans)
    sync_bounds = np.concatenate([[0], np.cumsum(np.bincount([r for r, _, _ in by_rank], minlength=3))])
    syncs = gaps.Spans(
        sync_bounds.astype(np.int64),
        np.array([s for _, s, _ in by_rank], np.int64),
        np.array([e for _, _, e in by_rank], np.int64),
    )
    records = gaps.Records(start, end, launch)
    assert same(*source_and_twin(gaps.gap_categories, bounds, records, syncs, np.array(group_sync, np.int64), 4))


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(-20, 150), st.integers(0, 40)), max_size=40),
    st.integers(-10, 30),
    st.integers(1, 25),
    st.integers(1, 8),
    st.booleans(),
)
def test_busy_per_bin_twin_matches_the_kernel(
    rows: list[tuple[int, int, int]], t0: int, bin_ns: int, n_bins: int, merged: bool
) -> None:
    """Disjoint intervals per group (merge_intervals' output, as the callers pass) binned at epoch-scale times, in
    any order; overlapping ones (outside the contract) too: then the twin declines and the kernel runs."""
    group = np.array([g for g, _, _ in rows], np.int64)
    start = np.array([EPOCH_NS + s for _, s, _ in rows], np.int64)
    end = start + np.array([d for _, _, d in rows], np.int64)
    if merged:
        order = np.lexsort((start, group))
        group, start, end = intervals.merge_intervals(group[order], start[order], end[order])
        group, start, end = group[::-1].copy(), start[::-1].copy(), end[::-1].copy()  # any order
    args = (group, start, end, EPOCH_NS + t0, bin_ns, n_bins, 4)
    assert same(*source_and_twin(intervals.busy_per_bin, *args))
