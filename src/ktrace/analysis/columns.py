"""Columnar core of the analyses: pure functions over numpy arrays (the per-trace results live in index.TraceIndex).

- ``node_rank_ids(frames) -> (keys, ids)``: one dense id per (node, rank) over several frames (keys: node
  String, rank Int32, sorted), and the id of every row of each frame; ``combine_rank_ids`` merges numberings.
- ``dense_ids(columns) -> (gid, uniques)``: dense id of integer tuples, numbered in lexicographic order (the
  one group numbering of the analyses).
- ``build_gpu_columns(trace, kernel_ids, memory_ids) -> GpuColumns``: kernels then memory ops as arrays.
- ``time_order(gid, n_groups, start) -> (perm, bounds)``: stable sort by (gid, start) in O(n) when the
  times are already sorted within each group (the usual case).
- ``stream_row_groups`` / ``coarser_row_groups`` / ``build_record_names``: what TraceIndex remembers (the launch
  join it remembers too is in ``launch_join``).

Everything here is O(n) numpy/numba over Categorical physical codes: no String casts, no joins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.model.trace import Trace

I64 = npt.NDArray[np.int64]
Per = Literal["rank", "device", "stream"]
PER_KEYS: dict[str, tuple[str, ...]] = {
    "rank": ("node", "rank"),
    "device": ("node", "rank", "device"),
    "stream": ("node", "rank", "device", "stream"),
}
"""Key columns of each grouping of the GPU records."""
KINDS = ("kernel", "memcpy", "memset")
"""Kind codes of GpuColumns.kind."""


def _codes(col: pl.Series) -> tuple[I64, list[str]]:
    """Dense lexical code per row of a Categorical/String column (nulls -> -1), and the strings."""
    cat = col if col.dtype == pl.Categorical else col.cast(pl.Categorical)
    distinct = cat.unique().drop_nulls()
    names = distinct.cast(pl.String).to_list()
    order = np.argsort(np.array(names, dtype=object), kind="stable") if names else np.zeros(0, np.int64)
    phys = distinct.to_physical().to_numpy().astype(np.int64)
    lut = np.full(int(phys.max()) + 2 if phys.size else 1, -1, np.int64)
    lut[phys[order]] = np.arange(phys.size)
    phys_col = cat.to_physical()
    raw = (phys_col.fill_null(lut.size - 1) if phys_col.null_count() else phys_col).to_numpy()
    return lut[raw], [names[i] for i in order]


def dense_ids(columns: list[I64]) -> tuple[I64, list[I64]]:
    """Dense id of each row's tuple of integer codes, ids in lexicographic tuple order.

    Args:
        columns: equal-length int64 arrays (small value ranges use a lookup table, others a hash).

    Returns:
        (gid per row, the distinct values of each column per id).
    """
    from ktrace.analysis._kernels.groups import pair_ids

    n = columns[0].size if columns else 0
    if n == 0:
        return np.zeros(0, np.int64), [np.zeros(0, np.int64) for _ in columns]
    bounds = [(int(a.min()), int(a.max())) for a in columns]
    varying = [i for i, (lo, hi) in enumerate(bounds) if lo != hi]
    if not varying:
        return np.zeros(n, np.int64), [np.array([lo], np.int64) for lo, _ in bounds]
    if len(varying) < len(columns):  # a constant column changes neither the groups nor their order
        gid, sub = dense_ids([columns[i] for i in varying])
        m = sub[0].size
        return gid, [
            sub[varying.index(i)] if i in varying else np.full(m, bounds[i][0], np.int64) for i in range(len(columns))
        ]
    table_limit = 4 * n + (1 << 20)  # widest lookup table worth building; wider keys are hashed
    if bounds[0][1] - bounds[0][0] + 1 > table_limit:
        return _dense_ids_wide(columns)
    if len(columns) == 1 and bounds[0][0] == 0 and bounds[0][1] < n and np.bincount(columns[0]).all():
        return columns[0], [np.arange(bounds[0][1] + 1, dtype=np.int64)]  # already dense ids (e.g. kinds)
    gid, uniq = columns[0], np.arange(bounds[0][0], bounds[0][1] + 1, dtype=np.int64)
    parts = [uniq]
    lo_g, size_g = bounds[0][0], bounds[0][1] - bounds[0][0] + 1
    for a, (lo, hi) in zip(columns[1:], bounds[1:], strict=True):
        if size_g * (hi - lo + 1) > table_limit:
            return _dense_ids_wide(columns)
        const = lo == hi
        gid, codes = pair_ids(gid, a[:1] if const else a, (lo_g, lo), (size_g, hi - lo + 1))
        parts = [p[codes // (hi - lo + 1)] for p in parts] + [codes % (hi - lo + 1) + lo]
        lo_g, size_g = 0, int(codes.size)
    if len(columns) == 1:
        gid, codes = pair_ids(gid, gid[:1] * 0, (lo_g, 0), (size_g, 1))
        parts = [codes + lo_g]
    return gid, parts


def _dense_ids_wide(columns: list[I64]) -> tuple[I64, list[I64]]:
    frame = pl.DataFrame({f"c{i}": a for i, a in enumerate(columns)})
    gid = frame.select(pl.struct(frame.columns).rank("dense").alias("g"))["g"].to_numpy().astype(np.int64) - 1
    first = np.zeros(int(gid.max()) + 1, np.int64)
    first[gid[::-1]] = np.arange(gid.size)[::-1]
    return gid, [a[first] for a in columns]


def node_rank_ids(frames: list[pl.DataFrame]) -> tuple[pl.DataFrame, list[I64]]:
    """One dense id per (node, rank) pair over several frames, numbered in (node string, rank) order.

    Args:
        frames: frames with a Categorical/String `node` and an integer `rank` column.

    Returns:
        (keys: node String, rank Int32, one row per id; id per row of each frame).
    """
    return combine_rank_ids([_local_rank_ids(f) for f in frames])


def _local_rank_ids(f: pl.DataFrame) -> tuple[pl.DataFrame, I64]:
    if f.height == 0:
        return pl.DataFrame(schema={"node": pl.String, "rank": pl.Int32}), np.zeros(0, np.int64)
    if _single_valued(f["node"]) and _single_valued(f["rank"]):  # one rank: no pass over the rows
        keys = pl.DataFrame(
            {"node": [str(f["node"][0])], "rank": [int(f["rank"][0])]}, schema={"node": pl.String, "rank": pl.Int32}
        )
        return keys, np.zeros(f.height, np.int64)
    node, names = _codes(f["node"])
    gid, (un, ur) = dense_ids([node, f["rank"].to_numpy().astype(np.int64)])
    keys = pl.DataFrame(
        {"node": [names[i] for i in un.tolist()], "rank": ur}, schema={"node": pl.String, "rank": pl.Int32}
    )
    return keys, gid


def _single_valued(col: pl.Series) -> bool:
    """True if a non-null integer or Categorical column holds one value (min == max of the codes)."""
    if col.null_count():
        return False
    phys = col.to_physical() if col.dtype == pl.Categorical else col
    return phys.dtype.is_integer() and phys.min() == phys.max()


def combine_rank_ids(parts: list[tuple[pl.DataFrame, I64]]) -> tuple[pl.DataFrame, list[I64]]:
    """Merge per-frame (keys, ids) from table_rank_ids/node_rank_ids into one shared numbering."""
    pairs = sorted({p for keys, _ in parts for p in keys.iter_rows()})
    index = {p: i for i, p in enumerate(pairs)}
    ids = [_renumber(np.array([index[p] for p in keys.iter_rows()], np.int64), gid) for keys, gid in parts]
    keys = pl.DataFrame(
        {"node": [p[0] for p in pairs], "rank": [p[1] for p in pairs]}, schema={"node": pl.String, "rank": pl.Int32}
    )
    return keys, ids


def _renumber(new_id: I64, gid: I64) -> I64:
    """new_id[gid], skipping the pass when the numbering is unchanged."""
    if gid.size == 0 or np.array_equal(new_id, np.arange(new_id.size)):
        return gid
    return new_id[gid]


def local_rank_ids(frame: pl.DataFrame) -> tuple[pl.DataFrame, I64]:
    """(keys, id per row) of one frame with node and rank (combine several with combine_rank_ids)."""
    return _local_rank_ids(frame)


@dataclass(frozen=True)
class GpuColumns:
    """Every GPU record (kernels first, then memory ops, each in table order) as int64 arrays."""

    n_kernels: int
    rank_keys: pl.DataFrame
    """node (String), rank (Int32) per rank id."""
    rank_id: I64
    device: I64
    stream: I64
    """Null streams are -1."""
    kind: I64
    """Index into KINDS."""
    start: I64
    end: I64
    correlation_id: I64
    """Null correlation ids are 0 (never a launch's)."""

    @property
    def size(self) -> int:
        """Number of records."""
        return int(self.start.size)


def _i64(frame: pl.DataFrame, expr: Any) -> I64:
    return frame.select(expr).to_series().to_numpy().astype(np.int64, copy=False)


def concat_i64(frames: list[pl.DataFrame], col: str, null_value: int = 0) -> I64:
    """Integer column `col` of several frames as one int64 array (nulls -> null_value).

    Each Arrow chunk is copied once into the result: to_numpy() of a chunked column copies it whole, and a
    concatenate would copy it again (at 10 M rows, ~0.1 s a column).
    """
    n = sum(f.height for f in frames)
    if n and all(_single_valued(f[col]) and f[col][0] == 0 for f in frames if f.height):
        return np.zeros(n, np.int64)  # calloc'd: nothing written (one device 0, one rank, ...)
    filled = [f[col] for f in frames if f.height]
    if len(filled) == 1 and filled[0].dtype == pl.Int64 and filled[0].n_chunks() == 1 and not filled[0].null_count():
        return filled[0].to_numpy()  # the table's own buffer, read-only: no copy (160 MB at 20 M kernels a column)
    out = np.empty(n, np.int64)
    at = 0
    for f in frames:
        if not f.height:
            continue
        s = f[col]
        if s.null_count():
            s = s.fill_null(null_value)
        for chunk in s.to_frame().to_arrow().column(0).chunks:
            out[at : at + len(chunk)] = chunk.to_numpy()
            at += len(chunk)
    return out


def build_gpu_columns(
    trace: Trace, kernel_ids: tuple[pl.DataFrame, I64], memory_ids: tuple[pl.DataFrame, I64]
) -> GpuColumns:
    """The GPU records of the trace as arrays, given the rank ids of the kernels and memory tables."""
    k, m = trace.kernels, trace.memory
    keys, (rk, rm) = combine_rank_ids([kernel_ids, memory_ids])
    op = m["op"].cast(pl.String) if m.height else pl.Series([], dtype=pl.String)
    mem_kind = np.where((op == "memset").to_numpy(), 2, 1).astype(np.int64) if m.height else np.zeros(0, np.int64)

    return GpuColumns(
        n_kernels=k.height,
        rank_keys=keys,
        rank_id=np.zeros(k.height + m.height, np.int64) if keys.height == 1 else np.concatenate([rk, rm]),
        device=concat_i64([k, m], "device", -1),
        stream=concat_i64([k, m], "stream", -1),
        kind=_kinds(k.height, mem_kind),
        start=concat_i64([k, m], "start_ns"),
        end=concat_i64([k, m], "end_ns"),
        correlation_id=concat_i64([k, m], "correlation_id", 0),
    )


def _kinds(n_kernels: int, memory_kinds: I64) -> I64:
    """Kind codes: kernels (0, calloc'd: not written) then the memory ops'."""
    out = np.zeros(n_kernels + memory_kinds.size, np.int64)
    out[n_kernels:] = memory_kinds
    return out


def time_order(gid: I64, n_groups: int, start: I64) -> tuple[I64, I64]:
    """Stable order by (group, start): a counting sort by group, then a stable sort of any group whose
    times are not already non-decreasing (timsort: near linear on nearly sorted times).

    Returns:
        (perm, bounds): group g is perm[bounds[g]:bounds[g+1]].
    """
    perm, bounds, _ = time_order_with_times(gid, n_groups, start)
    return perm, bounds


def time_order_with_times(gid: I64, n_groups: int, start: I64) -> tuple[I64, I64, I64]:
    """time_order plus start[perm], which it computes anyway: `start` itself (never write into it) when there is
    one group already in time order (perm is the identity; a copy cost 160 MB at 20 M records)."""
    from ktrace.analysis._kernels.groups import counting_order, unsorted_groups

    perm, bounds = counting_order(gid, n_groups)
    if n_groups == 1:  # perm is the identity (a stable sort of one group)
        unsorted = unsorted_groups(bounds, start)
        if not unsorted.any():
            return perm, bounds, start
        ordered = start.copy()
    else:
        ordered = start[perm]
        unsorted = unsorted_groups(bounds, ordered)
    for g in np.flatnonzero(unsorted).tolist():
        a, b = int(bounds[g]), int(bounds[g + 1])
        perm[a:b] = perm[a:b][np.argsort(ordered[a:b], kind="stable")]
        ordered[a:b] = start[perm[a:b]]
    return perm, bounds, ordered


@dataclass(frozen=True)
class RowGroups:
    """GPU records grouped per rank, device or stream, each group in (start, row) order."""

    keys: pl.DataFrame
    """One row per group: node (String), rank (Int32)[, device (Int32)[, stream (Int64)]]."""
    perm: I64
    """Record indices, group by group."""
    bounds: I64
    """Group g is perm[bounds[g]:bounds[g+1]]."""

    @property
    def n_groups(self) -> int:
        """Number of groups."""
        return int(self.bounds.size - 1)


FINER: dict[str, Per] = {"device": "stream", "rank": "device"}
"""The grouping a coarser one is merged from."""


def stream_row_groups(c: GpuColumns) -> tuple[RowGroups, I64]:
    """GPU records grouped per stream, each in (start, row) order, and their starts in that order."""
    gid, uniq = dense_ids([c.rank_id, c.device, c.stream])
    perm, bounds, ordered = time_order_with_times(gid, int(uniq[0].size), c.start)
    return RowGroups(group_keys(c, "stream", uniq), perm, bounds), ordered


def coarser_row_groups(c: GpuColumns, per: Per, fine: RowGroups) -> RowGroups:
    """GPU records grouped per "device" or "rank", merged from the sorted runs of the finer grouping `fine`
    (the very same RowGroups arrays when every coarse group holds one finer group)."""
    from ktrace.analysis._kernels.merge import merge_runs

    head = fine.perm[fine.bounds[:-1]]  # first record of each finer group
    coarse, uniq = dense_ids([c.rank_id[head]] + ([c.device[head]] if per == "device" else []))
    n_groups = int(uniq[0].size) if c.size else 0
    if n_groups == fine.n_groups:  # one finer group each (one stream, one device): the same order
        return RowGroups(group_keys(c, per, uniq), fine.perm, fine.bounds)
    group_runs = np.searchsorted(coarse, np.arange(n_groups + 1)).astype(np.int64)  # coarse ids ascend
    perm = merge_runs(fine.perm, fine.bounds, group_runs, c.start)
    return RowGroups(group_keys(c, per, uniq), perm, fine.bounds[group_runs])


def group_keys(c: GpuColumns, per: Per, uniq: list[I64]) -> pl.DataFrame:
    """The key columns of each group of a grouping `per`, from the distinct (rank id[, device[, stream]])."""
    keys = c.rank_keys[uniq[0]] if c.size else c.rank_keys.clear()
    for name, values in zip(PER_KEYS[per][2:], uniq[1:], strict=True):
        keys = keys.with_columns(pl.Series(name, values, dtype=pl.Int32 if name == "device" else pl.Int64))
    return keys


def memory_name_expr() -> pl.Expr:
    """The display name of a memory-table row: "Memset" or "Memcpy <copy kind>" (as Kineto names them)."""
    return (
        pl.when(pl.col("op").cast(pl.String) == "memset")
        .then(pl.lit("Memset"))
        .otherwise(pl.concat_str([pl.lit("Memcpy "), pl.col("copy_kind").cast(pl.String)]))
    )


def name_codes(col: pl.Series) -> tuple[I64, list[str]]:
    """Lexical code of each value of a name column (-1 for null) and the sorted distinct names."""
    return _codes(col)


def build_record_names(trace: Trace, kernel_codes: tuple[I64, list[str]]) -> tuple[I64, pl.Series]:
    """Name code per GPU record (kernel name; "Memset" / "Memcpy <kind>" for memory ops, as gpu_activity
    names them) and the names per code: a String Series, null first, then the names sorted."""
    k, m = trace.kernels, trace.memory
    parts = [
        kernel_codes if k.height else (np.zeros(0, np.int64), []),
        _codes(m.select(memory_name_expr().alias("n"))["n"]) if m.height else (np.zeros(0, np.int64), []),
    ]
    names = sorted(set(parts[0][1]) | set(parts[1][1]))
    sorted_names = np.array(names, dtype=object)
    codes = []
    for code, local in parts:
        remap = np.concatenate([np.searchsorted(sorted_names, np.array(local, dtype=object)) + 1, [0]])
        codes.append(remap[code].astype(np.int64))  # code -1 (null) -> last entry -> 0
    return np.concatenate(codes), pl.Series("name", [None, *names], dtype=pl.String)
