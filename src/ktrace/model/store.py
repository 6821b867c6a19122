"""The on-disk store: NAME.ktrace/ with meta.json and node=<host>/rank=<r>/<table>.parquet partitions.

The capture side (ktrace.model.capture.CaptureWriter) appends Arrow IPC streams; `read()` recovers them and
`finalize()` turns them into Parquet.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from collections.abc import Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from ktrace.model.alignment import with_clock
from ktrace.model.builder import constant_column
from ktrace.model.capture import PARTITION_META_FILE, CaptureWriter, partition_dir, read_stream, stream_schema
from ktrace.model.clock import clock_mode
from ktrace.model.errors import TraceFormatError, TraceNotFoundError
from ktrace.model.layout import META_FILE, is_store, partitions
from ktrace.model.live import LiveStatus, live_status, published
from ktrace.model.outputs import CAPTURE_MARKER, remove_stale_temporaries, write_atomically, writer_pid
from ktrace.model.schema import SCHEMAS, TABLES
from ktrace.model.scrub import mark_scrubbed, rules_fingerprint, scrub_meta, scrub_table
from ktrace.model.secrets import scrub_mapping, scrub_text
from ktrace.model.store_checks import (
    check_columns,
    check_partition_meta,
    check_values,
    checked_meta,
    load_json_object,
    unreadable_parquet,
)
from ktrace.model.store_files import CONSTANT_COLUMNS_KEY, NULL_COLUMNS_KEY, SCRUBBED_KEY, write_files, write_table
from ktrace.model.trace import Trace, TraceMeta, conform, frame_from_columns, frame_schema

__all__ = [
    "CaptureWriter",
    "finalize",
    "is_store",
    "partition_dir",
    "partitions",
    "read",
    "read_stream",
    "stream_schema",
    "write",
    "write_meta",
    "write_partition",
]

"""ASCII digits only (`\\d` took "rank=١" for rank 1)."""
_READ_WORKERS = max(2, min(8, (os.cpu_count() or 2) // 2))
"""Files decoded at once. pyarrow already decodes one file's columns on every core; on 2 cores, 8 files at once
made re-opening 10 M kernels 0.5-0.9 s instead of 0.4-0.6 s."""


def write(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Write `trace` to the folder `path` (NAME.ktrace); existing partitions of the same ranks are replaced."""
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    jobs: list[tuple[pl.DataFrame, str, Path]] = []
    pairs: set[tuple[str, int]] = set()
    for name in TABLES:
        for node, rank, piece in _partition_pieces(trace.table(name)):
            pairs.add((node, rank))
            jobs.append((piece, name, partition_dir(root, node, rank) / f"{name}.parquet"))
    if not pairs:
        pairs.add(((trace.meta.hosts or ("localhost",))[0], 0))
    for node, rank in pairs:
        partition_dir(root, node, rank).mkdir(parents=True, exist_ok=True)
    write_files(jobs, trace.scrubbed, durable=True)
    write_meta(root, trace.meta, {n for n, _ in pairs})
    return root


def write_partition(trace: Trace, folder: Path, *, durable: bool = True) -> None:
    """The Parquet files of `trace`, whose rows are one partition's, written into `folder` (created): the files
    `write` puts under node=<host>/rank=<r>, for a folder renamed there later (a folder import's rank entry,
    with `durable=False`).

    Raises:
        TraceFormatError: the rows are of more than one (node, rank)."""
    pieces = [
        (name, node, rank, piece) for name in TABLES for node, rank, piece in _partition_pieces(trace.table(name))
    ]
    pairs = {(node, rank) for _, node, rank, _ in pieces}
    if len(pairs) > 1:
        raise TraceFormatError(f"one trace holds {len(pairs)} partitions' rows, where one was expected")
    folder.mkdir(parents=True, exist_ok=True)
    write_files([(piece, name, folder / f"{name}.parquet") for name, _, _, piece in pieces], trace.scrubbed, durable)


def write_meta(root: Path, meta: TraceMeta, nodes: Iterable[str] = ()) -> None:
    """Write the store's meta.json (scrubbed; `created` now unless set; hosts: meta's and the partitions' `nodes`).
    Last: a store without it is incomplete (`write`, and the streaming import once every rank is written)."""
    meta, _ = scrub_meta(meta)
    created = meta.created or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    hosts = tuple(sorted(set(nodes) | set(meta.hosts)))
    meta = TraceMeta.from_dict({**json.loads(meta.to_json()), "created": created, "hosts": hosts})
    write_atomically(root / META_FILE, meta.to_json().encode())


def _partition_pieces(frame: pl.DataFrame) -> list[tuple[str, int, pl.DataFrame]]:
    """(node, rank, rows) per partition present in `frame`; one group-by, no per-row work."""
    if frame.height == 0:
        return []
    keys = frame.select("node", "rank").unique()
    if keys.height == 1:
        node, rank = keys.row(0)
        return [(str(node), int(rank), frame)]
    groups = frame.partition_by("node", "rank", as_dict=True, maintain_order=True)
    return [(str(node), int(rank), piece) for (node, rank), piece in groups.items()]


def read(
    path: str | os.PathLike[str],
    *,
    clock: str | None = None,
    only: Collection[tuple[str, int]] | None = None,
    skip: Collection[str] = (),
) -> Trace:
    """Open a .ktrace folder as one Trace (all partitions, or the (node, rank) partitions in `only`: a fleet
    worker opens just its own), recovering un-finalized capture files.

    A multi-host store's timestamps are put on one clock by its meta.json clock_alignment (`clock` "aligned", the
    default, or $KTRACE_CLOCK); "raw" gives them as each host recorded them. One host is never shifted.

    `skip` names tables not to read (they come back empty): `("ops",)` for the reading verbs' --no-ops.

    Raises:
        TraceFormatError: not a store, a store still being written or left incomplete by its writer (no
            meta.json and not a `ktrace run` capture), or anything malformed in it (meta.json, partition.json,
            rank names, columns and their types).
    """
    return _read(path, clock, only, skip)[0]


def read_each(
    path: str | os.PathLike[str],
    only: Collection[tuple[str, int]],
    *,
    clock: str | None = None,
    skip: Collection[str] = (),
) -> tuple[Trace, list[Trace]]:
    """read(path, only=only) and that trace cut into one Trace per partition of `only` present in the store (in
    store.partitions order), each equal to read(path, only={partition}): its rows in order, its meta (meta.json's
    with its own partition.json's health and notes). One read and one clock shift for all of them: a fleet task
    covering several ranks (fleet.summary_map) runs the analyses that need one rank's trace on these."""
    return _read(path, clock, only, skip, each=True)


def _read(
    path: str | os.PathLike[str],
    clock: str | None,
    only: Collection[tuple[str, int]] | None,
    skip: Collection[str],
    *,
    each: bool = False,
) -> tuple[Trace, list[Trace]]:
    root = Path(path)
    mode = clock_mode(clock)
    if not root.exists():
        raise TraceNotFoundError(f"{root}: no such file or directory")
    if not is_store(root):
        raise TraceFormatError(f"{root}: not a .ktrace folder (no meta.json, no node=* partitions)")
    live = live_status(root)
    if live is None:
        return _read_parts(root, mode, only, skip, each, None)
    try:
        read = _read_parts(root, mode, only, skip, each, live)
    except (TraceFormatError, OSError):
        if not (root / META_FILE).exists():
            raise
        read = None
    if (root / META_FILE).exists():  # `ktrace run` finalized it while this read: read the finished store
        return _read_parts(root, mode, only, skip, each, None)
    assert read is not None
    return read


def _read_parts(
    root: Path,
    mode: str,
    only: Collection[tuple[str, int]] | None,
    skip: Collection[str],
    each: bool,
    live: LiveStatus | None,
) -> tuple[Trace, list[Trace]]:
    """_read's work; `live` for a capture still recording: each stream up to what its process published (complete
    batches only), and none of the marks of an unfinished capture (recovered tables, processes not closed)."""
    store_meta = TraceMeta(notes=(live.note,)) if live is not None else _read_meta(root)
    parts = [p for p in partitions(root) if only is None or (p[0], p[1]) in only]
    limits = {folder: _published_bytes(folder) for _, _, folder in parts} if live is not None else {}
    pieces: dict[str, list[pl.DataFrame]] = {name: [] for name in TABLES}
    recovered: dict[tuple[str, int], list[str]] = {(node, rank): [] for node, rank, _ in parts}

    def load(job: tuple[str, int, Path, str]) -> tuple[str, pl.DataFrame | None, bool]:
        node, rank, folder, name = job
        table, constants, was_recovered = _read_partition_table(folder, name, limits.get(folder))
        if table is None:
            return name, None, False
        table = _scrubbed(
            table.drop_columns([c for c in ("node", "rank") if c in table.column_names]), trusted=not was_recovered
        )
        constants = {**scrub_mapping(constants)[0], "node": node, "rank": rank}
        return name, _frame(table, name, constants, folder), was_recovered

    jobs = [(node, rank, folder, name) for node, rank, folder in parts for name in TABLES if name not in skip]
    with ThreadPoolExecutor(max_workers=min(_READ_WORKERS, max(1, len(jobs)))) as pool:
        for (node, rank, _, name), (_, table, was_recovered) in zip(jobs, pool.map(load, jobs), strict=True):
            if table is not None:
                pieces[name].append(table)
            if was_recovered:
                recovered[(node, rank)].append(f"node={node}/rank={rank}/{name}")
    if live is not None:
        recovered = {part: [] for part in recovered}
    meta = store_meta
    for _, _, folder in parts:
        meta = _merge_partition_meta(meta, folder, live is not None)
    meta = _with_recovered(meta, [t for found in recovered.values() for t in found])
    frames = {name: _concat_frames(p, name) for name, p in pieces.items()}
    # the Parquet decode's freed buffers stay in Arrow's pool (~95 MB at 20 M events); the analyses allocate
    # elsewhere (polars, numpy), so hand them back to the OS
    pa.default_memory_pool().release_unused()
    # every table is scrubbed now (here, or when written under today's rules); meta always (partition notes)
    whole = with_clock(mark_scrubbed(Trace(**frames, meta=scrub_meta(meta)[0])), mode)
    return whole, _cut(whole, parts, store_meta, recovered, live is not None) if each else []


def _cut(
    whole: Trace,
    parts: list[tuple[str, int, Path]],
    store_meta: TraceMeta,
    recovered: dict[tuple[str, int], list[str]],
    live: bool,
) -> list[Trace]:
    """read_each's traces: `whole`'s rows of each partition, each with its own meta."""
    cut = {name: {(n, r): f for n, r, f in _partition_pieces(whole.table(name))} for name in TABLES}
    clean = scrub_meta(store_meta)[0]  # once: a job's meta lists every rank's file (~9 ms to scrub at 256 ranks)
    slices = []
    for node, rank, folder in parts:
        own = _with_recovered(_merge_partition_meta(clean, folder, live), recovered[(node, rank)])
        own = dataclasses.replace(  # the partition's notes scrubbed as scrub_meta would; with_clock's alignment
            own, notes=tuple(scrub_text(n)[0] for n in own.notes), clock_alignment=whole.meta.clock_alignment
        )
        tables = {name: cut[name].get((node, rank), whole.table(name).clear()) for name in TABLES}
        slices.append(mark_scrubbed(Trace(**tables, meta=own)))
    return slices


def _with_recovered(meta: TraceMeta, recovered: list[str]) -> TraceMeta:
    """`meta` with the health count and note of the un-finalized capture tables read."""
    if not recovered:
        return meta
    return meta.with_health(
        {"recovered_tables": len(recovered)},
        (
            f"recovered {len(recovered)} un-finalized capture table(s) "
            f"(the process did not finish writing): {', '.join(recovered[:5])}"
            + (" ..." if len(recovered) > 5 else ""),
        ),
    )


def _scrubbed(table: pa.Table, trusted: bool) -> pa.Table:
    """`table` scrubbed, unless it is a `trusted` Parquet file marked as scrubbed under the current rules (capture
    streams, files of older stores and of other rules are scrubbed here)."""
    fingerprint = rules_fingerprint()
    if trusted and fingerprint is not None and (table.schema.metadata or {}).get(SCRUBBED_KEY) == fingerprint.encode():
        return table
    return scrub_table(table)[0]


def _frame(table: pa.Table, name: str, constants: dict[str, object], folder: Path) -> pl.DataFrame:
    try:
        return frame_from_columns(table, name, constants)
    except (ValueError, TypeError, OverflowError, pa.ArrowException, pl.exceptions.PolarsError) as exc:
        raise TraceFormatError(f"{folder / name}: table does not fit schema v1 ({exc})") from None


def _concat_frames(parts: list[pl.DataFrame], name: str) -> pl.DataFrame:
    parts = [p for p in parts if p.height]
    if not parts:
        return pl.DataFrame(schema=frame_schema(name))
    # No rechunk: analyses take chunked columns as they are, and copying 10 M rows costs ~0.2 s.
    return parts[0] if len(parts) == 1 else pl.concat(parts, how="vertical", rechunk=False)


def _read_meta(root: Path) -> TraceMeta:
    meta_path = root / META_FILE
    if not meta_path.exists() and not meta_path.is_symlink():
        pid = writer_pid(root)
        if pid is not None:
            raise TraceFormatError(
                f"{root}: is being written by ktrace{f' (pid {pid})' if pid else ''}; open it once that finishes"
            )
        if (root / CAPTURE_MARKER).exists():
            return TraceMeta(notes=("meta.json missing: the capture did not finish",))
        raise TraceFormatError(
            f"{root}: incomplete .ktrace store (no meta.json: its writer was interrupted); import or record it again"
        )
    return checked_meta(meta_path)


def _merge_partition_meta(meta: TraceMeta, folder: Path, live: bool = False) -> TraceMeta:
    """`meta` with a partition.json's health and notes (`live`: without "processes_not_closed", which every
    process still recording says until it closes)."""
    path = folder / PARTITION_META_FILE
    if not path.exists():
        return meta
    part = load_json_object(path, PARTITION_META_FILE)
    check_partition_meta(part, path)
    health = {k: v for k, v in dict(part.get("health", {})).items() if not (live and k == "processes_not_closed")}
    return meta.with_health(health, tuple(part.get("notes", ())))


def _published_bytes(folder: Path) -> dict[str, int]:
    """Stream name -> bytes a live capture's process has published ({} before its first publish), read once per
    partition so that its tables are read as of one publish."""
    done = published(folder)
    return dict(done.stream_bytes) if done is not None else {}


def _read_partition_table(
    folder: Path, name: str, limits: Mapping[str, int] | None = None
) -> tuple[pa.Table | None, dict[str, object], bool]:
    """(table, constant columns, recovered) of one partition's table; (None, {}, False) if it has none. `limits`
    (a live capture's published bytes): a capture stream is read only that far (not at all when not named)."""
    parquet = folder / f"{name}.parquet"
    stream = folder / f"{name}.arrows"
    if parquet.exists():
        with unreadable_parquet(parquet):
            # ParquetFile.read, not read_table: no dataset layer, one chunk per row group (not per page), and
            # 25 % less decode CPU at 10 M kernels.
            schema = pq.read_schema(parquet)
            check_columns(schema, name, parquet)
            skipped, constants = _skipped_columns(schema)
            columns = [c for c in schema.names if c not in skipped]
            strings = [c for c in _dictionary_columns(name) if c in columns]
            table = pq.ParquetFile(parquet, read_dictionary=strings).read(columns=columns, use_threads=True)
            check_values(table, name, parquet)
            if not table.num_rows:
                constants = {}
            return table, constants, False
    if stream.exists():
        table = read_stream(stream, None if limits is None else limits.get(name, 0))
        check_columns(table.schema, name, stream)
        check_values(table, name, stream)
        return table, {}, True
    return None, {}, False


def _skipped_columns(schema: pa.Schema) -> tuple[set[str], dict[str, object]]:
    """Columns the writer recorded as all-null or constant, which are not decoded (~12 ms per 5 M-row column
    plus the memory it fills), and the constants' values. Scalar columns fill them in memory at no cost."""
    meta = schema.metadata or {}
    try:
        nulls = set(json.loads(meta.get(NULL_COLUMNS_KEY, b"[]")))
        constants = dict(json.loads(meta.get(CONSTANT_COLUMNS_KEY, b"{}")))
    except (ValueError, TypeError):
        return set(), {}
    constants = {c: v for c, v in constants.items() if c in schema.names and isinstance(v, (int, str))}
    decoded = [c for c in schema.names if c not in nulls and c not in constants]
    if not decoded:  # one decoded column carries the row count
        decoded = [c for c in schema.names if c in constants][:1] or schema.names[:1]
        constants.pop(decoded[0], None)
    return set(schema.names) - set(decoded), constants


def _dictionary_columns(name: str) -> list[str]:
    return [f.name for f in SCHEMAS[name] if pa.types.is_dictionary(f.type)]


def finalize(root: str | os.PathLike[str]) -> list[Path]:
    """Convert every `*.arrows` capture stream under `root` to Parquet and remove the stream."""
    done = []
    for _, _, folder in partitions(Path(root)):
        for stream in sorted(folder.glob("*.arrows")):
            name = stream.name.removesuffix(".arrows")
            if name not in SCHEMAS:
                continue
            target = folder / f"{name}.parquet"
            remove_stale_temporaries(target)  # a finalize killed before its rename; the caller holds the store
            table = read_stream(stream)
            table = conform(
                table.append_column("node", constant_column("x", table.num_rows, pa.string())).append_column(
                    "rank", pa.repeat(pa.scalar(0, pa.int32()), table.num_rows)
                ),
                name,
            )
            write_table(table, target)  # whole, or the stream stays to be read (or finalized)
            stream.unlink()
            done.append(folder / f"{name}.parquet")
    return done
