"""Kineto export: the file PyTorch's profiler writes (categories, args, flows, metadata, header), exact times, null ids,
gzip, folders of rank files, streaming slices, and the one line naming what Kineto has no slot for."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import ktrace
from ktrace.exporters import kineto_json
from ktrace.exporters.kineto_events import memory_name
from ktrace.exporters.kineto_json import export_kineto, left_out
from ktrace.model.builder import TraceBuilder
from ktrace.model.errors import KtraceError
from ktrace.model.trace import Trace, TraceMeta
from ktrace.testing import SyntheticConfig, assert_trace_equal, generate

T0 = 1_716_423_322_123_456_789
"""An epoch time with nanoseconds, past float64's exact µs range (as every real trace)."""
PID = 4242


def edge_trace() -> Trace:
    """One rank with what a Kineto file can carry, odd values included: ns times, a null stream, a sync without a
    device, an allocator event without a thread, NCCL args, graph ids, a driver call, shapes and a Python frame."""
    b = TraceBuilder("gpu-node-7", 3, TraceMeta(source="kineto", hosts=("gpu-node-7",)))
    b.add("threads", {"pid": [PID, PID], "tid": [PID, PID + 1], "name": ["python3", "pt_autograd_0"]})
    b.add(
        "devices",
        {"device": [1], "name": ["NVIDIA A100"], "compute_major": [8], "compute_minor": [0], "sm_count": [108]},
    )
    b.add(
        "api",
        {
            "start_ns": [T0 + 1, T0 + 2_001, T0 + 4_003],
            "end_ns": [T0 + 1_500, T0 + 3_000, T0 + 9_999],
            "pid": [PID] * 3,
            "tid": [PID] * 3,
            "correlation_id": [11, 12, 13],
            "external_id": [5, 5, None],
            "domain": ["runtime", "driver", "runtime"],
            "name": ["cudaLaunchKernel", "cuLaunchKernel", "cudaStreamSynchronize"],
            "cbid": [211, 307, None],
        },
    )
    b.add(
        "kernels",
        {
            "start_ns": [T0 + 10_000, T0 + 20_017],
            "end_ns": [T0 + 19_999, T0 + 90_000],
            "device": [1, 1],
            "stream": [7, 13],
            "context_id": [1, 1],
            "correlation_id": [11, 12],
            "external_id": [5, 5],
            "name": ['sgemm "128x64"', "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long)"],
            "grid_x": [216, 2],
            "grid_y": [1, None],
            "grid_z": [1, 1],
            "block_x": [256, 512],
            "block_y": [1, 1],
            "block_z": [1, 1],
            "registers_per_thread": [64, 96],
            "static_shared_bytes": [1024, 0],
            "graph_id": [None, 3],
            "graph_node_id": [None, 30],
            "collective": [None, "allreduce"],
            "in_nelems": [None, 1024],
            "out_nelems": [None, 1024],
            "comm_dtype": [None, "Float"],
            "group_size": [None, 2],
        },
    )
    b.add(
        "memory",
        {
            "op": ["memcpy", "memset"],
            "start_ns": [T0 + 91_000, T0 + 95_000],
            "end_ns": [T0 + 94_000, T0 + 95_500],
            "device": [1, 1],
            "stream": [None, 7],
            "bytes": [1 << 20, 64],
            "copy_kind": ["DtoH", "unknown"],
            "src_kind": ["device", "unknown"],
            "dst_kind": ["pinned", "device"],
        },
    )
    b.add(
        "syncs",
        {
            "start_ns": [T0 + 5_000],
            "end_ns": [T0 + 9_000],
            "device": [None],
            "stream": [None],
            "sync_type": ["context"],
            "correlation_id": [13],
        },
    )
    b.add(
        "ranges",
        {
            "start_ns": [T0, T0 + 10, T0 + 10_000],
            "end_ns": [T0 + 100_000, T0 + 9_000, T0 + 19_999],
            "pid": [PID, PID, 1],
            "tid": [PID, PID, 7],
            "name": ["ProfilerStep#4", "forward", "forward"],
            "domain": ["profiler_step", "user_annotation", "gpu_user_annotation"],
            "depth": [0, 1, 0],
            "on_gpu": [False, False, True],
            "device": [None, None, 1],
            "stream": [None, None, 7],
        },
    )
    b.add(
        "ops",
        {
            "start_ns": [T0 + 20, T0 + 30],
            "end_ns": [T0 + 8_000, T0 + 7_000],
            "pid": [PID, PID],
            "tid": [PID, PID],
            "name": ["aten::mm", "model.py(12): forward"],
            "external_id": [5, None],
            "sequence_number": [77, None],
            "category": ["cpu_op", "python_function"],
            "input_dims": ["[[8, 3], [3, 4]]", None],
        },
    )
    b.add(
        "allocations",
        {
            "ts_ns": [T0 + 40, T0 + 96_000],
            "device": [1, 1],
            "pid": [PID, None],
            "tid": [PID, None],
            "address": [139_000_000, 139_000_000],
            "bytes": [4096, -4096],
            "total_allocated": [4096, 0],
            "total_reserved": [2 << 20, 2 << 20],
        },
    )
    return b.build()


def _events(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc, doc.pop("traceEvents")


def test_edge_values_round_trip_exactly(tmp_path: Path) -> None:
    trace = edge_trace()
    export_kineto(trace, tmp_path / "rank3.json")
    assert_trace_equal(trace, ktrace.open(str(tmp_path / "rank3.json")), check_meta=False)


def test_the_file_is_what_pytorch_writes(tmp_path: Path) -> None:
    export_kineto(edge_trace(), tmp_path / "t.json")
    header, events = _events(tmp_path / "t.json")
    assert header["schemaVersion"] == 1
    assert header["distributedInfo"] == {"rank": 3, "world_size": 1}
    assert header["deviceProperties"] == [
        {"id": 1, "name": "NVIDIA A100", "computeMajor": 8, "computeMinor": 0, "numSms": 108}
    ]
    base = header["baseTimeNanoseconds"]
    assert base == T0 // 10**9 * 10**9
    cats = {e.get("cat") for e in events}
    assert {"kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "cuda_runtime", "cuda_driver", "cpu_op"} <= cats
    assert {"python_function", "user_annotation", "gpu_user_annotation", "cpu_instant_event", "ac2g"} <= cats
    by_corr = {e["args"]["correlation"]: e for e in events if e.get("cat") == "kernel"}
    gemm, nccl = by_corr[11], by_corr[12]
    assert (gemm["pid"], gemm["tid"]) == (1, 7)
    assert gemm["args"] == {
        "External id": 5,
        "device": 1,
        "context": 1,
        "stream": 7,
        "correlation": 11,
        "registers per thread": 64,
        "shared memory": 1024,
        "blocks per SM": 2.0,  # 216 blocks on 108 SMs
        "warps per SM": 16.0,  # 2 blocks x 256 threads / 32
        "grid": [216, 1, 1],
        "block": [256, 1, 1],
    }
    assert nccl["args"]["grid"] == [2, None, 1] and "blocks per SM" not in nccl["args"]
    assert {k: nccl["args"][k] for k in ("Collective name", "In msg nelems", "dtype", "Group size", "graph id")} == {
        "Collective name": "allreduce",
        "In msg nelems": 1024,
        "dtype": "Float",
        "Group size": 2,
        "graph id": 3,
    }
    flows = [e for e in events if e.get("cat") == "ac2g"]
    assert sorted((e["ph"], e["id"]) for e in flows) == [("f", 11), ("f", 12), ("s", 11), ("s", 12)]
    assert all(e["bp"] == "e" for e in flows if e["ph"] == "f")
    assert events[0]["cat"] == "user_annotation"  # CPU events first: HTA's launch query skips a GPU event at index 0
    memcpy = next(e for e in events if e.get("cat") == "gpu_memcpy")
    assert memcpy["args"]["memory bandwidth (GB/s)"] == (1 << 20) / 3000  # bytes / ns, unrounded, as Kineto's
    sync = next(e for e in events if e.get("cat") == "cuda_sync")  # on no stream: as today's Kineto writes it
    assert (sync["tid"], sync["args"]["stream"], sync["name"]) == (-1, -1, "Context Sync")
    labels = {(e["pid"], e["args"]["labels"]) for e in events if e.get("name") == "process_labels"}
    assert labels == {(PID, "CPU"), (1, "GPU 1")}


def test_times_are_exact_decimals_after_the_base(tmp_path: Path) -> None:
    export_kineto(edge_trace(), tmp_path / "t.json")
    text = (tmp_path / "t.json").read_text()
    header, events = _events(tmp_path / "t.json")
    driver = next(e for e in events if e.get("cat") == "cuda_driver")
    assert driver["dur"] == pytest.approx(0.999)
    offset = T0 + 2_001 - header["baseTimeNanoseconds"]
    assert f'"ts":{offset // 1000}.{offset % 1000:03d},"dur":0.999' in text  # 3 decimals, as text


def test_null_ids_stay_null_and_kinds_come_back(tmp_path: Path) -> None:
    export_kineto(edge_trace(), tmp_path / "t.json.gz")
    with gzip.open(tmp_path / "t.json.gz") as f:
        assert f.read(21) == b'{"schemaVersion": 1, '
    back = ktrace.open(str(tmp_path / "t.json.gz"))
    assert back.memory.filter(pl.col("op") == "memcpy")["stream"].to_list() == [None]
    assert back.syncs.select("device", "stream", "sync_type").row(0) == (None, None, "context")
    assert back.allocations.sort("ts_ns")["pid"].to_list() == [PID, None]


@pytest.mark.parametrize(
    ("row", "name"),
    [
        (("memcpy", "HtoD", "pageable", "device"), "Memcpy HtoD (Pageable -> Device)"),
        (("memcpy", "unknown", "unknown", "unknown"), "Memcpy Unknown (Unknown -> Unknown)"),
        (("memset", "unknown", "unknown", "device"), "Memset (Device)"),
        (("memset", "unknown", "managed", "device"), "Memset (Managed -> Device)"),
    ],
)
def test_memory_names_are_kinetos(row: tuple[str, str, str, str], name: str) -> None:
    assert memory_name(*row) == name


def test_slices_change_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = generate(SyntheticConfig(steps=3, kernels_per_step=20, seed=2))
    export_kineto(trace, tmp_path / "whole.json")
    monkeypatch.setattr(kineto_json, "CHUNK_ROWS", 7)
    export_kineto(trace, tmp_path / "sliced.json")
    (head, whole), (sliced_head, sliced) = _events(tmp_path / "whole.json"), _events(tmp_path / "sliced.json")
    assert sliced_head == head and len(sliced) == len(whole)
    assert sorted(map(json.dumps, sliced)) == sorted(map(json.dumps, whole))  # (flows come slice by slice)


def test_a_folder_holds_one_file_per_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=10, ranks=3, seed=4))
    monkeypatch.setattr(kineto_json, "CHUNK_ROWS", 50)
    calls: list[tuple[int, int]] = []
    written = export_kineto(trace, tmp_path, progress=lambda done, total: calls.append((done, total)))
    rows = sum(trace.table(n).height for n in ("kernels", "memory", "syncs", "api", "ranges", "ops", "allocations"))
    assert len(calls) > 3 * 3 and calls[-1] == (rows, rows)  # slice by slice, not rank by rank
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert sorted(p.name for p in written.files) == ["rank0.json", "rank1.json", "rank2.json"]
    header, _ = _events(tmp_path / "rank2.json")
    assert header["distributedInfo"] == {"rank": 2, "world_size": 3}
    assert ktrace.open(str(tmp_path)).ranks == [(n, r) for n, r in trace.ranks if r >= 0]  # (not the node's counters)


def test_one_file_refuses_several_ranks(tmp_path: Path) -> None:
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=10, ranks=2, seed=4))
    with pytest.raises(KtraceError, match="holds one rank and the trace has 2"):
        export_kineto(trace, tmp_path / "one.json")
    assert not list(tmp_path.iterdir())


def test_left_out_names_what_kineto_cannot_hold() -> None:
    assert left_out(edge_trace()) is None
    line = left_out(generate(SyntheticConfig(steps=2, kernels_per_step=10, seed=1)))
    assert line is not None and "\n" not in line
    assert "counter values" in line and "device UUIDs" in line and "ktrace, nvtx written as user_annotation" in line


def test_tools_find_the_rank_in_the_first_line(tmp_path: Path) -> None:
    """HTA takes a file's rank from the first line matching `"rank":\\s+(\\d+)` (hta/common/trace_file.py), not from
    the parsed JSON: without the space PyTorch writes, every file of a folder is rank 0."""
    export_kineto(edge_trace(), tmp_path / "t.json")
    first = (tmp_path / "t.json").read_text().splitlines()[0]
    match = re.search(r'"rank":\s+(\d+)', first)
    assert match is not None and match.group(1) == "3"


def test_a_kineto_import_keeps_its_base_time_and_timestamps(real_trace_path: Any, tmp_path: Path) -> None:
    source = real_trace_path("nccl")  # PyTorch 2.4+: ts after baseTimeNanoseconds
    export_kineto(ktrace.open(str(source)), tmp_path / "t.json")
    original, original_events = _events(source)
    header, events = _events(tmp_path / "t.json")
    assert header["baseTimeNanoseconds"] == original["baseTimeNanoseconds"]

    def times(evs: list[dict[str, Any]]) -> set[tuple[str, Any, Any]]:
        return {(e["name"], e["ts"], e["dur"]) for e in evs if e.get("cat") in ("kernel", "cuda_runtime")}

    assert times(events) == times(original_events)  # the same floats: HTA's numbers are the same


def test_gzip_without_isal_is_the_same_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = edge_trace()
    export_kineto(trace, tmp_path / "isal.json.gz")  # ISA-L's deflate where `isal` is installed

    def no_isal(name: str) -> Any:
        raise ImportError(name)

    monkeypatch.setattr(kineto_json.importlib, "import_module", no_isal)
    export_kineto(trace, tmp_path / "zlib.json.gz")
    assert _events(tmp_path / "zlib.json.gz") == _events(tmp_path / "isal.json.gz") == _events_of(trace, tmp_path)
    assert_trace_equal(trace, ktrace.open(str(tmp_path / "zlib.json.gz")), check_meta=False)


def _events_of(trace: Trace, folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    export_kineto(trace, folder / "plain.json")
    return _events(folder / "plain.json")


def test_two_nodes_with_one_rank_number_get_two_files(tmp_path: Path) -> None:
    names = kineto_json.rank_file_names([("node-a", 0), ("node b", 0), ("node-a", 1)])
    assert names == ["node-a-rank0.json", "node_b-rank0.json", "rank1.json"]
    for name in names:
        (tmp_path / name).write_text("{}")
    assert kineto_json.KINETO_FOLDER.foreign_part(tmp_path) is None  # --force may replace what it wrote


@pytest.mark.parametrize(("name", "no_stream"), [("simple_add", 4294967295), ("event_sync", -1)])
def test_a_sync_on_no_stream_keeps_the_source_files_stream(
    real_trace_path: Any, tmp_path: Path, name: str, no_stream: int
) -> None:
    # 2023's Kineto wrote CUPTI's 4294967295, which HTA counts as a stream; today's writes -1
    source = real_trace_path(name)

    def no_stream_syncs(evs: list[dict[str, Any]]) -> list[tuple[Any, Any, Any]]:
        return sorted(
            (e["args"]["correlation"], e["tid"], e["args"]["stream"])
            for e in evs
            if e.get("cat") == "cuda_sync" and e["args"]["stream"] in (-1, 4294967295)
        )

    expected = no_stream_syncs(_events(source)[1])
    assert expected and {s for _, _, s in expected} == {no_stream}
    export_kineto(ktrace.open(str(source)), tmp_path / "t.json")
    assert no_stream_syncs(_events(tmp_path / "t.json")[1]) == expected
    export_kineto(ktrace.open(str(tmp_path / "t.json")), tmp_path / "again.json")  # kept on a round trip too
    assert no_stream_syncs(_events(tmp_path / "again.json")[1]) == expected


@pytest.mark.parametrize("name", ["nccl", "tracelens"])
def test_blocks_and_warps_per_sm_are_kinetos_to_the_last_decimal(
    real_trace_path: Any, tmp_path: Path, name: str
) -> None:
    # Kineto computes them in C float: in double, 1,224 of nccl's 2,700 kernels differed in the 6th decimal
    source = real_trace_path(name)

    def per_sm(evs: list[dict[str, Any]]) -> dict[Any, tuple[Any, Any]]:
        return {
            e["args"]["correlation"]: (e["args"].get("blocks per SM"), e["args"].get("warps per SM"))
            for e in evs
            if e.get("cat") == "kernel"
        }

    expected = per_sm(_events(source)[1])
    assert expected and all(b is not None for b, _ in expected.values())
    export_kineto(ktrace.open(str(source)), tmp_path / "t.json")
    assert per_sm(_events(tmp_path / "t.json")[1]) == expected


def test_est_achieved_occupancy_is_kept_and_written_back(real_trace_path: Any, tmp_path: Path) -> None:
    source = real_trace_path("nccl")

    def occupancy(evs: list[dict[str, Any]]) -> dict[Any, Any]:
        return {
            e["args"]["correlation"]: e["args"].get("est. achieved occupancy %")
            for e in evs
            if e.get("cat") == "kernel"
        }

    expected = occupancy(_events(source)[1])
    assert len(set(expected.values())) > 2 and None not in expected.values()
    trace = ktrace.open(str(source))
    assert dict(trace.kernels.select("correlation_id", "est_occupancy_pct").iter_rows()) == expected
    export_kineto(trace, tmp_path / "t.json")
    assert occupancy(_events(tmp_path / "t.json")[1]) == expected


@pytest.mark.parametrize(("value", "kept"), [(75, 75), (0, 0), (100, 100), (101, None), (-1, None), (2**40, None)])
def test_an_occupancy_that_is_no_percentage_is_null(tmp_path: Path, value: int, kept: int | None) -> None:
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5}
    kernel["args"] = {"device": 0, "stream": 7, "correlation": 1, "est. achieved occupancy %": value}
    (tmp_path / "t.json").write_text(json.dumps({"schemaVersion": 1, "traceEvents": [kernel]}))
    assert ktrace.open(str(tmp_path / "t.json")).kernels["est_occupancy_pct"].to_list() == [kept]
