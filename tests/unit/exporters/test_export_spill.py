"""spill.Spill and SpillTable: values come back by position, in the dtype given, from memory while they fit the
process's budget and from a file that goes away past it; both backings give the same answers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktrace.exporters.spill import BUDGET, MEMORY_ENV, Spill, SpillTable


@contextmanager
def memory_budget(nbytes: int) -> Iterator[None]:
    """The spills made inside hold at most `nbytes` in memory together (0: files always)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MEMORY_ENV, str(nbytes + BUDGET.used))
        yield


@given(
    parts=st.lists(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=40), max_size=8),
    first=st.integers(0, 400),
    count=st.integers(0, 400),
)
def test_reads_give_back_what_was_appended(
    parts: list[list[int]], first: int, count: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with memory_budget(0):  # the file
        spill = Spill(np.int32, tmp_path_factory.getbasetemp())
        for part in parts:
            spill.append(np.array(part, np.int64))
    assert not spill.in_memory or not spill.count
    every = [v for part in parts for v in part]
    assert spill.count == len(every)
    got = spill.read(first, count)
    assert got.dtype == np.int32 and got.tolist() == every[first : first + count]
    spill.close()


def test_bools_and_a_closed_spill(tmp_path: Path) -> None:
    with memory_budget(0):
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
    with memory_budget(0):
        table, model = SpillTable(np.int64, size, tmp_path_factory.getbasetemp()), np.zeros(size, np.int64)
    assert not table.in_memory
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


@given(
    size=st.integers(1, 20_000),
    writes=st.lists(st.lists(st.tuples(st.integers(0, 19_999), st.integers(-(2**40), 2**40)), max_size=30), max_size=6),
    asked=st.lists(st.integers(0, 19_999), max_size=60),
    parts=st.lists(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=40), max_size=8),
    budget=st.integers(0, 400),
)
def test_memory_and_file_give_the_same_answers(
    size: int,
    writes: list[list[tuple[int, int]]],
    asked: list[int],
    parts: list[list[int]],
    budget: int,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The same puts and gets on a table in memory and one in a file; the same appends on a spill in memory, one in
    a file and one whose budget runs out part way (what it held moves to the file)."""
    folder = tmp_path_factory.getbasetemp()
    in_memory = SpillTable(np.int64, size, folder)
    with memory_budget(0):
        in_file = SpillTable(np.int64, size, folder)
    assert in_memory.in_memory and not in_file.in_memory
    for batch in writes:
        places = {p % size: v for p, v in batch}
        keys = np.array(list(places), np.int64)
        for table in (in_memory, in_file):
            table.put(keys, np.array(list(places.values()), np.int64))
            assert table.get(keys).tolist() == list(places.values())
    picks = np.array([p % size for p in asked], np.int64)
    assert in_memory.get(picks).tolist() == in_file.get(picks).tolist()
    assert in_memory.get(np.arange(size)).tolist() == in_file.get(np.arange(size)).tolist()
    spills: list[Spill] = []
    every = [v for part in parts for v in part]
    for limit in (None, 0, budget):  # the default budget (memory), none (the file), a few bytes (memory, then file)
        with memory_budget(limit) if limit is not None else nullcontext():
            spill = Spill(np.int32, folder)
            for part in parts:
                spill.append(np.array(part, np.int64))
        spills.append(spill)
    assert [s.in_memory for s in spills] == [True, not every, 4 * len(every) <= budget]
    for first, count in ((0, len(every) + 3), (len(every) // 3, 7)):
        assert [s.read(first, count).tolist() for s in spills] == [every[first : first + count]] * 3
    in_memory.close()
    in_file.close()
    for spill in spills:
        spill.close()


def test_past_the_budget_takes_the_file(tmp_path: Path) -> None:
    """A table larger than what is left of the budget lies in the file, one that fits in memory; closing gives the
    bytes back; a spill moves to the file once its appends pass the budget, and reads give back every value."""
    before = BUDGET.used
    with memory_budget(800):
        fits, past = SpillTable(np.int64, 100, tmp_path), SpillTable(np.int64, 101, tmp_path)
        assert fits.in_memory and not past.in_memory
        assert BUDGET.used == before + 800 and not SpillTable(np.int64, 1, tmp_path).in_memory  # all taken
        fits.put(np.array([3, 99]), np.array([7, 8]))
        past.put(np.array([3, 100]), np.array([7, 9]))
        assert fits.get(np.array([99, 3, 0])).tolist() == [8, 7, 0] and past.get(np.array([100, 3])).tolist() == [9, 7]
        fits.close()
        assert BUDGET.used == before
        spill = Spill(np.int64, tmp_path)
        spill.append(np.arange(60))
        assert spill.in_memory and BUDGET.used == before + 480
        spill.append(np.arange(60, 101))  # 808 bytes: past the budget
        assert not spill.in_memory and BUDGET.used == before
        assert spill.read(0, 200).tolist() == list(range(101))
    past.close()
    spill.close()
