"""summarize() composes every analysis; summary_to_dict() is stable and JSON-ready."""

from __future__ import annotations

import json

import pytest

from ktrace.analysis.summary import summarize
from ktrace.model.trace import Trace
from ktrace.presentation.summary_json import summary_to_dict


def test_summary_of_a_synthetic_job(synthetic_trace: Trace) -> None:
    s = summarize(synthetic_trace, top=5, annotations=("backward",))
    assert s.ranks == 2 and s.kernels == synthetic_trace.kernels.height
    assert s.top_by_time.height == 6 and s.top_by_time["name"][-1] == "other"
    assert s.phases.steps == 8 and s.load_balance is not None  # steps per rank (2 ranks x 8 steps)
    assert int(s.top_by_time["count"].sum()) == s.kernels
    assert s.annotations[0].count == 16
    assert set(s.precision["precision"]) >= {"FP32", "BF16", "FP16", "communication"}


def test_dict_is_deterministic_and_json_ready(synthetic_trace: Trace) -> None:
    a = summary_to_dict(summarize(synthetic_trace, top=3))
    b = summary_to_dict(summarize(synthetic_trace, top=3))
    text = json.dumps(a, sort_keys=True)
    assert text == json.dumps(b, sort_keys=True)
    assert list(a) == sorted(a)
    assert "steps" not in a and a["phases"]["steps"] == 8
    assert all(len(str(v).split(".")[-1]) <= 6 for v in a["phases"].values() if isinstance(v, float))


@pytest.mark.parametrize("name", ["alexnet", "dlrm", "cloverleaf"])
def test_idle_by_cause_sums_to_each_devices_idle_time(name: str) -> None:
    """Issue #17: the per-device idle causes added the idle time of every stream (alexnet: host_wait 24.87 s in a
    12.92 s span; DLRM rank 0: 22.2 ms of 6.4 ms idle). They now split the device's own idle time."""
    import polars as pl
    from real_traces import fixture_path

    import ktrace

    s = summarize(ktrace.open(fixture_path(name)))
    keys = ["rank", "device"]
    by_cause = s.idle.group_by(keys).agg(pl.col("idle_ns").sum().alias("causes"))
    both = s.busy.select(*keys, "idle_ns").join(by_cause, on=keys, how="left").fill_null(0)
    assert both.height and (both["idle_ns"] == both["causes"]).all(), both
