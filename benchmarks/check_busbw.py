"""busbw of the NCCL kernels of Kineto traces, read from the raw JSON without ktrace's code (issue 28's check).

For each kernel event with a `Collective name` arg: message bytes S by nccl-tests' convention (NVIDIA/nccl-tests
doc/PERFORMANCE.md: the output for all-gather, the input otherwise), grouped per (collective, dtype, S, group size);
nccl-tests' algbw = S / mean time in GB/s and busbw = algbw x its factor, next to TraceLens's way (the mean of
per-call busbw in GiB/s) and the gap between them.

Usage: python benchmarks/check_busbw.py TRACE.json.gz [...]   (a folder: its *.json.gz)
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ELEMENT_BYTES = {"Double": 8, "Float": 4, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Byte": 1, "Char": 1}


def kind_of(name: str) -> str:
    """Kineto's collective name as nccl-tests names it."""
    key = name.lower().replace("_", "")
    for prefix, kind in (("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter")):
        if key.startswith(prefix):
            return kind
    return "all_to_all" if key.startswith("alltoall") else key


def factor_of(kind: str, n: int) -> float | None:
    """nccl-tests' busbw / algbw."""
    table = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n}
    table |= {"all_to_all": (n - 1) / n, "broadcast": 1.0, "reduce": 1.0, "send": 1.0, "recv": 1.0}
    return table.get(kind)


def calls_of(path: Path) -> list[tuple[tuple[str, str, int, int], float]]:
    """((collective, dtype, bytes, group size), duration in ns) of every sized collective kernel in one file."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    calls = []
    for e in events:
        args = e.get("args") or {}
        if e.get("cat") != "kernel" or "Collective name" not in args or args.get("dtype") not in ELEMENT_BYTES:
            continue
        kind = kind_of(args["Collective name"])
        elements = args["Out msg nelems"] if kind == "all_gather" else args["In msg nelems"]
        key = (kind, args["dtype"], elements * ELEMENT_BYTES[args["dtype"]], int(args["Group size"]))
        calls.append((key, float(e["dur"]) * 1000.0))
    return calls


def busbw_rows(files: list[Path]) -> dict[tuple[str, str, int, int], dict[str, Any]]:
    """Per (collective, dtype, bytes, group size): count, time_ns, busbw_gbps (nccl-tests) and
    tracelens_busbw_gibps (the mean of per-call values in GiB/s)."""
    groups: dict[tuple[str, str, int, int], list[float]] = defaultdict(list)
    for path in files:
        for key, ns in calls_of(path):
            groups[key].append(ns)
    rows = {}
    for key, times in groups.items():
        kind, _, size, n = key
        factor = factor_of(kind, n)
        mean = statistics.fmean(times)
        busbw = None if factor is None else size / mean * factor
        per_call = None if factor is None else statistics.fmean(size / (t * 1e-9) / 2**30 * factor for t in times)
        rows[key] = {"count": len(times), "time_ns": sum(times), "busbw_gbps": busbw, "tracelens_busbw_gibps": per_call}
    return rows


def main(argv: list[str]) -> int:
    files = [f for a in argv for f in (sorted(Path(a).glob("*.json.gz")) if Path(a).is_dir() else [Path(a)])]
    rows = busbw_rows(files)
    if not rows:
        print("no collective kernel with a message size")
        return 0
    print(
        f"{'collective':<15}{'dtype':<7}{'bytes':>11}{'n':>3}{'count':>6}{'busbw GB/s':>12}{'TraceLens GiB/s':>16}{'gap':>8}"
    )
    for (kind, dtype, size, n), r in sorted(rows.items(), key=lambda kv: -kv[1]["time_ns"]):
        ours, theirs = r["busbw_gbps"], r["tracelens_busbw_gibps"]
        gap = f"{(theirs / ours - 1) * 100:+.1f}%" if ours and theirs else "-"
        print(f"{kind:<15}{dtype:<7}{size:>11}{n:>3}{r['count']:>6}{ours or 0:>12.3f}{theirs or 0:>16.3f}{gap:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
