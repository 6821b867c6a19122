"""Kernel precision classifier: a corpus of real kernel names read by hand, and the distribution."""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl
import pytest

from ktrace.analysis.precision import ALL_CLASSES, classify_name, classify_names, precision_distribution
from ktrace.model.builder import TraceBuilder

CORPUS = Path(__file__).parent / "data" / "kernel_names.csv"
KNOWN_MISSES = {"void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>"}
"""Names whose expected class (read by a person) the classifier does not reach; listed, not hidden."""


def _corpus() -> list[dict[str, str]]:
    with CORPUS.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_corpus_has_at_least_200_real_names_with_provenance() -> None:
    rows = _corpus()
    real = [r for r in rows if r["source"] == "real"]
    assert len(real) >= 200
    assert all(r["trace"] and r["file"] and int(r["count"]) > 0 for r in real)
    assert {r["expected"] for r in rows} <= set(ALL_CLASSES)
    assert len({r["name"] for r in rows}) == len(rows)


def test_corpus_classification_matches_the_hand_labels() -> None:
    rows = _corpus()
    got = dict(zip(*classify_names([r["name"] for r in rows]).get_columns(), strict=True))
    wrong = [
        (r["expected"], got[r["name"]], r["name"][:120])
        for r in rows
        if got[r["name"]] != r["expected"] and not any(r["name"].startswith(k) for k in KNOWN_MISSES)
    ]
    assert wrong == []


def test_known_misses_are_still_misses() -> None:
    """If the classifier learns them, move them out of KNOWN_MISSES."""
    rows = [r for r in _corpus() if any(r["name"].startswith(k) for k in KNOWN_MISSES)]
    assert rows
    assert all(classify_name(r["name"]) != r["expected"] for r in rows)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "communication"),
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(x::Params)", "TF32"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<double>, "
            "at::detail::Array<char*, 3> >(int)",
            "FP64",
        ),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel__5x_cublas", "BF16"),
        ("triton_poi_fused_add_mul_0", "unknown"),
    ],
)
def test_analyses_md_pitfalls(name: str, expected: str) -> None:
    """The three pitfalls of analyses.md §7 plus the type-token and unknown cases."""
    assert classify_name(name) == expected


def test_distribution_excludes_communication_from_compute_shares() -> None:
    b = TraceBuilder("n", 0)
    b.add(
        "kernels",
        {
            "start_ns": [0, 100, 300, 600],
            "end_ns": [100, 300, 600, 1000],
            "device": [0] * 4,
            "stream": [7] * 4,
            "name": [
                "volta_sgemm_64x64_nn",
                "volta_h884gemm_64x64_ldg8_nn",
                "volta_sgemm_64x64_nn",
                "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
            ],
        },
    )
    dist = precision_distribution(b.build())
    rows = {r["precision"]: r for r in dist.iter_rows(named=True)}
    assert set(rows) == {"FP32", "FP16", "communication"}
    assert rows["FP32"]["time_ns"] == 400 and rows["FP32"]["kernels"] == 2
    assert rows["FP32"]["time_share"] == pytest.approx(400 / 600)
    assert rows["FP16"]["count_share"] == pytest.approx(1 / 3)
    assert rows["communication"]["excluded"] and rows["communication"]["time_share"] == pytest.approx(0.4)
    assert dist.filter(~pl.col("excluded"))["time_share"].sum() == pytest.approx(1.0)


def test_each_distinct_name_is_classified_once() -> None:
    out = classify_names(["a_sgemm", "volta_sgemm_1", "volta_sgemm_1"])
    assert out.height == 2 and out["name"].to_list() == sorted(out["name"].to_list())
