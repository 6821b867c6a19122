"""Matching a trace's GPU name to the peak table, and overrides from a rules file."""

from __future__ import annotations

import pytest

from ktrace.analysis.gpu_peaks import TABLE, match_gpu, peaks_from_table


@pytest.mark.parametrize(
    ("name", "row"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),  # owlv2 fixture (Kineto deviceProperties)
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H200", "H200 SXM"),
        ("Tesla V100-DGXS-32GB", "V100 SXM2"),  # resnet50 fixture
        ("Tesla V100-PCIE-16GB", "V100 PCIe"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB PCIe"),
        ("Tesla T4", "T4"),  # power_iteration fixture (nsys TARGET_INFO_GPU)
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA GeForce RTX 2080 Ti", "RTX 2080 Ti"),
        ("NVIDIA GeForce RTX 3090", "RTX 3090"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ],
)
def test_gpu_names_match_their_row(name: str, row: str) -> None:
    found = match_gpu(name)
    assert found is not None and found.name == row


def test_unknown_gpu_is_none() -> None:
    assert match_gpu("AMD Instinct MI300X") is None
    assert match_gpu("NVIDIA A40") is None  # not A10, not A100
    assert match_gpu(None) is None


def test_every_row_names_its_source_and_a_bandwidth() -> None:
    for peaks in TABLE.values():
        assert peaks.source and peaks.hbm_tbps > 0
        assert peaks.fp32 is not None


def test_tflops_by_precision_and_none_where_the_gpu_lacks_it() -> None:
    h100 = TABLE["H100 SXM"]
    assert h100.tflops("bf16") == 989.5 and h100.tflops("fp8") == 1979.0
    assert TABLE["T4"].tflops("bf16") is None
    assert h100.tflops("int64") is None and h100.tflops(None) is None


def test_rules_file_table_overrides_a_row_and_adds_a_gpu() -> None:
    clocked = peaks_from_table("H100", {"bf16": 700})
    assert clocked.bf16 == 700.0 and clocked.hbm_tbps == 3.35 and clocked.source == "rules file"
    assert match_gpu("NVIDIA H100 80GB HBM3", {"H100": clocked}) == clocked
    new = peaks_from_table("MI300X", {"hbm_tbps": 5.3, "bf16": 1307.4})
    assert match_gpu("AMD Instinct MI300X", {"MI300X": new}) == new and new.fp32 is None


@pytest.mark.parametrize(
    ("table", "message"),
    [({"bf16": -1}, "not a positive number"), ({"fp4": 9}, "unknown key"), ({"bf16": 9}, "hbm_tbps is needed")],
)
def test_rules_file_table_errors_say_which_key(table: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        peaks_from_table("Mystery GPU", table)
