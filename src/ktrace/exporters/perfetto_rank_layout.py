"""What a rank's Perfetto slices need from the whole rank before its first event is written, found in one pass
over its windows (perfetto_slice_windows): the tracks (created in display order), the overlap lanes of the slices
that break nesting on their track, and the flow ids of every launch.

Then `tracks` and `flows` give each chunk its track uuids and flow ids, as assign_tracks + overlap_lanes and
launch_pairs + FlowChunks give them for the whole rank at once (the same numbers).

What is noted per slice goes to a temporary file, read back chunk by chunk (spill.Spill): its track's code
(RowCodes: `tracks` reads it rather than grouping the chunk's key columns again), and per launch->run pair whether
it ends its flow. What is noted per launch correlation id goes to files by the id's key (launches.Launches: its
launch's start; here its pair, spill.SpillTable), read and written a window's run of ids at a time. What stays in
memory: on a track where slices overlap (nested operators), start, end and row from the slice before its first
overlap on (24 bytes a slice); where ids are sparse, the sorted ids (launches); where an id launched two GPU
records, per pair its order by key and per key where its pairs start and whether its launch was written (17
bytes). The Chrome JSON export (chrome_layout) lays out its lanes and finds its launches with the same Overlaps
and Launches, and keeps its codes in RowCodes too.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np
import polars as pl
from numpy.typing import NDArray

from ktrace.exporters.launches import Launches
from ktrace.exporters.perfetto_slice_windows import RankSlices
from ktrace.exporters.perfetto_slices import STREAM_KINDS, kind_in
from ktrace.exporters.perfetto_tracks import TRACK_KEYS, slice_keys, track_uuids
from ktrace.exporters.spill import Spill, SpillTable
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


class RankLayout:
    """Tracks, lanes and flow ids of one rank's slices (after the layout pass over `slices`)."""

    def __init__(
        self, trace: Trace, node: str, rank: int, slices: RankSlices, tree: TrackTree, proc: int, folder: Path
    ) -> None:
        """`folder`: where the temporary files go (spill.Spill: the output's folder)."""
        codes, overlaps, self.launches = _TrackCodes(), Overlaps(), Launches(trace, node, rank, folder)
        self.row_codes = RowCodes(folder)
        row = 0
        self.term = Spill(np.bool_, folder)
        """Per pair: does the GPU record start at or after its launch (then it ends the flow)."""
        self.pair_keys = Spill(np.int64, folder)
        """Per pair, its launch's key (read back only where an id launched two GPU records)."""
        self.pair_of_key: SpillTable | None = SpillTable(np.int64, self.launches.keys, folder)
        """Where no id launched two GPU records (the common case), each launch key's pair + 1 (0: none, or its
        launch written), in a file; None where one did (the arrays below, in memory, instead)."""
        self.pairs = 0
        for window in slices.windows(LAYOUT_COLUMNS):
            code = codes.of(window)
            self.row_codes.add(code)
            overlaps.add(row, code, window["start_ns"].to_numpy(), window["end_ns"].to_numpy())
            launch_keys, term = self.launches.add(window)
            self.term.append(term)
            self.pair_keys.append(launch_keys)
            self._note_pairs(launch_keys)
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
        self.pairs_by_key: NDArray[np.int32] | I64 = np.zeros(0, np.int32)
        self.key_pairs: NDArray[np.int32] | I64 = np.zeros(0, np.int32)
        """Per launch key k, its pairs are pairs_by_key[key_pairs[k]:key_pairs[k + 1]] (where an id launched two
        GPU records: per pair and per key, in memory; int32 below 2**31 pairs, as before the spills)."""
        self.launched = np.zeros(0, np.bool_)
        if self.pair_of_key is None:
            pair_key = self.pair_keys.read(0, self.pairs).astype(np.int64)
            order = np.argsort(pair_key, kind="stable")
            ends = np.searchsorted(pair_key[order], np.arange(self.launches.keys + 1))
            del pair_key
            narrow = self.pairs < 2**31
            self.pairs_by_key = order.astype(np.int32) if narrow else order
            self.key_pairs = ends.astype(np.int32) if narrow else ends
            del order, ends
            self.launched = np.zeros(self.launches.keys, np.bool_)
        self.pair_keys.close()
        self.next_pair = 0

    def _note_pairs(self, keys: I64) -> None:
        """Number the window's pairs and note each one's key's pair, until a key has two."""
        first = self.pairs
        self.pairs += int(keys.shape[0])
        if self.pair_of_key is None or not keys.size:
            return
        numbers = np.arange(first + 1, self.pairs + 1, dtype=np.int64)
        if not bool(self.pair_of_key.get(keys).any()):
            self.pair_of_key.put(keys, numbers)  # a key twice in the window keeps one number: the check below fails
            if np.array_equal(self.pair_of_key.get(keys), numbers):
                return
        self.pair_of_key.close()
        self.pair_of_key = None

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
        kind = chunk["kind"]
        at, found = self.launches.match(chunk["correlation_id"], kind_in(kind, ["api"]))
        gpu = np.flatnonzero(kind_in(kind, STREAM_KINDS) & found)
        gpu_ids = (first_id + self.next_pair + np.arange(gpu.size)).astype(np.uint64)
        term = cast("NDArray[np.bool_]", self.term.read(self.next_pair, gpu.size))  # bool already: no copy
        self.next_pair += gpu.size
        calls = np.flatnonzero(kind_in(kind, ["api"]) & found)
        corr, first = np.unique(at[calls], return_index=True)
        if self.pair_of_key is not None:  # an id's first call launches its one pair, then the id has none left
            pair = self.pair_of_key.get(corr).astype(np.int64) - 1
            has = pair >= 0
            self.pair_of_key.put(corr[has], np.zeros(int(has.sum()), np.int64))
            launch, launch_ids = calls[first[has]], (first_id + pair[has]).astype(np.uint64)
        else:
            fresh = ~self.launched[corr]
            corr, launch = corr[fresh], calls[first[fresh]]
            self.launched[corr] = True
            lo, hi = self.key_pairs[corr], self.key_pairs[corr + 1]
            counts = hi - lo
            pick = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
            launch_ids = (first_id + self.pairs_by_key[pick]).astype(np.uint64)
            launch = np.repeat(launch, counts)
        flow_rows = np.concatenate([launch, gpu[~term]]).astype(np.int64)
        flow_ids = np.concatenate([launch_ids, gpu_ids[~term]])
        return flow_rows, flow_ids, gpu[term].astype(np.int64), gpu_ids[term]
