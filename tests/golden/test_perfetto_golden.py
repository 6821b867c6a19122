"""Golden files: the Perfetto export of a small trace decoded to canonical text, and its Chrome JSON, compared whole.

Regenerate (after checking the diff is intended) with: KTRACE_UPDATE_GOLDEN=1 pytest tests/golden
"""

from __future__ import annotations

from pathlib import Path

from golden_compare import compare_golden
from reference.perfetto_validate import to_text, validate_perfetto

from ktrace.exporters.chrome_json import export_chrome_json
from ktrace.exporters.perfetto import export_perfetto
from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace, TraceMeta

T0 = 1_700_000_000_000_000_000


def golden_trace() -> Trace:
    """Two ranks on one node: a step, nested NVTX range and launches, a kernel, a memcpy, a sync, counters."""
    b = TraceBuilder("node-a", 0, TraceMeta(source="synthetic", hosts=("node-a",)))
    for rank in (0, 1):
        t, pid = T0 + rank * 500, 4242 + rank
        b.add("threads", {"pid": [pid], "tid": [pid], "name": ["python3"]}, rank=rank)
        b.add(
            "devices",
            {"device": [rank], "name": ["NVIDIA H100"], "compute_major": [9], "compute_minor": [0]},
            rank=rank,
        )
        b.add(
            "ranges",
            {
                "start_ns": [t, t + 1_000],
                "end_ns": [t + 90_000, t + 40_000],
                "pid": [pid, pid],
                "tid": [pid, pid],
                "name": ["ProfilerStep#0", "forward"],
                "domain": ["profiler_step", "nvtx"],
                "depth": [0, 1],
                "on_gpu": [False, False],
            },
            rank=rank,
        )
        b.add(
            "api",
            {
                "start_ns": [t + 2_000, t + 10_000, t + 60_000],
                "end_ns": [t + 7_000, t + 14_000, t + 80_000],
                "pid": [pid] * 3,
                "tid": [pid] * 3,
                "correlation_id": [1, 2, 3],
                "domain": ["runtime"] * 3,
                "name": ["cudaLaunchKernel", "cudaMemcpyAsync", "cudaStreamSynchronize"],
            },
            rank=rank,
        )
        b.add(
            "kernels",
            {
                "start_ns": [t + 9_000],
                "end_ns": [t + 50_000],
                "device": [rank],
                "stream": [7],
                "correlation_id": [1],
                "name": ["sgemm_128x64_nn"],
                "grid_x": [512],
                "grid_y": [1],
                "grid_z": [1],
                "block_x": [256],
                "block_y": [1],
                "block_z": [1],
                "registers_per_thread": [64],
                "static_shared_bytes": [0],
                "dynamic_shared_bytes": [49152],
            },
            rank=rank,
        )
        b.add(
            "memory",
            {
                "op": ["memcpy"],
                "start_ns": [t + 51_000],
                "end_ns": [t + 55_000],
                "device": [rank],
                "stream": [7],
                "correlation_id": [2],
                "bytes": [1 << 20],
                "copy_kind": ["HtoD"],
                "src_kind": ["pinned"],
                "dst_kind": ["device"],
            },
            rank=rank,
        )
        b.add(
            "syncs",
            {
                "start_ns": [t + 60_000],
                "end_ns": [t + 80_000],
                "device": [rank],
                "stream": [7],
                "sync_type": ["stream"],
                "correlation_id": [3],
            },
            rank=rank,
        )
        b.add(
            "counters",
            {"ts_ns": [t, t + 50_000], "metric": ["gpu.util"] * 2, "instance": [rank] * 2, "value": [10.0, 95.5]},
            rank=rank,
        )
    b.add(
        "counters",
        {
            "ts_ns": [T0, T0 + 50_000],
            "metric": ["cpu.util", "mem.used_bytes"],
            "instance": [-1, -1],
            "value": [42.0, 3.2e10],
        },
        rank=-1,
    )
    return b.build()


HERE = Path(__file__).parent
FINDINGS = [
    {
        "rule": "GPUIdle",
        "severity": "warning",
        "message": "GPU idle 40% of the step",
        "start_ns": T0 + 50_000,
        "end_ns": T0 + 90_000,
        "node": "node-a",
        "rank": 0,
    }
]


def test_perfetto_export_matches_golden_text(tmp_path: Path) -> None:
    path = tmp_path / "golden.pftrace"
    export_perfetto(golden_trace(), path, findings=FINDINGS)
    assert validate_perfetto(path).ok
    compare_golden(HERE / "perfetto_small.textproto", to_text(path))


def test_chrome_export_matches_golden_json(tmp_path: Path) -> None:
    path = tmp_path / "golden.json"
    export_chrome_json(golden_trace(), path)
    compare_golden(HERE / "chrome_small.json", path.read_text())
