"""The per-trace memo: computed once, shared, and (under the test suite) read-only."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from ktrace.analysis.columns import sorted_times
from ktrace.analysis.utilization import memo
from ktrace.testing import SyntheticConfig, generate


@dataclass(frozen=True)
class _Pair:
    left: np.ndarray
    right: tuple[np.ndarray, int]


def test_memo_computes_once_and_freezes_every_array_it_shares() -> None:
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=5))
    calls = []

    def compute() -> _Pair:
        calls.append(1)
        return _Pair(np.arange(3), (np.arange(4), 5))

    first = memo(trace, "pair", compute)
    assert memo(trace, "pair", compute) is first and len(calls) == 1
    with pytest.raises(ValueError, match="read-only"):
        first.left[0] = 9
    with pytest.raises(ValueError, match="read-only"):
        first.right[0][0] = 9


def test_analysis_arrays_shared_through_the_memo_cannot_be_written() -> None:
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=5))
    start, end = sorted_times(trace, "stream")
    for shared in (start, end):
        with pytest.raises(ValueError, match="read-only"):
            shared[0] = 0


def test_memo_leaves_arrays_writable_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTRACE_READONLY_SHARED", "0")
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=5))
    shared = memo(trace, "plain", lambda: np.arange(3))
    assert shared.flags.writeable
