"""The group, sweep, gap and join numba kernels agree with their naive twins in tests/reference."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import groups_ref
from reference.kernel_modes import kernel_mode  # noqa: F401  (both paths: Python and numba)

from ktrace.analysis._kernels import gaps, groups, joins, sweep
from ktrace.analysis.columns import dense_ids

ints = st.lists(st.integers(-50, 50), min_size=0, max_size=40)


@given(st.lists(st.integers(0, 4), max_size=40))
def test_counting_order_matches_reference(gid: list[int]) -> None:
    for order in (groups.counting_order, groups._counting_order):  # numpy below NUMPY_ORDER_ROWS, the kernel above
        perm, bounds = order(np.array(gid, np.int64), 5)
        assert perm.tolist() == groups_ref.counting_order(gid, 5)
        assert np.diff(bounds).tolist() == [gid.count(g) for g in range(5)] and bounds[0] == 0


@settings(max_examples=60)
@given(
    st.lists(
        st.lists(st.integers(-(10**12), 10**12) | st.integers(0, 9), min_size=1, max_size=6000), min_size=1, max_size=3
    ),
    st.lists(st.floats(0, 1), min_size=1, max_size=4),
)
def test_quantiles_match_reference_and_polars(segments: list[list[int]], qs: list[float]) -> None:
    values = np.array([v for seg in segments for v in seg], np.int64)
    bounds = np.cumsum([0] + [len(s) for s in segments]).astype(np.int64)
    got = groups.linear_quantiles(values, bounds, tuple(qs))
    for g, seg in enumerate(segments):
        for j, q in enumerate(qs):
            assert got[g, j] == groups_ref.linear_quantile(seg, q)
            assert got[g, j] == pl.Series(seg, dtype=pl.Int64).cast(pl.Float64).quantile(q, "linear")


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(-5, 5)), max_size=40))
def test_group_sums_match_reference(rows: list[tuple[int, int]]) -> None:
    gid = np.array([r[0] for r in rows], np.int64)
    val = np.array([r[1] for r in rows], np.int64)
    count, total, lo, hi = groups.group_sums(gid, val, 3)
    for g in range(3):
        vs = [v for h, v in rows if h == g]
        assert count[g] == len(vs) and total[g] == sum(vs)
        if vs:
            assert lo[g] == min(vs) and hi[g] == max(vs)


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(-3, 3)), min_size=1, max_size=40))
def test_dense_ids_number_tuples_in_order(rows: list[tuple[int, int]]) -> None:
    a = np.array([r[0] for r in rows], np.int64)
    b = np.array([r[1] for r in rows], np.int64)
    gid, (ua, ub) = dense_ids([a, b])
    distinct = sorted(set(rows))
    assert gid.tolist() == [distinct.index(r) for r in rows]
    assert list(zip(ua.tolist(), ub.tolist(), strict=True)) == distinct


@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 40), st.integers(0, 10), st.integers(-1, 2)), max_size=20),
        min_size=1,
        max_size=3,
    )
)
def test_type_coverage_matches_reference(groups_rows: list[list[tuple[int, int, int]]]) -> None:
    rows = [sorted(g) for g in groups_rows]
    start = np.array([s for g in rows for s, _, _ in g], np.int64)
    end = start + np.array([d for g in rows for _, d, _ in g], np.int64)
    types = np.array([t for g in rows for _, _, t in g], np.int64)
    bounds = np.cumsum([0] + [len(g) for g in rows]).astype(np.int64)
    got = sweep.type_coverage(bounds, start, end, types, 3)
    for gi, g in enumerate(rows):
        typed = [(s, s + d, t) for s, d, t in g if t >= 0 and d > 0]
        ref = groups_ref.type_coverage(typed, 3)
        # zero-length intervals only widen the swept span: compare busy masks, and idle when none exist
        assert got[gi, 1:].tolist() == ref[1:]
        if all(d > 0 for _, d, t in g if t >= 0):
            assert got[gi, 0] == ref[0]


@given(
    st.lists(
        st.tuples(st.integers(0, 60), st.integers(0, 8), st.one_of(st.none(), st.integers(0, 60))),
        min_size=1,
        max_size=25,
    ),
    st.lists(st.tuples(st.integers(0, 60), st.integers(1, 10)), max_size=5),
    st.integers(0, 6),
)
def test_gap_categories_match_reference(
    recs: list[tuple[int, int, int | None]], raw_syncs: list[tuple[int, int]], kernel_wait: int
) -> None:
    recs = sorted(recs, key=lambda r: r[0])
    start = np.array([r[0] for r in recs], np.int64)
    end = start + np.array([r[1] for r in recs], np.int64)
    api = np.array([gaps.NO_LAUNCH if r[2] is None else r[2] for r in recs], np.int64)
    merged: list[list[int]] = []
    for s, d in sorted(raw_syncs):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], s + d)
        else:
            merged.append([s, s + d])
    spans = gaps.Spans(
        np.array([0, len(merged)], np.int64),
        np.array([m[0] for m in merged], np.int64),
        np.array([m[1] for m in merged], np.int64),
    )
    cat, idle, totals, counts = gaps.gap_categories(
        np.array([0, len(recs)], np.int64), gaps.Records(start, end, api), spans, np.array([0], np.int64), kernel_wait
    )
    syncs = [(m[0], m[1]) for m in merged]
    for i in range(1, len(recs)):
        ref = groups_ref.gap_category(int(end[i - 1]), int(start[i]), recs[i][2], kernel_wait, syncs)
        assert cat[i] == ref
        assert idle[i] == max(int(start[i] - end[i - 1]), 0)
    assert counts.sum() == len(recs) - 1 and cat[0] == -1


@given(
    st.lists(st.integers(0, 6), max_size=30),
    st.lists(st.integers(0, 8), max_size=30),
    ints,
    st.sampled_from([1, 10**9]),
)
def test_lookup_first_matches_reference(keys: list[int], probe: list[int], order: list[int], scale: int) -> None:
    """scale 10**9 spreads the keys past the direct-address table: the sorted path."""
    keys = [k * scale for k in keys]
    probe = [p * scale for p in probe]
    order_by = (order + [0] * len(keys))[: len(keys)]
    got = joins.lookup_first(np.array(keys, np.int64), np.array(order_by, np.int64), np.array(probe, np.int64))
    assert got.tolist() == groups_ref.lookup_first(keys, order_by, probe)
