"""Import PyTorch-profiler (Kineto) JSON traces (.json, .json.gz, or a folder of per-rank files) as a Trace.

Every format era is read: PyTorch 1.9 (capitalised categories, "stream 7" tids, absolute µs), 2022-23
(snake_case categories, integer epoch µs, or epoch µs with a ns fraction, which float64 cannot hold and is
read from its text: kineto_events.ts_columns) and 2024+ (float µs relative to `baseTimeNanoseconds`). Times
become exact int64 ns since the epoch. Launches join GPU work by `args.correlation` (never by flow
events); CUDA-graph fan-out and orphans are kept and counted in `meta.health`. Secret-looking metadata
values are scrubbed. See shared/reference/formats.md §1 for the format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from ktrace.importers.kineto_combine import LeanBuilder, release_memory
from ktrace.importers.kineto_decode import EventSplitter
from ktrace.importers.kineto_decode_report import DecodeReport
from ktrace.importers.kineto_events import EventSink, to_int
from ktrace.importers.kineto_limits import TablesFull, tables_full_note
from ktrace.importers.kineto_schema import EventSlice
from ktrace.importers.kineto_stream import StreamStatus, byte_blocks, is_gzip, kineto_files
from ktrace.importers.kineto_tables import (
    TimeFixer,
    add_allocations,
    add_cpu_tables,
    add_dimension_tables,
    add_gpu_tables,
    join_health,
)
from ktrace.importers.kineto_workers import read_in_workers, start_workers, worker_count
from ktrace.model.builder import TraceBuilder, merge_traces
from ktrace.model.clock_estimate import align_hosts
from ktrace.model.errors import ProgressFn, TraceFormatError, no_progress
from ktrace.model.scrub import scrub_trace
from ktrace.model.secrets import scrub_mapping, scrub_text
from ktrace.model.trace import Trace, TraceMeta

MAX_BASE_NS = 4 * 10**18
"""A baseTimeNanoseconds past 2096 is damage (and would overflow int64 ns once ts is added)."""
SCHEMA_VERSIONS = (0, 1)
"""Kineto `schemaVersion` values this importer understands."""
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


def import_kineto(path: Path, *, progress: ProgressFn = no_progress, with_ops: bool = True) -> Trace:
    """Import a Kineto trace file, or a folder of per-rank files, as one Trace.

    Args:
        path: a .json / .json.gz trace, or a folder holding one such file per rank.
        progress: called with (bytes read, total bytes) while reading.
        with_ops: import `cpu_op` events (framework operators) into the ops table (on by default; False is
            the lean path, which decodes them as empty structs and only counts them).

    Returns:
        The trace, with meta.source "kineto" and join/drop/scrub counts in meta.health.

    Raises:
        TraceFormatError: the input is not a readable Kineto trace (one line, exit code 3).
    """
    path = Path(path)
    if path.is_dir():
        return scrub_trace(_import_folder(path, progress, with_ops))
    trace, _ = _import_file(path, progress, with_ops, 0, 0)
    release_memory()
    return scrub_trace(trace)


@dataclass
class RankFile:
    """What one rank file says of its place in the job: its rank (and where that came from), the world size, and
    the job description kept in meta (secrets scrubbed)."""

    rank: int
    rank_from: str
    world_size: int | None
    job: dict[str, Any] = field(default_factory=dict)


def _import_folder(folder: Path, progress: ProgressFn, with_ops: bool) -> Trace:
    files = kineto_files(folder)
    if not files:
        raise TraceFormatError(f"{folder}: no Kineto trace (.json or .json.gz) in this folder")
    grand = sum(p.stat().st_size for p in files)
    done = 0
    results: list[tuple[Trace, RankFile]] = []
    skipped: list[str] = []
    for p in files:
        try:
            results.append(_import_file(p, progress, with_ops, done, grand))
            release_memory()
        except TraceFormatError as exc:
            if len(files) == 1:
                raise
            skipped.append(skip_reason(p.name, str(exc)))
        done += p.stat().st_size
    if not results:
        raise TraceFormatError(f"{folder}: no readable Kineto trace ({skipped[0]})")
    ranks, notes = assign_ranks([r.rank for _, r in results], skipped)
    traces = [t if t_rank == r.rank else _rerank(t, t_rank) for (t, r), t_rank in zip(results, ranks, strict=True)]
    meta = folder_meta(folder, [t.meta for t in traces], [r for _, r in results], ranks, notes)
    return align_hosts(merge_traces(traces, meta))  # ranks from 2+ hosts: one clock


def skip_reason(name: str, why: str) -> str:
    """ "file: why" for a folder's note, without naming the file twice (most errors already start with it)."""
    return why if why.startswith(f"{name}:") else f"{name}: {why}"


def assign_ranks(ranks: list[int], skipped: list[str]) -> tuple[list[int], list[str]]:
    """The rank of each imported file of a folder (file-name order when the files' own ranks collide) and the
    folder's notes (the files `skipped`, "file: why", and the collision)."""
    notes = [f"skipped {s}" for s in skipped]
    if len(set(ranks)) != len(ranks):
        notes.append("rank ids collide across files; ranks assigned in file-name order")
        ranks = list(range(len(ranks)))
    return ranks, notes


def import_rank_file(path: Path, *, with_ops: bool = True) -> tuple[Trace, RankFile]:
    """One rank file of a folder, NOT yet scrubbed (the caller scrubs: `import_kineto` scrubs the merged trace,
    the streaming import each rank's tables), and its place in the job.

    Raises:
        TraceFormatError: the file is not a readable Kineto trace (a folder import skips it)."""
    return _import_file(path, no_progress, with_ops, 0, 0, parallel=False)


def _rerank(trace: Trace, rank: int) -> Trace:
    frames = {name: trace.table(name).with_columns(rank=pl.lit(rank, pl.Int32)) for name in trace.counts()}
    return Trace(**frames, meta=trace.meta)


def folder_meta(
    folder: Path, metas: list[TraceMeta], infos: list[RankFile], ranks: list[int], notes: list[str]
) -> TraceMeta:
    """The meta of a folder's trace from its files' metas and places (in file order) and the folder's notes."""
    meta = TraceMeta(source="kineto")
    for m in metas:
        meta = meta.with_health(m.health, m.notes)
    world = next((i.world_size for i in infos if i.world_size), None)
    job = {
        "files": [f for i in infos for f in i.job.get("files", [])],
        "ranks": {str(r): i.job.get("files", [""])[0] for r, i in zip(ranks, infos, strict=True)},
        "world_size": world or len(ranks),
        "folder": folder.name,
        **{k: v for k, v in infos[0].job.items() if k not in ("files", "world_size")},
    }
    hosts = tuple(sorted({h for m in metas for h in m.hosts}))
    return TraceMeta(source="kineto", job=job, hosts=hosts, health=meta.health, notes=meta.notes + tuple(notes))


def _workers_for(path: Path) -> int:
    """Decode workers for this file (kineto_workers); 0 if it cannot be read (byte_blocks then says why)."""
    try:
        return worker_count(path.stat().st_size, is_gzip(path))
    except OSError:
        return 0


def _import_file(
    path: Path, progress: ProgressFn, with_ops: bool, done_before: int, grand_total: int, parallel: bool = True
) -> tuple[Trace, RankFile]:
    report = DecodeReport()
    status = StreamStatus()
    sink = EventSink(with_ops=with_ops, report=report)
    stopped = False
    count = _workers_for(path) if parallel else 0
    workers = start_workers(count, with_ops) if count else None
    splitter = EventSplitter(report, with_ops=with_ops, defer=workers is not None)
    try:
        pieces = splitter.run(byte_blocks(path, status, progress, done_before, grand_total))
        if workers is not None:
            read_in_workers(splitter, pieces, sink, workers)
        else:
            for events in pieces:
                assert isinstance(events, EventSlice)  # (a splitter that does not defer decodes every slice)
                sink.add(events)
    except TablesFull as full:
        del pieces  # (the generator is closed: its gunzip thread stops now)
        report.notes.append(tables_full_note(report.events, full.cap))
        report.header = splitter.header_so_far()
        stopped = True
    except TraceFormatError as exc:
        if status.truncated:
            raise TraceFormatError(
                f"{path.name}: {status.truncated}: nothing readable before the damage "
                f"({str(exc).removeprefix(str(path) + ': ')})"
            ) from None
        raise TraceFormatError(f"{path.name}: {exc}") from None
    except MemoryError:
        raise TraceFormatError(f"{path.name}: out of memory while decoding") from None
    header = report.header
    _check_is_kineto(path, header, sink, report, status)
    try:
        return _build(path, header, sink, report, status, stopped)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        # A value the decoder let through but Arrow cannot hold (seen once in ~1,000 fuzz runs): one line, exit 3.
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TraceFormatError(f"{path.name}: a value has the wrong type or is out of range ({detail})") from None


def _check_is_kineto(
    path: Path, header: dict[str, Any], sink: EventSink, report: DecodeReport, status: StreamStatus
) -> None:
    version = header.get("schemaVersion")
    if version is not None and (type(version) is not int or version not in SCHEMA_VERSIONS):
        raise TraceFormatError(
            f"{path.name}: unknown Kineto schemaVersion {version!r} "
            f"(ktrace reads {', '.join(map(str, SCHEMA_VERSIONS))})"
        )
    kineto_like = (
        version is not None or "deviceProperties" in header or sink.categories or sink.known_other or sink.skipped_ops
    )
    if not kineto_like and (status.truncated or report.truncated):
        raise TraceFormatError(
            f"{path.name}: truncated: no readable Kineto event before the end "
            f"({status.truncated or 'the text ends inside traceEvents'})"
        )
    if not kineto_like and report.dropped_events:
        raise TraceFormatError(
            f"{path.name}: not a Kineto trace: no readable Kineto event ({report.dropped_events:,} unreadable)"
        )
    if not kineto_like:
        what = f"{report.events:,} events" if report.events else "no events"
        raise TraceFormatError(
            f"{path.name}: a Chrome-style trace ({what}) but not a PyTorch profiler "
            "(Kineto) one: no schemaVersion and no Kineto categories"
        )


def _build(
    path: Path, header: dict[str, Any], sink: EventSink, report: DecodeReport, status: StreamStatus, stopped: bool
) -> tuple[Trace, RankFile]:
    raw_base = header.get("baseTimeNanoseconds")
    base = to_int(raw_base) or 0
    if raw_base is not None and not (0 <= base < MAX_BASE_NS and base == raw_base):
        report.notes.append(f"baseTimeNanoseconds {str(raw_base)[:40]} is not a plausible epoch time: ignored")
        base = 0
    info = _rank_of(path, header)
    node = _node_of(header)
    builder = LeanBuilder(node, info.rank)
    fix = TimeFixer(base)
    no_stream = add_gpu_tables(builder, sink, fix)
    add_cpu_tables(builder, sink, fix)
    add_allocations(builder, sink, fix)
    trace = builder.build()
    release_memory()  # (what building the tables freed: the µs columns, the slices; ~0.3 GB at 20 M kernels)
    used = set(trace.kernels["device"].unique().to_list()) | set(trace.memory["device"].unique().to_list())
    dims = TraceBuilder(node=node, rank=info.rank)
    add_dimension_tables(dims, sink, header, {int(d) for d in used if d is not None})
    dim_trace = dims.build()
    trace = Trace(
        **{
            **{n: _null_columns_as_scalars(trace.table(n)) for n in trace.counts()},
            "threads": dim_trace.threads,
            "devices": dim_trace.devices,
        },
        meta=trace.meta,
    )
    job, scrubbed = _job_of(path, header)
    job["rank_from"] = info.rank_from
    if no_stream is not None:
        job["kineto_no_stream"] = no_stream  # the file's stream of a sync on no stream, for the Kineto export
    info.job = job
    health, notes = _health(header, trace, report, status, fix)
    health["secrets_scrubbed"] = scrubbed
    if (status.truncated or report.truncated or stopped) and not base and "baseTimeNanoseconds" not in header:
        notes.append("baseTimeNanoseconds may have been lost with the end of the file: times may be relative")
    meta = TraceMeta(
        source="kineto", job=job, hosts=(node,), health=health, notes=tuple(f"{path.name}: {n}" for n in notes)
    )
    return trace.with_meta(meta), info


def _null_columns_as_scalars(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with its columns of nothing but nulls as polars scalar columns, which take no memory (as a store's
    partitions are opened: model.trace.frame_from_columns). Most of a kernel row's columns are null in most traces
    (queued_ns, collective, ...; all but 9 of 28 on the worst input of issue 27 section 3)."""
    empty = [c for c in frame.columns if frame.height and frame[c].null_count() == frame.height]
    return frame.with_columns(pl.lit(None, frame.schema[c]).alias(c) for c in empty) if empty else frame


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
    header: dict[str, Any], trace: Trace, report: DecodeReport, status: StreamStatus, fix: TimeFixer
) -> tuple[dict[str, int], list[str]]:
    health = join_health(trace.kernels, trace.memory, trace.syncs, trace.api)
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
