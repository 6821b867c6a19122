"""The longest paths' numpy twin (the edges cut into chains, longest_path.chains_of) gives the kernel's own result,
distances and chosen in-edges alike (ties included), on random DAGs made mostly of chains as a critical path's
graph is: threads and streams as chains of nodes, crossed by launch- and sync-like edges, some edges removed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from reference import longest_path_ref

from ktrace.analysis import _kernels
from ktrace.analysis._kernels import longest_path

Edges = list[tuple[int, int, int]]
Paths = tuple[np.ndarray, np.ndarray]


@st.composite
def chained_dags(draw: st.DrawFn) -> tuple[int, Edges]:
    """Lanes of nodes in a row (edges lane[i] -> lane[i + 1]) plus edges between lanes, all going forward in one
    random ranking of the nodes; weights small (ties) or -1 (removed)."""
    weights = st.integers(-1, 3)
    lanes = draw(st.lists(st.integers(1, 12), min_size=1, max_size=4))
    n = sum(lanes)
    rank = draw(st.permutations(list(range(n))))
    edges: Edges = []
    start = 0
    for size in lanes:
        lane = sorted(range(start, start + size), key=lambda v: rank[v])
        edges += [(a, b, draw(weights)) for a, b in zip(lane, lane[1:], strict=False)]
        start += size
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), weights), max_size=8))
    edges += [(a, b, w) if rank[a] < rank[b] else (b, a, w) for a, b, w in pairs if a != b]
    return n, draw(st.permutations(edges))


def _source_and_twin(order: np.ndarray, indptr: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> list[Paths]:
    """longest_paths run as the kernel's Python source (no numpy twin, no numba), then as its numpy twin."""
    settings = _kernels.PYTHON_MAX_ROWS, _kernels.NUMPY_MAX_ROWS
    runs = []
    try:
        for numpy_rows in (-1, 1 << 62):
            _kernels.PYTHON_MAX_ROWS, _kernels.NUMPY_MAX_ROWS = 1 << 62, numpy_rows
            runs.append(longest_path.longest_paths(order, indptr, dst, weight))
    finally:
        _kernels.PYTHON_MAX_ROWS, _kernels.NUMPY_MAX_ROWS = settings
    return runs


def _csr(n: int, edges: Edges) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    src = np.array([e[0] for e in edges], np.int64)
    by_src = np.argsort(src, kind="stable")
    indptr = np.searchsorted(src[by_src], np.arange(n + 1)).astype(np.int64)
    dst = np.array([e[1] for e in edges], np.int64)[by_src]
    weight = np.array([e[2] for e in edges], np.int64)[by_src]
    return indptr, dst, weight


@given(chained_dags())
@example((1, []))
@example((3, [(0, 1, -1), (1, 2, 2)]))  # a chain cut before its last edge: the rest starts from 0
@example((3, [(0, 1, 2), (1, 2, -1)]))  # a chain whose last edge is removed reaches nothing
@example((2, [(0, 1, 1), (0, 1, 1)]))  # parallel edges: the first slot wins the tie
def test_the_twin_gives_the_kernels_distances_and_in_edges(dag: tuple[int, Edges]) -> None:
    n, edges = dag
    indptr, dst, weight = _csr(n, edges)
    order = longest_path.topological_order(indptr, dst)
    source, twin = _source_and_twin(order, indptr, dst, weight)
    chains = longest_path.chains_of(order, indptr, dst)
    again = longest_path.longest_paths(order, indptr, dst, weight, chains=lambda: chains)
    for got in (twin, again):
        assert got[0].tolist() == source[0].tolist()
        assert got[1].tolist() == source[1].tolist()
    assert twin[0].tolist() == longest_path_ref.longest_distances(n, [e for e in edges if e[2] >= 0])


def test_chains_cover_every_edge_once_in_path_order() -> None:
    # 0 -> 1 -> 2 -> 3 with a branch 1 -> 4 -> 3: junctions 0, 1, 3; chains 0-1, 1-2-3, 1-4-3
    indptr, dst, _ = _csr(5, [(0, 1, 1), (1, 2, 1), (2, 3, 1), (1, 4, 1), (4, 3, 1)])
    chains = longest_path.chains_of(longest_path.topological_order(indptr, dst), indptr, dst)
    assert sorted(chains.slots.tolist()) == list(range(dst.size))
    assert chains.junctions.tolist() == [0, 1, 3]
    assert chains.ends.size == 3
    assert sorted(chains.inner_nodes.tolist()) == [2, 4]


@pytest.mark.parametrize("ring", [1, 2, 3, 4, 8])
def test_a_ring_outside_the_contract_still_ends(ring: int) -> None:
    """0 -> 1 and a ring of `ring` nodes (no topological order covers it): no chains, the kernel's source runs.
    Pointer doubling settles on a ring of 2**k nodes: the chains' heads tell it (RV5)."""
    n = 2 + ring
    indptr, dst, weight = _csr(n, [(0, 1, 1)] + [(2 + i, 2 + (i + 1) % ring, 1) for i in range(ring)])
    order = np.arange(n, dtype=np.int64)
    with pytest.raises(longest_path.RingError, match="cycle"):
        longest_path.chains_of(order, indptr, dst)
    dist, pred = longest_path.longest_paths(order, indptr, dst, weight)
    source_dist, source_pred = np.zeros(n, np.int64), np.full(n, -1, np.int64)
    longest_path._longest_paths.py_func(order, indptr, dst, weight, source_dist, source_pred)
    assert dist.tolist() == source_dist.tolist() and pred.tolist() == source_pred.tolist()
