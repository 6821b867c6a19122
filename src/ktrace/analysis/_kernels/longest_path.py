"""numba longest-path kernels over a DAG given as edges (the critical path).

Public typed wrappers:

- ``topological_order(indptr, dst) -> int64[k]``: Kahn's order of the nodes (k < n when there is a cycle);
- ``longest_paths(order, indptr, dst, weight) -> (dist, pred)``: the longest distance from any source to each
  node and the CSR slot of the edge reaching it on such a path (-1 for a node without predecessors); ties keep
  the predecessor met first in topological order; an edge of negative weight is absent (a what-if's removal).

Edges are in CSR form: the out-edges of node u are slots indptr[u]:indptr[u + 1] of dst/weight.

Both are one pass over the edges (~1 us an edge as Python): `@jit_light`, so the critical path of one profiler
window (the README demo's step: 83 k edges) does not load numba for itself (~0.45 s and ~90 MB).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit_light

I64 = npt.NDArray[np.int64]


@jit_light
def _topological_order(indptr: I64, dst: I64) -> I64:  # pragma: no cover
    n = indptr.size - 1
    indegree = np.bincount(dst, minlength=n)
    order = np.empty(n, np.int64)
    sources = np.flatnonzero(indegree == 0)
    order[: sources.size] = sources
    tail = sources.size
    head = 0
    while head < tail:
        u = order[head]
        head += 1
        for e in range(indptr[u], indptr[u + 1]):
            v = dst[e]
            left = indegree[v] - 1
            indegree[v] = left
            if left == 0:
                order[tail] = v
                tail += 1
    return order[:tail]


@jit_light
def _longest_paths(order: I64, indptr: I64, dst: I64, weight: I64) -> tuple[I64, I64]:  # pragma: no cover
    n = indptr.size - 1
    dist = np.zeros(n, np.int64)
    pred = np.full(n, -1, np.int64)
    for i in range(order.size):
        u = order[i]
        reach = dist[u]  # final: a DAG has no edge back to u (and no self-loop)
        for e in range(indptr[u], indptr[u + 1]):
            w = weight[e]
            if w < 0:
                continue
            v = dst[e]
            candidate = reach + w
            if pred[v] < 0 or candidate > dist[v]:
                dist[v] = candidate
                pred[v] = e
    return dist, pred


def topological_order(indptr: I64, dst: I64) -> I64:
    """Nodes in a topological order (Kahn, first-in first-out from the sources in node order).

    Returns:
        int64 node ids; fewer than the node count when the edges have a cycle (the nodes on or after it are
        missing).
    """
    result: I64 = _topological_order(np.ascontiguousarray(indptr, np.int64), np.ascontiguousarray(dst, np.int64))
    return result


def longest_paths(order: I64, indptr: I64, dst: I64, weight: I64) -> tuple[I64, I64]:
    """Longest distance to every node (0 at sources) and the CSR slot of its chosen in-edge (-1 at sources).

    Args:
        order: a full topological order (topological_order's result when it has every node).
        indptr, dst, weight: the edges in CSR form; an edge of negative weight counts as removed.
    """
    dist, pred = _longest_paths(
        np.ascontiguousarray(order, np.int64),
        np.ascontiguousarray(indptr, np.int64),
        np.ascontiguousarray(dst, np.int64),
        np.ascontiguousarray(weight, np.int64),
    )
    return dist, pred
