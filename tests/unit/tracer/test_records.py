"""CUPTI record decoding: records (fakes or cupti-python's classes) -> tuples -> schema v1 Arrow tables."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from ktrace.model.schema import SCHEMAS
from ktrace.model.trace import conform
from ktrace.tracer.columns import RecordDecoder, api_name_from_enums, generic_api_name
from ktrace.tracer.records import ACTIVITY_KIND, RecordExtractor

T0 = 1_795_000_000_000_000_000


def decode(records: list[Any], decoder: RecordDecoder | None = None) -> tuple[dict[str, pa.Table], dict[str, int]]:
    extractor = RecordExtractor()
    rows: dict[int, list[tuple[Any, ...]]] = {}
    assert extractor.extract(records, rows) == 0
    decoder = decoder or RecordDecoder(generic_api_name, pid=77)
    tables, health = decoder.decode(extractor.by_name(rows))
    for name, table in tables.items():  # every decoded table fits schema v1
        n = table.num_rows
        conform(
            table.append_column("node", pa.array(["h"] * n)).append_column("rank", pa.array([0] * n, pa.int32())), name
        )
    return tables, health


def test_kernel_launch_pair_decodes_with_shape_and_latency(make_record: Any) -> None:
    k = make_record(
        "CONCURRENT_KERNEL",
        start=T0 + 100,
        end=T0 + 900,
        device_id=1,
        context_id=3,
        stream_id=7,
        correlation_id=42,
        name="ampere_sgemm_128x64_nn",
        grid_x=80,
        grid_y=2,
        grid_z=1,
        block_x=256,
        block_y=1,
        block_z=1,
        registers_per_thread=64,
        static_shared_memory=1024,
        dynamic_shared_memory=2048,
        queued=T0 + 40,
        submitted=0,
    )
    api = make_record("RUNTIME", start=T0, end=T0 + 50, process_id=77, thread_id=78, correlation_id=42, cbid=211)
    tables, health = decode([k, api])
    kr = tables["kernels"].to_pylist()[0]
    assert (kr["start_ns"], kr["end_ns"], kr["device"], kr["stream"], kr["correlation_id"]) == (
        T0 + 100,
        T0 + 900,
        1,
        7,
        42,
    )
    assert kr["name"] == "ampere_sgemm_128x64_nn" and kr["grid_x"] == 80 and kr["block_x"] == 256
    assert kr["static_shared_bytes"] == 1024 and kr["dynamic_shared_bytes"] == 2048
    assert kr["queued_ns"] == T0 + 40 and kr["submitted_ns"] is None  # 0 = unknown
    ar = tables["api"].to_pylist()[0]
    assert (ar["pid"], ar["tid"], ar["domain"], ar["cbid"], ar["name"]) == (77, 78, "runtime", 211, "runtime_cbid_211")
    assert health == {}


def test_memcpy_kinds_and_runtime_correlation(make_record: Any) -> None:
    pinned = make_record(
        "MEMCPY",
        start=T0,
        end=T0 + 10,
        copy_kind=1,
        src_kind=2,
        dst_kind=3,
        bytes=4096,
        correlation_id=900,
        runtime_correlation_id=12,
        device_id=0,
        stream_id=7,
    )
    pageable = make_record(
        "MEMCPY",
        start=T0 + 20,
        end=T0 + 30,
        copy_kind=2,
        src_kind=3,
        dst_kind=1,
        bytes=8,
        correlation_id=901,
        runtime_correlation_id=0,
    )
    p2p = make_record(
        "MEMCPY2",
        start=T0 + 40,
        end=T0 + 50,
        copy_kind=10,
        src_kind=3,
        dst_kind=3,
        bytes=1,
        correlation_id=5,
        src_device_id=0,
        dst_device_id=1,
    )
    memset = make_record("MEMSET", start=T0 + 60, end=T0 + 61, memory_kind=3, bytes=64, correlation_id=6)
    rows = decode([pinned, pageable, p2p, memset])[0]["memory"].to_pylist()
    kinds = [(r["op"], r["copy_kind"], r["src_kind"], r["dst_kind"], r["correlation_id"]) for r in rows]
    assert kinds == [
        ("memcpy", "HtoD", "pinned", "device", 12),  # joins the runtime API record
        ("memcpy", "DtoH", "device", "pageable", 901),  # no runtime record: the driver's
        ("memcpy", "PtoP", "device", "device", 5),
        ("memset", "unknown", "unknown", "device", 6),
    ]


def test_syncs_map_type_device_and_not_applicable_ids(make_record: Any) -> None:
    ctx = make_record("CONTEXT", context_id=3, device_id=2)
    ev = make_record(
        "SYNCHRONIZATION",
        start=T0,
        end=T0 + 5,
        context_id=3,
        stream_id=0xFFFFFFFF,
        correlation_id=8,
        type=1,
        cuda_event_id=44,
    )
    st = make_record(
        "SYNCHRONIZATION",
        start=T0,
        end=T0 + 5,
        context_id=9,
        stream_id=7,
        correlation_id=9,
        type=3,
        cuda_event_id=0xFFFFFFFF,
    )
    rows = decode([ctx, ev, st])[0]["syncs"].to_pylist()
    assert [(r["sync_type"], r["device"], r["stream"], r["event_id"]) for r in rows] == [
        ("event", 2, None, 44),
        ("stream", None, 7, None),
    ]


def test_nvtx_start_end_pair_across_buffers_with_depth(make_record: Any) -> None:
    decoder = RecordDecoder(generic_api_name, pid=77)
    thread = {"process_id": 77, "thread_id": 78}
    first = [
        make_record("MARKER", flags_=2, timestamp=T0, id=1, object_kind=2, object_id=thread, name="train"),
        make_record(
            "MARKER", flags_=2, timestamp=T0 + 10, id=2, object_kind=2, object_id=thread, name="forward", domain=""
        ),
        make_record("MARKER", flags_=4, timestamp=T0 + 20, id=2, object_kind=2, object_id=thread),
    ]
    second = [
        make_record("MARKER", flags_=4, timestamp=T0 + 30, id=1, object_kind=2, object_id=thread),
        make_record("MARKER", flags_=1, timestamp=T0 + 40, id=3, object_kind=2, object_id=thread, name="tick"),
        make_record(
            "MARKER", flags_=2, timestamp=T0 + 50, id=4, object_kind=2, object_id=thread, name="x", domain="ktrace"
        ),
    ]
    a = decode(first, decoder)[0]["ranges"].to_pylist()
    b = decode(second, decoder)[0]["ranges"].to_pylist()
    assert [(r["name"], r["start_ns"] - T0, r["end_ns"] - T0, r["depth"], r["domain"], r["tid"]) for r in a] == [
        ("forward", 10, 20, 1, "nvtx", 78)
    ]
    assert [(r["name"], r["start_ns"] - T0, r["end_ns"] - T0, r["depth"]) for r in b] == [
        ("train", 0, 30, 0),
        ("tick", 40, 40, 0),
    ]
    assert decoder.close() == {}  # the "ktrace" domain range is recorded by the Python API, not here


def test_zero_timestamps_overhead_and_external_ids_go_to_health(make_record: Any) -> None:
    recs = [
        make_record("CONCURRENT_KERNEL", start=0, end=0, name="lost", correlation_id=1),
        make_record("CONCURRENT_KERNEL", start=T0, end=T0 + 5, name="ok", correlation_id=2),
        make_record("EXTERNAL_CORRELATION", external_kind=3, external_id=555, correlation_id=2),
        make_record("OVERHEAD", overhead_kind=0x10000, start=T0, end=T0 + 1000),
        make_record("STREAM", context_id=1, stream_id=7),
    ]
    tables, health = decode(recs)
    assert tables["kernels"].column("name").to_pylist() == ["ok"]
    assert tables["kernels"].column("external_id").to_pylist() == [555]
    assert health == {"zero_timestamp_records": 1, "cupti_overhead_records": 1, "cupti_overhead_ns": 1000}


def test_kernels_whose_external_id_may_have_been_dropped_are_counted(make_record: Any) -> None:
    from ktrace.tracer.record_arrays import ExternalIds

    decoder = RecordDecoder(generic_api_name, pid=77)
    decoder.state.external = ExternalIds(keep=1)
    pairs = [
        make_record("EXTERNAL_CORRELATION", external_kind=3, external_id=100 + c, correlation_id=c) for c in (1, 2, 3)
    ]
    decode(pairs, decoder)  # 3 pairs > 2 x keep: only correlation id 3 is remembered
    kernels = [
        make_record("CONCURRENT_KERNEL", start=T0 + c, end=T0 + c + 1, name="k", correlation_id=c) for c in (1, 3)
    ]
    tables, health = decode(kernels, decoder)
    assert tables["kernels"].column("external_id").to_pylist() == [None, 103]
    assert health == {"external_ids_maybe_dropped": 1}


def test_device_and_thread_name_records() -> None:
    from cupti_support import fake_record  # uuid formatting needs a writable CUuuid: fakes only

    dev = fake_record(
        "DEVICE",
        id=0,
        name="NVIDIA H100 80GB HBM3",
        uuid=bytes(range(1, 17)),
        compute_capability_major=9,
        compute_capability_minor=0,
        num_multiprocessors=132,
        global_memory_size=85_000_000_000,
    )
    name = fake_record("NAME", object_kind=2, object_id={"process_id": 77, "thread_id": 80}, name="pin_memory")
    tables, _ = decode([dev, name])
    d = tables["devices"].to_pylist()[0]
    assert d["uuid"] == "GPU-01020304-0506-0708-090a-0b0c0d0e0f10"
    assert (d["compute_major"], d["sm_count"], d["memory_bytes"]) == (9, 132, 85_000_000_000)
    assert tables["threads"].to_pylist()[0]["name"] == "pin_memory"


def test_unknown_kinds_are_counted_and_missing_attributes_tolerated() -> None:
    from types import SimpleNamespace

    extractor = RecordExtractor()
    rows: dict[int, list[tuple[Any, ...]]] = {}
    old_kernel = SimpleNamespace(
        kind=ACTIVITY_KIND["CONCURRENT_KERNEL"],
        start=T0,
        end=T0 + 1,
        device_id=0,
        context_id=1,
        stream_id=2,
        correlation_id=3,
        name="k",
    )  # an older class
    skipped = extractor.extract([old_kernel, SimpleNamespace(kind=999)], rows)
    assert skipped == 1
    table = RecordDecoder(generic_api_name, 1).decode(extractor.by_name(rows))[0]["kernels"]
    assert table.num_rows == 1 and table.column("grid_x").to_pylist() == [0]


def test_api_names_from_cbid_enums_strip_version_suffix() -> None:
    import enum

    class Runtime(enum.IntEnum):
        cudaLaunchKernel_v7000 = 211

    class Driver(enum.IntEnum):
        cuLaunchKernel = 307

    name_of = api_name_from_enums(Runtime, Driver)
    assert name_of("runtime", 211) == "cudaLaunchKernel"
    assert name_of("driver", 307) == "cuLaunchKernel"
    assert name_of("driver", 1) == "driver_cbid_1"


def test_decoded_tables_match_schema_columns() -> None:
    from cupti_support import fake_record

    tables, _ = decode([fake_record("CONCURRENT_KERNEL", start=T0, end=T0 + 1, name="k")])
    assert set(tables["kernels"].column_names) <= set(SCHEMAS["kernels"].names)


def test_external_ids_are_bounded_and_the_latest_pair_wins() -> None:
    import numpy as np

    from ktrace.tracer.record_arrays import ExternalIds

    ids = ExternalIds(keep=4)
    ids.add(np.array([5, 1, 3], np.int64), np.array([50, 10, 30], np.int64))
    ids.add(np.array([3], np.int64), np.array([31], np.int64))  # a repeated id takes the newer external id
    found, dropped = ids.lookup(np.array([1, 3, 4, 5], np.int64))
    assert found.to_pylist() == [10, 31, None, 50] and dropped == 0
    ids.add(np.arange(6, 12, dtype=np.int64), np.arange(60, 120, 10, dtype=np.int64))
    assert len(ids) == 4  # 9 pairs > 2 x keep: only the 4 newest stay
    found, dropped = ids.lookup(np.array([1, 5, 8, 11], np.int64))
    assert found.to_pylist() == [None, None, 80, 110] and dropped == 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, (1 << 21) - 1), max_size=300), st.booleans())
def test_distinct_api_keys_equal_numpy_unique(keys: list[int], small: bool) -> None:
    """The writer names each distinct (domain, cbid) once without sorting; same result as np.unique, also for keys
    past the table's reach (which fall back to np.unique)."""
    from ktrace.tracer.record_arrays import distinct_small

    key = np.array([k % 5000 if small else k for k in keys], np.int64)
    uniq, inverse = distinct_small(key)
    want_uniq, want_inverse = np.unique(key, return_inverse=True)
    np.testing.assert_array_equal(uniq, want_uniq)
    np.testing.assert_array_equal(inverse, want_inverse)
