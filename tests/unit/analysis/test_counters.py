"""Counter statistics over a window, per instance and pooled, checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from ktrace.analysis.counters import counter_stats
from ktrace.model.builder import TraceBuilder


def test_window_and_percentiles_match_numpy() -> None:
    b = TraceBuilder("n", -1)
    ts = np.arange(100, dtype=np.int64) * 10
    vals = np.random.default_rng(1).uniform(0, 100, 100)
    b.add("counters", {"ts_ns": ts, "metric": ["gpu.util"] * 100, "instance": np.zeros(100, np.int32), "value": vals})
    b.add(
        "counters", {"ts_ns": ts, "metric": ["gpu.util"] * 100, "instance": np.ones(100, np.int32), "value": vals / 2}
    )
    t = b.build()
    s = counter_stats(t, start_ns=200, end_ns=500)
    r0 = s.filter(s["instance"] == 0).row(0, named=True)
    window = vals[20:50]
    assert r0["samples"] == 30
    assert r0["p95"] == pytest.approx(np.percentile(window, 95))
    assert r0["p99"] == pytest.approx(np.percentile(window, 99))
    assert r0["min"] == pytest.approx(window.min()) and r0["max"] == pytest.approx(window.max())
    pooled = counter_stats(t, per_instance=False, metrics=["gpu.util"])
    assert pooled.height == 1 and pooled["samples"][0] == 200
    assert counter_stats(t, metrics=["cpu.util"]).height == 0
