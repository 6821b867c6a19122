"""CUDA_GPU_MEMORY_USAGE_EVENTS (nsys --cuda-memory-usage=true) -> allocations: one row per device allocation or
free, bytes signed by the operation (ENUM_CUDA_DEV_MEM_EVENT_OPER: allocation / deallocation). nsys records
neither the allocator's totals nor the calling thread: the memory timeline sums the events and attributes none to
an operator."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from ktrace.importers.nsys_meta import pid_of
from ktrace.importers.nsys_sqlite import (
    ImportLog,
    NsysDb,
    codes_to_numpy,
    col,
    decode,
    fetch_rows,
    fit_int32,
    labels_from,
    to_epoch,
)

TABLE = "CUDA_GPU_MEMORY_USAGE_EVENTS"
OPERATIONS = {"ALLOCATION": "alloc", "DEALLOCATION": "free"}
OPERATION_CODES = {0: "CUDA_DEV_MEM_EVENT_OPR_ALLOCATION", 1: "CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION"}
"""ENUM_CUDA_DEV_MEM_EVENT_OPER as nsys writes it (used when the export lacks the enum table)."""


def _operation(name: str) -> str | None:
    return OPERATIONS.get(name.rsplit("_OPR_", 1)[-1])


def read_memory_usage(db: NsysDb, offset: int, log: ImportLog, advance: Callable[[int], None]) -> pa.Table:
    """Allocation and free events as allocations rows (ts_ns, device, pid, address, signed bytes)."""
    spec = {
        "start": col("start"),
        "gpid": col("globalPid"),
        "device": col("deviceId"),
        "address": col("address"),
        "bytes": col("bytes"),
        "op": col("memoryOperationType"),
    }
    t = fetch_rows(db, TABLE, spec, ("start", "device", "bytes", "op"), log, advance)
    label = labels_from(db.enum("ENUM_CUDA_DEV_MEM_EVENT_OPER"), _operation, OPERATION_CODES)
    op, bad = decode(t.column("op"), label, "unknown")
    log.problem("nsys_unknown_enum_values", bad)
    ops = np.asarray(op.dictionary.to_pylist(), dtype=object)[op.indices.to_numpy(zero_copy_only=False)]
    known = ops != "unknown"
    sign = np.where(ops == "free", -1, 1)
    size = codes_to_numpy(t.column("bytes"))
    t = t.append_column("signed", pa.array(sign * np.abs(size), pa.int64())).filter(pa.array(known))
    return pa.table(
        {
            "ts_ns": to_epoch(t.column("start"), offset),
            "device": fit_int32(t.column("device"), log),
            "pid": pid_of(t.column("gpid")),
            "address": t.column("address"),
            "bytes": t.column("signed"),
        }
    )
