"""numba longest-path kernels over a DAG given as edges (the critical path).

Public typed wrappers:

- ``topological_order(indptr, dst) -> int64[k]``: Kahn's order of the nodes (k < n when there is a cycle);
- ``longest_paths(order, indptr, dst, weight) -> (dist, pred)``: the longest distance from any source to each
  node and the CSR slot of the edge reaching it on such a path (-1 for a node without predecessors); ties keep
  the predecessor met first in topological order; an edge of negative weight is absent (a what-if's removal).

Edges are in CSR form: the out-edges of node u are slots indptr[u]:indptr[u + 1] of dst/weight.

Both are one pass over the edges: `@jit_light`, so the critical path of one profiler window (the README demo's
step: 83 k edges) does not load numba for itself (~0.45 s and ~90 MB), nor up to KTRACE_NUMPY_KERNEL_ROWS edges
while numba is not loaded. As Python, the kernels read and write array.array sequences of Python ints
(python_ints; the same source indexes numpy arrays when compiled): a numpy scalar read or write costs several
times theirs, and a list's items cost ~36 bytes each to their 8; a pass over the demo's edges takes ~0.03 s.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit_light

I64 = npt.NDArray[np.int64]


@jit_light
def _kahn(indptr: I64, dst: I64, indegree: I64, order: I64, tail: int) -> int:  # pragma: no cover
    head = 0
    while head < tail:
        u = order[head]
        head += 1
        e = indptr[u]
        end = indptr[u + 1]
        while e < end:  # (as Python, a while loop: most nodes have one out-edge, and range() cost ~20 % more)
            v = dst[e]
            e += 1
            left = indegree[v] - 1
            indegree[v] = left
            if left == 0:
                order[tail] = v
                tail += 1
    return tail


@jit_light
def _longest_paths(order: I64, indptr: I64, dst: I64, weight: I64, dist: I64, pred: I64) -> None:  # pragma: no cover
    for u in order:
        lo = indptr[u]
        hi = indptr[u + 1]
        if hi - lo == 1:  # most nodes have one out-edge: as Python, relaxed without a range() loop (~35 % faster)
            w = weight[lo]
            if w >= 0:
                v = dst[lo]
                candidate = dist[u] + w
                if pred[v] < 0 or candidate > dist[v]:
                    dist[v] = candidate
                    pred[v] = lo
            continue
        reach = dist[u]  # final: a DAG has no edge back to u (and no self-loop)
        for e in range(lo, hi):
            w = weight[e]
            if w < 0:
                continue
            v = dst[e]
            candidate = reach + w
            if pred[v] < 0 or candidate > dist[v]:
                dist[v] = candidate
                pred[v] = e


def topological_order(indptr: I64, dst: I64) -> I64:
    """Nodes in a topological order (Kahn, first-in first-out from the sources in node order).

    Returns:
        int64 node ids; fewer than the node count when the edges have a cycle (the nodes on or after it are
        missing).
    """
    indptr, dst = _as64(indptr), _as64(dst)
    n = indptr.size - 1
    indegree = np.bincount(dst, minlength=n).astype(np.int64)
    sources = np.flatnonzero(indegree == 0)
    order = np.zeros(n, np.int64)
    order[: sources.size] = sources
    if _kahn.runs_as_python(max(indptr.size, dst.size)) or _kahn.skips_numba(max(indptr.size, dst.size)):
        listed = python_ints(order)
        tail = _kahn.py_func(python_ints(indptr), python_ints(dst), python_ints(indegree), listed, sources.size)
        return np.frombuffer(listed, np.int64)[:tail].copy()
    tail = _kahn(indptr, dst, indegree, order, sources.size)
    result: I64 = order[:tail]
    return result


def longest_paths(
    order: I64,
    indptr: I64,
    dst: I64,
    weight: I64,
    *,
    listed: Callable[[], Sequence[Sequence[int]]] | None = None,
    chains: Callable[[], Chains] | None = None,
) -> tuple[I64, I64]:
    """Longest distance to every node (0 at sources) and the CSR slot of its chosen in-edge (-1 at sources).

    Args:
        order: a full topological order (topological_order's result when it has every node).
        indptr, dst, weight: the edges in CSR form; an edge of negative weight counts as removed.
        listed: order, indptr and dst as array.array (critical_path_dag's), asked for only where the kernel runs
            as its Python source (KTRACE_PYTHON_KERNEL_ROWS past the numpy twin's rows, the tests' "python" mode).
        chains: the edges' Chains (chains_of), asked for only where the numpy twin runs: a caller that runs the
            same edges with several weights (the critical path's what-ifs) makes them once (~10 ms at the README
            demo's 83 k edges, then ~6 ms a run where the kernel's source took ~25 ms).
    """
    arrays = [_as64(a) for a in (order, indptr, dst, weight)]
    n = arrays[1].size - 1
    rows = max(a.size for a in arrays)
    if _longest_paths.skips_numba(rows):
        try:
            return _longest_by_chains(chains() if chains is not None else chains_of(*arrays[:3]), arrays[3])
        except RingError:  # a cycle (outside the contract): the kernel's source, which ends on any input
            pass
    if _longest_paths.skips_numba(rows) or _longest_paths.runs_as_python(rows):
        dist_ints, pred_ints = python_ints(np.zeros(n, np.int64)), python_ints(np.full(n, -1, np.int64))
        edges = listed() if listed is not None else [python_ints(a) for a in arrays[:3]]
        _longest_paths.py_func(*edges, python_ints(arrays[3]), dist_ints, pred_ints)
        return np.frombuffer(dist_ints, np.int64), np.frombuffer(pred_ints, np.int64)
    dist, pred = np.zeros(n, np.int64), np.full(n, -1, np.int64)
    _longest_paths(*arrays, dist, pred)
    return dist, pred


class RingError(ValueError):
    """chains_of's edges hold a ring of nodes of one in- and one out-edge (outside longest_paths' contract: no full
    topological order)."""


@dataclass(frozen=True)
class Chains:
    """A DAG's edges cut into chains, for the longest paths' numpy twin (`chains_of`; the same for any weights).

    A node with one in-edge and one out-edge is *inner*; every other node is a *junction*. A chain is a path
    from a junction through inner nodes to the next junction: most of a critical path's graph (the README demo's
    step: 67 k of 78 k nodes are inner). Along a chain the distances are a running sum; only a chain's last edge
    meets other paths, at its junction, so the kernel's loop runs over the chains (~15 k), not the nodes.
    """

    nodes: int
    slots: I64
    """The CSR slots chain by chain, each chain's in path order."""
    first: I64
    """Per entry of `slots`: where its chain starts in `slots`."""
    ends: I64
    """Where each chain ends in `slots`, in the order the kernel relaxes the chain's last edge: by its source's
    place in the topological order, then by slot (ties at a junction go as the kernel's)."""
    head: I64
    """Per chain (as `ends`): the junction number of its first node (junctions numbered in node order)."""
    into: I64
    """Per chain (as `ends`): the junction number of its last node."""
    junctions: I64
    """The junctions' node ids."""
    inner: I64
    """The entries of `slots` that end at an inner node."""
    inner_nodes: I64
    """Per `inner` entry: that node."""
    inner_heads: I64
    """Per `inner` entry: its chain's first node."""


def chains_of(order: I64, indptr: I64, dst: I64) -> Chains:
    """The chains of the edges (CSR form) and their relaxation order (`order`: a full topological order).

    Raises:
        RingError: the edges have a cycle of nodes of one in- and one out-edge (no full topological order).
    """
    n, m = indptr.size - 1, dst.size
    out_degree = np.diff(indptr)
    inner = (out_degree == 1) & (np.bincount(dst, minlength=n) == 1)
    src = np.repeat(np.arange(n, dtype=np.int64), out_degree)
    goes_on = inner[dst]  # the slot's end is inner: its chain goes on with that node's one out-slot
    head = np.arange(m, dtype=np.int64)
    head[indptr[:-1][dst[goes_on]]] = np.flatnonzero(goes_on)  # a slot's predecessor on its chain (self: first)
    for _ in range(m.bit_length() + 1):  # pointer doubling: log2 of the longest chain's length rounds (67 k: 17)
        further = head[head]
        if np.array_equal(further, head):
            break
        head = further
    else:  # (a ring of one-in one-out nodes: no topological order covers it)
        raise RingError("the edges have a cycle: no chains")
    if m and inner[src[head]].any():  # a chain starts at a junction; doubling settles on a ring of 2**k nodes too
        raise RingError("the edges have a cycle: no chains")
    place = np.empty(n, np.int64)
    place[order] = np.arange(n, dtype=np.int64)
    key = head * n + place[src]  # chain by chain, along the path (unique: a chain visits a node once)
    # (stable: timsort takes the runs the CSR order leaves in the keys, ~5x faster here than quicksort)
    slots = np.argsort(key, kind="stable") if m * max(n, 1) < 1 << 62 else np.lexsort((place[src], head))
    chain_head = head[slots]
    starts = np.flatnonzero(np.concatenate(([True], chain_head[1:] != chain_head[:-1]))) if m else np.zeros(0, np.int64)
    lengths = np.diff(np.concatenate((starts, [m])))
    ends = starts + lengths - 1
    last = slots[ends]
    relax = np.lexsort((last, place[src[last]]))
    junctions = np.flatnonzero(~inner)
    number = np.full(n, -1, np.int64)
    number[junctions] = np.arange(junctions.size, dtype=np.int64)
    first = np.repeat(starts, lengths)
    inner_entries = np.flatnonzero(goes_on[slots])
    return Chains(
        nodes=n,
        slots=slots,
        first=first,
        ends=ends[relax],
        head=number[src[slots[starts[relax]]]],
        into=number[dst[last[relax]]],
        junctions=junctions,
        inner=inner_entries,
        inner_nodes=dst[slots[inner_entries]],
        inner_heads=src[slots[first[inner_entries]]],
    )


def _longest_by_chains(chains: Chains, weight: I64) -> tuple[I64, I64]:
    """longest_paths' numpy twin: the running sums along the chains in numpy, then the kernel's loop over the
    chains' last edges into their junctions (Python), then the inner nodes from their chain's first node.

    A removed edge (weight < 0) restarts its chain's sum at 0 after it, as the kernel leaves the inner node it led
    to at distance 0 without a predecessor."""
    slots = chains.slots
    w = weight[slots]
    removed = w < 0
    since = np.maximum.accumulate(np.where(removed, np.arange(slots.size, dtype=np.int64), chains.first - 1))
    summed = np.concatenate(([0], np.cumsum(np.where(removed, 0, w))))
    part = summed[1:] - summed[since + 1]  # each entry's sum since its chain's start or its last removed edge
    headed = since == chains.first - 1  # no removed edge before it on its chain: the sum starts at the first node
    keep = ~removed[chains.ends]  # a chain whose last edge is removed reaches nothing
    ends = chains.ends[keep]
    junctions = chains.junctions.size
    dist = [0] * (junctions + 1)  # (the last: a chain cut by a removed edge starts from 0)
    pred = [-1] * junctions
    for h, add, v, slot in zip(
        np.where(headed[ends], chains.head[keep], junctions).tolist(),
        part[ends].tolist(),
        chains.into[keep].tolist(),
        slots[ends].tolist(),
        strict=True,
    ):
        candidate = dist[h] + add
        if pred[v] < 0 or candidate > dist[v]:
            dist[v] = candidate
            pred[v] = slot
    out_dist, out_pred = np.zeros(chains.nodes, np.int64), np.full(chains.nodes, -1, np.int64)
    out_dist[chains.junctions] = dist[:junctions]
    out_pred[chains.junctions] = pred
    inner = chains.inner  # (one whose in-edge is removed: part 0, not headed, so distance 0)
    out_dist[chains.inner_nodes] = np.where(headed[inner], out_dist[chains.inner_heads], 0) + part[inner]
    out_pred[chains.inner_nodes] = np.where(removed[inner], -1, slots[inner])
    return out_dist, out_pred


def runs_compiled(rows: int) -> bool:
    """Whether topological_order and longest_paths run compiled (numba) on a graph of `rows` nodes or edges, as
    things stand (numba loaded or not): past NUMPY_MAX_ROWS, or past PYTHON_MAX_ROWS once numba is loaded."""
    return not (_kahn.runs_as_python(rows) or _kahn.skips_numba(rows))


def load_compiled() -> None:
    """Load both kernels compiled (numba, then each from its disk cache), whatever the sizes would choose: for a
    caller that will run a graph past runs_compiled's threshold and can load them meanwhile (the rank-by-rank
    client, while its workers build the ranks' graphs). A one-edge graph of the real calls' types."""
    indptr, dst = np.array([0, 1, 1], np.int64), np.array([1], np.int64)
    order = np.zeros(2, np.int64)
    _kahn.compiled()(indptr, dst, np.array([0, 1], np.int64), order, 1)
    _longest_paths.compiled()(
        order, indptr, dst, np.zeros(1, np.int64), np.zeros(2, np.int64), np.full(2, -1, np.int64)
    )


def python_ints(a: I64) -> array[int]:
    """An int64 array as a Python sequence of ints for the kernels run as Python: an array.array, 8 bytes an item
    where a list holds a pointer and an int object (~36 bytes: ~15 MB more at the 83 k edges of the README demo's
    step, whose critical path runs beside the operators' pass in the summary), read about as fast."""
    out = array("q")
    out.frombytes(np.ascontiguousarray(a, np.int64).tobytes())
    return out


def _as64(a: npt.ArrayLike) -> I64:
    return np.ascontiguousarray(a, dtype=np.int64)
