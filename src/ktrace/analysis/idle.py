"""Why GPU streams sat idle (HTA's idle time breakdown, plus sync wait) and device-level GPU gaps.

API:

- ``idle_gaps(trace, kernel_wait_ns=30_000, sync_pattern=SYNC_API_RE) -> pl.DataFrame``: one row
  per gap between consecutive GPU records of a stream, with its category.
- ``idle_breakdown(trace, kernel_wait_ns=30_000, sync_pattern=SYNC_API_RE) -> pl.DataFrame``: idle
  ns per (node, rank, device, stream, idle_category) and its share of the stream's idle time.
- ``gpu_gaps(trace, per="device", min_gap_ns=0) -> pl.DataFrame``: gaps in the union of GPU
  records (nsys `gpu_gaps` rule uses min_gap_ns=500 ms; first/last gap of a device not included).

Categories of the gap before record i on a stream (gap = start_i - end_{i-1}, HTA's definition):

1. host_wait: record i's launch call started after record i-1 ended (the CPU had not issued it).
2. kernel_wait: otherwise, gap < kernel_wait_ns (back-to-back launch overhead).
3. sync_wait: otherwise, a synchronizing call (syncs table, or an API named like ``Synchronize``)
   was in progress on the same (node, rank) during the gap. HTA has no such category: its "other"
   is ktrace's sync_wait + other.
4. other.

Threshold: HTA's `consecutive_kernel_delay=30` is applied to its µs timestamps (its docstring says
ns), so the equivalent default here is 30_000 ns. Negative gaps (records overlapping on one stream)
count 0 (HTA adds them up). Records without a launch in the trace cannot be host_wait.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ktrace.analysis.latency import JOIN_KEYS, launch_latency, launches
from ktrace.analysis.utilization import PER_KEYS, Per, activity_grouped, gpu_activity, grouped, names_matching
from ktrace.model.trace import Trace

SYNC_API_RE = r"Synchronize"
"""API names that block the host on the GPU (cudaStreamSynchronize, cuCtxSynchronize, ...)."""
KERNEL_WAIT_NS = 30_000
CATEGORIES = ("host_wait", "kernel_wait", "sync_wait", "other")
STREAM_KEYS = PER_KEYS["stream"]


def _sync_spans(trace: Trace, sync_pattern: str) -> pl.DataFrame:
    """Merged intervals per (node, rank) during which a synchronizing call was in progress."""
    from ktrace.analysis._kernels.intervals import merge_intervals

    cols = ["node", "rank", "start_ns", "end_ns"]
    api = trace.api.filter(pl.col("name").is_in(names_matching(trace.api, "name", sync_pattern))).select(cols)
    g = grouped(pl.concat([trace.syncs.select(cols), api]), ("node", "rank"))
    if g.n_groups == 0:
        return pl.DataFrame(schema={"node": pl.Categorical, "rank": pl.Int32, "sync_start_ns": pl.Int64,
                                    "sync_end_ns": pl.Int64})
    mg, ms, me = merge_intervals(g.gid, g.frame["start_ns"].to_numpy(), g.frame["end_ns"].to_numpy())
    return g.keys[mg].with_columns(pl.col("node").cast(pl.Categorical), sync_start_ns=pl.Series(ms),
                                   sync_end_ns=pl.Series(me))


def idle_gaps(trace: Trace, kernel_wait_ns: int = KERNEL_WAIT_NS, sync_pattern: str = SYNC_API_RE) -> pl.DataFrame:
    """Every gap between consecutive GPU records (kernel, memcpy, memset) of a stream, categorized.

    Args:
        trace: the trace.
        kernel_wait_ns: gaps shorter than this (and not host waits) are kernel_wait.
        sync_pattern: regex of API names that count as synchronizing calls.

    Returns:
        Frame: node, rank, device, stream, gap_start_ns (end of the previous record), gap_end_ns
        (start of the next), idle_ns (>= 0), api_start_ns of the next record (null without
        launch), idle_category.
    """
    lat = launch_latency(trace)  # memoized: shared with the latency and queue analyses
    if lat.height == gpu_activity(trace).height:  # every record has its launch: no second join
        act = lat
    else:
        act = gpu_activity(trace).join(launches(trace).select(*JOIN_KEYS, "api_start_ns"), on=list(JOIN_KEYS),
                                       how="left")
    g = grouped(act.select(*STREAM_KEYS, "start_ns", "end_ns", "api_start_ns"), STREAM_KEYS)
    prev_end = np.roll(g.frame["end_ns"].to_numpy(), 1)
    keep = np.ones(g.frame.height, dtype=bool)
    keep[g.first] = False
    gaps = g.frame.with_columns(gap_start_ns=pl.Series(prev_end, dtype=pl.Int64)).filter(pl.Series(keep))
    gaps = gaps.select(*STREAM_KEYS, "gap_start_ns", pl.col("start_ns").alias("gap_end_ns"), "api_start_ns")
    gaps = gaps.with_columns(idle_ns=(pl.col("gap_end_ns") - pl.col("gap_start_ns")).clip(lower_bound=0))
    gaps = _mark_sync(gaps, _sync_spans(trace, sync_pattern))
    host = pl.col("api_start_ns").is_not_null() & (pl.col("api_start_ns") > pl.col("gap_start_ns"))
    category = (pl.when(host).then(pl.lit("host_wait"))
                .when((pl.col("gap_end_ns") - pl.col("gap_start_ns")) < kernel_wait_ns).then(pl.lit("kernel_wait"))
                .when(pl.col("_sync")).then(pl.lit("sync_wait")).otherwise(pl.lit("other")))
    return gaps.with_columns(idle_category=category).drop("_sync")


def _mark_sync(gaps: pl.DataFrame, syncs: pl.DataFrame) -> pl.DataFrame:
    """Add _sync: a merged sync span overlaps (gap_start, gap_end) on the same node and rank."""
    if syncs.height == 0 or gaps.height == 0:
        return gaps.with_columns(_sync=pl.lit(False))
    left = gaps.with_row_index("_i").with_columns(_probe=pl.col("gap_end_ns") - 1).sort("_probe")
    right = syncs.sort("sync_start_ns")
    j = left.join_asof(right, left_on="_probe", right_on="sync_start_ns", by=["node", "rank"], strategy="backward",
                       check_sortedness=False)
    j = j.with_columns(_sync=(pl.col("sync_end_ns") > pl.col("gap_start_ns")).fill_null(False))
    return j.sort("_i").drop("_i", "_probe", "sync_start_ns", "sync_end_ns")


def idle_breakdown(trace: Trace, kernel_wait_ns: int = KERNEL_WAIT_NS, sync_pattern: str = SYNC_API_RE) -> pl.DataFrame:
    """Idle time per stream split by cause (HTA's `get_idle_time_breakdown`, every rank and stream).

    Args:
        trace: the trace.
        kernel_wait_ns: HTA's consecutive_kernel_delay, in ns.
        sync_pattern: regex of API names that count as synchronizing calls.

    Returns:
        Frame: node, rank, device, stream, idle_category, idle_ns, gaps, idle_ratio (of the
        stream's idle time); every category present for every stream (0 when none).
    """
    gaps = idle_gaps(trace, kernel_wait_ns, sync_pattern)
    streams = gaps.select(STREAM_KEYS).unique()
    cats = pl.DataFrame({"idle_category": list(CATEGORIES)})
    agg = gaps.group_by(*STREAM_KEYS, "idle_category").agg(idle_ns=pl.col("idle_ns").sum(), gaps=pl.len())
    full = streams.join(cats, how="cross").join(agg, on=[*STREAM_KEYS, "idle_category"], how="left").with_columns(
        pl.col("idle_ns").fill_null(0).cast(pl.Int64), pl.col("gaps").fill_null(0).cast(pl.Int64))
    total = pl.col("idle_ns").sum().over(STREAM_KEYS)
    order = pl.col("idle_category").replace_strict({c: i for i, c in enumerate(CATEGORIES)}, return_dtype=pl.Int32)
    return full.with_columns(idle_ratio=pl.when(total > 0).then(pl.col("idle_ns") / total).otherwise(0.0)).sort(
        *STREAM_KEYS, order)


def gpu_gaps(trace: Trace, per: Per = "device", min_gap_ns: int = 0) -> pl.DataFrame:
    """Gaps between the busy intervals (union of GPU records) of each device (or rank/stream).

    Args:
        trace: the trace.
        per: "rank", "device" or "stream".
        min_gap_ns: keep gaps at least this long (nsys gpu_gaps: 500 ms).

    Returns:
        Frame: key columns, gap_start_ns, gap_end_ns, gap_ns; sorted by keys and time.
    """
    from ktrace.analysis._kernels.intervals import merge_intervals

    g = activity_grouped(trace, per)
    mg, ms, me = merge_intervals(g.gid, g.frame["start_ns"].to_numpy(), g.frame["end_ns"].to_numpy())
    same = mg[1:] == mg[:-1]
    gs, ge, gg = me[:-1][same], ms[1:][same], mg[1:][same]
    keep = (ge - gs) >= max(min_gap_ns, 1)
    return g.keys[gg[keep]].with_columns(gap_start_ns=pl.Series(gs[keep], dtype=pl.Int64),
                                         gap_end_ns=pl.Series(ge[keep], dtype=pl.Int64),
                                         gap_ns=pl.Series((ge - gs)[keep], dtype=pl.Int64))
