"""The rules' array view of launched GPU records, checked against the analysis it stands in for.

rules.launches rebuilds what the kernel and health rules read of ktrace.analysis.latency.launch_latency from
the shared launch join; rules.inputs.stream_prev_end replaces a sort per stream. Both are checked here
against launch_latency itself and against a per-stream Python loop, on a trace built to hit every path:
CUDA-graph fan-out (kernels and a memset), graphs launched without graph_id, memcpy launches, a launch
without a GPU record, kernels without a launch, a kernel starting before its launch, overlapping and
tied kernels on a stream, two ranks.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.latency import launch_latency
from ktrace.analysis.rules.inputs import FIRST_ON_STREAM, stream_prev_end
from ktrace.analysis.rules.launches import (
    kernel_launches,
    kernel_rows,
    launched_api_keys,
    launched_calls,
    launches,
    record_evidence_frame,
)
from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace, TraceMeta

T0 = 1_700_000_000_000_000_000
US = 1_000


def _api(b: TraceBuilder, starts: list[int], corr: list[int], names: list[str], rank: int) -> None:
    n = len(starts)
    s = np.array(starts, np.int64)
    b.add(
        "api",
        {
            "start_ns": s,
            "end_ns": s + 4 * US,
            "pid": np.ones(n, np.int64),
            "tid": np.ones(n, np.int64),
            "correlation_id": np.array(corr, np.int64),
            "domain": ["runtime"] * n,
            "name": names,
        },
        rank=rank,
    )


def _kernels(
    b: TraceBuilder,
    starts: list[int],
    durs: list[int],
    corr: list[int | None],
    names: list[str],
    rank: int,
    stream: list[int | None],
    graph: list[int | None],
) -> None:
    s = np.array(starts, np.int64)
    b.add(
        "kernels",
        {
            "start_ns": s,
            "end_ns": s + np.array(durs, np.int64),
            "device": np.zeros(len(s), np.int32),
            "stream": stream,
            "correlation_id": corr,
            "name": names,
            "graph_id": graph,
        },
        rank=rank,
    )


def tricky_trace() -> Trace:
    """Every launch path the rules distinguish, on two ranks."""
    b = TraceBuilder(node="n0", rank=0, meta=TraceMeta(source="synthetic"))
    for rank in (0, 1):
        base = T0 + rank * 7 * US
        _api(
            b,
            [
                base,
                base + 10 * US,
                base + 20 * US,
                base + 30 * US,
                base + 40 * US,
                base + 50 * US,
                base + 60 * US,
                base + 41 * US,
            ],
            [1, 2, 3, 4, 5, 6, 7, 8],
            [
                "cudaLaunchKernel",
                "cudaGraphLaunch",
                "cudaLaunchKernel",
                "cudaMemcpyAsync",
                "cudaLaunchKernel",
                "cuGraphLaunch",
                "cudaLaunchKernel",
                "cudaLaunchKernel",
            ],
            rank,
        )
        _kernels(
            b,
            # plain; graph x3 (graph_id); a kernel 8 µs before its launch; a long kernel; an orphan
            # overlapping it on its stream; two kernels of a graph launched by cuGraphLaunch with no
            # graph_id, on a null stream; a kernel tied with the orphan's start (call 7 runs nothing)
            [
                base + 6 * US,
                base + 16 * US,
                base + 15 * US,
                base + 30 * US,
                base + 12 * US,
                base + 42 * US,
                base + 45 * US,
                base + 58 * US,
                base + 57 * US,
                base + 45 * US,
            ],
            [3 * US, 2 * US, 1 * US, 2 * US, 1 * US, 10 * US, 1 * US, 1 * US, 1 * US, 2 * US],
            [1, 2, 2, 2, 3, 5, None, 6, 6, 8],
            ["a", "g1", "g2", "g1", "early", "long", "orphan", "h", "h", "tie"],
            rank,
            [7, 7, 8, 7, 9, 7, 7, None, None, 7],
            [None, 11, 11, 11, None, None, None, None, None, None],
        )
        b.add(
            "memory",
            {
                "op": ["memcpy", "memset"],
                "start_ns": np.array([base + 34 * US, base + 17 * US]),
                "end_ns": np.array([base + 36 * US, base + 18 * US]),
                "device": np.zeros(2, np.int32),
                "stream": [7, 8],
                "correlation_id": [4, 2],
                "copy_kind": ["HtoD", "unknown"],
                "src_kind": ["pageable", "unknown"],
                "dst_kind": ["device", "device"],
                "graph_id": [None, 11],
            },
            rank=rank,
        )
    return b.build()


@pytest.fixture(params=["tricky", "synthetic"])
def trace(request: pytest.FixtureRequest, synthetic_trace: Trace) -> Trace:
    return tricky_trace() if request.param == "tricky" else synthetic_trace


def test_kernel_launches_are_launch_latencys_kernel_rows(trace: Trace) -> None:
    ctx = TraceIndex(trace)
    lat = launch_latency(trace).filter(pl.col("kind") == "kernel")
    ours = kernel_launches(ctx)
    assert ours["row"].to_list() == lat["row"].to_list()  # same rows, same order
    for col in ("start_ns", "end_ns", "api_end_ns"):
        assert ours[col].to_list() == lat[col].to_list()
    assert (ours["end_ns"] - ours["start_ns"]).to_list() == lat["duration_ns"].to_list()
    assert (ours["api_end_ns"] - ours["api_start_ns"]).to_list() == lat["api_duration_ns"].to_list()
    assert (ours["start_ns"] - ours["api_start_ns"]).to_list() == lat["launch_latency_ns"].to_list()
    assert np.array_equal(np.arange(trace.kernels.height)[kernel_rows(ctx)[1]], lat["row"].to_numpy())


def test_launched_calls_count_graph_runs_once(trace: Trace) -> None:
    ctx = TraceIndex(trace)
    lat = launch_latency(trace)
    is_call = trace.api["name"].cast(pl.String).str.contains("Launch").to_numpy()
    launch_names = trace.api.filter(pl.Series(is_call))["name"].cast(pl.String).unique().to_list()
    expected = lat.filter((pl.col("graph_run") == 0) & pl.col("api_name").cast(pl.String).is_in(launch_names)).height
    assert launched_calls(ctx, is_call) == expected
    keys = lat.select(pl.col("node").cast(pl.String), "rank", "correlation_id").unique().sort(pl.all())
    assert launched_api_keys(ctx).sort(pl.all()).equals(keys)


def test_record_evidence_frame_matches_launch_latency(trace: Trace) -> None:
    ctx = TraceIndex(trace)
    lat = launch_latency(trace)
    everything = record_evidence_frame(ctx, np.arange(launches(ctx).size))
    cols = ["node", "rank", "device", "stream", "name", "start_ns", "end_ns", "launch_latency_ns"]
    assert everything.select(cols).equals(lat.select(cols).with_columns(pl.col("node", "name").cast(pl.String)))


def test_tricky_trace_has_every_case() -> None:
    lat = launch_latency(tricky_trace())
    by_name_only = pl.col("is_graph") & (pl.col("api_name").cast(pl.String) == "cuGraphLaunch")  # no graph_id
    assert lat.filter(by_name_only).height == 4
    assert lat.filter(pl.col("graph_run") > 0).height > 0 and lat.filter(pl.col("kind") == "memset").height == 2
    assert lat.filter(pl.col("launch_latency_ns") < 0).height == 2


def _naive_prev_end(trace: Trace) -> list[int]:
    """Per kernel: end of the previous kernel of its stream in (start, row) order, by sorting in Python."""
    k = (
        trace.kernels.select(pl.col("node").cast(pl.String), "rank", "device", "stream", "start_ns", "end_ns")
        .with_row_index("row")
        .rows()
    )
    out = [FIRST_ON_STREAM] * len(k)
    order = sorted(k, key=lambda r: (r[1], r[2], r[3], -1 if r[4] is None else r[4], r[5], r[0]))
    for prev, cur in zip(order, order[1:], strict=False):
        if prev[1:5] == cur[1:5]:
            out[cur[0]] = prev[6]
    return out


def test_stream_prev_end_against_a_python_loop(trace: Trace) -> None:
    assert stream_prev_end(TraceIndex(trace)).tolist() == _naive_prev_end(trace)


def test_rules_on_the_tricky_trace() -> None:
    from ktrace.analysis.rules.engine import run_rules

    report = run_rules(tricky_trace())
    orphans = report.result("OrphanRecords").details
    assert orphans == {"orphan_kernels": 2, "launches_without_gpu_record": 2}  # "orphan"; call 7 on each rank
    clock = report.result("ClockProblems")
    assert clock.details["launch_after_run"] == 2  # "early" starts 8 µs before its launch call, on each rank
    # stream 7 in (start, row) order: "long" (42-52 µs), "orphan" (45-46 µs, overlaps it), "tie" (45-47 µs,
    # starts before "orphan" ends, within the 5 µs tolerance)
    assert clock.details["stream_overlaps"] == 2
    assert {e.name for f in clock.findings for e in f.evidence} >= {"early", "orphan"}
