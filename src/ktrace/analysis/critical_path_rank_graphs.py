"""The RankGraphs of several ranks at once, from the trace that holds them all (a fleet task's partitions): the same
values critical_path_parts.rank_graph gives on each rank's own trace, without its fixed costs per rank.

A fleet task (fleet.summary_map) builds each of its ranks' graph of the guessed step. rank_graph on each rank's own
trace ran ~27 polars queries on tiny frames a rank (the window's operators and runtime calls, the rank's syncs,
the tables' rows, the collectives' keys): ~5 ms a rank, ~1 s of CPU on 256 DLRM ranks that one process does not
spend. Here each of those is one query (or numpy pass) over the joined trace, every rank's window at once, and
each rank's share is cut out:

- the CPU events: the rows of each rank's block that start in its window; the call-stack walk
  (critical_path_graph.cpu_edges) runs once, its threads keyed by rank (pid and tid repeat across ranks), and
  each rank's edges are one run of its output, in the order its own walk draws them;
- the syncs (critical_path_syncs.rank_syncs) of every rank in one query, keyed by rank;
- the tables' rows and the collectives' keys from the joined tables and GPU records.

The GPU edges and sync edges (critical_path_graph.record_edges: numpy on the rank's records) run per rank on its
own index, which rank_index_seeds.seed_rank_indexes seeded from the joined one.

The joined trace holds each rank's rows as one block of every table, in `parts` order (store.read_each); the
blocks are checked to hold their ranks' rows and tile it (rank_index_seeds.table_blocks).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.columns import dense_ids
from ktrace.analysis.critical_path_graph import (
    BLOCKING_CALLS,
    GPU_RECORD,
    OPERATOR,
    RUNTIME,
    Graph,
    Window,
    cpu_edges,
    int_column,
    record_edges,
)
from ktrace.analysis.critical_path_packed import PackedGraph
from ktrace.analysis.critical_path_parts import GRAPH_COLUMNS, GRAPH_TABLES, RankGraph, rank_graph
from ktrace.analysis.critical_path_ranks import communication_records
from ktrace.analysis.critical_path_syncs import SYNC_COLUMNS, context_sync_type
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.op_attribution import IS_OPERATOR
from ktrace.analysis.rank_index_seeds import table_blocks

I64 = npt.NDArray[np.int64]
Part = tuple[str, int]


def ranks_graphs(
    index: TraceIndex, parts: Sequence[Part], indexes: Sequence[TraceIndex], windows: Sequence[Window | None]
) -> list[RankGraph | None]:
    """[None if w is None else rank_graph(indexes[i].trace, w, {}, 0, 0, index=indexes[i]) for each i, w], computed
    on `index`, the TraceIndex of the trace joining the ranks (store.read_each's: each partition's rows, in `parts`
    order, one block of each table); `indexes` the ranks' own (rank_index_seeds.seed_rank_indexes spares them
    building their GPU columns again). A window on another rank than its part's takes rank_graph on the part's own
    trace."""
    firsts = table_blocks(index, indexes, parts)
    own = [w is not None and (w.node, w.rank) == p for p, w in zip(parts, windows, strict=True)]
    batch = _Batch(index, firsts, [w if ok else None for w, ok in zip(windows, own, strict=True)]) if any(own) else None
    out: list[RankGraph | None] = []
    for i, (ix, window) in enumerate(zip(indexes, windows, strict=True)):
        if window is None:
            out.append(None)
        elif not own[i]:
            out.append(rank_graph(ix.trace, window, {}, 0, 0, index=ix))
        else:
            assert batch is not None
            out.append(batch.rank_graph(i, ix, window))
    return out


def _rank_of(first: I64) -> I64:
    """Per row of a table: the position of its rank's block."""
    return np.repeat(np.arange(first.size - 1, dtype=np.int64), np.diff(first))


class _Batch:
    """Every rank's events, CPU edges, syncs, rows and keys, from one pass each over the joined trace; rank_graph
    cuts one rank's share and builds the rest of its graph on its own index."""

    def __init__(self, index: TraceIndex, firsts: dict[str, I64], windows: list[Window | None]) -> None:
        self.index, self.firsts = index, firsts
        n = firsts["ops"].size - 1
        self.start = np.array([-1 if w is None else w.start_ns for w in windows], np.int64)
        self.end = np.array([-1 if w is None else w.end_ns for w in windows], np.int64)
        self.active = np.array([w is not None for w in windows], bool)
        trace = index.trace
        op_rows, op_rank = self._in_window("ops", trace.ops.select(IS_OPERATOR.fill_null(False)).to_series().to_numpy())
        api_rows, api_rank = self._in_window("api", None)
        # each rank's CPU events: its operators, then its runtime calls (build_graph's order)
        rank = np.concatenate([op_rank, api_rank])
        order = np.argsort(
            2 * rank + np.r_[np.zeros(op_rows.size, np.int64), np.ones(api_rows.size, np.int64)], kind="stable"
        )
        self.cpu_rows = np.concatenate([op_rows, api_rows])[order]
        self.cpu_rank = rank[order]
        self.is_api = order >= op_rows.size
        self.n_ops = np.bincount(op_rank, minlength=n)
        self.n_api = np.bincount(api_rank, minlength=n)
        self.ops_first = np.cumsum(np.r_[0, self.n_ops]).astype(np.int64)
        self.api_first = np.cumsum(np.r_[0, self.n_api]).astype(np.int64)
        self.cpu_first = np.cumsum(np.r_[0, self.n_ops + self.n_api]).astype(np.int64)
        local = np.arange(self.cpu_rows.size, dtype=np.int64) - self.cpu_first[self.cpu_rank]
        self.api_ev = np.full(trace.api.height, -1, np.int64)
        self.api_ev[self.cpu_rows[self.is_api]] = local[self.is_api]
        self.cpu_edges = self._cpu_edges()
        self.edge_first = np.searchsorted(self.cpu_rank[self.cpu_edges[0] >> 1], np.arange(n + 1), side="left")
        self.recs, self.rec_first = self._records()
        self.on_kernel = self.recs < index.gpu_columns().n_kernels
        rec_rank = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.rec_first))
        self.kernel_first = np.cumsum(np.r_[0, np.bincount(rec_rank[self.on_kernel], minlength=n)]).astype(np.int64)
        self.memory_first = np.cumsum(np.r_[0, np.bincount(rec_rank[~self.on_kernel], minlength=n)]).astype(np.int64)
        self.syncs, self.sync_first = self._syncs()
        self.tables = self._tables()
        self.keys = self._collective_keys()

    def _in_window(self, name: str, keep: npt.NDArray[np.bool_] | None) -> tuple[I64, I64]:
        """The joined rows of `name` (ops or api) starting in their rank's window and lasting > 0, and their rank."""
        table = self.index.trace.table(name)
        rank = _rank_of(self.firsts[name])
        start, end = (table[c].to_numpy().astype(np.int64, copy=False) for c in ("start_ns", "end_ns"))
        hit = self.active[rank] & (start >= self.start[rank]) & (start <= self.end[rank]) & (end > start)
        if keep is not None:
            hit &= keep
        rows = np.flatnonzero(hit).astype(np.int64)
        return rows, rank[rows]

    def _cpu_edges(self) -> tuple[I64, I64, I64, I64, I64]:
        """critical_path_graph.cpu_edges of every rank's CPU events at once: threads keyed by (rank, pid, tid)."""
        trace = self.index.trace
        ops, api = self.cpu_rows[~self.is_api], self.cpu_rows[self.is_api]
        frames = [
            trace.ops[ops].select("pid", "tid", "start_ns", "end_ns", blocking=pl.lit(False)),
            trace.api[api].select(
                "pid", "tid", "start_ns", "end_ns", blocking=pl.col("name").cast(pl.String).is_in(BLOCKING_CALLS)
            ),
        ]
        cpu = pl.concat(frames, how="vertical_relaxed")
        back = np.empty(self.cpu_rows.size, np.int64)  # the concatenation's row of each event
        back[np.flatnonzero(~self.is_api)] = np.arange(ops.size)
        back[np.flatnonzero(self.is_api)] = ops.size + np.arange(api.size)
        cpu = cpu[back]
        thread, _ = dense_ids(
            [int_column(cpu, "pid"), int_column(cpu, "tid")]
        )  # ordered as each rank's own (pid, tid) ids
        self.cpu_start, self.cpu_end = int_column(cpu, "start_ns"), int_column(cpu, "end_ns")
        keyed = pl.DataFrame({"pid": self.cpu_rank, "tid": thread, "blocking": cpu["blocking"]})
        return cpu_edges(keyed, self.cpu_start, self.cpu_end)

    def _records(self) -> tuple[I64, I64]:
        """The joined GPU records launched by a window's runtime call, by rank then record, and each rank's first."""
        c = self.index.gpu_columns()
        launch = self.index.launch_rows()
        kernels, memory = self.firsts["kernels"], self.firsts["memory"]
        rank = np.r_[_rank_of(kernels), _rank_of(memory)]
        launched = np.flatnonzero(launch >= 0)
        api_rank = _rank_of(self.firsts["api"])
        hit = launched[(self.api_ev[launch[launched]] >= 0) & (api_rank[launch[launched]] == rank[launched])]
        hit = hit[np.lexsort((hit, rank[hit]))]
        assert c.size == rank.size
        first = np.searchsorted(rank[hit], np.arange(kernels.size), side="left").astype(np.int64)
        return hit.astype(np.int64), first

    def _syncs(self) -> tuple[pl.DataFrame, I64]:
        """critical_path_syncs.rank_syncs of every rank's window, by rank (api rows its own trace's), and each
        rank's first row."""
        trace = self.index.trace
        n = self.start.size
        windows = pl.DataFrame(
            {"at": np.flatnonzero(self.active), "w_start": self.start[self.active], "w_end": self.end[self.active]}
        )
        syncs = trace.syncs.with_columns(at=pl.Series(_rank_of(self.firsts["syncs"]))).join(windows, on="at")
        syncs = syncs.filter(pl.col("end_ns") >= pl.col("w_start")).select(*SYNC_COLUMNS, "at", "w_end")
        # only the calls these syncs and their events name: rank_syncs takes all the rank's, the others join none
        named = pl.concat([syncs["correlation_id"], syncs["wait_correlation_id"]]).drop_nulls().unique()
        api_rank = _rank_of(self.firsts["api"])
        api = trace.api.select(
            "correlation_id",
            "start_ns",
            "name",
            api_row=pl.Series(np.arange(api_rank.size, dtype=np.int64) - self.firsts["api"][api_rank]),
            at=pl.Series(api_rank),
        ).filter(pl.col("correlation_id").is_in(named.implode()) & pl.col("at").is_in(windows["at"].implode()))
        api = api.select("correlation_id", "api_row", "at", call_ns="start_ns", call=pl.col("name").cast(pl.String))
        api = api.unique(["at", "correlation_id"], keep="first", maintain_order=True)
        syncs = syncs.join(api, on=["at", "correlation_id"], how="inner").filter(pl.col("call_ns") <= pl.col("w_end"))
        records = api.select("at", wait_correlation_id="correlation_id", record_row="api_row")
        syncs = syncs.with_columns(context_sync_type())
        syncs = syncs.join(records, on=["at", "wait_correlation_id"], how="left").sort("at", "end_ns", "correlation_id")
        first = np.searchsorted(int_column(syncs, "at"), np.arange(n + 1), side="left").astype(np.int64)
        return syncs.drop("at", "w_end"), first

    def _tables(self) -> dict[str, pl.DataFrame]:
        """The rows of every rank's events (GRAPH_COLUMNS) in event order, ranks one after another."""
        trace = self.index.trace
        picked = {
            "ops": self.cpu_rows[~self.is_api],
            "api": self.cpu_rows[self.is_api],
            "kernels": self.recs[self.on_kernel],
            "memory": self.recs[~self.on_kernel] - self.index.gpu_columns().n_kernels,
        }
        return {name: trace.table(name).select(GRAPH_COLUMNS[name])[picked[name]] for name in GRAPH_TABLES}

    def _collective_keys(self) -> list[str | None]:
        """Per kernel of self.recs: its collective's key ("name#i", i its place among its rank's collectives of that
        name: critical_path_parts._kernel_keys without lags), None for a kernel that is not a collective."""
        c = self.index.gpu_columns()
        codes, names = self.index.kernel_name_codes()
        rec = communication_records(self.index)  # by rank, start, record: each rank's own order
        place = np.full(c.size, -1, np.int64)
        if rec.size:
            group = c.rank_id[rec] * (len(names) + 1) + codes[rec]
            by_group = np.argsort(group, kind="stable")
            heads = np.r_[True, group[by_group][1:] != group[by_group][:-1]]
            head_at = np.maximum.accumulate(np.where(heads, np.arange(rec.size), 0))
            place[rec[by_group]] = np.arange(rec.size) - head_at
        kernels = self.recs[self.on_kernel]
        found = place[kernels].tolist()
        return [None if i < 0 else f"{names[k]}#{i}" for k, i in zip(codes[kernels].tolist(), found, strict=True)]

    def rank_graph(self, i: int, ix: TraceIndex, window: Window) -> RankGraph:
        """Rank i's RankGraph (its own index `ix`)."""
        n_ops, n_api = int(self.n_ops[i]), int(self.n_api[i])
        lo, hi = int(self.cpu_first[i]), int(self.cpu_first[i + 1])
        r0, r1 = int(self.rec_first[i]), int(self.rec_first[i + 1])
        recs = self._own_records(self.recs[r0:r1], i, ix.gpu_columns().n_kernels)
        n_cpu = n_ops + n_api
        ev_start = np.concatenate([self.cpu_start[lo:hi], ix.gpu_columns().start[recs]]).astype(np.int64)
        ev_end = np.concatenate([self.cpu_end[lo:hi], ix.gpu_columns().end[recs]]).astype(np.int64)
        e0, e1 = int(self.edge_first[i]), int(self.edge_first[i + 1])
        u, v, weight, etype, event = (a[e0:e1] for a in self.cpu_edges)
        parts = [(u - 2 * lo, v - 2 * lo, weight, etype, np.where(event >= 0, event - lo, -1))]
        syncs = self.syncs.slice(int(self.sync_first[i]), int(self.sync_first[i + 1] - self.sync_first[i]))
        if recs.size:
            a0, a1 = int(self.firsts["api"][i]), int(self.firsts["api"][i + 1])
            api_ev = self.api_ev[a0:a1]
            rec_ev = np.full(ix.gpu_columns().size, -1, np.int64)
            rec_ev[recs] = n_cpu + np.arange(recs.size, dtype=np.int64)
            parts += record_edges(ix, window, recs, rec_ev, api_ev, syncs)
        src, dst, weight, etype, event = (np.concatenate([p[k] for p in parts]).astype(np.int64) for k in range(5))
        kinds = (np.full(n_ops, OPERATOR), np.full(n_api, RUNTIME), np.full(recs.size, GPU_RECORD))
        graph = Graph(
            ev_kind=np.concatenate(kinds).astype(np.int64),
            ev_row=np.concatenate([np.arange(k.size) for k in kinds]).astype(np.int64),
            ev_start=ev_start,
            ev_end=ev_end,
            src=src,
            dst=dst,
            weight=np.maximum(weight, 0),
            etype=etype,
            event=event,
            sync_records=syncs.height,
        )
        k0, k1 = int(self.kernel_first[i]), int(self.kernel_first[i + 1])
        m0, m1 = int(self.memory_first[i]), int(self.memory_first[i + 1])
        kernels, memory = recs[: k1 - k0], recs[k1 - k0 :] - ix.gpu_columns().n_kernels
        o0, a0 = int(self.ops_first[i]), int(self.api_first[i])
        cut = {"ops": (o0, o0 + n_ops), "api": (a0, a0 + n_api), "kernels": (k0, k1), "memory": (m0, m1)}
        return RankGraph(
            graph=PackedGraph.of(graph),
            tables={
                name: frame.slice(cut[name][0], cut[name][1] - cut[name][0]) for name, frame in self.tables.items()
            },
            kernel_records=kernels.astype(np.int64),
            memory_records=memory.astype(np.int64),
            kernel_keys=self.keys[k0:k1],
        )

    def _own_records(self, joined: I64, i: int, n_own_kernels: int) -> I64:
        """Joined GPU record ids of rank i as ids of its own index (its kernels, then its memory records)."""
        n_kernels = self.index.gpu_columns().n_kernels
        own_memory = joined - n_kernels - self.firsts["memory"][i] + n_own_kernels
        return np.where(joined < n_kernels, joined - self.firsts["kernels"][i], own_memory).astype(np.int64)
