"""CUDA activity of an nsys export -> ktrace tables: kernels, memcpy/memset, synchronization, runtime/driver API."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ktrace.importers.nsys_meta import pid_of, tid_of
from ktrace.importers.nsys_sqlite import (
    ImportLog,
    NsysDb,
    codes_to_numpy,
    col,
    decode,
    fetch_rows,
    fit_int32,
    labels_from,
    scalar,
    to_epoch,
)

NA_ID = 0xFFFFFFFF
"""streamId/eventId of SYNCHRONIZATION rows where the field does not apply (as in CUPTI)."""

COPY_KINDS = {
    "HTOD": "HtoD",
    "UVM_HTOD": "HtoD",
    "HTOA": "HtoD",
    "DTOH": "DtoH",
    "UVM_DTOH": "DtoH",
    "ATOH": "DtoH",
    "DTOD": "DtoD",
    "UVM_DTOD": "DtoD",
    "ATOA": "DtoD",
    "ATOD": "DtoD",
    "DTOA": "DtoD",
    "HTOH": "HtoH",
    "PTOP": "PtoP",
    "UNKNOWN": "unknown",
}
"""ENUM_CUDA_MEMCPY_OPER name suffix -> ktrace copy_kind (arrays are device memory)."""
MEMORY_KINDS = {
    "PAGEABLE": "pageable",
    "PINNED": "pinned",
    "DEVICE": "device",
    "DEVICE_STATIC": "device",
    "ARRAY": "array",
    "MANAGED": "managed",
    "MANAGED_STATIC": "managed",
    "UNKNOWN": "unknown",
}
"""ENUM_CUDA_MEM_KIND name suffix -> ktrace memory kind (nsys: 0 = pageable, 1 = pinned; not CUPTI's)."""
SYNC_TYPES = {
    "EVENT_SYNCHRONIZE": "event",
    "STREAM_WAIT_EVENT": "stream_wait_event",
    "STREAM_SYNCHRONIZE": "stream",
    "CONTEXT_SYNCHRONIZE": "context",
    "UNKNOWN": "unknown",
}
"""ENUM_CUPTI_SYNC_TYPE name suffix -> ktrace sync_type."""

# Documented numbering (formats.md 2.4), used only when an export lacks its ENUM_* table.
COPY_CODES = dict(
    enumerate(
        (
            "UNKNOWN",
            "HTOD",
            "DTOH",
            "HTOA",
            "ATOH",
            "ATOA",
            "ATOD",
            "DTOA",
            "DTOD",
            "HTOH",
            "PTOP",
            "UVM_HTOD",
            "UVM_DTOH",
            "UVM_DTOD",
        )
    )
)
MEMORY_CODES = dict(
    enumerate(("PAGEABLE", "PINNED", "DEVICE", "ARRAY", "MANAGED", "DEVICE_STATIC", "MANAGED_STATIC", "UNKNOWN"))
)
SYNC_CODES = dict(
    enumerate(("UNKNOWN", "EVENT_SYNCHRONIZE", "STREAM_WAIT_EVENT", "STREAM_SYNCHRONIZE", "CONTEXT_SYNCHRONIZE"))
)
EVENT_CLASSES = {
    0: "TRACE_PROCESS_EVENT_CUDA_RUNTIME",
    1: "TRACE_PROCESS_EVENT_CUDA_DRIVER",
    13: "TRACE_PROCESS_EVENT_CUDA_EGL_DRIVER",
    28: "TRACE_PROCESS_EVENT_CUDNN",
    29: "TRACE_PROCESS_EVENT_CUBLAS",
    33: "TRACE_PROCESS_EVENT_CUDNN_START",
    34: "TRACE_PROCESS_EVENT_CUDNN_FINISH",
    35: "TRACE_PROCESS_EVENT_CUBLAS_START",
    36: "TRACE_PROCESS_EVENT_CUBLAS_FINISH",
    67: "TRACE_PROCESS_EVENT_CUDABACKTRACE",
    77: "TRACE_PROCESS_EVENT_CUDA_GRAPH_NODE_CREATION",
}
"""ENUM_NSYS_EVENT_CLASS as the Nsight Systems export documentation lists it (2022.x to 2025.x)."""
API_EVENT_CLASSES = ("CUDA_RUNTIME", "CUDA_DRIVER", "CUDA_EGL_DRIVER")
"""Name suffixes of the event classes whose rows are API calls; the RUNTIME table holds other rows too
(2022.x exports add a CUDABACKTRACE row, eventClass 67, beside each call that has a backtrace)."""

API_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
_API_VERSION_SUFFIX = re.compile(r"_v\d{4,}$")
_GPU_PLACE = {
    "start": col("start"),
    "end": col("end"),
    "device": col("deviceId"),
    "stream": col("streamId"),
    "context": col("contextId"),
    "corr": col("correlationId"),
    "gpid": col("globalPid"),
}


@dataclass(frozen=True)
class Rows:
    """Rows for one ktrace table plus the (pid, correlation id) of each row for launch joins."""

    table: pa.Table
    pid: np.ndarray
    corr: np.ndarray


def _suffix_label(mapping: dict[str, str], marker: str) -> Callable[[str], str | None]:
    def convert(name: str) -> str | None:
        key = name.split(marker, 1)[1] if marker in name else name
        return mapping.get(key)

    return convert


def _enum_decoder(
    db: NsysDb, table: str, mapping: dict[str, str], marker: str, fallback: dict[int, str]
) -> Callable[[int], str | None]:
    return labels_from(db.enum(table), _suffix_label(mapping, marker), fallback)


def _na_to_null(values: pa.ChunkedArray | pa.Array) -> pa.Array:
    return pc.if_else(pc.equal(values, scalar(NA_ID)), scalar(None), values)


def _join_keys(t: pa.Table, pid_source: str) -> tuple[np.ndarray, np.ndarray]:
    pid = codes_to_numpy(pid_of(t.column(pid_source))) if t.num_rows else np.zeros(0, np.int64)
    return pid, codes_to_numpy(t.column("corr"))


def read_kernels(db: NsysDb, offset: int, log: ImportLog, advance: Callable[[int], None]) -> Rows:
    """CUPTI_ACTIVITY_KIND_KERNEL -> kernels (name = demangled name, else the short name)."""
    spec = {
        **_GPU_PLACE,
        "demangled": col("demangledName"),
        "short": col("shortName"),
        "grid_x": col("gridX"),
        "grid_y": col("gridY"),
        "grid_z": col("gridZ"),
        "block_x": col("blockX"),
        "block_y": col("blockY"),
        "block_z": col("blockZ"),
        "registers": col("registersPerThread"),
        "static_shared": col("staticSharedMemory"),
        "dynamic_shared": col("dynamicSharedMemory"),
        "graph_id": col("graphId"),
        "graph_node": col("graphNodeId"),
    }
    t = fetch_rows(db, "CUPTI_ACTIVITY_KIND_KERNEL", spec, ("start", "end", "device"), log, advance)
    names, unresolved = decode(
        pc.coalesce(t.column("demangled"), t.column("short")), db.strings().get, "<unknown kernel>"
    )
    log.problem("nsys_unresolved_names", unresolved)
    i32 = {
        k: fit_int32(t.column(k), log)
        for k in (
            "device",
            "grid_x",
            "grid_y",
            "grid_z",
            "block_x",
            "block_y",
            "block_z",
            "registers",
            "static_shared",
            "dynamic_shared",
        )
    }
    out = pa.table(
        {
            "start_ns": to_epoch(t.column("start"), offset),
            "end_ns": to_epoch(t.column("end"), offset),
            "device": i32["device"],
            "stream": t.column("stream"),
            "context_id": t.column("context"),
            "correlation_id": t.column("corr"),
            "name": names,
            **{k: i32[k] for k in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")},
            "registers_per_thread": i32["registers"],
            "static_shared_bytes": i32["static_shared"],
            "dynamic_shared_bytes": i32["dynamic_shared"],
            "graph_id": t.column("graph_id"),
            "graph_node_id": t.column("graph_node"),
        }
    )
    return Rows(out, *_join_keys(t, "gpid"))


def read_memcpy(db: NsysDb, offset: int, log: ImportLog, advance: Callable[[int], None]) -> Rows:
    """CUPTI_ACTIVITY_KIND_MEMCPY -> memory rows with op = memcpy, decoded through the ENUM_* tables."""
    spec = {**_GPU_PLACE, "bytes": col("bytes"), "copy": col("copyKind"), "src": col("srcKind"), "dst": col("dstKind")}
    t = fetch_rows(db, "CUPTI_ACTIVITY_KIND_MEMCPY", spec, ("start", "end", "device"), log, advance)
    copy_label = _enum_decoder(db, "ENUM_CUDA_MEMCPY_OPER", COPY_KINDS, "KIND_", COPY_CODES)
    mem_label = _enum_decoder(db, "ENUM_CUDA_MEM_KIND", MEMORY_KINDS, "KIND_", MEMORY_CODES)
    copy_kind, bad_copy = decode(t.column("copy"), copy_label, "unknown")
    src_kind, bad_src = decode(t.column("src"), mem_label, "unknown")
    dst_kind, bad_dst = decode(t.column("dst"), mem_label, "unknown")
    log.problem("nsys_unknown_enum_values", bad_copy + bad_src + bad_dst)
    out = _memory_table(t, offset, log, "memcpy", copy_kind, src_kind, dst_kind)
    return Rows(out, *_join_keys(t, "gpid"))


def read_memset(db: NsysDb, offset: int, log: ImportLog, advance: Callable[[int], None]) -> Rows:
    """CUPTI_ACTIVITY_KIND_MEMSET -> memory rows with op = memset (dst_kind = the memory set)."""
    spec = {**_GPU_PLACE, "bytes": col("bytes"), "mem": col("memKind")}
    t = fetch_rows(db, "CUPTI_ACTIVITY_KIND_MEMSET", spec, ("start", "end", "device"), log, advance)
    mem_label = _enum_decoder(db, "ENUM_CUDA_MEM_KIND", MEMORY_KINDS, "KIND_", MEMORY_CODES)
    dst_kind, bad = decode(t.column("mem"), mem_label, "unknown")
    log.problem("nsys_unknown_enum_values", bad)
    unknown = pa.DictionaryArray.from_arrays(pa.array(np.zeros(t.num_rows, np.int32)), pa.array(["unknown"]))
    out = _memory_table(t, offset, log, "memset", unknown, unknown, dst_kind)
    return Rows(out, *_join_keys(t, "gpid"))


def _memory_table(
    t: pa.Table, offset: int, log: ImportLog, op: str, copy_kind: pa.Array, src_kind: pa.Array, dst_kind: pa.Array
) -> pa.Table:
    return pa.table(
        {
            "op": pa.DictionaryArray.from_arrays(pa.array(np.zeros(t.num_rows, np.int32)), pa.array([op])),
            "start_ns": to_epoch(t.column("start"), offset),
            "end_ns": to_epoch(t.column("end"), offset),
            "device": fit_int32(t.column("device"), log),
            "stream": t.column("stream"),
            "context_id": t.column("context"),
            "correlation_id": t.column("corr"),
            "bytes": t.column("bytes"),
            "copy_kind": copy_kind,
            "src_kind": src_kind,
            "dst_kind": dst_kind,
        }
    )


def read_syncs(db: NsysDb, offset: int, log: ImportLog, advance: Callable[[int], None]) -> Rows:
    """CUPTI_ACTIVITY_KIND_SYNCHRONIZATION -> syncs (N/A stream/event ids become null)."""
    spec = {**_GPU_PLACE, "sync": col("syncType"), "event": col("eventId")}
    t = fetch_rows(db, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", spec, ("start", "end"), log, advance)
    label = _enum_decoder(db, "ENUM_CUPTI_SYNC_TYPE", SYNC_TYPES, "TYPE_", SYNC_CODES)
    sync_type, bad = decode(t.column("sync"), label, "unknown")
    log.problem("nsys_unknown_enum_values", bad)
    out = pa.table(
        {
            "start_ns": to_epoch(t.column("start"), offset),
            "end_ns": to_epoch(t.column("end"), offset),
            "device": fit_int32(t.column("device"), log),
            "stream": _na_to_null(t.column("stream")),
            "context_id": t.column("context"),
            "sync_type": sync_type,
            "correlation_id": t.column("corr"),
            "event_id": _na_to_null(t.column("event")),
        }
    )
    return Rows(out, *_join_keys(t, "gpid"))


def read_api(db: NsysDb, table: str, offset: int, log: ImportLog, advance: Callable[[int], None]) -> Rows:
    """CUPTI_ACTIVITY_KIND_RUNTIME (which also holds driver calls) -> api rows, names without _vNNNN."""
    spec = {
        "start": col("start"),
        "end": col("end"),
        "gtid": col("globalTid"),
        "corr": col("correlationId"),
        "name_id": col("nameId"),
        "event_class": col("eventClass"),
    }
    classes = db.enum("ENUM_NSYS_EVENT_CLASS") or EVENT_CLASSES
    t = _api_rows_only(fetch_rows(db, table, spec, ("start", "end", "gtid"), log, advance), table, log, classes)
    strings = db.strings()
    names, unresolved = decode(t.column("name_id"), lambda i: _api_name(strings.get(i)), "<unknown api>")
    log.problem("nsys_unresolved_names", unresolved)
    domain = _api_domains(classes, t, names, driver_table=table.endswith("_DRIVER"))
    out = pa.table(
        {
            "start_ns": to_epoch(t.column("start"), offset),
            "end_ns": to_epoch(t.column("end"), offset),
            "pid": pid_of(t.column("gtid")),
            "tid": tid_of(t.column("gtid")),
            "correlation_id": t.column("corr"),
            "domain": domain,
            "name": names,
        }
    )
    return Rows(out, *_join_keys(t, "gtid"))


def _api_rows_only(t: pa.Table, table: str, log: ImportLog, classes: dict[int, str]) -> pa.Table:
    """Drop rows of an eventClass known not to be an API call (backtraces, cuDNN/cuBLAS markers), naming each;
    a class the export's enum (or, without one, the documented list) does not know is kept, and said."""
    if table.endswith("_DRIVER") or not t.num_rows:
        return t
    values = codes_to_numpy(t.column("event_class").fill_null(0))  # no eventClass (old schemas): an API row
    not_api = [c for c, name in classes.items() if not name.endswith(API_EVENT_CLASSES)]
    drop = np.isin(values, not_api)
    unknown, unknown_counts = np.unique(values[~np.isin(values, list(classes))], return_counts=True)
    for code, n in zip(unknown.tolist(), unknown_counts.tolist(), strict=True):
        log.note(f"{n} rows of {table} with eventClass {code} (not in ENUM_NSYS_EVENT_CLASS): kept as API calls")
    if not drop.any():
        return t
    dropped, counts = np.unique(values[drop], return_counts=True)
    for code, n in zip(dropped.tolist(), counts.tolist(), strict=True):
        log.note(f"{n} rows of {table} with eventClass {code} ({classes[code]}) are not API calls: left out")
    log.problem("nsys_non_api_rows", int(drop.sum()))
    return t.filter(pa.array(~drop))


def _api_name(name: str | None) -> str | None:
    return None if name is None else _API_VERSION_SUFFIX.sub("", name)


def _api_domains(
    classes: dict[int, str], t: pa.Table, names: pa.DictionaryArray, *, driver_table: bool
) -> pa.DictionaryArray:
    """runtime/driver per row: from eventClass (ENUM_NSYS_EVENT_CLASS) when it says, else by name prefix."""
    n = t.num_rows
    if driver_table:
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array(["driver"]))
    drivers = [c for c, name in classes.items() if name.endswith("CUDA_DRIVER")]
    runtimes = [c for c, name in classes.items() if name.endswith("CUDA_RUNTIME")]
    event_class = codes_to_numpy(t.column("event_class"))
    by_class = np.where(np.isin(event_class, drivers), 1, np.where(np.isin(event_class, runtimes), 0, -1))
    words = names.dictionary.to_pylist()
    prefix = np.array([1 if (w.startswith("cu") and not w.startswith("cuda")) else 0 for w in words], np.int8)
    by_name = prefix[names.indices.to_numpy(zero_copy_only=False)] if n else np.zeros(0, np.int8)
    codes = np.where(by_class >= 0, by_class, by_name).astype(np.int32)
    return pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(["runtime", "driver"]))
