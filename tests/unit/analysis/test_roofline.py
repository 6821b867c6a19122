"""Roofline per (operator, shapes, dtype) and MFU per step: by hand on a small trace, and GEMM FLOPs on real
traces against benchmarks/check_gemm_flops.py (which reads the raw JSON without ktrace code).

Timeline (ns), rank 0, pid 1, tid 1, ProfilerStep#1 [0, 2000):

    0 aten::linear [0,100)   x [64, 128], W [256, 128], b [256] bf16
    1   aten::addmm [10,90)  api [20,25) corr 1 -> kernel [200,1200)   (owned by the linear: counted once)
    2 aten::cat [100,150)    TensorList (no model)      api [110,115) corr 2 -> kernel [1300,1400)
    3 aten::relu [150,200)   [64, 256] bf16             api [160,162) corr 3 -> kernel [1500,1532)
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from tests.real_traces import benchmark_script, fixture_path

import ktrace
from ktrace.analysis.gpu_peaks import TABLE
from ktrace.analysis.roofline import NO_SHAPES, ROOFLINE_COLUMNS, call_cost, roofline
from ktrace.model import Trace, TraceBuilder, store
from ktrace.model.trace import frame_from_columns
from ktrace.presentation.hardware_json import roofline_dict
from ktrace.presentation.json_rows import frame_records

BF = '"c10::BFloat16"'
LINEAR_FLOPS = 2 * 64 * 256 * 128 + 64 * 256  # + the bias add
LINEAR_BYTES = (64 * 128 + 256 * 128 + 64 * 256 + 256) * 2
RELU_BYTES = 2 * 64 * 256 * 2


def small_trace(gpu: str = "NVIDIA H100 80GB HBM3", types: bool = True) -> Trace:
    b = TraceBuilder("n0", 0)
    b.add(
        "kernels",
        {
            "start_ns": [200, 1300, 1500],
            "end_ns": [1200, 1400, 1532],
            "device": [0] * 3,
            "stream": [7] * 3,
            "correlation_id": [1, 2, 3],
            "name": ["gemm", "cat_kernel", "relu_kernel"],
        },
    )
    b.add(
        "api",
        {
            "start_ns": [20, 110, 160],
            "end_ns": [25, 115, 162],
            "pid": [1] * 3,
            "tid": [1] * 3,
            "correlation_id": [1, 2, 3],
            "domain": ["runtime"] * 3,
            "name": ["cudaLaunchKernel"] * 3,
        },
    )
    b.add(
        "ops",
        {
            "start_ns": [0, 10, 100, 150],
            "end_ns": [100, 90, 150, 200],
            "pid": [1] * 4,
            "tid": [1] * 4,
            "name": ["aten::linear", "aten::addmm", "aten::cat", "aten::relu"],
            "category": ["cpu_op"] * 4,
            "input_dims": [
                "[[64, 128], [256, 128], [256]]",
                "[[256], [64, 128], [128, 256], [], []]",
                "[[], []]",
                "[[64, 256]]",
            ],
            "input_types": [
                f"[{BF}, {BF}, {BF}]",
                f'[{BF}, {BF}, {BF}, "Scalar", "Scalar"]',
                '["TensorList", "Int"]',
                f"[{BF}]",
            ]
            if types
            else [None] * 4,
        },
    )
    b.add(
        "ranges",
        {
            "start_ns": [0],
            "end_ns": [2000],
            "pid": [1],
            "tid": [1],
            "name": ["ProfilerStep#1"],
            "on_gpu": [False],
            "domain": ["user_annotation"],
            "depth": [0],
        },
    )
    b.add("devices", {"device": [0], "name": [gpu]})
    return b.build()


def test_roofline_by_hand() -> None:
    r = roofline(small_trace())
    assert r.gpu == "NVIDIA H100 80GB HBM3" and r.peaks == TABLE["H100 SXM"] and r.precision == "bf16"
    assert r.operators.columns == list(ROOFLINE_COLUMNS)
    rows = {row["name"]: row for row in r.operators.to_dicts()}
    assert set(rows) == {"aten::linear", "aten::relu"}  # the addmm's kernel belongs to its linear
    linear, relu = rows["aten::linear"], rows["aten::relu"]
    assert (linear["calls"], linear["flops"], linear["bytes"], linear["gpu_time_ns"]) == (
        1,
        LINEAR_FLOPS,
        LINEAR_BYTES,
        1000,
    )
    intensity = LINEAR_FLOPS / LINEAR_BYTES  # 73.1 FLOP/byte, under H100's ridge (989.5 / 3.35 = 295)
    assert linear["tflops"] == pytest.approx(LINEAR_FLOPS / 1000 / 1e3)
    assert linear["intensity"] == pytest.approx(intensity) and linear["bound"] == "memory"
    assert linear["pct_of_peak"] == pytest.approx(100 * (LINEAR_FLOPS / 1e6) / (intensity * 3.35))
    assert linear["lost_ns"] == round(1000 - LINEAR_BYTES / 3.35e3)
    assert (relu["flops"], relu["bytes"], relu["gpu_time_ns"], relu["bound"]) == (0, RELU_BYTES, 32, "memory")
    assert relu["tbps"] == pytest.approx(RELU_BYTES / 32 / 1e3)
    assert relu["pct_of_peak"] == pytest.approx(100 * RELU_BYTES / 32 / 1e3 / 3.35)
    assert r.no_model.rows() == [("aten::cat", 1, 100)]
    assert r.per_step.rows() == [("n0", 0, 1, 2000, LINEAR_FLOPS, pytest.approx(LINEAR_FLOPS / (2000 * 989.5e3)))]


def test_unknown_gpu_gives_flops_and_time_without_percentages() -> None:
    r = roofline(small_trace(gpu="Mystery Accelerator 9000"))
    assert r.peaks is None
    linear = r.operators.filter(pl.col("name") == "aten::linear").row(0, named=True)
    assert linear["flops"] == LINEAR_FLOPS and linear["pct_of_peak"] is None and linear["bound"] is None
    out = roofline_dict(r, frame_records)
    assert out["peaks"] is None and "not in the peak table" in out["note"] and out["mfu"]["mean"] is None


def test_a_trace_without_dtypes_says_why_its_roofline_is_empty() -> None:
    out = roofline_dict(roofline(small_trace(types=False)), frame_records)
    assert out["reason"] == NO_SHAPES and "operators" not in out


@pytest.mark.parametrize("name", ["tracelens", "resnet50"])
def test_gemm_flops_match_a_reading_of_the_raw_json(name: str) -> None:
    path = fixture_path(name)
    expected = benchmark_script("check_gemm_flops").gemm_flops(path)["total"]
    r = roofline(ktrace.open(path))
    gemms = r.operators.filter(
        pl.col("name").is_in(["aten::linear", "aten::matmul", "aten::mm", "aten::addmm", "aten::bmm"])
    )
    assert expected > 0 and int(gemms["flops"].sum()) == expected


def test_importer_keeps_input_types_and_concrete_inputs() -> None:
    ops = ktrace.open(fixture_path("tracelens")).ops
    conv = ops.filter(pl.col("name") == "aten::cudnn_convolution").row(0, named=True)
    assert conv["input_types"].startswith('["c10::BFloat16", "c10::BFloat16", "ScalarList"')
    assert conv["concrete_inputs"] == '["", "", "[0, 0]", "[14, 14]", "[1, 1]", "1", "False", "False", "True"]'
    old = ktrace.open(fixture_path("resnet50")).ops  # torch 1.9: types with inner spaces, no concrete inputs
    add = old.filter(pl.col("name") == "aten::add").row(0, named=True)
    assert '"long int"' in add["input_types"] or '"float"' in add["input_types"]
    assert old["concrete_inputs"].null_count() == old.height


def test_real_traces_roofline_gpu_and_mfu() -> None:
    owl = roofline(ktrace.open(fixture_path("tracelens")))
    assert owl.peaks is not None and owl.peaks.name == "H100 SXM" and owl.precision == "bf16"
    assert owl.per_step["mfu"].drop_nulls().len() >= 1
    resnet = roofline(ktrace.open(fixture_path("resnet50")))
    assert resnet.peaks is not None and resnet.peaks.name == "V100 SXM2" and resnet.precision == "fp32"


def test_types_survive_the_store_and_an_older_store_says_why_its_roofline_is_empty(tmp_path: Path) -> None:
    trace = ktrace.open(fixture_path("tracelens"))
    store.write(trace, tmp_path / "run.ktrace")
    back = store.read(tmp_path / "run.ktrace")
    for column in ("input_types", "concrete_inputs"):
        assert back.ops[column].cast(pl.String).to_list() == trace.ops[column].cast(pl.String).to_list()
    older = frame_from_columns(trace.ops.drop("input_types", "concrete_inputs").to_arrow(), "ops")
    assert older["input_types"].null_count() == older.height  # a store written before the columns reads null
    assert roofline(replace(trace, ops=older)).reason == NO_SHAPES


@pytest.mark.parametrize(
    ("dims", "types", "concrete"),
    [
        ('{"a": 1}', '["float"]', None),  # not a list
        ("[[4, 8], [8, 16]]", '{"a": 1}', None),
        ("[[4, -8], [-8, 16]]", '["float", "float"]', None),  # a negative size
        ('[[4, "x"], [8, 16]]', '["float", "float"]', None),
        ("[[4, 8], [8, 16]]", '["float", "float"]', "[1, 2]"),  # concrete inputs are strings
        ("not json", '["float", "float"]', None),
    ],
)
def test_texts_that_are_not_what_kineto_writes_are_no_model(dims: str, types: str, concrete: str | None) -> None:
    assert call_cost("aten::mm", dims, types, concrete) is None


def test_call_cost_reads_the_columns_texts() -> None:
    cost = call_cost("aten::mm", "[[4, 8], [8, 16]]", '["float", "float"]', None)
    assert cost is not None and (cost.flops, cost.bytes, cost.precision) == (1024, 896, "fp32")


def test_top_lost_ranks_rows_by_time_lost_against_their_roofline() -> None:
    out = roofline_dict(roofline(small_trace()), frame_records)
    # linear: 1000 ns against 115 200 bytes / 3.35 TB/s = 34 ns ideal; relu: 32 ns against 65 536 / 3.35 = 20 ns
    assert [(row["name"], row["lost_ns"]) for row in out["top_lost"]] == [
        ("aten::linear", round(1000 - LINEAR_BYTES / 3.35e3)),
        ("aten::relu", round(32 - RELU_BYTES / 3.35e3)),
    ]
    assert roofline_dict(roofline(small_trace(gpu="Mystery")), frame_records)["top_lost"] == []
