"""CUDA graphs count once wherever launches are counted or summed (issue #17, wrong numbers 3).

No real trace of the fixtures has CUDA graphs (and no permissively licensed public Kineto trace with
`cudaGraphLaunch` was found), so the test writes one as PyTorch's profiler does: each step one
`cudaGraphLaunch` call whose correlation id every node kernel of the graph carries (with a "graph id"),
then one plain `cudaLaunchKernel` of a tiny kernel. Before the fix every graph node counted as a launch:
the graph launch's CPU time once per node, a queue entry per node.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import ktrace
from ktrace.analysis import latency, overlap
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rules.base import Outcome, ParamValue, Rule
from ktrace.analysis.rules.engine import run_rules
from ktrace.analysis.rules.timeline_latency import HIGH_LAUNCH_LATENCY, LAUNCH_BOUND_KERNELS
from ktrace.analysis.summary import summarize
from ktrace.model.trace import Trace

PID, TID = 100, 101
STEPS, NODES = 20, 200
GRAPH_LAUNCH_US, PLAIN_LAUNCH_US = 30, 5


def _x(cat: str, name: str, ts: int, dur: int, **args: Any) -> dict[str, Any]:
    gpu = cat == "kernel"
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0 if gpu else PID,
        "tid": 7 if gpu else TID,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def graph_job() -> list[dict[str, Any]]:
    """STEPS steps of 1 ms: a graph of NODES kernels (2 µs each, 1 µs apart) and a 1 µs kernel launched plainly."""
    events: list[dict[str, Any]] = []
    corr = 1
    for step in range(STEPS):
        t0 = 1000 + 1000 * step
        events.append(_x("user_annotation", f"ProfilerStep#{step}", t0, 900))
        events.append(_x("cuda_runtime", "cudaGraphLaunch", t0 + 10, GRAPH_LAUNCH_US, correlation=corr))
        events += [
            _x(
                "kernel",
                f"graph_node_{j}",
                t0 + 50 + 3 * j,
                2,
                correlation=corr,
                device=0,
                stream=7,
                **{"graph id": 5, "graph node id": j},
            )
            for j in range(NODES)
        ]
        events.append(_x("cuda_runtime", "cudaLaunchKernel", t0 + 700, PLAIN_LAUNCH_US, correlation=corr + 1))
        events.append(_x("kernel", "tiny", t0 + 710, 1, correlation=corr + 1, device=0, stream=7))
        corr += 2
    return events


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    path: Path = tmp_path_factory.mktemp("graphs") / "graphs.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": graph_job()}))
    return ktrace.open(path)


def test_the_trace_fans_out(trace: Trace) -> None:
    assert trace.kernels.height == STEPS * (NODES + 1)
    assert trace.meta.health["graph_fanout_launches"] == STEPS
    runs = TraceIndex(trace).launch_runs()
    assert runs.fans_out and runs.first.size == 2 * STEPS
    assert sorted(set(runs.records.tolist())) == [1, NODES]


def test_queue_depth_counts_a_graph_launch_once(trace: Trace) -> None:
    stats = overlap.queue_depth_stats(trace).row(0, named=True)
    assert stats["max_depth"] == 1  # one call outstanding at a time (was NODES: one entry per graph node)
    depth = overlap.queue_depth(trace)
    assert depth.height == 4 * STEPS  # +1 and -1 of each call
    # a graph launch stays queued until its last node ends
    first_end = 1000 + 50 + 3 * (NODES - 1) + 2
    assert depth.filter(pl.col("depth") == 0)["ts_ns"][0] == first_end * 1000
    start = overlap.queue_depth_stats(trace, until="start").row(0, named=True)
    assert start["max_depth"] == 1


def _check(trace: Trace, rule: Rule, **params: ParamValue) -> Outcome:
    return rule.check(trace, TraceIndex(trace), {**{p.name: p.default for p in rule.params}, **params})


def test_launch_bound_rule_sums_each_launch_call_once(trace: Trace) -> None:
    outcome = _check(trace, LAUNCH_BOUND_KERNELS, min_count=1, min_pct=0.0)
    api_total_ms = float(trace.api.select((pl.col("end_ns") - pl.col("start_ns")).sum()).item()) / 1e6
    assert outcome.details["api_ms"] <= api_total_ms  # was 120.1 ms of launches in a trace with 0.7 ms of them
    # the tiny kernels are shorter than their launch; a graph's 400 µs of kernels are not shorter than its launch
    assert (outcome.datapoints, outcome.triggered) == (2 * STEPS, STEPS)
    assert outcome.details["api_ms"] == pytest.approx(STEPS * PLAIN_LAUNCH_US / 1000)
    assert f"{STEPS} CUDA graph launches of {STEPS * NODES:,} kernels count once each" in outcome.message
    default = next(r for r in run_rules(trace).results if r.rule == "LaunchBoundKernels")
    assert not default.fired  # half of the launches are short, not more than half


def test_launch_latency_rule_counts_launch_calls(trace: Trace) -> None:
    outcome = _check(trace, HIGH_LAUNCH_LATENCY)
    assert outcome.datapoints == 2 * STEPS
    # start->start p99 is a launch's latency (the graph's first node: 40 µs), not a late node's (637 µs)
    assert outcome.details["latency_us"]["launch_latency_p99"] <= 40.0


def test_summary_latency_counts_launch_calls(trace: Trace) -> None:
    rows = summarize(trace).latency.to_dicts()
    assert [(r["kind"], r["count"]) for r in rows] == [("kernel", 2 * STEPS)]
    assert rows[0]["api_duration_ns_max"] == GRAPH_LAUNCH_US * 1000
    assert rows[0]["launch_latency_ns_max"] == 40_000  # the graph's first node, 40 µs after the call started
    every_run = latency.latency_stats(trace, by="kind")
    assert every_run["count"].to_list() == [STEPS * (NODES + 1)]


def test_first_runs_agree_between_fast_and_frame_paths(trace: Trace) -> None:
    fast = latency.latency_stats(trace, by="name", graph_runs="first")
    frame = latency.latency_stats(trace, by=["name", "is_graph"], graph_runs="first").drop("is_graph")
    assert fast.height == 2 and fast.sort("name").equals(frame.sort("name"))
