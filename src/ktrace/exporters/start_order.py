"""The order by start of a span table's rows (ties in table order), found block by block and kept in a spill
(spill.Spill: in memory while the spills' budget allows, past it in a temporary file), so that reading a rank
window by window holds no per-row array past the budget.

A table as the store reads it is sorted by start in runs (per thread, per stream): its disorder is local. The rows
are read in blocks of BLOCK_ROWS in table order; the rows read so far whose start is below the least start of every
block still to come are in their final place (nothing later can come before them) and go to the file; the others
wait for the next block. So the memory is a block and the rows that wait: as many as the table's disorder spans
(on a table sorted by start in one run per stream: about a block), never the table's length unless its order is
that far from sorted. The order is the stable argsort of the starts (ties keep the table's order): a waiting row
always lies before the next block's rows in the table, and a row of the same start as a later block's least one
waits too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from numpy.typing import NDArray

from ktrace.exporters.spill import Spill

BLOCK_ROWS = 1 << 18
"""Rows read at once (~10 MB of numpy arrays while a block is sorted)."""

I64 = NDArray[np.int64]


class StartOrder:
    """Row numbers of a table's rows in start order (ties in table order), read back a run at a time."""

    def __init__(self, start: pl.Series, folder: Path | None, block_rows: int = BLOCK_ROWS) -> None:
        """`start`: the rows' starts (no nulls); `folder`: where the temporary file goes (None: kept in memory)."""
        self.rows = start.len()
        dtype = np.int32 if self.rows < 2**31 else np.int64
        self._memory: list[NDArray[np.integer]] = []
        self._spill = Spill(dtype, folder) if folder is not None else None
        self._ahead: tuple[int, NDArray[np.generic]] = (0, np.zeros(0, dtype))
        blocks = range(0, self.rows, max(1, block_rows))
        lows = [start.slice(a, block_rows).min() for a in blocks]
        later = np.minimum.accumulate(np.array([*lows, np.iinfo(np.int64).max], np.int64)[::-1])[::-1]
        wait_rows, wait_starts = np.zeros(0, np.int64), np.zeros(0, np.int64)
        for j, a in enumerate(blocks):
            block = start.slice(a, block_rows).to_numpy()
            rows = np.concatenate([wait_rows, np.arange(a, a + block.shape[0], dtype=np.int64)])
            starts = np.concatenate([wait_starts, block])
            del block
            by_start = np.argsort(starts, kind="stable")  # the waiting rows lie before the block's, sorted already
            rows, starts = rows[by_start], starts[by_start]
            done = int(np.searchsorted(starts, later[j + 1], side="left"))
            self._append(rows[:done])
            wait_rows, wait_starts = rows[done:], starts[done:]
        self._append(wait_rows)

    def _append(self, rows: I64) -> None:
        if self._spill is not None:
            self._spill.append(rows)
        elif rows.size:
            self._memory.append(rows.astype(np.int32 if self.rows < 2**31 else np.int64))

    def read(self, first: int, count: int) -> NDArray[np.generic]:
        """Row numbers at places first, ..., first + count - 1 of the order."""
        if self._spill is not None:  # windows read the order forward, each place a few times: a block read ahead
            at, held = self._ahead
            end = min(self.rows, first + count)
            if not (at <= first and end <= at + held.shape[0]):
                at, held = first, self._spill.read(first, max(end - first, BLOCK_ROWS))
                self._ahead = (at, held)
            return held[first - at : first - at + count]
        if len(self._memory) != 1:
            self._memory = [np.concatenate(self._memory) if self._memory else np.zeros(0, np.int32)]
        return self._memory[0][first : first + count]


def is_sorted(start: pl.Series, block_rows: int = BLOCK_ROWS) -> bool:
    """Whether the starts never decrease, read a block at a time (no copy of the whole column)."""
    last = np.iinfo(np.int64).min
    for a in range(0, start.len(), max(1, block_rows)):
        block = start.slice(a, block_rows).to_numpy()
        if block.size and (block[0] < last or not bool((block[1:] >= block[:-1]).all())):
            return False
        if block.size:
            last = int(block[-1])
    return True
