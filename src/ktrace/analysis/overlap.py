"""Communication/compute overlap and per-stream queue depth (launched but not finished work).

API:

- ``comm_compute_overlap(trace, per="rank") -> pl.DataFrame``: per group comm_ns (union of NCCL
  kernels), compute_ns (union of compute kernels), overlap_ns (both at once), overlap_pct = 100 *
  overlap / comm (HTA's `get_comm_comp_overlap`), comm_only_ns, compute_only_ns.
- ``queue_depth(trace, until="end") -> pl.DataFrame``: step series per (node, rank, device, stream):
  ts_ns, depth after the change.
- ``queue_depth_stats(trace, until="end", max_queue_length=1024) -> pl.DataFrame``: per stream max,
  time-weighted mean, HTA-style sample mean, and time at or above `max_queue_length`.

Queue depth: +1 at the launch API call's start for every GPU record it enqueued (each run of a CUDA
graph launch counts), -1 when the record finishes (`until="end"`: launched but not finished) or
starts (`until="start"`: launched but not started, HTA's `get_queue_length_time_series`). Records
without a launch in the trace are left out (as HTA does). At equal times decrements come first.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import polars as pl

from ktrace.analysis.breakdown import mask_sum, type_coverage
from ktrace.analysis.latency import launch_latency
from ktrace.analysis.utilization import Per, grouped
from ktrace.model.trace import Trace

STREAM_KEYS = ("node", "rank", "device", "stream")


def comm_compute_overlap(trace: Trace, per: Per = "rank") -> pl.DataFrame:
    """Computation/communication overlap per rank (or device/stream), HTA's definition.

    Args:
        trace: the trace.
        per: "rank" (HTA), "device" or "stream".

    Returns:
        Frame: key columns, comm_ns, compute_ns, overlap_ns, comm_only_ns, compute_only_ns,
        overlap_pct (100 * overlap / comm; null without communication).
    """
    keys, cov = type_coverage(trace, per=per, types=("COMPUTATION", "COMMUNICATION"))
    comm, compute, overlap = mask_sum(cov, 2), mask_sum(cov, 1), mask_sum(cov, 3)
    pct = np.where(comm > 0, 100.0 * overlap / np.maximum(comm, 1), np.nan)
    return keys.with_columns(
        comm_ns=pl.Series(comm, dtype=pl.Int64), compute_ns=pl.Series(compute, dtype=pl.Int64),
        overlap_ns=pl.Series(overlap, dtype=pl.Int64), comm_only_ns=pl.Series(mask_sum(cov, 2, 1), dtype=pl.Int64),
        compute_only_ns=pl.Series(mask_sum(cov, 1, 2), dtype=pl.Int64),
        overlap_pct=pl.Series(pct, dtype=pl.Float64).fill_nan(None))


def _queue_events(trace: Trace, until: Literal["start", "end"]) -> pl.DataFrame:
    lat = launch_latency(trace).select(*STREAM_KEYS, "api_start_ns", pl.col(f"{until}_ns").alias("done_ns"))
    inc = lat.select(*STREAM_KEYS, pl.col("api_start_ns").alias("ts_ns"), pl.lit(1, pl.Int64).alias("delta"))
    dec = lat.select(*STREAM_KEYS, pl.col("done_ns").alias("ts_ns"), pl.lit(-1, pl.Int64).alias("delta"))
    return pl.concat([inc, dec])


def queue_depth(trace: Trace, until: Literal["start", "end"] = "end") -> pl.DataFrame:
    """Queue depth per stream over time as a step function (one row per change).

    Args:
        trace: the trace.
        until: "end" (launched but not finished) or "start" (launched but not started, HTA).

    Returns:
        Frame: node, rank, device, stream, ts_ns, depth (value from ts_ns until the next row of the
        same stream). Empty without launches joined to GPU records.
    """
    from ktrace.analysis._kernels.queue import running_depth

    g = grouped(_queue_events(trace, until), STREAM_KEYS, order=("ts_ns", "delta"))  # -1 before +1 at ties
    depth = running_depth(g.gid, g.frame["delta"].to_numpy().astype(np.int64))
    return g.frame.select(*STREAM_KEYS, "ts_ns").with_columns(depth=pl.Series(depth, dtype=pl.Int64))


def queue_depth_stats(trace: Trace, until: Literal["start", "end"] = "end",
                      max_queue_length: int = 1024) -> pl.DataFrame:
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
    from ktrace.analysis._kernels.queue import level_stats

    q = queue_depth(trace, until)
    g = grouped(q.with_row_index("_i"), STREAM_KEYS, order="_i")
    if g.n_groups == 0:
        return g.keys.with_columns(*[pl.lit(0, pl.Int64).alias(c) for c in (
            "changes", "max_depth", "time_at_max_ns", "span_ns")],
            mean_depth=pl.lit(0.0), sample_mean_depth=pl.lit(0.0)).clear()
    t = g.frame["ts_ns"].to_numpy().astype(np.int64)
    d = g.frame["depth"].to_numpy().astype(np.int64)
    wsum, span, above, mx = level_stats(g.gid, t, d, g.n_groups, max_queue_length)
    counts = np.diff(np.append(g.first, t.size))
    sample_mean = np.add.reduceat(d, g.first) / counts
    return g.keys.with_columns(
        changes=pl.Series(counts, dtype=pl.Int64), max_depth=pl.Series(mx, dtype=pl.Int64),
        mean_depth=pl.Series(np.where(span > 0, wsum / np.maximum(span, 1), 0.0)),
        sample_mean_depth=pl.Series(sample_mean), time_at_max_ns=pl.Series(above, dtype=pl.Int64),
        span_ns=pl.Series(span, dtype=pl.Int64))
