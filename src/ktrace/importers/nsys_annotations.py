"""NVTX_EVENTS -> ranges (domains named, depth recomputed per thread) and GPU_METRICS -> counters."""

from __future__ import annotations

import re
from collections.abc import Callable

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
    keep_rows,
    pairs,
    require,
    scalar,
)
from ktrace.model.nesting import nesting_depth

NVTX_MARK = 34
NVTX_PUSH_POP = 59
NVTX_START_END = 60
NVTX_DOMAIN_CREATE = 75
RANGE_TYPES = (NVTX_PUSH_POP, NVTX_START_END)
DEFAULT_DOMAIN = "nvtx"
"""Domain of ranges in NVTX's default domain (domainId 0) or an unnamed one."""

GPU_METRIC_NAMES = {"gr active": "gpu.util", "gpu active": "gpu.util"}
"""nsys GPU-metric names (lower case, without the [unit]) that map onto ktrace's own metric names."""


def read_nvtx(db: NsysDb, offset: int, log: ImportLog, advance: Callable[[int], None]) -> pa.Table:
    """Push/pop and start/end ranges; marks are counted (not kept), unclosed ranges dropped and counted."""
    spec = {
        "start": col("start"),
        "end": col("end"),
        "type": col("eventType"),
        "gtid": col("globalTid"),
        "text": col("text", kind="text"),
        "text_id": col("textId"),
        "domain": col("domainId"),
    }
    require(db, "NVTX_EVENTS", spec, ("start", "type", "gtid"))
    t = db.fetch("NVTX_EVENTS", spec, progress=advance)
    kinds = codes_to_numpy(t.column("type"))
    log.count("nvtx_marks_dropped", int(np.count_nonzero(kinds == NVTX_MARK)))
    domains = _domain_names(db, t.filter(pa.array(kinds == NVTX_DOMAIN_CREATE)))
    ranges = t.filter(pa.array(np.isin(kinds, RANGE_TYPES)))
    unclosed = int(pc.sum(pc.is_null(ranges.column("end"))).as_py() or 0)
    if unclosed:
        log.count("nvtx_unclosed_ranges_dropped", unclosed)
        log.note(f"NVTX_EVENTS: {unclosed} range(s) never ended (no end time); dropped")
        ranges = ranges.filter(pc.is_valid(ranges.column("end")))
    ranges = keep_rows(ranges, ("start", "gtid"), log, "NVTX_EVENTS")
    names = _range_names(db, ranges, log)
    pid = pid_of(ranges.column("gtid"))
    domain_keys = _domain_keys(codes_to_numpy(pid), codes_to_numpy(ranges.column("domain")))
    domain, _ = decode(pa.array(domain_keys), lambda k: domains.get(k), DEFAULT_DOMAIN)
    start, end = codes_to_numpy(ranges.column("start")), codes_to_numpy(ranges.column("end"))
    depth = nesting_depth(codes_to_numpy(ranges.column("gtid")), start, end)
    n = ranges.num_rows
    return pa.table(
        {
            "start_ns": pc.add(ranges.column("start"), scalar(offset)),
            "end_ns": pc.add(ranges.column("end"), scalar(offset)),
            "pid": pid,
            "tid": tid_of(ranges.column("gtid")),
            "name": names,
            "domain": domain,
            "depth": pa.array(depth, pa.int32()),
            "on_gpu": pa.array(np.zeros(n, bool)),
        }
    )


def _domain_keys(pid: np.ndarray, domain_id: np.ndarray) -> np.ndarray:
    """One int64 key per (process, domain id): NVTX domain ids are per process."""
    keys: np.ndarray = (pid.astype(np.int64) << np.int64(32)) ^ (domain_id.astype(np.int64) & np.int64(0xFFFFFFFF))
    return keys


def _domain_names(db: NsysDb, creates: pa.Table) -> dict[int, str]:
    """(pid, domainId) key -> name, from NvtxDomainCreate rows (text inline or via textId)."""
    if not creates.num_rows:
        return {}
    strings = db.strings()
    keys = _domain_keys(codes_to_numpy(pid_of(creates.column("gtid"))), codes_to_numpy(creates.column("domain")))
    out: dict[int, str] = {}
    for key, text, text_id in zip(
        keys.tolist(), creates.column("text").to_pylist(), creates.column("text_id").to_pylist(), strict=True
    ):
        name = text if text is not None else strings.get(text_id) if text_id is not None else None
        if name:
            out[int(key)] = name
    return out


def _range_names(db: NsysDb, ranges: pa.Table, log: ImportLog) -> pa.Array:
    """Inline text, else textId -> StringIds; ranges with neither are named "<unnamed>"."""
    by_id = decode(ranges.column("text_id"), db.strings().get, "")[0].cast(pa.string())
    empty = pc.equal(by_id, scalar("", "text"))
    names = pc.coalesce(ranges.column("text"), pc.if_else(empty, scalar(None, "text"), by_id))
    log.problem("nsys_unresolved_names", int(pc.sum(pc.is_null(names)).as_py() or 0))
    return pc.fill_null(names, scalar("<unnamed>", "text"))


def read_gpu_metrics(db: NsysDb, offset: int, log: ImportLog, advance: Callable[[int], None]) -> pa.Table:
    """GPU_METRICS samples -> counters; metric names from TARGET_INFO_GPU_METRICS, instance = GPU id."""
    spec = {
        "ts": col("timestamp", "start"),
        "type": col("typeId"),
        "metric": col("metricId"),
        "value": col("value", kind="float"),
    }
    require(db, "GPU_METRICS", spec, ("ts", "metric", "value"))
    t = db.fetch("GPU_METRICS", spec, progress=advance)
    t = keep_rows(t, ("ts", "metric", "value"), log, "GPU_METRICS")
    finite = pc.is_finite(t.column("value"))
    if t.num_rows and not pc.all(finite).as_py():
        kept = t.filter(finite)
        log.count("nsys_rows_dropped", t.num_rows - kept.num_rows)
        log.note(f"GPU_METRICS: {t.num_rows - kept.num_rows} infinite or NaN value(s) dropped")
        t = kept
    names = _metric_names(db)
    keys = codes_to_numpy(t.column("metric"))
    metric, unresolved = decode(pa.array(keys), lambda k: names.get(k), "gpu.nsys.unknown_metric")
    log.problem("nsys_unresolved_names", unresolved)
    gpu = pc.bit_wise_and(pc.fill_null(t.column("type"), scalar(0)), scalar(0xFF)).cast(pa.int32())
    return pa.table(
        {"ts_ns": pc.add(t.column("ts"), scalar(offset)), "metric": metric, "instance": gpu, "value": t.column("value")}
    )


def _metric_names(db: NsysDb) -> dict[int, str]:
    if not db.has("TARGET_INFO_GPU_METRICS"):
        return {}
    t = db.fetch("TARGET_INFO_GPU_METRICS", {"id": col("metricId"), "name": col("metricName", kind="text")})
    return {int(i): metric_name(n) for i, n in pairs(t, "id", "name") if i is not None and n}


def metric_name(nsys_name: str) -> str:
    """ktrace metric for an nsys GPU metric: "GR Active [Throughput %]" -> gpu.util, others gpu.nsys.<slug>."""
    base = re.sub(r"\s*\[.*?\]\s*", " ", nsys_name).strip().lower()
    if base in GPU_METRIC_NAMES:
        return GPU_METRIC_NAMES[base]
    slug = re.sub(r"[^a-z0-9]+", "_", nsys_name.lower().replace("%", " pct ")).strip("_")
    return f"gpu.nsys.{slug or 'metric'}"
