"""launches.Launches keys a correlation id by its offset where the ids are dense (no table of ids in memory) and
by its place among the sorted ids where they are sparse: both find the same launches with the same starts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tangled_traces import launch_calls

from ktrace.exporters.launches import Launches
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
def test_dense_keys_find_what_the_binary_search_finds(
    offsets: list[int], extremes: list[int], nulls: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.getbasetemp()
    launches, search = Launches(TRACE, NODE, RANK, folder), Launches(TRACE, NODE, RANK, folder, dense=False)
    assert launches.dense and not search.dense and not launches.ids.size  # counters give dense ids
    assert launches.base == search.base
    queries = pl.Series([launches.base + o for o in offsets] + extremes + [None] * nulls, dtype=pl.Int64)
    at, found = launches.match(queries)
    search_at, search_found = search.match(queries)
    assert found.tolist() == search_found.tolist()
    assert at[found].tolist() == (search.ids[search_at[search_found]].astype(np.int64)).tolist()
    assert launches.starts(at[found]).tolist() == search.starts(search_at[search_found]).tolist()
    assert found.any() == bool(np.isin([search.base + o for o in offsets], search.base + search.ids).any())


@given(
    calls=st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(-40, 40) | st.sampled_from([2**32 - 1, 2**32, 2**40])),
        min_size=1,
        max_size=60,
    ),
    base=st.sampled_from([0, 1, -(2**31), 2**32 - 3, 2**62]),
    dense=st.booleans(),
)
def test_launch_starts_are_each_ids_earliest_call(
    calls: list[tuple[int, int]], base: int, dense: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Sorted or not, repeated or not, near 2**32 or past it, dense or sparse: each distinct id is found, with its
    earliest call's start, and ids between them are not."""
    starts, ids = [s for s, _ in calls], [base + c for _, c in calls]
    launches = Launches(launch_calls(starts, ids), "n", 0, tmp_path_factory.getbasetemp(), dense=dense)
    earliest: dict[int, int] = {}
    for s, i in zip(starts, ids, strict=True):
        earliest[i] = min(s, earliest.get(i, s))
    expected = sorted(earliest)
    at, found = launches.match(pl.Series(expected, dtype=pl.Int64))
    assert found.all() and len(set(at.tolist())) == len(expected)
    assert launches.starts(at).tolist() == [earliest[i] for i in expected]
    between = [i + 1 for i in expected if i + 1 not in earliest and i + 1 < 2**63]
    assert not launches.match(pl.Series(between, dtype=pl.Int64))[1].any()


def test_ids_of_calls_in_many_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dense table is filled block by block of API rows: an id called in two blocks keeps its earliest call."""
    monkeypatch.setattr("ktrace.exporters.launches.BLOCK_ROWS", 3)
    ids = [4, 9, 5, 4, 6, 9, 7, 5, 8]
    starts = [50, 10, 30, 20, 60, 5, 70, 40, 0]
    launches = Launches(launch_calls(starts, ids), "n", 0, tmp_path)
    assert launches.dense
    at, found = launches.match(pl.Series([4, 5, 6, 7, 8, 9], dtype=pl.Int64))
    assert found.all() and launches.starts(at).tolist() == [20, 30, 60, 70, 0, 5]
