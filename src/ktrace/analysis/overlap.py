"""Communication/compute overlap and per-stream queue depth (launched but not finished work).

API:

- ``comm_compute_overlap(trace, per="rank") -> pl.DataFrame``: per group comm_ns (union of NCCL
  kernels), compute_ns (union of compute kernels), overlap_ns (both at once), overlap_pct = 100 *
  overlap / comm (HTA's `get_comm_comp_overlap`), comm_only_ns, compute_only_ns.
- ``queue_depth(trace, until="end") -> pl.DataFrame``: step series per (node, rank, device, stream):
  ts_ns, depth after the change.
- ``queue_depth_stats(trace, until="end", max_queue_length=1024) -> pl.DataFrame``: per stream max,
  time-weighted mean, HTA-style sample mean, and time at or above `max_queue_length`.

Queue depth: +1 at the start of every launch API call with a GPU record, -1 when its work finishes
(`until="end"`: launched but not finished) or starts (`until="start"`: launched but not started, HTA's
`get_queue_length_time_series`). A CUDA graph launch is one entry of the launch queue, however many
nodes its graph has: it counts once, on the stream of its first record, until its last record ends (or
its first starts). Records without a launch in the trace are left out (as HTA does). At equal times
decrements come first.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import polars as pl

from ktrace.analysis.breakdown import mask_sum, type_coverage
from ktrace.analysis.columns import Per, time_order
from ktrace.analysis.index import Slot, TraceIndex
from ktrace.model.trace import Trace

STREAM_KEYS = ("node", "rank", "device", "stream")
_QUEUE_EVENTS = Slot[tuple[pl.DataFrame, Any, Any, Any, Any]]("queue_events")


def comm_compute_overlap(trace: Trace, per: Per = "rank", *, index: TraceIndex | None = None) -> pl.DataFrame:
    """Computation/communication overlap per rank (or device/stream), HTA's definition.

    Args:
        trace: the trace.
        per: "rank" (HTA), "device" or "stream".
        index: the trace's TraceIndex.

    Returns:
        Frame: key columns, comm_ns, compute_ns, overlap_ns, comm_only_ns, compute_only_ns,
        overlap_pct (100 * overlap / comm; null without communication).
    """
    keys, cov = type_coverage(trace, per=per, types=("COMPUTATION", "COMMUNICATION"), index=index)
    comm, compute, overlap = mask_sum(cov, 2), mask_sum(cov, 1), mask_sum(cov, 3)
    pct = np.where(comm > 0, 100.0 * overlap / np.maximum(comm, 1), np.nan)
    return keys.with_columns(
        comm_ns=pl.Series(comm, dtype=pl.Int64),
        compute_ns=pl.Series(compute, dtype=pl.Int64),
        overlap_ns=pl.Series(overlap, dtype=pl.Int64),
        comm_only_ns=pl.Series(mask_sum(cov, 2, 1), dtype=pl.Int64),
        compute_only_ns=pl.Series(mask_sum(cov, 1, 2), dtype=pl.Int64),
        overlap_pct=pl.Series(pct, dtype=pl.Float64).fill_nan(None),
    )


def _queue_events(
    trace: Trace, until: Literal["start", "end"], index: TraceIndex | None
) -> tuple[pl.DataFrame, Any, Any, Any, Any]:
    """(stream keys, group id, time, delta, first event of each group) of the queue's +1/-1 events in
    (stream, time) order, decrements before increments at equal times; streams without a launched
    record are left out. Shared through the index."""
    ix = TraceIndex.of(trace, index)
    return ix.get(_QUEUE_EVENTS, lambda: _compute_queue_events(ix, until), until)


def _compute_queue_events(ix: TraceIndex, until: Literal["start", "end"]) -> tuple[pl.DataFrame, Any, Any, Any, Any]:
    c, g, rows, runs = ix.gpu_columns(), ix.row_groups("stream"), ix.launch_rows(), ix.launch_runs()
    stream_of = np.empty(c.size, np.int64)
    stream_of[g.perm] = np.repeat(np.arange(g.n_groups, dtype=np.int64), np.diff(g.bounds))
    hit = runs.first  # one entry per launch call (a graph launch's first record)
    m = hit.size
    done = runs.last_end if until == "end" else c.start[hit]
    # Decrements first: the stable order keeps them ahead of increments at the same time.
    gid = np.concatenate([stream_of[hit], stream_of[hit]])
    ts = np.concatenate([done, ix.api_times()[0][rows[hit]]])
    delta = np.concatenate([np.full(m, -1, np.int64), np.ones(m, np.int64)])
    perm, bounds = time_order(gid, g.n_groups, ts)
    present = np.flatnonzero(np.diff(bounds) > 0)
    renumber = np.cumsum(np.diff(bounds) > 0) - 1  # dense ids over the streams that have events
    return (g.keys[present], renumber[gid[perm]], ts[perm], delta[perm], bounds[:-1][present].astype(np.int64))


def queue_depth(
    trace: Trace, until: Literal["start", "end"] = "end", *, index: TraceIndex | None = None
) -> pl.DataFrame:
    """Queue depth per stream over time as a step function (one row per change).

    Args:
        trace: the trace.
        until: "end" (launched but not finished) or "start" (launched but not started, HTA).

    Returns:
        Frame: node, rank, device, stream, ts_ns, depth (value from ts_ns until the next row of the
        same stream). Empty without launches joined to GPU records.
    """
    from ktrace.analysis._kernels.queue import running_depth

    keys, gid, ts, delta, _ = _queue_events(trace, until, index)
    depth = running_depth(gid, delta)
    return keys[gid].with_columns(ts_ns=pl.Series(ts, dtype=pl.Int64), depth=pl.Series(depth, dtype=pl.Int64))


def queue_depth_stats(
    trace: Trace,
    until: Literal["start", "end"] = "end",
    max_queue_length: int = 1024,
    *,
    index: TraceIndex | None = None,
) -> pl.DataFrame:
    """Per-stream queue-depth statistics.

    Args:
        trace: the trace.
        until: as for queue_depth.
        max_queue_length: the launch-queue limit (HTA's default 1024); time at or above it is reported.

    Returns:
        Frame: node, rank, device, stream, changes, max_depth, mean_depth (time-weighted),
        sample_mean_depth (mean over change points, as HTA's summary `describe()`),
        time_at_max_ns, span_ns.
    """
    from ktrace.analysis._kernels.queue import level_stats, running_depth

    keys, gid, t, delta, first = _queue_events(trace, until, index)
    if keys.height == 0:
        return keys.with_columns(
            *[pl.lit(0, pl.Int64).alias(c) for c in ("changes", "max_depth", "time_at_max_ns", "span_ns")],
            mean_depth=pl.lit(0.0),
            sample_mean_depth=pl.lit(0.0),
        ).clear()
    d = running_depth(gid, delta)
    wsum, span, above, mx = level_stats(gid, t, d, keys.height, max_queue_length)
    counts = np.diff(np.append(first, t.size))
    sample_mean = np.add.reduceat(d, first) / counts
    return keys.with_columns(
        changes=pl.Series(counts, dtype=pl.Int64),
        max_depth=pl.Series(mx, dtype=pl.Int64),
        mean_depth=pl.Series(np.where(span > 0, wsum / np.maximum(span, 1), 0.0)),
        sample_mean_depth=pl.Series(sample_mean),
        time_at_max_ns=pl.Series(above, dtype=pl.Int64),
        span_ns=pl.Series(span, dtype=pl.Int64),
    )
