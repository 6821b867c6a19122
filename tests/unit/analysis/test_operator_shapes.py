"""Operators by input shape (ops.input_dims), checked by hand on a small trace and against the operator view on
a real trace recorded with record_shapes=True.

Timeline (ns), rank 0, pid 1, tid 1; ops in table order with their shapes:

    0 aten::mm  [0,100)   [[2, 3], [3, 4]]   api [10,15)   corr 1 -> kernel [200,250)
    1 aten::mm  [100,200) [[8, 3], [3, 4]]   api [110,115) corr 2 -> kernel [260,360)
    2 aten::mm  [200,300) [[2, 3], [3, 4]]   api [210,212) corr 3 -> kernel [370,400)
    3 aten::add [300,400) (no shapes)
    4   aten::mul [320,350) [[1]]            api [330,332) corr 4 -> kernel [410,420)
    5 a Python frame [0,400) (not an operator; its shapes are null)
"""

from __future__ import annotations

import polars as pl
import pytest

import ktrace
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.kernels import EFFICIENCY_COLUMNS
from ktrace.analysis.operator_shapes import SHAPE_COLUMNS, has_shapes, operators_by_shape, with_shapes
from ktrace.analysis.operators import operator_summary, operator_view
from ktrace.model import Trace, TraceBuilder

MM_SMALL, MM_BIG, ONE = "[[2, 3], [3, 4]]", "[[8, 3], [3, 4]]", "[[1]]"


def shaped_trace(shapes: bool = True) -> Trace:
    b = TraceBuilder("n0", 0)
    b.add(
        "kernels",
        {
            "start_ns": [200, 260, 370, 410],
            "end_ns": [250, 360, 400, 420],
            "device": [0] * 4,
            "stream": [7] * 4,
            "correlation_id": [1, 2, 3, 4],
            "name": ["gemm_a", "gemm_b", "gemm_a", "mul_kernel"],
        },
    )
    b.add(
        "api",
        {
            "start_ns": [10, 110, 210, 330],
            "end_ns": [15, 115, 212, 332],
            "pid": [1] * 4,
            "tid": [1] * 4,
            "correlation_id": [1, 2, 3, 4],
            "domain": ["runtime"] * 4,
            "name": ["cudaLaunchKernel"] * 4,
        },
    )
    dims = [MM_SMALL, MM_BIG, MM_SMALL, None, ONE, None] if shapes else [None] * 6
    b.add(
        "ops",
        {
            "start_ns": [0, 100, 200, 300, 320, 0],
            "end_ns": [100, 200, 300, 400, 350, 400],
            "pid": [1] * 6,
            "tid": [1] * 6,
            "name": ["aten::mm", "aten::mm", "aten::mm", "aten::add", "aten::mul", "train.py(9): step"],
            "category": ["cpu_op"] * 5 + ["python_function"],
            "input_dims": dims,
        },
    )
    return b.build()


def test_operators_by_shape_by_hand() -> None:
    trace = shaped_trace()
    assert has_shapes(trace)
    frame = operators_by_shape(trace, index=TraceIndex(trace))
    assert frame is not None and frame.columns == list(SHAPE_COLUMNS)
    assert frame.drop(EFFICIENCY_COLUMNS).rows() == [  # the launch figures: test_kernel_efficiency
        # name, shapes, calls, cpu total, cpu self, gpu, kernels, records, mean latency (kernel start - call start)
        ("aten::mm", MM_BIG, 1, 100, 100, 100, 1, 1, 260.0 - 110),
        ("aten::mm", MM_SMALL, 2, 200, 200, 80, 2, 2, ((200 - 10) + (370 - 210)) / 2),
        ("aten::mul", ONE, 1, 30, 30, 10, 1, 1, 410.0 - 330),
        ("aten::add", None, 1, 100, 70, 0, 0, 0, None),
    ]


def test_without_shapes_one_row_per_name_like_the_operator_view() -> None:
    trace = shaped_trace(shapes=False)
    assert not has_shapes(trace)
    frame = operators_by_shape(trace)
    view = operator_view(trace)
    assert frame is not None and view is not None
    assert frame["input_dims"].null_count() == frame.height
    assert frame.drop("input_dims").sort("name").rows() == view.per_name.sort("name").rows()


def test_the_summary_has_by_shape_when_asked_or_when_the_trace_has_shapes() -> None:
    plain = shaped_trace(shapes=False)
    assert with_shapes(plain, operator_summary(plain), asked=False).by_shape is None  # type: ignore[union-attr]
    asked = with_shapes(plain, operator_summary(plain), asked=True)
    assert asked is not None and asked.by_shape is not None and asked.by_shape.height == 3  # mm, mul, add
    shaped = shaped_trace()
    found = with_shapes(shaped, operator_summary(shaped), asked=False, top=2)
    assert found is not None and found.by_shape is not None
    assert found.by_shape["input_dims"].to_list() == [MM_BIG, MM_SMALL]
    assert with_shapes(shaped, None, asked=True) is None


def test_summary_json_by_shape_only_with_shapes_or_when_asked() -> None:
    from ktrace.analysis.summary import summarize
    from ktrace.presentation.summary_json import summary_to_dict

    assert "by_shape" not in summary_to_dict(summarize(shaped_trace(shapes=False)))["operators"]
    asked = summary_to_dict(summarize(shaped_trace(shapes=False), by_shape=True))["operators"]
    assert [r["input_dims"] for r in asked["by_shape"]] == [None, None, None]
    rows = summary_to_dict(summarize(shaped_trace()))["operators"]["by_shape"]
    assert [(r["name"], r["input_dims"], r["calls"]) for r in rows] == [
        ("aten::mm", MM_BIG, 1),
        ("aten::mm", MM_SMALL, 2),
        ("aten::mul", ONE, 1),
        ("aten::add", None, 1),
    ]


@pytest.mark.parametrize("name", ["resnet50", "tracelens"])
def test_real_trace_shapes_add_up_to_the_operator_view(name: str, real_trace_path) -> None:  # type: ignore[no-untyped-def]
    trace = ktrace.open(real_trace_path(name))
    ix = TraceIndex(trace)
    frame = operators_by_shape(trace, index=ix)
    view = operator_view(trace, index=ix)
    assert frame is not None and view is not None
    assert frame.height > view.per_name.height  # the same operator ran on several shapes
    sums = ["calls", "cpu_total_ns", "cpu_self_ns", "gpu_ns", "kernels", "gpu_records"]
    added = frame.group_by("name").agg(pl.col(sums).sum()).sort("name")
    assert added.rows() == view.per_name.select("name", *sums).sort("name").rows()
    assert frame.filter(pl.col("input_dims").is_null()).height < frame.height / 10
