"""spill.Spill: values appended in order come back by position, in the dtype given, from a file that goes away."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktrace.exporters.spill import Spill, SpillTable


@given(
    parts=st.lists(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=40), max_size=8),
    first=st.integers(0, 400),
    count=st.integers(0, 400),
)
def test_reads_give_back_what_was_appended(
    parts: list[list[int]], first: int, count: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    spill = Spill(np.int32, tmp_path_factory.getbasetemp())
    for part in parts:
        spill.append(np.array(part, np.int64))
    every = [v for part in parts for v in part]
    assert spill.count == len(every)
    got = spill.read(first, count)
    assert got.dtype == np.int32 and got.tolist() == every[first : first + count]
    spill.close()


def test_bools_and_a_closed_spill(tmp_path: Path) -> None:
    spill = Spill(np.bool_, tmp_path)
    spill.append(np.array([True, False, True]))
    assert spill.read(1, 5).tolist() == [False, True]
    spill.close()
    spill.close()  # idempotent


@given(
    size=st.integers(1, 20_000),
    writes=st.lists(st.lists(st.tuples(st.integers(0, 19_999), st.integers(-(2**40), 2**40)), max_size=30), max_size=6),
    asked=st.lists(st.integers(0, 19_999), max_size=60),
)
def test_table_reads_what_was_put_by_place(
    size: int, writes: list[list[tuple[int, int]]], asked: list[int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """SpillTable against a numpy array: places near together (one run) or far apart (several), repeats in reads."""
    table, model = SpillTable(np.int64, size, tmp_path_factory.getbasetemp()), np.zeros(size, np.int64)
    for batch in writes:
        places = {p % size: v for p, v in batch}  # distinct places, the last value of each
        keys = np.array(list(places), np.int64)
        values = np.array(list(places.values()), np.int64)
        table.put(keys, values)
        model[keys] = values
    got = table.get(np.array([p % size for p in asked], np.int64))
    assert got.dtype == np.int64 and got.tolist() == model[[p % size for p in asked]].tolist()
    assert table.get(np.arange(size)).tolist() == model.tolist()
    table.close()
