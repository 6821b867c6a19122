"""Building the track index in three steps, all off the UI thread and without holding the GIL for long.

1. `plan_index`: the track list (a dense id per row from its key columns), each track's slice count and a coarse
   overview: one pass over the rows, no sorting. The first screen is drawn from this.
2. `build_tracks`: every track's rows grouped and sorted by start, with running max and prefix sums.
3. `build_links`: the correlation lookups behind launch <-> kernel links (a filtered scan serves meanwhile).

Heavy work runs in polars or in numba nogil kernels (ktrace.analysis._kernels.tracks); numpy here only touches
arrays of a few thousand values (one per track or bin), never one per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl
from numpy.typing import NDArray

from ktrace.model.trace import Trace
from ktrace.tui.overview import N_BINS, Overview
from ktrace.tui.tracks import MAX_RANGE_DEPTH, TABLE_CODES, Track, TrackIndex, colour_lut, pending_track

I64 = NDArray[np.int64]
_ONE = np.zeros(1, np.int64)
"""A constant key column."""


@dataclass
class TablePart:
    """One table's rows in a slice group: key ids (remapped to the group's tracks), times and colour codes."""

    code: int
    """TABLE_CODES code of the table."""
    ids: NDArray[np.int32]
    """Key id per row (key_ids); the group-local track is remap[id]."""
    remap: I64
    starts: I64
    ends: I64
    codes: NDArray[np.integer]
    """Colour code per row; the colour seed is lut[code]."""
    lut: I64


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
class BuiltTracks:
    """Indexed tracks (global id -> Track) and, per table, (track id, position) of every row."""

    tracks: dict[int, Track]
    place: dict[str, tuple[I64, I64]]


@dataclass
class Links:
    """Correlation lookups: table -> (sorted keys, row order)."""

    corr: dict[str, tuple[I64, I64]]
    node_ids: dict[str, int]


@dataclass
class IndexPlan:
    """What build_tracks needs from plan_index."""

    groups: list[SliceGroup]
    n_rows: dict[str, int]
    """Rows of each table that can be on a slice track."""


def warm_kernels() -> None:
    """Import numba and load the first step's kernels from its cache (about 1 s), on tiny inputs."""
    from ktrace.analysis._kernels.tracks import key_ids, overview_bins

    one = np.zeros(1, np.int64)
    ids, _ = key_ids(one.astype(np.uint32), one.astype(np.int32), one.astype(np.int32), one, one)
    overview_bins(ids, one, one, one, one.astype(np.uint32), one, 1, 0, 1, 1)


def plan_index(trace: Trace, n_bins: int = N_BINS) -> tuple[TrackIndex, IndexPlan]:
    """The track list with counts and a coarse overview (slice tracks pending), plus the plan to index them."""
    from ktrace.analysis._kernels.tracks import overview_bins

    span = trace.span_ns() or (0, 1)
    t0, t1 = span[0], max(span[1], span[0] + 1)
    bin_ns = max(1, -(-(t1 - t0) // n_bins))
    tracks: list[Track] = []
    groups: list[SliceGroup] = []
    bins: list[tuple[I64, I64, I64]] = []
    specs = (("stream", ("kernels", "memory")), ("api", ("api",)), ("ops", ("ops",)), ("ranges", ("ranges",)))
    for kind, tables in specs:
        group = _slice_group(trace, kind, tables, len(tracks))
        if group is None:
            continue
        n = len(group.keys)
        parts = [overview_bins(p.ids, p.remap, p.starts, p.ends, p.codes, p.lut, n, t0, bin_ns, n_bins)
                 for p in group.parts]
        busy = sum(p.busy for p in parts[1:]) + parts[0].busy
        first, last = parts[0].first_colour, parts[-1].last_colour  # coarse: the first table's colour wins
        for p in parts[1:]:
            first = np.where(first >= 0, first, p.first_colour)
        for p in parts[:-1]:
            last = np.where(last >= 0, last, p.last_colour)
        group.counts = np.stack([p.counts for p in parts], axis=1)
        for i, key in enumerate(group.keys):
            est = int(np.minimum(busy[i], bin_ns).sum())
            tracks.append(pending_track(*_describe(kind, key), int(group.counts[i].sum()), _kernels(group, i), est))
        groups.append(group)
        bins.append((busy, first, last))
    overview = _overview(t0, bin_ns, bins, len(tracks), n_bins)
    tracks += _counter_tracks(trace, tracks)
    index = TrackIndex(trace, tracks, t0, t1, overview=overview)
    index.by_key = {t.key: i for i, t in enumerate(tracks)}
    return index, IndexPlan(groups, {name: trace.table(name).height for name in TABLE_CODES[:5]})


def _kernels(group: SliceGroup, i: int) -> int:
    """Kernels on local track i."""
    return int(group.counts[i, 0]) if group.parts[0].code == 0 else 0


def _overview(t0: int, bin_ns: int, bins: list[tuple[I64, I64, I64]], n_tracks: int, n_bins: int) -> Overview:
    if not bins:
        empty = np.zeros((max(1, n_tracks), n_bins), np.int64)
        return Overview.from_bins(t0, bin_ns, empty, empty - 1, empty - 1)
    busy, first, last = (np.concatenate([b[i] for b in bins]) for i in range(3))
    return Overview.from_bins(t0, bin_ns, busy, first, last)


def _node_ids(trace: Trace) -> dict[str, int]:
    from ktrace.tui.tracks import code_names

    nodes: set[str] = set()
    for name in ("kernels", "memory", "api"):
        nodes.update(code_names(trace.table(name)["node"]).values())
    return {n: i for i, n in enumerate(sorted(nodes))}


def _key_exprs(kind: str) -> list[pl.Expr]:
    """Integer key columns of a table's rows: node code, rank, then device/stream or pid/tid(/depth)."""
    cols = ["device", "stream"] if kind == "stream" else ["pid", "tid"]
    exprs = [pl.col("node").to_physical().alias("_k0"), pl.col("rank").fill_null(-1).alias("_k1")]
    exprs += [pl.col(c).fill_null(-1).alias(f"_k{i + 2}") for i, c in enumerate(cols)]
    if kind == "ranges":
        exprs.append(pl.col("depth").fill_null(0).clip(0, MAX_RANGE_DEPTH - 1).alias("_k4"))
    return exprs


def _slice_group(trace: Trace, kind: str, tables: tuple[str, ...], base: int) -> SliceGroup | None:
    """Key ids per row of each of the group's tables, mapped onto the group's tracks sorted by key."""
    from ktrace.analysis._kernels.tracks import key_ids

    parts: list[TablePart] = []
    values: list[list[tuple[object, ...]]] = []
    for table in tables:
        frame = trace.table(table)
        if frame.height == 0:
            continue
        colour = "copy_kind" if table == "memory" else "name"
        # one multi-threaded select + rechunk, then zero-copy numpy views (no per-column copy under the GIL)
        cols = frame.select(*_key_exprs(kind), "start_ns", "end_ns", pl.col(colour).to_physical()).rechunk()
        key_cols = [cols[c].to_numpy() for c in cols.columns if c.startswith("_k")]
        ids, first_row = key_ids(*key_cols, *([_ONE] * (5 - len(key_cols))))
        names = frame["node"].gather(pl.Series(first_row)).cast(pl.String).to_list()
        values.append([(name, *(int(k[r]) for k in key_cols[1:])) for name, r in zip(names, first_row.tolist(),
                                                                                  strict=True)])
        lut = colour_lut(frame[colour])
        parts.append(TablePart(TABLE_CODES.index(table), ids, np.empty(0, np.int64), cols["start_ns"].to_numpy(),
                               cols["end_ns"].to_numpy(), cols[colour].to_numpy(), lut))
    if not parts:
        return None
    keys = sorted({v for vs in values for v in vs}, key=_sort_key)
    where = {k: i for i, k in enumerate(keys)}
    for part, vs in zip(parts, values, strict=True):
        part.remap = np.array([where[v] for v in vs], np.int64)
    return SliceGroup(kind, base, parts, keys)


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
    suffix = {"api": "api", "ops": "ops"}.get(kind, f"nvtx{depth}")
    label = {"api": "CUDA API", "ops": "operators"}.get(kind, f"ranges d{depth}")
    return f"{node}/{rank}/p{pid}/t{tid}/{suffix}", f"T{tid} {label}", kind, node, rank


def _counter_tracks(trace: Trace, tracks: list[Track]) -> list[Track]:
    """Counter series, indexed right away (a few samples per second of trace: small)."""
    from ktrace.tui.tracks import make_track

    frame = trace.counters
    if frame.height == 0:
        return []
    sub = frame.select("node", "rank", pl.col("metric").cast(pl.String), pl.col("instance").fill_null(-1),
                       "ts_ns", pl.col("value").cast(pl.Float64)).with_row_index("_row")
    out = []
    for (node, rank, metric, instance), part in sorted(sub.partition_by(
            ["node", "rank", "metric", "instance"], as_dict=True, maintain_order=True).items(),
            key=lambda kv: (str(kv[0][0]), *kv[0][1:])):
        label = metric if instance < 0 else f"{metric}[{instance}]"
        t = part["ts_ns"].to_numpy()
        n = t.size
        out.append(make_track(f"{node}/{rank}/c/{metric}/{instance}", label, "counter", str(node), int(rank), t,
                              t.copy(), np.full(n, -1, np.int8), part["_row"].to_numpy().astype(np.int64),
                              np.zeros(n, np.int64), part["value"].to_numpy()))
    return out


def build_tracks(plan: IndexPlan) -> BuiltTracks:
    """Sort every pending slice track's rows by start and gather its arrays (numba kernels, GIL released)."""
    from ktrace.analysis._kernels.tracks import sort_by_track, track_arrays

    built: dict[int, Track] = {}
    place: dict[str, tuple[I64, I64]] = {}
    for group in plan.groups:
        n = len(group.keys)
        track, starts, ends, colour = _group_rows(group)
        split = group.parts[0].starts.size
        order, offsets = sort_by_track(track, starts, n)
        arrays = track_arrays(order, offsets, starts, ends, colour, split)
        code = group.parts[0].code
        table = arrays.table if code == 0 else np.full(arrays.table.size, code, np.int8)
        for i, key in enumerate(group.keys):
            lo, hi = int(offsets[i]), int(offsets[i + 1])
            k, label, kind, node, rank = _describe(group.kind, key)
            built[group.base + i] = Track(
                k, label, kind, node, rank, arrays.starts[lo:hi], arrays.ends[lo:hi], arrays.max_end[lo:hi],
                arrays.cum_ns[lo + i:hi + i + 1], table[lo:hi], arrays.rows[lo:hi], arrays.colour[lo:hi], None,
                int(arrays.busy_ns[i]), True, hi - lo, _kernels(group, i))
        tid = track + group.base
        for j, part in enumerate(group.parts):
            lo, hi = (0, split) if j == 0 else (split, track.size)
            place[TABLE_CODES[part.code]] = (tid[lo:hi], arrays.pos[lo:hi])
    for name, n_rows in plan.n_rows.items():
        place.setdefault(name, (np.full(n_rows, -1, np.int64), np.full(n_rows, -1, np.int64)))
    return BuiltTracks(built, place)


def _group_rows(group: SliceGroup) -> tuple[I64, I64, I64, I64]:
    """(track, start, end, colour) of the group's rows, first table first (copies made by nogil kernels)."""
    from ktrace.analysis._kernels.tracks import concat, take

    cols = [[take(p.remap, p.ids), p.starts, p.ends, take(p.lut, p.codes)] for p in group.parts]
    if len(cols) == 1:
        return cols[0][0], cols[0][1], cols[0][2], cols[0][3]
    a, b = cols
    return concat(a[0], b[0]), concat(a[1], b[1]), concat(a[2], b[2]), concat(a[3], b[3])


def build_links(trace: Trace) -> Links:
    """Sorted rank-qualified correlation keys of kernels, memory and API rows (the launch <-> run join)."""
    node_ids = _node_ids(trace)
    return Links({name: _corr_lookup(trace.table(name), node_ids) for name in ("kernels", "memory", "api")},
                 node_ids)


def _corr_lookup(frame: pl.DataFrame, node_ids: dict[str, int]) -> tuple[I64, I64]:
    from ktrace.analysis._kernels.tracks import take
    from ktrace.tui.tracks import code_names

    if frame.height == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    names = code_names(frame["node"])
    lut = np.zeros(max(names) + 1, np.int64)
    for code, name in names.items():
        lut[code] = node_ids.get(name, 0)
    node = pl.Series("_node", take(lut, frame["node"].to_physical().to_numpy()))
    corr = pl.col("correlation_id").cast(pl.Int64)
    keys = frame.select("rank", "correlation_id").with_columns(node).select(  # correlation_key, vectorized
        pl.when(corr.is_null() | (corr < 0)).then(-1)
        .otherwise(pl.col("_node") * (1 << 52) + (pl.col("rank").cast(pl.Int64) + 1) * (1 << 40) + corr)
        .alias("k")).with_row_index("_row").sort("k", maintain_order=True)  # stable: rows ascending per key
    return keys["k"].to_numpy(), keys["_row"].cast(pl.Int64).to_numpy()
