"""Which GPU records the synchronizations of a critical-path window wait for (HTA's sync edges).

A sync record (trace.syncs) is tied to the CPU call that waited (the api row with its correlation id). An
event wait names the stream its event was recorded on and the correlation id of the cudaEventRecord call;
the record it waits for is the last one launched on that stream before that call (HTA's
"index_previous_launch"). A cudaStreamWaitEvent makes the next record launched from the same thread on the
waiting stream wait for it.

Only the graph's records are searched (those launched in the window): an edge needs both ends in the graph,
and a launch before the window cannot be the last one before a call made in it unless no launch of the
window precedes that call, in which case HTA's edge would leave the graph too. This bounds the work by the
window, not the trace.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.columns import dense_ids
from ktrace.analysis.index import TraceIndex

I64 = npt.NDArray[np.int64]
DEVICE_SYNC_CALLS = ("cudaDeviceSynchronize", "cuCtxSynchronize")
"""Calls that wait for every stream of the device; an event sync record of one that names no event (as nsys
exports it) is taken as the context sync it is."""


def rank_syncs(ix: TraceIndex, node: str, rank: int, start_ns: int, end_ns: int) -> pl.DataFrame:
    """Sync records of one rank whose call starts by end_ns and that end at or after start_ns, with their
    waiting call's api row (api_row) and name (call), and the api row of the event record they name
    (record_row, null without one), by end time. An event sync of a DEVICE_SYNC_CALLS call naming no event is
    a "context" sync."""
    mine = (pl.col("node") == node) & (pl.col("rank") == rank)  # the Categorical compared as it is: no String per row
    api = ix.trace.api.with_row_index("api_row").filter(mine & pl.col("correlation_id").is_not_null())
    api = api.select(
        "correlation_id", pl.col("api_row").cast(pl.Int64), call_ns="start_ns", call=pl.col("name").cast(pl.String)
    )
    api = api.unique("correlation_id", keep="first", maintain_order=True)
    syncs = ix.trace.syncs.filter(mine & (pl.col("end_ns") >= start_ns)).select(*SYNC_COLUMNS)
    syncs = syncs.join(api, on="correlation_id", how="inner").filter(pl.col("call_ns") <= end_ns)
    records = api.select(wait_correlation_id="correlation_id", record_row="api_row")
    syncs = syncs.with_columns(context_sync_type())
    return syncs.join(records, on="wait_correlation_id", how="left").sort("end_ns", "correlation_id")


SYNC_COLUMNS = (
    pl.col("sync_type").cast(pl.String),
    pl.col("device").fill_null(-1).cast(pl.Int64),
    pl.col("stream").fill_null(-1),
    "end_ns",
    "correlation_id",
    "wait_stream",
    "wait_correlation_id",
)
"""The columns of rank_syncs' rows taken from trace.syncs (before the waiting call's are joined)."""


def context_sync_type() -> pl.Expr:
    """sync_type with an event sync naming no event made by a DEVICE_SYNC_CALLS call (`call`) a "context" sync: nsys
    records a cudaDeviceSynchronize so, and it waits as a context sync does."""
    device_wide = (pl.col("sync_type") == "event") & pl.col("wait_correlation_id").is_null()
    device_wide = device_wide & pl.col("call").is_in(DEVICE_SYNC_CALLS)
    return pl.when(device_wide).then(pl.lit("context")).otherwise("sync_type").alias("sync_type")


class _Launches:
    """The graph's records sorted by a key, then launch call start: searches per key in O(log n)."""

    def __init__(self, rec: I64, key: I64, ts: I64) -> None:
        order = np.lexsort((rec, ts, key))
        self.rec, self.key, self.ts = rec[order], key[order], ts[order]

    def last_before(self, key: int, t: int) -> int:
        """The record of `key` whose launch started last at or before t, -1 for none."""
        lo, hi = np.searchsorted(self.key, [key, key + 1])
        i = lo + int(np.searchsorted(self.ts[lo:hi], t, side="right")) - 1
        return int(self.rec[i]) if i >= lo else -1

    def first_after(self, key: int, t: int) -> int:
        """The record of `key` whose launch started first at or after t, -1 for none."""
        lo, hi = np.searchsorted(self.key, [key, key + 1])
        i = lo + int(np.searchsorted(self.ts[lo:hi], t, side="left"))
        return int(self.rec[i]) if i < hi else -1


def _stream_key(device: I64 | int, stream: I64 | int) -> I64:
    return np.asarray(device, np.int64) * (1 << 40) + np.asarray(stream, np.int64)


def _recorded_before(ix: TraceIndex, rec: I64, syncs: pl.DataFrame) -> I64:
    """Per sync: the graph record launched on its event's stream last before the event's cudaEventRecord."""
    c = ix.gpu_columns()
    out = np.full(syncs.height, -1, np.int64)
    api_start = ix.api_times()[0]
    launches = _Launches(rec, _stream_key(c.device[rec], c.stream[rec]), api_start[ix.launch_rows()[rec]])
    for i, (device, wait_stream, record_row) in enumerate(syncs.select("device", "wait_stream", "record_row").rows()):
        if wait_stream is not None and record_row is not None:
            out[i] = launches.last_before(int(_stream_key(device, wait_stream)), int(api_start[record_row]))
    return out


def stream_waits(ix: TraceIndex, syncs: pl.DataFrame, rec: I64) -> I64:
    """Per GPU record (index order): the graph record a cudaStreamWaitEvent made it wait for, -1 for none."""
    c = ix.gpu_columns()
    out = np.full(c.size, -1, np.int64)
    waits = syncs.filter(pl.col("sync_type") == "stream_wait_event")
    if waits.height == 0 or rec.size == 0:
        return out
    source = _recorded_before(ix, rec, waits)
    api = ix.trace.api
    launch = ix.launch_rows()[rec]
    callers = np.concatenate([launch, waits["api_row"].to_numpy().astype(np.int64)])
    pid, tid = api["pid"].to_numpy().astype(np.int64), api["tid"].to_numpy().astype(np.int64)
    stream = np.concatenate(
        [
            _stream_key(c.device[rec], c.stream[rec]),
            _stream_key(waits["device"].to_numpy().astype(np.int64), waits["stream"].to_numpy().astype(np.int64)),
        ]
    )
    key, _ = dense_ids([stream, pid[callers], tid[callers]])
    api_start = ix.api_times()[0]
    launches = _Launches(rec, key[: rec.size], api_start[launch])
    wait_key = key[rec.size :]
    for i, (end_ns, api_row) in enumerate(waits.select("end_ns", "api_row").rows()):
        if source[i] < 0:
            continue
        dest = launches.first_after(int(wait_key[i]), int(api_start[api_row]))
        if dest >= 0 and c.start[dest] >= end_ns:
            out[dest] = source[i]
    return out


def cpu_waits(ix: TraceIndex, syncs: pl.DataFrame, rec: I64) -> tuple[I64, I64]:
    """(record waited for, api row of the waiting call) of every GPU -> CPU sync edge of the graph: a stream
    sync waits for its stream's last record started before the sync ended, a context/device sync for every
    stream's, an event sync for the record before its event's cudaEventRecord (graph records only)."""
    c = ix.gpu_columns()
    key = _stream_key(c.device[rec], c.stream[rec])
    by_start = _Launches(rec, key, c.start[rec])
    groups = np.unique(key).tolist()
    events = _recorded_before(ix, rec, syncs)
    waited: list[int] = []
    calls: list[int] = []
    rows = syncs.select("sync_type", "device", "stream", "end_ns", "api_row").rows()
    for i, (kind, device, stream, end_ns, api_row) in enumerate(rows):
        if kind == "event":
            found = [int(events[i])]
        elif kind == "stream":
            found = [by_start.last_before(int(_stream_key(device, stream)), end_ns)]
        elif kind in ("context", "device"):
            found = [by_start.last_before(g, end_ns) for g in groups]
        else:
            continue
        for r in found:
            if r >= 0:
                waited.append(r)
                calls.append(api_row)
    return np.asarray(waited, np.int64), np.asarray(calls, np.int64)
