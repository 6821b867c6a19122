"""start_order.StartOrder: the rows by start found a block at a time (in a spill, memory or file, or a list) are
numpy's stable argsort of the starts, whatever the blocks' size and the table's disorder; is_sorted reads blocks
too."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktrace.exporters.spill import BUDGET, MEMORY_ENV
from ktrace.exporters.start_order import StartOrder, is_sorted


@given(
    starts=st.lists(st.integers(-50, 50), max_size=300),
    block=st.integers(1, 64),
    chunks=st.integers(1, 4),
    in_file=st.booleans(),
    budget=st.sampled_from([0, 64, 2**20]),
)
def test_order_is_the_stable_argsort(
    starts: list[int], block: int, chunks: int, in_file: bool, budget: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """In a spill (whose budget: none, the file; a few bytes, memory then the file; 1 MiB, memory) or in a list."""
    cut = len(starts) // chunks or 1  # a column in several chunks, as the store reads a big one
    column = pl.concat(
        [pl.Series("s", starts[a : a + cut], pl.Int64) for a in range(0, len(starts), cut)]
        or [pl.Series("s", [], pl.Int64)],
        rechunk=False,
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MEMORY_ENV, str(BUDGET.used + budget))
        order = StartOrder(column, tmp_path_factory.getbasetemp() if in_file else None, block)
    expected = np.argsort(np.array(starts, np.int64), kind="stable")
    assert order.read(0, len(starts) + 5).tolist() == expected.tolist()
    a = len(starts) // 3
    assert order.read(a, 7).tolist() == expected[a : a + 7].tolist()
    assert is_sorted(column, block) == bool((expected == np.arange(len(starts))).all())


def test_local_disorder_waits_only_its_span(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Four streams' runs interleaved a step at a time: the rows that wait stay about a block, the order exact."""
    rng = np.random.default_rng(3)
    steps = [np.sort(rng.integers(s * 1000, s * 1000 + 1500, 400)).reshape(4, 100).T.ravel() for s in range(50)]
    starts = np.concatenate(steps)
    order = StartOrder(pl.Series("s", starts), tmp_path_factory.getbasetemp(), 256)
    assert order.read(0, starts.size).tolist() == np.argsort(starts, kind="stable").tolist()
