"""Building the track index in three steps, all off the UI thread and without holding the GIL for long.

1. `plan_index`: the track list (the distinct key tuples), each track's slice count and a coarse overview: one pass
   over polars' column chunks in place (no rechunk copy, no per-row array written). The first screen is drawn
   from this.
2. `build_tracks`: every track's rows grouped and sorted by start, with running max and prefix sums (the chunks
   are copied once into contiguous arrays here, with each row's track looked up again in the first pass's table).
3. `build_links`: the correlation lookups behind launch <-> kernel links (a filtered scan serves meanwhile): one
   lazy polars query per table.

Heavy work runs in lazy polars queries or in numba nogil kernels (ktrace.analysis.timeline_tracks);
numpy here only touches arrays of a few thousand values (one per track or bin), never one per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ktrace.model.trace import Trace
from ktrace.tui.counter_tracks import counter_tracks
from ktrace.tui.overview import N_BINS, Overview
from ktrace.tui.track_types import I64, TABLE_CODES, BuiltTracks, Links, Track, pending_track
from ktrace.tui.tracks import MAX_RANGE_DEPTH, TrackIndex, colour_lut_of_rows

if TYPE_CHECKING:
    from ktrace.analysis.timeline_tracks import ChunkRows, ScanResult, TrackScan

_ONE = np.zeros(1, np.int64)
"""A constant key column."""


@dataclass
class TablePart:
    """One table's rows in a slice group, as polars' column chunks (zero-copy numpy views; build_tracks copies them
    once), with the scan that numbered their keys and binned them."""

    code: int
    """TABLE_CODES code of the table."""
    n_rows: int
    chunks: list[ChunkRows]
    scan: TrackScan
    """Key table of the first pass: a row's group-local track is remap[its key id]."""
    found: ScanResult
    """Per key id: counts and overview bins (colour codes, not seeds)."""
    lut: I64
    """Colour seed per colour code."""
    remap: I64 = field(default_factory=lambda: np.empty(0, np.int64))


@dataclass
class SliceGroup:
    """Rows of one or two tables that share their tracks (kernels + memory share GPU streams)."""

    kind: str
    base: int
    """Global id of the group's first track."""
    parts: list[TablePart]
    keys: list[tuple[object, ...]]
    """Key values of each local track, sorted."""
    counts: I64 = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    """(tracks, parts): rows of each local track from each part."""


@dataclass
class IndexPlan:
    """What build_tracks needs from plan_index."""

    groups: list[SliceGroup]
    n_rows: dict[str, int]
    """Rows of each table that can be on a slice track."""


def warm_kernels() -> None:
    """Import numba and load the index kernels from its cache (0.4-1 s), on tiny inputs shaped like the real ones.

    The first step's kernels come first, then the second step's, so that their cache loads (which hold the GIL)
    happen while the app starts or the trace is read rather than right after the first screen.
    """
    from ktrace.analysis.timeline_tracks import ChunkRows, TrackScan, copy_into, sort_by_track, take_into, track_arrays

    u32, i32, i64 = (np.zeros(1, t) for t in (np.uint32, np.int32, np.int64))
    for a in (u32, i32, i64):
        a.flags.writeable = False  # like polars' zero-copy chunks: the same compiled variant
    scans = []
    for k2 in (i32, i64):  # GPU streams (device int32), CPU threads (pid int64)
        rows = ChunkRows(u32, i32, k2, i64, i64, i64, i64, u32)
        scan = TrackScan(1, 0, 1, 1, 0, with_ids=False)
        scan.add(rows)
        scans.append((scan, rows))
    out = np.zeros(1, np.int64)
    for scan, rows in scans:
        scan.track_of_rows(rows, out, out, 0)
    copy_into(out, 0, i64)
    take_into(out, 0, out, u32)
    order, offsets = sort_by_track(out, out, 1)
    track_arrays(order, offsets, out, out, out, 1)


FULL_OVERVIEW_RANKS = 8
"""Up to this many ranks every track's overview has N_BINS bins; beyond, fewer (overview_bins)."""
MIN_OVERVIEW_BINS = 256
"""Fewest overview bins: still about one per column of a fitted 200-column timeline."""


def overview_bins(trace: Trace) -> int:
    """Overview bins per track: N_BINS up to FULL_OVERVIEW_RANKS ranks, then shrinking with the rank count (down to
    MIN_OVERVIEW_BINS) so that the overview stays the size of an 8-rank one.

    The scan keeps six (tracks x bins) int64 arrays per table: at 1,024 ranks (9,216 tracks) and 4,096 bins that was
    4.8 GB and 12 s of CPU before the first screen. The overview is drawn only until the tracks are sorted (seconds
    later); the rank count comes from the small devices and threads tables (the kernels' keys without them).
    """
    small = [t for t in (trace.devices, trace.threads) if t.height]
    frames = small or [trace.kernels]  # a trace without either: one pass over the kernels' two key columns
    ranks = max(1, *(f.select("node", "rank").n_unique() for f in frames))
    return max(MIN_OVERVIEW_BINS, min(N_BINS, N_BINS * FULL_OVERVIEW_RANKS // ranks))


def plan_index(trace: Trace, n_bins: int | None = None) -> tuple[TrackIndex, IndexPlan]:
    """The track list with counts and a coarse overview (slice tracks pending), plus the plan to index them
    (`n_bins` overview bins per track, default overview_bins(trace))."""
    n_bins = overview_bins(trace) if n_bins is None else n_bins
    span = trace.span_ns() or (0, 1)
    t0, t1 = span[0], max(span[1], span[0] + 1)
    bin_ns = max(1, -(-(t1 - t0) // n_bins))
    tracks: list[Track] = []
    groups: list[SliceGroup] = []
    bins: list[tuple[I64, I64, I64]] = []
    scanned = _scan_tables(trace, (t0, bin_ns, n_bins))
    for kind, tables in SLICE_GROUPS:
        group = _slice_group(trace, kind, [scanned[t] for t in tables if t in scanned], len(tracks))
        if group is None:
            continue
        busy, first, last = _group_bins(group, n_bins)
        for i, key in enumerate(group.keys):
            est = int(np.minimum(busy[i], bin_ns).sum())
            tracks.append(pending_track(*_describe(kind, key), int(group.counts[i].sum()), _kernels(group, i), est))
        groups.append(group)
        bins.append((busy, first, last))
    overview = _overview(t0, bin_ns, bins, len(tracks), n_bins)
    tracks += counter_tracks(trace)
    index = TrackIndex(trace, tracks, t0, t1, overview=overview)
    index.by_key = {t.key: i for i, t in enumerate(tracks)}
    return index, IndexPlan(groups, {name: trace.table(name).height for name in TABLE_CODES[:5]})


def _group_bins(group: SliceGroup, n_bins: int) -> tuple[I64, I64, I64]:
    """(busy, first colour, last colour) per group track and bin; the first table's colours win (coarse)."""
    n = len(group.keys)
    busy = np.zeros((n, n_bins), np.int64)
    first = np.full((n, n_bins), -1, np.int64)
    last = np.full((n, n_bins), -1, np.int64)
    group.counts = np.zeros((n, len(group.parts)), np.int64)
    for j, part in enumerate(group.parts):
        found, at = part.found, part.remap
        busy[at] += found.busy
        group.counts[at, j] = found.counts
        first_colour = np.where(found.first_code >= 0, part.lut[np.maximum(found.first_code, 0)], -1)
        last_colour = np.where(found.last_code >= 0, part.lut[np.maximum(found.last_code, 0)], -1)
        first[at] = np.where(first[at] >= 0, first[at], first_colour)
        last[at] = np.where(last_colour >= 0, last_colour, last[at])
    return busy, first, last


SLICE_GROUPS = (("stream", ("kernels", "memory")), ("api", ("api",)), ("ops", ("ops",)), ("ranges", ("ranges",)))
"""Slice track kinds and the tables whose rows they show (kernels and memory copies share GPU streams)."""


def _kernels(group: SliceGroup, i: int) -> int:
    """Kernels on local track i."""
    return int(group.counts[i, 0]) if group.parts[0].code == 0 else 0


def _overview(t0: int, bin_ns: int, bins: list[tuple[I64, I64, I64]], n_tracks: int, n_bins: int) -> Overview:
    if not bins:
        empty = np.zeros((max(1, n_tracks), n_bins), np.int64)
        return Overview.from_bins(t0, bin_ns, empty, empty - 1, empty - 1)
    busy, first, last = (np.concatenate([b[i] for b in bins]) for i in range(3))
    return Overview.from_bins(t0, bin_ns, busy, first, last)


def _node_codes(trace: Trace) -> list[dict[int, str]]:
    """Physical code -> node name in kernels, memory and api (distinct values: one GIL-free query per table)."""
    frames = [trace.table(name).lazy().select(pl.col("node").unique()) for name in ("kernels", "memory", "api")]
    return [
        dict(zip(f["node"].to_physical().to_list(), f["node"].cast(pl.String).to_list(), strict=True))
        for f in pl.collect_all(frames)
    ]


def _key_exprs(kind: str) -> list[pl.Expr]:
    """Integer key columns of a table's rows: node code, rank, then device/stream or pid/tid(/depth)."""
    cols = ["device", "stream"] if kind == "stream" else ["pid", "tid"]
    exprs = [pl.col("node").to_physical().alias("_k0"), pl.col("rank").fill_null(-1).alias("_k1")]
    exprs += [pl.col(c).fill_null(-1).alias(f"_k{i + 2}") for i, c in enumerate(cols)]
    if kind == "ranges":
        exprs.append(pl.col("depth").fill_null(0).clip(0, MAX_RANGE_DEPTH - 1).cast(pl.Int64).alias("_k4"))
    elif kind == "ops":  # Python frames on a row of their own: a thread's outermost frame would cover its operators
        exprs.append((pl.col("category") == "python_function").fill_null(False).cast(pl.Int64).alias("_k4"))
    return exprs


def _scan_tables(trace: Trace, bins: tuple[int, int, int]) -> dict[str, TablePart]:
    """Every non-empty slice table scanned (one after the other: two threads measured no faster on 2 cores)."""
    return {
        table: _scan_table(trace.table(table), table, kind, bins)
        for kind, tables in SLICE_GROUPS
        for table in tables
        if trace.table(table).height
    }


def _slice_group(trace: Trace, kind: str, parts: list[TablePart], base: int) -> SliceGroup | None:
    """The group's tracks (its tables' keys, sorted) and each table's key ids mapped onto them."""
    values: list[list[tuple[object, ...]]] = []
    for part in parts:
        frame = trace.table(TABLE_CODES[part.code])
        found = part.found
        names = frame["node"].gather(pl.Series(found.first_row)).cast(pl.String).to_list()
        n_keys = len(_key_exprs(kind)) - 1
        values.append(
            [
                (name, *(int(v) for v in key[1 : 1 + n_keys]))
                for name, key in zip(names, found.keys.tolist(), strict=True)
            ]
        )
    if not parts:
        return None
    keys = sorted({v for vs in values for v in vs}, key=_sort_key)
    where = {k: i for i, k in enumerate(keys)}
    for part, vs in zip(parts, values, strict=True):
        part.remap = np.array([where[v] for v in vs], np.int64)
    return SliceGroup(kind, base, parts, keys)


def _scan_table(frame: pl.DataFrame, table: str, kind: str, bins: tuple[int, int, int]) -> TablePart:
    """One pass over a table's column chunks in place: key ids, counts, overview bins, colour lut."""
    from ktrace.analysis.timeline_tracks import ChunkRows, TrackScan

    colour = "copy_kind" if table == "memory" else "name"
    code = pl.col(colour).to_physical()
    max_code = int(frame.select(code.max()).item() or 0)
    cols = frame.select(*_key_exprs(kind), "start_ns", "end_ns", code.fill_null(max_code + 1).alias("_c"))
    if len({tuple(cols[c].chunk_lengths()) for c in cols.columns}) > 1:
        cols = cols.rechunk()  # chunks not aligned across columns (rare): one copy
    columns = [[x.to_numpy() for x in cols[c].get_chunks()] for c in cols.columns]
    n_keys = len(columns) - 3
    scan = TrackScan(frame.height, *bins, max_code + 1, with_ids=False)
    chunks = []
    for i in range(len(columns[0])):
        k = [columns[j][i] for j in range(n_keys)] + [_ONE] * (5 - n_keys)
        chunks.append(ChunkRows(k[0], k[1], k[2], k[3], k[4], columns[-3][i], columns[-2][i], columns[-1][i]))
        scan.add(chunks[-1])
    found = scan.result()
    lut = colour_lut_of_rows(frame[colour], found.code_row)
    return TablePart(TABLE_CODES.index(table), frame.height, chunks, scan, found, lut)


def _sort_key(key: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(str(v) if i == 0 else v for i, v in enumerate(key))


def _describe(kind: str, key: tuple[object, ...]) -> tuple[str, str, str, str, int]:
    """(key, label, kind, node, rank) of a slice track."""
    node, rank = str(key[0]), int(key[1])  # type: ignore[call-overload]
    if kind == "stream":
        device, stream = key[2], int(key[3])  # type: ignore[call-overload]
        label = f"GPU{device} stream {stream}" if stream >= 0 else f"GPU{device} (no stream)"
        return f"{node}/{rank}/gpu{device}/s{stream}", label, "stream", node, rank
    pid, tid = key[2], key[3]
    depth = key[4] if kind == "ranges" else 0
    python = kind == "ops" and key[4] == 1
    suffix = "py" if python else {"api": "api", "ops": "ops"}.get(kind, f"nvtx{depth}")
    label = "Python" if python else {"api": "CUDA API", "ops": "operators"}.get(kind, f"ranges d{depth}")
    return f"{node}/{rank}/p{pid}/t{tid}/{suffix}", f"T{tid} {label}", kind, node, rank


def build_tracks(plan: IndexPlan) -> BuiltTracks:
    """Sort every pending slice track's rows by start and gather its arrays (numba kernels, GIL released)."""
    from ktrace.analysis.timeline_tracks import sort_by_track, track_arrays

    built: dict[int, Track] = {}
    place: dict[str, tuple[I64, I64]] = {}
    for group in plan.groups:
        n = len(group.keys)
        track, starts, ends, colour = _group_rows(group)
        split = group.parts[0].n_rows
        order, offsets = sort_by_track(track, starts, n)
        arrays = track_arrays(order, offsets, starts, ends, colour, split)
        code = group.parts[0].code
        table = arrays.table if code == 0 else np.full(arrays.table.size, code, np.int8)
        for i, key in enumerate(group.keys):
            lo, hi = int(offsets[i]), int(offsets[i + 1])
            k, label, kind, node, rank = _describe(group.kind, key)
            built[group.base + i] = Track(
                k,
                label,
                kind,
                node,
                rank,
                arrays.starts[lo:hi],
                arrays.ends[lo:hi],
                arrays.max_end[lo:hi],
                arrays.cum_ns[lo + i : hi + i + 1],
                table[lo:hi],
                arrays.rows[lo:hi],
                arrays.colour[lo:hi],
                None,
                int(arrays.busy_ns[i]),
                True,
                hi - lo,
                _kernels(group, i),
            )
        tid = track + group.base
        for j, part in enumerate(group.parts):
            lo, hi = (0, split) if j == 0 else (split, track.size)
            place[TABLE_CODES[part.code]] = (tid[lo:hi], arrays.pos[lo:hi])
    for name, n_rows in plan.n_rows.items():
        place.setdefault(name, (np.full(n_rows, -1, np.int64), np.full(n_rows, -1, np.int64)))
    return BuiltTracks(built, place)


def _group_rows(group: SliceGroup) -> tuple[I64, I64, I64, I64]:
    """(track, start, end, colour) of the group's rows, first table first (copied chunk by chunk by nogil kernels)."""
    from ktrace.analysis.timeline_tracks import copy_into, take_into

    n = sum(p.n_rows for p in group.parts)
    track, starts, ends, colour = (np.empty(n, np.int64) for _ in range(4))
    at = 0
    for part in group.parts:
        for chunk in part.chunks:
            part.scan.track_of_rows(chunk, part.remap, track, at)
            copy_into(starts, at, chunk.start)
            copy_into(ends, at, chunk.end)
            take_into(colour, at, part.lut, chunk.codes)
            at += chunk.start.size
    return track, starts, ends, colour


def build_links(trace: Trace) -> Links:
    """Sorted rank-qualified correlation keys of kernels, memory and API rows (the launch <-> run join)."""
    codes = _node_codes(trace)
    nodes = sorted({n for c in codes for n in c.values() if n is not None})
    node_ids = {n: i for i, n in enumerate(nodes)}
    return Links(
        {
            name: _corr_lookup(trace.table(name), {c: node_ids[n] for c, n in by_code.items() if n is not None})
            for name, by_code in zip(("kernels", "memory", "api"), codes, strict=True)
        },
        node_ids,
    )


def _corr_lookup(frame: pl.DataFrame, node_of_code: dict[int, int]) -> tuple[I64, I64]:
    """(sorted keys, row order) in one lazy polars query (runs without the GIL; the results are not copied)."""
    if frame.height == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    ids = set(node_of_code.values())
    node = (
        pl.lit(next(iter(ids), 0), pl.Int64)
        if len(ids) <= 1
        else pl.col("node")
        .to_physical()
        .replace_strict(list(node_of_code), list(node_of_code.values()), default=0, return_dtype=pl.Int64)
    )
    corr = pl.col("correlation_id").cast(pl.Int64)
    keys = (
        frame.lazy()
        .select(  # correlation_key, vectorized
            pl.when(corr.is_null() | (corr < 0))
            .then(-1)
            .otherwise(node * (1 << 52) + (pl.col("rank").cast(pl.Int64) + 1) * (1 << 40) + corr)
            .alias("k"),
            pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"),
        )
        .sort("k", maintain_order=True)
        .collect()
    )  # stable: rows ascending per key
    return keys["k"].to_numpy(), keys["_row"].to_numpy()


def build_index(trace: Trace) -> TrackIndex:
    """Build every track of `trace` and the correlation lookups at once (what the loader worker does in steps)."""
    index, plan = plan_index(trace)
    index.attach(build_tracks(plan))
    index.attach_links(build_links(trace))
    return index
