"""nearest_per_rank (one query over every rank's ranges) against its naive twin, a filter and a sort per rank."""

from __future__ import annotations

import polars as pl
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ktrace.analysis.critical_path_graph import Window
from ktrace.analysis.nearest_ranges import nearest_per_rank

_RANGE = st.tuples(
    st.sampled_from(["a", "b"]),  # node
    st.integers(0, 2),  # rank
    st.sampled_from(["step 1", "step 2", "other", None]),  # name
    st.integers(0, 30),  # start
    st.integers(0, 12),  # length (0: an instant range)
)


def nearest_range(ranges: pl.DataFrame, node: str, rank: int, name: str | None, first: Window) -> Window | None:
    """The naive twin: the rank's range named `name` whose start is nearest first's (the earlier start on a tie),
    else the one overlapping `first` most (the earlier start on a tie), else None."""
    mine = ranges.filter((pl.col("node") == node) & (pl.col("rank") == rank))
    same = mine.filter(pl.col("name") == name) if name is not None else mine.clear()
    if same.height:
        best = same.with_columns(d=(pl.col("start_ns") - first.start_ns).abs()).sort("d", "start_ns").row(0, named=True)
        return Window(node, rank, int(best["start_ns"]), int(best["end_ns"]))
    overlap = pl.min_horizontal("end_ns", pl.lit(first.end_ns)) - pl.max_horizontal("start_ns", pl.lit(first.start_ns))
    mine = mine.with_columns(o=overlap).filter(pl.col("o") > 0)
    if mine.height == 0:
        return None
    best = mine.sort("o", "start_ns", descending=[True, False]).row(0, named=True)
    return Window(node, rank, int(best["start_ns"]), int(best["end_ns"]))


def _frame(rows: list[tuple[str, int, str | None, int, int]]) -> pl.DataFrame:
    schema = {"node": pl.String, "rank": pl.Int64, "name": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64}
    return pl.DataFrame([(n, r, name, s, s + d) for n, r, name, s, d in rows], schema=schema, orient="row")


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(_RANGE, max_size=25),
    name=st.sampled_from(["step 1", "step 2", "absent", None]),
    start=st.integers(0, 30),
    length=st.integers(0, 12),
)
@example(rows=[("a", 0, "step 1", 5, 2), ("a", 0, "step 1", 9, 2)], name="step 1", start=7, length=1)  # equal d
@example(rows=[("a", 0, None, 5, 4), ("a", 0, "x", 3, 6)], name=None, start=6, length=2)  # equal overlap
@example(rows=[("a", 1, "other", 0, 3)], name="step 1", start=10, length=2)  # no name, no overlap: none
def test_nearest_per_rank_is_nearest_range_of_each_rank(
    rows: list[tuple[str, int, str | None, int, int]], name: str | None, start: int, length: int
) -> None:
    ranges = _frame(rows)
    first = Window("a", 0, start, start + length)
    expected = {}
    for node, rank in sorted({(n, r) for n, r, *_ in rows}):
        found = nearest_range(ranges, node, rank, name, first)
        if found is not None:
            expected[(node, rank)] = found
    assert nearest_per_rank(ranges, name, first) == expected


def test_no_ranges_no_windows() -> None:
    assert nearest_per_rank(_frame([]), "step 1", Window("a", 0, 0, 1)) == {}
