"""A Kineto folder whose ranks come from 2+ hosts is put on one clock; one host is never shifted.

The real DLRM 8-rank job ran on one host. Here ranks 4-7 are moved to a second host whose clock runs 1.5 s ahead
(every `ts` of their files shifted), which the import must find again from the NCCL kernels (3 AllReduce and 5
SendRecv per rank) and undo.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import polars as pl
from real_traces import fixture_path

from ktrace.importers.kineto import import_kineto
from ktrace.model import store
from ktrace.model.clock_estimate import align_trace
from ktrace.model.trace import Trace

AHEAD_US = 1_500_000


@cache
def _dlrm() -> Trace:
    return import_kineto(fixture_path("dlrm"))


def _two_hosts(folder: Path) -> Path:
    folder.mkdir()
    for path in sorted(fixture_path("dlrm").glob("*.json.gz")):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        second = doc["distributedInfo"]["rank"] >= 4
        doc["hostname"] = "hostB" if second else "hostA"
        if second:
            for event in doc["traceEvents"]:
                if isinstance(event.get("ts"), int):
                    event["ts"] += AHEAD_US
        (folder / path.name.removesuffix(".gz")).write_text(json.dumps(doc))
    return folder


def test_the_real_dlrm_job_is_one_host_never_shifted_and_its_residual_is_reported() -> None:
    trace = _dlrm()
    assert trace.meta.hosts == ("localhost",) and trace.meta.clock_alignment is None
    alignment = align_trace(trace)
    assert alignment.method == "single_host" and not alignment.shifts
    assert alignment.collectives == 8  # 3 AllReduce + 5 SendRecv on each of the 8 ranks
    # Figure for RESULTS.md: collective ends of the 8 ranks differ by p50 1.0 µs, p99 3.7 µs (µs timestamps).
    assert (alignment.residual_p50_ns, alignment.residual_p99_ns) == (1_000, 3_685)


def test_ranks_from_two_hosts_are_aligned_on_import(tmp_path: Path) -> None:
    trace = import_kineto(_two_hosts(tmp_path / "job"))
    alignment = trace.meta.clock_alignment
    assert alignment is not None and alignment.applied and alignment.method == "collectives:order"
    assert alignment.reference_host == "hostA"
    host_b = alignment.host("hostB")
    assert host_b is not None and host_b.matched == 8 and host_b.rejected == 0
    assert abs(host_b.offset_ns - AHEAD_US * 1_000) <= 10_000
    assert alignment.residual_p99_ns is not None and alignment.residual_p99_ns <= 10_000
    # every kernel of hostB is back where the one-host job had it, to within the estimate's error
    original = _dlrm().kernels.sort("rank", "correlation_id", "start_ns")
    aligned = trace.kernels.sort("rank", "correlation_id", "start_ns")
    error = (aligned["start_ns"] - original["start_ns"]).abs().max()
    assert error is not None and int(error) == abs(host_b.offset_ns - AHEAD_US * 1_000)  # type: ignore[arg-type]
    # and the store keeps the alignment: aligned by default, each host's clock with KTRACE_CLOCK=raw
    root = store.write(trace, tmp_path / "job.ktrace")
    assert store.read(root).kernels.sort("rank", "correlation_id", "start_ns")["start_ns"].equals(aligned["start_ns"])
    raw = store.read(root, clock="raw").kernels.filter(pl.col("rank") >= 4).sort("rank", "correlation_id", "start_ns")
    shifted = original.filter(pl.col("rank") >= 4)["start_ns"] + AHEAD_US * 1_000
    assert raw["start_ns"].equals(shifted)
