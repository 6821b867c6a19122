"""The innermost range per point over arrays: what steps.enclosing and op_attribution.innermost_at share.

- ``key_ids(ranges, points, keys) -> (range ids, point ids, number of ids)``: one integer id per key tuple
  (node, rank, then integer columns) over both frames, each side numbered apart, then their few distinct tuples.
- ``innermost_of_points(r_gid, r_start, r_end, p_gid, n_groups, p_time)``: the innermost range per point, points in
  any order.
- ``innermost_index(r_gid, r_start, r_end, p_gid, p_time)``: nesting.innermost_enclosing chunk by chunk of points
  (POINT_CHUNK), with only the ranges that can hold one of a chunk's points: the same answers, a chunk's copies.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.columns import dense_ids, node_rank_ids, time_order

I64 = npt.NDArray[np.int64]


def key_ids(ranges: pl.DataFrame, points: pl.DataFrame, keys: tuple[str, ...]) -> tuple[I64, I64, int]:
    """One integer group id per key tuple over both frames (no String joins): (id per range, id per point, number
    of ids). `keys`: "node" and "rank" first, then integer columns (no nulls)."""
    if keys[:2] != ("node", "rank"):
        raise ValueError(f"enclosing: keys must start with node, rank (got {keys})")
    _, (r_rank, p_rank) = node_rank_ids([ranges, points])
    # Each side numbered apart, then their few distinct tuples together: the same ids as one numbering of both
    # (dense_ids numbers tuples in lexicographic order), never a concatenation of every key column of both.
    r_local, r_keys = dense_ids([r_rank] + [int64_values(ranges[k]) for k in keys[2:]])
    del r_rank
    p_local, p_keys = dense_ids([p_rank] + [int64_values(points[k]) for k in keys[2:]])
    del p_rank
    both, _ = dense_ids([np.concatenate(pair) for pair in zip(r_keys, p_keys, strict=True)])
    n_r = r_keys[0].size
    return both[:n_r][r_local], both[n_r:][p_local], int(both.max()) + 1 if both.size else 0


def innermost_of_points(r_gid: I64, r_start: I64, r_end: I64, p_gid: I64, n_groups: int, p_time: I64) -> I64:
    """innermost_index for points in any order (group ids below `n_groups`): their index into the ranges (sorted by
    group, start, end descending), -1 where none, in the points' order."""
    perm, _ = time_order(p_gid, n_groups, p_time)
    idx = innermost_index(r_gid, r_start, r_end, p_gid[perm], p_time[perm])
    out = np.full(p_time.size, -1, np.int64)
    out[perm] = idx
    return out


POINT_CHUNK = 1 << 17
"""Most points searched at once by innermost_index (in equal chunks)."""


def innermost_index(r_gid: I64, r_start: I64, r_end: I64, p_gid: I64, p_time: I64, chunk: int | None = None) -> I64:
    """nesting.innermost_enclosing (same arguments, sorted as it takes them, same answers), `chunk` points at a
    time with only the ranges that can hold one of them: of their groups, started by the chunk's last time and not
    ended by its first. A range that holds no point is never an answer (the innermost is the latest-starting range
    open at t, nesting._holding_a_point), so the answers are the same; the kernel's copies and searches are a
    chunk's (owlv2 x30: 345 k Python frames for 155 k launches)."""
    from ktrace.analysis._kernels.nesting import innermost_enclosing

    n_p = p_time.size
    chunk = POINT_CHUNK if chunk is None else chunk
    if n_p <= chunk or r_start.size == 0:
        found: I64 = innermost_enclosing(r_gid, r_start, r_end, p_gid, p_time)
        return found
    out = np.empty(n_p, np.int64)
    step = -(-n_p // -(-n_p // chunk))  # chunks of equal size, none over `chunk`
    for lo in range(0, n_p, step):
        hi = min(lo + step, n_p)
        g0, t0, g1, t1 = p_gid[lo], p_time[lo], p_gid[hi - 1], p_time[hi - 1]
        first = int(np.searchsorted(r_gid, g0, "left"))
        last_group = int(np.searchsorted(r_gid, g1, "left"))
        last = last_group + int(np.searchsorted(r_start[last_group : np.searchsorted(r_gid, g1, "right")], t1, "right"))
        keep = first + np.flatnonzero((r_gid[first:last] != g0) | (r_end[first:last] > t0))
        if keep.size == 0:
            out[lo:hi] = -1
            continue
        found = innermost_enclosing(r_gid[keep], r_start[keep], r_end[keep], p_gid[lo:hi], p_time[lo:hi])
        out[lo:hi] = np.where(found >= 0, keep[np.maximum(found, 0)], -1)
    return out


def int64_values(column: pl.Series) -> npt.NDArray[np.int64]:
    """A column's values as int64 (read in place where the column already is int64 without nulls)."""
    return column.to_numpy().astype(np.int64, copy=False)
