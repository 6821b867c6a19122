"""What a rank's Perfetto slices need from the whole rank before its first event is written, found in one pass
over its windows (perfetto_slice_windows): the tracks (created in display order), the overlap lanes of the slices
that break nesting on their track, and the flow ids of every launch.

Then `tracks` and `flows` give each chunk its track uuids and flow ids, as assign_tracks + overlap_lanes and
launch_pairs + FlowChunks give them for the whole rank at once (the same numbers).

What is noted per slice goes to a temporary file, read back chunk by chunk (spill.Spill): its track's code
(RowCodes: `tracks` reads it rather than grouping the chunk's key columns again), and per launch->run pair whether
it ends its flow. What stays in memory: on a track where slices overlap (nested operators), start, end and row
from the slice before its first overlap on (24 bytes a slice); per distinct launch correlation id, the id (an
offset from the first, 4 bytes, where they span under 2**32; where they are dense, a 4-byte place per id of their
span instead) and its pair (4 bytes; where an id launched two GPU records: per pair its order by correlation id,
per id where its pairs start among them and whether its launch was written, 9 bytes); the layout pass holds the
launch's start too (8 bytes). The Chrome JSON
export (chrome_layout) lays out its lanes and finds its launches with the same Overlaps and Launches, and keeps
its codes in RowCodes too.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np
import polars as pl
from numpy.typing import NDArray

from ktrace.exporters.chrome_lines import int_column
from ktrace.exporters.perfetto_slice_windows import RankSlices
from ktrace.exporters.perfetto_slices import STREAM_KINDS, kind_in, rank_parts
from ktrace.exporters.perfetto_tracks import TRACK_KEYS, slice_keys, track_uuids
from ktrace.exporters.spill import Spill
from ktrace.model.nesting import nesting_lanes
from ktrace.model.trace import Trace

if TYPE_CHECKING:  # the Chrome JSON export uses Overlaps and Launches without loading protobuf
    from ktrace.exporters.perfetto_layout import TrackTree

I64 = NDArray[np.int64]
LAYOUT_COLUMNS = ("start_ns", "end_ns", "kind", "pid", "tid", "device", "stream", "correlation_id")
"""The columns the layout pass reads."""
_NEVER = np.iinfo(np.int64).min

Key = tuple[int, int, int, int, int]


class _TrackCodes:
    """A code per track key, in the order keys are first seen."""

    def __init__(self) -> None:
        self.codes: dict[Key, int] = {}

    def of(self, frame: pl.DataFrame) -> I64:
        """The code of every row of `frame` (slice columns)."""
        groups = slice_keys(frame).with_row_index("row").group_by(TRACK_KEYS).agg(pl.col("row"))
        codes = [self.codes.setdefault(k, len(self.codes)) for k in groups.select(TRACK_KEYS).iter_rows()]
        out = np.empty(frame.height, np.int64)
        out[groups["row"].explode().to_numpy()] = np.repeat(
            np.array(codes, np.int64), groups["row"].list.len().to_numpy()
        )
        return out


class RowCodes:
    """A small code per slice of the rank (a track's, a place's), in file order, noted by the layout pass so that
    the writing pass looks each chunk's codes up instead of grouping its key columns again; kept in a temporary
    file in `folder` (spill.Spill), not in memory."""

    def __init__(self, folder: Path) -> None:
        self.rows = Spill(np.int32, folder)

    def add(self, code: I64) -> None:
        """The next window's codes (rows in file order)."""
        self.rows.append(code)

    def of(self, first_row: int, count: int) -> I64:
        """The codes of rows first_row, ..., first_row + count - 1."""
        return self.rows.read(first_row, count).astype(np.int64)


class Overlaps:
    """Finds the tracks where a slice starts before the one before it on the track ended (overlap_lanes' test),
    window by window, and lays out their slices from the one before the first overlap on: earlier slices each
    stand alone (nothing overlaps them), so their lane is 0 and the others' lanes do not depend on them.

    Lanes are worked out cluster by cluster (slices linked by overlaps; nesting_lanes' own unit): a cluster is
    laid out once a later slice starts after all of it ended, so only each track's open cluster is held."""

    def __init__(self) -> None:
        self.last: dict[int, tuple[int, int, int, int]] = {}  # code -> (row, start, end, tag) of its last slice
        self.open: dict[int, tuple[I64, I64, I64, I64]] = {}  # busy track -> (rows, starts, ends, tags), open cluster
        self.moved: list[tuple[I64, I64, I64, I64]] = []  # (rows, codes, lanes, tags) of slices off their track

    def add(self, first_row: int, code: I64, start: I64, end: I64, tag: I64 | None = None) -> None:
        """The next window's slices (in file order; rows first_row, first_row + 1, ...); `tag`: a number per slice
        that lanes() hands back with each slice moved off its track (the Chrome export's thread label)."""
        order = np.argsort(code, kind="stable")
        c, s, e = code[order], start[order], end[order]
        g = np.zeros(c.shape[0], np.int64) if tag is None else tag[order]
        heads = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
        tails = np.r_[heads[1:], c.shape[0]]
        prev = np.empty(c.shape[0], np.int64)
        prev[1:] = e[:-1]
        prev[heads] = [self.last[k][2] if k in self.last else _NEVER for k in c[heads].tolist()]
        over = s < prev
        for k, h, t in zip(c[heads].tolist(), heads.tolist(), tails.tolist(), strict=True):
            if k not in self.open and over[h:t].any():
                last = self.last.get(k)
                held = [np.array([v] if last else [], np.int64) for v in (last or (0, 0, 0, 0))]
                self.open[k] = (held[0], held[1], held[2], held[3])
            if k in self.open:
                rows, starts, ends, tags = self.open[k]
                self._lay_out(
                    k,
                    np.concatenate([rows, first_row + order[h:t]]),
                    np.concatenate([starts, s[h:t]]),
                    np.concatenate([ends, e[h:t]]),
                    np.concatenate([tags, g[h:t]]),
                )
            j = t - 1
            self.last[k] = (first_row + int(order[j]), int(s[j]), int(e[j]), int(g[j]))

    def _lay_out(self, code: int, rows: I64, starts: I64, ends: I64, tags: I64, *, final: bool = False) -> None:
        """Lay out the closed clusters of a track's held slices; hold its open one (none when final)."""
        reach = np.maximum.accumulate(ends)
        cut = rows.shape[0] if final else int(np.flatnonzero(np.r_[True, starts[1:] >= reach[:-1]])[-1])
        if cut > 1:
            lanes = nesting_lanes(np.zeros(cut, np.int64), starts[:cut], ends[:cut])
            moved = np.flatnonzero(lanes)
            if moved.size:
                self.moved.append((rows[moved], np.full(moved.size, code, np.int64), lanes[moved], tags[moved]))
        self.open[code] = (rows[cut:], starts[cut:], ends[cut:], tags[cut:])

    def lanes(self) -> tuple[I64, I64, I64, I64]:
        """(row, code, lane, tag) of every slice off its track (lane >= 1), by row."""
        for code, held in list(self.open.items()):
            self._lay_out(code, *held, final=True)
        if not self.moved:
            none = np.zeros(0, np.int64)
            return none, none, none, none
        rows, codes, lanes, tags = (np.concatenate(col) for col in zip(*self.moved, strict=True))
        by_row = np.argsort(rows)
        return rows[by_row], codes[by_row], lanes[by_row], tags[by_row]


class Launches:
    """The rank's launch correlation ids (sorted) with their launch's start, and which launch->run pairs each
    correlation id has (pair k, in file order of its GPU record, gets flow id first_id + k)."""

    def __init__(self, trace: Trace, node: str, rank: int, *, dense: bool = True) -> None:
        """`dense`: look ids up in a table where they are dense (False: always by binary search)."""
        api = next(p for p in rank_parts(trace, node, rank) if p.kind == "api")
        calls = (  # the two columns only: filtering the table itself would copy all of its rank's rows
            api.table.lazy()
            .filter(api.rows & pl.col("correlation_id").is_not_null())
            .select("correlation_id", "start_ns")
            .collect()
        )
        corr = calls["correlation_id"].cast(pl.Int64).to_numpy()
        start = calls["start_ns"].to_numpy()
        del calls
        if corr.size > 1 and not bool((corr[1:] >= corr[:-1]).all()):  # ids come sorted where calls are in order
            order = np.argsort(corr, kind="stable")
            corr, start = corr[order], start[order]
            del order
        step = corr[1:] != corr[:-1]
        if bool(step.all()):  # each id launched once (the common case): no copies of the columns
            ids, self.launch_start = corr, start
        else:
            firsts = np.flatnonzero(np.r_[True, step])
            ids, self.launch_start = corr[firsts], np.minimum.reduceat(start, firsts)
            del firsts
        del step, corr, start
        self.base = int(ids[0]) if ids.size else 0
        if ids.size and int(ids[-1]) - self.base < 2**32 and int(ids[-1]) < 2**63 - 2**32:
            # ids past the first, 4 bytes each: offsets under 2**32 are their low 32 bits' difference (no 8-byte copy)
            self.ids: NDArray[np.uint32] | I64 = ids.astype(np.uint32)
            self.ids -= np.uint32(self.base & 0xFFFFFFFF)
        else:
            self.ids, self.base = ids, 0
        del ids
        self.count = int(self.ids.size)
        """Distinct launch correlation ids."""
        self.lookup: NDArray[np.int32] | None = None
        """Where ids are dense (as counters give them: a span under twice their count), the place of each id past
        the first (-1: none), so that `match` is one gather, not a binary search per row (~0.08 s per 2 M rows);
        `ids` is then let go (the table holds them)."""
        span = int(self.ids[-1]) + 1 if self.ids.size else 0
        if dense and self.ids.dtype == np.uint32 and span <= 2 * self.ids.size:
            self.lookup = np.full(span, -1, np.int32)
            self.lookup[self.ids] = np.arange(self.ids.size, dtype=np.int32)
            self.ids = self.ids[:0]

    def match(self, corr: pl.Series) -> tuple[I64, NDArray[np.bool_]]:
        """Place of each correlation id among the launches', and whether it is one."""
        values, valid = int_column(corr)  # 0 where null
        present = np.ones(values.shape[0], np.bool_) if valid is None else valid
        if self.lookup is not None:
            inside = present & (values >= self.base) & (values < self.base + self.lookup.shape[0])
            at = self.lookup[np.where(inside, values - self.base, 0)].astype(np.int64)
            found = inside & (at >= 0)
            return np.where(found, at, 0), found
        if self.ids.dtype == np.uint32:  # ids as offsets from the first: one outside its 2**32 is no launch
            present &= (values >= self.base) & (values < self.base + 2**32)
            values = np.where(present, values - self.base, 0).astype(np.uint32)
        at = np.searchsorted(self.ids, values).clip(0, max(self.ids.size - 1, 0))
        found = present & (self.ids[at] == values if self.ids.size else False)
        return at, found

    def add(self, window: pl.DataFrame) -> tuple[NDArray[np.int32], NDArray[np.bool_]]:
        """The next window's launch->run pairs (its launched GPU records, in file order): each one's launch (its
        place among the ids) and whether the record starts at or after its launch."""
        at, found = self.match(window["correlation_id"])
        gpu = np.flatnonzero(kind_in(window["kind"], STREAM_KINDS) & found)
        return at[gpu].astype(np.int32), window["start_ns"].to_numpy()[gpu] >= self.launch_start[at[gpu]]


class RankLayout:
    """Tracks, lanes and flow ids of one rank's slices (after the layout pass over `slices`)."""

    def __init__(
        self, trace: Trace, node: str, rank: int, slices: RankSlices, tree: TrackTree, proc: int, folder: Path
    ) -> None:
        """`folder`: where the temporary files go (spill.Spill: the output's folder)."""
        codes, overlaps, self.launches = _TrackCodes(), Overlaps(), Launches(trace, node, rank)
        self.row_codes = RowCodes(folder)
        row = 0
        pair_parts: list[NDArray[np.int32]] = []
        self.term = Spill(np.bool_, folder)
        """Per pair: does the GPU record start at or after its launch (then it ends the flow)."""
        for window in slices.windows(LAYOUT_COLUMNS):
            code = codes.of(window)
            self.row_codes.add(code)
            overlaps.add(row, code, window["start_ns"].to_numpy(), window["end_ns"].to_numpy())
            pair_corr, term = self.launches.add(window)
            pair_parts.append(pair_corr)
            self.term.append(term)
            row += window.height
        keys = sorted(codes.codes)
        made = track_uuids(tree, proc, trace, node, rank, keys)
        self.uuid_of: I64 = np.zeros(len(keys), np.int64)
        self.uuid_of[[codes.codes[k] for k in keys]] = made
        self.lane_rows, lane_codes, lanes, _ = overlaps.lanes()
        base = self.uuid_of[lane_codes]
        pairs = np.unique(np.stack([base, lanes], axis=1), axis=0) if lanes.size else np.zeros((0, 2), np.int64)
        lane_uuid = {(b, k): tree.lane(b, k) for b, k in pairs.tolist()}
        self.lane_uuids: I64 = np.array(
            [lane_uuid[(b, k)] for b, k in zip(base.tolist(), lanes.tolist(), strict=True)], np.int64
        )
        pair_corr = np.concatenate(pair_parts) if pair_parts else np.zeros(0, np.int32)
        del pair_parts
        self.launches.launch_start = self.launches.launch_start[:0]  # the pairs' `term` says all it was for
        self.pairs = int(pair_corr.shape[0])
        self.pair_of_id = _single_pairs(pair_corr, self.launches.count) if self.pairs < 2**31 else None
        """Where no id launched two GPU records (the common case), each id's pair (-1: none, or launch written):
        4 bytes an id instead of the three arrays below (9 bytes, and a sort of the pairs)."""
        self.pairs_by_corr: NDArray[np.int32] | I64 = np.zeros(0, np.int32)
        self.corr_pairs: NDArray[np.int32] | I64 = np.zeros(0, np.int32)
        """Per distinct launch correlation id k, its pairs are pairs_by_corr[corr_pairs[k]:corr_pairs[k + 1]]."""
        self.launched = np.zeros(0, np.bool_)
        if self.pair_of_id is None:
            self.pairs_by_corr = np.argsort(pair_corr, kind="stable")
            if self.pairs < 2**31:
                self.pairs_by_corr = self.pairs_by_corr.astype(np.int32)
            ends = np.searchsorted(pair_corr[self.pairs_by_corr], np.arange(self.launches.count + 1, dtype=np.int32))
            self.corr_pairs = ends.astype(np.int32) if self.pairs < 2**31 else ends
            self.launched = np.zeros(self.launches.count, np.bool_)
        self.next_pair = 0

    def tracks(self, chunk: pl.DataFrame, first_row: int) -> I64:
        """Track uuid of each slice of the chunk (rows first_row, first_row + 1, ... in file order)."""
        track = self.uuid_of[self.row_codes.of(first_row, chunk.height)]
        a, b = np.searchsorted(self.lane_rows, [first_row, first_row + chunk.height])
        track[self.lane_rows[a:b] - first_row] = self.lane_uuids[a:b]
        return track

    def flows(self, chunk: pl.DataFrame, first_id: int) -> tuple[I64, NDArray[np.uint64], I64, NDArray[np.uint64]]:
        """(flow_rows, flow_ids, terminating_rows, terminating_ids) of the next chunk, rows relative to it.

        A launch (the first API call of its correlation id, in file order) starts a flow to each GPU record it
        caused; the record ends it (terminating), or starts it too where it began before its launch (clock skew).
        """
        at, found = self.launches.match(chunk["correlation_id"])
        kind = chunk["kind"]
        gpu = np.flatnonzero(kind_in(kind, STREAM_KINDS) & found)
        gpu_ids = (first_id + self.next_pair + np.arange(gpu.size)).astype(np.uint64)
        term = cast("NDArray[np.bool_]", self.term.read(self.next_pair, gpu.size))  # bool already: no copy
        self.next_pair += gpu.size
        calls = np.flatnonzero(kind_in(kind, ["api"]) & found)
        corr, first = np.unique(at[calls], return_index=True)
        if self.pair_of_id is not None:  # an id's first call launches its one pair, then the id has none left
            pair = self.pair_of_id[corr]
            has = pair >= 0
            self.pair_of_id[corr[has]] = -1
            launch, launch_ids = calls[first[has]], (first_id + pair[has].astype(np.int64)).astype(np.uint64)
        else:
            fresh = ~self.launched[corr]
            corr, launch = corr[fresh], calls[first[fresh]]
            self.launched[corr] = True
            lo, hi = self.corr_pairs[corr].astype(np.int64), self.corr_pairs[corr + 1].astype(np.int64)
            counts = hi - lo
            pick = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
            launch_ids = (first_id + self.pairs_by_corr[pick].astype(np.int64)).astype(np.uint64)
            launch = np.repeat(launch, counts)
        flow_rows = np.concatenate([launch, gpu[~term]]).astype(np.int64)
        flow_ids = np.concatenate([launch_ids, gpu_ids[~term]])
        return flow_rows, flow_ids, gpu[term].astype(np.int64), gpu_ids[term]


def _single_pairs(pair_corr: NDArray[np.int32], ids: int) -> NDArray[np.int32] | None:
    """Each id's pair where no id has two (-1: none); None where one has."""
    pair_of_id = np.full(ids, -1, np.int32)
    k = np.arange(pair_corr.shape[0], dtype=np.int32)
    pair_of_id[pair_corr] = k  # of an id's pairs, the last one stays
    return pair_of_id if np.array_equal(pair_of_id[pair_corr], k) else None
