"""What a Kineto file says of itself: its header's job description, place in the job (rank, node), base time,
and its health counts and notes, for the trace's meta (kineto.py builds the trace in memory, kineto_streaming.py
writes it to a store as it reads)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ktrace.importers.kineto_decode_report import DecodeReport
from ktrace.importers.kineto_events import EventSink, to_int
from ktrace.importers.kineto_stream import StreamStatus
from ktrace.importers.kineto_tables import TimeFixer
from ktrace.model.secrets import scrub_mapping, scrub_text
from ktrace.model.trace import TraceMeta

MAX_BASE_NS = 4 * 10**18
"""A baseTimeNanoseconds past 2096 is damage (and would overflow int64 ns once ts is added)."""
_RANK_IN_NAME = re.compile(r"(?:worker|rank)[_\-.]?(\d+)", re.IGNORECASE)
_RECORD_COUNTS = re.compile(r"([A-Za-z][A-Za-z \-]*?\??)\s*=\s*(\d+)")
_KINETO_KEYS = (
    "schemaVersion",
    "displayTimeUnit",
    "baseTimeNanoseconds",
    "cupti_version",
    "cuda_runtime_version",
    "cuda_driver_version",
    "record_shapes",
    "profile_memory",
    "with_stack",
    "with_flops",
    "with_modules",
    "trace_id",
)
_BULKY_KEYS = ("traceEvents", "deviceProperties", "INFO")


@dataclass
class RankFile:
    """What one rank file says of its place in the job: its rank (and where that came from), the world size, and
    the job description kept in meta (secrets scrubbed)."""

    rank: int
    rank_from: str
    world_size: int | None
    job: dict[str, Any] = field(default_factory=dict)


@dataclass
class FileRead:
    """What reading a Kineto file's events left: its header, the sink holding its events' columns, and what the
    read found out (drops, damage, whether it stopped at the tables' cap)."""

    path: Path
    header: dict[str, Any]
    sink: EventSink
    report: DecodeReport
    status: StreamStatus
    stopped: bool


def base_time(read: FileRead) -> int:
    """The file's baseTimeNanoseconds (0 where it has none or an implausible one, noted)."""
    raw_base = read.header.get("baseTimeNanoseconds")
    base = to_int(raw_base) or 0
    if raw_base is not None and not (0 <= base < MAX_BASE_NS and base == raw_base):
        read.report.notes.append(f"baseTimeNanoseconds {str(raw_base)[:40]} is not a plausible epoch time: ignored")
        base = 0
    return base


def place_of(read: FileRead) -> tuple[RankFile, str]:
    """The file's place in the job and its node."""
    return _rank_of(read.path, read.header), _node_of(read.header)


def file_meta(
    read: FileRead, info: RankFile, node: str, fix: TimeFixer, no_stream: int | None, joins: dict[str, int], base: int
) -> TraceMeta:
    """The file's meta (not yet scrubbed): its job (set on `info` too), health (`joins`: kineto_tables.join_health
    of its tables) and notes."""
    header, report, status = read.header, read.report, read.status
    job, scrubbed = _job_of(read.path, header)
    job["rank_from"] = info.rank_from
    if no_stream is not None:
        job["kineto_no_stream"] = no_stream  # the file's stream of a sync on no stream, for the Kineto export
    info.job = job
    health, notes = _health(header, joins, report, status, fix)
    health["secrets_scrubbed"] = scrubbed
    if (status.truncated or report.truncated or read.stopped) and not base and "baseTimeNanoseconds" not in header:
        notes.append("baseTimeNanoseconds may have been lost with the end of the file: times may be relative")
    return TraceMeta(
        source="kineto", job=job, hosts=(node,), health=health, notes=tuple(f"{read.path.name}: {n}" for n in notes)
    )


def _rank_of(path: Path, header: dict[str, Any]) -> RankFile:
    dist = header.get("distributedInfo")
    dist = dist if isinstance(dist, dict) else {}
    world = to_int(dist.get("world_size"))
    rank = to_int(dist.get("rank"))
    if rank is not None and 0 <= rank < 2**31:
        return RankFile(rank, "distributedInfo", world)
    m = _RANK_IN_NAME.search(path.name)
    if m and len(m.group(1)) < 9:
        return RankFile(int(m.group(1)), "file name", world)
    return RankFile(0, "default", world)


def _node_of(header: dict[str, Any]) -> str:
    for key in ("hostname", "host", "node"):
        if isinstance(header.get(key), str) and header[key]:
            return str(header[key])
    meta = header.get("metadata")
    if isinstance(meta, dict):
        system = meta.get("system")
        uname = system.get("uname") if isinstance(system, dict) else None
        for cand in (meta.get("hostname"), uname.get("node") if isinstance(uname, dict) else None):
            if isinstance(cand, str) and cand:
                return cand
    return "localhost"


def _job_of(path: Path, header: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The job description kept in meta (secrets scrubbed), and how many values were scrubbed."""
    keep = {k: v for k, v in header.items() if k not in _BULKY_KEYS}
    clean, scrubbed = scrub_mapping(keep)
    for line in header.get("INFO", []) if isinstance(header.get("INFO"), list) else []:
        scrubbed += scrub_text(line)[1] if isinstance(line, str) else 0
    job: dict[str, Any] = {"files": [path.name], "kineto": {k: clean.pop(k) for k in _KINETO_KEYS if k in clean}}
    dist = clean.pop("distributedInfo", None)
    if isinstance(dist, dict):
        job["distributedInfo"] = dist
        if to_int(dist.get("world_size")):
            job["world_size"] = to_int(dist.get("world_size"))
    for key in ("traceName", "metadata"):
        if key in clean:
            job[key] = clean.pop(key)
    if clean:
        job["other"] = clean
    return job, scrubbed


def _record_counts(header: dict[str, Any]) -> dict[str, int]:
    """Kineto's `Record counts:` INFO line(s) -> health counts (kineto_out_of_range, ...)."""
    counts: dict[str, int] = {}
    lines = header.get("INFO")
    for line in lines if isinstance(lines, list) else []:
        if not isinstance(line, str) or "Record counts:" not in line:
            continue
        for name, value in _RECORD_COUNTS.findall(line.split("Record counts:", 1)[1]):
            key = "kineto_" + re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
            counts[key] = counts.get(key, 0) + int(value)
    return counts


def _health(
    header: dict[str, Any], joins: dict[str, int], report: DecodeReport, status: StreamStatus, fix: TimeFixer
) -> tuple[dict[str, int], list[str]]:
    health = dict(joins)
    health.update(_record_counts(header))
    health["dropped_events"] = report.dropped_events + fix.bad_time
    health["repaired_events"] = report.repaired_events
    health["truncated_input"] = int(bool(status.truncated))
    notes = list(report.notes)
    if status.truncated:
        notes.append(f"{status.truncated}: imported the events before the damage")
    if report.dropped_events:
        notes.append(f"{report.dropped_events:,} unreadable event(s) dropped")
    if fix.bad_time:
        notes.append(f"{fix.bad_time:,} event(s) with impossible times dropped (negative, >7 days or overflow)")
    if report.repaired_events:
        notes.append(f"{report.repaired_events:,} event(s) had wrongly typed fields; coerced")
    if health["kernels_without_launch"]:
        notes.append(f"{health['kernels_without_launch']:,} kernel(s) have no launch call in the trace (kept)")
    return health, notes
