"""The job's critical path from one rank at a time: what each rank's task returns, and how the client chooses the
windows from it (the map side of fleet.critical_path_map).

critical_path of a whole trace (analysis.critical_path) chooses a step on the first rank with steps, finds the
same step on every other rank (critical_path_ranks.rank_windows), builds each window's graph and joins them at
the collectives. Here the same is done from per-rank parts, so no process holds more than one step of a rank:

1. `rank_steps` (per rank): what choosing the windows needs, small: the rank's step ranges under the first step
   method that finds any on it (steps.detect_steps tries methods in order and the whole trace takes the first
   that finds steps on any rank), its median step's window as choose_window would take it, its CPU spans, its
   ranges holding the annotation, and its count of each collective kernel.
2. `first_window` and `job_windows` (client): the window of the first rank and every rank's, as
   critical_path.choose_window and rank_windows choose them on the whole trace.
3. `rank_graph` (per rank): the window's graph, built on the rank's own trace (every input of build_graph is
   the rank's: the graph is the one the whole trace gives), packed in narrow dtypes (critical_path_packed), with
   the rows of its events only (GRAPH_COLUMNS: names, kinds),
   each GPU record's place in the whole job's record order, and each collective's key ("kernel name#i", i its
   place in the rank's whole order, lag-corrected as model.clock_matching.order_keys does for the whole job:
   `collective_lags`).
   fleet.critical_path_map builds it in the pass of step 1 for a guessed step (`own_window`: the first rank's
   median step), keyed without lags (`relagged` applies them on the client), and again where the guess was wrong.
4. `join_rank_graphs` (client): the events as one small trace, the graphs renumbered into it; the client
   (fleet.critical_path_map) joins them at the collectives and takes the path (critical_path.path_of_windows).

The client holds the chosen step's graph of every rank and the rows of its events, never a rank's trace.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis._kernels.longest_path import load_compiled, runs_compiled
from ktrace.analysis.critical_path import median_step
from ktrace.analysis.critical_path_graph import GPU_RECORD, OPERATOR, RUNTIME, Graph, Window, build_graph
from ktrace.analysis.critical_path_packed import TIMES, PackedGraph
from ktrace.analysis.critical_path_ranks import GRAPH_ARRAYS, communication_records, range_rows, windows_of_ranks
from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.nearest_ranges import nearest_per_rank
from ktrace.analysis.op_attribution import IS_OPERATOR
from ktrace.analysis.steps import detect_steps
from ktrace.model.clock_matching import order_keys
from ktrace.model.trace import Trace

I64 = npt.NDArray[np.int64]
Span = tuple[int, int]
COLLECTIVE_ROWS = Slot[pl.DataFrame]("critical_path_parts.collective_rows")
"""_collective_rows of a rank's TraceIndex (critical_path_task_steps sets it from a joined trace's)."""
_FILLER = "\x00filler"
"""A kernel name no trace holds: one per rank in collective_lags' frame, so order_keys counts every rank."""


def step_methods(pattern: str | None) -> tuple[str, ...]:
    """detect_steps' sources in the order its "auto" tries them."""
    tried = ("annotation", "profiler_step") if pattern is not None else ("profiler_step", "annotation")
    return (*tried, "periodic")


@dataclass(frozen=True)
class RankSteps:
    """What one rank tells the client for choosing the windows (see the module docstring)."""

    node: str
    rank: int
    method: int
    """Index in step_methods of the first method finding steps on this rank, -1 for none."""
    steps: pl.DataFrame
    """node, rank, name, start_ns, end_ns of the rank's steps under `method`."""
    median: tuple[Window, str, str] | None
    """critical_path.median_step of those steps (window, "step", label)."""
    operator_span: Span | None
    """First start and last end of the rank's operators and runtime calls (choose_window's whole-trace scope)."""
    cpu_span: Span | None
    """... of all its ops rows and runtime calls (critical_path_ranks.rank_spans)."""
    annotated: pl.DataFrame | None
    """node, rank, name, start_ns, end_ns of its CPU ranges holding the annotation (None without one)."""
    collectives: dict[str, int]
    """Communication kernel name -> how many the rank ran."""
    kernels: int
    memory: int
    """Rows of its kernels and memory tables (the job's GPU record order: every rank's kernels, then memory)."""


def rank_steps(
    trace: Trace,
    node: str,
    rank: int,
    *,
    annotation: str | None = None,
    steps_pattern: str | None = None,
    index: TraceIndex | None = None,
) -> RankSteps:
    """The RankSteps of a trace holding one rank, (node, rank) (a store's partition); `index` its TraceIndex when
    another analysis of the rank has one."""
    ix = TraceIndex.of(trace, index)
    method, steps = -1, pl.DataFrame()
    for i, source in enumerate(step_methods(steps_pattern)):
        found = detect_steps(trace, steps_pattern, source, index=ix)  # type: ignore[arg-type]
        if found.height:
            method, steps = i, found
            break
    operator_span, cpu_span = operator_spans(trace)
    annotated = None
    if annotation is not None:
        cpu = trace.ranges.filter(
            ~pl.col("on_gpu") & pl.col("name").cast(pl.String).str.contains(annotation, literal=True)
        )
        annotated = range_rows(cpu)
    return RankSteps(
        node=node,
        rank=rank,
        method=method,
        steps=range_rows(steps) if steps.height else steps,
        median=median_step(ix, steps) if steps.height else None,
        operator_span=operator_span,
        cpu_span=cpu_span,
        annotated=annotated,
        collectives=dict(_collective_rows(ix).group_by("name").len().iter_rows()),
        kernels=trace.kernels.height,
        memory=trace.memory.height,
    )


def operator_spans(trace: Trace) -> tuple[Span | None, Span | None]:
    """RankSteps' operator_span and cpu_span of a trace holding one rank."""
    operators = [t for t in (trace.ops.filter(IS_OPERATOR), trace.api) if t.height]
    return _span(operators), _span([t for t in (trace.ops, trace.api) if t.height])


def _span(frames: list[pl.DataFrame]) -> Span | None:
    if not frames:
        return None
    return min(int(f["start_ns"].min()) for f in frames), max(int(f["end_ns"].max()) for f in frames)  # type: ignore[arg-type]


def _collective_rows(ix: TraceIndex) -> pl.DataFrame:
    """row (index order), name, end_ns of the trace's communication kernels, in the order
    critical_path_ranks.collective_keys numbers them (start, then row; the trace holds one rank); once per index
    (rank_steps and rank_graph of a rank both use them)."""
    return ix.get(COLLECTIVE_ROWS, lambda: _find_collective_rows(ix))


def _find_collective_rows(ix: TraceIndex) -> pl.DataFrame:
    c = ix.gpu_columns()
    codes, names = ix.kernel_name_codes()
    rec = communication_records(ix)  # kernels with a name
    return collective_rows_frame(rec, [names[i] for i in codes[rec].tolist()], c.end[rec])


def collective_rows_frame(rows: I64, names: list[str], ends: I64) -> pl.DataFrame:
    """The frame of _collective_rows: row, name, end_ns."""
    return pl.DataFrame(
        {"row": rows, "name": names, "end_ns": ends}, schema={"row": pl.Int64, "name": pl.String, "end_ns": pl.Int64}
    )


def first_window(parts: list[RankSteps], annotation: str | None, instance: int) -> tuple[Window, str, str] | None:
    """critical_path.choose_window of the whole job from its ranks' parts."""
    ordered = sorted(parts, key=lambda p: (p.node, p.rank))
    if annotation is not None:
        frames = [p.annotated for p in ordered if p.annotated is not None and p.annotated.height]
        if not frames:
            return None
        ranges = pl.concat(frames).sort("node", "rank", "start_ns")
        if instance >= ranges.height:
            return None
        r = ranges.row(instance, named=True)
        window = Window(str(r["node"]), int(r["rank"]), r["start_ns"], r["end_ns"])
        return window, "annotation", f"{annotation} #{instance}"
    method = min((p.method for p in ordered if p.method >= 0), default=-1)
    for p in ordered:
        if method >= 0 and p.method == method and p.median is not None:
            return p.median
    for p in ordered:
        if method < 0 and p.operator_span is not None:
            return Window(p.node, p.rank, *p.operator_span), "trace", "whole trace"
    return None


def job_windows(parts: list[RankSteps], first: Window, scope: str) -> list[Window]:
    """critical_path_ranks.rank_windows of the whole job from its ranks' parts."""
    spans = [(p.node, p.rank, *p.cpu_span) for p in parts if p.cpu_span is not None]
    if len(spans) < 2:
        return [first]
    frame = pl.DataFrame(spans, schema=["node", "rank", "start_ns", "end_ns"], orient="row").sort("node", "rank")
    if scope == "trace":
        return windows_of_ranks(first, scope, None, frame)
    if scope == "step":
        method = min(p.method for p in parts if p.method >= 0)
        found = [p.steps for p in parts if p.method == method]
    else:
        found = [p.annotated for p in parts if p.annotated is not None]
    ranges = pl.concat([f for f in found if f.height]) if any(f.height for f in found) else _empty_ranges()
    return windows_of_ranks(first, scope, ranges, frame)


def own_window(part: RankSteps, first: Window, name: str | None, method: int) -> Window | None:
    """The rank's window of a step chosen on another rank (`first`, the range `name`, found by step method
    `method`), as job_windows gives it when `method` is the job's: the rank's step of that name nearest `first`,
    else the one overlapping it most; None for a rank without CPU events or steps under `method`."""
    return own_windows([part], first, name, method)[0]


def own_windows(parts: list[RankSteps], first: Window, name: str | None, method: int) -> list[Window | None]:
    """own_window of each of `parts`, with one query over their steps (nearest_per_rank, as the client's)."""

    def asked(p: RankSteps) -> bool:
        return (p.node, p.rank) != (first.node, first.rank) and p.cpu_span is not None and p.method == method

    steps = [p.steps for p in parts if asked(p) and p.steps.height]
    found = nearest_per_rank(pl.concat(steps), name, first) if steps else {}
    out: list[Window | None] = []
    for p in parts:
        at = (p.node, p.rank)
        out.append(first if at == (first.node, first.rank) else found.get(at) if asked(p) else None)
    return out


def relagged(keys: list[str | None], lags: dict[str, int]) -> list[str | None]:
    """Collective keys made without lags ("name#i"), with the rank's `lags` (collective_lags) applied."""
    if not lags:
        return keys
    out: list[str | None] = []
    for key in keys:
        if key is None:
            out.append(None)
            continue
        name, _, i = key.rpartition("#")
        out.append(f"{name}#{int(i) - lags.get(name, 0)}")
    return out


def _empty_ranges() -> pl.DataFrame:
    schema = {"node": pl.String, "rank": pl.Int64, "name": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64}
    return pl.DataFrame(schema=schema)


def spread_collectives(parts: list[RankSteps]) -> set[str]:
    """The collective kernels some ranks ran more often than others (order_keys corrects their order by a lag
    per rank, from their end times)."""
    counted = [p.collectives for p in parts if p.collectives]
    names = {n for c in counted for n in c}
    return {n for n in names if len({c.get(n, 0) for c in counted}) > 1}


def collective_ends(trace: Trace, node: str, rank: int, names: set[str]) -> pl.DataFrame:
    """node, rank, name, end_ns of the collectives of `names` of a trace holding one rank, in its order, and a
    filler row (for collective_lags)."""
    rows = _collective_rows(TraceIndex(trace)).filter(pl.col("name").is_in(sorted(names)))
    filler = pl.DataFrame({"name": [_FILLER], "end_ns": [0]}, schema={"name": pl.String, "end_ns": pl.Int64})
    return pl.concat([rows.drop("row"), filler]).select(
        pl.lit(node).alias("node"), pl.lit(rank).cast(pl.Int64).alias("rank"), "name", "end_ns"
    )


def collective_lags(ends: list[pl.DataFrame]) -> dict[tuple[str, int], dict[str, int]]:
    """(node, rank) -> kernel name -> lag (the rank's i-th collective of that name is the job's i - lag-th), from
    the collective_ends of every rank that ran a collective."""
    frame = pl.concat(ends)
    keyed, _ = order_keys(frame)
    local = frame.select(pl.int_range(pl.len()).over("node", "rank", "name").alias("i"))
    lagged = pl.concat([keyed, local, frame.select("name")], how="horizontal").filter(pl.col("name") != _FILLER)
    lagged = lagged.with_columns(lag=pl.col("i") - pl.col("key").str.extract(r"#(-?\d+)$").cast(pl.Int64)).unique(
        ["node", "rank", "name"]
    )
    out: dict[tuple[str, int], dict[str, int]] = {}
    for node, rank, name, lag in lagged.select("node", "rank", "name", "lag").iter_rows():
        if lag:
            out.setdefault((str(node), int(rank)), {})[str(name)] = int(lag)
    return out


GRAPH_TABLES = ("ops", "api", "kernels", "memory")
GRAPH_COLUMNS = {
    "ops": ("name",),
    "api": ("name",),
    "kernels": ("node", "rank", "device", "stream", "start_ns", "end_ns", "correlation_id", "name"),
    "memory": ("node", "rank", "device", "stream", "start_ns", "end_ns", "correlation_id", "op", "copy_kind"),
}
"""The columns of a RankGraph's tables: what the client's path reads of its events (critical_path.path_of_windows
given the graphs: the names of operators and runtime calls, event_names; the GPU records' kinds and names,
TraceIndex.gpu_columns and record_names, with the columns they are built from). The graph holds the events'
times; a DLRM rank's operator rows carried ~10x this in unread columns (input shapes and types as strings)."""


@dataclass(frozen=True)
class RankGraph:
    """One rank's graph of its window (critical_path_graph.build_graph on the rank's trace, packed) and the rows
    of its events: ev_row points into `tables` (operators: ops, runtime calls: api, GPU records: kernels then
    memory)."""

    graph: PackedGraph
    tables: dict[str, pl.DataFrame]
    """ops, api, kernels, memory: the rows of the graph's events, in event order, GRAPH_COLUMNS only."""
    kernel_records: I64
    memory_records: I64
    """Per row of tables["kernels"] / ["memory"]: its GPU record's index in the whole job's order (TraceIndex
    gpu_columns: every rank's kernels, then every rank's memory records)."""
    kernel_keys: list[str | None]
    """Per row of tables["kernels"]: its collective's key, None for a kernel that is not a collective."""


def rank_graph(
    trace: Trace,
    window: Window,
    lags: dict[str, int],
    kernel_offset: int,
    memory_offset: int,
    *,
    index: TraceIndex | None = None,
) -> RankGraph:
    """The RankGraph of `window` on a trace holding its rank: `lags` from collective_lags, the offsets the index of
    the rank's first kernel and first memory record among the whole job's GPU records; `index` the trace's
    TraceIndex when another analysis of the rank has one (the fleet's rules)."""
    ix = TraceIndex.of(trace, index)
    graph = build_graph(ix, window)
    rows = {kind: graph.ev_row[graph.ev_kind == kind] for kind in (OPERATOR, RUNTIME, GPU_RECORD)}
    n_kernels = trace.kernels.height
    gpu = rows[GPU_RECORD]
    kernels, memory = gpu[gpu < n_kernels], gpu[gpu >= n_kernels] - n_kernels
    ev_row = np.zeros(graph.ev_row.size, np.int64)  # each kind's events are in row order: their rank in it
    for kind, found in rows.items():
        ev_row[graph.ev_kind == kind] = np.arange(found.size, dtype=np.int64)
    picked = {"ops": rows[OPERATOR], "api": rows[RUNTIME], "kernels": kernels, "memory": memory}
    return RankGraph(
        graph=PackedGraph.of(dataclasses.replace(graph, ev_row=ev_row)),
        tables={name: trace.table(name).select(GRAPH_COLUMNS[name])[picked[name]] for name in GRAPH_TABLES},
        kernel_records=(kernels + kernel_offset).astype(np.int64),
        memory_records=(memory + memory_offset).astype(np.int64),
        kernel_keys=_kernel_keys(ix, kernels, lags),
    )


def _kernel_keys(ix: TraceIndex, kernels: I64, lags: dict[str, int]) -> list[str | None]:
    rows = _collective_rows(ix).with_columns(i=pl.int_range(pl.len()).over("name"))
    key_of = {int(r): f"{n}#{i - lags.get(n, 0)}" for r, n, i in rows.select("row", "name", "i").iter_rows()}
    return [key_of.get(int(k)) for k in kernels.tolist()]


@dataclass(frozen=True)
class JoinedGraphs:
    """Every rank's RankGraph put together: one trace of their events, each graph's ev_row pointing into it."""

    trace: Trace
    arrays: dict[str, list[npt.NDArray[np.signedinteger[Any]]]]
    """Per critical_path_ranks.GRAPH_ARRAYS name, each window's array: event times and ev_row in int64, the
    others as the ranks sent them (critical_path_ranks.join_graph_arrays widens each as it joins them)."""
    sync_records: list[int]
    keys: tuple[I64, list[str]]
    """critical_path_ranks.collective_keys of the trace's GPU records."""
    records: I64
    """Per GPU record of the trace (index order): its index in the whole job."""

    def graph(self, i: int) -> Graph:
        """Window i's Graph."""
        return Graph(**{n: a[i].astype(np.int64) for n, a in self.arrays.items()}, sync_records=self.sync_records[i])


def join_rank_graphs(parts: list[RankGraph], empty: Trace) -> JoinedGraphs:
    """The parts' events as one trace (`empty`'s meta and other tables), their graphs renumbered into it."""
    frames = {name: pl.concat([p.tables[name] for p in parts], how="vertical") for name in GRAPH_TABLES}
    trace = dataclasses.replace(
        empty, ops=frames["ops"], api=frames["api"], kernels=frames["kernels"], memory=frames["memory"]
    )
    starts = {name: np.cumsum([0] + [p.tables[name].height for p in parts]) for name in GRAPH_TABLES}
    arrays: dict[str, list[npt.NDArray[np.signedinteger[Any]]]] = {name: [] for name in GRAPH_ARRAYS}
    for i, p in enumerate(parts):
        packed, n_kernels = p.graph.arrays, p.tables["kernels"].height
        kind, row = packed["ev_kind"], packed["ev_row"].astype(np.int64)
        base = {OPERATOR: starts["ops"][i], RUNTIME: starts["api"][i], GPU_RECORD: starts["kernels"][i]}
        ev_row = row + np.array([base[OPERATOR], base[RUNTIME], base[GPU_RECORD]], np.int64)[kind]
        on_memory = (kind == GPU_RECORD) & (row >= n_kernels)
        ev_row[on_memory] = starts["kernels"][-1] + starts["memory"][i] + row[on_memory] - n_kernels
        for name in GRAPH_ARRAYS:
            arrays[name].append(packed[name])
        arrays["ev_row"][-1] = ev_row
        for name in TIMES:
            arrays[name][-1] = p.graph.wide(name)
    kernel_keys = [k for p in parts for k in p.kernel_keys]
    records = np.concatenate([p.kernel_records for p in parts] + [p.memory_records for p in parts]).astype(np.int64)
    named = sorted({k for k in kernel_keys if k is not None})
    ids = {k: i for i, k in enumerate(named)}
    key_ids = np.full(records.size, -1, np.int64)
    key_ids[: len(kernel_keys)] = [-1 if k is None else ids[k] for k in kernel_keys]
    sync_records = [p.graph.sync_records for p in parts]
    return JoinedGraphs(trace, arrays, sync_records, (key_ids, named), records)


def load_longest_path(edges: int) -> threading.Thread | None:
    """Start loading the longest-path kernels (numba and its disk cache: ~0.4 s, mostly holding the GIL) in a
    thread when a graph of `edges` edges will run them compiled (longest_path.runs_compiled), None when it will
    run them as Python or numpy: the rank-by-rank client (fleet.summary_map) loads them while it mostly waits on
    the workers for the ranks' graphs, not after the last. Join it before the path; a failure here is dropped
    (the path's own call raises it)."""
    if not runs_compiled(edges):
        return None

    def load() -> None:
        try:
            load_compiled()
        except Exception:  # noqa: BLE001, S110 - the path's first call raises the same error
            pass

    thread = threading.Thread(target=load, name="ktrace-longest-path-load", daemon=True)
    thread.start()
    return thread
