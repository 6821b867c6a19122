"""Import an Nsight Systems SQLite export (`nsys export --type sqlite`, schemas 2022-2025) as a Trace."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ktrace.importers.nsys_activity import (
    API_TABLES,
    Rows,
    read_api,
    read_kernels,
    read_memcpy,
    read_memset,
    read_syncs,
)
from ktrace.importers.nsys_annotations import read_gpu_metrics, read_nvtx
from ktrace.importers.nsys_memory import TABLE as MEMORY_USAGE_TABLE
from ktrace.importers.nsys_memory import read_memory_usage
from ktrace.importers.nsys_meta import (
    METADATA_TABLES,
    ExportInfo,
    capture_meta,
    job_meta,
    read_devices,
    read_export_info,
    read_process_names,
    read_threads,
)
from ktrace.importers.nsys_sqlite import NULL_CODE, READ_ERRORS, ImportLog, NsysDb, one_line, row_progress
from ktrace.model.builder import TraceBuilder
from ktrace.model.errors import ProgressFn, TraceFormatError, TraceNotFoundError, no_progress
from ktrace.model.schema import NODE_RANK
from ktrace.model.scrub import scrub_trace
from ktrace.model.trace import Trace, TraceMeta

EVENT_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    *API_TABLES,
    "NVTX_EVENTS",
    "GPU_METRICS",
    MEMORY_USAGE_TABLE,
)
"""Tables whose rows become ktrace events; an export needs at least one of them."""

NSYS_MARKERS = ("StringIds", "TARGET_INFO_SESSION_START_TIME", *METADATA_TABLES)
"""Tables that say a SQLite file is an nsys export even when it holds no events."""

_LAUNCH_API = re.compile(r"^cu(da)?(Launch|GraphLaunch)")
_GPU_TABLES = {
    "CUPTI_ACTIVITY_KIND_KERNEL": "kernels",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "memory",
    "CUPTI_ACTIVITY_KIND_MEMSET": "memory",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "syncs",
}
_GPU_READERS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": read_kernels,
    "CUPTI_ACTIVITY_KIND_MEMCPY": read_memcpy,
    "CUPTI_ACTIVITY_KIND_MEMSET": read_memset,
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": read_syncs,
}


def import_nsys(path: Path, *, progress: ProgressFn = no_progress, **options: Any) -> Trace:
    """Read an nsys SQLite export into a Trace (one node, one rank; every process keeps its pid/tid).

    Tables are probed, never assumed from the version: an absent table means "not recorded", an
    absent column reads as null. Times become ns since the Unix epoch through
    TARGET_INFO_SESSION_START_TIME (else they stay capture-relative and meta.clock says so). A table
    that cannot be read (truncated or corrupt file) is dropped, or cut at the bad page, and named in
    meta.notes. meta.health counts:

    - kernels/memory/syncs_with_launch, _without_launch: GPU records joined (or not) to their API call
      on (pid, correlation id); launches_without_gpu_record: cu(da)Launch*/GraphLaunch calls with none.
    - secrets_scrubbed: environment/metadata values redacted (ktrace.model.secrets).
    - nvtx_marks_dropped, nvtx_unclosed_ranges_dropped: NVTX rows that are not ranges.
    - nsys_tables_unreadable, nsys_tables_truncated, nsys_rows_dropped (null times), nsys_values_out_of_range,
      nsys_unresolved_names, nsys_unknown_enum_values, nsys_no_epoch_anchor,
      nsys_processes_with_remapped_correlation_ids: what was repaired or lost (absent when zero).

    Args:
        path: the .sqlite file written by `nsys export --type sqlite` (or `nsys stats`).
        progress: called with (rows read, rows in all event tables).
        **options: options of other importers (e.g. with_ops); accepted and ignored.

    Returns:
        The trace, with meta.health counting joins, orphans, drops and scrubbed secrets.

    Raises:
        TraceFormatError: the file is not SQLite, not an nsys export, has an unknown schema, or no
            event table could be read.
    """
    path = Path(path)
    if not path.exists():
        raise TraceNotFoundError(f"{path}: no such file or directory")
    if path.is_dir():
        raise TraceFormatError(f"{path}: a folder, not an nsys .sqlite export")
    db = NsysDb(path)
    try:
        return _import(db, progress)
    except READ_ERRORS as exc:  # what no single table's guard could contain (the schema, the build)
        raise TraceFormatError(f"{path}: unreadable nsys export ({type(exc).__name__}: {one_line(exc)})") from None
    finally:
        db.close()


def _import(db: NsysDb, progress: ProgressFn) -> Trace:
    """Check that `db` is an nsys export, read every event table, count joins, build the Trace."""
    present = [t for t in EVENT_TABLES if db.has(t)]
    if not present:
        if any(db.has(t) for t in NSYS_MARKERS):
            raise TraceFormatError(
                f"{db.path}: nsys export without CUDA, NVTX or GPU-metric tables "
                "(nothing to import; was it captured with --trace=cuda,nvtx?)"
            )
        raise TraceFormatError(
            f"{db.path}: SQLite database but not an Nsight Systems export "
            "(no CUPTI_ACTIVITY_KIND_*, NVTX_EVENTS or StringIds tables)"
        )
    log = ImportLog()
    info = read_export_info(db, log)
    builder = TraceBuilder(node=info.host, rank=info.rank)
    advance = row_progress(progress, sum(_safe_count(db, t) for t in present))
    joinable, failures = _read_events(db, present, info, builder, log, advance)
    join_health(
        {t: r for t, r in joinable.items() if t in _GPU_TABLES},
        [r for t, r in joinable.items() if t in API_TABLES],
        log,
    )
    for table, rows in unique_correlation_ids(joinable, log).items():
        if not _guard(log, table, partial(builder.add, _GPU_TABLES.get(table, "api"), rows.table))[0]:
            failures.append(log.notes[-1])
    for table, (kept, reason) in db.truncated.items():
        log.count("nsys_tables_truncated")
        log.note(f"{table}: only the first {kept} row(s) could be read ({reason}); the rest was dropped")
    if len(failures) == len(present):
        raise TraceFormatError(f"{db.path}: no event table could be read ({failures[0]})")
    pids = np.unique(np.concatenate([r.pid for r in joinable.values()] or [np.zeros(0, np.int64)]))
    _read_dimensions(db, builder, log)
    names = _guard(log, "PROCESSES", lambda: read_process_names(db, pids[pids != NULL_CODE]))[1] or {}
    builder.set_meta(_trace_meta(db, info, log, names))
    return scrub_trace(builder.build())


def _safe_count(db: NsysDb, table: str) -> int:
    try:
        return db.count(table)
    except READ_ERRORS:
        return 0


def _guard(log: ImportLog, table: str, read: Callable[[], Any]) -> tuple[bool, Any]:
    """Run one table's reader: (True, its result), or on a read error drop the table (noted): (False, None)."""
    try:
        return True, read()
    except READ_ERRORS as exc:
        log.drop_table(table, f"{type(exc).__name__}: {exc}")
        return False, None


def _read_events(
    db: NsysDb,
    present: list[str],
    info: ExportInfo,
    builder: TraceBuilder,
    log: ImportLog,
    advance: Callable[[int], None],
) -> tuple[dict[str, Rows], list[str]]:
    """Read every present event table; NVTX and metrics go to the builder, GPU/API rows come back for joins.

    A table that fails is dropped, and its note is returned among the failures.
    """
    joinable: dict[str, Rows] = {}
    failures: list[str] = []
    offset = info.epoch_offset_ns or 0
    for table in present:
        ok, got = _guard(log, table, partial(_read_table, db, table, offset, builder, log, advance))
        if not ok:
            failures.append(log.notes[-1])
        elif isinstance(got, Rows):
            joinable[table] = got
    return joinable, failures


def _read_table(
    db: NsysDb, table: str, offset: int, builder: TraceBuilder, log: ImportLog, advance: Callable[[int], None]
) -> Rows | None:
    """Read one event table: GPU and API rows are returned (added after the joins), the rest added now."""
    if table in _GPU_READERS:
        return _GPU_READERS[table](db, offset, log, advance)
    if table in API_TABLES:
        return read_api(db, table, offset, log, advance)
    if table == "NVTX_EVENTS":
        builder.add("ranges", read_nvtx(db, offset, log, advance))
    elif table == MEMORY_USAGE_TABLE:
        builder.add("allocations", read_memory_usage(db, offset, log, advance))
    else:
        builder.add("counters", read_gpu_metrics(db, offset, log, advance), rank=NODE_RANK)
    return None


def unique_correlation_ids(joinable: dict[str, Rows], log: ImportLog) -> dict[str, Rows]:
    """Rows whose correlation ids are unique within the one rank all processes share.

    CUPTI numbers correlation ids per process, so two processes in one export can reuse an id. When
    they do, every id becomes pid << 32 | id (still a join key between api and GPU rows, now unique).
    """
    pid = np.concatenate([r.pid for r in joinable.values()] or [np.zeros(0, np.int64)])
    corr = np.concatenate([r.corr for r in joinable.values()] or [np.zeros(0, np.int64)])
    valid = corr != NULL_CODE
    pairs = np.unique(_keys(pid[valid], corr[valid]))
    if pairs.size == np.unique(corr[valid]).size:
        return joinable
    n_pids = np.unique(pid[valid]).size
    log.count("nsys_processes_with_remapped_correlation_ids", n_pids)
    log.note(
        f"{n_pids} processes reuse the same correlation ids: ids became pid << 32 | correlation id "
        "so that launches still join their GPU records within the shared rank"
    )
    out = {}
    for table, rows in joinable.items():
        remapped = (rows.pid.astype(np.int64) << np.int64(32)) | (rows.corr & np.int64(0xFFFFFFFF))
        column = pa.array(remapped, type=pa.int64(), mask=rows.corr == NULL_CODE)
        index = rows.table.schema.get_field_index("correlation_id")
        out[table] = replace(rows, table=rows.table.set_column(index, "correlation_id", column))
    return out


def _keys(pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """One int64 per (process, correlation id): correlation ids are unique only within a process."""
    keys: np.ndarray = (pid.astype(np.int64) << np.int64(40)) ^ corr.astype(np.int64)
    return keys


def join_health(gpu_rows: dict[str, Rows], api_rows: list[Rows], log: ImportLog) -> None:
    """Count GPU records with and without their launching API call, and launches without GPU records."""
    api_pid = np.concatenate([r.pid for r in api_rows] or [np.zeros(0, np.int64)])
    api_corr = np.concatenate([r.corr for r in api_rows] or [np.zeros(0, np.int64)])
    has_corr = api_corr != NULL_CODE
    api_keys = np.unique(_keys(api_pid[has_corr], api_corr[has_corr]))
    gpu_keys = []
    for table, rows in gpu_rows.items():
        name = _GPU_TABLES[table]
        keys = _keys(rows.pid, rows.corr)
        joined = int(np.count_nonzero(np.isin(keys, api_keys) & (rows.corr != NULL_CODE)))
        log.count(f"{name}_with_launch", joined)
        log.count(f"{name}_without_launch", rows.corr.size - joined)
        if table != "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION":
            gpu_keys.append(keys)
    if not api_rows and gpu_rows:
        log.note("no CUDA API table: GPU records cannot be joined to their launches")
    launched = np.unique(np.concatenate(gpu_keys or [np.zeros(0, np.int64)]))
    missing = 0
    for rows in api_rows:
        names = rows.table.column("name").combine_chunks()
        is_launch = np.array([bool(_LAUNCH_API.match(n)) for n in names.dictionary.to_pylist()], dtype=bool)
        launch_rows = is_launch[names.indices.to_numpy(zero_copy_only=False)] if len(names) else is_launch[:0]
        missing += int(np.count_nonzero(launch_rows & ~np.isin(_keys(rows.pid, rows.corr), launched)))
    if api_rows:
        log.count("launches_without_gpu_record", missing)
    pids = np.unique(np.concatenate([r.pid for r in gpu_rows.values()] or [np.zeros(0, np.int64)]))
    if pids.size > 1:
        log.note(
            f"{pids.size} processes ran GPU work in this export; they share one rank and keep their pids "
            "(correlation ids are per process: join launches on pid + correlation_id)"
        )


def _read_dimensions(db: NsysDb, builder: TraceBuilder, log: ImportLog) -> None:
    """GPUs (TARGET_INFO_GPU) and thread names (ThreadNames), each dropped on its own if unreadable."""
    for table, target, read in (
        ("TARGET_INFO_GPU", "devices", lambda: read_devices(db)),
        ("ThreadNames", "threads", lambda: read_threads(db, log)),
    ):
        ok, rows = _guard(log, table, read)
        if ok and rows is not None:
            _guard(log, table, partial(builder.add, target, rows))


def _trace_meta(db: NsysDb, info: ExportInfo, log: ImportLog, process_names: dict[int, str]) -> TraceMeta:
    anchored = info.epoch_offset_ns is not None
    return TraceMeta(
        source="nsys",
        created=info.export.get("EXPORT_TIME_UTC", ""),
        clock="realtime" if anchored else "nsys-session-relative",
        job=job_meta(db, info, process_names),
        capture=capture_meta(info),
        hosts=(info.host,),
        health=dict(sorted(log.health.items())),
        notes=tuple(log.notes),
    )
