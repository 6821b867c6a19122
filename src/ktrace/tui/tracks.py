"""Pure track index of a Trace: per-track sorted numpy arrays built once, plus launch<->run links.

A *track* is one timeline row: a GPU stream (kernels and memory ops), a CPU thread's CUDA API calls, its NVTX
ranges at one depth, its framework operators, or one counter series. Building the index sorts each track's start
times once (10 M kernels: one group-by and per-track argsorts), so drawing any viewport is a handful of
`numpy.searchsorted` calls per row. No textual here.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np
import polars as pl
from numpy.typing import NDArray

from ktrace.model.trace import Trace

TABLE_CODES: tuple[str, ...] = ("kernels", "memory", "api", "ranges", "ops", "syncs")
"""Source table of a slice, by its code in Track.table."""

MAX_RANGE_DEPTH = 4
"""NVTX ranges deeper than this share the deepest row."""

_CORR_SHIFT = np.int64(1) << np.int64(40)


@dataclass(eq=False)
class Track:
    """One timeline row: sorted slices (or counter samples) and where each came from."""

    key: str
    """Stable id, e.g. "node0/0/gpu0/s7"."""
    label: str
    """Short name for the row head."""
    kind: str
    """"stream", "api", "ranges", "ops" or "counter"."""
    node: str
    rank: int
    starts: NDArray[np.int64]
    """Slice start times (or sample times of a counter), sorted ascending."""
    ends: NDArray[np.int64]
    """Slice end times (equal to starts for a counter)."""
    max_end: NDArray[np.int64]
    """Running maximum of ends: slice i or an earlier one still runs at t iff max_end[i] > t."""
    cum_ns: NDArray[np.int64]
    """Prefix sums of durations (len n + 1): busy time of slices [i, j) is cum_ns[j] - cum_ns[i]."""
    table: NDArray[np.int8]
    """Source table code (TABLE_CODES) per slice."""
    rows: NDArray[np.int64]
    """Row index in the source table per slice."""
    colour: NDArray[np.int64]
    """Colour seed per slice (name dictionary code)."""
    values: NDArray[np.float64] | None = None
    """Counter values (counter tracks only)."""
    busy_ns: int = 0
    """Union of the track's slices in ns (0 for counters)."""

    @property
    def size(self) -> int:
        """Number of slices or samples."""
        return int(self.starts.size)


@dataclass
class TrackIndex:
    """Every track of a trace, the time span, and lookups from table rows back to tracks."""

    trace: Trace
    tracks: list[Track]
    t0: int
    t1: int
    by_key: dict[str, int] = field(default_factory=dict)
    """Track key -> position in tracks."""
    place: dict[str, tuple[NDArray[np.int32], NDArray[np.int64]]] = field(default_factory=dict)
    """Table -> (track id per row, slice position per row); -1 where a row is on no track."""
    corr: dict[str, tuple[NDArray[np.int64], NDArray[np.int64]]] = field(default_factory=dict)
    """Table -> (sorted rank-qualified correlation keys, row order) for launch<->run joins."""
    node_ids: dict[str, int] = field(default_factory=dict)
    """Node name -> small integer used in correlation keys."""

    def track(self, key: str) -> Track:
        """The track with this key."""
        return self.tracks[self.by_key[key]]

    def locate(self, table: str, row: int) -> tuple[int, int] | None:
        """(track id, slice position) of a table row, or None when the row is on no track."""
        if table not in self.place:
            return None
        tid, pos = self.place[table]
        if tid[row] < 0:
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
        if not positions or track.kind == "counter":
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
        """Rows joined to this one by correlation id: a launch's kernels/copies, or a kernel's launch."""
        targets = ("kernels", "memory") if table == "api" else ("api",) if table in ("kernels", "memory") else ()
        if not targets or table not in self.corr:
            return []
        key = _corr_keys(self.trace.table(table)[row:row + 1], self.node_ids)[0]
        if key < 0:
            return []
        out: list[tuple[str, int]] = []
        for target in targets:
            keys, order = self.corr[target]
            lo, hi = np.searchsorted(keys, [key, key + 1])
            out.extend((target, int(r)) for r in order[lo:hi])
        return out


def build_index(trace: Trace) -> TrackIndex:
    """Build every track of `trace` (sorting each once) and the correlation lookups."""
    span = trace.span_ns() or (0, 1)
    tracks: list[Track] = []
    place: dict[str, tuple[NDArray[np.int32], NDArray[np.int64]]] = {
        name: (np.full(trace.table(name).height, -1, np.int32), np.full(trace.table(name).height, -1, np.int64))
        for name in ("kernels", "memory", "api", "ranges", "ops")}
    _add_gpu_tracks(trace, tracks, place)
    _add_cpu_tracks(trace, tracks, place)
    _add_counter_tracks(trace, tracks)
    nodes: set[str] = set()
    for name in ("kernels", "memory", "api"):
        nodes.update(trace.table(name)["node"].cast(pl.String).unique().to_list())
    node_ids = {n: i for i, n in enumerate(sorted(nodes))}
    corr = {name: _corr_lookup(trace.table(name), node_ids) for name in ("kernels", "memory", "api")}
    index = TrackIndex(trace, tracks, span[0], max(span[1], span[0] + 1), place=place, corr=corr,
                       node_ids=node_ids)
    index.by_key = {t.key: i for i, t in enumerate(tracks)}
    return index


def _corr_keys(frame: pl.DataFrame, node_ids: dict[str, int]) -> NDArray[np.int64]:
    """Rank-qualified correlation keys (rank << 40 | correlation_id); -1 where the id is null."""
    if frame.height == 0:
        return np.empty(0, np.int64)
    rank = frame["rank"].to_numpy().astype(np.int64) + 1
    corr = frame["correlation_id"].fill_null(-1).to_numpy().astype(np.int64)
    codes = frame["node"].to_physical().to_numpy().astype(np.int64)
    lut = np.zeros(int(codes.max()) + 1, np.int64)
    for code, name in _code_names(frame["node"]).items():
        lut[code] = node_ids.get(name, 0)
    node = lut[codes]
    key = (node << np.int64(52)) + rank * _CORR_SHIFT + corr
    return np.where(corr < 0, -1, key)


def _corr_lookup(frame: pl.DataFrame, node_ids: dict[str, int]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    keys = _corr_keys(frame, node_ids)
    order = np.argsort(keys, kind="stable")
    return keys[order], order


def _groups(frame: pl.DataFrame, keys: list[str]) -> list[tuple[tuple[object, ...], NDArray[np.int64]]]:
    """(key values, row indices in frame order) per group, groups in sorted key order; no per-row objects.

    A `node` key is grouped by its dictionary code and given back as a string.
    """
    if frame.height == 0:
        return []
    names = _code_names(frame["node"]) if "node" in keys else {}
    sel = [pl.col(k).to_physical() if k == "node" else pl.col(k) for k in keys]
    grouped = (frame.select(sel).with_row_index("_row")
               .group_by(keys).agg(pl.col("_row")).sort(keys))
    rows = grouped["_row"].explode().to_numpy().astype(np.int64)
    sizes = grouped["_row"].list.len().to_numpy().astype(np.int64)
    bounds = np.concatenate((np.zeros(1, np.int64), np.cumsum(sizes)))
    out = []
    for i, values in enumerate(grouped.select(keys).iter_rows()):
        values = tuple(names.get(v, v) if k == "node" else v for k, v in zip(keys, values, strict=False))
        out.append((values, rows[bounds[i]:bounds[i + 1]]))
    return out


def stable_colour(series: pl.Series) -> NDArray[np.int64]:
    """A colour seed per row from the string itself (crc32), not from process-global dictionary codes."""
    codes = series.to_physical().to_numpy().astype(np.int64)
    if codes.size == 0:
        return codes
    lut = np.zeros(int(codes.max()) + 1, np.int64)
    for code, name in _code_names(series).items():
        lut[code] = zlib.crc32(name.encode())
    return lut[codes]


def _code_names(series: pl.Series) -> dict[int, str]:
    """Dictionary code -> string of a categorical column (over its distinct values only)."""
    uniq = series.unique()
    return dict(zip(uniq.to_physical().to_list(), uniq.cast(pl.String).to_list(), strict=False))


def make_track(key: str, label: str, kind: str, node: str, rank: int, starts: NDArray[np.int64],
               ends: NDArray[np.int64], table: NDArray[np.int8], rows: NDArray[np.int64],
               colour: NDArray[np.int64], values: NDArray[np.float64] | None = None) -> Track:
    """A Track from unsorted slices: sorts by start (stable) and precomputes the running arrays."""
    if starts.size > 1 and bool(np.any(starts[1:] < starts[:-1])):
        order = np.argsort(starts, kind="stable")
        starts, ends, table, rows, colour = starts[order], ends[order], table[order], rows[order], colour[order]
        values = None if values is None else values[order]
    max_end = np.maximum.accumulate(ends) if ends.size else ends
    dur = ends - starts
    cum = np.zeros(starts.size + 1, np.int64)
    np.cumsum(dur, out=cum[1:])
    busy = 0
    if kind != "counter" and starts.size:
        prev = np.concatenate(([starts[0]], max_end[:-1]))
        busy = int(np.maximum(0, ends - np.maximum(starts, prev)).sum())
    return Track(key, label, kind, node, rank, starts, ends, max_end, cum, table, rows, colour, values, busy)


def _register(tracks: list[Track], place: dict[str, tuple[NDArray[np.int32], NDArray[np.int64]]],
              track: Track) -> None:
    tid = len(tracks)
    tracks.append(track)
    for code, name in enumerate(TABLE_CODES):
        if name not in place:
            continue
        mask = track.table == code
        if mask.any():
            pos = np.flatnonzero(mask)
            place[name][0][track.rows[pos]] = tid
            place[name][1][track.rows[pos]] = pos


def _add_gpu_tracks(trace: Trace, tracks: list[Track], place: dict) -> None:  # type: ignore[type-arg]
    keys = ["node", "rank", "device", "stream"]
    parts = []
    for code, name in ((0, "kernels"), (1, "memory")):
        frame = trace.table(name)
        if frame.height == 0:
            continue
        colour = pl.Series(stable_colour(frame["name" if name == "kernels" else "copy_kind"]))
        parts.append(frame.select("node", "rank", "device",
                                  pl.col("stream").fill_null(-1), "start_ns", "end_ns")
                     .with_columns(_table=pl.lit(code, pl.Int8), _row=pl.int_range(frame.height, dtype=pl.Int64),
                                   _colour=colour))
    if not parts:
        return
    gpu = pl.concat(parts, rechunk=True)
    cols = {c: gpu[c].to_numpy() for c in ("start_ns", "end_ns", "_table", "_row", "_colour")}
    for (node, rank, device, stream), rows in _groups(gpu, keys):
        label = f"GPU{device} stream {stream}" if stream >= 0 else f"GPU{device} (no stream)"
        _register(tracks, place, make_track(
            f"{node}/{rank}/gpu{device}/s{stream}", label, "stream", str(node), int(rank),
            cols["start_ns"][rows], cols["end_ns"][rows], cols["_table"][rows], cols["_row"][rows],
            cols["_colour"][rows]))


def _add_cpu_tracks(trace: Trace, tracks: list[Track], place: dict) -> None:  # type: ignore[type-arg]
    for code, name in ((2, "api"), (4, "ops"), (3, "ranges")):
        frame = trace.table(name)
        if frame.height == 0:
            continue
        sel = [pl.col("node"), "rank", "pid", "tid"]
        if name == "ranges":
            sel.append(pl.col("depth").clip(0, MAX_RANGE_DEPTH - 1).alias("depth"))
        sub = frame.select(sel)
        starts, ends = frame["start_ns"].to_numpy(), frame["end_ns"].to_numpy()
        colour = stable_colour(frame["name"])
        for values, rows in _groups(sub, sub.columns):
            node, rank, pid, tid = values[:4]
            kind = {"api": "api", "ops": "ops", "ranges": "ranges"}[name]
            suffix = {"api": "api", "ops": "ops"}.get(name, f"nvtx{values[4] if len(values) > 4 else 0}")
            label = {"api": "CUDA API", "ops": "operators"}.get(name, f"ranges d{values[4] if len(values) > 4 else 0}")
            _register(tracks, place, make_track(
                f"{node}/{rank}/p{pid}/t{tid}/{suffix}", f"T{tid} {label}", kind, str(node), int(rank),
                starts[rows], ends[rows], np.full(rows.size, code, np.int8), rows, colour[rows]))


def _add_counter_tracks(trace: Trace, tracks: list[Track]) -> None:
    frame = trace.counters
    if frame.height == 0:
        return
    sub = frame.select("node", "rank", pl.col("metric").cast(pl.String), pl.col("instance").fill_null(-1))
    ts, value = frame["ts_ns"].to_numpy(), frame["value"].to_numpy().astype(np.float64)
    for (node, rank, metric, instance), rows in _groups(sub, sub.columns):
        label = metric if instance < 0 else f"{metric}[{instance}]"
        t = ts[rows]
        tracks.append(make_track(
            f"{node}/{rank}/c/{metric}/{instance}", label, "counter", str(node), int(rank), t, t.copy(),
            np.full(rows.size, -1, np.int8), rows, np.zeros(rows.size, np.int64), value[rows]))
