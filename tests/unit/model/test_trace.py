"""Trace, TraceBuilder and validate()."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest

from ktrace.model import SCHEMAS, TABLES, Trace, TraceBuilder, TraceMeta
from ktrace.model.schema import SCHEMA_VERSION


def test_every_table_has_schema_version_and_partition_keys() -> None:
    for name in TABLES:
        schema = SCHEMAS[name]
        assert schema.metadata[b"ktrace.schema_version"] == str(SCHEMA_VERSION).encode()
        assert schema.names[:2] == ["node", "rank"]


def test_builder_fills_partition_keys_and_missing_nullable_columns() -> None:
    b = TraceBuilder("hostA", 3)
    b.add("kernels", {"start_ns": [10, 20], "end_ns": [15, 30], "device": [0, 1], "name": ["k1", "k2"]})
    t = b.build()
    assert t.kernels["node"].cast(pl.String).to_list() == ["hostA", "hostA"]
    assert t.kernels["rank"].to_list() == [3, 3]
    assert t.kernels["grid_x"].null_count() == 2
    assert t.kernels.schema["name"] == pl.Categorical
    assert t.memory.height == 0 and t.memory.columns == SCHEMAS["memory"].names


def test_builder_rejects_unknown_columns_and_tables() -> None:
    b = TraceBuilder()
    with pytest.raises(KeyError):
        b.add("kernel", {"start_ns": [1]})
    with pytest.raises(KeyError):
        b.add("kernels", {"start": [1]})


def test_builder_requires_non_nullable_columns() -> None:
    b = TraceBuilder()
    with pytest.raises(ValueError, match="required column 'device'"):
        b.add("kernels", {"start_ns": [1], "end_ns": [2], "name": ["k"]})


def test_builder_accepts_record_batches_with_unified_dictionaries() -> None:
    b = TraceBuilder()
    for names in (["a", "b"], ["b", "c"]):
        batch = pa.record_batch(
            {
                "start_ns": pa.array([1, 2], pa.int64()),
                "end_ns": pa.array([3, 4], pa.int64()),
                "device": pa.array([0, 0], pa.int32()),
                "name": pa.array(names).dictionary_encode(),
            }
        )
        b.add("kernels", batch)
    t = b.build()
    assert t.kernels["name"].cast(pl.String).to_list() == ["a", "b", "b", "c"]


def test_validate_reports_problems_without_raising() -> None:
    b = TraceBuilder()
    b.add("kernels", {"start_ns": [100, 50], "end_ns": [200, 40], "device": [0, 0], "name": ["ok", "backwards"]})
    b.add(
        "memory",
        {
            "op": ["memcpy"],
            "start_ns": [1],
            "end_ns": [2],
            "device": [0],
            "copy_kind": ["sideways"],
            "src_kind": ["pinned"],
            "dst_kind": ["device"],
        },
    )
    b.add(
        "api",
        {
            "start_ns": [1, 2],
            "end_ns": [3, 4],
            "pid": [1, 1],
            "tid": [1, 1],
            "correlation_id": [7, 7],
            "domain": ["runtime", "runtime"],
            "name": ["cudaLaunchKernel", "cudaLaunchKernel"],
        },
    )
    problems = {(p.table, p.column): p.rows for p in b.build().validate()}
    assert problems[("kernels", "end_ns")] == 1
    assert problems[("memory", "copy_kind")] == 1
    assert problems[("api", "correlation_id")] == 1


def test_validate_is_clean_on_the_synthetic_job(synthetic_trace: Trace) -> None:
    assert synthetic_trace.validate() == []


def test_validate_reports_type_drift() -> None:
    t = TraceBuilder().build()
    bad = Trace(
        **{n: t.table(n) for n in TABLES if n != "kernels"},
        kernels=t.kernels.with_columns(pl.col("start_ns").cast(pl.Float64)),
        meta=t.meta,
    )
    assert any(p.column == "start_ns" and "type" in p.message for p in bad.validate())


def test_trace_is_immutable() -> None:
    t = TraceBuilder().build()
    with pytest.raises(AttributeError):
        t.kernels = t.memory  # type: ignore[misc]


def test_meta_round_trips_through_json_and_sums_health() -> None:
    import json

    meta = TraceMeta(source="kineto", job={"world_size": 2}, hosts=("a",), health={"orphans": 2}, notes=("n",))
    back = TraceMeta.from_dict(json.loads(meta.to_json()))
    assert back == meta
    assert back.with_health({"orphans": 3, "dropped": 1}).health == {"orphans": 5, "dropped": 1}


def test_ranks_and_span(synthetic_trace: Trace) -> None:
    ranks = synthetic_trace.ranks
    assert ("node0", 0) in ranks and ("node0", 1) in ranks and ("node0", -1) in ranks
    lo, hi = synthetic_trace.span_ns()  # type: ignore[misc]
    firsts = [synthetic_trace.table(n)["start_ns"].min() for n in ("kernels", "api", "ranges", "memory")]
    assert lo == min(*firsts, synthetic_trace.counters["ts_ns"].min())
    assert hi >= synthetic_trace.kernels["end_ns"].max()
