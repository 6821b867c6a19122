"""The launch join over the GPU records' columns: which API call launched each record (``build_launch_rows``,
matched by (node, rank, correlation id)) and the calls that launched records, one entry per call however many
records it fans out to (``LaunchRuns``). TraceIndex computes both once per trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ktrace.analysis.columns import I64, GpuColumns, combine_rank_ids, concat_i64
from ktrace.model.trace import Trace

_RANK_BITS = 32
"""A (rank, correlation id) key: the rank above this many bits, the id (32 bits at most) below."""


def build_launch_rows(trace: Trace, c: GpuColumns, api_ids: tuple[pl.DataFrame, I64], api_start: I64) -> I64:
    """The api row (index into trace.api) launching each GPU record, -1 without one.

    Same matching as latency.launches: (node, rank, correlation_id) with a non-null, non-zero id; if
    an id repeats on a rank, the earliest call wins.
    """
    from ktrace.analysis._kernels.joins import lookup_first

    api = trace.api
    if api.height == 0 or c.size == 0:
        return np.full(c.size, -1, np.int64)
    keys, (arank, grank) = combine_rank_ids([api_ids, (c.rank_keys, np.arange(c.rank_keys.height, dtype=np.int64))])
    corr = concat_i64([api], "correlation_id", 0)
    lo, hi = int(corr.min()), int(corr.max())
    wide = (
        lo < 0
        or hi > 0xFFFFFFFF
        or bool(c.size and (c.correlation_id.max() > 0xFFFFFFFF or c.correlation_id.min() < 0))
    )
    if wide:  # ids beyond 32 bits: fall back to a struct key through polars
        return _launch_rows_wide(trace, c, arank, grank)
    # One rank: the id alone is the key. Id 0 means none: such calls are left out of the build side (so
    # a record with id 0 finds nothing); when no call has id 0, no row needs leaving out.
    key = corr if keys.height == 1 else (arank << _RANK_BITS) | corr
    probe = c.correlation_id if keys.height == 1 else (grank[c.rank_id] << _RANK_BITS) | c.correlation_id
    if lo > 0:
        return lookup_first(key, api_start, probe)
    idx_valid = np.flatnonzero(corr != 0)
    if idx_valid.size == 0:  # no call carries an id
        return np.full(c.size, -1, np.int64)
    found = lookup_first(key[idx_valid], api_start[idx_valid], probe)
    return np.where(found >= 0, idx_valid[np.maximum(found, 0)], -1).astype(np.int64)


def _launch_rows_wide(trace: Trace, c: GpuColumns, arank: I64, grank: I64) -> I64:
    api = pl.DataFrame({"r": arank, "c": trace.api["correlation_id"], "s": trace.api["start_ns"]}).with_row_index("i")
    api = api.filter(pl.col("c").is_not_null() & (pl.col("c") != 0)).sort("s", "i").unique(["r", "c"], keep="first")
    act = pl.DataFrame({"r": grank[c.rank_id], "c": c.correlation_id}).with_row_index("j")
    joined = act.join(api.select("r", "c", "i"), on=["r", "c"], how="left").sort("j")
    return joined["i"].fill_null(-1).to_numpy().astype(np.int64)


@dataclass(frozen=True)
class LaunchRuns:
    """The launch calls that have a GPU record, one entry each, in the order of their first record.

    One api row can launch many GPU records: a CUDA graph launch (`cudaGraphLaunch`) fans out to every node
    of the graph under one correlation id. Anything that counts or sums launches (queue depth, launch
    counts, launch-bound kernels) takes one entry per call from here, not one per record.
    """

    first: I64
    """The call's first GPU record (index into GpuColumns: earliest start, then lowest index); ascending."""
    last_end: I64
    """The latest end among the call's records."""
    records: I64
    """How many GPU records the call launched (1 unless it fans out)."""
    fans_out: bool
    """Some call launched more than one record (else `first` is every launched record)."""


def build_launch_runs(rows: I64, start: I64, end: I64) -> LaunchRuns:
    """LaunchRuns from the launch join (`rows`: api row per GPU record, -1 without one) and the records' times."""
    hit = np.flatnonzero(rows >= 0)
    api_row = rows[hit]
    if hit.size == 0 or int(np.bincount(api_row).max()) <= 1:  # one record per call: every record is a call
        return LaunchRuns(hit, end[hit], np.ones(hit.size, np.int64), False)
    order = np.lexsort((hit, start[hit], api_row))  # by call, then start, then record
    by_call = api_row[order]
    heads = np.flatnonzero(np.r_[True, by_call[1:] != by_call[:-1]])
    first = hit[order[heads]]
    last_end = np.maximum.reduceat(end[hit[order]], heads)
    records = np.diff(np.r_[heads, order.size]).astype(np.int64)
    back = np.argsort(first, kind="stable")
    return LaunchRuns(first[back], last_end[back], records[back], True)
