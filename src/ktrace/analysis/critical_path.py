"""The critical path of a step: the longest chain of dependent CPU and GPU work, what it is made of, and what
shortening it would gain.

The graph is critical_path_graph's (HTA's model). Its longest path (weights in ns; a topological order and
one pass, analysis._kernels.longest_path) is the critical path; each of its edges is classified
(COMPOSITION) and attributed to an event (operator, runtime call or GPU record). What-ifs recompute the
longest path with changed weights: a kernel name's records twice as fast, or one synchronization's GPU -> CPU
edges removed (the CPU no longer waits), or a late rank on time (critical_path_what_if).

Scope: by default the median-duration step of the first rank with steps (analysis.steps), else the whole
trace of the first rank; or the `instance`-th CPU range whose name contains `annotation` (HTA's
annotation/instance_id). On a trace of several ranks the path is the whole job's: the same step on every rank,
the ranks' graphs joined by their collectives (critical_path_ranks, which says how; across_ranks=False: the
chosen rank alone).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.breakdown import communication_names
from ktrace.analysis.critical_path_dag import acyclic
from ktrace.analysis.critical_path_graph import (
    COLLECTIVE,
    CPU,
    EDGE_TYPES,
    GPU,
    GPU_RECORD,
    KERNEL_GAP,
    LAUNCH,
    SYNC,
    Graph,
    Window,
    build_graph,
    event_names,
    window_rank_id,
)
from ktrace.analysis.critical_path_ranks import (
    JobGraph,
    crossings,
    join_ranks,
    rank_windows,
    unaligned_hosts,
    window_of,
)
from ktrace.analysis.critical_path_what_if import COMPOSITION, EdgeKinds, what_if
from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.names import short_kernel_name
from ktrace.analysis.op_attribution import IS_OPERATOR
from ktrace.analysis.steps import detect_steps
from ktrace.model.trace import Trace

I64 = npt.NDArray[np.int64]
RANK_WAIT = "rank_wait"
"""The composition's last category on a path joining ranks: collective time spent waiting for another rank."""
TOP_ITEMS = 10
LABEL_CHARS = 60
"""A step's name in the label is shortened to this many characters (inferred steps are named after a kernel)."""
_RESULT = Slot["CriticalPath | None"]("critical_path")


@dataclass(frozen=True)
class CriticalPath:
    """The critical path of one window of one rank (see the module docstring)."""

    scope: str
    """"step" (the median step), "annotation" or "trace"."""
    label: str
    """What the window is, for people: the step's name and how it was chosen, the annotation, or "whole trace"."""
    node: str
    rank: int
    start_ns: int
    end_ns: int
    """The time the path's graph covers: the window (on several ranks, from the first window's start to the last
    one's end), stretched to the end of the GPU work launched in it (a step's kernels often run after its CPU
    range ends: a path through them is longer than the range itself)."""
    length_ns: int
    """Sum of the path's edge weights, at most end_ns - start_ns: every edge weighs at most the time between its
    nodes, and a path without backward_edges runs forward in time."""
    graph_nodes: int
    graph_edges: int
    path_nodes: int
    path_events: int
    composition: pl.DataFrame
    """category (COMPOSITION order), ns, share (of length_ns), edges."""
    items: pl.DataFrame
    """The operators, runtime calls and GPU records on the path by name: kind (operator, runtime, kernel,
    memcpy, memset), name, ns (their own time on the path: CPU time, a record's run, a collective's without its
    wait for a later rank; launch delays and gaps between records are only in the composition, so the kernels'
    ns add up to at most its gpu_compute + communication), edges; top TOP_ITEMS of each of CPU and GPU, by ns."""
    what_if: pl.DataFrame
    """change ("2x faster" / "removed" / "on time"), target (kernel name, sync call, or late rank into a collective),
    length_ns (new path length), removed_ns (the time the change takes off the current path), next_category (the
    new longest path's largest COMPOSITION category), next_node / next_rank (where it ends, joined ranks only, else
    null), saved_ns (by how much the path shortens: less than removed_ns when another chain, e.g. work that ran
    while a collective waited, is nearly as long); largest saving first."""
    path_records: I64
    """GPU records (index order) on the path."""
    path_segments: pl.DataFrame
    """The path's edges in order: start_ns, end_ns (times of its two nodes), type (EDGE_TYPES), weight_ns."""
    sync_records: int
    """Sync records of the rank around the window (none: the path cannot cross from the GPU to the CPU)."""
    dropped_edges: int = 0
    """Launch/sync edges dropped because they closed a cycle (timestamps going back: clock skew, ties)."""
    ranks: int = 1
    """Ranks whose graphs the path was chosen from (> 1: joined by their collectives; node/rank then name the
    rank where the path ends, start_ns/end_ns span every rank's window)."""
    crossings: pl.DataFrame | None = None
    """Joined ranks only: critical_path_ranks.crossings, where the path passes to a late rank."""
    unaligned_hosts: int = 0
    """Hosts of the joined ranks when their clocks are not aligned (critical_path_ranks.unaligned_hosts)."""
    beyond_window_ns: int = 0
    """How much of start_ns..end_ns lies outside the chosen window(s): the GPU work launched in the window that
    ran after it (or, with clock skew, began before it)."""

    def backward_edges(self) -> int:
        """Edges of the path whose end node is earlier than its start (clock skew): only with them can the path be
        longer than end_ns - start_ns."""
        seg = self.path_segments
        return int((seg["end_ns"] < seg["start_ns"]).sum())


def critical_path(
    trace: Trace,
    *,
    annotation: str | None = None,
    instance: int = 0,
    steps_pattern: str | None = None,
    index: TraceIndex | None = None,
    across_ranks: bool = True,
) -> CriticalPath | None:
    """The critical path of the median step (or of the annotation instance, or of the whole trace).

    Args:
        trace: the trace.
        annotation: analyse the `instance`-th CPU range (by start) whose name contains this text (HTA's
            annotation / instance_id) instead of the median step.
        instance: which of those ranges, from 0.
        steps_pattern: regex of the step ranges (steps.detect_steps), as the summary's --steps-pattern.
        index: the trace's TraceIndex (the summary, the rules and the TUI share one result).
        across_ranks: on a trace of several ranks, the whole job's path (False: the chosen rank's alone).

    Returns:
        None when the window has no CPU events (nothing to build a graph from), when the annotation has no
        such instance, or when clock skew closes a dependency cycle that cannot be broken.
    """
    ix = TraceIndex.of(trace, index)
    key = (annotation, instance, steps_pattern, across_ranks)
    return ix.get(_RESULT, lambda: _critical_path(ix, annotation, instance, steps_pattern, across_ranks), *key)


def _critical_path(
    ix: TraceIndex, annotation: str | None, instance: int, pattern: str | None, across: bool
) -> CriticalPath | None:
    found = choose_window(ix, annotation, instance, pattern)
    if found is None:
        return None
    window, scope, label = found
    windows = rank_windows(ix, window, scope, annotation, pattern) if across else [window]
    return path_of_windows(ix, windows, scope, label)


def path_of_windows(
    ix: TraceIndex, windows: list[Window], scope: str, label: str, built: JobGraph | Graph | None = None
) -> CriticalPath | None:
    """The critical path of chosen windows (the first is the chosen rank's; several: joined by their collectives).

    `built`: the windows' graph built rank by rank, when the trace holds only their events
    (fleet.critical_path_map): their JobGraph (critical_path_ranks.join_ranks) for several windows, the Graph of
    one."""
    if built is None:
        job = join_ranks(ix, windows) if len(windows) > 1 else None
        graph = build_graph(ix, windows[0]) if job is None else job.graph
    else:
        job = built if isinstance(built, JobGraph) else None
        graph = built.graph if isinstance(built, JobGraph) else built
    if graph.src.size == 0:
        return None
    found_dag = acyclic(graph)
    if found_dag is None:
        return None
    graph, dag, dropped = found_dag
    dist, pred = dag.longest(graph.weight)
    path = dag.path(dist, pred)
    length = int(dist.max()) if dist.size else 0
    del dist, pred  # a node's each: 16 MB at a million nodes, not held through the what-ifs' own
    kinds = _record_kinds(ix, graph)
    events = np.unique(np.concatenate([graph.src[path], graph.dst[path]]) >> 1) if path.size else np.zeros(0, np.int64)
    at = windows[0] if job is None or not path.size else window_of(job, int(graph.dst[path[-1]]))
    window_start, window_end = min(w.start_ns for w in windows), max(w.end_ns for w in windows)
    start, end = min(window_start, int(graph.ev_start.min())), max(window_end, int(graph.ev_end.max()))
    gpu_events = events[graph.ev_kind[events] == GPU_RECORD]
    return CriticalPath(
        scope=scope,
        label=label if job is None else f"{label} on {len(windows)} ranks",
        node=at.node,
        rank=at.rank,
        start_ns=start,
        end_ns=end,
        length_ns=length,
        graph_nodes=graph.n_nodes,
        graph_edges=int(graph.src.size),
        path_nodes=int(path.size + 1) if path.size else 0,
        path_events=int(events.size),
        composition=_composition(graph, path, kinds, length),
        items=_items(ix, graph, path),
        what_if=what_if(ix, graph, dag, path, length, job, kinds),
        path_records=np.sort(graph.ev_row[gpu_events]),
        path_segments=_segments(graph, path, windows, job),
        sync_records=graph.sync_records,
        dropped_edges=dropped,
        ranks=len(windows),
        crossings=None if job is None else crossings(job, path, _path_labels(ix, graph, path)),
        unaligned_hosts=unaligned_hosts(ix.trace, windows),
        beyond_window_ns=(window_start - start) + (end - window_end),
    )


def _segments(graph: Graph, path: I64, windows: list[Window], job: JobGraph | None) -> pl.DataFrame:
    """The path's edges: start_ns, end_ns, type, weight_ns, and the node/rank of the edge's end."""
    ts = graph.node_ts()
    at = [windows[0]] * path.size if job is None else [window_of(job, int(d)) for d in graph.dst[path].tolist()]
    return pl.DataFrame(
        {
            "start_ns": ts[graph.src[path]],
            "end_ns": ts[graph.dst[path]],
            "type": [EDGE_TYPES[t] for t in graph.etype[path]],
            "weight_ns": graph.weight[path],
            "node": [w.node for w in at],
            "rank": [w.rank for w in at],
        },
        schema={
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "type": pl.String,
            "weight_ns": pl.Int64,
            "node": pl.String,
            "rank": pl.Int64,
        },
    )


def _path_labels(ix: TraceIndex, graph: Graph, path: I64) -> tuple[list[str], list[str]]:
    """(kind, name) of each path edge's event ("" for weightless edges)."""
    ev = graph.event[path]
    kinds, names = [""] * path.size, [""] * path.size
    timed = np.flatnonzero(ev >= 0)
    for i, k, n in zip(timed.tolist(), *event_names(ix, graph, ev[timed]), strict=True):
        kinds[i], names[i] = k, n
    return kinds, names


def choose_window(
    ix: TraceIndex, annotation: str | None, instance: int, steps_pattern: str | None = None
) -> tuple[Window, str, str] | None:
    """(window, scope, label): the annotation's instance, else the median step of the first rank with steps,
    else the whole first rank."""
    trace = ix.trace
    if annotation is not None:
        ranges = trace.ranges.filter(
            ~pl.col("on_gpu") & pl.col("name").cast(pl.String).str.contains(annotation, literal=True)
        )
        ranges = ranges.sort("node", "rank", "start_ns")
        if instance >= ranges.height:
            return None
        r = ranges.row(instance, named=True)
        return (
            Window(str(r["node"]), int(r["rank"]), r["start_ns"], r["end_ns"]),
            "annotation",
            f"{annotation} #{instance}",
        )
    steps = detect_steps(trace, pattern=steps_pattern, index=ix)
    if steps.height:
        return median_step(ix, steps)
    operators = trace.ops.filter(IS_OPERATOR)  # the graph's CPU events: operators and runtime calls
    spans = [t.select("node", "rank", "start_ns", "end_ns") for t in (operators, trace.api) if t.height]
    if not spans:
        return None
    cpu = pl.concat([s.with_columns(pl.col("node").cast(pl.String)) for s in spans]).sort("node", "rank")
    node, rank = cpu.row(0)[:2]
    mine = cpu.filter((pl.col("node") == node) & (pl.col("rank") == rank))
    start, end = mine["start_ns"].min(), mine["end_ns"].max()
    return Window(str(node), int(rank), int(start), int(end)), "trace", "whole trace"  # type: ignore[arg-type]


def median_step(ix: TraceIndex, steps: pl.DataFrame) -> tuple[Window, str, str]:
    """(window, "step", label) of the median step of the first rank in `steps` (analysis.steps.detect_steps
    rows, not empty): an inferred (periodic) step's window is its launch_window."""
    first = steps.row(0, named=True)
    mine = steps.filter((pl.col("node") == first["node"]) & (pl.col("rank") == first["rank"]))
    mine = mine.with_row_index("i").sort("duration_ns", "i")
    s = mine.row((mine.height - 1) // 2, named=True)
    chosen = "the only step" if mine.height == 1 else f"median of {mine.height} steps"
    label = f"{short_kernel_name(s['name'], LABEL_CHARS)} ({chosen})"
    window = Window(str(s["node"]), int(s["rank"]), s["start_ns"], s["end_ns"])
    return (launch_window(ix, window, s["name"]) if s["source"] == "periodic" else window), "step", label


def launch_window(ix: TraceIndex, step: Window, marker: str) -> Window:
    """An inferred step's window on the CPU: from the launch of the `marker` record that starts it to just before
    the launch of the one that ends it. The step is in GPU time (between two runs of the marker), and a GPU that runs behind
    its CPU runs a step's kernels long after the calls that launched them: the graph takes the calls in the
    window. The GPU window itself when either record has no launch call."""
    c = ix.gpu_columns()
    codes, names = ix.record_names()
    listed = names.to_list()
    code = listed.index(marker) if marker in listed else -1
    rank = window_rank_id(c.rank_keys, step)
    launch = ix.launch_rows()
    ends = []
    for t in (step.start_ns, step.end_ns):
        hit = np.flatnonzero((c.rank_id == rank) & (codes == code) & (c.start == t) & (c.kind == 0))
        if hit.size == 0 or launch[hit[0]] < 0:
            return step
        ends.append(int(ix.api_times()[0][launch[hit[0]]]))
    return Window(step.node, step.rank, ends[0], ends[1] - 1) if ends[0] < ends[1] else step  # the next one's: out


def _record_kinds(ix: TraceIndex, graph: Graph) -> EdgeKinds:
    """Per edge: the COMPOSITION code of its time (-1 for weightless dependency edges)."""
    c = ix.gpu_columns()
    comm = set(communication_names(ix.trace, index=ix))
    codes, names = ix.record_names()
    name_list = names.to_list()
    is_comm = np.array([n in comm for n in name_list], bool) if name_list else np.zeros(0, bool)
    kind = np.full(graph.src.size, -1, np.int8)  # COMPOSITION codes: one byte an edge
    kind[graph.etype == CPU] = 0
    kind[graph.etype == LAUNCH] = 1
    kind[graph.etype == KERNEL_GAP] = 2
    kind[graph.etype == SYNC] = 6
    gpu = np.flatnonzero(graph.etype == GPU)
    rec = graph.ev_row[graph.event[gpu]]
    kernel_kind = np.where(is_comm[codes[rec]] if is_comm.size else False, 4, 3)
    kind[gpu] = np.where(c.kind[rec] == 0, kernel_kind, 5)
    kind[graph.etype == COLLECTIVE] = 4
    return kind


def _composition(graph: Graph, path: I64, kinds: EdgeKinds, length: int) -> pl.DataFrame:
    k = kinds[path]
    w = graph.weight[path]
    categories = list(COMPOSITION)
    if graph.wait_ns is not None:  # a communication span's wait for a later rank is rank_wait time
        wait = graph.wait_ns[path]
        w = w - wait
        categories.append(RANK_WAIT)
    ns = [int(w[k == i].sum()) for i in range(len(COMPOSITION))]
    edges = [int((k == i).sum()) for i in range(len(COMPOSITION))]
    if graph.wait_ns is not None:
        ns.append(int(wait.sum()))
        edges.append(int((wait > 0).sum()))
    return pl.DataFrame(
        {"category": categories, "ns": ns, "share": [n / length if length else 0.0 for n in ns], "edges": edges},
        schema={"category": pl.String, "ns": pl.Int64, "share": pl.Float64, "edges": pl.Int64},
    )


def _items(ix: TraceIndex, graph: Graph, path: I64) -> pl.DataFrame:
    # An event's own time only: a launch edge's delay (its event is the launch call) and a kernel gap (its event
    # is the record before the gap) are the composition's launch_delay and gpu_gap, no call's or kernel's.
    own = np.isin(graph.etype[path], (CPU, GPU, COLLECTIVE))
    timed = path[(graph.event[path] >= 0) & own]
    kind, name = event_names(ix, graph, graph.event[timed])
    frame = pl.DataFrame(
        {
            "kind": kind,
            "name": name,
            "ns": graph.weight[timed] - (0 if graph.wait_ns is None else graph.wait_ns[timed]),
        },
        schema={"kind": pl.String, "name": pl.String, "ns": pl.Int64},
    )
    per = frame.group_by("kind", "name").agg(pl.col("ns").sum(), pl.len().cast(pl.Int64).alias("edges"))
    gpu = pl.col("kind").is_in(["kernel", "memcpy", "memset"])
    top = [per.filter(f).sort("ns", "name", descending=[True, False]).head(TOP_ITEMS) for f in (~gpu, gpu)]
    return pl.concat(top).sort("ns", "name", descending=[True, False])
