"""NVTX ranges as operators for traces without framework operators (ktrace captures, nsys exports): checked by
hand on a small capture, by brute force on a synthetic one, and on the nsys fixture's NVTX ranges.

Hand-built capture (source "ktrace"), rank 0, pid 1; ranges:

    tid 1:  ProfilerStep#1 [0,300)       a step: not an operator
              forward [0,100)            api [60,62)  corr 2 -> kernel kb [220,230)
                attention [10,50)        api [20,22)  corr 1 -> kernel ka [200,215)
              (step only)                api [150,152) corr 3 -> kernel kc [240,250)
    tid 2:  loader [0,200)               api [30,31)  corr 4 -> memcpy     [260,300)
    GPU:    a range on the GPU [200,260) (on_gpu: not an operator)
"""

from __future__ import annotations

import dataclasses

import polars as pl

import ktrace
from ktrace.analysis.kernels import EFFICIENCY_COLUMNS
from ktrace.analysis.range_operators import NVTX_SOURCE, range_operator_summary, range_ops
from ktrace.analysis.summary import summarize
from ktrace.model import Trace, TraceBuilder, TraceMeta
from ktrace.presentation.summary_json import summary_to_dict
from ktrace.testing.synthetic import SyntheticConfig, generate


def capture(source: str = "ktrace") -> Trace:
    b = TraceBuilder("n0", 0, meta=TraceMeta(source=source))
    b.add(
        "kernels",
        {
            "start_ns": [200, 220, 240],
            "end_ns": [215, 230, 250],
            "device": [0] * 3,
            "stream": [7] * 3,
            "correlation_id": [1, 2, 3],
            "name": ["attn_kernel", "gemm", "gemm"],
        },
    )
    b.add(
        "memory",
        {
            "op": ["memcpy"],
            "start_ns": [260],
            "end_ns": [300],
            "device": [0],
            "stream": [7],
            "correlation_id": [4],
            "bytes": [64],
            "copy_kind": ["HtoD"],
            "src_kind": ["pinned"],
            "dst_kind": ["device"],
        },
    )
    b.add(
        "api",
        {
            "start_ns": [20, 60, 150, 30],
            "end_ns": [22, 62, 152, 31],
            "pid": [1] * 4,
            "tid": [1, 1, 1, 2],
            "correlation_id": [1, 2, 3, 4],
            "domain": ["runtime"] * 4,
            "name": ["cudaLaunchKernel"] * 3 + ["cudaMemcpyAsync"],
        },
    )
    b.add(
        "ranges",
        {
            "start_ns": [0, 0, 10, 0, 200],
            "end_ns": [300, 100, 50, 200, 260],
            "pid": [1] * 5,
            "tid": [1, 1, 1, 2, 0],
            "name": ["ProfilerStep#1", "forward", "attention", "loader", "on the GPU"],
            "domain": ["ktrace", "ktrace", "ktrace", "nvtx", "nvtx"],
            "depth": [0, 1, 2, 0, 0],
            "on_gpu": [False, False, False, False, True],
        },
    )
    return b.build()


def test_ranges_as_operators_by_hand() -> None:
    found = range_operator_summary(capture())
    assert found is not None and found.source == NVTX_SOURCE and found.modules is None
    assert (found.operators, found.records, found.attributed) == (3, 4, 3)  # kc's launch is in the step only
    assert found.attributed_gpu_share == (15 + 10 + 40) / (15 + 10 + 10 + 40)
    assert found.top_by_gpu_time.drop(EFFICIENCY_COLUMNS).rows() == [  # figures: test_kernel_efficiency
        # name, calls, cpu total, cpu self, gpu, kernels, gpu records, mean latency (kernel start - call start)
        ("loader", 1, 200, 200, 40, 0, 1, None),
        ("attention", 1, 40, 40, 15, 1, 1, 200.0 - 20),
        ("forward", 1, 100, 60, 10, 1, 1, 220.0 - 60),
    ]
    assert found.kernels_of_top.select("operator", "kernel").rows() == [
        ("attention", "attn_kernel"),
        ("forward", "gemm"),
    ]


def test_only_sources_without_operators_fall_back_to_ranges() -> None:
    assert range_ops(capture("kineto")) is None  # Kineto: no cpu_op means none (`--no-ops`)
    trace = capture()
    with_op = TraceBuilder("n0", 0)
    with_op.add("ops", {"start_ns": [0], "end_ns": [5], "pid": [1], "tid": [1], "name": ["aten::mm"]})
    assert range_ops(dataclasses.replace(trace, ops=with_op.build().ops)) is None
    steps_only = trace.ranges.filter(pl.col("name").cast(pl.String) == "ProfilerStep#1")
    assert range_ops(dataclasses.replace(trace, ranges=steps_only)) is None


def test_summary_says_nvtx_fed_the_operators() -> None:
    d = summary_to_dict(summarize(capture()))["operators"]
    assert d["source"] == "nvtx" and d["operators"] == 3 and "modules_note" not in d
    assert [r["name"] for r in d["top_by_gpu_time"]] == ["loader", "attention", "forward"]
    kineto = summary_to_dict(summarize(capture("kineto")))
    assert kineto["operators"] is None


def _naive_innermost(trace: Trace) -> dict[str, int]:
    """Kernels per range name, by brute force: each launch call's innermost CPU non-step range on its thread."""
    ranges = trace.ranges.filter(~pl.col("on_gpu") & ~pl.col("name").cast(pl.String).str.starts_with("ProfilerStep"))
    spans = ranges.select("pid", "tid", "start_ns", "end_ns", pl.col("name").cast(pl.String)).rows()
    calls = {r[0]: r[1:] for r in trace.api.select("correlation_id", "pid", "tid", "start_ns").rows()}
    counts: dict[str, int] = {}
    for corr in trace.kernels["correlation_id"].to_list():
        if corr not in calls:
            continue
        pid, tid, t = calls[corr]
        inside = [s for s in spans if s[0] == pid and s[1] == tid and s[2] <= t < s[3]]
        if inside:
            innermost = max(inside, key=lambda s: (s[2], -s[3]))
            counts[innermost[4]] = counts.get(innermost[4], 0) + 1
    return counts


def test_synthetic_capture_against_brute_force() -> None:
    trace = generate(SyntheticConfig(steps=4, kernels_per_step=30, streams=2))
    found = range_operator_summary(trace, top=50)
    assert found is not None
    kernels = dict(found.top_by_gpu_time.select("name", "kernels").rows())
    naive = _naive_innermost(trace)
    assert {k: v for k, v in kernels.items() if v} == naive
    assert {"forward", "backward", "optimizer.step"} <= set(naive)


def test_nsys_nvtx_ranges_are_the_operators(real_trace_path) -> None:  # type: ignore[no-untyped-def]
    trace = ktrace.open(real_trace_path("power_iteration"))
    assert trace.ops.height == 0 and trace.meta.source == "nsys"
    found = range_operator_summary(trace, top=1000)
    assert found is not None and found.source == NVTX_SOURCE
    kernels = dict(found.top_by_gpu_time.select("name", "kernels").rows())
    assert {k: v for k, v in kernels.items() if v} == _naive_innermost(trace)
    per_name = found.top_by_gpu_time
    assert int(per_name["gpu_records"].sum()) == found.attributed
    assert (per_name["cpu_self_ns"] <= per_name["cpu_total_ns"]).all()
