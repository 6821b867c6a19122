"""Critical path: hand-built graphs worked out by hand, and HTA's own test traces and expectations."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from ktrace.analysis.critical_path import critical_path
from ktrace.analysis.critical_path_graph import EDGE_TYPES, Window, build_graph
from ktrace.analysis.index import TraceIndex
from ktrace.importers import load
from ktrace.model import Trace, TraceBuilder

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "traces"
CP = FIX / "hta-critical-path"
ALEX = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"


def _trace(
    api: list[tuple[int, int, int, str]],
    kernels: list[tuple[int, int, int, int, str]],
    ops: list[tuple[int, int, str]] = (),  # type: ignore[assignment]
    syncs: list[tuple[int, int, int | None, str, int]] = (),  # type: ignore[assignment]
) -> Trace:
    """api: (start, end, correlation, name); kernels: (start, end, stream, correlation, name); ops: (start, end,
    name); syncs: (start, end, stream, sync_type, correlation). One thread (pid 1, tid 1), device 0."""
    b = TraceBuilder("n0", 0)
    b.add(
        "api",
        {
            "start_ns": [a[0] for a in api],
            "end_ns": [a[1] for a in api],
            "pid": [1] * len(api),
            "tid": [1] * len(api),
            "correlation_id": [a[2] for a in api],
            "domain": ["runtime"] * len(api),
            "name": [a[3] for a in api],
        },
    )
    b.add(
        "kernels",
        {
            "start_ns": [k[0] for k in kernels],
            "end_ns": [k[1] for k in kernels],
            "device": [0] * len(kernels),
            "stream": [k[2] for k in kernels],
            "correlation_id": [k[3] for k in kernels],
            "name": [k[4] for k in kernels],
        },
    )
    if ops:
        b.add(
            "ops",
            {
                "start_ns": [o[0] for o in ops],
                "end_ns": [o[1] for o in ops],
                "pid": [1] * len(ops),
                "tid": [1] * len(ops),
                "name": [o[2] for o in ops],
            },
        )
    if syncs:
        b.add(
            "syncs",
            {
                "start_ns": [s[0] for s in syncs],
                "end_ns": [s[1] for s in syncs],
                "device": [0] * len(syncs),
                "stream": [s[2] for s in syncs],
                "sync_type": [s[3] for s in syncs],
                "correlation_id": [s[4] for s in syncs],
            },
        )
    return b.build()


def _composition(cp: object) -> dict[str, int]:
    frame: pl.DataFrame = cp.composition  # type: ignore[attr-defined]
    return {r["category"]: r["ns"] for r in frame.iter_rows(named=True) if r["ns"]}


def test_cpu_bound_chain() -> None:
    """An operator [0, 1000) launching a 50 ns kernel: CPU 0 -> 100 -> 110 -> 1000 beats 100 + 20 + 50."""
    trace = _trace(
        api=[(100, 110, 1, "cudaLaunchKernel")], kernels=[(120, 170, 7, 1, "k")], ops=[(0, 1000, "aten::heavy")]
    )
    cp = critical_path(trace)
    assert cp is not None and cp.scope == "trace"
    assert cp.length_ns == 1000
    assert _composition(cp) == {"cpu": 1000}
    assert cp.path_records.size == 0
    top = cp.items.row(0, named=True)
    assert (top["kind"], top["name"], top["ns"]) == ("operator", "aten::heavy", 990)  # 100 + 890 self time


def test_launch_bound_chain() -> None:
    """Three launches 100 ns apart, each kernel waiting 12 ns for its launch: the gaps between top-level calls
    weigh nothing (HTA's dependency edges), so the path is L1 (10) + L2 (10) + L3's launch delay (12) + k3 (8)."""
    trace = _trace(
        api=[(0, 10, 1, "cudaLaunchKernel"), (100, 110, 2, "cudaLaunchKernel"), (200, 210, 3, "cudaLaunchKernel")],
        kernels=[(12, 20, 7, 1, "tiny"), (112, 120, 7, 2, "tiny"), (212, 220, 7, 3, "tiny")],
    )
    ix = TraceIndex(trace)
    graph = build_graph(ix, Window("n0", 0, 0, 1000))
    launches = graph.weight[graph.etype == EDGE_TYPES.index("launch")]
    assert sorted(launches.tolist()) == [12, 12, 12]
    cp = critical_path(trace, index=ix)
    assert cp is not None
    assert cp.length_ns == 40
    assert _composition(cp) == {"cpu": 20, "launch_delay": 12, "gpu_compute": 8}
    assert cp.path_records.tolist() == [2]


def _two_streams() -> Trace:
    """L1 launches a 480 ns kernel on stream 7, L2 a 60 ns one on stream 8, the thread waits for stream 7
    (cudaStreamSynchronize [40, 510)), then L3 launches k3 on stream 8."""
    return _trace(
        api=[
            (0, 10, 1, "cudaLaunchKernel"),
            (20, 30, 2, "cudaLaunchKernel"),
            (40, 510, 3, "cudaStreamSynchronize"),
            (520, 530, 4, "cudaLaunchKernel"),
        ],
        kernels=[(20, 500, 7, 1, "big"), (40, 100, 8, 2, "small"), (540, 600, 8, 4, "after")],
        syncs=[(45, 505, 7, "stream", 3)],
    )


def test_two_streams_and_a_sync() -> None:
    """L1 start -> (launch 20) big -> (480) sync -> L3 start -> (launch 20) after (60): 580 ns."""
    cp = critical_path(_two_streams())
    assert cp is not None
    assert cp.length_ns == 580
    assert _composition(cp) == {"launch_delay": 40, "gpu_compute": 540}
    sync = cp.composition.filter(pl.col("category") == "sync")
    assert sync["edges"].item() == 1 and sync["ns"].item() == 0
    assert cp.path_segments["type"].to_list() == ["launch", "gpu", "sync", "dependency", "launch", "gpu"]


def test_what_if_by_hand() -> None:
    """big 2x faster: 20 + 240 + 20 + 60 = 340 (saves 240); sync removed: the thread no longer waits, so the
    longest chain left is L1's launch delay and big itself, 20 + 480 = 500 (saves 80)."""
    cp = critical_path(_two_streams())
    assert cp is not None
    got = {(r["change"], r["target"]): r["saved_ns"] for r in cp.what_if.iter_rows(named=True)}
    assert got[("2x faster", "big")] == 240
    assert got[("removed", "cudaStreamSynchronize")] == 80
    assert got[("2x faster", "after")] == 30
    assert cp.what_if["saved_ns"].to_list() == sorted(cp.what_if["saved_ns"].to_list(), reverse=True)


def test_nested_operators_attribute_their_self_time() -> None:
    """outer [0, 100) holds inner [10, 40): outer's edges 0->10 and 40->100 (70), inner's 10->40 (30)."""
    trace = _trace(api=[], kernels=[], ops=[(0, 100, "outer"), (10, 40, "inner")])
    cp = critical_path(trace)
    assert cp is not None and cp.length_ns == 100
    assert dict(zip(cp.items["name"], cp.items["ns"], strict=True)) == {"outer": 70, "inner": 30}


def test_median_step_is_the_default_window() -> None:
    """Steps [0, 100), [100, 300), [300, 350): the median-duration step is the first (100 ns)."""
    b = TraceBuilder("n0", 0)
    b.add(
        "ops",
        {"start_ns": [10, 110, 310], "end_ns": [90, 290, 340], "pid": [1] * 3, "tid": [1] * 3, "name": ["a", "b", "c"]},
    )
    b.add(
        "ranges",
        {
            "start_ns": [0, 100, 300],
            "end_ns": [100, 300, 350],
            "pid": [1] * 3,
            "tid": [1] * 3,
            "name": ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"],
            "domain": ["profiler_step"] * 3,
            "depth": [0] * 3,
            "on_gpu": [False] * 3,
        },
    )
    cp = critical_path(b.build())
    assert cp is not None and cp.scope == "step"
    assert (cp.start_ns, cp.end_ns, cp.length_ns) == (0, 100, 80)
    assert "median of 3" in cp.label


def test_empty_trace_has_no_path() -> None:
    assert critical_path(_trace(api=[], kernels=[])) is None


# Real traces: HTA's tests (facebookresearch/HolisticTraceAnalysis tests/test_critical_path_analysis.py).


def test_simple_add_matches_hta() -> None:
    """HTA expects 315 nodes on the path of instance 1; HTA 0.5 also gives 414 graph nodes, 440 edges, 159
    events and 241,724 us (benchmarks/RESULTS.md, critical path), which ktrace reproduces exactly."""
    cp = critical_path(load(CP / "simple_add_trace.json.gz"), annotation=ALEX, instance=1)
    assert cp is not None
    assert (cp.graph_nodes, cp.graph_edges, cp.path_nodes, cp.path_events) == (414, 440, 315, 159)
    assert cp.length_ns == 241_724_000
    comp = _composition(cp)
    assert (comp["launch_delay"], comp["gpu_gap"], comp["gpu_compute"] + comp["memory"]) == (17_000, 9_000, 508_000)


def test_simple_add_critical_kernels_match_hta_overlay() -> None:
    """HTA's expected overlaid trace marks 6 GPU kernels/memsets critical: exactly the GPU records on ktrace's
    path of instance 1 (by correlation id). The overlay also marks all 16 memcpys and 602 CPU events, more than
    any one window of HTA 0.5 gives (159 events on instance 1, 600 on the whole trace): it was written by an
    older HTA. ktrace's whole-trace path (identical to HTA 0.5's: same 600 events and 41,435,234 us) holds all
    16 of its memcpys."""
    overlay = json.load(gzip.open(CP / "expected" / "simple_add_overlaid_critical_path.expected.json.gz"))
    marked = [e for e in overlay["traceEvents"] if e.get("ph") == "X" and e.get("args", {}).get("critical") == 1]
    kernels = {e["args"]["correlation"] for e in marked if e["cat"] in ("kernel", "gpu_memset")}
    memcpys = {e["args"]["correlation"] for e in marked if e["cat"] == "gpu_memcpy"}
    trace = load(CP / "simple_add_trace.json.gz")
    ix = TraceIndex(trace)
    cp = critical_path(trace, annotation=ALEX, instance=1, index=ix)
    assert cp is not None
    c = ix.gpu_columns()
    assert set(c.correlation_id[cp.path_records].tolist()) == kernels
    whole = critical_path(trace, index=TraceIndex(trace))
    assert whole is not None and whole.path_events == 600 and whole.length_ns == 41_435_234_000
    on_path = whole.path_records
    assert set(c.correlation_id[on_path[c.kind[on_path] == 1]].tolist()) == memcpys


@pytest.mark.parametrize(
    ("name", "annotation", "instance", "nodes", "edges", "length_us"),
    [
        ("event_sync_trace.json.gz", "ProfilerStep", 0, 54, 57, 2_401),
        ("event_sync_multi_stream_trace.json.gz", None, 0, 78, 85, 1_178),
    ],
)
def test_event_sync_traces(
    name: str, annotation: str | None, instance: int, nodes: int, edges: int, length_us: int
) -> None:
    """Same graph nodes as HTA 0.5 (54, 78); ktrace adds the event-wait edges HTA 0.5 drops under pandas 3
    (55 + 2, 82 + 3 edges), which lengthens event_sync's path by 4 us (2,397 in HTA): the cudaEventSynchronize
    now waits for the spin kernel, and the path goes on through the cudaEventElapsedTime call after it."""
    cp = critical_path(load(CP / name), annotation=annotation, instance=instance)
    assert cp is not None
    assert (cp.graph_nodes, cp.graph_edges) == (nodes, edges)
    assert cp.length_ns == length_us * 1000


def test_alexnet_path_crosses_streams_through_a_sync() -> None:
    """HTA's test: on instance 1 the path goes from one stream to the other through a cudaStreamWaitEvent."""
    trace = load(FIX / "hta-a100-alexnet-tiny" / "benchmark_result_2869224_1695835535_trace.json.gz")
    ix = TraceIndex(trace)
    cp = critical_path(trace, annotation=ALEX, instance=1, index=ix)
    assert cp is not None
    assert cp.length_ns == 35_834_000
    streams = set(ix.gpu_columns().stream[cp.path_records].tolist())
    assert len(streams) == 2
    kinds = cp.path_segments["type"].to_list()
    assert any(a == "gpu" and b == "sync" and c == "gpu" for a, b, c in zip(kinds, kinds[1:], kinds[2:], strict=False))


def test_summary_carries_the_critical_path() -> None:
    """summary JSON: the critical_path key with the numbers above; null and a note without CPU events."""
    from ktrace.analysis.summary import summarize
    from ktrace.presentation.summary_json import summary_to_dict

    doc = summary_to_dict(summarize(_two_streams()))
    cp = doc["critical_path"]
    assert cp["length_ns"] == 580 and cp["scope"] == "trace" and cp["sync_records"] == 1
    assert {r["category"]: r["ns"] for r in cp["composition"]}["gpu_compute"] == 540
    assert {(r["change"], r["target"]) for r in cp["what_if"]} >= {
        ("2x faster", "big"),
        ("removed", "cudaStreamSynchronize"),
    }
    b = TraceBuilder("n0", 0)
    b.add("kernels", {"start_ns": [0], "end_ns": [10], "device": [0], "stream": [7], "name": ["k"]})
    empty = summarize(b.build())
    assert empty.critical_path is None
    assert summary_to_dict(empty)["critical_path"] is None
    assert any(n.startswith("critical_path:") for n in empty.notes)


def test_path_marks_merge_runs_of_one_type() -> None:
    """The two-streams path: launch [0, 20), big [20, 500), (sync, dependency: weightless), launch [520, 540),
    after [540, 600): four markers on rank 0."""
    from ktrace.analysis.critical_path_marks import path_marks

    cp = critical_path(_two_streams())
    assert cp is not None
    marks = path_marks(cp)
    assert [(m["start_ns"], m["end_ns"]) for m in marks] == [(0, 20), (20, 500), (520, 540), (540, 600)]
    assert [m["message"].split()[0] for m in marks] == ["launch", "gpu", "launch", "gpu"]
    assert all(m["rank"] == 0 and m["node"] == "n0" for m in marks)


def test_export_draws_the_critical_path(tmp_path: Path) -> None:
    """ktrace export --critical-path: one instant per marker on the Findings track of the Perfetto file."""
    from reference.perfetto_validate import validate_perfetto

    from ktrace.cli import main

    out = tmp_path / "cp.pftrace"
    args = ["export", str(CP / "event_sync_trace.json.gz"), "-o", str(out), "--critical-path", "--no-progress"]
    assert main(args) == 0
    assert validate_perfetto(out).instants == 11


def test_clock_skew_cycle_is_broken() -> None:
    """A kernel recorded at [40, 50) although its launch call runs [70, 80), and a stream sync [0, 60) that
    (by time) waits for it: S.end -> L.start -> (launch) k.start -> k.end -> (sync) S.end is a cycle. The
    launch edge going back in time is dropped and the summary says so."""
    from ktrace.analysis.critical_path_summary import critical_path_notes

    trace = _trace(
        api=[(0, 60, 1, "cudaStreamSynchronize"), (70, 80, 2, "cudaLaunchKernel")],
        kernels=[(40, 50, 7, 2, "skewed")],
        syncs=[(5, 60, 7, "stream", 1)],
    )
    cp = critical_path(trace)
    assert cp is not None and cp.dropped_edges == 1
    # left: the skewed kernel (10) -> sync -> S.end -> L.start -> L.end (10)
    assert cp.length_ns == 20
    assert cp.path_segments["type"].to_list() == ["gpu", "sync", "dependency", "cpu"]
    assert any("dropped" in n for n in critical_path_notes(cp))


def test_siblings_and_grandchildren_attribution() -> None:
    """outer [0, 100) > a [10, 20), b [30, 50) > c [35, 40): the gap a.end -> b.start belongs to outer (a's
    parent): outer 10 + 10 + 50 = 70, a 10, b 5 + 10 = 15, c 5."""
    trace = _trace(api=[], kernels=[], ops=[(0, 100, "outer"), (10, 20, "a"), (30, 50, "b"), (35, 40, "c")])
    cp = critical_path(trace)
    assert cp is not None and cp.length_ns == 100
    assert dict(zip(cp.items["name"], cp.items["ns"], strict=True)) == {"outer": 70, "a": 10, "b": 15, "c": 5}


def test_steps_pattern_and_annotation_choose_the_window() -> None:
    """Ranges chunk_1..3 are steps only under --steps-pattern; annotation/instance picks one range by start."""
    b = TraceBuilder("n0", 0)
    b.add(
        "ops",
        {"start_ns": [10, 110, 310], "end_ns": [90, 290, 340], "pid": [1] * 3, "tid": [1] * 3, "name": ["a", "b", "c"]},
    )
    b.add(
        "ranges",
        {
            "start_ns": [0, 100, 300],
            "end_ns": [100, 300, 350],
            "pid": [1] * 3,
            "tid": [1] * 3,
            "name": ["chunk_1", "chunk_2", "chunk_3"],
            "domain": ["nvtx"] * 3,
            "depth": [0] * 3,
            "on_gpu": [False] * 3,
        },
    )
    trace = b.build()
    default = critical_path(trace)
    assert default is not None and default.scope == "trace"
    by_pattern = critical_path(trace, steps_pattern=r"^chunk_(\d+)$")
    assert by_pattern is not None and by_pattern.scope == "step" and by_pattern.length_ns == 80
    by_annotation = critical_path(trace, annotation="chunk_", instance=1)
    assert by_annotation is not None and by_annotation.scope == "annotation"
    assert (by_annotation.start_ns, by_annotation.length_ns) == (100, 180)
    assert critical_path(trace, annotation="chunk_", instance=3) is None


def test_kineto_event_wait_links_are_imported() -> None:
    """Kineto's wait_on_stream / wait_on_cuda_event_record_corr_id / wait_on_cuda_event_id land in the syncs
    table (-1, Kineto's "none", as null): the links the event-sync and stream-wait edges follow."""
    syncs = load(CP / "event_sync_multi_stream_trace.json.gz").syncs.sort("correlation_id")
    rows = syncs.select(pl.col("sync_type").cast(pl.String), "wait_stream", "wait_correlation_id", "event_id").rows()
    assert rows == [
        ("event", None, None, 9),
        ("event", 20, 32, 9),
        ("stream_wait_event", 20, 1385, 19),
        ("event", 28, 62, 9),
        ("context", None, None, None),
    ]
