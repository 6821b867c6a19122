"""TraceIndex.launch_rows (one int64 key, fast paths for one rank and for no id 0) against a naive row loop."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ktrace.analysis.columns import dense_ids
from ktrace.analysis.index import TraceIndex
from ktrace.model import TraceBuilder

api_rows = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 4), st.integers(0, 50)), max_size=12)
gpu_rows = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 5)), max_size=12)


@settings(max_examples=80, deadline=None)
@given(api=api_rows, gpu=gpu_rows, one_rank=st.booleans())
def test_launch_rows_match_a_naive_join(
    api: list[tuple[int, int, int]], gpu: list[tuple[int, int]], one_rank: bool
) -> None:
    if one_rank:
        api = [(0, c, s) for _, c, s in api]
        gpu = [(0, c) for _, c in gpu]
    builders = {}
    api_order: list[tuple[int, int, int]] = []  # the api table's rows: rank 0 first, then rank 1
    for rank in (0, 1):
        b = builders[rank] = TraceBuilder(node="n", rank=rank)
        mine = [r for r in api if r[0] == rank]
        api_order += mine
        b.add(
            "api",
            {
                "start_ns": [s for _, _, s in mine],
                "end_ns": [s + 1 for _, _, s in mine],
                "pid": [1] * len(mine),
                "tid": [1] * len(mine),
                "correlation_id": [c for _, c, _ in mine],
                "domain": ["runtime"] * len(mine),
                "name": ["cudaLaunchKernel"] * len(mine),
            },
        )
    gpu_order: list[tuple[int, int]] = []
    for rank in (0, 1):
        mine = [g for g in gpu if g[0] == rank]
        gpu_order += mine
        builders[rank].add(
            "kernels",
            {
                "start_ns": [100] * len(mine),
                "end_ns": [101] * len(mine),
                "device": [0] * len(mine),
                "stream": [7] * len(mine),
                "correlation_id": [c for _, c in mine],
                "name": ["k"] * len(mine),
            },
        )
    from ktrace.model.builder import merge_traces

    trace = merge_traces([builders[0].build(), builders[1].build()])
    expected = []
    for rank, corr in gpu_order:
        hits = [(s, i) for i, (r, c, s) in enumerate(api_order) if r == rank and c == corr and c != 0]
        expected.append(min(hits)[1] if hits else -1)
    assert TraceIndex(trace).launch_rows().tolist() == expected


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(-3, 3)), min_size=1, max_size=40), st.integers(-9, 9))
def test_dense_ids_ignore_constant_columns(rows: list[tuple[int, int]], constant: int) -> None:
    import numpy as np

    a = np.array([r[0] for r in rows], np.int64)
    b = np.array([r[1] for r in rows], np.int64)
    c = np.full(len(rows), constant, np.int64)
    gid, (ua, uc, ub) = dense_ids([a, c, b])
    distinct = sorted(set(rows))
    assert gid.tolist() == [distinct.index(r) for r in rows]
    assert list(zip(ua.tolist(), uc.tolist(), ub.tolist(), strict=True)) == [(x, constant, y) for x, y in distinct]


@given(st.lists(st.sampled_from([7, 2**40, -(2**35)]), min_size=1, max_size=30), st.booleans())
def test_dense_ids_of_wide_values_need_no_lookup_table(values: list[int], with_constants: bool) -> None:
    """Ids spread over 2**40 (wide stream or thread ids) are hashed, never given an arange of their width."""
    import numpy as np

    wide = np.array(values, np.int64)
    columns = [np.zeros(wide.size, np.int64), np.zeros(wide.size, np.int64), wide] if with_constants else [wide]
    gid, parts = dense_ids(columns)
    distinct = sorted(set(values))
    assert gid.tolist() == [distinct.index(v) for v in values]
    assert parts[-1].tolist() == distinct


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 4), st.integers(0, 6), st.integers(0, 6)), max_size=20))
def test_launch_runs_match_a_naive_grouping(records: list[tuple[int, int, int]]) -> None:
    """build_launch_runs: one entry per launching api row (first record by start then index, last end, count)."""
    import numpy as np

    from ktrace.analysis.launch_join import build_launch_runs

    rows = np.array([r for r, _, _ in records], np.int64)
    start = np.array([s for _, s, _ in records], np.int64)
    end = start + np.array([d for _, _, d in records], np.int64)
    calls: dict[int, list[int]] = {}
    for i, r in enumerate(rows.tolist()):
        if r >= 0:
            calls.setdefault(r, []).append(i)
    expected = sorted(
        (min(members, key=lambda i: (start[i], i)), max(end[members].tolist()), len(members))
        for members in calls.values()
    )
    runs = build_launch_runs(rows, start, end)
    got = list(zip(runs.first.tolist(), runs.last_end.tolist(), runs.records.tolist(), strict=True))
    assert got == expected
    assert runs.fans_out == any(len(m) > 1 for m in calls.values())
