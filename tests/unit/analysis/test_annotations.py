"""Custom annotation histograms (regex or exact name)."""

from __future__ import annotations

import numpy as np
import pytest

from ktrace.analysis.annotation_histograms import annotation_histogram
from ktrace.model.builder import TraceBuilder


def _trace() -> TraceBuilder:
    b = TraceBuilder("n", 0)
    durs = [10, 20, 30, 40, 100]
    names = ["backward", "backward", "backward", "forward", "backward_hook"]
    b.add(
        "ranges",
        {
            "start_ns": [0] * 5,
            "end_ns": durs,
            "pid": [1] * 5,
            "tid": [1] * 5,
            "name": names,
            "domain": ["nvtx"] * 5,
            "depth": [1] * 5,
            "on_gpu": [False] * 5,
        },
    )
    return b


def test_regex_histogram_matches_numpy() -> None:
    h = annotation_histogram(_trace().build(), "^backward", bins=3)
    assert h.count == 4
    counts, edges = np.histogram([10, 20, 30, 100], bins=3)
    assert h.counts == tuple(counts) and h.edges_ns == pytest.approx(tuple(edges))
    assert h.stats["name"].to_list() == ["backward_hook", "backward"]


def test_exact_name_and_no_match() -> None:
    t = _trace().build()
    assert annotation_histogram(t, "backward", regex=False).count == 3
    none = annotation_histogram(t, "optimizer")
    assert none.count == 0 and none.counts == ()
    assert annotation_histogram(t, "backward", on_gpu=True).count == 0
    with pytest.raises(ValueError):
        annotation_histogram(t, "x", bins=0)
