"""A rank's launch calls by correlation id, for the timeline exports' launch->run flows, in spill tables.

Each distinct correlation id of the rank's API calls (its launch: the first call in file order; its start: the
earliest call's) gets a key. Where the ids are dense (as CUPTI's counters give them: their span at most
DENSE_SPAN times the calls, plus DENSE_SLACK) the key is the id's offset from the least one, so no table of ids is
held: what the exports note per id (its launch's start here; its flow or place in the layouts) lies in tables by
key (spill.SpillTable: in memory while the spills' budget allows, past it in files), and a window's ids, which
count up with time, touch a few runs of them. Sparse ids are keyed by their place among the sorted distinct ids,
which then stay in memory (4 bytes an id where they span under 2**32, else 8): the one per-id cost left outside
the budget.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from numpy.typing import NDArray

from ktrace.exporters.chrome_lines import int_column
from ktrace.exporters.perfetto_slices import STREAM_KINDS, kind_in, rank_parts
from ktrace.exporters.spill import SpillTable
from ktrace.model.trace import Trace

I64 = NDArray[np.int64]
DENSE_SPAN = 4
DENSE_SLACK = 1 << 16
BLOCK_ROWS = 1 << 18
"""API rows read at once while the launches' starts are noted."""


class Launches:
    """Each launch correlation id's key and its launch's start (earliest call), by key in a temporary file."""

    def __init__(self, trace: Trace, node: str, rank: int, folder: Path, *, dense: bool = True) -> None:
        """`folder`: where the files go; `dense`: key dense ids by offset (False: always by place, as sparse)."""
        api = next(p for p in rank_parts(trace, node, rank) if p.kind == "api")
        calls = api.rows & pl.col("correlation_id").is_not_null()
        blocks = [
            api.table.slice(a, BLOCK_ROWS).lazy().filter(calls).select("correlation_id", "start_ns")
            for a in range(0, api.table.height, BLOCK_ROWS)
        ]
        aggregates = [
            pl.len().alias("rows"),
            pl.col("correlation_id").cast(pl.Int64).min().alias("low"),
            pl.col("correlation_id").cast(pl.Int64).max().alias("high"),
            pl.col("start_ns").min().alias("t0"),
        ]
        stats = pl.concat([b.select(aggregates) for b in blocks]).collect() if blocks else None
        totals = (
            stats.select(pl.col("rows").sum(), pl.col("t0").min(), pl.col("low").min(), pl.col("high").max()).row(0)
            if stats is not None
            else (0, 0, 0, -1)
        )
        rows = int(totals[0])
        self.t0: int = int(totals[1]) if rows else 0
        self.base: int = int(totals[2]) if rows else 0
        span = int(totals[3]) - self.base + 1 if rows else 0
        self.ids: I64 | NDArray[np.uint32] = np.zeros(0, np.int64)
        """Sparse ids only: the distinct ids, sorted (offsets from `base` in 4 bytes where they span under 2**32)."""
        self.dense = dense and span <= DENSE_SPAN * rows + DENSE_SLACK
        if self.dense:
            self.keys = span
            self.start = SpillTable(np.int64, span, folder)
            """Per key, its launch's start - t0 + 1 (0: no launch with that key)."""
            for block in blocks:
                self._note(*(int_column(c)[0] for c in block.collect().cast(pl.Int64).get_columns()))
            return
        frames = [b.collect() for b in blocks]
        none = np.zeros(0, np.int64)
        corr = np.concatenate([none, *(f["correlation_id"].cast(pl.Int64).to_numpy() for f in frames)])
        start = np.concatenate([none, *(f["start_ns"].cast(pl.Int64).to_numpy() for f in frames)])
        del frames
        order = np.argsort(corr, kind="stable")
        corr, start = corr[order], start[order]
        del order
        firsts = np.flatnonzero(np.r_[True, corr[1:] != corr[:-1]]) if corr.size else none
        ids, first_start = corr[firsts], np.minimum.reduceat(start, firsts) if corr.size else none
        del corr, start
        if ids.size and int(ids[-1]) - self.base < 2**32 and int(ids[-1]) < 2**63 - 2**32:
            self.ids = ids.astype(np.uint32)
            self.ids -= np.uint32(self.base & 0xFFFFFFFF)
        else:
            self.ids, self.base = ids, 0
        self.keys = int(ids.size)
        self.start = SpillTable(np.int64, self.keys, folder)
        self.start.put(np.arange(self.keys), first_start - self.t0 + 1)

    def _note(self, corr: I64, start: I64) -> None:
        """The earliest start of each of these calls' ids, with what the file holds."""
        if not corr.size:
            return
        order = np.argsort(corr, kind="stable")
        corr = corr[order] - self.base
        heads = np.flatnonzero(np.r_[True, corr[1:] != corr[:-1]])
        keys, earliest = corr[heads], np.minimum.reduceat(start[order], heads) - self.t0 + 1
        held = self.start.get(keys)
        self.start.put(keys, np.where(held == 0, earliest, np.minimum(held, earliest)))

    def match(self, corr: pl.Series, calls: NDArray[np.bool_] | None = None) -> tuple[I64, NDArray[np.bool_]]:
        """Key of each correlation id (0 where none) and whether it is a launch's. `calls`: rows that are this
        rank's API calls, whose ids are launches' by construction (not looked up where ids are dense)."""
        keys, found, _ = self._match(corr, calls)
        return keys, found

    def _match(
        self, corr: pl.Series, calls: NDArray[np.bool_] | None = None
    ) -> tuple[I64, NDArray[np.bool_], I64 | None]:
        """match's keys and found, and where the ids are dense what the file holds per row (0: no launch; 1 on
        `calls`)."""
        values, valid = int_column(corr)  # 0 where null
        present = np.ones(values.shape[0], np.bool_) if valid is None else valid
        if self.dense:
            inside = present & (values >= self.base) & (values < self.base + self.keys)
            keys = np.where(inside, values - self.base, 0)
            held = np.zeros(keys.shape[0], np.int64)
            asked = inside if calls is None else inside & ~calls
            if asked.any():
                held[asked] = self.start.get(keys[asked])
            if calls is not None:
                held[inside & calls] = 1
            found = held != 0
            return np.where(found, keys, 0), found, held
        if self.ids.dtype == np.uint32:  # ids as offsets from the first: one outside its 2**32 is no launch
            present &= (values >= self.base) & (values < self.base + 2**32)
            values = np.where(present, values - self.base, 0).astype(np.uint32)
        at = np.searchsorted(self.ids, values).clip(0, max(self.ids.size - 1, 0))
        found = present & (self.ids[at] == values if self.ids.size else False)
        return np.where(found, at, 0).astype(np.int64), found, None

    def starts(self, keys: I64) -> I64:
        """The launch start of each key (keys of launches only)."""
        return self.start.get(keys).astype(np.int64) + (self.t0 - 1)

    def add(self, window: pl.DataFrame) -> tuple[I64, NDArray[np.bool_]]:
        """The next window's launch->run pairs (its launched GPU records, in file order): each one's launch key
        and whether the record starts at or after its launch."""
        on_gpu = kind_in(window["kind"], STREAM_KINDS)
        at, found, held = self._match(window["correlation_id"], ~on_gpu)  # only GPU records are looked up
        gpu = np.flatnonzero(on_gpu & found)
        keys = at[gpu]
        starts = self.starts(keys) if held is None else held[gpu] + (self.t0 - 1)
        return keys, window["start_ns"].to_numpy()[gpu] >= starts
