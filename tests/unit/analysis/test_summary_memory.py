"""The summary's memory cuts for big traces (issue 29) give the answers of the whole-table passes they replace."""

from __future__ import annotations

import platform
import sys

import numpy as np
import polars as pl
import pytest
from tests.real_traces import fixture_path

from ktrace.analysis import op_attribution
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.kernels import efficiency_sums
from ktrace.analysis.memory_timeline import memory_timeline
from ktrace.analysis.op_attribution import IS_MODULE, IS_OPERATOR, IS_PYTHON_FRAME, THREAD, innermost_at
from ktrace.analysis.operators import operator_self_ns, self_ns_of_operators
from ktrace.importers import load
from ktrace.model.heap import map_large_blocks
from ktrace.model.trace import Trace


@pytest.fixture(scope="module")
def owlv2() -> Trace:
    """The owlv2 fixture: operators, Python frames, nn.Module frames and allocator events."""
    return load(fixture_path("tracelens"))


@pytest.mark.parametrize("rows", [IS_OPERATOR, IS_MODULE, IS_PYTHON_FRAME], ids=["operator", "module", "frame"])
def test_innermost_at_slice_by_slice_is_the_whole_table_pass(
    owlv2: Trace, rows: pl.Expr, monkeypatch: pytest.MonkeyPatch
) -> None:
    points = owlv2.allocations.select(*THREAD, "ts_ns")
    calls = owlv2.api.select(*THREAD, "start_ns")
    whole = (innermost_at(owlv2, points, "ts_ns", rows), innermost_at(owlv2, calls, "start_ns", rows))
    assert owlv2.ops.height > 5 * 997 and (whole[0] >= 0).any() and (whole[1] >= 0).any()
    monkeypatch.setattr(op_attribution, "SLICE_ROWS", 997)  # many slices, one ending mid-thread
    sliced = (innermost_at(owlv2, points, "ts_ns", rows), innermost_at(owlv2, calls, "start_ns", rows))
    np.testing.assert_array_equal(sliced[0], whole[0])
    np.testing.assert_array_equal(sliced[1], whole[1])


def test_memory_timeline_names_are_categorical_with_the_ops_names(owlv2: Trace) -> None:
    timeline = memory_timeline(owlv2)
    assert timeline is not None
    series = timeline.series
    assert series.schema["operator"] == pl.Categorical and series.schema["module"] == pl.Categorical
    points = owlv2.allocations.select(*THREAD, "ts_ns")
    names = owlv2.ops["name"].cast(pl.String).to_list()
    row = innermost_at(owlv2, points, "ts_ns", IS_OPERATOR)  # table order; the series is in time order
    expected = sorted((names[r] if r >= 0 else "") for r in row)
    assert sorted(series["operator"].cast(pl.String).fill_null("").to_list()) == expected
    modules = [m for m in series["module"].cast(pl.String).to_list() if m is not None]
    assert modules and not any(m.startswith(op_attribution.MODULE_PREFIX) for m in modules)
    assert timeline.per_device.schema["peak_operator"] == pl.String
    assert timeline.by_operator.schema["operator"] == pl.String


def test_self_ns_of_operators_is_operator_self_ns_on_the_operator_rows(owlv2: Trace) -> None:
    ix = TraceIndex(owlv2)
    compact = self_ns_of_operators(owlv2, index=ix)
    rows = np.flatnonzero(owlv2.ops.select(IS_OPERATOR).to_series().to_numpy())
    full = operator_self_ns(owlv2, index=ix)
    assert compact.size == rows.size < owlv2.ops.height
    np.testing.assert_array_equal(full[rows], compact)
    assert not full[np.setdiff1d(np.arange(owlv2.ops.height), rows)].any()


def test_efficiency_sums_names_are_sorted_strings(owlv2: Trace) -> None:
    names = efficiency_sums(owlv2)["name"]
    assert names.dtype == pl.String
    assert names.to_list() == sorted(owlv2.kernels["name"].cast(pl.String).unique().to_list())


def test_map_large_blocks_takes_on_glibc() -> None:
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert map_large_blocks() is glibc
