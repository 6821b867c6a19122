"""The critical path's graph as a DAG: CSR form, a topological order, longest paths (analysis._kernels.longest_path),
and the removal of the edges that close cycles (timestamps going back)."""

from __future__ import annotations

import dataclasses
import functools
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ktrace.analysis.critical_path_graph import COLLECTIVE, LAUNCH, SYNC, Graph

if TYPE_CHECKING:
    from ktrace.analysis._kernels.longest_path import Chains

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Dag:
    """The graph in CSR form by source node, with a topological order (computed once, reused by what-ifs)."""

    order: I64
    indptr: I64
    dst: I64
    edge: I64
    """Edge id (Graph order) of each CSR slot."""
    src: I64
    """Source node per edge (Graph order)."""
    bonus: I64 | None = None
    """Per CSR slot: 1 for a collective edge (ties go to crossing ranks), None without any."""
    scale: int = 1

    @classmethod
    def of(cls, graph: Graph) -> Dag | None:
        from ktrace.analysis._kernels.longest_path import topological_order

        edge = np.argsort(graph.src, kind="stable")
        indptr = np.searchsorted(graph.src[edge], np.arange(graph.n_nodes + 1)).astype(np.int64)
        dst = graph.dst[edge]
        order = topological_order(indptr, dst)
        if order.size != graph.n_nodes:
            return None  # a cycle
        crossing = (graph.etype[edge] == COLLECTIVE).astype(np.int64)
        scale = int(crossing.sum()) + 1  # a path's bonus < scale: dist // scale is its length
        if scale == 1 or float(graph.weight.sum(dtype=np.float64)) * scale >= 2.0**62:  # int64 headroom
            return cls(order, indptr, dst, edge, graph.src)
        return cls(order, indptr, dst, edge, graph.src, crossing, scale)

    def longest(self, weight: I64) -> tuple[I64, I64]:
        """(dist per node, pred edge id per node, -1 at sources); weight in Graph edge order, < 0 = removed."""
        from ktrace.analysis._kernels.longest_path import longest_paths

        w = weight[self.edge]
        if self.bonus is not None:
            w = np.where(w < 0, -1, w * self.scale + self.bonus)
        dist, slot = longest_paths(self.order, self.indptr, self.dst, w, listed=self._listed, chains=self._chains)
        return dist // self.scale, np.where(slot >= 0, self.edge[np.maximum(slot, 0)], -1)

    def _chains(self) -> Chains:
        """The edges cut into chains (longest_path.chains_of), made once for the longest paths' numpy twin (the
        what-ifs rerun them)."""
        return self._chain_cut

    @functools.cached_property
    def _chain_cut(self) -> Chains:
        from ktrace.analysis._kernels.longest_path import chains_of

        return chains_of(self.order, self.indptr, self.dst)

    def _listed(self) -> tuple[array[int], array[int], array[int]]:
        """order, indptr and dst as Python ints (longest_path.python_ints), made once for the longest paths run as
        Python (the what-ifs rerun them)."""
        return self._lists

    @functools.cached_property
    def _lists(self) -> tuple[array[int], array[int], array[int]]:
        from ktrace.analysis._kernels.longest_path import python_ints

        return python_ints(self.order), python_ints(self.indptr), python_ints(self.dst)

    def path(self, dist: I64, pred: I64) -> I64:
        """Edge ids of the longest path, in order (ends at the first node of maximal distance in topological
        order)."""
        if dist.size == 0:
            return np.zeros(0, np.int64)
        node = int(self.order[int(np.argmax(dist[self.order]))])
        out: list[int] = []
        # .item() reads a Python int (an indexed numpy scalar costs 10x); no tolist() of every node and edge, which
        # held ~110 MB of Python ints for the 256-rank job's 1 M-node graph to walk a path of a few thousand edges;
        # each edge's predecessor edge in one gather (8 bytes an edge), so a step reads one int, not two
        before = pred[self.src]
        e = pred.item(node)
        while e >= 0:
            out.append(e)
            e = before.item(e)
        return np.asarray(out[::-1], np.int64)


def acyclic(graph: Graph) -> tuple[Graph, Dag, int] | None:
    """The graph, or without the edges that close cycles, its DAG (the topological order is computed once), and
    how many edges were dropped (None: no way out).

    Cycles come from timestamps, not from the model: a GPU record starting before its launch call (clock skew)
    or ties at the trace's resolution (a sync waiting for a record launched, at the same microsecond, after
    it). First the cross edges (launch, sync) going back in time are dropped, then the sync edges whose two
    ends have one time."""
    if (dag := Dag.of(graph)) is not None:
        return graph, dag, 0
    ts = graph.node_ts()
    back, tie = ts[graph.dst] < ts[graph.src], ts[graph.dst] <= ts[graph.src]
    cross = (graph.etype == LAUNCH) | (graph.etype == SYNC) | (graph.etype == COLLECTIVE)
    for drop in (cross & back, (cross & back) | ((graph.etype == SYNC) & tie)):
        kept = without(graph, ~drop)
        if (dag := Dag.of(kept)) is not None:
            return kept, dag, int(drop.sum())
    return None


def without(graph: Graph, keep: npt.NDArray[np.bool_]) -> Graph:
    return dataclasses.replace(
        graph,
        src=graph.src[keep],
        dst=graph.dst[keep],
        weight=graph.weight[keep],
        etype=graph.etype[keep],
        event=graph.event[keep],
        wait_ns=None if graph.wait_ns is None else graph.wait_ns[keep],
    )
