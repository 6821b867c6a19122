"""The dependency graph of one time window of one rank, for the critical path (HTA's graph model, columnar).

Every CPU operator (ops row of category cpu_op: Python frames are not operators, as in HTA, whose graph
takes cpu_op, cuda_runtime and cuda_driver events) and CUDA runtime/driver call (api row) that starts in the window and lasts
longer than 0, and every GPU record (kernel, memcpy, memset) whose launch call is one of them, is an *event*
with two *nodes*: its start (node 2e) and its end (node 2e + 1). Edges, as HTA 0.5 draws them
(hta/analyzers/critical_path_analysis.py, with CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE=1):

- **cpu**: on each thread, consecutive nodes of the call stack walked depth first (start A, start B, end B,
  end A), weighted by the time between them; the edge into the end of a blocking call (BLOCKING_CALLS) weighs
  0, so the time a call spends waiting is carried by the GPU work it waits for, not by the CPU;
- **dependency**: the end of a top-level event to the start of the next one on its thread (weight 0);
- **gpu**: a record's start to its end (its duration);
- **launch**: the launch call's start to the record's start, weighted by the launch delay when nothing else
  was queued on the stream and the stream's previous record had ended before the call (the record waited
  for its launch), else weight 0 (causality only);
- **kernel_gap**: the previous record on the stream to this one (the gap), when the record did not wait for
  its launch;
- **sync**: a GPU record's end to the end of the CPU call that waited for it (cudaStreamSynchronize: the
  stream's last record; cudaDeviceSynchronize: every stream's; cudaEventSynchronize/Query: the record
  launched on the event's stream just before its cudaEventRecord), and the record an event waits for to
  the next record launched on the waiting stream (cudaStreamWaitEvent); weight 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.columns import dense_ids
from ktrace.analysis.critical_path_syncs import cpu_waits, rank_syncs, stream_waits
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.op_attribution import IS_OPERATOR

I64 = npt.NDArray[np.int64]
EDGE_TYPES = ("cpu", "dependency", "launch", "kernel_gap", "sync", "gpu", "collective")
CPU, DEPENDENCY, LAUNCH, KERNEL_GAP, SYNC, GPU, COLLECTIVE = range(len(EDGE_TYPES))
"""collective: only in graphs joining ranks (critical_path_ranks)."""
EVENT_KINDS = ("operator", "runtime", "gpu")
OPERATOR, RUNTIME, GPU_RECORD = range(len(EVENT_KINDS))
BLOCKING_CALLS = (
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventQuery",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cudaMemcpyAsync",
)
"""Calls whose end waits for the GPU (HTA's BLOCKING_SYNC_CALLS): the CPU edge into their end weighs 0."""
_THREAD = ("node", "rank", "pid", "tid")


@dataclass(frozen=True)
class Window:
    """One rank's time window: events whose CPU side starts in [start_ns, end_ns] belong to the graph."""

    node: str
    rank: int
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class Graph:
    """Events (ev_*: one entry per event) and edges (one entry per edge, in the order they were drawn)."""

    ev_kind: I64
    """EVENT_KINDS code."""
    ev_row: I64
    """Row in trace.ops (operator), trace.api (runtime) or the index's GPU records (gpu)."""
    ev_start: I64
    ev_end: I64
    src: I64
    """Source node (2 * event for its start, 2 * event + 1 for its end)."""
    dst: I64
    weight: I64
    """ns, >= 0."""
    etype: I64
    """EDGE_TYPES code."""
    event: I64
    """The event an edge's time belongs to (cpu: the innermost event open during it; gpu: the record;
    kernel_gap: the previous record; launch: the launch call), -1 for weightless edge types."""

    sync_records: int
    """Sync records of the rank that could tie the window's records to its CPU calls."""
    ev_window: I64 | None = None
    """Per event: its window in a graph joining ranks (critical_path_ranks), None for one window."""
    wait_ns: I64 | None = None
    """Per edge: the ns of a collective's span spent waiting for a later rank (joined graphs only)."""

    @property
    def n_nodes(self) -> int:
        """Two per event."""
        return 2 * int(self.ev_kind.size)

    def node_ts(self) -> I64:
        """Time of every node (starts at even ids, ends at odd)."""
        return np.stack([self.ev_start, self.ev_end], axis=1).reshape(-1)


def build_graph(ix: TraceIndex, window: Window) -> Graph:
    """The dependency graph of `window` (see the module docstring)."""
    trace = ix.trace
    in_window = (  # node compared as the Categorical it is: a String cast of every ops row cost ~20 MB at 900 k rows
        (pl.col("node") == window.node)
        & (pl.col("rank") == window.rank)
        & pl.col("start_ns").is_between(window.start_ns, window.end_ns)
        & (pl.col("end_ns") > pl.col("start_ns"))
    )
    cols = (*_THREAD, "start_ns", "end_ns", "row")
    ops = trace.ops.with_row_index("row").filter(in_window & IS_OPERATOR).select(*cols, blocking=pl.lit(False))
    api = trace.api.with_row_index("row").filter(in_window)
    api = api.select(*cols, blocking=pl.col("name").cast(pl.String).is_in(BLOCKING_CALLS))
    cpu = pl.concat([ops, api], how="vertical_relaxed").with_columns(pl.col("row").cast(pl.Int64))
    n_ops = ops.height
    api_ev = np.full(trace.api.height, -1, np.int64)
    api_ev[int_column(api, "row")] = n_ops + np.arange(api.height, dtype=np.int64)

    c = ix.gpu_columns()
    launch = ix.launch_rows()
    rank_id = window_rank_id(c.rank_keys, window)
    launched = launch >= 0
    rec_mask = launched & (c.rank_id == rank_id)
    rec_mask[rec_mask] = api_ev[launch[rec_mask]] >= 0
    recs = np.flatnonzero(rec_mask)
    n_cpu = cpu.height
    rec_ev = np.full(c.size, -1, np.int64)
    rec_ev[recs] = n_cpu + np.arange(recs.size, dtype=np.int64)

    ev_kind = np.concatenate(
        [np.full(n_ops, OPERATOR), np.full(api.height, RUNTIME), np.full(recs.size, GPU_RECORD)]
    ).astype(np.int64)
    ev_row = np.concatenate([int_column(cpu, "row"), recs]).astype(np.int64)
    ev_start = np.concatenate([int_column(cpu, "start_ns"), c.start[recs]]).astype(np.int64)
    ev_end = np.concatenate([int_column(cpu, "end_ns"), c.end[recs]]).astype(np.int64)
    parts = [cpu_edges(cpu, ev_start, ev_end)]
    syncs = rank_syncs(ix, window.node, window.rank, window.start_ns, window.end_ns)
    if recs.size:
        parts += record_edges(ix, window, recs, rec_ev, api_ev, syncs)
    src, dst, weight, etype, event = (np.concatenate([p[k] for p in parts]).astype(np.int64) for k in range(5))
    weight = np.maximum(weight, 0)
    return Graph(ev_kind, ev_row, ev_start, ev_end, src, dst, weight, etype, event, sync_records=syncs.height)


Edges = tuple[I64, I64, I64, I64, I64]
"""(src, dst, weight, etype, event) of a batch of edges."""


def int_column(frame: pl.DataFrame, name: str) -> I64:
    """A column of `frame` as int64 numpy (no copy where it is one already)."""
    return frame[name].to_numpy().astype(np.int64, copy=False)


def window_rank_id(keys: pl.DataFrame, window: Window) -> int:
    """The GpuColumns rank id of the window's (node, rank), -1 when it has no GPU record."""
    hit = keys.with_row_index("id").filter((pl.col("node") == window.node) & (pl.col("rank") == window.rank))
    return int(hit["id"][0]) if hit.height else -1


def _edges(src: I64, dst: I64, weight: I64, etype: int | I64, event: I64 | int) -> Edges:
    n = src.size
    return src, dst, weight, np.broadcast_to(np.asarray(etype, np.int64), n), np.broadcast_to(np.asarray(event), n)


def record_edges(
    ix: TraceIndex, window: Window, recs: I64, rec_ev: I64, api_ev: I64, syncs: pl.DataFrame
) -> list[Edges]:
    """The edges of a window's GPU records `recs` (their spans, launch delays, gaps and stream waits) and the sync
    edges from them to the calls that waited (`rec_ev`, `api_ev`: the graph's event of each record and api row, -1
    outside it; `syncs`: critical_path_syncs.rank_syncs of the window)."""
    out = [_gpu_edges(ix, window, recs, rec_ev, api_ev, syncs)]
    none = np.zeros(0, np.int64)
    waited, call = cpu_waits(ix, syncs, recs) if syncs.height else (none, none)
    keep = api_ev[call] >= 0
    w, a = rec_ev[waited[keep]], api_ev[call[keep]]
    return [*out, _edges(2 * w + 1, 2 * a + 1, np.zeros(w.size, np.int64), SYNC, -1)]


def cpu_edges(cpu: pl.DataFrame, ev_start: I64, ev_end: I64) -> Edges:
    """Per thread, the depth-first walk of the call stack: consecutive nodes, and dependency edges between
    top-level events."""
    n = cpu.height
    if n == 0:
        return _edges(*(np.zeros(0, np.int64),) * 3, CPU, -1)
    thread, _ = dense_ids([int_column(cpu, "pid"), int_column(cpu, "tid")])
    ev = np.arange(n, dtype=np.int64)
    start, end = ev_start[:n], ev_end[:n]
    # Starts: outer (longer) first; ends: inner (later started) first; at one time, ends before starts.
    node = np.concatenate([2 * ev, 2 * ev + 1])
    ts = np.concatenate([start, end])
    is_start = np.concatenate([np.ones(n, np.int64), np.zeros(n, np.int64)])
    tie1 = np.concatenate([-end, -start])
    tie2 = np.concatenate([ev, -ev])
    order = np.lexsort((tie2, tie1, is_start, ts, np.concatenate([thread, thread])))
    seq, seq_thread, seq_ts = node[order], np.concatenate([thread, thread])[order], ts[order]
    depth_after = np.cumsum(np.where(is_start[order] == 1, 1, -1))
    pair = np.flatnonzero(seq_thread[1:] == seq_thread[:-1])
    u, v = seq[pair], seq[pair + 1]
    top_end = depth_after[pair] == 0
    blocking = cpu["blocking"].to_numpy()
    into_blocking_end = ((v & 1) == 1) & blocking[v >> 1]
    weight = np.where(top_end | into_blocking_end, 0, seq_ts[pair + 1] - seq_ts[pair])
    etype = np.where(top_end, DEPENDENCY, CPU).astype(np.int64)
    # The time between u and v lies in the innermost event open just after u: u's event after its start,
    # v's after an end -> end step, else (end -> start) the parent of u's event.
    owner = np.where(
        (u & 1) == 0, u >> 1, np.where((v & 1) == 1, v >> 1, _parents(order, seq_thread, depth_after, n)[u >> 1])
    )
    return u, v, weight, etype, np.where(top_end, -1, owner)


def _parents(order: I64, seq_thread: I64, depth_after: I64, n: int) -> I64:
    """Per CPU event: its innermost enclosing event on the thread (-1 for a top-level one), from the depth-first
    sequence: the parent is the last start before the event's start that reached the depth just above it."""
    pos = np.empty(2 * n, np.int64)
    pos[order] = np.arange(2 * n, dtype=np.int64)
    start_pos = pos[:n]  # nodes 0..n-1 of the concatenation are the starts
    level = depth_after[start_pos]  # 1 for top-level events
    key = (seq_thread[start_pos] * (int(level.max()) + 2) + level) * (2 * n + 1)
    ranked = np.argsort(key + start_pos)
    sorted_keys = (key + start_pos)[ranked]
    want = (seq_thread[start_pos] * (int(level.max()) + 2) + level - 1) * (2 * n + 1)
    at = np.searchsorted(sorted_keys, want + start_pos, side="left") - 1
    hit = (at >= 0) & (level > 1)
    found = ranked[np.maximum(at, 0)]
    same = hit & (key[found] == want)
    return np.where(same, found, -1)


def _queue_lengths(ix: TraceIndex, window: Window, rank_id: int) -> tuple[I64, I64]:
    """Per GPU record: its stream's queue length just after its launch call and just after its start (HTA:
    +1 at each launch call, -1 at each record start, per stream, in time order). Exact for the window's
    records while counting only the records that can be queued during it (launched by its end, ending after
    its start): any other record adds +1 and -1 before the window."""
    c = ix.gpu_columns()
    launch = ix.launch_rows()
    launched = np.flatnonzero((launch >= 0) & (c.rank_id == rank_id))
    all_launch_ts = ix.api_times()[0][launch[launched]]
    near = (all_launch_ts <= window.end_ns) & (c.end[launched] >= window.start_ns)
    rec = launched[near]
    launch_ts = all_launch_ts[near]
    at_launch = np.zeros(c.size, np.int64)
    at_start = np.zeros(c.size, np.int64)
    if rec.size == 0:  # every record of the window ends before it starts (clock skew)
        return at_launch, at_start
    group, _ = dense_ids([c.device[rec], c.stream[rec]])
    ts = np.concatenate([launch_ts, c.start[rec]])
    delta = np.concatenate([np.ones(rec.size, np.int64), -np.ones(rec.size, np.int64)])
    order = np.lexsort((np.arange(ts.size), ts, np.concatenate([group, group])))
    running = np.cumsum(delta[order])
    grp = np.concatenate([group, group])[order]
    heads = np.flatnonzero(np.r_[True, grp[1:] != grp[:-1]])
    base = np.repeat(running[heads] - delta[order][heads], np.diff(np.r_[heads, order.size]))
    value = np.empty(ts.size, np.int64)
    value[order] = running - base
    at_launch[rec], at_start[rec] = value[: rec.size], value[rec.size :]
    return at_launch, at_start


def _gpu_edges(ix: TraceIndex, window: Window, recs: I64, rec_ev: I64, api_ev: I64, syncs: pl.DataFrame) -> Edges:
    """Record spans, launch delays, kernel-kernel gaps and the stream-wait-event edges."""
    c = ix.gpu_columns()
    launch = ix.launch_rows()
    api_start = ix.api_times()[0]
    ql_launch, ql_start = _queue_lengths(ix, window, int(c.rank_id[recs[0]]))
    order = np.lexsort((recs, c.start[recs], c.stream[recs], c.device[recs]))
    r = recs[order]
    same = (c.stream[r][1:] == c.stream[r][:-1]) & (c.device[r][1:] == c.device[r][:-1])
    prev = np.full(r.size, -1, np.int64)
    prev[1:] = np.where(same, r[:-1], -1)
    has_prev = prev >= 0
    prev_end = np.where(has_prev, c.end[np.maximum(prev, 0)], 0)
    launch_ts = api_start[launch[r]]
    waits_on = stream_waits(ix, syncs, recs)[r]
    has_sync = (waits_on >= 0) & (rec_ev[np.maximum(waits_on, 0)] >= 0)
    sync_end = np.where(has_sync, c.end[np.maximum(waits_on, 0)], 0)
    delayed = (
        (ql_launch[r] == 1)
        & (ql_start[r] == 0)
        & (~has_prev | (prev_end < launch_ts))
        & (~has_sync | (sync_end < launch_ts))
    )
    gap = ~delayed & has_prev & (~has_sync | (sync_end < prev_end))
    me = rec_ev[r]
    call = api_ev[launch[r]]
    span = _edges(2 * me, 2 * me + 1, c.end[r] - c.start[r], GPU, me)
    delay = _edges(2 * call, 2 * me, np.where(delayed, c.start[r] - launch_ts, 0), LAUNCH, np.where(delayed, call, -1))
    p = rec_ev[prev[gap]]
    gaps = _edges(2 * p + 1, 2 * me[gap], c.start[r][gap] - prev_end[gap], KERNEL_GAP, p)
    w = rec_ev[waits_on[has_sync]]
    waits = _edges(2 * w + 1, 2 * me[has_sync], np.zeros(int(has_sync.sum()), np.int64), SYNC, -1)
    return tuple(np.concatenate([e[k] for e in (span, delay, gaps, waits)]) for k in range(5))  # type: ignore[return-value]


def event_names(ix: TraceIndex, graph: Graph, events: I64) -> tuple[list[str], list[str]]:
    """(kind, name) of events: operator / runtime / kernel / memcpy / memset and their names."""
    trace = ix.trace
    codes, names = ix.record_names()
    c = ix.gpu_columns()
    ev_kind, rows = graph.ev_kind[events], graph.ev_row[events]
    gpu = np.flatnonzero(ev_kind == GPU_RECORD)
    kind = ev_kind.copy()
    kind[gpu] = 2 + c.kind[rows[gpu]]
    labels = np.array([*EVENT_KINDS[:2], "kernel", "memcpy", "memset"], dtype=object)[kind]
    out = np.empty(events.size, dtype=object)
    for code, table in ((0, trace.ops), (1, trace.api)):
        hit = np.flatnonzero(ev_kind == code)
        if hit.size:
            out[hit] = table["name"].gather(pl.Series(rows[hit])).cast(pl.String).to_numpy()
    if gpu.size:
        out[gpu] = names.gather(pl.Series(codes[rows[gpu]])).to_numpy()
    return labels.tolist(), [str(n) for n in out.tolist()]
