"""The merge and group-scatter numba kernels agree with their naive twins in tests/reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from reference import groups_ref
from reference.kernel_modes import kernel_mode  # noqa: F401  (both paths: Python and numba)

from ktrace.analysis._kernels import merge, scatter

rows = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6)), max_size=60)


@given(rows, st.integers(1, 4))
def test_merge_runs_matches_reference(data: list[tuple[int, int]], runs_per_group: int) -> None:
    # runs: rows of one (group, run) sorted by (key, row); groups made of consecutive runs
    key = [k for _, k in data]
    run_of = [(g, i % runs_per_group) for i, (g, _) in enumerate(data)]
    run_ids = sorted(set(run_of))
    perm: list[int] = []
    run_bounds = [0]
    for r in run_ids:
        perm += sorted((i for i, ro in enumerate(run_of) if ro == r), key=lambda i: (key[i], i))
        run_bounds.append(len(perm))
    groups = sorted({g for g, _ in run_ids})
    group_runs = [0] + [sum(1 for g, _ in run_ids if g <= h) for h in groups]
    got = merge.merge_runs(
        np.array(perm, np.int64),
        np.array(run_bounds, np.int64),
        np.array(group_runs, np.int64),
        np.array(key, np.int64),
    )
    group_bounds = [run_bounds[r] for r in group_runs]
    assert got.tolist() == groups_ref.merge_runs(perm, group_bounds, key)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-(10**12), 10**12), st.integers(0, 10**6)), max_size=60))
def test_duration_groups_matches_reference(data: list[tuple[int, int, int]]) -> None:
    gid = [g for g, _, _ in data]
    start = [s for _, s, _ in data]
    end = [s + d for _, s, d in data]
    count, total, lo, hi, bounds, grouped = scatter.duration_groups(
        np.array(gid, np.int64), np.array(start, np.int64), np.array(end, np.int64), 4
    )
    for g, want in enumerate(groups_ref.duration_groups(gid, start, end, 4)):
        assert grouped[bounds[g] : bounds[g + 1]].tolist() == want
        assert (count[g], total[g]) == (len(want), sum(want))
        if want:
            assert (lo[g], hi[g]) == (min(want), max(want))


@given(
    st.lists(st.tuples(st.integers(-1, 4), st.integers(0, 2), st.integers(0, 10**9)), max_size=60),
    st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 10**6)), min_size=5, max_size=5),
)
def test_launch_groups_matches_reference(records: list[tuple[int, int, int]], api: list[tuple[int, int]]) -> None:
    api_row = [r for r, _, _ in records]
    gid = [g for _, g, _ in records]
    start = [s for _, _, s in records]
    api_start = [a for a, _ in api]
    api_end = [a + d for a, d in api]
    count, queued, totals, maxima, bounds, values = scatter.launch_groups(
        *(np.array(x, np.int64) for x in (api_row, api_start, api_end, start, gid)), 3
    )
    for g, want in enumerate(groups_ref.launch_groups(api_row, api_start, api_end, start, gid, 3)):
        got = list(zip(*(values[j, bounds[g] : bounds[g + 1]].tolist() for j in range(3)), strict=True))
        assert got == want
        assert count[g] == len(want) and queued[g] == sum(1 for _, q, _ in want if q > 0)
        for j in range(3):
            assert totals[j, g] == sum(w[j] for w in want)
            if want:
                assert maxima[j, g] == max(w[j] for w in want)
