"""The longest-path numba kernels agree with their naive twin in tests/reference on random DAGs."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from reference import longest_path_ref
from reference.kernel_modes import kernel_mode  # noqa: F401  (both paths: Python and numba)

from ktrace.analysis._kernels import longest_path


def _csr(n: int, edges: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    src = np.array([e[0] for e in edges], np.int64)
    order = np.argsort(src, kind="stable")
    indptr = np.searchsorted(src[order], np.arange(n + 1)).astype(np.int64)
    dst = np.array([e[1] for e in edges], np.int64)[order]
    weight = np.array([e[2] for e in edges], np.int64)[order]
    return indptr, dst, weight, order


@st.composite
def dags(draw: st.DrawFn) -> tuple[int, list[tuple[int, int, int]]]:
    """A random DAG: edges go from a lower to a higher position of a random permutation of the nodes."""
    n = draw(st.integers(1, 12))
    rank = draw(st.permutations(list(range(n))))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.integers(0, 9)), max_size=30))
    edges = [(a, b, w) if rank[a] < rank[b] else (b, a, w) for a, b, w in pairs if a != b]
    return n, edges


@given(dags())
def test_longest_paths_match_reference(dag: tuple[int, list[tuple[int, int, int]]]) -> None:
    n, edges = dag
    indptr, dst, weight, order = _csr(n, edges)
    topo = longest_path.topological_order(indptr, dst)
    assert sorted(topo.tolist()) == list(range(n))
    position = np.empty(n, np.int64)
    position[topo] = np.arange(n)
    assert all(position[u] < position[v] for u, v, _ in edges)
    dist, pred = longest_path.longest_paths(topo, indptr, dst, weight)
    assert dist.tolist() == longest_path_ref.longest_distances(n, edges)
    # The chosen in-edge of each node realizes its distance.
    src_of_slot = np.repeat(np.arange(n), np.diff(indptr))
    for v in range(n):
        if pred[v] >= 0:
            assert dst[pred[v]] == v
            assert dist[src_of_slot[pred[v]]] + weight[pred[v]] == dist[v]
        else:
            assert dist[v] == 0


@given(dags(), st.data())
def test_negative_weight_edges_are_absent(dag: tuple[int, list[tuple[int, int, int]]], data: st.DataObject) -> None:
    n, edges = dag
    removed = data.draw(st.sets(st.integers(0, max(len(edges) - 1, 0)))) if edges else set()
    marked = [(u, v, -1 if i in removed else w) for i, (u, v, w) in enumerate(edges)]
    indptr, dst, weight, _ = _csr(n, marked)
    dist, _ = longest_path.longest_paths(longest_path.topological_order(indptr, dst), indptr, dst, weight)
    kept = [e for i, e in enumerate(edges) if i not in removed]
    assert dist.tolist() == longest_path_ref.longest_distances(n, kept)


def test_cycle_gives_a_short_order() -> None:
    indptr, dst, _, _ = _csr(3, [(0, 1, 1), (1, 2, 1), (2, 1, 1)])
    assert longest_path.topological_order(indptr, dst).tolist() == [0]
