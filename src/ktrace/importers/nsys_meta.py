"""What an nsys export says about itself: schema version, time anchor, host, rank, environment, GPUs, threads."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ktrace.importers.nsys_sqlite import (
    READ_ERRORS,
    ImportLog,
    NsysDb,
    col,
    decode,
    first_number,
    fit_int32,
    pairs,
    scalar,
)
from ktrace.model.errors import TraceFormatError
from ktrace.model.secrets import REDACTED, scrub_argv, scrub_mapping

METADATA_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")
"""The export's own metadata: META_DATA_EXPORT since ~2023, EXPORT_META_DATA in older exports."""

KNOWN_SCHEMA_MAJORS = (2, 3)
"""Export schema majors this importer understands (nsys 2021-2025 write 2.x/3.x)."""

RANK_VARIABLES = ("RANK", "PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "MV2_COMM_WORLD_RANK")
"""Environment variables that name the process's rank, in order of trust."""

PROCESS_MASK = 0xFFFFFF
"""globalTid = (vm id << 48) | (pid << 24) | tid, each field 24 bits (nsys rule scripts)."""

_SYSTEM_ENV_SKIP = ("DeviceEnvironment", "CpuInfo", "GpuInfo", "GpuMetricsConfig", "LinuxPerfInfo")
_ENV_ROW = re.compile(r"^PROCESS_(\d+):ENVIRONMENT_VARIABLE$")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_%.]*)=(.*)$", re.DOTALL)


@dataclass
class ExportInfo:
    """Facts about the export, read before any event table."""

    metadata_table: str | None = None
    export: dict[str, str] = field(default_factory=dict)
    capture: dict[str, Any] = field(default_factory=dict)
    system: dict[str, str] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    epoch_offset_ns: int | None = None
    session_start_utc: str | None = None

    @property
    def schema_version(self) -> str | None:
        """EXPORT_SCHEMA_VERSION, e.g. "3.20.2"."""
        return self.export.get("EXPORT_SCHEMA_VERSION")

    @property
    def host(self) -> str:
        """The traced machine's name, else "localhost"."""
        for value in (
            self.system.get("Hostname"),
            self.capture.get("DEVICE_DISPLAY_NAME"),
            self.environment.get("HOSTNAME"),
        ):
            if isinstance(value, str) and value.strip() and value.strip() != REDACTED:
                return value.strip()
        return "localhost"

    @property
    def rank(self) -> int:
        """The rank named by the recorded environment (RANK, PMI_RANK, SLURM_PROCID, ...), else 0."""
        for name in RANK_VARIABLES:
            value = self.environment.get(name, "").strip()
            if value.isdigit() and int(value) < 2**31:
                return int(value)
        return 0


def pid_of(global_tid: pa.Array | pa.ChunkedArray) -> pa.Array:
    """PID field of a globalTid/globalPid column."""
    return pc.bit_wise_and(pc.shift_right(global_tid, scalar(24)), scalar(PROCESS_MASK))


def tid_of(global_tid: pa.Array | pa.ChunkedArray) -> pa.Array:
    """TID field of a globalTid column."""
    return pc.bit_wise_and(global_tid, scalar(PROCESS_MASK))


def read_export_info(db: NsysDb, log: ImportLog) -> ExportInfo:
    """Metadata, capture settings, environment (scrubbed) and the epoch anchor of the export."""
    info = ExportInfo()
    info.metadata_table = next((t for t in METADATA_TABLES if db.has(t)), None)
    if info.metadata_table:
        info.export = dict(_guarded(db, log, info.metadata_table, lambda: db.key_values(info.metadata_table or "")))
    _check_schema(db, info)
    capture_rows = _guarded(db, log, "META_DATA_CAPTURE", lambda: db.key_values("META_DATA_CAPTURE"))
    info.capture, info.environment = _split_capture(capture_rows)
    system = dict(_guarded(db, log, "TARGET_INFO_SYSTEM_ENV", lambda: db.key_values("TARGET_INFO_SYSTEM_ENV")))
    if not info.environment and system.get("DeviceEnvironment"):
        info.environment = _parse_env_list(system["DeviceEnvironment"])
    info.system = {k: v for k, v in system.items() if k not in _SYSTEM_ENV_SKIP and len(v) <= 256}
    _scrub(info, log)
    _read_anchor(db, info, log)
    return info


def _guarded(db: NsysDb, log: ImportLog, table: str, read: Any) -> list[tuple[str, str]]:
    try:
        rows: list[tuple[str, str]] = read()
        return rows
    except READ_ERRORS as exc:
        log.drop_table(table, str(exc))
        return []


def _check_schema(db: NsysDb, info: ExportInfo) -> None:
    major = first_number(info.schema_version)
    if info.schema_version and (major is None or major not in KNOWN_SCHEMA_MAJORS):
        known = ", ".join(f"{m}.x" for m in KNOWN_SCHEMA_MAJORS)
        raise TraceFormatError(
            f"{db.path}: unknown nsys export schema {info.schema_version!r} "
            f"(ktrace reads schemas {known}; re-export with nsys 2021-2025)"
        )


def _split_capture(rows: list[tuple[str, str]]) -> tuple[dict[str, Any], dict[str, str]]:
    """META_DATA_CAPTURE rows -> (settings, environment of the first launched process)."""
    capture: dict[str, Any] = {}
    envs: dict[int, dict[str, str]] = {}
    for key, value in rows:
        m = _ENV_ROW.match(key)
        if m:
            a = _ASSIGNMENT.match(value)
            if a:
                envs.setdefault(int(m.group(1)), {})[a.group(1)] = _unquote(a.group(2))
            continue
        if key in capture:
            prev = capture[key]
            capture[key] = [*prev, value] if isinstance(prev, list) else [prev, value]
        else:
            capture[key] = value
    environment = envs[min(envs)] if envs else {}
    return capture, environment


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value


def _parse_env_list(text: str) -> dict[str, str]:
    """TARGET_INFO_SYSTEM_ENV DeviceEnvironment: NAME=value;NAME=value (values may hold ';')."""
    env: dict[str, str] = {}
    last: str | None = None
    for part in text.split(";"):
        a = _ASSIGNMENT.match(part)
        if a and a.group(1).replace("_", "").isalnum():
            last = a.group(1)
            env[last] = a.group(2)
        elif last is not None:
            env[last] += ";" + part
    return env


def _scrub(info: ExportInfo, log: ImportLog) -> None:
    """Redact secret-looking values (ktrace.model.secrets); flags such as "false" or "1" are kept (a setting
    named like a secret but holding a flag, NVTX_OPTIONS:TRACE_NVTX_RANGE_HOT_KEY=false, is no secret)."""
    env, n_env = scrub_mapping(info.environment)
    capture, n_cap = scrub_mapping(info.capture)
    system, n_sys = scrub_mapping(info.system)
    export, n_exp = scrub_mapping(info.export)
    args = _argument_keys(capture)
    argv, n_argv = scrub_argv([str(capture.get("PROCESS_0:COMMAND", "")), *(str(capture[k]) for k in args)])
    capture.update(zip(args, argv[1:], strict=True))  # `--password`, then the password in the next argument
    info.environment, info.capture, info.system, info.export = env, capture, system, export
    total = n_env + n_cap + n_sys + n_exp + n_argv
    log.count("secrets_scrubbed", total)
    if total:
        log.note(f"{total} secret-looking environment/metadata value(s) redacted on import")


def _argument_keys(capture: Mapping[str, Any]) -> list[str]:
    """PROCESS_0:ARGUMENT_<i> keys of the traced command, in argument order."""
    return sorted((k for k in capture if re.fullmatch(r"PROCESS_0:ARGUMENT_\d+", k)), key=lambda k: int(k[19:]))


def _read_anchor(db: NsysDb, info: ExportInfo, log: ImportLog) -> None:
    """Session start (ns since the Unix epoch): nsys times are relative to it."""
    table = "TARGET_INFO_SESSION_START_TIME"
    cols = db.columns(table)
    source = next((c for c in ("utcEpochNs", "utcEpochNS", "epochNs") if c in cols), None)
    if source is not None:
        try:
            t = db.fetch(table, {"ns": col(source), "utc": col("utcTime", kind="text")})
            values = [v for v in t.column("ns").to_pylist() if v is not None and v > 0]
            if values:
                info.epoch_offset_ns = int(values[0])
                utc = t.column("utc").to_pylist()
                info.session_start_utc = utc[0] if utc and utc[0] else None
        except READ_ERRORS as exc:
            log.drop_table(table, str(exc))
    if info.epoch_offset_ns is None:
        log.count("nsys_no_epoch_anchor")
        log.note(
            "no session start time (TARGET_INFO_SESSION_START_TIME.utcEpochNs): times are ns since "
            "the capture started, not since the Unix epoch"
        )
    shift = info.export.get("EXPORT_CONFIG_TIME_SHIFT", "0").strip() or "0"
    if shift not in ("0", "0.0") or info.export.get("EXPORT_PARAM_TIME_NORMALIZE") == "true":
        log.note(f"export was written with a time shift/normalisation ({shift}); epoch times may be offset")


def job_meta(db: NsysDb, info: ExportInfo, process_names: Mapping[int, str]) -> dict[str, Any]:
    """meta.job of the imported trace: what ran, where, with which nsys (secrets already scrubbed)."""
    cap = info.capture
    args = [str(cap[k]) for k in _argument_keys(cap)]
    command = " ".join([str(cap.get("PROCESS_0:COMMAND", "")), *args]).strip()
    job: dict[str, Any] = {
        "source_files": [db.path.name],
        "command": command or None,
        "working_dir": cap.get("PROCESS_0:WORKING_DIR"),
        "processes": {str(pid): name for pid, name in sorted(process_names.items())},
        "nsys": {
            "metadata_table": info.metadata_table,
            "export_product_version": info.export.get("EXPORT_PRODUCT_VERSION"),
            "export_schema_version": info.schema_version,
            "capture_install_dir": info.system.get("TargetInstallDir"),
        },
        "session_start_utc": info.session_start_utc,
        "os": info.system.get("OsDescription"),
        "cuda_driver_version": info.system.get("CudaDriverVersion"),
        "nv_driver_version": info.system.get("NvDriverVersion"),
        "environment": dict(sorted(info.environment.items())),
    }
    return {k: v for k, v in job.items() if v not in (None, "", {})}


def capture_meta(info: ExportInfo) -> dict[str, Any]:
    """meta.capture: nsys capture settings (without the environment) and the target system facts."""
    settings = {k: v for k, v in info.capture.items() if not k.startswith("PROCESS_")}
    return {"tool": "nsys", "settings": settings, "system": dict(info.system)}


def read_devices(db: NsysDb) -> pa.Table | None:
    """TARGET_INFO_GPU -> devices rows (may list GPUs the traced processes never used)."""
    if not db.has("TARGET_INFO_GPU"):
        return None
    t = db.fetch(
        "TARGET_INFO_GPU",
        {
            "device": col("id"),
            "name": col("name", kind="text"),
            "uuid": col("uuid", kind="text"),
            "compute_major": col("computeMajor", "smMajor"),
            "compute_minor": col("computeMinor", "smMinor"),
            "sm_count": col("smCount"),
            "memory_bytes": col("totalMemory"),
        },
    )
    t = t.filter(pc.is_valid(t.column("device")))
    scratch = ImportLog()
    return pa.table(
        {
            "device": fit_int32(t.column("device"), scratch),
            "name": t.column("name"),
            "uuid": t.column("uuid"),
            "compute_major": fit_int32(t.column("compute_major"), scratch),
            "compute_minor": fit_int32(t.column("compute_minor"), scratch),
            "sm_count": fit_int32(t.column("sm_count"), scratch),
            "memory_bytes": t.column("memory_bytes"),
        }
    )


def read_threads(db: NsysDb, log: ImportLog) -> pa.Table | None:
    """ThreadNames -> threads rows (pid, tid, name)."""
    if not db.has("ThreadNames"):
        return None
    t = db.fetch("ThreadNames", {"gtid": col("globalTid"), "name_id": col("nameId")})
    t = t.filter(pc.is_valid(t.column("gtid")))
    strings = db.strings()
    names, unresolved = decode(t.column("name_id"), strings.get, "")
    log.problem("nsys_unresolved_names", unresolved)
    text = names.cast(pa.string())
    return pa.table(
        {
            "pid": pid_of(t.column("gtid")),
            "tid": tid_of(t.column("gtid")),
            "name": pc.if_else(pc.equal(text, scalar("", "text")), scalar(None, "text"), text),
        }
    )


def read_process_names(db: NsysDb, pids: np.ndarray) -> dict[int, str]:
    """PROCESSES names of the given pids (the export lists every process on the machine)."""
    if not db.has("PROCESSES") or not pids.size:
        return {}
    t = db.fetch("PROCESSES", {"pid": col("pid"), "name": col("name", kind="text")})
    wanted = set(int(p) for p in np.unique(pids))
    return {int(p): str(n) for p, n in pairs(t, "pid", "name") if p is not None and n is not None and int(p) in wanted}
