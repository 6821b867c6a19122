"""The large-job generator (ktrace.testing.fleet_job) on the real DLRM folder: every rank imports, the planted host
offsets and the straggler are exactly where the manifest says, the steps are tiled without id clashes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import polars as pl

from ktrace.importers import load
from ktrace.model.alignment import with_clock
from ktrace.testing.fleet_job import MANIFEST, generate_fleet_job, planted_offsets_us


def test_sixteen_ranks_on_two_hosts_with_offsets_and_a_straggler(
    real_trace_path: Callable[[str], Path], tmp_path: Path
) -> None:
    job = generate_fleet_job(real_trace_path("dlrm"), tmp_path / "job", ranks=16, steps=2, straggler_rank=13)
    manifest = json.loads((tmp_path / "job" / MANIFEST).read_text())
    assert manifest["hosts"]["node001"] == {"offset_ns": job.offsets_ns["node001"], "ranks": list(range(8, 16))}
    assert manifest["straggler"] == {"rank": 13, "host": "node001", "kernel_stretch": 1.5, "delay_ms": 0.0}
    offset = job.offsets_ns["node001"]
    assert job.offsets_ns["node000"] == 0 and 1_000_000 <= abs(offset) <= 2_000_000_000

    trace = load(tmp_path / "job")  # the manifest beside the files is not taken for a rank
    assert trace.ranks == [("node000", r) for r in range(8)] + [("node001", r) for r in range(8, 16)]
    kernels = trace.kernels.with_columns(pl.col("node").cast(pl.String))
    # both copies of the source window, each launch joined to its kernel (ids moved apart per step)
    one_rank = kernels.filter(pl.col("rank") == 1)
    assert one_rank.height == 2 * load(next(real_trace_path("dlrm").glob("worker1_*"))).kernels.height
    assert one_rank["correlation_id"].n_unique() == one_rank.height
    steps = trace.ranges.filter(pl.col("name").cast(pl.String).str.starts_with("ProfilerStep#"), pl.col("rank") == 1)
    assert steps.height == 2

    def starts(rank: int) -> pl.Series:
        return kernels.filter(pl.col("rank") == rank).sort("correlation_id")["start_ns"]

    # rank 9 replays rank 1's file on a clock `offset` ahead: the import finds the offset from the collectives and
    # puts node001 back on node000's clock (within the 10 us goal); the raw clock keeps the planted offset exactly
    found = trace.meta.clock_alignment
    assert found is not None and found.applied and found.method != "none"
    host = found.host("node001")
    assert host is not None and abs(host.offset_ns - offset) <= 10_000
    assert ((starts(9) - starts(1)).abs() <= 10_000).all()
    kernels = with_clock(trace, "raw").kernels
    assert ((starts(9) - starts(1)) == offset).all()
    busy = kernels.with_columns(d=pl.col("end_ns") - pl.col("start_ns"), nccl=pl.col("name").cast(pl.String))
    compute = busy.filter(~pl.col("nccl").str.to_lowercase().str.contains("nccl"))
    twin, straggler = (compute.filter(pl.col("rank") == r)["d"].sum() for r in (5, 13))
    assert 1.45 * twin <= straggler <= 1.55 * twin


def test_offsets_are_reproducible_and_cover_milliseconds_to_seconds() -> None:
    offsets = planted_offsets_us(64, seed=13)
    assert offsets == planted_offsets_us(64, seed=13) != planted_offsets_us(64, seed=14)
    sizes = [abs(o) for o in offsets[1:]]
    assert min(sizes) >= 1_000 and max(sizes) <= 2_000_000 and max(sizes) > 100 * min(sizes)
