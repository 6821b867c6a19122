"""The innermost range per point, chunk by chunk (steps_innermost.innermost_index) and over the trace's ops rows
(op_attribution.innermost_at: ranges as arrays, thread ids, points in chunks), against the naive twins: the same
range for every point, whatever the chunk size, with overlapping, nested, empty and tied ranges."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import nesting_ref
from reference.kernel_modes import kernel_mode  # noqa: F401  (both paths: Python and numba)
from test_kernels_intervals import nested_ranges_and_points

from ktrace.analysis import steps_innermost
from ktrace.analysis.op_attribution import innermost_at
from ktrace.model.builder import TraceBuilder, merge_traces


@given(nested_ranges_and_points(), st.integers(1, 8))
def test_innermost_index_in_chunks_matches_reference(data: tuple[np.ndarray, ...], chunk: int) -> None:
    rg, rs, re, pg, pt = data
    got = steps_innermost.innermost_index(rg, rs, re, pg, pt, chunk).tolist()
    ref = nesting_ref.innermost_enclosing(rg.tolist(), rs.tolist(), re.tolist(), pg.tolist(), pt.tolist())
    # Ranges with equal (start, end) are interchangeable: compare what was found, not which copy.
    assert [(rs[i], re[i]) if i >= 0 else None for i in got] == [(rs[i], re[i]) if i >= 0 else None for i in ref]


def naive_innermost_at(ops: list[tuple[int, int, int, int, bool]], points: list[tuple[int, int, int]]) -> list[int]:
    """ops rows (rank, tid, start, end, selected); points (rank, tid, t): the selected row of the point's thread
    with start <= t < end that starts last, then ends first, then comes last in the table; -1 if none."""
    out = []
    for rank, tid, t in points:
        held = [(s, -e, row) for row, (r, k, s, e, on) in enumerate(ops) if on and (r, k) == (rank, tid) and s <= t < e]
        out.append(max(held)[2] if held else -1)
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 40), st.integers(0, 30), st.booleans()),
        max_size=25,
    ),
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(-5, 80)), max_size=30),
    st.integers(1, 8),
)
def test_innermost_at_matches_naive(
    rows: list[tuple[int, int, int, int, bool]], points: list[tuple[int, int, int]], chunk: int
) -> None:
    ops = [(r, k, s, s + d, on) for r, k, s, d, on in rows]
    traces = []
    for rank in (0, 1):
        b = TraceBuilder("n0", rank)
        mine = [o for o in ops if o[0] == rank]
        b.add(
            "ops",
            {
                "start_ns": [o[2] for o in mine],
                "end_ns": [o[3] for o in mine],
                "pid": [1] * len(mine),
                "tid": [o[1] for o in mine],
                "name": ["on" if o[4] else "off" for o in mine],
            },
        )
        traces.append(b.build())
    trace = merge_traces(traces)  # rank 0's rows, then rank 1's: the naive twin reads them in that order
    ordered = [o for rank in (0, 1) for o in ops if o[0] == rank]
    frame = pl.DataFrame(
        {
            "node": ["n0"] * len(points),
            "rank": [p[0] for p in points],
            "pid": [1] * len(points),
            "tid": [p[1] for p in points],
            "t": [p[2] for p in points],
        },
        schema={"node": pl.Categorical, "rank": pl.Int32, "pid": pl.Int64, "tid": pl.Int64, "t": pl.Int64},
    )
    before = steps_innermost.POINT_CHUNK
    steps_innermost.POINT_CHUNK = chunk
    try:
        got = innermost_at(trace, frame, "t", pl.col("name").cast(pl.String) == "on").tolist()
    finally:
        steps_innermost.POINT_CHUNK = before
    assert got == naive_innermost_at(ordered, points)
