"""Dense peak throughput of the GPUs that real traces name, and matching a trace's GPU name to one.

Each row is the vendor's datasheet figure without structured sparsity (NVIDIA lists Tensor Core rates "with
sparsity"; the dense rate is half). fp64 is the FP64 Tensor Core rate where the GPU has one (what a DGEMM
reaches), else the FP64 vector rate; bf16 and fp16 are the Tensor Core rates with FP32 accumulation (what
PyTorch's GEMMs use; GeForce cards run FP16 accumulation twice as fast); fp8 where the GPU has it. A GPU or
precision the table lacks is None: the roofline then gives FLOPs and time without percentages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")
"""Precisions a row gives, in TFLOP/s."""


@dataclass(frozen=True)
class GpuPeaks:
    """Dense peak TFLOP/s per precision and memory bandwidth in TB/s of one GPU model."""

    name: str
    hbm_tbps: float
    fp64: float | None
    fp32: float | None
    tf32: float | None
    bf16: float | None
    fp16: float | None
    fp8: float | None
    source: str
    """Where the figures come from (the vendor's datasheet, by title, or "rules file")."""

    def tflops(self, precision: str | None) -> float | None:
        """Peak TFLOP/s at `precision` (PRECISIONS); None when the GPU has no such rate or it is not a float."""
        return getattr(self, precision) if precision in PRECISIONS else None


_A100 = "NVIDIA A100 Tensor Core GPU datasheet"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet"
_ADA = "NVIDIA Ada Lovelace GPU Architecture whitepaper"
TABLE: dict[str, GpuPeaks] = {
    p.name: p
    for p in (
        GpuPeaks("V100 SXM2", 0.9, 7.8, 15.7, None, None, 125.0, None, "NVIDIA Tesla V100 GPU Accelerator datasheet"),
        GpuPeaks("V100 PCIe", 0.9, 7.0, 14.0, None, None, 112.0, None, "NVIDIA Tesla V100 GPU Accelerator datasheet"),
        GpuPeaks("A100 40GB SXM", 1.555, 19.5, 19.5, 156.0, 312.0, 312.0, None, _A100),
        GpuPeaks("A100 40GB PCIe", 1.555, 19.5, 19.5, 156.0, 312.0, 312.0, None, _A100),
        GpuPeaks("A100 80GB SXM", 2.039, 19.5, 19.5, 156.0, 312.0, 312.0, None, _A100),
        GpuPeaks("A100 80GB PCIe", 1.935, 19.5, 19.5, 156.0, 312.0, 312.0, None, _A100),
        GpuPeaks("H100 SXM", 3.35, 67.0, 67.0, 494.5, 989.5, 989.5, 1979.0, _H100),
        GpuPeaks("H100 PCIe", 2.0, 51.0, 51.0, 378.0, 756.0, 756.0, 1513.0, _H100),
        GpuPeaks("H200 SXM", 4.8, 67.0, 67.0, 494.5, 989.5, 989.5, 1979.0, "NVIDIA H200 Tensor Core GPU datasheet"),
        GpuPeaks("B200", 8.0, 37.0, 75.0, 1100.0, 2250.0, 2250.0, 4500.0, "NVIDIA HGX B200 datasheet (per GPU)"),
        GpuPeaks("L4", 0.3, None, 30.3, 60.0, 121.0, 121.0, 242.5, "NVIDIA L4 Tensor Core GPU datasheet"),
        GpuPeaks("L40S", 0.864, None, 91.6, 183.0, 362.05, 362.05, 733.0, "NVIDIA L40S GPU datasheet"),
        GpuPeaks("T4", 0.32, None, 8.1, None, None, 65.0, None, "NVIDIA T4 Tensor Core GPU datasheet"),
        GpuPeaks("A10", 0.6, None, 31.2, 62.5, 125.0, 125.0, None, "NVIDIA A10 Tensor Core GPU datasheet"),
        GpuPeaks("RTX 2080 Ti", 0.616, None, 14.2, None, None, 56.9, None, "NVIDIA Turing GPU Architecture whitepaper"),
        GpuPeaks(
            "RTX 3090", 0.936, None, 35.6, 35.6, 71.0, 71.0, None, "NVIDIA Ampere GA102 GPU Architecture whitepaper"
        ),
        GpuPeaks("RTX 4090", 1.008, None, 82.6, 82.6, 165.2, 165.2, 330.3, _ADA),
    )
}
"""Row name -> peaks."""

_MATCHES = (  # (pattern on the GPU's name, row), the first match wins: specific forms before general ones
    (r"H200", "H200 SXM"),
    (r"H100.*PCIE", "H100 PCIe"),
    (r"H100", "H100 SXM"),
    (r"B200", "B200"),
    (r"A100.*80\s*GB.*PCIE|A100.*PCIE.*80\s*GB", "A100 80GB PCIe"),
    (r"A100.*80\s*GB", "A100 80GB SXM"),
    (r"A100.*PCIE", "A100 40GB PCIe"),
    (r"A100", "A100 40GB SXM"),
    (r"V100.*PCIE", "V100 PCIe"),
    (r"V100", "V100 SXM2"),  # SXM2 and DGX Station (V100-DGXS): the same GV100 at the same boost clock
    (r"L40S", "L40S"),
    (r"\bL4\b", "L4"),
    (r"\bT4\b", "T4"),
    (r"\bA10\b", "A10"),
    (r"2080\s*TI", "RTX 2080 Ti"),
    (r"\b3090\b", "RTX 3090"),
    (r"\b4090\b", "RTX 4090"),
)


def match_gpu(name: str | None, overrides: Mapping[str, GpuPeaks] | None = None) -> GpuPeaks | None:
    """The peaks of a GPU named as a trace names it (Kineto deviceProperties "NVIDIA H100 80GB HBM3", nsys
    "Tesla T4"): a row of `overrides` whose name the GPU's name contains (case-insensitive) first, then TABLE;
    None for a GPU neither knows."""
    if not name:
        return None
    upper = name.upper()
    for key, peaks in (overrides or {}).items():
        if key.upper() in upper:
            return peaks
    return next((TABLE[row] for pattern, row in _MATCHES if re.search(pattern, upper)), None)


def peaks_from_table(name: str, table: Mapping[str, Any]) -> GpuPeaks:
    """A `[gpu_peaks."NAME"]` table of a rules file (hbm_tbps and any of PRECISIONS, in TB/s and TFLOP/s) as
    peaks; a field it leaves out comes from the TABLE row the name matches, if any.

    Raises:
        ValueError: an unknown key, or a value that is not a positive number."""
    known = {f.name for f in fields(GpuPeaks)} - {"name", "source"}
    unknown = set(table) - known
    if unknown:
        raise ValueError(
            f"gpu_peaks.{name}: unknown key {sorted(unknown)[0]!r} (keys: hbm_tbps, {', '.join(PRECISIONS)})"
        )
    for key, value in table.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ValueError(f"gpu_peaks.{name}.{key}: {value!r} is not a positive number")
    base = match_gpu(name)
    values = {k: (getattr(base, k) if base else None) for k in known} | {k: float(v) for k, v in table.items()}
    hbm = values.pop("hbm_tbps")
    if hbm is None:
        raise ValueError(f"gpu_peaks.{name}: hbm_tbps is needed for a GPU the built-in table does not know")
    return GpuPeaks(name=name, source="rules file", hbm_tbps=float(hbm), **values)
