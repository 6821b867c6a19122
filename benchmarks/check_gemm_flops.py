"""GEMM FLOPs of a Kineto trace read straight from its JSON (json + gzip, no ktrace code): the independent check
of ktrace's roofline (issue 28).

Every framework operator (cat cpu_op / Operator) named aten::mm, aten::addmm, aten::bmm or aten::baddbmm with
`Input Dims`: mm [M, K] x [K, N] = 2 M N K; addmm adds M N (the bias); bmm [B, M, K] x [B, K, N] = 2 B M N K;
baddbmm adds B M N. ktrace counts these products at the outermost operator with a model (aten::linear,
aten::matmul), so its GEMM-family total must equal this one.

    python benchmarks/check_gemm_flops.py TRACE.json.gz
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path


def _flops(name: str, dims: list[list[int]]) -> int | None:
    if name == "aten::mm":
        (m, k), (_, n) = dims[0], dims[1]
        return 2 * m * n * k
    if name == "aten::addmm":
        (m, k), (_, n) = dims[1], dims[2]
        return 2 * m * n * k + m * n
    if name in ("aten::bmm", "aten::baddbmm"):
        a, b = (dims[0], dims[1]) if name == "aten::bmm" else (dims[1], dims[2])
        (batch, m, k), n = a, b[2]
        return 2 * batch * m * n * k + (batch * m * n if name == "aten::baddbmm" else 0)
    return None


def gemm_flops(path: Path) -> dict[str, int]:
    """Total FLOPs per GEMM operator name of the trace at `path` (.json or .json.gz), and their "total"."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    totals: Counter[str] = Counter()
    for e in events:
        if e.get("cat") not in ("cpu_op", "Operator") or e.get("ph") != "X":
            continue
        dims = (e.get("args") or {}).get("Input Dims")
        found = _flops(e.get("name", ""), dims) if dims else None
        if found is not None:
            totals[e["name"]] += found
    return {**totals, "total": sum(totals.values())}


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(arg, json.dumps(gemm_flops(Path(arg)), sort_keys=True))
