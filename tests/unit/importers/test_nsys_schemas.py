"""The nsys importer on small hand-made exports: schema variants, enums, NVTX, GPU metrics, joins, secrets."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from ktrace.importers.nsys import import_nsys
from ktrace.model.schema import NODE_RANK
from ktrace.testing.sqlite_export import Table, make_export

EPOCH = 1_700_000_000_000_000_000


def gtid(pid: int, tid: int) -> int:
    """An nsys globalTid: (vm 1 << 48) | (pid << 24) | tid."""
    return (1 << 48) | (pid << 24) | tid


def gpid(pid: int) -> int:
    return gtid(pid, 0)


KERNEL_COLS = (
    "start",
    "end",
    "deviceId",
    "contextId",
    "streamId",
    "correlationId",
    "globalPid",
    "demangledName",
    "shortName",
    "gridX",
    "gridY",
    "gridZ",
    "blockX",
    "blockY",
    "blockZ",
    "registersPerThread",
)


def base_tables() -> dict[str, Table]:
    """A 2025-style export: two processes, launches, an orphan kernel, memcpy/memset, sync, NVTX, metrics."""
    t, t2 = gtid(100, 101), gtid(200, 201)
    return {
        "StringIds": (
            ("id", "value"),
            [
                (1, "cudaLaunchKernel_v7000"),
                (2, "cuLaunchKernel"),
                (3, "void gemm<float>(float*)"),
                (4, "gemm"),
                (5, "step"),
                (6, "inner"),
                (7, "main thread"),
                (9, "cudaMemcpyAsync_v3020"),
                (10, "cudaMemsetAsync_v3020"),
            ],
        ),
        "META_DATA_EXPORT": (
            ("name", "value"),
            [("EXPORT_SCHEMA_VERSION", "3.16.1"), ("EXPORT_TIME_UTC", "2025-01-02T03:04:05")],
        ),
        "TARGET_INFO_SESSION_START_TIME": (
            ("utcEpochNs", "utcTime", "localTime"),
            [(EPOCH, "2023-11-14T22:13:20", "2023-11-14T22:13:20")],
        ),
        "TARGET_INFO_SYSTEM_ENV": (
            ("globalVid", "devStateName", "name", "nameEnum", "value"),
            [(1 << 48, "Local", "Hostname", 619, "gpu-node-7")],
        ),
        "META_DATA_CAPTURE": (
            ("name", "value"),
            [
                ("PROCESS_0:COMMAND", "python"),
                ("PROCESS_0:ARGUMENT_0", "train.py"),
                ("PROCESS_0:ENVIRONMENT_VARIABLE", 'RANK="3"'),
                ("PROCESS_0:ENVIRONMENT_VARIABLE", 'HF_TOKEN="hf_abcdefghijklmnopqrstuvwxyz"'),
                ("PROCESS_0:ENVIRONMENT_VARIABLE", 'WANDB_MODE="offline"'),
                ("RUN_DURATION_MS", "1000"),
            ],
        ),
        "CUPTI_ACTIVITY_KIND_RUNTIME": (
            ("start", "end", "eventClass", "globalTid", "correlationId", "nameId"),
            [
                (1000, 1500, 0, t, 1, 1),
                (2000, 2500, 1, t, 2, 2),
                (3000, 3500, 0, t, 3, 1),
                (4000, 4100, 0, t2, 1, 1),
                (5000, 5100, 0, t, 5, 9),
                (5200, 5300, 0, t, 6, 10),
            ],
        ),
        "CUPTI_ACTIVITY_KIND_KERNEL": (
            KERNEL_COLS,
            [
                (1600, 1900, 0, 1, 7, 1, gpid(100), 3, 4, 128, 1, 1, 256, 1, 1, 32),
                (2600, 2900, 0, 1, 7, 2, gpid(100), 3, 4, 64, 1, 1, 256, 1, 1, 32),
                (4200, 4300, 1, 1, 7, 1, gpid(200), 3, 4, 1, 1, 1, 32, 1, 1, 16),
                (6000, 6100, 0, 1, 7, 99, gpid(100), None, 4, 1, 1, 1, 32, 1, 1, 16),
            ],
        ),
        "CUPTI_ACTIVITY_KIND_MEMCPY": (
            (
                "start",
                "end",
                "deviceId",
                "contextId",
                "streamId",
                "correlationId",
                "globalPid",
                "bytes",
                "copyKind",
                "srcKind",
                "dstKind",
            ),
            [(5150, 5180, 0, 1, 7, 5, gpid(100), 4096, 1, 0, 2)],
        ),
        "CUPTI_ACTIVITY_KIND_MEMSET": (
            (
                "start",
                "end",
                "deviceId",
                "contextId",
                "streamId",
                "correlationId",
                "globalPid",
                "value",
                "bytes",
                "memKind",
            ),
            [(5350, 5360, 0, 1, 7, 6, gpid(100), 0, 512, 2)],
        ),
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": (
            ("start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid", "syncType", "eventId"),
            [(7000, 7100, 0, 1, 4294967295, 42, gpid(100), 3, 4294967295)],
        ),
        "NVTX_EVENTS": (
            ("start", "end", "eventType", "text", "globalTid", "textId", "domainId"),
            [
                (-5, None, 75, "MyDomain", t, None, 1),
                (1000, 9000, 59, None, t, 5, 0),
                (1100, 2000, 59, "inline", t, None, 1),
                (1200, 1300, 60, None, t, 6, 0),
                (1400, None, 59, None, t, 6, 0),
                (1500, 1500, 34, "mark", t, None, 0),
            ],
        ),
        "GPU_METRICS": (
            ("timestamp", "typeId", "metricId", "value"),
            [(100, 1, 1, 50), (100, 1, 2, 30), (200, 1, 1, 70)],
        ),
        "TARGET_INFO_GPU_METRICS": (
            ("typeId", "sourceId", "typeName", "metricId", "metricName"),
            [(1, 0, "GA100", 1, "GR Active [Throughput %]"), (1, 0, "GA100", 2, "SMs Active [Throughput %]")],
        ),
        "TARGET_INFO_GPU": (
            ("id", "name", "uuid", "smCount", "totalMemory", "computeMajor", "computeMinor"),
            [(0, "Test GPU", "uuid-0", 80, 1 << 34, 9, 0)],
        ),
        "ThreadNames": (("nameId", "priority", "globalTid"), [(7, 10, t)]),
        "PROCESSES": (("globalPid", "pid", "name"), [(gpid(100), 100, "python"), (gpid(200), 200, "worker")]),
    }


@pytest.fixture
def export(tmp_path: Path) -> Path:
    return make_export(tmp_path / "synthetic.sqlite", base_tables())


def test_tables_from_a_hand_made_export(export: Path) -> None:
    trace = import_nsys(export)
    assert trace.counts() == {
        "kernels": 4,
        "memory": 2,
        "syncs": 1,
        "api": 6,
        "ranges": 3,
        "ops": 0,
        "counters": 3,
        "threads": 1,
        "devices": 1,
        "allocations": 0,
        "samples": 0,
    }
    assert trace.ranks == [("gpu-node-7", NODE_RANK), ("gpu-node-7", 3)]  # RANK=3 from the environment
    assert trace.kernels["start_ns"].to_list() == [EPOCH + s for s in (1600, 2600, 4200, 6000)]
    assert trace.kernels["name"].cast(pl.String).to_list()[-1] == "gemm"  # no demangled name: the short one
    assert trace.kernels["grid_x"].to_list() == [128, 64, 1, 1]
    api = trace.api.with_columns(pl.col(pl.Categorical).cast(pl.String))
    assert api["name"].to_list()[:2] == ["cudaLaunchKernel", "cuLaunchKernel"]
    assert api["domain"].to_list()[:2] == ["runtime", "driver"]
    assert api.select("pid", "tid").row(3) == (200, 201)
    assert not trace.validate()


def test_memory_and_sync_decoding(export: Path) -> None:
    trace = import_nsys(export)
    mem = trace.memory.with_columns(pl.col(pl.Categorical).cast(pl.String)).sort("start_ns")
    assert mem.select("op", "copy_kind", "src_kind", "dst_kind", "bytes").rows() == [
        ("memcpy", "HtoD", "pageable", "device", 4096),
        ("memset", "unknown", "unknown", "device", 512),
    ]
    sync = trace.syncs.row(0, named=True)
    assert (str(sync["sync_type"]), sync["stream"], sync["event_id"]) == ("stream", None, None)


def test_nvtx_ranges_domains_depth_and_drops(export: Path) -> None:
    trace = import_nsys(export)
    ranges = trace.ranges.with_columns(pl.col(pl.Categorical).cast(pl.String)).sort("start_ns")
    assert ranges.select("name", "domain", "depth", "pid", "tid").rows() == [
        ("step", "nvtx", 0, 100, 101),
        ("inline", "MyDomain", 1, 100, 101),
        ("inner", "nvtx", 2, 100, 101),
    ]
    health = trace.meta.health
    assert health["nvtx_marks_dropped"] == 1
    assert health["nvtx_unclosed_ranges_dropped"] == 1


def test_gpu_metrics_become_node_counters(export: Path) -> None:
    trace = import_nsys(export)
    c = trace.counters.with_columns(pl.col(pl.Categorical).cast(pl.String)).sort("ts_ns", "metric")
    assert c.select("ts_ns", "metric", "instance", "value", "rank").rows() == [
        (EPOCH + 100, "gpu.nsys.sms_active_throughput_pct", 1, 30.0, NODE_RANK),
        (EPOCH + 100, "gpu.util", 1, 50.0, NODE_RANK),
        (EPOCH + 200, "gpu.util", 1, 70.0, NODE_RANK),
    ]


def test_join_and_orphan_counts(export: Path) -> None:
    h = import_nsys(export).meta.health
    # kernel corr 1 in pid 100 and pid 200 each join their own process's launch; corr 99 has none
    assert (h["kernels_with_launch"], h["kernels_without_launch"]) == (3, 1)
    assert (h["memory_with_launch"], h["memory_without_launch"]) == (2, 0)
    assert (h["syncs_with_launch"], h["syncs_without_launch"]) == (0, 1)
    assert h["launches_without_gpu_record"] == 1  # corr 3 launched nothing


def test_correlation_ids_join_within_a_process_only(tmp_path: Path) -> None:
    tables = base_tables()
    cols, rows = tables["CUPTI_ACTIVITY_KIND_RUNTIME"]
    tables["CUPTI_ACTIVITY_KIND_RUNTIME"] = (cols, [r for r in rows if r[3] != gtid(200, 201)])
    h = import_nsys(make_export(tmp_path / "x.sqlite", tables)).meta.health
    assert (h["kernels_with_launch"], h["kernels_without_launch"]) == (2, 2)  # pid 200's corr 1 is not pid 100's


def test_meta_environment_is_scrubbed(export: Path) -> None:
    trace = import_nsys(export)
    env = trace.meta.job["environment"]
    assert env["HF_TOKEN"] == "<redacted>" and env["WANDB_MODE"] == "offline"
    assert "hf_abcdef" not in trace.meta.to_json()
    assert trace.meta.health["secrets_scrubbed"] == 1
    assert trace.meta.job["command"] == "python train.py"
    assert trace.meta.job["processes"] == {"100": "python", "200": "worker"}
    assert any("2 processes" in n for n in trace.meta.notes)


def test_old_export_meta_data_without_anchor_or_enums(tmp_path: Path) -> None:
    tables = base_tables()
    tables["EXPORT_META_DATA"] = (("name", "value"), [("EXPORT_SCHEMA_VERSION", "2.7.1")])
    for name in (
        "META_DATA_EXPORT",
        "TARGET_INFO_SESSION_START_TIME",
        "TARGET_INFO_SYSTEM_ENV",
        "META_DATA_CAPTURE",
        "GPU_METRICS",
        "NVTX_EVENTS",
        "CUPTI_ACTIVITY_KIND_MEMSET",
    ):
        del tables[name]
    trace = import_nsys(make_export(tmp_path / "old.sqlite", tables))
    assert trace.meta.clock == "nsys-session-relative"
    assert trace.meta.health["nsys_no_epoch_anchor"] == 1
    assert any("Unix epoch" in n for n in trace.meta.notes)
    assert trace.kernels["start_ns"].min() == 1600
    assert trace.ranks == [("localhost", 0)]
    assert trace.meta.job["nsys"]["metadata_table"] == "EXPORT_META_DATA"
    assert str(trace.memory["copy_kind"][0]) == "HtoD"  # documented numbering when ENUM_* is absent


def test_enum_tables_are_read_by_name(tmp_path: Path) -> None:
    tables = base_tables()
    # an export whose numbering differs from the documented one: the ENUM_* table wins
    tables["ENUM_CUDA_MEM_KIND"] = (
        ("id", "name", "label"),
        [(0, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"), (2, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed")],
    )
    tables["ENUM_CUPTI_SYNC_TYPE"] = (
        ("id", "name", "label"),
        [(3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Ctx")],
    )
    trace = import_nsys(make_export(tmp_path / "e.sqlite", tables))
    mem = trace.memory.sort("start_ns").with_columns(pl.col(pl.Categorical).cast(pl.String))
    assert mem.select("src_kind", "dst_kind").row(0) == ("pinned", "managed")
    assert str(trace.syncs["sync_type"][0]) == "context"


def test_table_without_required_column_is_dropped_and_named(tmp_path: Path) -> None:
    tables = base_tables()
    cols, rows = tables["CUPTI_ACTIVITY_KIND_KERNEL"]
    tables["CUPTI_ACTIVITY_KIND_KERNEL"] = (cols[:1] + cols[2:], [r[:1] + r[2:] for r in rows])
    trace = import_nsys(make_export(tmp_path / "k.sqlite", tables))
    assert trace.kernels.height == 0 and trace.api.height == 6
    assert trace.meta.health["nsys_tables_unreadable"] == 1
    assert any("CUPTI_ACTIVITY_KIND_KERNEL: dropped" in n and "end" in n for n in trace.meta.notes)


def test_rows_with_null_times_are_dropped_and_counted(tmp_path: Path) -> None:
    tables = base_tables()
    cols, rows = tables["CUPTI_ACTIVITY_KIND_KERNEL"]
    tables["CUPTI_ACTIVITY_KIND_KERNEL"] = (cols, [*rows, (None, 10, 0, 1, 7, 5, gpid(100), 3, 4, *[1] * 7)])
    trace = import_nsys(make_export(tmp_path / "n.sqlite", tables))
    assert trace.kernels.height == 4
    assert trace.meta.health["nsys_rows_dropped"] == 1


@pytest.mark.parametrize("variable", ["PMI_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"])
def test_rank_from_launcher_variables(tmp_path: Path, variable: str) -> None:
    tables = base_tables()
    tables["META_DATA_CAPTURE"] = (("name", "value"), [("PROCESS_0:ENVIRONMENT_VARIABLE", f'{variable}="5"')])
    assert import_nsys(make_export(tmp_path / "r.sqlite", tables)).ranks[-1] == ("gpu-node-7", 5)


def test_progress_reaches_the_total(export: Path) -> None:
    seen: list[tuple[int, int]] = []
    import_nsys(export, progress=lambda done, total: seen.append((done, total)), with_ops=True)
    assert seen and seen[-1][0] == seen[-1][1] == 6 + 4 + 1 + 1 + 1 + 6 + 3
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_colliding_correlation_ids_are_made_unique(export: Path) -> None:
    trace = import_nsys(export)
    api = trace.api.filter(pl.col("pid") == 200)
    assert api["correlation_id"].to_list() == [(200 << 32) | 1]
    kernel = trace.kernels.filter(pl.col("start_ns") == EPOCH + 4200)
    assert kernel["correlation_id"].to_list() == [(200 << 32) | 1]
    assert any("reuse the same correlation ids" in n for n in trace.meta.notes)


def test_backtrace_rows_of_2022_exports_are_not_api_calls(tmp_path: Path) -> None:
    """Nsight Systems 2022.x puts a CUDABACKTRACE row (eventClass 67) beside each call that has a backtrace,
    same correlation id and name: they must not double the API calls nor win the launch join."""
    from ktrace.analysis.latency import latency_stats

    tables = base_tables()
    cols, rows = tables["CUPTI_ACTIVITY_KIND_RUNTIME"]
    twins = [(start + 10, end - 10, 67, *rest) for start, end, event_class, *rest in rows if event_class == 0]
    tables["CUPTI_ACTIVITY_KIND_RUNTIME"] = (cols, [*rows, *twins])
    tables["ENUM_NSYS_EVENT_CLASS"] = (
        ("id", "name", "label"),
        [
            (0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA Runtime"),
            (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA Driver"),
            (67, "TRACE_PROCESS_EVENT_CUDABACKTRACE", "CUDA Backtrace"),
        ],
    )
    with_twins = import_nsys(make_export(tmp_path / "2022.sqlite", tables))
    plain = import_nsys(make_export(tmp_path / "plain.sqlite", base_tables()))

    assert with_twins.api.height == plain.api.height == len(rows)
    assert with_twins.api.sort("start_ns").equals(plain.api.sort("start_ns"))
    assert latency_stats(with_twins, by="name").equals(latency_stats(plain, by="name"))
    assert any("eventClass 67 (TRACE_PROCESS_EVENT_CUDABACKTRACE)" in n for n in with_twins.meta.notes)


def test_without_enum_table_known_non_api_classes_go_and_unknown_ones_stay_named(tmp_path: Path) -> None:
    """No ENUM_NSYS_EVENT_CLASS table: the documented list decides; a class it does not know (a newer export's)
    may be API calls, so its rows stay, with a note (they were dropped as "not API calls")."""
    tables = base_tables()
    cols, rows = tables["CUPTI_ACTIVITY_KIND_RUNTIME"]
    tables["CUPTI_ACTIVITY_KIND_RUNTIME"] = (
        cols,
        [*rows, (1010, 1490, 67, gtid(100, 101), 1, 1), (8000, 8100, 250, gtid(100, 101), 77, 1)],
    )
    trace = import_nsys(make_export(tmp_path / "x.sqlite", tables))
    assert trace.api.height == len(rows) + 1
    assert any("eventClass 250 (not in ENUM_NSYS_EVENT_CLASS): kept as API calls" in n for n in trace.meta.notes)
    assert any("eventClass 67 (TRACE_PROCESS_EVENT_CUDABACKTRACE)" in n for n in trace.meta.notes)


MEMORY_USAGE_COLS = ("start", "globalPid", "deviceId", "address", "bytes", "memKind", "memoryOperationType")


def test_cuda_memory_usage_events_become_allocations(tmp_path: Path) -> None:
    """nsys --cuda-memory-usage: allocation (0) and deallocation (1) rows; bytes are signed by the operation."""
    tables = base_tables()
    tables["CUDA_GPU_MEMORY_USAGE_EVENTS"] = (
        MEMORY_USAGE_COLS,
        [
            (1500, gpid(100), 0, 0x7F00, 1 << 20, 1, 0),
            (1700, gpid(100), 0, 0x8F00, 4096, 1, 0),
            (2500, gpid(100), 0, 0x7F00, 1 << 20, 1, 1),
            (2600, gpid(100), 0, 0x9F00, 64, 1, 9),  # unknown operation: dropped, counted
            (2700, gpid(100), None, 0xAF00, 64, 1, 0),  # no device: dropped, counted
        ],
    )
    trace = import_nsys(make_export(tmp_path / "m.sqlite", tables))
    rows = trace.allocations.sort("ts_ns")
    assert rows.select("ts_ns", "device", "pid", "address", "bytes").rows() == [
        (EPOCH + 1500, 0, 100, 0x7F00, 1 << 20),
        (EPOCH + 1700, 0, 100, 0x8F00, 4096),
        (EPOCH + 2500, 0, 100, 0x7F00, -(1 << 20)),
    ]
    assert rows["tid"].null_count() == 3 and rows["total_allocated"].null_count() == 3
    assert trace.meta.health["nsys_unknown_enum_values"] == 1 and trace.meta.health["nsys_rows_dropped"] >= 1
    tables["ENUM_CUDA_DEV_MEM_EVENT_OPER"] = (
        ("id", "name", "label"),
        [(14, "CUDA_DEV_MEM_EVENT_OPR_ALLOCATION", "Allocation"), (15, "CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION", "Free")],
    )
    tables["CUDA_GPU_MEMORY_USAGE_EVENTS"] = (MEMORY_USAGE_COLS, [(1500, gpid(100), 0, 1, 256, 1, 15)])
    renumbered = import_nsys(make_export(tmp_path / "e.sqlite", tables))
    assert renumbered.allocations["bytes"].to_list() == [-256]  # the enum table wins over nsys's usual numbering
