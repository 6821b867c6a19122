"""Import PyTorch-profiler (Kineto) JSON traces (.json, .json.gz, or a folder of per-rank files) as a Trace.

Every format era is read: PyTorch 1.9 (capitalised categories, "stream 7" tids, absolute µs), 2022-23
(snake_case categories, integer epoch µs, or epoch µs with a ns fraction, which float64 cannot hold and is
read from its text: kineto_times.ts_columns) and 2024+ (float µs relative to `baseTimeNanoseconds`). Times
become exact int64 ns since the epoch. Launches join GPU work by `args.correlation` (never by flow
events); CUDA-graph fan-out and orphans are kept and counted in `meta.health`. Secret-looking metadata
values are scrubbed. See shared/reference/formats.md §1 for the format.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import polars as pl
import pyarrow as pa

from ktrace.importers.kineto_combine import LeanBuilder, release_memory
from ktrace.importers.kineto_decode import EventSplitter
from ktrace.importers.kineto_decode_report import DecodeReport
from ktrace.importers.kineto_events import EventSink
from ktrace.importers.kineto_file_meta import FileRead, RankFile, base_time, file_meta, place_of
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
from ktrace.model.errors import ProgressFn, TraceFormatError, no_progress
from ktrace.model.scrub import scrub_trace
from ktrace.model.trace import Trace, TraceMeta

SCHEMA_VERSIONS = (0, 1)
"""Kineto `schemaVersion` values this importer understands."""


def import_kineto(
    path: Path, *, progress: ProgressFn = no_progress, with_ops: bool = True, files: list[Path] | None = None
) -> Trace:
    """Import a Kineto trace file, or a folder of per-rank files, as one Trace.

    Args:
        path: a .json / .json.gz trace, or a folder holding one such file per rank.
        progress: called with (bytes read, total bytes) while reading.
        with_ops: import `cpu_op` events (framework operators) into the ops table (on by default; False is
            the lean path, which decodes them as empty structs and only counts them).
        files: a folder's rank files as `kineto_stream.kineto_files` listed them already (`importers.load` found
            them while telling the folder's format): not opened again to list them.

    Returns:
        The trace, with meta.source "kineto" and join/drop/scrub counts in meta.health.

    Raises:
        TraceFormatError: the input is not a readable Kineto trace (one line, exit code 3).
    """
    path = Path(path)
    if path.is_dir():
        return scrub_trace(_import_folder(path, progress, with_ops, kineto_files(path) if files is None else files))
    trace, _ = _import_file(path, progress, with_ops, 0, 0)
    release_memory()
    return scrub_trace(trace)


def _import_folder(folder: Path, progress: ProgressFn, with_ops: bool, files: list[Path]) -> Trace:
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
    from ktrace.model.clock_estimate import align_hosts  # (a folder's only: one file never imports it)

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
    read = read_file(path, EventSink(with_ops=with_ops), progress, done_before, grand_total, parallel)
    return arrow_errors(path, lambda: build_trace(read))


def read_file(
    path: Path,
    sink: EventSink,
    progress: ProgressFn = no_progress,
    done_before: int = 0,
    grand_total: int = 0,
    parallel: bool = True,
) -> FileRead:
    """Read every event of `path` into `sink` (in decode workers where the file is big enough and `parallel`),
    and check that it is a Kineto trace.

    Raises:
        TraceFormatError: the file is not a readable Kineto trace (one line, exit code 3)."""
    report = sink.report
    with_ops = sink.with_ops
    status = StreamStatus()
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
    _check_is_kineto(path, report.header, sink, report, status)
    return FileRead(path, report.header, sink, report, status, stopped)


_T = TypeVar("_T")


def arrow_errors(path: Path, build: Callable[[], _T]) -> _T:
    """`build()`, a value the decoder let through but Arrow cannot hold (seen once in ~1,000 fuzz runs) raised as
    one line, exit 3."""
    try:
        return build()
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
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


def dimension_trace(read: FileRead, node: str, rank: int, used_devices: set[int]) -> Trace:
    """A trace holding only the file's threads and devices tables (the `used_devices` of its GPU rows)."""
    dims = TraceBuilder(node=node, rank=rank)
    add_dimension_tables(dims, read.sink, read.header, used_devices)
    return dims.build()


def build_trace(read: FileRead) -> tuple[Trace, RankFile]:
    """The trace of a file read (not yet scrubbed), built in memory, and its place in the job."""
    base = base_time(read)
    info, node = place_of(read)
    builder = LeanBuilder(node, info.rank)
    fix = TimeFixer(base)
    no_stream = add_gpu_tables(builder, read.sink, fix)
    add_cpu_tables(builder, read.sink, fix)
    add_allocations(builder, read.sink, fix)
    trace = builder.build()
    release_memory()  # (what building the tables freed: the µs columns, the slices; ~0.3 GB at 20 M kernels)
    used = set(trace.kernels["device"].unique().to_list()) | set(trace.memory["device"].unique().to_list())
    dim_trace = dimension_trace(read, node, info.rank, {int(d) for d in used if d is not None})
    trace = Trace(
        **{
            **{n: _null_columns_as_scalars(trace.table(n)) for n in trace.counts()},
            "threads": dim_trace.threads,
            "devices": dim_trace.devices,
        },
        meta=trace.meta,
    )
    joins = join_health(trace.kernels, trace.memory, trace.syncs, trace.api)
    meta = file_meta(read, info, node, fix, no_stream, joins, base)
    return trace.with_meta(meta), info


def _null_columns_as_scalars(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with its columns of nothing but nulls as polars scalar columns, which take no memory (as a store's
    partitions are opened: model.trace.frame_from_columns). Most of a kernel row's columns are null in most traces
    (queued_ns, collective, ...; all but 9 of 28 on the worst input of issue 27 section 3)."""
    empty = [c for c in frame.columns if frame.height and frame[c].null_count() == frame.height]
    return frame.with_columns(pl.lit(None, frame.schema[c]).alias(c) for c in empty) if empty else frame
