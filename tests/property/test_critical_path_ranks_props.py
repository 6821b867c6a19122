"""The critical path across ranks on random jobs: the tie-break toward crossings never changes a longest
path's length, and a job's path adds up (segments, composition with rank_wait) and is never shorter than the
first rank's own."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ktrace.analysis.critical_path import critical_path
from ktrace.analysis.critical_path_dag import Dag
from ktrace.analysis.critical_path_graph import COLLECTIVE, CPU, Graph
from ktrace.model import Trace, TraceBuilder
from ktrace.model.builder import merge_traces

NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


@st.composite
def _dags(draw: st.DrawFn) -> Graph:
    events = draw(st.integers(1, 12))
    n = 2 * events
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=40))
    edges = [(min(u, v), max(u, v)) for u, v in pairs if u != v] or [(0, 1)]  # critical_path needs an edge
    src = np.array([u for u, _ in edges], np.int64)
    dst = np.array([v for _, v in edges], np.int64)
    weight = np.array(draw(st.lists(st.integers(0, 5), min_size=len(edges), max_size=len(edges))), np.int64)
    crossing = draw(st.lists(st.booleans(), min_size=len(edges), max_size=len(edges)))
    etype = np.where(np.array(crossing, bool), COLLECTIVE, CPU).astype(np.int64)
    zeros = np.zeros(events, np.int64)
    return Graph(zeros, zeros, zeros, zeros, src, dst, weight, etype, np.full(len(edges), -1), sync_records=0)


@settings(max_examples=200, deadline=None)
@given(_dags())
def test_crossing_bonus_keeps_the_longest_length(graph: Graph) -> None:
    with_bonus = Dag.of(graph)
    assert with_bonus is not None
    plain = dataclasses.replace(with_bonus, bonus=None, scale=1)
    weight = graph.weight
    assert np.array_equal(with_bonus.longest(weight)[0], plain.longest(weight)[0])
    path = with_bonus.path(*with_bonus.longest(weight))
    dist = with_bonus.longest(weight)[0]
    assert int(weight[path].sum()) == (int(dist.max()) if dist.size else 0)


def _rank(rank: int, kernels: list[tuple[int, int, bool]], gap: int) -> Trace:
    """A thread launching `kernels` (duration, delay before launch, is NCCL) one after another on stream 7."""
    b = TraceBuilder("n0", rank)
    t, api, recs = gap, [], []
    gpu_free = 0
    for i, (dur, delay, nccl) in enumerate(kernels):
        t += delay
        api.append((t, t + 5, i + 1))
        start = max(t + 7, gpu_free)
        recs.append((start, start + dur, i + 1, NCCL if nccl else f"k{i % 3}"))
        gpu_free = start + dur
        t += 6
    b.add("ops", {"start_ns": [gap], "end_ns": [t + 1], "pid": [1], "tid": [1], "name": ["step"]})
    b.add(
        "api",
        {
            "start_ns": [a[0] for a in api],
            "end_ns": [a[1] for a in api],
            "pid": [1] * len(api),
            "tid": [1] * len(api),
            "correlation_id": [a[2] for a in api],
            "domain": ["runtime"] * len(api),
            "name": ["cudaLaunchKernel"] * len(api),
        },
    )
    b.add(
        "kernels",
        {
            "start_ns": [r[0] for r in recs],
            "end_ns": [r[1] for r in recs],
            "device": [0] * len(recs),
            "stream": [7] * len(recs),
            "correlation_id": [r[2] for r in recs],
            "name": [r[3] for r in recs],
        },
    )
    return b.build()


def _job(ranks: list[tuple[list[tuple[int, int, bool]], int]]) -> Trace:
    """The job of per-rank (kernels, gap) as _rank takes them, rank r the r-th."""
    return merge_traces([_rank(r, kernels, gap) for r, (kernels, gap) in enumerate(ranks)])


@st.composite
def _jobs(draw: st.DrawFn) -> Trace:
    """2-4 ranks, each the same sequence of kernel kinds (the collectives line up by order), random times."""
    kinds = draw(st.lists(st.booleans(), min_size=1, max_size=8))
    ranks = draw(st.integers(2, 4))
    parts = []
    for _ in range(ranks):
        kernels = [(draw(st.integers(1, 50)), draw(st.integers(0, 40)), nccl) for nccl in kinds]
        parts.append((kernels, draw(st.integers(0, 100))))
    return _job(parts)


_EVEN_NCCL = [(10, 0, True)] * 7
"""Seven all-reduces 16 ns apart: regular enough that step inference once took them as the step marker."""
_UNEVEN_NCCL = [(10, d, True) for d in (0, 40, 0, 40, 0, 40, 0)]
_BACKLOGGED_NCCL = [(50, 0, True)] * 7
"""Seven 50 ns all-reduces launched 6 ns apart: the GPU runs them long after their launches."""


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_jobs())
@example(_job([(_EVEN_NCCL, 0), (_UNEVEN_NCCL, 0)])).via("hypothesis: NCCL as rank 0's step, none on rank 1")
@example(_job([(_BACKLOGGED_NCCL, 0), (_BACKLOGGED_NCCL, 0)])).via("hypothesis: a step window without CPU events")
def test_job_path_adds_up(trace: Trace) -> None:
    cp = critical_path(trace)
    alone = critical_path(trace, across_ranks=False)
    assert cp is not None and alone is not None
    assert cp.ranks == trace.kernels["rank"].n_unique()
    assert int(cp.path_segments["weight_ns"].sum()) == cp.length_ns
    assert int(cp.composition["ns"].sum()) == cp.length_ns
    assert (cp.composition["ns"] >= 0).all()
    assert cp.length_ns >= alone.length_ns
    assert cp.length_ns <= cp.end_ns - cp.start_ns and alone.length_ns <= alone.end_ns - alone.start_ns
    assert cp.crossings is not None and (cp.crossings["waited_ns"] >= 0).all()
