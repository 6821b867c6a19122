"""Load balance across ranks: busy spread, step spread and the utilization-histogram distance."""

from __future__ import annotations

import numpy as np
import pytest

from ktrace.analysis.ranks import histogram_distance, load_balance
from ktrace.model.builder import TraceBuilder


def test_histogram_distance_is_total_variation() -> None:
    same = {"a": np.array([0.05, 0.95]), "b": np.array([0.05, 0.95])}
    assert histogram_distance(same)[0] == pytest.approx(0.0)
    apart = {"a": np.array([0.05, 0.05]), "b": np.array([0.95, 0.95]), "c": np.array([0.05, 0.95])}
    dist, pair = histogram_distance(apart)
    assert dist == pytest.approx(1.0) and pair == ("a", "b")
    assert histogram_distance({"a": np.array([0.5])}) == (None, None)


def test_busy_spread_of_uneven_ranks() -> None:
    b = TraceBuilder("n", 0)
    b.add("kernels", {"start_ns": [0, 50], "end_ns": [100, 150], "device": [0, 0], "name": ["k", "k"]})
    b.add("kernels", {"start_ns": [0], "end_ns": [50], "device": [1], "name": ["k"]}, rank=1)
    lb = load_balance(b.build(), bins=10)
    assert lb.per_rank["busy_ns"].to_list() == [150, 50]
    assert lb.busy_spread == pytest.approx(100 / 150)
    assert lb.step_spread is None and lb.source == "kernels"
    assert lb.histogram_distance is not None and 0 < lb.histogram_distance <= 1
