"""The Kineto importer on small hand-written traces: every era's quirks, CUDA graphs, orphans, secrets, errors."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import ktrace
from ktrace.importers.kineto import import_kineto
from ktrace.importers.kineto_tables import memcpy_kinds
from ktrace.model.errors import TraceFormatError
from ktrace.model.nesting import nesting_depth

PID, TID = 4242, 4243


def _x(cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    gpu = cat in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "gpu_user_annotation", "Kernel")
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


def _doc(events: list[dict[str, Any]], **header: Any) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "deviceProperties": [
            {"id": 0, "name": "GPU-X", "computeMajor": 9, "computeMinor": 0, "numSms": 132, "totalGlobalMem": 8}
        ],
        "traceEvents": events,
        **header,
    }


def _write(tmp_path: Path, doc: Any, name: str = "t.json.gz", raw: bytes | None = None) -> Path:
    data = raw if raw is not None else json.dumps(doc).encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


def _graph_job() -> list[dict[str, Any]]:
    """One cudaGraphLaunch fanning out to 3 kernels, one normal launch, one orphan kernel, one lost launch."""
    return [
        _x("user_annotation", "ProfilerStep#3", 1000, 100),
        _x("user_annotation", "forward", 1001, 50),
        _x("user_annotation", "inner", 1002, 10),
        _x("user_annotation", "backward", 1060, 30),
        _x("cuda_runtime", "cudaGraphLaunch", 1003, 5, correlation=10, cbid=311),
        *[
            _x(
                "kernel",
                f"graph_k{i}",
                1010 + i,
                1,
                correlation=10,
                device=0,
                stream=7,
                grid=[1, 2, 3],
                block=[64, 1, 1],
            )
            for i in range(3)
        ],
        _x("cuda_runtime", "cudaLaunchKernel", 1020, 2, correlation=11),
        _x("kernel", "k_normal", 1030, 4, correlation=11, device=0, stream=7),
        _x("kernel", "k_orphan", 1040, 4, correlation=99, device=0, stream=7),
        _x("cuda_runtime", "cudaMemcpyAsync", 1050, 2, correlation=12),  # GPU record lost
        {"ph": "s", "id": 10, "pid": PID, "tid": TID, "ts": 1003, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 77, "pid": PID, "tid": TID, "ts": 1003, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        {"name": "thread_name", "ph": "M", "pid": PID, "tid": TID, "args": {"name": "main"}},
    ]


def test_graph_fanout_and_orphans_are_kept_and_counted(tmp_path: Path) -> None:
    trace = import_kineto(_write(tmp_path, _doc(_graph_job())))
    assert trace.kernels.height == 5
    h = trace.meta.health
    assert (h["graph_fanout_kernels"], h["graph_fanout_launches"]) == (3, 1)
    assert (h["kernels_with_launch"], h["kernels_without_launch"]) == (4, 1)
    assert h["launches_without_gpu_record"] == 1
    joined = trace.kernels.join(trace.api, on="correlation_id", how="inner")
    assert joined.filter(pl.col("name_right").cast(pl.String) == "cudaGraphLaunch").height == 3
    assert trace.kernels.filter(pl.col("name").cast(pl.String) == "graph_k0")["grid_z"].to_list() == [3]
    assert trace.threads["name"].cast(pl.String).to_list() == ["main"]


def test_range_domains_and_depth(tmp_path: Path) -> None:
    trace = import_kineto(_write(tmp_path, _doc(_graph_job())))
    ranges = {r["name"]: r for r in trace.ranges.with_columns(pl.col(pl.Categorical).cast(pl.String)).to_dicts()}
    assert ranges["ProfilerStep#3"]["domain"] == "profiler_step"
    assert ranges["forward"]["domain"] == "user_annotation"
    assert [ranges[n]["depth"] for n in ("ProfilerStep#3", "forward", "inner", "backward")] == [0, 1, 2, 1]


def test_nesting_depth_walk() -> None:
    import numpy as np

    track = np.array([0, 0, 0, 1, 1])
    start = np.array([0, 1, 5, 0, 0])
    end = np.array([10, 5, 6, 3, 2])
    assert nesting_depth(track, start, end).tolist() == [0, 1, 1, 0, 1]


def test_nesting_depth_counts_only_ranges_still_open() -> None:
    import numpy as np

    # A[0,10] B[5,15] C[12,20] overlap without nesting: when C starts, A has ended, so only B encloses it.
    assert nesting_depth(np.zeros(3, np.int64), np.array([0, 5, 12]), np.array([10, 15, 20])).tolist() == [0, 1, 1]


def test_ts_forms_convert_exactly(tmp_path: Path) -> None:
    base = 1711964646000000000
    rel = _doc([_x("kernel", "k", 4458676983543.183, 41.407, correlation=1)], baseTimeNanoseconds=base)
    absolute = _doc([_x("kernel", "k", 1695835572943613, 12, correlation=1)])
    epoch_float = _doc([_x("kernel", "k", 1695835572943.5, 0.25, correlation=1)])
    k = import_kineto(_write(tmp_path, rel, "a.json")).kernels
    assert (k["start_ns"][0], k["end_ns"][0]) == (base + 4458676983543183, base + 4458676983584590)
    k = import_kineto(_write(tmp_path, absolute, "b.json")).kernels
    assert (k["start_ns"][0], k["end_ns"][0]) == (1695835572943613000, 1695835572943625000)
    k = import_kineto(_write(tmp_path, epoch_float, "c.json")).kernels
    assert (k["start_ns"][0], k["end_ns"][0]) == (1695835572943500, 1695835572943750)


def test_pt19_era_capitalised_categories_and_string_tids(tmp_path: Path) -> None:
    events = [
        {
            "ph": "X",
            "cat": "Operator",
            "name": "ProfilerStep#5",
            "pid": PID,
            "tid": str(TID),
            "ts": 100,
            "dur": 50,
            "args": {"external id": 1},
        },
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaLaunchKernel",
            "pid": PID,
            "tid": str(TID),
            "ts": 101,
            "dur": 3,
            "args": {"cbid": 211, "correlation": 5, "external id": 2, "external ts": 100},
        },
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "volta_sgemm",
            "pid": 0,
            "tid": "stream 7",
            "ts": 110,
            "dur": 5,
            "args": {"device": 0, "correlation": 5, "external id": 2},
        },
        {
            "ph": "X",
            "cat": "Memcpy",
            "name": "Memcpy DtoH (Device -> Pinned)",
            "pid": 0,
            "tid": "stream 9",
            "ts": 120,
            "dur": 2,
            "args": {"correlation": 6, "bytes": 64},
        },
        {"ph": "i", "s": "t", "name": "[memory]", "pid": PID, "tid": TID, "ts": 102, "args": {"Bytes": 4}},
        {"ph": "s", "id": 5, "pid": PID, "tid": TID, "ts": 101, "cat": "async", "name": "launch"},
        {"ph": "f", "id": 5, "pid": 0, "tid": "stream 7", "ts": 110, "cat": "async", "name": "launch", "bp": "e"},
    ]
    trace = import_kineto(_write(tmp_path, {"schemaVersion": 1, "traceEvents": events}))
    assert trace.api["tid"].to_list() == [TID]
    assert trace.kernels.select("stream", "external_id", "correlation_id").row(0) == (7, 2, 5)
    assert trace.memory.select("stream", "copy_kind", "src_kind", "dst_kind").row(0) == (9, "DtoH", "device", "pinned")
    assert trace.ranges["domain"].cast(pl.String).to_list() == ["profiler_step"]
    assert trace.meta.health["kernels_without_launch"] == 0


def test_2022_async_cpu_to_gpu_flows_and_syncs(tmp_path: Path) -> None:
    events = [
        _x("cuda_runtime", "cudaStreamSynchronize", 10, 5, correlation=3),
        _x("cuda_sync", "Stream Sync", 11, 3, correlation=3, cuda_sync_kind="Stream Sync", stream=7, device=0),
        _x("cuda_sync", "Context Sync", 20, 3, correlation=4, cuda_sync_kind="Context Sync", stream=4294967295),
        _x("cuda_sync", "Event Sync", 30, 3, correlation=5, cuda_sync_kind="Event Sync", stream=7),
        _x("cuda_sync", "Stream Wait Event", 40, 0, correlation=6, cuda_sync_kind="Stream Wait Event", stream=7),
        {"ph": "s", "id": 3, "pid": PID, "tid": TID, "ts": 10, "cat": "async_cpu_to_gpu", "name": "launch"},
        _x("gpu_memset", "Memset (Device)", 50, 1, correlation=7, bytes=128),
    ]
    trace = import_kineto(_write(tmp_path, _doc(events)))
    assert trace.syncs["sync_type"].cast(pl.String).to_list() == ["stream", "context", "event", "stream_wait_event"]
    assert trace.syncs["stream"].to_list() == [7, None, 7, 7]
    assert trace.memory.select("op", "copy_kind", "dst_kind", "bytes").row(0) == ("memset", "unknown", "device", 128)
    assert trace.meta.health["syncs_without_gpu_record"] == 0


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("Memcpy HtoD (Pageable -> Device)", ("HtoD", "pageable", "device")),
        ("Memcpy DtoD (Device -> Device)", ("DtoD", "device", "device")),
        ("Memcpy PtoP (Device -> Device)", ("PtoP", "device", "device")),
        ("Memcpy HtoH (Pinned -> Managed)", ("HtoH", "pinned", "managed")),
        ("Memset (Device)", ("unknown", "unknown", "device")),
        ("Memcpy ???", ("unknown", "unknown", "unknown")),
    ],
)
def test_memcpy_kinds_from_names(name: str, kinds: tuple[str, str, str]) -> None:
    assert memcpy_kinds(name) == kinds


def test_secrets_are_scrubbed_and_counted(tmp_path: Path) -> None:
    token = "hf_" + "aB3" * 12
    doc = _doc(
        _graph_job(),
        metadata={
            "system": {
                "env": {"HF_TOKEN": token, "PATH": "/usr/bin", "MY_DB_PASSWORD": "hunter2", "LOG": f"key={token}"}
            }
        },
        distributedInfo={"rank": 0, "world_size": 1, "backend_config": "AWS_SECRET_ACCESS_KEY=abc123"},
    )
    trace = import_kineto(_write(tmp_path, doc))
    text = trace.meta.to_json()
    assert token not in text and "hunter2" not in text and "abc123" not in text
    assert "/usr/bin" in text
    assert trace.meta.health["secrets_scrubbed"] >= 4


def test_rank_from_distributed_info_else_file_name(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    for r in (1, 0):
        _write(folder, _doc(_graph_job()), f"host_rank{r}.1234.pt.trace.json")
    trace = import_kineto(folder)
    assert [r for _, r in trace.ranks] == [0, 1]
    assert trace.meta.job["world_size"] == 2
    one = import_kineto(_write(tmp_path, _doc(_graph_job(), distributedInfo={"rank": 5}), "worker2.json"))
    assert one.ranks == [("localhost", 5)]


def test_a_folder_reads_the_files_that_open_like_traces_whatever_their_names(tmp_path: Path) -> None:
    from ktrace.importers.kineto_stream import kineto_files

    _write(tmp_path, _doc(_graph_job()), "rank0.json")  # no "trace" in the name
    _write(tmp_path, _doc(_graph_job(), distributedInfo={"rank": 1}), "rank1.json.gz")
    _write(tmp_path, {"rank0.json": {"n_kernels": 5}}, "STATS.json")  # JSON, but not a trace
    (tmp_path / "damaged.json.gz").write_bytes(b"\x1f\x8b" + b"\xff" * 40)  # kept: its importer says why
    assert [p.name for p in kineto_files(tmp_path)] == ["damaged.json.gz", "rank0.json", "rank1.json.gz"]
    (tmp_path / "damaged.json.gz").unlink()
    trace = import_kineto(tmp_path)
    assert [r for _, r in trace.ranks] == [0, 1] and trace.kernels.height == 10
    assert not any("skipped" in n for n in trace.meta.notes)  # STATS.json was never tried


def test_cpu_ops_by_default_and_skipped_on_the_lean_path(tmp_path: Path) -> None:
    events = [*_graph_job(), _x("cpu_op", "aten::mm", 1003, 9, **{"External id": 4, "Sequence number": 12})]
    path = _write(tmp_path, _doc(events))
    assert import_kineto(path, with_ops=False).ops.height == 0
    ops = import_kineto(path).ops
    assert ops.select("external_id", "sequence_number").row(0) == (4, 12)


@pytest.mark.parametrize("slow_path", [False, True])
def test_python_frames_join_the_ops_by_category_and_the_lean_path_skips_them(tmp_path: Path, slow_path: bool) -> None:
    frames = [
        _x("python_function", "nn.Module: Linear_0", 1001, 12, **{"Python id": 7, "Python module id": 0}),
        _x("python_function", "model.py(3): forward", 1000, 14, **{"Python id": 6}),
    ]
    odd = [_x("some_future_category", "x", 1000, 1)] if slow_path else []  # no tagged type: list[Event] decodes
    events = [*_graph_job(), _x("cpu_op", "aten::mm", 1003, 9, **{"External id": 4}), *frames, *odd]
    path = _write(tmp_path, _doc(events))
    ops = import_kineto(path).ops.sort("start_ns")
    assert ops.select(pl.col("name", "category").cast(pl.String)).rows() == [
        ("model.py(3): forward", "python_function"),
        ("nn.Module: Linear_0", "python_function"),
        ("aten::mm", "cpu_op"),
    ]
    assert ops["external_id"].to_list() == [None, None, 4]
    assert import_kineto(path, with_ops=False).ops.height == 0


def test_open_reads_kineto_directly(tmp_path: Path) -> None:
    trace = ktrace.open(_write(tmp_path, _doc(_graph_job())))
    assert trace.meta.source == "kineto" and trace.kernels.height == 5


def test_wrongly_typed_fields_are_coerced_or_dropped(tmp_path: Path) -> None:
    events = [
        *_graph_job(),
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k_str",
            "pid": 0,
            "tid": 7,
            "ts": "2000",
            "dur": 1,
            "args": {"correlation": "11", "device": 0},
        },
        {"ph": "X", "cat": "kernel", "name": "k_bad", "pid": 0, "tid": 7, "ts": None, "dur": 1},
        {"ph": "X", "cat": "kernel", "name": "k_neg", "pid": 0, "tid": 7, "ts": 5, "dur": -1},
        17,
    ]
    trace = import_kineto(_write(tmp_path, _doc(events)))
    assert "k_str" in trace.kernels["name"].cast(pl.String).to_list()
    assert trace.meta.health["dropped_events"] == 3  # k_bad, k_neg and the bare number
    assert trace.meta.health["repaired_events"] >= 1


def test_out_of_range_numbers_do_not_overflow(tmp_path: Path) -> None:
    events = [
        *_graph_job(),
        _x("kernel", "k_big", 2000, 1, correlation=2**64 - 1, bytes=2**63 + 5, grid=[2**70, 1, 1], stream=-(2**63) - 1),
    ]
    trace = import_kineto(_write(tmp_path, _doc(events, baseTimeNanoseconds=2**63 + 1)))
    big = trace.kernels.filter(pl.col("name").cast(pl.String) == "k_big")
    assert big.select("correlation_id", "grid_x").row(0) == (None, None)
    assert big["start_ns"][0] == 2000 * 1000  # the implausible base was ignored, with a note
    assert any("baseTimeNanoseconds" in n for n in trace.meta.notes)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "empty file"),
        (b'{"traceEvents": [{"ph": "X"', "truncated"),
        (b"not json at all", "not JSON"),
        (b'{"schemaVersion": 1, "deviceProperties": []}', "no traceEvents"),
        (b'{"schemaVersion": 7, "traceEvents": []}', "unknown Kineto schemaVersion 7"),
        (b'{"traceEvents": [{"ph": "X", "cat": "blink", "name": "paint", "ts": 1, "dur": 1}]}', "not a PyTorch"),
        (b"[1, 2, 3]", "no readable Kineto event"),
    ],
)
def test_bad_input_is_one_clear_error(tmp_path: Path, raw: bytes, message: str) -> None:
    path = _write(tmp_path, None, "bad.json", raw=raw)
    with pytest.raises(TraceFormatError, match=message) as info:
        import_kineto(path)
    assert "\n" not in str(info.value)


def test_truncated_gzip_imports_what_it_can(tmp_path: Path) -> None:
    full = gzip.compress(json.dumps(_doc(_graph_job() * 200)).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(full[: len(full) // 2])
    trace = import_kineto(path)
    assert 0 < trace.kernels.height < 1000
    assert trace.meta.health["truncated_input"] == 1
    assert any("truncated" in n for n in trace.meta.notes)
