"""Which GPU records the synchronizations of a critical-path window wait for (HTA's sync edges).

A sync record (trace.syncs) is tied to the CPU call that waited (the api row with its correlation id). An
event wait names the stream its event was recorded on and the correlation id of the cudaEventRecord call;
the record it waits for is the last one launched on that stream before that call (HTA's
"index_previous_launch"). A cudaStreamWaitEvent makes the next record launched from the same thread on the
waiting stream wait for it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.columns import dense_ids
from ktrace.analysis.index import TraceIndex

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


def rank_syncs(ix: TraceIndex, node: str, rank: int) -> pl.DataFrame:
    """Sync records of one rank with their waiting call's api row (api_row) and that of the event record
    they name (record_row, null without one), by end time."""
    mine = (pl.col("node").cast(pl.String) == node) & (pl.col("rank") == rank)
    api = ix.trace.api.with_row_index("api_row").filter(mine & pl.col("correlation_id").is_not_null())
    api = api.select("correlation_id", pl.col("api_row").cast(pl.Int64)).unique("correlation_id", keep="first")
    syncs = ix.trace.syncs.filter(mine).select(
        pl.col("sync_type").cast(pl.String),
        pl.col("device").fill_null(-1).cast(pl.Int64),
        pl.col("stream").fill_null(-1),
        "end_ns",
        "correlation_id",
        "wait_stream",
        "wait_correlation_id",
    )
    syncs = syncs.join(api, on="correlation_id", how="inner")
    records = api.rename({"correlation_id": "wait_correlation_id", "api_row": "record_row"})
    return syncs.join(records, on="wait_correlation_id", how="left").sort("end_ns")


def _launches(ix: TraceIndex, mine: Mask) -> tuple[I64, I64, I64]:
    """(records, launch call start, dense (device, stream) group) of the rank's launched records, by call start."""
    c = ix.gpu_columns()
    rec = np.flatnonzero(mine)
    ts = ix.api_times()[0][ix.launch_rows()[rec]]
    order = np.lexsort((rec, ts))
    return rec[order], ts[order], c.device[rec[order]] * (1 << 40) + c.stream[rec[order]]


def _recorded_before(ix: TraceIndex, mine: Mask, syncs: pl.DataFrame) -> I64:
    """Per sync: the record launched on its event's stream last before the event's cudaEventRecord call."""
    out = np.full(syncs.height, -1, np.int64)
    rec, ts, key = _launches(ix, mine)
    api_start = ix.api_times()[0]
    for i, (device, wait_stream, record_row) in enumerate(syncs.select("device", "wait_stream", "record_row").rows()):
        if wait_stream is None or record_row is None:
            continue
        on = np.flatnonzero(key == device * (1 << 40) + wait_stream)
        before = np.searchsorted(ts[on], api_start[record_row], side="right") - 1
        if before >= 0:
            out[i] = rec[on[before]]
    return out


def stream_waits(ix: TraceIndex, syncs: pl.DataFrame, mine: Mask) -> I64:
    """Per GPU record (index order): the record a cudaStreamWaitEvent made it wait for, -1 for none."""
    c = ix.gpu_columns()
    out = np.full(c.size, -1, np.int64)
    waits = syncs.filter(pl.col("sync_type") == "stream_wait_event")
    if waits.height == 0:
        return out
    source = _recorded_before(ix, mine, waits)
    rec, ts, key = _launches(ix, mine)
    api = ix.trace.api
    thread, _ = dense_ids([api["pid"].to_numpy().astype(np.int64), api["tid"].to_numpy().astype(np.int64)])
    rec_thread = thread[ix.launch_rows()[rec]]
    api_start = ix.api_times()[0]
    for i, (device, stream, end_ns, api_row) in enumerate(waits.select("device", "stream", "end_ns", "api_row").rows()):
        if source[i] < 0:
            continue
        on = np.flatnonzero((key == device * (1 << 40) + stream) & (rec_thread == thread[api_row]))
        after = np.searchsorted(ts[on], api_start[api_row], side="left")
        if after < on.size and c.start[rec[on[after]]] >= end_ns:
            out[rec[on[after]]] = source[i]
    return out


def cpu_waits(ix: TraceIndex, syncs: pl.DataFrame, rec_ev: I64, mine: Mask) -> tuple[I64, I64]:
    """(record waited for, api row of the waiting call) of every GPU -> CPU sync edge of the graph: a stream
    sync waits for its stream's last record started before the sync ended, a context/device sync for every
    stream's, an event sync for the record before its event's cudaEventRecord (records of the graph only)."""
    c = ix.gpu_columns()
    in_graph = np.flatnonzero(rec_ev >= 0)
    key = c.device[in_graph] * (1 << 40) + c.stream[in_graph]
    order = np.lexsort((in_graph, c.start[in_graph], key))
    g_rec, g_key, g_start = in_graph[order], key[order], c.start[in_graph][order]
    groups = np.unique(g_key)
    events = _recorded_before(ix, mine, syncs)
    waited: list[int] = []
    calls: list[int] = []
    rows = syncs.select("sync_type", "device", "stream", "end_ns", "api_row").rows()
    for i, (kind, device, stream, end_ns, api_row) in enumerate(rows):
        if kind == "event":
            if events[i] >= 0 and rec_ev[events[i]] >= 0:
                waited.append(int(events[i]))
                calls.append(api_row)
            continue
        if kind == "stream":
            targets = [device * (1 << 40) + stream]
        elif kind in ("context", "device"):
            targets = groups.tolist()
        else:
            continue
        for target in targets:
            lo, hi = np.searchsorted(g_key, [target, target + 1])
            last = lo + np.searchsorted(g_start[lo:hi], end_ns, side="right") - 1
            if last >= lo:
                waited.append(int(g_rec[last]))
                calls.append(api_row)
    return np.asarray(waited, np.int64), np.asarray(calls, np.int64)
