"""Why GPU streams sat idle (HTA's idle time breakdown, plus sync wait) and device-level GPU gaps.

API:

- ``idle_gaps(trace, kernel_wait_ns=30_000, sync_pattern=SYNC_API_RE) -> pl.DataFrame``: one row
  per gap between consecutive GPU records of a stream, with its category.
- ``idle_breakdown(trace, kernel_wait_ns=30_000, sync_pattern=SYNC_API_RE) -> pl.DataFrame``: idle
  ns per (node, rank, device, stream, idle_category) and its share of the stream's idle time.
- ``device_idle_breakdown(trace, kernel_wait_ns=30_000, sync_pattern=SYNC_API_RE) -> pl.DataFrame``: idle ns per
  (node, rank, device, idle_category), summing to the device's idle time (busy_time's idle: span - busy).
- ``gpu_gaps(trace, per="device", min_gap_ns=0) -> pl.DataFrame``: gaps in the union of GPU
  records (nsys `gpu_gaps` rule uses min_gap_ns=500 ms; first/last gap of a device not included).

Categories of the gap before record i on a stream (gap = start_i - end_{i-1}, HTA's definition):

1. host_wait: record i's launch call started after record i-1 ended (the CPU had not issued it).
2. kernel_wait: otherwise, gap < kernel_wait_ns (back-to-back launch overhead).
3. sync_wait: otherwise, a synchronizing call (syncs table, or an API named like ``Synchronize``)
   was in progress on the same (node, rank) during the gap. HTA has no such category: its "other"
   is ktrace's sync_wait + other.
4. other.

Per device, the gaps are those of the device's busy union (every stream's records merged), so the causes add up
to the device's idle time; each gap takes the cause of the record that ends it, by the same rules (its launch: the
earliest launch among the records that start at that instant; a record without a launch cannot be host_wait).
Summing the per-stream breakdown over a device instead counts the same idle wall time once per idle stream.

Threshold: HTA's `consecutive_kernel_delay=30` is applied to its µs timestamps (its docstring says
ns), so the equivalent default here is 30_000 ns. Negative gaps (records overlapping on one stream)
count 0 (HTA adds them up). Records without a launch in the trace cannot be host_wait.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.columns import PER_KEYS, Per, RowGroups, node_rank_ids, time_order
from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.utilization import busy_union, names_matching
from ktrace.model.trace import Trace

SYNC_API_RE = r"Synchronize"
"""API names that block the host on the GPU (cudaStreamSynchronize, cuCtxSynchronize, ...)."""
KERNEL_WAIT_NS = 30_000
CATEGORIES = ("host_wait", "kernel_wait", "sync_wait", "other")
STREAM_KEYS = PER_KEYS["stream"]


def sync_spans(trace: Trace, sync_pattern: str, rank_keys: pl.DataFrame) -> tuple[Any, npt.NDArray[np.int64]]:
    """Merged intervals per (node, rank) during which a synchronizing call was in progress.

    Returns:
        (_kernels.gaps.Spans, the span group of each row of rank_keys (-1 without spans)).
    """
    from ktrace.analysis._kernels.gaps import Spans
    from ktrace.analysis._kernels.intervals import merge_intervals

    cols = ["node", "rank", "start_ns", "end_ns"]
    api = trace.api.filter(pl.col("name").is_in(names_matching(trace.api, "name", sync_pattern))).select(cols)
    frames = [f for f in (trace.syncs.select(cols), api) if f.height]
    keys, ids = node_rank_ids([*frames, rank_keys])
    n = keys.height
    if not frames:
        empty = np.zeros(0, np.int64)
        return Spans(np.zeros(n + 1, np.int64), empty, empty), np.full(rank_keys.height, -1, np.int64)
    gid = np.concatenate(ids[:-1])
    start = np.concatenate([f["start_ns"].to_numpy() for f in frames]).astype(np.int64)
    end = np.concatenate([f["end_ns"].to_numpy() for f in frames]).astype(np.int64)
    perm, _ = time_order(gid, n, start)
    mg, ms, me = merge_intervals(gid[perm], start[perm], end[perm])
    bounds = np.searchsorted(mg, np.arange(n + 1)).astype(np.int64)
    return Spans(bounds, ms, me), ids[-1]


_GAPS = Slot[tuple[RowGroups, Any, Any, Any, Any, Any]]("gap_arrays")


def _gap_arrays(
    trace: Trace, kernel_wait_ns: int, sync_pattern: str, index: TraceIndex | None
) -> tuple[RowGroups, Any, Any, Any, Any, Any]:
    """(stream RowGroups, api start per sorted record, category, idle ns, idle [groups, 4], gaps [groups, 4])."""
    ix = TraceIndex.of(trace, index)
    return ix.get(_GAPS, lambda: _compute_gaps(ix, kernel_wait_ns, sync_pattern), kernel_wait_ns, sync_pattern)


def _compute_gaps(ix: TraceIndex, kernel_wait_ns: int, sync_pattern: str) -> tuple[RowGroups, Any, Any, Any, Any, Any]:
    from ktrace.analysis._kernels.gaps import NO_LAUNCH, Records, gap_categories

    trace = ix.trace
    c = ix.gpu_columns()
    g = ix.row_groups("stream")
    rows = ix.launch_rows()[g.perm]
    launched = ix.api_times()[0].take(rows) if trace.api.height else np.zeros(rows.size, np.int64)
    launched[rows < 0] = NO_LAUNCH
    spans, sync_group = sync_spans(trace, sync_pattern, c.rank_keys)
    group_sync = sync_group[c.rank_id[g.perm[g.bounds[:-1]]]] if g.n_groups else np.zeros(0, np.int64)
    records = Records(*ix.sorted_times("stream"), launched)
    category, idle, totals, counts = gap_categories(g.bounds, records, spans, group_sync, kernel_wait_ns)
    return g, records, category, idle, totals, counts


def idle_gaps(
    trace: Trace,
    kernel_wait_ns: int = KERNEL_WAIT_NS,
    sync_pattern: str = SYNC_API_RE,
    *,
    index: TraceIndex | None = None,
) -> pl.DataFrame:
    """Every gap between consecutive GPU records (kernel, memcpy, memset) of a stream, categorized.

    Args:
        trace: the trace.
        kernel_wait_ns: gaps shorter than this (and not host waits) are kernel_wait.
        sync_pattern: regex of API names that count as synchronizing calls.
        index: the trace's TraceIndex.

    Returns:
        Frame: node, rank, device, stream, gap_start_ns (end of the previous record), gap_end_ns
        (start of the next), idle_ns (>= 0), api_start_ns of the next record (null without
        launch), idle_category.
    """
    from ktrace.analysis._kernels.gaps import NO_LAUNCH

    g, rec, category, idle, _, _ = _gap_arrays(trace, kernel_wait_ns, sync_pattern, index)
    keep = category >= 0
    gid = np.repeat(np.arange(g.n_groups, dtype=np.int64), np.diff(g.bounds))[keep]
    prev_end = np.roll(rec.end, 1)[keep]
    api = rec.api_start[keep]
    labels = pl.Series(list(CATEGORIES), dtype=pl.String)
    return (
        _stream_keys(g.keys)[gid]
        .with_columns(
            gap_start_ns=pl.Series(prev_end, dtype=pl.Int64),
            gap_end_ns=pl.Series(rec.start[keep], dtype=pl.Int64),
            api_start_ns=pl.Series(api, dtype=pl.Int64),
            idle_ns=pl.Series(idle[keep], dtype=pl.Int64),
            idle_category=labels.gather(category[keep].astype(np.int64)),
        )
        .with_columns(api_start_ns=pl.when(pl.col("api_start_ns") != NO_LAUNCH).then(pl.col("api_start_ns")))
    )


def _stream_keys(keys: pl.DataFrame) -> pl.DataFrame:
    return keys.with_columns(pl.col("node").cast(pl.Categorical))


def _category_rows(keys: pl.DataFrame, groups: npt.NDArray[np.int64], totals: Any, counts: Any) -> pl.DataFrame:
    """One row per (group in `groups`, idle category): the group's keys, idle_category, idle_ns, gaps."""
    n_cat = len(CATEGORIES)
    return _stream_keys(keys)[np.repeat(groups, n_cat)].with_columns(
        idle_category=pl.Series(list(CATEGORIES) * groups.size, dtype=pl.String),
        idle_ns=pl.Series(totals[groups].reshape(-1), dtype=pl.Int64),
        gaps=pl.Series(counts[groups].reshape(-1), dtype=pl.Int64),
    )


def idle_breakdown(
    trace: Trace,
    kernel_wait_ns: int = KERNEL_WAIT_NS,
    sync_pattern: str = SYNC_API_RE,
    *,
    index: TraceIndex | None = None,
) -> pl.DataFrame:
    """Idle time per stream split by cause (HTA's `get_idle_time_breakdown`, every rank and stream).

    Args:
        trace: the trace.
        kernel_wait_ns: HTA's consecutive_kernel_delay, in ns.
        sync_pattern: regex of API names that count as synchronizing calls.
        index: the trace's TraceIndex.

    Returns:
        Frame: node, rank, device, stream, idle_category, idle_ns, gaps, idle_ratio (of the
        stream's idle time); every category present for every stream (0 when none).
    """
    g, _, _, _, totals, counts = _gap_arrays(trace, kernel_wait_ns, sync_pattern, index)
    full = _category_rows(g.keys, np.flatnonzero(np.diff(g.bounds) > 1), totals, counts)
    total = pl.col("idle_ns").sum().over(STREAM_KEYS)
    order = pl.col("idle_category").replace_strict({c: i for i, c in enumerate(CATEGORIES)}, return_dtype=pl.Int32)
    return full.with_columns(idle_ratio=pl.when(total > 0).then(pl.col("idle_ns") / total).otherwise(0.0)).sort(
        *STREAM_KEYS, order
    )


_DEVICE_GAPS = Slot[tuple[RowGroups, Any, Any]]("device_gap_arrays")


def _compute_device_gaps(ix: TraceIndex, kernel_wait_ns: int, sync_pattern: str) -> tuple[RowGroups, Any, Any]:
    """(device RowGroups, idle [devices, 4], gaps [devices, 4]) over the gaps of each device's busy union."""
    from ktrace.analysis._kernels.gaps import NO_LAUNCH, Records, gap_categories

    trace = ix.trace
    c = ix.gpu_columns()
    g, gid, start, end = ix.sorted_intervals("device")
    rows = ix.launch_rows()[g.perm]
    launched = ix.api_times()[0].take(rows) if trace.api.height else np.zeros(rows.size, np.int64)
    launched[rows < 0] = NO_LAUNCH
    merged_group, merged_start, merged_end = busy_union(trace, "device", index=ix)
    # the launch of each merged interval's opening: the earliest launch among records starting at its start
    # (NO_LAUNCH, the int64 minimum, wins: a record without a launch cannot make the gap a host wait)
    n = start.size
    run_start = (
        np.flatnonzero(np.r_[True, (gid[1:] != gid[:-1]) | (start[1:] != start[:-1])]) if n else np.zeros(0, np.int64)
    )
    run_launch = np.minimum.reduceat(launched, run_start) if n else np.zeros(0, np.int64)
    run_group, run_time = gid[run_start], start[run_start]
    groups = np.arange(g.n_groups + 1)
    run_lo, merged_lo = np.searchsorted(run_group, groups), np.searchsorted(merged_group, groups)
    opening_launch = np.empty(merged_start.size, np.int64)
    for d in range(g.n_groups):  # one pass per device: few
        a, b = merged_lo[d], merged_lo[d + 1]
        at = run_lo[d] + np.searchsorted(run_time[run_lo[d] : run_lo[d + 1]], merged_start[a:b])
        opening_launch[a:b] = run_launch[at]
    spans, sync_group = sync_spans(trace, sync_pattern, c.rank_keys)
    group_sync = sync_group[c.rank_id[g.perm[g.bounds[:-1]]]] if g.n_groups else np.zeros(0, np.int64)
    records = Records(merged_start, merged_end, opening_launch)
    _, _, totals, counts = gap_categories(merged_lo.astype(np.int64), records, spans, group_sync, kernel_wait_ns)
    return g, totals, counts


def device_idle_breakdown(
    trace: Trace,
    kernel_wait_ns: int = KERNEL_WAIT_NS,
    sync_pattern: str = SYNC_API_RE,
    *,
    index: TraceIndex | None = None,
) -> pl.DataFrame:
    """Idle time per device split by cause, summing to the device's idle time (see the module docstring).

    Args:
        trace: the trace.
        kernel_wait_ns: HTA's consecutive_kernel_delay, in ns.
        sync_pattern: regex of API names that count as synchronizing calls.
        index: the trace's TraceIndex.

    Returns:
        Frame: node, rank, device, idle_category, idle_ns, gaps, idle_share (of the device's idle time); every
        category for every device with a gap (0 when none).
    """
    ix = TraceIndex.of(trace, index)
    g, totals, counts = ix.get(
        _DEVICE_GAPS, lambda: _compute_device_gaps(ix, kernel_wait_ns, sync_pattern), kernel_wait_ns, sync_pattern
    )
    keys = ["node", "rank", "device"]
    full = _category_rows(g.keys, np.flatnonzero(counts.sum(axis=1) > 0), totals, counts)
    total = pl.col("idle_ns").sum().over(keys)
    return full.select(*keys, "idle_category", "idle_ns", "gaps").with_columns(
        idle_share=pl.when(total > 0).then(pl.col("idle_ns") / total).otherwise(0.0)
    )


def gpu_gaps(
    trace: Trace, per: Per = "device", min_gap_ns: int = 0, *, index: TraceIndex | None = None
) -> pl.DataFrame:
    """Gaps between the busy intervals (union of GPU records) of each device (or rank/stream).

    Args:
        trace: the trace.
        per: "rank", "device" or "stream".
        min_gap_ns: keep gaps at least this long (nsys gpu_gaps: 500 ms).
        index: the trace's TraceIndex.

    Returns:
        Frame: key columns, gap_start_ns, gap_end_ns, gap_ns; sorted by keys and time.
    """
    ix = TraceIndex.of(trace, index)
    g = ix.row_groups(per)
    mg, ms, me = busy_union(trace, per, index=ix)
    same = mg[1:] == mg[:-1]
    gs, ge, gg = me[:-1][same], ms[1:][same], mg[1:][same]
    keep = (ge - gs) >= max(min_gap_ns, 1)
    return g.keys[gg[keep]].with_columns(
        gap_start_ns=pl.Series(gs[keep], dtype=pl.Int64),
        gap_end_ns=pl.Series(ge[keep], dtype=pl.Int64),
        gap_ns=pl.Series((ge - gs)[keep], dtype=pl.Int64),
    )
