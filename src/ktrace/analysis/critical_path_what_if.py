"""What-ifs of a critical path: the longest path again with changed edge weights.

A kernel name's records twice as fast (their own time: a collective's wait for a later rank stays as measured),
one synchronization's GPU -> CPU edges removed (the CPU no longer waits), or one collective's late rank on time
(critical_path_ranks.on_time_changes), for the WHAT_IF_CANDIDATES largest candidates on the path each. Every
change says how much it takes off the current path (removed_ns) and what the new longest path is: when another
chain is nearly as long, the saving is smaller than the time taken off, and the new path's largest category and
its rank say which chain that is.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.critical_path_dag import Dag
from ktrace.analysis.critical_path_graph import COLLECTIVE, GPU, GPU_RECORD, SYNC, Graph, event_names
from ktrace.analysis.critical_path_ranks import JobGraph, on_time_changes, window_of
from ktrace.analysis.index import TraceIndex

I64 = npt.NDArray[np.int64]
COMPOSITION = ("cpu", "launch_delay", "gpu_gap", "gpu_compute", "communication", "memory", "sync")
"""Categories of path time: CPU operators and runtime calls; launch delays (a kernel waiting for its launch
call); gaps between consecutive records of a stream; kernels; communication kernels; memcpy/memset; and
synchronization edges (GPU -> CPU waits and event waits: weightless, counted in `edges`)."""
EdgeKinds = npt.NDArray[np.int8]
"""Per edge of a graph: the COMPOSITION code of its time, -1 for weightless dependency edges."""
WHAT_IF_CANDIDATES = 3
WHAT_IF_SPEEDUP = 2.0


def what_if(
    ix: TraceIndex, graph: Graph, dag: Dag, path: I64, length: int, job: JobGraph | None, kinds: EdgeKinds
) -> pl.DataFrame:
    """CriticalPath.what_if: each change's new longest path (`kinds`: per edge its COMPOSITION code, -1 for none).

    Each change's weights are judged as soon as they are built and let go: nine copies of a 256-rank job's edge
    weights held at once were ~130 MB of the rank-by-rank client's peak."""
    rows: list[tuple[object, ...]] = []

    def judge(change: str, target: str, weight: I64) -> None:
        rows.append((change, target, *_outcome(graph, dag, path, weight, kinds, job)))

    codes, names = ix.record_names()
    # A record's own time: a collective's wait for a later rank does not shrink with a faster kernel (and the
    # waits stay as measured: a faster late rank's saving is a lower bound), its transfer does.
    timed = (graph.etype == GPU) | (graph.etype == COLLECTIVE)
    own_path = _own(graph, path)
    on_gpu = timed[path] & (own_path > 0)
    rec = graph.ev_row[graph.event[path[on_gpu]]]
    per_code: dict[int, int] = {}
    for code, w in zip(codes[rec].tolist(), own_path[on_gpu].tolist(), strict=True):
        per_code[code] = per_code.get(code, 0) + w
    all_gpu = np.flatnonzero(timed)
    all_codes = codes[graph.ev_row[graph.event[all_gpu]]]
    own_gpu = _own(graph, all_gpu)  # the timed edges' only: not a copy of every edge's weight
    for code, _ in sorted(per_code.items(), key=lambda kv: -kv[1])[:WHAT_IF_CANDIDATES]:
        weight = graph.weight.copy()
        found = all_codes == code
        hit, own = all_gpu[found], own_gpu[found]
        weight[hit] -= own - (own / WHAT_IF_SPEEDUP).astype(np.int64)
        judge(f"{WHAT_IF_SPEEDUP:g}x faster", str(names[code]), weight)
    syncs = path[graph.etype[path] == SYNC]
    sync_calls = [int(d >> 1) for d in graph.dst[syncs] if graph.ev_kind[d >> 1] != GPU_RECORD]
    _, call_names = event_names(ix, graph, np.asarray(sync_calls, np.int64))
    sync_edges = np.flatnonzero(graph.etype == SYNC)
    for call, name in list(zip(sync_calls, call_names, strict=True))[:WHAT_IF_CANDIDATES]:
        weight = graph.weight.copy()
        weight[sync_edges[(graph.dst[sync_edges] >> 1) == call]] = -1
        judge("removed", name, weight)
    for target, weight in [] if job is None else on_time_changes(job, path, WHAT_IF_CANDIDATES):
        judge("on time", target, weight)
    frame = pl.DataFrame(rows, schema=_WHAT_IF_SCHEMA, orient="row")
    return frame.with_columns(saved_ns=length - pl.col("length_ns")).sort("saved_ns", descending=True)


def _own(graph: Graph, edges: I64) -> I64:
    """The edges' own time: their weight without a collective's wait for a later rank."""
    return graph.weight[edges] if graph.wait_ns is None else graph.weight[edges] - graph.wait_ns[edges]


_WHAT_IF_SCHEMA = {
    "change": pl.String,
    "target": pl.String,
    "length_ns": pl.Int64,
    "removed_ns": pl.Int64,
    "next_category": pl.String,
    "next_node": pl.String,
    "next_rank": pl.Int64,
}


def _outcome(
    graph: Graph, dag: Dag, path: I64, weight: I64, kinds: EdgeKinds, job: JobGraph | None
) -> tuple[int, int, str, str | None, int | None]:
    """A what-if's new longest path: its length, the time the change takes off the current path, the new path's
    largest COMPOSITION category, and the node/rank it ends on (joined ranks only)."""
    dist, pred = dag.longest(weight)
    new_path = dag.path(dist, pred)
    removed = int(np.maximum(graph.weight[path] - np.maximum(weight[path], 0), 0).sum())
    per = [int(np.maximum(weight[new_path], 0)[kinds[new_path] == i].sum()) for i in range(len(COMPOSITION))]
    category = COMPOSITION[int(np.argmax(per))] if new_path.size else ""
    at = window_of(job, int(graph.dst[new_path[-1]])) if job is not None and new_path.size else None
    return (
        int(dist.max()) if dist.size else 0,
        removed,
        category,
        None if at is None else at.node,
        None if at is None else at.rank,
    )
