"""The critical path across ranks: one step's dependency graphs of every rank, joined where NCCL makes them wait
for each other.

**Whole job, not per rank.** On a trace with more than one rank (node, rank) the critical path of a step is the
job's: the step's window is chosen on the first rank as before (critical_path.choose_window), every other rank
contributes its own window of the same step (the CPU range of the same name whose start is nearest; failing
that, the whole rank for a whole-trace path), each window gets its graph (critical_path_graph.build_graph) and
the graphs are joined by collective edges. A collective (a communication kernel, `breakdown.communication_names`)
cannot finish on any rank before the last rank has entered it: for the i-th collective of a kernel name (matched
across ranks by order, model.clock_matching.order_keys, as clock alignment matches collective ends), the
latest-starting rank's record start gets an edge to every other rank's record end, weighted by the time from
that start to that end (the transfer once everyone was there). The path then runs through whichever explains the
end better: the late rank's own chain up to its late start (the path crosses ranks: "rank 3 was late into
all_reduce #17 because of kernel X"), or the waiting rank's chain plus its wait. On a tie (both ranks busy all
the way) the crossing wins (a lexicographic bonus in the longest path; the length is unchanged).

A waiting rank's collective span from its start to the late rank's start is time spent **waiting for another
rank**: when that span is on the path, its share goes to the composition's `rank_wait` category instead of
`communication` (the late rank's recorded work did not explain the wait: its CPU was idle, or outside the trace).

What-ifs (critical_path) keep the measured waits when a kernel gets faster, so a faster late rank's saving is a
lower bound; "on time" (on_time_changes) removes every rank's wait for one collective whose wait is on the path,
as if its late rank had entered it with the others.

Per rank: `critical_path(..., across_ranks=False)` keeps the one-rank graph of the chosen window (the result on a
single-rank trace, which this module never changes).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.breakdown import communication_names
from ktrace.analysis.critical_path_graph import COLLECTIVE, GPU, GPU_RECORD, KERNEL_GAP, Graph, Window, build_graph
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.nearest_ranges import nearest_per_rank
from ktrace.analysis.steps import detect_steps
from ktrace.model.clock_matching import order_keys
from ktrace.model.trace import Trace

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class JobGraph:
    """Every rank's graph of one step, as one Graph (events and nodes renumbered), and what ties them."""

    graph: Graph
    windows: list[Window]
    collective_keys: dict[int, str]
    """Event id -> "kernel name#i" of every collective event that has a partner on another rank."""
    late_of: dict[int, int]
    """Event id of a collective that waited -> the event of the rank that started it last."""


def window_of(job: JobGraph, node: int) -> Window:
    """The window (rank) of a node of the job's graph."""
    assert job.graph.ev_window is not None
    return job.windows[int(job.graph.ev_window[node >> 1])]


def rank_windows(
    ix: TraceIndex, first: Window, scope: str, annotation: str | None, pattern: str | None
) -> list[Window]:
    """`first`, then the window of the same step on every other rank with CPU events, in (node, rank) order: the
    range of the same name whose start is nearest, else (step numbers differ between ranks) the rank's range
    overlapping `first` most; the rank's whole span when scope is "trace". A rank without either is left out."""
    spans = rank_spans(ix.trace, index=ix)
    if spans.height < 2:
        return [first]
    ranges = None if scope == "trace" else _ranges(ix, scope, annotation, pattern)
    return windows_of_ranks(first, scope, ranges, spans)


def windows_of_ranks(first: Window, scope: str, ranges: pl.DataFrame | None, spans: pl.DataFrame) -> list[Window]:
    """rank_windows from its inputs: `ranges` (node, rank, name, start_ns, end_ns: every rank's steps, or its
    CPU ranges holding the annotation; None for scope "trace") and `spans` (rank_spans)."""
    name = None if ranges is None else range_name(ranges, first)
    if ranges is not None and scope == "annotation" and name is not None:
        ranges = ranges.filter(pl.col("name").str.contains(name, literal=True))
    out = [first]
    nearest = {} if ranges is None else nearest_per_rank(ranges, name, first)  # all ranks in one query
    for node, rank, start, end in spans.iter_rows():
        if (str(node), int(rank)) == (first.node, first.rank):
            continue
        if ranges is None:
            out.append(Window(str(node), int(rank), int(start), int(end)))
            continue
        found = nearest.get((str(node), int(rank)))  # a rank without ranges has no window
        if found is not None:
            out.append(found)
    return out


def rank_spans(trace: Trace, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """node, rank, start_ns, end_ns of every rank's CPU events (ops and api rows), sorted by node and rank.

    Each table is reduced per rank id (the index's table_rank_ids, which the launch rows and utilization share)
    before any node is a string: casting the node of every row first held ~100 B a row (+1.3 GB on the 13 M
    operator rows of a 20 M-event trace)."""
    ix = TraceIndex.of(trace, index)
    parts = []
    for name in ("ops", "api"):
        t = trace.table(name)
        if not t.height:
            continue
        keys, ids = ix.table_rank_ids(name)
        spans = (
            t.select("start_ns", "end_ns")
            .with_columns(id=pl.Series(ids))
            .group_by("id")
            .agg(pl.col("start_ns").min(), pl.col("end_ns").max())
            .sort("id")
        )
        parts.append(
            pl.concat([keys.select("node", pl.col("rank").cast(pl.Int64)), spans.drop("id")], how="horizontal")
        )
    if not parts:
        return pl.DataFrame()
    return (
        pl.concat(parts)
        .group_by("node", "rank")
        .agg(pl.col("start_ns").min(), pl.col("end_ns").max())
        .sort("node", "rank")
    )


def _ranges(ix: TraceIndex, scope: str, annotation: str | None, pattern: str | None) -> pl.DataFrame:
    """node, rank, name, start_ns, end_ns of the candidate ranges: steps, or CPU ranges holding the annotation."""
    if scope == "step":
        frame = detect_steps(ix.trace, pattern=pattern, index=ix)
    else:
        text = annotation or ""
        frame = ix.trace.ranges.filter(
            ~pl.col("on_gpu") & pl.col("name").cast(pl.String).str.contains(text, literal=True)
        )
    return range_rows(frame)


def range_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """node (String), rank (Int64), name (String), start_ns, end_ns of a frame of ranges (windows_of_ranks' input)."""
    return frame.select(
        pl.col("node").cast(pl.String),
        pl.col("rank").cast(pl.Int64),
        pl.col("name").cast(pl.String),
        "start_ns",
        "end_ns",
    )


def range_name(ranges: pl.DataFrame, first: Window) -> str | None:
    """The name of the range that is `first` (None: `first` is no range of `ranges`, e.g. a launch window)."""
    hit = ranges.filter(
        (pl.col("node") == first.node)
        & (pl.col("rank") == first.rank)
        & (pl.col("start_ns") == first.start_ns)
        & (pl.col("end_ns") == first.end_ns)
    )
    return str(hit["name"][0]) if hit.height else None


def join_ranks(ix: TraceIndex, windows: list[Window]) -> JobGraph:
    """The windows' graphs as one, with the collective edges and the waits (see the module docstring)."""
    graphs = [build_graph(ix, w) for w in windows]
    arrays = {name: [getattr(g, name) for g in graphs] for name in GRAPH_ARRAYS}
    return join_graph_arrays(arrays, sum(g.sync_records for g in graphs), windows, collective_keys(ix))


GRAPH_ARRAYS = ("ev_kind", "ev_row", "ev_start", "ev_end", "src", "dst", "weight", "etype", "event")
"""The arrays of a Graph of one window (critical_path_graph.Graph)."""
Arrays = Mapping[str, Sequence[npt.NDArray[np.signedinteger[Any]]]]
"""Per GRAPH_ARRAYS name, each window's array (any integer dtype holding it exactly)."""


def join_graph_arrays(
    arrays: Arrays, sync_records: int, windows: list[Window], keys: tuple[I64, list[str]]
) -> JobGraph:
    """join_ranks of the windows' graphs given as their arrays (`arrays[name][i]`: window i's; ev_row into the
    trace of `keys`, collective_keys' of the GPU records). Each array is widened to int64 as it is joined: a
    client holding every rank's graph in narrow dtypes (fleet.critical_path_map) never holds them all in int64
    twice."""
    sizes = np.array([a.size for a in arrays["ev_kind"]], np.int64)
    edges = np.array([a.size for a in arrays["src"]], np.int64)
    offset = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)

    def cat(name: str, *more: I64) -> I64:
        return np.concatenate([*arrays[name], *more]).astype(np.int64, copy=False)

    ev_kind, ev_row, ev_start, ev_end = cat("ev_kind"), cat("ev_row"), cat("ev_start"), cat("ev_end")
    ev_window = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    ev, late, keyed = _collective_partners(keys, ev_kind, ev_row, ev_start, ev_window)
    t_end, s_late = ev_end[ev], ev_start[late]
    forward = s_late <= t_end
    ev, late = ev[forward], late[forward]
    shift = np.concatenate([np.repeat(offset, edges), np.zeros(ev.size, np.int64)])
    src = cat("src", 2 * late) + 2 * shift
    dst = cat("dst", 2 * ev + 1) + 2 * shift
    event = cat("event", ev)
    event = np.where(event >= 0, event + shift, -1)
    del shift
    weight = cat("weight", ev_end[ev] - ev_start[late])
    etype = cat("etype", np.full(ev.size, COLLECTIVE, np.int64))
    wait_of = np.zeros(ev_kind.size, np.int64)
    wait_of[ev] = np.clip(ev_start[late] - ev_start[ev], 0, ev_end[ev] - ev_start[ev])
    gpu_edges = np.flatnonzero(etype == GPU)
    wait_ns = np.zeros(src.size, np.int64)
    wait_ns[gpu_edges] = wait_of[event[gpu_edges]]
    graph = Graph(ev_kind, ev_row, ev_start, ev_end, src, dst, weight, etype, event, sync_records, ev_window, wait_ns)
    return JobGraph(graph, windows, keyed, dict(zip(ev.tolist(), late.tolist(), strict=True)))


def _collective_partners(
    key_of: tuple[I64, list[str]], ev_kind: I64, ev_row: I64, ev_start: I64, ev_window: I64
) -> tuple[I64, I64, dict[int, str]]:
    """(event, the latest-starting event of its collective) for every collective event of the graph that did
    not start last, and the key of every collective event with a partner on another rank (`key_of`:
    collective_keys)."""
    gpu = np.flatnonzero(ev_kind == GPU_RECORD)
    code = key_of[0][ev_row[gpu]] if gpu.size else np.zeros(0, np.int64)
    ev, code = gpu[code >= 0], code[code >= 0]
    empty = np.zeros(0, np.int64)
    if ev.size == 0:
        return empty, empty, {}
    order = np.lexsort((ev_window[ev], ev_start[ev], code))
    ev, code = ev[order], code[order]
    head = np.r_[True, code[1:] != code[:-1]]
    group = np.cumsum(head) - 1
    last = np.r_[np.flatnonzero(head)[1:], ev.size] - 1  # per group: its latest start (sorted by start)
    count = np.diff(np.r_[np.flatnonzero(head), ev.size])
    latest = ev[last][group]
    shared = count[group] >= 2
    names = key_of[1]
    keys = {int(e): names[int(k)] for e, k in zip(ev[shared].tolist(), code[shared].tolist(), strict=True)}
    waiting = shared & (ev != latest)
    return ev[waiting], latest[waiting], keys


def collective_keys(ix: TraceIndex) -> tuple[I64, list[str]]:
    """Per GPU record (index order): its collective's key id (-1 for a record that is not a communication
    kernel), and the keys ("kernel name#i", i from 0 in each rank's order of that kernel)."""
    c = ix.gpu_columns()
    codes, names = ix.record_names()
    out = np.full(c.size, -1, np.int64)
    rec = communication_records(ix)
    if rec.size == 0:
        return out, []
    ranks = c.rank_keys.with_row_index("rank_id").select(
        pl.col("rank_id").cast(pl.Int64), pl.col("node").cast(pl.String), pl.col("rank").cast(pl.Int64)
    )
    frame = pl.DataFrame({"rank_id": c.rank_id[rec], "name": names.gather(pl.Series(codes[rec])), "end_ns": c.end[rec]})
    frame = frame.join(ranks, on="rank_id", how="left", maintain_order="left")
    keyed, _ = order_keys(frame.select("node", "rank", "name", "end_ns"))
    ids, inverse = np.unique(keyed["key"].to_numpy().astype(str), return_inverse=True)
    out[rec] = inverse.astype(np.int64)
    return out, [str(k) for k in ids.tolist()]


def communication_records(ix: TraceIndex) -> I64:
    """The GPU records (index order ids) that are communication kernels, in each rank's order: by rank, start,
    then id (the order collective_keys numbers them in). Kernels are the first records: their name codes
    (kernel_name_codes) say which, without the memory records' names (record_names)."""
    c = ix.gpu_columns()
    codes, names = ix.kernel_name_codes()
    comm = set(communication_names(ix.trace, index=ix))
    is_comm = np.array([n in comm for n in names] + [False], bool)  # code -1 (no name): the last entry
    rec = np.flatnonzero(is_comm[codes]).astype(np.int64)
    return rec[np.lexsort((rec, c.start[rec], c.rank_id[rec]))]


def crossings(job: JobGraph, path: I64, labels: tuple[list[str], list[str]]) -> pl.DataFrame:
    """Where the path meets another rank, in path order. `on_path` "crossed": a collective edge (the path
    passes to the late rank), with the largest item of the path on the late rank before it got there
    (cause_kind, cause_name, cause_ns: its time on the path since the previous crossing); "waited": a
    collective span whose wait for the late rank is on the path (rank_wait; the late rank's recorded work does
    not explain the wait, so no cause). Both: the collective, late and waiting node/rank, waited_ns.

    `labels`: (kind, name) of every path edge's event ("" for weightless edges)."""
    g = job.graph
    assert g.ev_window is not None and g.wait_ns is not None
    rows = []
    best: tuple[int, str, str] = (0, "", "")
    for i, e in enumerate(path.tolist()):
        crossed = g.etype[e] == COLLECTIVE
        if crossed:
            late_ev, wait_ev = int(g.src[e]) >> 1, int(g.dst[e]) >> 1
        elif g.wait_ns[e] > 0:
            wait_ev = int(g.event[e])
            late_ev = job.late_of[wait_ev]
        else:
            if g.event[e] >= 0 and g.weight[e] > best[0]:
                best = (int(g.weight[e]), labels[0][i], labels[1][i])
            continue
        late, waiting = job.windows[int(g.ev_window[late_ev])], job.windows[int(g.ev_window[wait_ev])]
        short = _collective_label(job, wait_ev)
        waited = max(int(g.ev_start[late_ev] - g.ev_start[wait_ev]), 0)
        cause = best if crossed else (0, "", "")
        rows.append(
            ("crossed" if crossed else "waited", short, late.node, late.rank)
            + (waiting.node, waiting.rank, waited, cause[1], cause[2], cause[0])
        )
        best = (0, "", "")
    schema = {
        "on_path": pl.String,
        "collective": pl.String,
        "late_node": pl.String,
        "late_rank": pl.Int64,
        "waiting_node": pl.String,
        "waiting_rank": pl.Int64,
        "waited_ns": pl.Int64,
        "cause_kind": pl.String,
        "cause_name": pl.String,
        "cause_ns": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def unaligned_hosts(trace: Trace, windows: list[Window]) -> int:
    """The number of hosts the windows span when their clocks are not aligned (0: one host, or aligned): a
    collective's latest start is then only as right as the hosts' clocks agree."""
    hosts = {w.node for w in windows}
    alignment = trace.meta.clock_alignment
    if len(hosts) < 2:
        return 0
    if alignment is None or alignment.method == "none" or (alignment.shifts and not alignment.applied):
        return len(hosts)
    return 0


def _collective_label(job: JobGraph, event: int) -> str:
    """ "kernel name #i" of a collective event, the name without its signature (views cut it)."""
    name, _, number = job.collective_keys.get(event, "#").rpartition("#")
    name = name.partition("(")[0] or name  # a kernel's signature says nothing here
    return f"{name} #{number}"


def on_time_changes(job: JobGraph, path: I64, limit: int) -> Iterator[tuple[str, I64]]:
    """(target, edge weights) for the `limit` collectives with the largest waits on the path: every rank's wait
    for that collective removed (target: "node/rank into <collective>", the late rank). One at a time: each is a
    copy of every edge's weight."""
    g = job.graph
    assert g.wait_ns is not None
    waits = path[(g.etype[path] == GPU) & (g.wait_ns[path] > 0)]
    waits = waits[np.argsort(-g.wait_ns[waits], kind="stable")][:limit]
    for e in waits.tolist():
        event = int(g.event[e])
        key = job.collective_keys[event]
        events = np.fromiter((ev for ev, k in job.collective_keys.items() if k == key), np.int64)
        hit = (g.etype == GPU) & np.isin(g.event, events)  # the edges of every rank's instance of the collective
        weight = g.weight.copy()
        weight[hit] -= g.wait_ns[hit]
        weight -= _idle_during_waits(g, np.flatnonzero(hit & (g.wait_ns > 0)))
        assert g.ev_window is not None
        late = job.windows[int(g.ev_window[job.late_of[event]])]
        yield f"{late.node}/{late.rank} into {_collective_label(job, event)}", weight


def _idle_during_waits(g: Graph, waits: I64) -> I64:
    """Per edge: the ns of a kernel gap of a waiting rank that lies in one of `waits` (collective edges' spans
    spent waiting for a later rank). The rank's other streams sat idle while their next record waited for the
    collective (a stream wait on its event), so the gap goes with the wait: a measured gap left in place would
    keep the wait on the path under another name."""
    assert g.ev_window is not None and g.wait_ns is not None
    out = np.zeros(g.src.size, np.int64)
    gaps = np.flatnonzero(g.etype == KERNEL_GAP)
    if gaps.size == 0 or waits.size == 0:
        return out
    ts = g.node_ts()
    lo, hi, window = ts[g.src[gaps]], ts[g.dst[gaps]], g.ev_window[g.dst[gaps] >> 1]
    for e in waits.tolist():
        event = int(g.event[e])
        start = int(g.ev_start[event])
        overlap = np.minimum(hi, start + int(g.wait_ns[e])) - np.maximum(lo, start)
        out[gaps] += np.where(window == g.ev_window[event], np.maximum(overlap, 0), 0)
    return np.minimum(out, g.weight)
