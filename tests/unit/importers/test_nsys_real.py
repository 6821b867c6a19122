"""The nsys importer on every real Nsight Systems export (the fixtures/ copies of shared/traces), checked against STATS.json and SQL."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import ktrace
from ktrace.importers.nsys import import_nsys
from ktrace.model.store import read, write
from ktrace.model.trace import Trace
from ktrace.testing import assert_trace_equal

NSYS_TRACES = ("cloverleaf", "power_iteration")


@pytest.fixture(scope="module", params=NSYS_TRACES)
def real(request: pytest.FixtureRequest, real_trace_path: Any) -> tuple[Path, dict[str, Any], Trace]:
    """(path, its STATS.json entry, the imported trace) of each real nsys export."""
    path: Path = real_trace_path(request.param)
    stats = json.loads((path.parent / "STATS.json").read_text())[path.name]
    return path, stats, import_nsys(path)


def sql(path: Path, query: str) -> list[tuple[Any, ...]]:
    """Run `query` on the export with the stdlib sqlite3 (the independent reference)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def rows(stats: dict[str, Any], table: str) -> int:
    value = stats["table_rows"][table]
    return 0 if value == "absent" else int(value)


def test_every_nsys_trace_in_shared_is_covered(shared_traces: Path, real_trace_path: Any) -> None:
    found = set(shared_traces.glob("*/*.sqlite"))
    assert found == {real_trace_path(name) for name in NSYS_TRACES}


def test_counts_match_stats(real: tuple[Path, dict[str, Any], Trace]) -> None:
    _, stats, trace = real
    counts = trace.counts()
    assert counts["kernels"] == rows(stats, "CUPTI_ACTIVITY_KIND_KERNEL")
    assert counts["memory"] == rows(stats, "CUPTI_ACTIVITY_KIND_MEMCPY") + rows(stats, "CUPTI_ACTIVITY_KIND_MEMSET")
    assert counts["api"] == rows(stats, "CUPTI_ACTIVITY_KIND_RUNTIME")
    assert counts["syncs"] == rows(stats, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    nvtx_types = stats.get("nvtx_event_types", {})
    assert counts["ranges"] == int(nvtx_types.get("59", 0)) + int(nvtx_types.get("60", 0))
    assert trace.memory.filter(pl.col("op") == "memset").height == rows(stats, "CUPTI_ACTIVITY_KIND_MEMSET")


def test_kernel_facts_match_stats(real: tuple[Path, dict[str, Any], Trace]) -> None:
    _, stats, trace = real
    k = trace.kernels
    span_ms = (k["end_ns"].max() - k["start_ns"].min()) / 1e6  # type: ignore[operator]
    assert round(span_ms, 3) == stats["kernel_span_ms"]
    assert k["device"].n_unique() == stats["kernel_devices"]
    assert k["stream"].n_unique() == stats["kernel_streams"]
    names = k["name"].cast(pl.String)
    for short, count, total_ms in stats["top_kernels_by_time"]:
        # the trace keeps demangled names; STATS counts by nsys's short name (the function identifier)
        pattern = rf"(^|[\s:]){re.escape(short)}([<(]|$)"
        mine = k.filter(names.str.contains(pattern))
        assert mine.height == count, short
        assert round(float((mine["end_ns"] - mine["start_ns"]).sum()) / 1e6, 3) == total_ms, short


def test_devices_match_stats(real: tuple[Path, dict[str, Any], Trace]) -> None:
    _, stats, trace = real
    expected = set()
    for line in stats["gpus"]:
        m = re.fullmatch(r"(\d+): (.+) \((\d+) SMs\)", line)
        assert m
        expected.add((int(m[1]), m[2], int(m[3])))
    got = {
        (r["device"], r["name"], r["sm_count"])
        for r in trace.devices.with_columns(pl.col("name").cast(pl.String)).to_dicts()
    }
    assert got == expected


def test_times_are_epoch_ns_from_the_session_anchor(real: tuple[Path, dict[str, Any], Trace]) -> None:
    path, stats, trace = real
    ((anchor, utc),) = sql(path, "SELECT utcEpochNs, utcTime FROM TARGET_INFO_SESSION_START_TIME")
    ((first,),) = sql(path, "SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert utc == stats["session_start_utc"]
    assert trace.kernels["start_ns"].min() == anchor + first
    assert trace.meta.clock == "realtime"
    assert not [str(p) for p in trace.validate()]


def test_node_rank_and_meta(real: tuple[Path, dict[str, Any], Trace]) -> None:
    path, stats, trace = real
    ((host,),) = sql(path, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'")
    assert trace.ranks == [(host, 0)]
    assert trace.meta.source == "nsys"
    nsys = trace.meta.job["nsys"]
    assert nsys["export_schema_version"] == stats["nsys_export_schema_version"]
    assert nsys["export_product_version"] == stats["nsys_export_product_version"]
    assert nsys["metadata_table"] == stats["metadata_table"]
    assert trace.meta.job["os"] == stats["os"]


def test_launch_joins_and_orphans_match_sql(real: tuple[Path, dict[str, Any], Trace]) -> None:
    path, _, trace = real
    health = trace.meta.health
    for table, name in (("KERNEL", "kernels"), ("MEMCPY", "memory"), ("SYNCHRONIZATION", "syncs")):
        ((total, joined),) = sql(
            path,
            f"""
            SELECT count(*), sum((g.correlationId, (g.globalPid >> 24) & 16777215) IN (
                SELECT r.correlationId, (r.globalTid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_RUNTIME r))
            FROM CUPTI_ACTIVITY_KIND_{table} g""",
        )
        assert health[f"{name}_with_launch"] == joined
        assert health[f"{name}_without_launch"] == total - joined
    ((launch_orphans,),) = sql(
        path,
        """
        SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
        WHERE (s.value LIKE 'cudaLaunch%' OR s.value LIKE 'cuLaunch%' OR s.value LIKE 'cudaGraphLaunch%'
               OR s.value LIKE 'cuGraphLaunch%')
          AND r.correlationId NOT IN (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL)
          AND r.correlationId NOT IN (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY)""",
    )
    assert health["launches_without_gpu_record"] == launch_orphans


def test_api_domains_and_names(real: tuple[Path, dict[str, Any], Trace]) -> None:
    path, _, trace = real
    ((drivers,),) = sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 1")
    assert trace.api.filter(pl.col("domain") == "driver").height == drivers
    names = set(trace.api["name"].cast(pl.String).unique())
    assert not [n for n in names if re.search(r"_v\d{4,}$", n)]  # CUPTI's _v7000-style suffix is stripped
    assert trace.api.filter(pl.col("domain") == "runtime")["name"].cast(pl.String).str.starts_with("cuda").all()


def test_memory_and_sync_kinds_match_sql(real: tuple[Path, dict[str, Any], Trace]) -> None:
    path, _, trace = real
    copy = {1: "HtoD", 2: "DtoH", 8: "DtoD", 10: "PtoP"}
    mem = {0: "pageable", 1: "pinned", 2: "device", 4: "managed"}
    expected = {
        (copy[c], mem[s], mem[d]): n
        for c, s, d, n in sql(
            path, "SELECT copyKind, srcKind, dstKind, count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1, 2, 3"
        )
    }
    got = trace.memory.group_by("copy_kind", "src_kind", "dst_kind").len()
    assert {(str(a), str(b), str(c)): n for a, b, c, n in got.iter_rows()} == expected
    sync = {1: "event", 2: "stream_wait_event", 3: "stream", 4: "context"}
    expected_sync = {
        sync[t]: n
        for t, n in sql(path, "SELECT syncType, count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION GROUP BY 1")
    }
    assert dict(trace.syncs.group_by("sync_type").len().iter_rows()) == expected_sync
    ((na_streams,),) = sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION WHERE streamId = 4294967295")
    assert trace.syncs["stream"].null_count() == na_streams


def test_store_round_trip(real: tuple[Path, dict[str, Any], Trace], tmp_path: Path) -> None:
    _, _, trace = real
    write(trace, tmp_path / "t.ktrace")
    assert_trace_equal(read(tmp_path / "t.ktrace"), trace)


def test_open_dispatches_sqlite(real_trace_path: Any) -> None:
    trace = ktrace.open(real_trace_path("power_iteration"))
    assert trace.meta.source == "nsys" and trace.kernels.height > 0


def test_cloverleaf_secret_is_scrubbed(real_trace_path: Any) -> None:
    trace = import_nsys(real_trace_path("cloverleaf"))
    text = trace.meta.to_json()
    assert "REDACTEDX" not in text  # the placeholder that stands in for the leaked value upstream
    assert trace.meta.job["environment"]["PMI_SHARED_SECRET"] == "<redacted>"
    assert trace.meta.health["secrets_scrubbed"] >= 1
    assert trace.meta.job["environment"]["PMI_RANK"] == "0"
    assert trace.meta.capture["settings"]["NVTX_OPTIONS:TRACE_NVTX_RANGE_HOT_KEY"] == "false"  # a flag, kept


def test_power_iteration_nvtx_domains_and_depth(real_trace_path: Any) -> None:
    path = real_trace_path("power_iteration")
    trace = import_nsys(path)
    ((cccl,),) = sql(path, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59 AND domainId = 1")
    assert trace.ranges.filter(pl.col("domain") == "CCCL").height == cccl
    assert set(trace.ranges["domain"].cast(pl.String).unique()) == {"CCCL", "nvtx"}
    assert trace.meta.health["nvtx_marks_dropped"] == 0
    assert_depth_is_nesting(trace.ranges)


def assert_depth_is_nesting(ranges: pl.DataFrame) -> None:
    """Naive twin: depth = number of other ranges of the same thread that strictly enclose the range."""
    spans = ranges.select("tid", "start_ns", "end_ns", "depth").rows()
    for tid, start, end, depth in spans:
        enclosing = sum(1 for t, s, e, _ in spans if t == tid and (s, -e) < (start, -end) and s <= start and end <= e)
        assert depth == enclosing, (tid, start, end)
