"""The interval, nesting and queue numba kernels agree with their naive twins in tests/reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from reference import intervals_ref, nesting_ref, queue_ref
from reference.kernel_modes import kernel_mode  # noqa: F401  (both paths: Python and numba)

from ktrace.analysis._kernels import intervals, nesting, queue

N_GROUPS = 3


@st.composite
def grouped_intervals(draw: st.DrawFn, max_size: int = 25) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Intervals (group, start, end) with small integer times, sorted by (group, start)."""
    rows = draw(
        st.lists(st.tuples(st.integers(0, N_GROUPS - 1), st.integers(0, 60), st.integers(0, 15)), max_size=max_size)
    )
    rows = sorted((g, s, s + d) for g, s, d in rows)
    arr = np.array(rows, dtype=np.int64).reshape(-1, 3)
    return arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy()


@given(grouped_intervals())
def test_merge_intervals_matches_reference(data: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    g, s, e = data
    mg, ms, me = intervals.merge_intervals(g, s, e)
    got = [(a, b, c) for a, b, c in zip(mg.tolist(), ms.tolist(), me.tolist(), strict=True) if c > b]
    ref = intervals_ref.merge_intervals(g.tolist(), s.tolist(), e.tolist())
    # Zero-length intervals cover nothing; touching ones merge in the kernel, as unit cells do.
    assert got == ref


@given(grouped_intervals())
def test_union_length_matches_reference(data: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    g, s, e = data
    got = intervals.union_length(g, s, e, N_GROUPS).tolist()
    assert got == intervals_ref.union_length(g.tolist(), s.tolist(), e.tolist(), N_GROUPS)


@given(grouped_intervals(), st.integers(-10, 30), st.integers(1, 17), st.integers(0, 9))
def test_busy_per_bin_matches_reference(
    data: tuple[np.ndarray, np.ndarray, np.ndarray], t0: int, bin_ns: int, n_bins: int
) -> None:
    g, s, e = intervals.merge_intervals(*data)
    got = intervals.busy_per_bin(g, s, e, t0, bin_ns, n_bins, N_GROUPS).tolist()
    ref = intervals_ref.busy_per_bin(g.tolist(), s.tolist(), e.tolist(), t0, bin_ns, n_bins, N_GROUPS)
    assert got == ref


@given(grouped_intervals(), grouped_intervals())
def test_coverage_by_mask_matches_reference(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> None:
    ga, sa, ea = intervals.merge_intervals(*a)
    gb, sb, eb = intervals.merge_intervals(*b)
    g = np.concatenate([ga, ga, gb, gb])
    t = np.concatenate([sa, ea, sb, eb])
    d = np.concatenate([np.full(ga.size, 1), np.full(ga.size, -1), np.full(gb.size, 2), np.full(gb.size, -2)])
    order = np.lexsort((d, t, g))  # at equal times, ends (negative) first
    g, t, d = g[order], t[order], d[order]
    got = intervals.coverage_by_mask(g, t, d, N_GROUPS, 4).tolist()
    ref = intervals_ref.coverage_by_mask(g.tolist(), t.tolist(), d.tolist(), N_GROUPS, 4)
    assert got == ref


@st.composite
def nested_ranges_and_points(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    rows = draw(st.lists(st.tuples(st.integers(0, N_GROUPS - 1), st.integers(0, 50), st.integers(1, 30)), max_size=20))
    ranges = sorted(((g, s, s + d) for g, s, d in rows), key=lambda r: (r[0], r[1], -r[2]))
    pts = sorted(draw(st.lists(st.tuples(st.integers(0, N_GROUPS - 1), st.integers(-5, 90)), max_size=30)))
    r = np.array(ranges, dtype=np.int64).reshape(-1, 3)
    p = np.array(pts, dtype=np.int64).reshape(-1, 2)
    return r[:, 0].copy(), r[:, 1].copy(), r[:, 2].copy(), p[:, 0].copy(), p[:, 1].copy()


@given(nested_ranges_and_points())
def test_innermost_enclosing_matches_reference(data: tuple[np.ndarray, ...]) -> None:
    rg, rs, re, pg, pt = data
    got = nesting.innermost_enclosing(rg, rs, re, pg, pt).tolist()
    ref = nesting_ref.innermost_enclosing(rg.tolist(), rs.tolist(), re.tolist(), pg.tolist(), pt.tolist())
    # Ranges with equal (start, end) are interchangeable: compare what was found, not which copy.
    assert [(rs[i], re[i]) if i >= 0 else None for i in got] == [(rs[i], re[i]) if i >= 0 else None for i in ref]


@given(st.lists(st.tuples(st.integers(0, N_GROUPS - 1), st.integers(0, 50), st.integers(0, 30)), max_size=25))
def test_enclosing_parents_matches_reference(rows: list[tuple[int, int, int]]) -> None:
    # zero-length ranges included (Kineto writes operators of dur 0): they are never anyone's parent
    ranges = sorted(((g, s, s + d) for g, s, d in rows), key=lambda r: (r[0], r[1], -r[2]))
    arr = np.array(ranges, dtype=np.int64).reshape(-1, 3)
    rg, rs, re = arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy()
    got = nesting.enclosing_parents(rg, rs, re).tolist()
    assert got == nesting_ref.enclosing_parents(rg.tolist(), rs.tolist(), re.tolist())


@st.composite
def queue_events(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = sorted(
        draw(
            st.lists(st.tuples(st.integers(0, N_GROUPS - 1), st.integers(0, 40), st.sampled_from([-1, 1])), max_size=30)
        )
    )
    arr = np.array(rows, dtype=np.int64).reshape(-1, 3)
    return arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy()


@given(queue_events(), st.integers(0, 4))
def test_running_depth_and_level_stats_match_reference(data: tuple[np.ndarray, ...], threshold: int) -> None:
    g, t, d = data
    depth = queue.running_depth(g, d)
    assert depth.tolist() == queue_ref.running_depth(g.tolist(), d.tolist())
    got = [x.tolist() for x in queue.level_stats(g, t, depth, N_GROUPS, threshold)]
    ref = queue_ref.level_stats(g.tolist(), t.tolist(), depth.tolist(), N_GROUPS, threshold)
    assert tuple(got) == ref
