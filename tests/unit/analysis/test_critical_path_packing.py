"""What a rank's task sends the client for the job's critical path (analysis.critical_path_parts): the graph
packed in narrow dtypes comes back exactly, the tables carry only the columns the client's path reads, and the
client loads the longest-path kernels ahead only when the job's graph will run them compiled."""

from __future__ import annotations

import numpy as np

from ktrace.analysis._kernels import NUMPY_MAX_ROWS, PYTHON_MAX_ROWS, numba_loaded
from ktrace.analysis._kernels.longest_path import runs_compiled
from ktrace.analysis.critical_path_graph import Graph, Window, build_graph
from ktrace.analysis.critical_path_packed import PackedGraph
from ktrace.analysis.critical_path_parts import GRAPH_COLUMNS, load_longest_path, rank_graph
from ktrace.analysis.index import TraceIndex
from ktrace.testing.fleet import FleetConfig, generate_fleet

_ARRAYS = ("ev_kind", "ev_row", "ev_start", "ev_end", "src", "dst", "weight", "etype", "event")


def _graph(**arrays: list[int]) -> Graph:
    return Graph(**{name: np.asarray(arrays.get(name, []), np.int64) for name in _ARRAYS}, sync_records=3)


def test_a_packed_graph_unpacks_to_the_same_int64_arrays() -> None:
    base = 1_694_128_201_428_473_000
    graph = _graph(
        ev_kind=[0, 1, 2],
        ev_row=[0, 40_000, 7],
        ev_start=[base, base + 5, base + 2**33],
        ev_end=[base + 3, base + 9, base + 2**33 + 1],
        src=[0, 2, 4],
        dst=[1, 3, 5],
        weight=[3, 4, 1],
        etype=[0, 0, 5],
        event=[0, -1, 2],
    )
    packed = PackedGraph.of(graph)
    assert packed.arrays["ev_kind"].dtype == np.int8 and packed.arrays["ev_row"].dtype == np.int32
    assert packed.arrays["ev_start"].dtype == np.int64  # 2**33 ns from the first event: no narrower dtype holds it
    unpacked = packed.unpack()
    for name in _ARRAYS:
        got = getattr(unpacked, name)
        assert got.dtype == np.int64 and np.array_equal(got, getattr(graph, name)), name
    assert unpacked.sync_records == 3 and unpacked.ev_window is None and unpacked.wait_ns is None


def test_an_empty_graph_packs_and_unpacks() -> None:
    unpacked = PackedGraph.of(_graph()).unpack()
    assert all(getattr(unpacked, name).size == 0 for name in _ARRAYS)


def test_a_rank_graph_carries_the_graph_exactly_and_only_the_columns_the_client_reads() -> None:
    trace = generate_fleet(FleetConfig(ranks=1, hosts=1, steps=3, kernels_per_step=6)).trace
    ix = TraceIndex(trace)
    node, rank = trace.ranks[0]
    span = trace.span_ns()
    assert span is not None
    window = Window(str(node), int(rank), *span)
    part = rank_graph(trace, window, {}, 0, 0)
    full, mine = build_graph(ix, window), part.graph.unpack()
    for name in ("ev_kind", "ev_start", "ev_end", "src", "dst", "weight", "etype", "event"):
        assert np.array_equal(getattr(mine, name), getattr(full, name)), name
    assert all(part.tables[name].columns == list(columns) for name, columns in GRAPH_COLUMNS.items())
    assert part.tables["ops"].height + part.tables["api"].height + part.tables["kernels"].height > 0


def test_the_longest_path_kernels_load_ahead_only_for_a_graph_that_runs_them_compiled() -> None:
    for edges in (PYTHON_MAX_ROWS, NUMPY_MAX_ROWS, NUMPY_MAX_ROWS + 1):  # (numba loaded or not by other tests)
        thread = load_longest_path(edges)
        assert (thread is not None) == runs_compiled(edges)
        if thread is not None:
            thread.join()
            assert not thread.is_alive() and numba_loaded()
