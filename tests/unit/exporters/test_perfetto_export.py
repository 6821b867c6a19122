"""Perfetto export of synthetic, hand-made and real traces: validates, and decodes back to the trace's slices."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace as PbTrace
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackDescriptor
from reference.perfetto_validate import ValidationReport, read_bytes, validate_perfetto

from ktrace.exporters.perfetto import export_perfetto
from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace
from ktrace.testing import SyntheticConfig, generate

REAL = [
    "alexnet",
    "nccl",
    "resnet50",
    "tracelens",
    "dlrm",
    "cloverleaf",
    "power_iteration",
    "simple_add",
    "event_sync",
    "event_sync_multi_stream",
]


def _export(trace: Trace, tmp_path: Path, name: str = "t.pftrace", **kw: Any) -> tuple[Any, ValidationReport]:
    path = tmp_path / name
    stats = export_perfetto(trace, path, **kw)
    report = validate_perfetto(path)
    assert report.errors == []
    return stats, report


def _descriptors(path: Path) -> list[TrackDescriptor]:
    return [p.track_descriptor for p in PbTrace.FromString(read_bytes(path)).packet if p.HasField("track_descriptor")]


def _decoded(report: ValidationReport) -> Counter[tuple[str, str, int, int]]:
    """(track name without any overlap suffix, slice name, start, end) of every decoded slice."""
    return Counter((report.tracks[s.track].split(" (overlap ")[0], s.name, s.start_ns, s.end_ns) for s in report.slices)


def _expected(trace: Trace) -> Counter[tuple[str, str, int, int]]:
    """The same, built from the trace's tables by an independent route (polars, no exporter code)."""
    s = pl.String
    threads = trace.threads.select(pl.col("node").cast(s), "rank", "pid", "tid", pl.col("name").cast(s).alias("tn"))
    threads = threads.drop_nulls().unique(["node", "rank", "pid", "tid"], keep="last", maintain_order=True)
    keyed = [
        trace.kernels.select(
            pl.format("Stream {}", "stream").alias("track"), pl.col("name").cast(s), "start_ns", "end_ns"
        ),
        trace.memory.select(
            pl.format("Stream {}", "stream").alias("track"),
            pl.when(pl.col("op").cast(s) == "memset")
            .then(pl.lit("Memset"))
            .otherwise(pl.format("Memcpy {}", pl.col("copy_kind").cast(s)))
            .alias("name"),
            "start_ns",
            "end_ns",
        ),
        trace.syncs.select(
            pl.lit("Synchronization").alias("track"),
            pl.format("Sync {}", pl.col("sync_type").cast(s)).alias("name"),
            "start_ns",
            "end_ns",
        ),
        trace.ranges.filter((pl.col("domain").cast(s) == "profiler_step") & ~pl.col("on_gpu")).select(
            pl.lit("Steps").alias("track"), pl.col("name").cast(s), "start_ns", "end_ns"
        ),
        trace.ranges.filter(pl.col("on_gpu")).select(
            pl.lit("GPU annotations").alias("track"), pl.col("name").cast(s), "start_ns", "end_ns"
        ),
    ]
    cpu_ranges = trace.ranges.filter((pl.col("domain").cast(s) != "profiler_step") & ~pl.col("on_gpu"))
    for table in (trace.api, cpu_ranges, trace.ops):
        rows = table.with_columns(pl.col("node").cast(s)).join(threads, on=["node", "rank", "pid", "tid"], how="left")
        keyed.append(
            rows.select(
                pl.format("{} [{}]", pl.col("tn").fill_null("thread"), "tid").alias("track"),
                pl.col("name").cast(s),
                "start_ns",
                "end_ns",
            )
        )
    return Counter(tuple(r) for k in keyed for r in k.iter_rows())  # type: ignore[misc]


def _launched(trace: Trace) -> int:
    """GPU records (kernels, memcpy, memset) whose launch API call is in the trace."""
    launches = trace.api.select("node", "rank", "correlation_id").drop_nulls().unique()
    gpu = pl.concat(
        [trace.kernels.select("node", "rank", "correlation_id"), trace.memory.select("node", "rank", "correlation_id")]
    ).drop_nulls()
    return gpu.join(launches, on=["node", "rank", "correlation_id"]).height


@pytest.fixture(scope="module")
def multi_rank() -> Trace:
    return generate(SyntheticConfig(steps=3, kernels_per_step=25, ranks=4, nodes=2, seed=3))


def test_multi_rank_synthetic_round_trips(tmp_path: Path, multi_rank: Trace) -> None:
    stats, report = _export(multi_rank, tmp_path)
    assert _decoded(report) == _expected(multi_rank)
    assert report.arrows == stats.flows == _launched(multi_rank)
    assert report.counters == multi_rank.counters.height


def test_track_tree_has_a_process_per_rank_gpu_groups_and_node_counters(tmp_path: Path, multi_rank: Trace) -> None:
    export_perfetto(multi_rank, tmp_path / "t.pftrace")
    tracks = {d.uuid: d for d in _descriptors(tmp_path / "t.pftrace")}
    processes = {d.process.process_name for d in tracks.values() if d.HasField("process")}
    assert processes == {
        "node0 (host)",
        "node1 (host)",
        "rank 0 · node0 (pid 1000)",
        "rank 1 · node0 (pid 1001)",
        "rank 2 · node1 (pid 1002)",
        "rank 3 · node1 (pid 1003)",
    }
    assert len({d.process.pid for d in tracks.values() if d.HasField("process")}) == 6
    streams = [d for d in tracks.values() if d.name.startswith("Stream ")]
    assert streams and all(tracks[d.parent_uuid].name.startswith("GPU ") for d in streams)
    assert all(tracks[tracks[d.parent_uuid].parent_uuid].HasField("process") for d in streams)
    counters = [d for d in tracks.values() if d.HasField("counter")]
    by_name = {(tracks[d.parent_uuid].process.process_name, d.name): d.counter for d in counters}
    assert by_name[("node1 (host)", "GPU 0 utilization")].unit_name == "%"
    assert by_name[("node0 (host)", "Host memory used")].unit == 3  # UNIT_SIZE_BYTES
    assert ("node0 (host)", "CPU core 3 utilization") in by_name
    steps = [d for d in tracks.values() if d.name == "Steps"]
    assert len(steps) == 4


def test_kernel_args_are_debug_annotations(tmp_path: Path) -> None:
    trace = generate(SyntheticConfig(steps=1, kernels_per_step=3, seed=1))
    export_perfetto(trace, tmp_path / "t.pftrace")
    packets = PbTrace.FromString((tmp_path / "t.pftrace").read_bytes()).packet
    keys = {n.iid: n.name for p in packets for n in p.interned_data.debug_annotation_names}
    first_kernel = trace.kernels.sort("start_ns").row(0, named=True)
    begin = next(
        p
        for p in packets
        if p.track_event.type == 1
        and p.timestamp == first_kernel["start_ns"]
        and any(keys[a.name_iid] == "grid_x" for a in p.track_event.debug_annotations)
    )
    args = {keys[a.name_iid]: a.int_value for a in begin.track_event.debug_annotations}
    for col in ("grid_x", "block_x", "registers_per_thread", "static_shared_bytes", "correlation_id"):
        assert args[col] == first_kernel[col]


def _tiny(
    api: dict[str, list[Any]], kernels: dict[str, list[Any]], ranges: dict[str, list[Any]] | None = None
) -> Trace:
    b = TraceBuilder("hostA", 0)
    n = len(api["start_ns"])
    b.add("api", {**api, "pid": [7] * n, "tid": [7] * n, "domain": ["runtime"] * n, "name": ["cudaLaunchKernel"] * n})
    k = len(kernels["start_ns"])
    b.add("kernels", {**kernels, "device": [0] * k, "stream": [7] * k, "name": ["k"] * k})
    if ranges:
        r = len(ranges["start_ns"])
        b.add(
            "ranges",
            {**ranges, "pid": [7] * r, "tid": [7] * r, "domain": ["nvtx"] * r, "depth": [0] * r, "on_gpu": [False] * r},
        )
    return b.build()


def test_kernel_starting_before_its_launch_still_gets_an_arrow(tmp_path: Path) -> None:
    trace = _tiny(
        {"start_ns": [1000], "end_ns": [2000], "correlation_id": [5]},
        {"start_ns": [900], "end_ns": [1500], "correlation_id": [5]},
    )
    stats, report = _export(trace, tmp_path)
    assert (stats.flows, report.arrows) == (1, 1)


def test_one_launch_many_gpu_records_gives_one_arrow_each(tmp_path: Path) -> None:
    trace = _tiny(
        {"start_ns": [1000], "end_ns": [2000], "correlation_id": [5]},
        {"start_ns": [3000, 4000, 5000], "end_ns": [3500, 4500, 5500], "correlation_id": [5, 5, 5]},
    )
    _, report = _export(trace, tmp_path)
    assert report.arrows == 3


def test_overlapping_ranges_go_to_an_overlap_track_and_survive(tmp_path: Path) -> None:
    trace = _tiny(
        {"start_ns": [1200], "end_ns": [1300], "correlation_id": [1]},
        {"start_ns": [2000], "end_ns": [2100], "correlation_id": [1]},
        {"start_ns": [1000, 1100], "end_ns": [1250, 1400], "name": ["a", "b"]},
    )
    stats, report = _export(trace, tmp_path)
    assert stats.overlap_slices >= 1
    assert _decoded(report) == _expected(trace)
    assert any("(overlap 1)" in name for name in report.tracks.values())


@dataclass
class _Finding:
    rule: str
    severity: str
    message: str
    start_ns: int
    end_ns: int
    node: str | None
    rank: int | None


def test_findings_become_instant_events(tmp_path: Path) -> None:
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=5, seed=2))
    t0 = trace.span_ns()[0]  # type: ignore[index]
    findings = [
        _Finding("LowGPUUtilization", "warning", "GPU idle 40%", t0 + 10, t0 + 99, "node0", 0),
        {
            "rule": "StepOutlier",
            "severity": "error",
            "message": "slow step",
            "start_ns": t0 + 5,
            "end_ns": t0 + 6,
            "node": None,
            "rank": None,
        },
    ]
    stats, report = _export(trace, tmp_path, findings=findings)
    assert stats.instants == report.instants == 2
    assert {"Findings", "ktrace findings"} <= set(report.tracks.values())


def test_gzip_output_validates(tmp_path: Path) -> None:
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=5, ranks=2, seed=2))
    _export(trace, tmp_path, "t.pftrace.gz")
    assert (tmp_path / "t.pftrace.gz").read_bytes()[:2] == b"\x1f\x8b"


def test_progress_reaches_the_total(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=50, ranks=2, seed=2))
    export_perfetto(trace, tmp_path / "t.pftrace", progress=lambda d, t: calls.append((d, t)), chunk_rows=64)
    assert len(calls) > 4 and calls[-1][0] == calls[-1][1] > 0


@pytest.mark.parametrize("name", REAL)
def test_real_trace_exports_and_validates(tmp_path: Path, name: str, real_trace_path: Callable[[str], Path]) -> None:
    import ktrace

    trace = ktrace.open(real_trace_path(name))
    stats, report = _export(trace, tmp_path)
    assert _decoded(report) == _expected(trace)
    assert report.arrows == stats.flows == _launched(trace)


def test_every_real_trace_folder_is_covered(shared_traces: Path, real_trace_path: Callable[[str], Path]) -> None:
    covered = {real_trace_path(name).relative_to(shared_traces).parts[0] for name in REAL}
    assert covered == {p.name for p in shared_traces.iterdir() if p.is_dir()}


def test_allocator_events_become_memory_counter_tracks(tmp_path: Path) -> None:
    """Each GPU's allocated (and reserved) bytes after every allocator event, as bytes counters under its rank."""
    from reference.memory_trace import EVENTS, memory_trace

    trace = memory_trace()
    _, report = _export(trace, tmp_path)
    assert report.counters == 2 * len(EVENTS)  # allocated and reserved per event
    tracks = {d.uuid: d for d in _descriptors(tmp_path / "t.pftrace")}
    names = {d.name: d.counter.unit for d in tracks.values() if d.HasField("counter")}
    assert names == {
        "GPU 0 memory allocated": 3,  # UNIT_SIZE_BYTES
        "GPU 0 memory reserved": 3,
        "GPU 1 memory allocated": 3,
        "GPU 1 memory reserved": 3,
    }
    by_track = {d.uuid: d.name for d in tracks.values()}
    packets = PbTrace.FromString((tmp_path / "t.pftrace").read_bytes()).packet
    allocated = [
        int(p.track_event.double_counter_value)
        for p in packets
        if p.HasField("track_event") and by_track.get(p.track_event.track_uuid) == "GPU 0 memory allocated"
    ]
    assert allocated == [164, 464, 964, 664, 164, 364, 414, 350]  # the allocator's totals (64 B from before)
