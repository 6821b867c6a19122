"""The busy union of each group (the disjoint union of its GPU records) is computed once per index and grouping,
however many analyses of the dashboard use it (busy time, utilization bins, idle causes, the gap rules)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from ktrace.analysis import idle, utilization
from ktrace.analysis._kernels import intervals
from ktrace.analysis.dashboard import build_dashboard
from ktrace.analysis.index import TraceIndex
from ktrace.testing import SyntheticConfig, generate


def test_the_dashboard_computes_each_groupings_busy_union_once(monkeypatch: pytest.MonkeyPatch) -> None:
    trace = generate(SyntheticConfig(steps=3, kernels_per_step=20, ranks=2, streams=2))
    ix = TraceIndex(trace)
    starts = {per: ix.sorted_intervals(per)[2] for per in ("rank", "device", "stream")}
    unions: Counter[str] = Counter()

    def counting(kernel: Any) -> Any:
        def run(group: Any, start: Any, *args: Any) -> Any:
            unions.update(per for per, s in starts.items() if start is s)
            return kernel(group, start, *args)

        return run

    monkeypatch.setattr(intervals, "merge_intervals", counting(intervals.merge_intervals))
    monkeypatch.setattr(intervals, "union_length", counting(intervals.union_length))
    build_dashboard(trace, index=ix)
    assert unions["device"] == 1
    assert max(unions.values()) == 1


def test_busy_time_utilization_and_gaps_agree_with_the_shared_union() -> None:
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=30, ranks=2, streams=3))
    ix = TraceIndex(trace)
    group, start, end = utilization.busy_union(trace, "device", index=ix)
    assert utilization.busy_union(trace, "device", index=ix)[1] is start
    busy = utilization.busy_time(trace, "device", index=ix)
    assert busy["busy_ns"].to_list() == np.bincount(group, weights=end - start).astype(np.int64).tolist()
    gaps = idle.gpu_gaps(trace, "device", index=ix)
    assert gaps["gap_ns"].sum() + busy["busy_ns"].sum() == busy["span_ns"].sum()
