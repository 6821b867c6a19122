"""Python-frame view: each GPU record goes to the innermost Python source frame on its launch thread (nn.Module
frames and built-in calls left out), checked by hand on the nested-operators trace and on the README demo."""

from __future__ import annotations

import polars as pl
import pytest
from real_traces import fixture_path
from test_operators import nested_ops_trace

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.python_frames import FRAME_COLUMNS, NO_PYTHON_FRAMES, python_frame_of_records, python_frame_summary
from ktrace.analysis.summary import summarize
from ktrace.model import Trace
from ktrace.presentation.summary_json import summary_to_dict

DEMO = fixture_path("tracelens")

# launches (api): tid 1 at 25 (gemm, 60 ns), 75 (relu_kernel, 10 ns), 95 (memcpy, 40 ns); tid 2 at 30 (gemm, 40 ns),
# 90 (gemm, 10 ns); the orphan kernel (10 ns) has no launch call
FRAMES = [  # tid, start, end, name
    (1, 0, 100, "nn.Module: Net_0"),
    (1, 1, 99, "model.py(9): forward"),
    (1, 20, 40, "model.py(12): block"),
    (1, 22, 28, "<built-in method addmm of type object at 0x7f00>"),  # innermost at 25, but a C call
    (1, 70, 80, "model.py(12): block"),
    (2, 0, 100, "train.py(3): step"),
    (2, 85, 95, "nn.Module: ReLU_0"),  # innermost at 90, but a module frame
    (3, 150, 400, "threading.py(1): run"),  # launches nothing
]


def framed(trace: Trace) -> Trace:
    ops = trace.ops.with_columns(pl.lit("cpu_op").cast(trace.ops.schema["category"]).alias("category"))
    tid, start, end, name = (list(c) for c in zip(*FRAMES, strict=True))
    frames = pl.DataFrame(
        {"start_ns": start, "end_ns": end, "pid": [1] * len(tid), "tid": tid, "name": name},
        schema_overrides={"start_ns": pl.Int64, "end_ns": pl.Int64, "pid": pl.Int64, "tid": pl.Int64},
    ).with_columns(category=pl.lit("python_function"), node=pl.lit("n0"), rank=pl.lit(0))
    frames = frames.with_columns(pl.lit(None).alias(c) for c in ops.columns if c not in frames.columns)
    both = pl.concat([ops, frames.select(pl.col(c).cast(t) for c, t in ops.schema.items())])
    return Trace(**{**{n: trace.table(n) for n in trace.counts()}, "ops": both}, meta=trace.meta)


def test_each_record_goes_to_the_innermost_source_frame_on_its_launch_thread() -> None:
    trace = framed(nested_ops_trace())
    names = trace.ops["name"].cast(pl.String).to_list()
    got = [names[r] if r >= 0 else None for r in python_frame_of_records(trace).tolist()]
    # kernels gemm(25) relu(75) gemm(tid 2, 30) gemm(tid 2, 90) orphan, then the memcpy (95)
    assert got == [
        "model.py(12): block",
        "model.py(12): block",
        "train.py(3): step",
        "train.py(3): step",
        None,
        "model.py(9): forward",
    ]


def test_python_frame_summary_by_hand() -> None:
    trace = framed(nested_ops_trace())
    p = python_frame_summary(trace, index=TraceIndex(trace))
    assert p is not None
    # source frames: forward, block x2, step, run (modules and the built-in call left out); names: 4
    assert (p.frames, p.names, p.attributed) == (5, 4, 5)
    assert p.attributed_gpu_share == pytest.approx((60 + 10 + 40 + 10 + 40) / 170)
    assert p.top_by_gpu_time.columns == list(FRAME_COLUMNS)
    assert p.top_by_gpu_time.rows() == [
        # frame, calls, gpu, kernels, records
        ("model.py(12): block", 2, 70, 2, 2),
        ("train.py(3): step", 1, 50, 2, 2),
        ("model.py(9): forward", 1, 40, 0, 1),
    ]


def test_summary_json_has_python_frames_or_says_why_not() -> None:
    ops = summary_to_dict(summarize(framed(nested_ops_trace())))["operators"]
    assert [r["frame"] for r in ops["python_frames"]["top_by_gpu_time"]] == [
        "model.py(12): block",
        "train.py(3): step",
        "model.py(9): forward",
    ]
    assert "python_frames_note" not in ops
    bare = summary_to_dict(summarize(nested_ops_trace()))["operators"]
    assert bare["python_frames"] is None and bare["python_frames_note"] == NO_PYTHON_FRAMES
    assert python_frame_summary(nested_ops_trace(with_ops=False)) is None


def test_demo_kernels_go_to_python_source_lines() -> None:
    from ktrace.importers import load

    trace = load(DEMO)
    ix = TraceIndex(trace)
    p = python_frame_summary(trace, index=ix)
    assert p is not None
    # every launch of the OWLv2 step happens under a Python source frame; the innermost is torch's
    # function-mode hook, softmax and layer_norm next
    assert (p.attributed, p.attributed_gpu_share) == (ix.gpu_columns().size, 1.0)
    top = p.top_by_gpu_time["frame"].to_list()
    assert top[:3] == [
        "torch/utils/_device.py(100): __torch_function__",
        "torch/nn/functional.py(2103): softmax",
        "torch/nn/functional.py(2889): layer_norm",
    ]
    assert not any(f.startswith(("<built-in", "nn.Module: ")) for f in top)
    assert p.frames < trace.ops.height // 2  # 33 k source frames of 89 k ops rows (65 k Python frames)
