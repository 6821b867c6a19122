"""perfetto_rank_layout.Launches finds a correlation id's launch by a dense lookup table where the ids are dense,
the same places as its binary search (which serves sparse ids)."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given
from hypothesis import strategies as st
from tangled_traces import launch_calls

from ktrace.exporters.perfetto_rank_layout import Launches
from ktrace.exporters.perfetto_tracks import process_order
from ktrace.model.schema import NODE_RANK
from ktrace.testing import SyntheticConfig, generate

TRACE = generate(SyntheticConfig(steps=1, kernels_per_step=300, streams=2, ranks=1, seed=7))
NODE, RANK = next(o for o in process_order(TRACE) if o[1] != NODE_RANK)


@given(
    offsets=st.lists(st.integers(-50, 800), min_size=1, max_size=200),
    extremes=st.lists(st.sampled_from([-(2**63), 2**63 - 1, -1, 0, 2**32, 2**32 + 7]), max_size=5),
    nulls=st.integers(0, 5),
)
def test_the_lookup_finds_what_the_binary_search_finds(offsets: list[int], extremes: list[int], nulls: int) -> None:
    launches, search = Launches(TRACE, NODE, RANK), Launches(TRACE, NODE, RANK, dense=False)
    assert launches.lookup is not None and search.lookup is None  # counters give dense ids
    assert launches.count == search.count == search.ids.size and launches.base == search.base
    queries = pl.Series([launches.base + o for o in offsets] + extremes + [None] * nulls, dtype=pl.Int64)
    at, found = launches.match(queries)
    search_at, search_found = search.match(queries)
    assert found.tolist() == search_found.tolist()
    assert at[found].tolist() == search_at[search_found].tolist()
    assert found.any() == bool(np.isin([search.base + o for o in offsets], search.base + search.ids).any())


@given(
    calls=st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(-40, 40) | st.sampled_from([2**32 - 1, 2**32, 2**40])),
        min_size=1,
        max_size=60,
    ),
    base=st.sampled_from([0, 1, -(2**31), 2**32 - 3, 2**62]),
)
def test_launch_ids_and_starts_are_each_ids_earliest_call(calls: list[tuple[int, int]], base: int) -> None:
    """Sorted or not, repeated or not, near 2**32 or past it: each distinct id once, with its earliest call's start."""
    starts, ids = [s for s, _ in calls], [base + c for _, c in calls]
    launches = Launches(launch_calls(starts, ids), "n", 0)
    earliest: dict[int, int] = {}
    for s, i in zip(starts, ids, strict=True):
        earliest[i] = min(s, earliest.get(i, s))
    expected = sorted(earliest)
    at, found = launches.match(pl.Series(expected, dtype=pl.Int64))
    assert found.all() and at.tolist() == list(range(len(expected))) and launches.count == len(expected)
    assert launches.launch_start.tolist() == [earliest[i] for i in expected]
