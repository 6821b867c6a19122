"""A rank's slices in file order, a window at a time, never the whole rank in one frame.

rank_slices sorts every slice of a rank in one frame: ~360 bytes a slice above the opened store (8.7 GB on 10 M
kernels). Here each part of the rank (a span table's rows of that rank) keeps only the order of its rows by start
(start_order: in a temporary file, found a block at a time; nothing when the table is already sorted); a window takes from every part the rows that start
before a time cut, so a start never straddles two windows, and is sorted by `file_order` alone. Ties in start
keep the parts' order and, within a part, the table's order (a stable sort), so the windows laid end to end are
rank_slices row for row. `chunks` re-cuts them into batches of exactly `chunk_rows` rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import polars as pl
from numpy.typing import NDArray

from ktrace.exporters.perfetto_slices import SLICE_COLUMNS, SlicePart, file_order, rank_parts, slice_frame
from ktrace.exporters.start_order import StartOrder, is_sorted
from ktrace.model.trace import Trace

_NO_CUT = np.iinfo(np.int64).max


class _PartRows:
    """One part's rows of the rank (a view of its table where they are contiguous) and their order by start."""

    def __init__(self, part: SlicePart, folder: Path | None, orders: dict[int, StartOrder | None], key: int) -> None:
        """`orders`: each part's order by start (`key`), found by the first pass over the rank and kept."""
        self.part = part
        mask = part.table.select(part.rows.fill_null(False)).to_series().to_numpy()
        count = int(mask.sum())
        first = int(np.argmax(mask)) if count else 0
        last = mask.shape[0] - 1 - int(np.argmax(mask[::-1])) if count else -1
        if count == part.table.height:
            self.rows = part.table
        elif last - first + 1 == count:  # a rank's rows together (as the store reads them): a view
            self.rows = part.table.slice(first, count)
        else:  # a rank's rows spread among other ranks' rows: its own copy
            self.rows = part.table.filter(pl.Series(mask))
        del mask
        self.start = self.rows["start_ns"]
        """The rows' starts, read a window's worth at a time: a numpy copy of the whole column (where the store
        reads it in several chunks) would cost 8 bytes a row for as long as the rank is read."""
        if key not in orders:
            orders[key] = None if is_sorted(self.start) else StartOrder(self.start, folder)
        self.order = orders[key]
        """The rows by start (None: sorted already), in a temporary file in `folder` (None: in memory)."""
        self.done = 0
        self.exprs: dict[tuple[str, ...] | None, tuple[list[pl.Expr], pl.DataFrame]] = {}

    @property
    def height(self) -> int:
        """Rows of this part."""
        return self.start.len()

    def next_starts(self, count: int) -> NDArray[np.int64]:
        """Starts of the next `count` rows not yet taken, in start order."""
        b = min(self.height, self.done + count)
        if self.order is None:
            return self.start.slice(self.done, b - self.done).to_numpy()
        return self.start.gather(self.order.read(self.done, b - self.done)).to_numpy()

    def count_before(self, cut: int, guess: int) -> int:
        """Rows not yet taken that start before `cut` (looked for in blocks growing from `guess`)."""
        block = max(1, guess)
        while True:
            starts = self.next_starts(block)
            if starts.shape[0] < block or starts[-1] >= cut:
                return int(np.searchsorted(starts, cut, side="left"))
            block *= 2

    def take(self, count: int, columns: Sequence[str] | None) -> pl.DataFrame:
        """The next `count` rows (in start order, ties in table order) as slice columns (those of `columns`)."""
        a, b = self.done, self.done + count
        self.done = b
        key = None if columns is None else tuple(columns)
        if key not in self.exprs:  # built once per part: ~1 ms of Python a window otherwise
            exprs = self.part.exprs(columns)
            used = self.rows.select(sorted({n for e in exprs for n in e.meta.root_names()}))  # gather only those
            self.exprs[key] = (exprs, used)
        exprs, used = self.exprs[key]
        frame = used.slice(a, count) if self.order is None else used[self.order.read(a, count)]
        return frame.select(exprs)


class RankSlices:
    """The slices of one rank (rank_slices' rows and columns but `row`), read window by window in file order."""

    def __init__(self, trace: Trace, node: str, rank: int, window_rows: int, folder: Path | None = None) -> None:
        """`folder`: where each unsorted part's order by start goes (start_order.StartOrder; None: in memory)."""
        self.trace, self.node, self.rank, self.folder = trace, node, rank, folder
        self.orders: dict[int, StartOrder | None] = {}
        self.window_rows = max(1, window_rows)
        parts = rank_parts(trace, node, rank)
        self.height = sum(int(p.table.select(p.rows.fill_null(False).sum()).item() or 0) for p in parts)

    def windows(self, columns: Sequence[str] | None = None) -> Iterator[pl.DataFrame]:
        """Consecutive runs of the rank's slices in file order, each sorted (`columns` only, if given).

        Each cut is the earliest of the parts' next `window_rows`-th start, so no part gives more than
        `window_rows` rows to a window but where more rows than that share one start.
        """
        parts = [
            _PartRows(p, self.folder, self.orders, k)
            for k, p in enumerate(rank_parts(self.trace, self.node, self.rank))
        ]
        w = self.window_rows
        while any(p.done < p.height for p in parts):
            ahead = [p.next_starts(w) for p in parts]
            full = [int(s[-1]) for s in ahead if s.shape[0] == w]
            cut = min(full) if full else _NO_CUT
            counts = [int(np.searchsorted(s, cut, side="left")) for s in ahead]
            if not any(counts):  # `w` rows or more start at `cut`: the window takes all of them
                cut += 1
                counts = [p.count_before(cut, w) for p in parts]
            frames = [p.take(n, columns) for p, n in zip(parts, counts, strict=True) if n]
            window = slice_frame(frames, columns)
            window = window.select(SLICE_COLUMNS if columns is None else columns)
            yield window[file_order(window["start_ns"].to_numpy(), window["end_ns"].to_numpy())]

    def chunks(self, chunk_rows: int, columns: Sequence[str] | None = None) -> Iterator[pl.DataFrame]:
        """The rank's slices in file order, `chunk_rows` rows a frame (the last one shorter)."""
        held: list[pl.DataFrame] = []
        rows = 0
        for window in self.windows(columns):
            held.append(window)
            rows += window.height
            while rows >= chunk_rows:
                both = pl.concat(held) if len(held) > 1 else held[0]
                yield both.slice(0, chunk_rows)
                rest = both.slice(chunk_rows)
                held, rows = ([rest] if rest.height else []), rest.height
        if rows:
            yield pl.concat(held) if len(held) > 1 else held[0]
