"""Operator attribution and the operator view, checked by hand on a small trace with nested ops on two threads.

Timeline (ns), rank 0, pid 1; ops listed in table order (not time order) with their row:

    tid 1:  2 forward [0,100)
              4 aten::linear [10,60)
                3 aten::addmm [20,50)     api [25,30) corr 1 -> kernel ka [200,260)
              1 aten::relu [70,90)        api [75,78) corr 2 -> kernel kb [270,280)
              (in forward only)           api [95,97) corr 3 -> memcpy   [300,340)
    tid 2:  0 aten::addmm [20,80)         api [30,35) corr 4 -> kernel kc [290,330)  (tid 1's addmm also spans t=30)
            (no op)                       api [90,92) corr 5 -> kernel kd [340,350)
    (no launch call)                                   corr 9 -> kernel ke [360,370)
"""

from __future__ import annotations

import polars as pl
import pytest

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.kernels import EFFICIENCY_COLUMNS
from ktrace.analysis.operators import (
    OPERATOR_COLUMNS,
    operator_of_records,
    operator_self_ns,
    operator_view,
    top_operators,
)
from ktrace.model import Trace, TraceBuilder


def nested_ops_trace(with_ops: bool = True) -> Trace:
    b = TraceBuilder("n0", 0)
    b.add(
        "kernels",
        {
            "start_ns": [200, 270, 290, 340, 360],
            "end_ns": [260, 280, 330, 350, 370],
            "device": [0] * 5,
            "stream": [7, 7, 8, 8, 8],
            "correlation_id": [1, 2, 4, 5, 9],
            "name": ["gemm", "relu_kernel", "gemm", "gemm", "orphan"],
        },
    )
    b.add(
        "memory",
        {
            "op": ["memcpy"],
            "start_ns": [300],
            "end_ns": [340],
            "device": [0],
            "stream": [7],
            "correlation_id": [3],
            "bytes": [64],
            "copy_kind": ["HtoD"],
            "src_kind": ["pinned"],
            "dst_kind": ["device"],
        },
    )
    b.add(
        "api",
        {
            "start_ns": [25, 75, 95, 30, 90],
            "end_ns": [30, 78, 97, 35, 92],
            "pid": [1] * 5,
            "tid": [1, 1, 1, 2, 2],
            "correlation_id": [1, 2, 3, 4, 5],
            "domain": ["runtime"] * 5,
            "name": ["cudaLaunchKernel", "cudaLaunchKernel", "cudaMemcpyAsync", "cudaLaunchKernel", "cudaLaunchKernel"],
        },
    )
    if with_ops:
        b.add(
            "ops",
            {
                "start_ns": [20, 70, 0, 20, 10],
                "end_ns": [80, 90, 100, 50, 60],
                "pid": [1] * 5,
                "tid": [2, 1, 1, 1, 1],
                "name": ["aten::addmm", "aten::relu", "forward", "aten::addmm", "aten::linear"],
            },
        )
    return b.build()


def test_each_record_goes_to_the_innermost_operator_on_its_launch_thread() -> None:
    # records: kernels ka kb kc kd ke, then the memcpy
    assert operator_of_records(nested_ops_trace()).tolist() == [3, 1, 0, -1, -1, 2]


def test_self_time_is_the_span_less_direct_children() -> None:
    # rows: addmm(t2) 60; relu 20; forward 100 - linear 50 - relu 20; addmm(t1) 30; linear 50 - addmm 30
    assert operator_self_ns(nested_ops_trace()).tolist() == [60, 20, 30, 30, 20]


def test_operator_view_by_hand() -> None:
    trace = nested_ops_trace()
    view = operator_view(trace, index=TraceIndex(trace))
    assert view is not None
    assert view.per_name.columns == list(OPERATOR_COLUMNS)
    assert view.per_name.drop(EFFICIENCY_COLUMNS).rows() == [  # the launch figures: test_kernel_efficiency
        # name, calls, cpu total, cpu self, gpu, kernels, gpu records, mean launch latency (kernel start - call start)
        ("aten::addmm", 2, 90, 90, 100, 2, 2, ((200 - 25) + (290 - 30)) / 2),
        ("forward", 1, 100, 30, 40, 0, 1, None),
        ("aten::relu", 1, 20, 20, 10, 1, 1, 270.0 - 75),
        ("aten::linear", 1, 50, 20, 0, 0, 0, None),
    ]
    assert (view.records, view.attributed) == (6, 4)
    assert view.attributed_gpu_share == pytest.approx(150 / 170)
    assert top_operators(view, "cpu_self", 2)["name"].to_list() == ["aten::addmm", "forward"]
    assert top_operators(view, "gpu")["name"].to_list() == ["aten::addmm", "forward", "aten::relu"]


def test_no_ops_no_view() -> None:
    trace = nested_ops_trace(with_ops=False)
    assert operator_view(trace) is None
    assert (operator_of_records(trace) == -1).all()


def test_ops_of_another_rank_never_claim_a_launch() -> None:
    trace = nested_ops_trace()
    moved = trace.ops.with_columns(rank=pl.lit(1, pl.Int32))
    other = Trace(**{**{n: trace.table(n) for n in trace.counts()}, "ops": moved}, meta=trace.meta)
    assert (operator_of_records(other) == -1).all()


def test_summary_carries_operators_or_says_why_not() -> None:
    from ktrace.analysis.summary import NO_OPERATORS, summarize
    from ktrace.presentation.summary_json import summary_to_dict

    d = summary_to_dict(summarize(nested_ops_trace()))
    ops = d["operators"]
    assert (ops["operators"], ops["records"], ops["attributed_records"]) == (4, 6, 4)
    assert [r["name"] for r in ops["top_by_gpu_time"]] == ["aten::addmm", "forward", "aten::relu"]
    assert [r["name"] for r in ops["top_by_cpu_self_time"]][:2] == ["aten::addmm", "forward"]
    assert NO_OPERATORS not in d["notes"]
    bare = summary_to_dict(summarize(nested_ops_trace(with_ops=False)))
    assert bare["operators"] is None and NO_OPERATORS in bare["notes"]
