"""The memory timeline, checked by hand on a small trace with allocations and frees on two threads inside nested ops
and two devices: tests/reference/memory_trace.py draws it, with every expected figure."""

from __future__ import annotations

import polars as pl
import pytest
from reference.memory_trace import EVENTS, T, memory_trace

from ktrace.analysis.memory_timeline import PER_DEVICE_COLUMNS, memory_timeline, plot_series
from ktrace.analysis.summary import NO_MEMORY_TIMELINE, summarize
from ktrace.model import Trace, TraceBuilder
from ktrace.presentation.summary_json import summary_to_dict


def _device(trace: Trace, device: int) -> dict[str, object]:
    m = memory_timeline(trace)
    assert m is not None
    assert m.per_device.columns == list(PER_DEVICE_COLUMNS)
    return m.per_device.filter(pl.col("device") == device).row(0, named=True)


def test_peak_and_the_operator_allocating_at_it() -> None:
    d0 = _device(memory_trace(), 0)
    assert (d0["peak_allocated_bytes"], d0["peak_ns"], d0["peak_operator"]) == (964, T + 35, "aten::mm")
    assert d0["peak_reserved_bytes"] == 2048 and d0["end_allocated_bytes"] == 350
    d1 = _device(memory_trace(), 1)
    assert (d1["peak_allocated_bytes"], d1["peak_ns"], d1["peak_operator"]) == (1000, T + 80, None)


def test_without_totals_allocated_bytes_are_a_running_sum() -> None:
    m = memory_timeline(memory_trace(totals=False))
    assert m is not None and m.running_sum
    d0 = m.per_device.row(0, named=True)
    assert (d0["peak_allocated_bytes"], d0["peak_ns"], d0["end_allocated_bytes"]) == (900, T + 35, 286)
    series = m.series.filter(pl.col("device") == 0)
    assert series["allocated_bytes"].to_list() == [100, 400, 900, 600, 100, 300, 350, 286]
    assert series["reserved_bytes"].null_count() == 8


def test_each_allocation_belongs_to_the_innermost_operator_on_its_own_thread() -> None:
    m = memory_timeline(memory_trace())
    assert m is not None
    ops = m.series.sort("ts_ns")["operator"].to_list()
    assert ops == ["aten::empty", "aten::zeros", "aten::mm", "aten::zeros", "aten::mm", "forward", None, None, None]


def test_never_freed_and_churn() -> None:
    d0 = _device(memory_trace(), 0)
    assert (d0["allocations"], d0["frees"], d0["allocated_bytes"], d0["freed_bytes"]) == (5, 3, 1150, 864)
    assert (d0["never_freed"], d0["never_freed_bytes"]) == (3, 350)
    span_s = 130e-9  # the trace runs from T (forward, step 0) to T + 130 (the last event)
    assert d0["allocations_per_s"] == pytest.approx(5 / span_s)
    assert d0["frees_per_s"] == pytest.approx(3 / span_s)
    d1 = _device(memory_trace(), 1)
    assert (d1["never_freed"], d1["never_freed_bytes"]) == (1, 1000)


def test_top_allocating_operators() -> None:
    m = memory_timeline(memory_trace())
    assert m is not None
    rows = m.by_operator.rows()
    assert rows == [
        (None, 2, 1050, 2, 1050),
        ("aten::mm", 1, 500, 0, 0),
        ("aten::zeros", 1, 300, 0, 0),
        ("forward", 1, 200, 1, 200),
        ("aten::empty", 1, 100, 1, 100),
    ]


def test_without_addresses_never_freed_is_unknown() -> None:
    m = memory_timeline(memory_trace(addresses=False))
    assert m is not None and not m.addresses
    assert m.per_device["never_freed"].null_count() == 2
    assert m.by_operator["never_freed_bytes"].null_count() == m.by_operator.height


def test_growth_step_over_step() -> None:
    m = memory_timeline(memory_trace(totals=False))
    assert m is not None
    g = m.growth.sort("device", "step")
    assert g.select("device", "step", "end_ns", "allocated_bytes", "growth_bytes").rows() == [
        (0, 0, T + 50, 100, None),
        (0, 1, T + 125, 350, 250),
        (1, 0, T + 50, None, None),
        (1, 1, T + 125, 1000, None),
    ]


def test_nvml_counters_when_there_are_no_allocator_events() -> None:
    b = TraceBuilder("n0", 0)
    b.add(
        "counters",
        {
            "ts_ns": [T, T + 10, T + 20, T + 30],
            "metric": ["gpu.mem_used_bytes"] * 3 + ["gpu.util"],
            "instance": [0, 0, 0, 0],
            "value": [1e9, 3e9, 2e9, 50.0],
        },
        rank=-1,
    )
    m = memory_timeline(b.build())
    assert m is not None and m.source == "nvml"
    d0 = m.per_device.row(0, named=True)
    assert (d0["rank"], d0["peak_allocated_bytes"], d0["peak_ns"], d0["peak_operator"]) == (-1, 3e9, T + 10, None)
    assert d0["allocations"] is None and m.by_operator.height == 0


def test_plot_series_keeps_the_peak() -> None:
    m = memory_timeline(memory_trace())
    assert m is not None
    thin = plot_series(m, max_points=3)
    assert thin.height < m.series.height
    assert int(thin.filter(pl.col("device") == 0)["allocated_bytes"].max()) == 964  # type: ignore[arg-type]


def test_summary_json_key() -> None:
    d = summary_to_dict(summarize(memory_trace()))
    mt = d["memory_timeline"]
    assert mt["source"] == "allocator" and mt["events"] == len(EVENTS)
    assert mt["per_device"][0]["peak_operator"] == "aten::mm"
    empty = summary_to_dict(summarize(TraceBuilder().build()))
    assert empty["memory_timeline"] is None and NO_MEMORY_TIMELINE in empty["notes"]


def test_a_zero_byte_event_is_neither_an_allocation_nor_a_free() -> None:
    b = TraceBuilder("n0", 0)
    b.add("allocations", {"ts_ns": [T, T + 1, T + 2], "device": [0] * 3, "address": [1, 2, 1], "bytes": [8, 0, -8]})
    m = memory_timeline(b.build())
    assert m is not None
    assert m.per_device.select("allocations", "frees", "never_freed").row(0) == (1, 1, 0)


def test_the_peak_names_its_nn_module_where_the_trace_has_module_frames() -> None:
    """A Kineto with_modules trace: python_function frames `nn.Module: Linear_0` around the operators. The peak's
    module is the innermost module frame on the allocating thread; Python frames are never the operator."""
    b = TraceBuilder("n0", 0)
    b.add(
        "ops",
        {
            "start_ns": [T, T + 10, T + 20, T + 20],
            "end_ns": [T + 100, T + 90, T + 30, T + 50],
            "pid": [1] * 4,
            "tid": [1, 1, 1, 2],
            "name": ["nn.Module: Model_0", "nn.Module: Linear_0", "aten::mm", "nn.Module: Other_0"],
            "category": ["python_function", "python_function", "cpu_op", "python_function"],
        },
    )
    b.add(
        "allocations",
        {"ts_ns": [T + 5, T + 25], "device": [0, 0], "pid": [1, 1], "tid": [1, 1], "address": [1, 2], "bytes": [8, 64]},
    )
    m = memory_timeline(b.build())
    assert m is not None
    row = m.per_device.row(0, named=True)
    assert (row["peak_operator"], row["peak_module"]) == ("aten::mm", "Linear_0")
    assert m.series.sort("ts_ns").select("operator", "module").rows() == [(None, "Model_0"), ("aten::mm", "Linear_0")]
