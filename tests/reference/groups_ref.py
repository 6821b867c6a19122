"""Naive pure-Python twins of the new ktrace.analysis._kernels modules (groups, sweep, gaps, joins)."""

from __future__ import annotations


def counting_order(gid: list[int], n_groups: int) -> list[int]:
    """Stable sort of row indices by group id."""
    return sorted(range(len(gid)), key=lambda i: gid[i])


def order_stat(values: list[int], rank: int) -> int:
    """The rank-th smallest value (0-based)."""
    return sorted(values)[rank]


def linear_quantile(values: list[int], q: float) -> float:
    """Linear-interpolated quantile (polars' "linear")."""
    xs = sorted(float(v) for v in values)
    idx = (len(xs) - 1) * q
    lo, hi = int(idx // 1), -int(-idx // 1)
    return xs[lo] if lo == hi else xs[lo] + (xs[hi] - xs[lo]) * (idx - lo)


def type_coverage(intervals: list[tuple[int, int, int]], n_types: int) -> list[int]:
    """ns per mask of active types, by painting unit cells between the first and last typed cell."""
    cells: dict[int, int] = {}
    for s, e, t in intervals:
        for x in range(s, e):
            cells[x] = cells.get(x, 0) | (1 << t)
    out = [0] * (1 << n_types)
    if not intervals:
        return out
    first = min(s for s, _, _ in intervals)
    last = max(e for _, e, _ in intervals)
    for x in range(first, last):
        out[cells.get(x, 0)] += 1
    return out


def gap_category(
    prev_end: int, start: int, api_start: int | None, kernel_wait_ns: int, syncs: list[tuple[int, int]]
) -> int:
    """0 host_wait, 1 kernel_wait, 2 sync_wait (a sync span overlaps the open gap), 3 other."""
    if api_start is not None and api_start > prev_end:
        return 0
    if start - prev_end < kernel_wait_ns:
        return 1
    if any(s < start and e > prev_end for s, e in syncs):
        return 2
    return 3


def lookup_first(keys: list[int], order_by: list[int], probe: list[int]) -> list[int]:
    """Index of the matching key with the smallest order_by (then index), -1 if none."""
    out = []
    for p in probe:
        hits = [(order_by[i], i) for i, k in enumerate(keys) if k == p]
        out.append(min(hits)[1] if hits else -1)
    return out


def merge_runs(perm: list[int], group_bounds: list[int], key: list[int]) -> list[int]:
    """Each group's slice of perm sorted by (key[row], row) (what merging its sorted runs must give)."""
    out = list(perm)
    for a, b in zip(group_bounds[:-1], group_bounds[1:], strict=True):
        out[a:b] = sorted(perm[a:b], key=lambda i: (key[i], i))
    return out


def duration_groups(gid: list[int], start: list[int], end: list[int], n_groups: int) -> list[list[int]]:
    """end - start of each row, per group, rows in order."""
    return [[e - s for g, s, e in zip(gid, start, end, strict=True) if g == h] for h in range(n_groups)]


def launch_groups(
    api_row: list[int], api_start: list[int], api_end: list[int], start: list[int], gid: list[int], n_groups: int
) -> list[list[tuple[int, int, int]]]:
    """(launch latency, queue delay, api duration) of every launched record, per group, records in order."""
    out: list[list[tuple[int, int, int]]] = [[] for _ in range(n_groups)]
    for r, s, g in zip(api_row, start, gid, strict=True):
        if r >= 0:
            out[g].append((s - api_start[r], s - api_end[r], api_end[r] - api_start[r]))
    return out
