"""TraceIndex: one per trace, computed once, shared, passed explicitly, and (under the test suite) read-only."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pytest

from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.summary import summarize
from ktrace.analysis.utilization import busy_time
from ktrace.testing import SyntheticConfig, generate


@dataclass(frozen=True)
class _Pair:
    left: np.ndarray
    right: tuple[np.ndarray, int]


_PAIR = Slot[_Pair]("test.pair")
_PLAIN = Slot[np.ndarray]("test.plain")


def test_index_computes_once_and_freezes_every_array_it_shares() -> None:
    index = TraceIndex(generate(SyntheticConfig(steps=2, kernels_per_step=5)))
    calls = []

    def compute() -> _Pair:
        calls.append(1)
        return _Pair(np.arange(3), (np.arange(4), 5))

    first = index.get(_PAIR, compute)
    assert index.get(_PAIR, compute) is first and len(calls) == 1
    with pytest.raises(ValueError, match="read-only"):
        first.left[0] = 9
    with pytest.raises(ValueError, match="read-only"):
        first.right[0][0] = 9


def test_analysis_arrays_shared_through_the_index_cannot_be_written() -> None:
    index = TraceIndex(generate(SyntheticConfig(steps=2, kernels_per_step=5)))
    start, end = index.sorted_times("stream")
    for shared in (start, end):
        with pytest.raises(ValueError, match="read-only"):
            shared[0] = 0


def test_index_leaves_arrays_writable_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTRACE_READONLY_SHARED", "0")
    index = TraceIndex(generate(SyntheticConfig(steps=2, kernels_per_step=5)))
    assert index.get(_PLAIN, lambda: np.arange(3)).flags.writeable


def test_no_result_is_cached_outside_an_explicit_index() -> None:
    """Without index= each call builds its own index: nothing global, so no result depends on call order."""
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=5))
    assert busy_time(trace) is not busy_time(trace)
    index = TraceIndex(trace)
    assert busy_time(trace, index=index) is busy_time(trace, index=index)
    assert busy_time(trace).equals(busy_time(trace, index=index))


def test_summarize_shares_its_results_through_the_index_it_is_given() -> None:
    trace = generate(SyntheticConfig(steps=3, kernels_per_step=5, ranks=2))
    index = TraceIndex(trace)
    summary = summarize(trace, index=index)
    assert busy_time(trace, per="device", index=index) is summary.busy
    fresh = summarize(trace)
    assert isinstance(fresh.busy, pl.DataFrame) and fresh.busy.equals(summary.busy)


def test_an_index_of_another_trace_is_refused() -> None:
    a = generate(SyntheticConfig(steps=2, kernels_per_step=5))
    b = generate(SyntheticConfig(steps=2, kernels_per_step=5, seed=1))
    with pytest.raises(ValueError, match="another trace"):
        busy_time(a, index=TraceIndex(b))
