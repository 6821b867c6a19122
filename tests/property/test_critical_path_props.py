"""The critical path on arbitrary valid traces (random times, links, syncs, clock skew): never an exception, and
a result that adds up: the path's segments chain, their weights sum to its length, the composition sums to it,
and no what-if lengthens it."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from ktrace.analysis.critical_path import critical_path
from ktrace.model.trace import Trace
from ktrace.testing.strategies import traces


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces(max_ranks=2, max_rows=15))
def test_critical_path_adds_up(trace: Trace) -> None:
    cp = critical_path(trace)
    if cp is None:
        return
    seg = cp.path_segments
    assert int(seg["weight_ns"].sum()) == cp.length_ns
    assert int(cp.composition["ns"].sum()) == cp.length_ns
    assert (seg["weight_ns"] >= 0).all()
    assert cp.path_nodes == (seg.height + 1 if seg.height else 0)
    assert (cp.what_if["saved_ns"] >= 0).all()
    assert (cp.items["ns"] >= 0).all() and int(cp.items["ns"].sum()) <= cp.length_ns
    if cp.backward_edges() == 0:  # clock skew aside, the path runs forward in time within its window
        assert cp.length_ns <= cp.end_ns - cp.start_ns
