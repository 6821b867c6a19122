"""The Kineto importer on every real Kineto trace (fixtures/traces), checked against STATS.json and naive twins."""

from __future__ import annotations

import functools
import gzip
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from real_traces import real_traces_dir

from ktrace.importers.kineto import import_kineto

SHARED = real_traces_dir()


def _kineto_files() -> list[tuple[Path, dict[str, Any]]]:
    """(trace file, its STATS.json entry) for every Kineto trace in the real traces folder."""
    out = []
    for stats_path in sorted(SHARED.glob("*/STATS.json")):
        stats = json.loads(stats_path.read_text())
        for name, entry in sorted(stats.items()):
            if name.endswith((".json", ".json.gz")) and isinstance(entry, dict) and "n_kernels" in entry:
                out.append((stats_path.parent / name, entry))
    return out


FILES = _kineto_files()


def test_the_real_kineto_traces_are_there() -> None:
    """Every test below is parametrized over FILES: an empty folder would otherwise pass by running none."""
    assert len(FILES) >= 12, f"expected the 12 real Kineto traces at {SHARED}, found {len(FILES)}"


@functools.lru_cache(maxsize=1)
def _raw_events(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The naive twin's view: the whole file through json with exact decimals."""
    with gzip.open(path, "rb") as f:
        doc = json.loads(f.read(), parse_float=Decimal)
    return doc["traceEvents"], doc


@pytest.fixture(scope="module", params=FILES, ids=lambda p: p[0].name[:40])
def imported(request: pytest.FixtureRequest) -> tuple[Any, dict[str, Any], Path]:
    path, stats = request.param
    return import_kineto(path), stats, path


def test_counts_match_stats(imported: tuple[Any, dict[str, Any], Path]) -> None:
    trace, stats, _ = imported
    cats = stats["categories"]
    assert trace.kernels.height == stats["n_kernels"]
    ops = trace.memory["op"].cast(pl.String)
    assert int((ops == "memcpy").sum()) == stats["memcpy"]
    assert int((ops == "memset").sum()) == stats["memset"]
    assert trace.api.height == stats["n_runtime_or_driver"]
    assert trace.syncs.height == cats.get("cuda_sync", 0)
    cpu = trace.ranges.filter(~pl.col("on_gpu"))
    gpu = trace.ranges.filter(pl.col("on_gpu"))
    steps = cpu.filter(pl.col("domain") == "profiler_step")["name"].cast(pl.String).to_list()
    assert sorted(steps) == sorted(stats["profiler_steps"])
    old_era_steps = 0 if "user_annotation" in cats else len(stats["profiler_steps"])
    assert cpu.height == cats.get("user_annotation", 0) + old_era_steps
    assert gpu.height == cats.get("gpu_user_annotation", 0)
    assert trace.validate() == []


def test_launch_join_counts_match_stats(imported: tuple[Any, dict[str, Any], Path]) -> None:
    trace, stats, _ = imported
    health = trace.meta.health
    assert health["kernels_with_launch"] == stats["kernels_with_runtime_correlation"]
    assert health["kernels_without_launch"] == stats["n_kernels"] - stats["kernels_with_runtime_correlation"]
    assert health["graph_fanout_kernels"] == 0  # no CUDA graphs in these traces


def test_launches_without_gpu_record_match_naive_twin(imported: tuple[Any, dict[str, Any], Path]) -> None:
    trace, _, path = imported
    events, _ = _raw_events(path)
    gpu_cats = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
    gpu_corr = {e["args"].get("correlation") for e in events if e.get("cat") in gpu_cats and e.get("ph") == "X"}
    launch = re.compile(r"^(cuda|cu)(Launch|GraphLaunch|Memcpy|Memset)")
    expected = sum(
        1
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") in ("cuda_runtime", "Runtime", "cuda_driver")
        and launch.match(e.get("name", ""))
        and e["args"].get("correlation") not in gpu_corr
    )
    assert trace.meta.health["launches_without_gpu_record"] == expected


def test_kernel_times_are_exact_ns(imported: tuple[Any, dict[str, Any], Path]) -> None:
    trace, _, path = imported
    events, doc = _raw_events(path)
    base = int(doc.get("baseTimeNanoseconds", 0))
    kernels = [e for e in events if e.get("cat") in ("kernel", "Kernel") and e.get("ph") == "X"]
    start = sorted(base + int(Decimal(e["ts"]) * 1000) for e in kernels)
    end = sorted(base + int((Decimal(e["ts"]) + Decimal(e["dur"])) * 1000) for e in kernels)
    assert trace.kernels["start_ns"].sort().to_list() == start
    assert trace.kernels["end_ns"].sort().to_list() == end


HTA_KERNEL_US = {
    "benchmark_result_2869224_1695835535_trace.json.gz": 10692.000,
    "nccl_data.json.gz": 162532.340,
    "worker0.1623143089861.pt.trace.json.gz": 591532.000,
    "worker0_step_12.1694128201545.pt.trace.json.gz": 6832.000,
    "worker1_step_12.1694128201556.pt.trace.json.gz": 12582.000,
    "worker2_step_12.1694128201554.pt.trace.json.gz": 4560.000,
    "worker3_step_12.1694128201557.pt.trace.json.gz": 11014.000,
    "worker4_step_12.1694128201547.pt.trace.json.gz": 7713.000,
    "worker5_step_12.1694128201549.pt.trace.json.gz": 7292.000,
    "worker6_step_12.1694128201553.pt.trace.json.gz": 4609.000,
    "worker7_step_12.1694128201553.pt.trace.json.gz": 2805.000,
    "google_owlv2-large-patch14-ensemble__1016001.json.gz": 551451.628,
    "simple_add_trace.json.gz": 10728.000,  # hta-critical-path, measured 2026-11-23
    "event_sync_trace.json.gz": 49.000,
    "event_sync_multi_stream_trace.json.gz": 369.000,
}
"""Total kernel time (µs) per trace as HTA 0.5.0 parses it: sum of `dur` over its kernel rows, measured by
`python benchmarks/import_vs_hta.py --kernel-time` (HTA_DISABLE_NS_ROUNDING=1) on 2026-11-22."""


def test_kernel_time_matches_hta(imported: tuple[Any, dict[str, Any], Path]) -> None:
    trace, _, path = imported
    ours = int((trace.kernels["end_ns"] - trace.kernels["start_ns"]).sum()) / 1000
    assert ours == pytest.approx(HTA_KERNEL_US[path.name], rel=1e-3)


def test_kineto_record_counts_in_health() -> None:
    nccl = SHARED / "hta-a100-nccl-rank0of2" / "nccl_data.json.gz"
    if not nccl.exists():
        pytest.skip("nccl trace absent")
    health = import_kineto(nccl).meta.health
    # INFO: "Record counts: Out-of-range = 4181, Blocklisted runtime = 37458, ..." (formats.md §1.7)
    assert health["kineto_out_of_range"] == 4181
    assert health["kineto_blocklisted_runtime"] == 37458
    trace = import_kineto(nccl)
    nccl_kernels = trace.kernels.filter(pl.col("collective").is_not_null())
    assert nccl_kernels.height == 21  # STATS.json nccl_kernels
    assert trace.meta.job["world_size"] == 2
    assert trace.meta.job["distributedInfo"]["backend"] == "nccl"


def test_folder_of_ranks_is_one_multi_rank_trace() -> None:
    folder = SHARED / "param-dlrm-v100-8rank"
    if not folder.is_dir():
        pytest.skip("dlrm traces absent")
    stats = json.loads((folder / "STATS.json").read_text())
    trace = import_kineto(folder)
    assert [r for _, r in trace.ranks] == list(range(8))
    assert trace.meta.job["world_size"] == 8
    per_rank = dict(trace.kernels.group_by("rank").len().iter_rows())
    for entry in stats.values():
        assert per_rank[entry["distributedInfo"]["rank"]] == entry["n_kernels"]
    orphans = sum(e["n_kernels"] - e["kernels_with_runtime_correlation"] for e in stats.values())
    assert trace.meta.health["kernels_without_launch"] == orphans == 128
    devices = dict(trace.devices.select("rank", "device").iter_rows())
    assert devices == {r: r for r in range(8)}  # each rank lists only the GPU it used


def test_threads_have_one_row_per_thread(real_trace_path) -> None:  # type: ignore[no-untyped-def]
    import polars as pl

    import ktrace

    trace = ktrace.open(real_trace_path("alexnet"))
    assert trace.threads.height > 0
    assert trace.threads.group_by("pid", "tid").len().filter(pl.col("len") > 1).height == 0


def test_a_shared_trace_folder_opens_its_trace_and_leaves_stats_json_alone() -> None:
    import ktrace

    folder = SHARED / "hta-a100-nccl-rank0of2"  # nccl_data.json.gz: no "trace" in the name, beside STATS.json
    assert folder.is_dir(), f"{folder}: the nccl trace is part of fixtures/traces"
    trace = ktrace.open(folder)
    assert trace.kernels.height == import_kineto(folder / "nccl_data.json.gz").kernels.height
    assert not any("STATS.json" in n for n in trace.meta.notes)


def test_allocations_match_naive_twin(imported: tuple[Any, dict[str, Any], Path]) -> None:
    """Every GPU `[memory]` event (Device Type 1) is one allocations row with its bytes, address and totals, in
    file order; CPU-allocator events are not imported (tracelens 12,270 of 13,474, resnet50 8,220 of 12,838)."""
    trace, _, path = imported
    events, _ = _raw_events(path)
    gpu = [
        e["args"]
        for e in events
        if e.get("name") == "[memory]" and e.get("ph") == "i" and e["args"].get("Device Type") == 1
    ]
    rows = trace.allocations
    assert rows.height == len(gpu)
    assert rows["bytes"].to_list() == [a["Bytes"] for a in gpu]
    assert rows["address"].to_list() == [a.get("Addr") for a in gpu]
    assert rows["total_allocated"].to_list() == [a.get("Total Allocated") for a in gpu]
    assert rows["total_reserved"].to_list() == [a.get("Total Reserved") for a in gpu]
    assert rows["device"].to_list() == [a["Device Id"] for a in gpu]


def test_real_allocation_counts() -> None:
    """The two real traces with allocator events keep them (the other Kineto traces have none)."""
    for folder, name, expected in (
        ("tracelens-h100-hf-inference", "google_owlv2-large-patch14-ensemble__1016001.json.gz", 12_270),
        ("kineto-resnet50-v100-pt1.9", "worker0.1623143089861.pt.trace.json.gz", 8_220),
    ):
        assert import_kineto(SHARED / folder / name).allocations.height == expected
