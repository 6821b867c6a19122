"""nn.Module frames and other Python frames beside the operators, checked by hand.

The operators' trace of test_operators.py (nested ops on two threads) plus Python frames (ops.category
python_function); rows 5.. of trace.ops, times in ns:

    tid 1:  5 nn.Module: Net_0 [0,100)
              6 model.py(9): forward [1,99)        (a frame, not a module: never claims a launch)
                7 nn.Module: Linear_0 [5,65)      api at 25 -> kernel ka [200,260)
                8 nn.Module: ReLU_0 [68,92)       api at 75 -> kernel kb [270,280)
              (Net_0 only)                        api at 95 -> memcpy [300,340)
    tid 2:  9 nn.Module: Linear_1 [15,85)         api at 30 -> kernel kc [290,330); api at 90 -> kd: none
    tid 3: 10 threading.py(1): run [150,400)        (a monitor thread's frame: not CPU work)
"""

from __future__ import annotations

import polars as pl
import pytest
from test_operators import nested_ops_trace

from ktrace.analysis.critical_path import critical_path
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.modules import MODULE_COLUMNS, module_of_records, module_summary
from ktrace.analysis.operators import operator_kernels, operator_of_records, operator_self_ns, operator_view
from ktrace.analysis.utilization import active_time_share
from ktrace.model import Trace

FRAMES = {
    "start_ns": [0, 1, 5, 68, 15, 150],
    "end_ns": [100, 99, 65, 92, 85, 400],
    "tid": [1, 1, 1, 1, 2, 3],
    "name": [
        "nn.Module: Net_0",
        "model.py(9): forward",
        "nn.Module: Linear_0",
        "nn.Module: ReLU_0",
        "nn.Module: Linear_1",
        "threading.py(1): run",
    ],
}


def with_frames(trace: Trace) -> Trace:
    ops = trace.ops.with_columns(pl.lit("cpu_op").cast(trace.ops.schema["category"]).alias("category"))
    frames = pl.DataFrame(
        {**FRAMES, "pid": [1] * 6, "category": ["python_function"] * 6},
        schema_overrides={"start_ns": pl.Int64, "end_ns": pl.Int64, "pid": pl.Int64, "tid": pl.Int64},
    )
    extra = frames.with_columns(pl.lit("n0").alias("node"), pl.lit(0).alias("rank"))
    extra = extra.with_columns(pl.lit(None).alias(c) for c in ops.columns if c not in extra.columns)
    both = pl.concat([ops, extra.select(pl.col(c).cast(t) for c, t in ops.schema.items())])
    return Trace(**{**{n: trace.table(n) for n in trace.counts()}, "ops": both}, meta=trace.meta)


def test_python_frames_change_neither_operator_attribution_nor_self_time() -> None:
    trace = with_frames(nested_ops_trace())
    assert operator_of_records(trace).tolist() == [3, 1, 0, -1, -1, 2]  # as without frames
    # operators as without frames; frames get none (the pass runs on the operators alone)
    assert operator_self_ns(trace).tolist() == [60, 20, 30, 30, 20, 0, 0, 0, 0, 0, 0]
    view = operator_view(trace)
    assert view is not None and "nn.Module: Net_0" not in view.per_name["name"].to_list()
    cpu = active_time_share(trace).filter(pl.col("resource") == "cpu")["active_share"]
    assert (
        cpu.to_list()
        == active_time_share(nested_ops_trace()).filter(pl.col("resource") == "cpu")["active_share"].to_list()
    )


def test_python_frames_stay_off_the_critical_path() -> None:
    # HTA's graph takes cpu_op, cuda_runtime and cuda_driver events: frames (here wrapping the operators and
    # one outside them, 150-400) neither join the graph nor widen the whole-trace window
    plain, framed = critical_path(nested_ops_trace()), critical_path(with_frames(nested_ops_trace()))
    assert plain is not None and framed is not None
    assert (framed.start_ns, framed.end_ns, framed.length_ns) == (plain.start_ns, plain.end_ns, plain.length_ns)
    assert (framed.graph_nodes, framed.graph_edges) == (plain.graph_nodes, plain.graph_edges)
    assert framed.items.equals(plain.items)
    assert not set(FRAMES["name"]) & set(framed.items["name"].to_list())


def test_each_record_goes_to_the_innermost_module_frame_on_its_launch_thread() -> None:
    # kernels ka kb kc kd ke, then the memcpy
    assert module_of_records(with_frames(nested_ops_trace())).tolist() == [7, 8, 9, -1, -1, 5]


def test_module_summary_by_hand() -> None:
    trace = with_frames(nested_ops_trace())
    m = module_summary(trace, index=TraceIndex(trace))
    assert m is not None
    assert (m.modules, m.frames, m.attributed) == (4, 4, 4)
    assert m.attributed_gpu_share == pytest.approx(150 / 170)
    assert m.top_by_gpu_time.columns == list(MODULE_COLUMNS)
    assert m.top_by_gpu_time.rows() == [
        # module, calls, cpu total, own gpu, gpu with nested modules, kernels, records
        ("Net_0", 1, 100, 40, 40 + 60 + 10, 0, 1),
        ("Linear_0", 1, 60, 60, 60, 1, 1),
        ("Linear_1", 1, 70, 40, 40, 1, 1),
        ("ReLU_0", 1, 24, 10, 10, 1, 1),
    ]


def test_no_module_frames_no_module_view() -> None:
    assert module_summary(nested_ops_trace()) is None
    assert module_summary(nested_ops_trace(with_ops=False)) is None


def test_kernels_of_each_operator() -> None:
    kernels = operator_kernels(nested_ops_trace(), ["aten::addmm", "aten::relu", "forward"], per_operator=1)
    assert kernels.rows() == [("aten::addmm", "gemm", 2, 100), ("aten::relu", "relu_kernel", 1, 10)]
    assert operator_kernels(nested_ops_trace(), []).height == 0  # no operator to name: an empty, typed join key


def test_summary_json_has_modules_or_says_why_not() -> None:
    from ktrace.analysis.modules import NO_MODULES
    from ktrace.analysis.summary import summarize
    from ktrace.presentation.summary_json import summary_to_dict

    ops = summary_to_dict(summarize(with_frames(nested_ops_trace())))["operators"]
    assert [r["module"] for r in ops["modules"]["top_by_gpu_time"]] == ["Net_0", "Linear_0", "Linear_1", "ReLU_0"]
    assert "modules_note" not in ops
    assert ops["kernels_of_top_operators"][0] == {
        "operator": "aten::addmm",
        "kernel": "gemm",
        "count": 2,
        "gpu_ns": 100,
    }
    bare = summary_to_dict(summarize(nested_ops_trace()))["operators"]
    assert bare["modules"] is None and bare["modules_note"] == NO_MODULES


def test_frames_survive_a_store_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from ktrace.model import store

    trace = with_frames(nested_ops_trace())
    back = store.read(store.write(trace, tmp_path / "t.ktrace"))
    assert back.ops["category"].cast(pl.String).value_counts().sort("category").rows() == [
        ("cpu_op", 5),
        ("python_function", 6),
    ]

    def names(t: Trace) -> list[str | None]:
        return [t.ops["name"].cast(pl.String)[r] if r >= 0 else None for r in module_of_records(t).tolist()]

    assert (
        names(back)
        == names(trace)
        == ["nn.Module: Linear_0", "nn.Module: ReLU_0", "nn.Module: Linear_1", None, None, "nn.Module: Net_0"]
    )
    assert store.read(tmp_path / "t.ktrace", skip=("ops",)).ops.height == 0
