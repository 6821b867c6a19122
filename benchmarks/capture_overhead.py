"""Capture overhead of `ktrace run` against no profiling and torch.profiler, measured in one run.

    python benchmarks/capture_overhead.py               # needs a GPU, PyTorch, cupti-python
    python benchmarks/capture_overhead.py --decode-only # CPU: the per-record Python cost of ktrace's path

GPU mode runs tests/gpu/train_loop.py three times (plain, under ktrace run, under torch.profiler) and
prints median step times and their ratios to the plain run (goal: ktrace <= 1.03 and below
torch.profiler), plus records/s captured and dropped records (goal: 0 at >= 200 k records/s).
Decode-only mode times the buffer-callback copy-out (RecordExtractor) and the writer-thread decode
(RecordDecoder) on synthetic kernel+API records, with cupti-python's own record classes when
importable, else faithful fakes; the anchor is a bare attribute-read loop over the same objects.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LOOP = Path(__file__).resolve().parents[1] / "tests" / "gpu" / "train_loop.py"


def _records(n: int) -> tuple[list[Any], str]:
    try:
        from cupti import cupti

        def make(cls: str, kind: str, **f: Any) -> Any:
            r = getattr(cupti, cls)()
            r.kind = getattr(cupti.ActivityKind, kind)
            for k, v in f.items():
                setattr(r, k, v)
            return r

        source = "cupti-python record classes"
    except ImportError:
        from types import SimpleNamespace

        from ktrace.tracer.records import ACTIVITY_KIND, FIELDS_BY_KIND

        def make(cls: str, kind: str, **f: Any) -> Any:
            base = dict.fromkeys(FIELDS_BY_KIND[kind], 0)
            return SimpleNamespace(kind=ACTIVITY_KIND[kind], **{**base, **f})

        source = "faithful fakes (cupti-python not installed)"
    t0 = 1_795_000_000_000_000_000
    names = [f"void gemm_kernel<{i % 40}>" for i in range(64)]
    recs = []
    for i in range(n // 2):
        recs.append(
            make(
                "ActivityKernel13",
                "CONCURRENT_KERNEL",
                start=t0 + 10 * i,
                end=t0 + 10 * i + 5,
                correlation_id=i,
                name=names[i % 64],
                grid_x=80,
                block_x=256,
                stream_id=7,
            )
        )
        recs.append(
            make(
                "ActivityAPI",
                "RUNTIME",
                start=t0 + 10 * i - 3,
                end=t0 + 10 * i - 1,
                cbid=211,
                correlation_id=i,
                process_id=1,
                thread_id=2,
            )
        )
    return recs, source


def decode_only(n: int) -> None:
    """Per-record cost of the copy-out and decode path."""
    from ktrace.tracer.columns import RecordDecoder, generic_api_name
    from ktrace.tracer.records import RecordExtractor

    recs, source = _records(n)
    t = time.perf_counter()
    anchor = [(r.kind, r.start, r.end, r.correlation_id) for r in recs]
    anchor_s = time.perf_counter() - t
    extractor = RecordExtractor()
    rows: dict[int, list[Any]] = {}
    t = time.perf_counter()
    for i in range(0, n, 4096):  # CUPTI delivers buffers of a few thousand records
        extractor.extract(recs[i : i + 4096], rows)
    extract_s = time.perf_counter() - t
    t = time.perf_counter()
    RecordDecoder(generic_api_name, 1).decode(extractor.by_name(rows))
    decode_s = time.perf_counter() - t
    print(f"records: {n:,} ({source})")
    print(f"anchor  bare 4-field read : {anchor_s / n * 1e9:7.0f} ns/record")
    print(
        f"callback copy-out (extract): {extract_s / n * 1e9:7.0f} ns/record  "
        f"= {extract_s / anchor_s:.2f}x anchor, {n / extract_s / 1e3:,.0f} k records/s on one core"
    )
    print(
        f"writer decode to Arrow     : {decode_s / n * 1e9:7.0f} ns/record  "
        f"= {decode_s / anchor_s:.2f}x anchor, {n / decode_s / 1e3:,.0f} k records/s"
    )
    print(f"GIL time per 200 k records/s: {(extract_s + decode_s) / n * 200e3 * 100:.1f} % of one core")
    del anchor


def _median_step(cmd: list[str], cwd: Path) -> tuple[float, dict[str, Any], str]:
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=900)
    if res.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{res.stderr[-2000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    steps = out["step_s"][5:]  # skip warm-up
    return statistics.median(steps), out, res.stderr


def gpu_overhead(steps: int, width: int, layers: int) -> None:
    """Plain vs ktrace vs torch.profiler step times in one run."""
    import torch

    if not torch.cuda.is_available():
        sys.exit("no CUDA GPU: run with --decode-only for the CPU-side figures")
    loop = [sys.executable, str(LOOP), "--steps", str(steps), "--width", str(width), "--layers", str(layers)]
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        plain, _, _ = _median_step(loop, cwd)
        kt, _, _ = _median_step([sys.executable, "-m", "ktrace", "run", "-q", "-o", "b.ktrace", "--", *loop], cwd)
        tp, _, _ = _median_step([*loop, "--torch-profiler", "--window", f"0:{steps}"], cwd)
        from ktrace.model import store

        trace = store.read(cwd / "b.ktrace")
        span = max(1, (trace.kernels["end_ns"].max() or 0) - (trace.kernels["start_ns"].min() or 0))
        records = sum(trace.counts()[t] for t in ("kernels", "api", "memory", "syncs", "ranges"))
    print(f"device: {torch.cuda.get_device_name(0)}; {steps} steps, MLP {layers}x{width}")
    print(f"plain          : {plain * 1e3:8.3f} ms/step (anchor)")
    print(f"ktrace run     : {kt * 1e3:8.3f} ms/step = {kt / plain:.3f}x (goal <= 1.03)")
    print(f"torch.profiler : {tp * 1e3:8.3f} ms/step = {tp / plain:.3f}x")
    print(
        f"records captured: {records:,} ({records / (span / 1e9) / 1e3:,.0f} k records/s of GPU span); "
        f"dropped: {trace.meta.health.get('dropped_records', 0)}"
    )


def main() -> None:
    """Parse arguments and run one mode."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--decode-only", action="store_true", help="CPU-only: the record copy-out/decode cost")
    p.add_argument("--records", type=int, default=400_000)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--layers", type=int, default=8)
    args = p.parse_args()
    if args.decode_only:
        decode_only(args.records)
    else:
        gpu_overhead(args.steps, args.width, args.layers)


if __name__ == "__main__":
    main()
