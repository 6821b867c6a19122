"""The timeline's track index: per-track sorted numpy arrays, a coarse overview, and launch<->run links.

A *track* is one timeline row: a GPU stream (kernels and memory ops), a CPU thread's CUDA API calls, its NVTX
ranges at one depth, its framework operators, or one counter series. The loader worker builds the index in steps
(see ktrace.tui.index_build): first the track list and a coarse busy overview (enough for the first screen), then
every track's sorted arrays (drawing any viewport is then a handful of `numpy.searchsorted` calls per row), then
the correlation lookups. No textual here.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import polars as pl
from numpy.typing import NDArray

from ktrace.model.trace import Trace
from ktrace.tui.overview import Overview
from ktrace.tui.track_types import TABLE_CODES, BuiltTracks, Links, Track

MAX_RANGE_DEPTH = 4
"""NVTX ranges deeper than this share the deepest row."""


@dataclass
class TrackIndex:
    """Every track of a trace, the time span, and lookups from table rows back to tracks."""

    trace: Trace
    tracks: list[Track]
    t0: int
    t1: int
    by_key: dict[str, int] = field(default_factory=dict)
    """Track key -> position in tracks."""
    place: dict[str, tuple[NDArray[np.int64], NDArray[np.int64]]] = field(default_factory=dict)
    """Table -> (track id per row, slice position per row); -1 where a row is on no track (once ready)."""
    corr: dict[str, tuple[NDArray[np.int64], NDArray[np.int64]]] = field(default_factory=dict)
    """Table -> (sorted rank-qualified correlation keys, row order) for launch<->run joins (once links are in)."""
    node_ids: dict[str, int] = field(default_factory=dict)
    """Node name -> small integer used in correlation keys."""
    overview: Overview | None = None
    """Coarse busy bins of every slice track, drawn until the track is ready."""
    device_busy: dict[tuple[str, int, int], int] = field(default_factory=dict)
    """Exact GPU busy time (union over its streams) per (node, rank, device), once an analysis gave it."""
    _owned: dict[tuple[str, int, str], list[int]] | None = field(default=None, init=False, repr=False)
    _on_gpu: dict[tuple[str, int, int, int], int] | None = field(default=None, init=False, repr=False)

    @cached_property
    def multi_rank(self) -> bool:
        """True when the trace has more than one (node, rank): track titles then start with the rank."""
        return len({(t.node, t.rank) for t in self.tracks if t.rank >= 0}) > 1

    def title(self, track_id: int) -> str:
        """The row title of a track in the timeline: "what · where" (see title_parts)."""
        return join_title(self.title_parts(track_id))

    def title_parts(self, track_id: int) -> tuple[str, str]:
        """(what, where) of a track's row title (see track_title_parts); Kineto's GPU annotation rows are
        "GPU annotations" on "GPU<device> s<stream>"."""
        track = self.tracks[track_id]
        parts = track.key.split("/")
        if track.kind == "ranges" and len(parts) >= 5 and parts[2][1:].isdigit() and parts[3][1:].isdigit():
            device = self.gpu_annotations().get((track.node, track.rank, int(parts[2][1:]), int(parts[3][1:])))
            if device is not None:
                what = f"r{track.rank} GPU annotations" if self.multi_rank else "GPU annotations"
                return what, f"GPU{device} s{parts[3][1:]}"
        return track_title_parts(track, self.multi_rank)

    def gpu_annotations(self) -> dict[tuple[str, int, int, int], int]:
        """(node, rank, pid, tid) of the range rows drawn on a GPU -> that GPU's device number.

        Kineto's gpu_user_annotation rows carry pid = device and tid = stream; they belong under the GPU (as in
        the Perfetto export), not under the host as a "pid 0 / thread 7".
        """
        if self._on_gpu is None:
            ranges = self.trace.ranges
            found: dict[tuple[str, int, int, int], int] = {}
            if ranges.height and "on_gpu" in ranges.columns:
                rows = (
                    ranges.filter(pl.col("on_gpu"))
                    .select(pl.col("node").cast(pl.String), "rank", "pid", "tid", "device")
                    .unique()
                )
                for node, rank, pid, tid, device in rows.iter_rows():
                    found[(str(node), int(rank), int(pid), int(tid))] = int(device if device is not None else pid)
            self._on_gpu = found
        return self._on_gpu

    @property
    def ready(self) -> bool:
        """True once every track's arrays are attached."""
        return all(t.ready for t in self.tracks)

    @property
    def links_ready(self) -> bool:
        """True once the correlation lookups are attached (linked_rows is empty before)."""
        return "api" in self.corr

    def tracks_of(self, node: str, rank: int, kind: str) -> list[int]:
        """Ids of the tracks of one kind on one (node, rank) (the grouping is built once, on first use)."""
        if self._owned is None:
            owned: dict[tuple[str, int, str], list[int]] = {}
            for i, t in enumerate(self.tracks):
                owned.setdefault((t.node, t.rank, t.kind), []).append(i)
            self._owned = owned
        return self._owned.get((node, rank, kind), [])

    def attach(self, built: BuiltTracks) -> None:
        """Put the sorted arrays built by the loader worker on their tracks (cheap: no copy)."""
        for tid, track in built.tracks.items():
            self.tracks[tid] = track
        self.place.update(built.place)

    def attach_links(self, links: Links) -> None:
        """Put the correlation lookups built by the loader worker in place."""
        self.corr.update(links.corr)
        self.node_ids.update(links.node_ids)

    def track(self, key: str) -> Track:
        """The track with this key."""
        return self.tracks[self.by_key[key]]

    def locate(self, table: str, row: int) -> tuple[int, int] | None:
        """(track id, slice position) of a table row, or None when the row is on no (ready) track."""
        if table not in self.place:
            return None
        tid, pos = self.place[table]
        if tid[row] < 0 or not self.tracks[int(tid[row])].ready:
            return None
        return int(tid[row]), int(pos[row])

    def source(self, track_id: int, pos: int) -> tuple[str, int]:
        """(table, row) of slice `pos` of a track."""
        track = self.tracks[track_id]
        code = int(track.table[pos])
        return ("counters" if code < 0 else TABLE_CODES[code]), int(track.rows[pos])

    def slice_names(self, track: Track, positions: list[int]) -> dict[int, str]:
        """Display names of some slices of a track (a gather per source table, no row loop)."""
        out: dict[int, str] = {}
        if not positions or track.kind == "counter" or not track.ready:
            return out
        pos = np.asarray(positions, np.int64)
        codes = track.table[pos]
        for code in np.unique(codes).tolist():
            name = TABLE_CODES[code]
            sel = pos[codes == code]
            rows = pl.Series(track.rows[sel])
            frame = self.trace.table(name)

            def col(c: str, frame: pl.DataFrame = frame, rows: pl.Series = rows) -> pl.Series:
                return frame.get_column(c).gather(rows).cast(pl.String)

            if name == "memory":
                texts = (col("op") + " " + col("copy_kind")).to_list()
            elif name == "syncs":
                texts = col("sync_type").to_list()
            else:
                texts = col("name").to_list()
            out.update(zip(sel.tolist(), (str(t) for t in texts), strict=False))
        return out

    def linked_rows(self, table: str, row: int) -> list[tuple[str, int]]:
        """Rows joined to this one by correlation id: a launch's kernels/copies, or a kernel's launch.

        Binary searches in the correlation lookups; empty until they are attached (see links_ready): never a scan.
        """
        targets = ("kernels", "memory") if table == "api" else ("api",) if table in ("kernels", "memory") else ()
        if not targets or not self.links_ready:
            return []
        rec = self.trace.table(table).select("node", "rank", "correlation_id").row(row)
        node, rank, corr = str(rec[0]), int(rec[1]), rec[2]
        if corr is None or corr < 0:
            return []
        out: list[tuple[str, int]] = []
        for target in targets:
            keys, order = self.corr[target]
            key = correlation_key(self.node_ids.get(node, 0), rank, int(corr))
            lo, hi = np.searchsorted(keys, [key, key + 1])
            out.extend((target, int(r)) for r in order[lo:hi])
        return out


def track_title_parts(track: Track, with_rank: bool = False) -> tuple[str, str]:
    """A track's row title as (what the row is, where it runs), the telling part first: ("stream 7", "GPU0"),
    ("CUDA API", "T9946"), ("ranges lvl 1", "T9946"), ("r3 stream 7", "GPU0") with several ranks; where is ""
    when what says it all (counters, a GPU's stream-less row)."""
    parts = track.key.split("/")
    where = ""
    if track.kind == "stream" and len(parts) >= 4:
        stream = parts[3][1:]
        what, where = (
            (f"stream {stream}", f"GPU{parts[2][3:]}") if stream != "-1" else (f"GPU{parts[2][3:]} (no stream)", "")
        )
    elif track.kind in ("api", "ops", "ranges") and len(parts) >= 5:
        ops = "Python" if parts[4] == "py" else "operators"
        what = {"api": "CUDA API", "ops": ops}.get(track.kind) or f"ranges lvl {parts[4][4:] or 0}"
        where = f"T{parts[3][1:]}"
    else:
        what = track.label
    return (f"r{track.rank} {what}" if with_rank and track.rank >= 0 else what), where


def join_title(parts: tuple[str, str]) -> str:
    """ "what · where" (or what alone)."""
    what, where = parts
    return f"{what} · {where}" if where else what


def correlation_key(node_id: int, rank: int, corr: int) -> int:
    """The rank-qualified correlation key ((node << 52) + ((rank + 1) << 40) + correlation_id) of one row."""
    return (node_id << 52) + ((rank + 1) << 40) + corr


def colour_lut(series: pl.Series) -> NDArray[np.int64]:
    """crc32 colour per dictionary code of a categorical column: a row's colour is lut[its physical code]."""
    names = code_names(series)
    lut = np.zeros(max(names, default=0) + 1, np.int64)
    for code, name in names.items():
        lut[code] = zlib.crc32(name.encode())
    return lut


def colour_lut_of_rows(series: pl.Series, code_row: NDArray[np.int64]) -> NDArray[np.int64]:
    """colour_lut from one row per code (TrackScan's code_row, -1 where a code is absent): no pass over the column.

    Codes past the column's dictionary (the null stand-in) and null names get colour 0.
    """
    lut = np.zeros(code_row.size, np.int64)
    seen = np.flatnonzero(code_row >= 0)
    if seen.size:
        names = series.gather(pl.Series(code_row[seen])).cast(pl.String).to_list()
        lut[seen] = [0 if name is None else zlib.crc32(name.encode()) for name in names]
    return lut


def code_names(series: pl.Series) -> dict[int, str]:
    """Dictionary code -> string of a categorical column (over its distinct values only)."""
    uniq = series.unique()
    return dict(zip(uniq.to_physical().to_list(), uniq.cast(pl.String).to_list(), strict=False))
