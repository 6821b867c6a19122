"""`ktrace import FILE -o OUT.ktrace` of one Kineto file in bounded memory: tables written as the file is read.

The events' columns are built and written every FLUSH_BYTES of them (EventSink's tables): each kind's rows go, in
the schema of their table, to an Arrow IPC stream of their own in the staging folder, with times counted from 0,
because `baseTimeNanoseconds` (and the node and rank) usually follow `traceEvents`. Once the file is read, each
table is written from its kinds' streams in the order the in-memory import gives (memcpy rows before memset rows,
...), times shifted by the base, strings scrubbed (store_append.TableAppender), row group by row group. What needs
the whole table is computed on compact columns: the launch joins (correlation ids: kineto_joins), the devices used;
the CPU and GPU annotations (a few per step) are kept in memory for their nesting depth.

A file whose tables stay under FLUSH_BYTES never flushes: it is built in memory and written by `store.write`, as
before (no cost for small files). Either way the store is the one `store.write(import_kineto(FILE))` writes, but
for KTRACE_MAX_TABLE_BYTES, which caps the tables held in memory, here those not yet written: a file of any size
is read to its end (its text is still capped: KTRACE_MAX_INFLATE_RATIO), where the in-memory import stops at 2 GiB
of columns (~40 M events), with a note.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from ktrace.importers.kineto import arrow_errors, build_trace, dimension_trace, read_file
from ktrace.importers.kineto_combine import release_memory
from ktrace.importers.kineto_events import EventSink, Staged
from ktrace.importers.kineto_file_meta import FileRead, base_time, file_meta, place_of
from ktrace.importers.kineto_joins import JoinCounter
from ktrace.importers.kineto_tables import KIND_TABLE, NA_STREAM, TimeFixer, kind_rows, range_frames
from ktrace.importers.kineto_tables import ranges_table as build_ranges
from ktrace.model.errors import ProgressFn, no_progress
from ktrace.model.schema import TABLES
from ktrace.model.scrub import scrub_frame, scrub_meta, scrub_trace
from ktrace.model.secrets import scrub_strings
from ktrace.model.trace import Trace, TraceMeta, frame_from_columns, frame_to_arrow

if TYPE_CHECKING:
    from ktrace.model.store_append import ColumnStats

FLUSH_BYTES = 48 << 20
"""Build and write the tables once the sink holds this many bytes of columns (~1 M kernel rows)."""
CONFORM_ROWS = 1 << 18
"""Rows made into a table's full schema at a time (its columns of nulls are arrays there: ~200 bytes a row)."""
_CHUNKS = ".kineto-chunks"
_IPC = pa.ipc.IpcWriteOptions(compression="lz4")
_TIMES = ("start_ns", "end_ns", "ts_ns")


@dataclass
class Imported:
    """What `ktrace import` prints of the store written."""

    counts: dict[str, int]
    meta: TraceMeta
    ranks: int


@dataclass
class _Chunks:
    """The kinds' rows written so far (IPC streams under `folder`), and what the whole tables need of them."""

    folder: Path
    fix: TimeFixer = field(default_factory=lambda: TimeFixer(0))
    writers: dict[str, pa.ipc.RecordBatchStreamWriter] = field(default_factory=dict)
    devices: set[int] = field(default_factory=set)
    stats: dict[str, ColumnStats] = field(default_factory=dict)
    """Per table: what its file's metadata says of its columns (times from 0)."""
    cpu_ranges: list[pl.DataFrame] = field(default_factory=list)
    gpu_ranges: list[pl.DataFrame] = field(default_factory=list)

    def write(self, kind: str, rows: pa.Table) -> None:
        from ktrace.model.store_append import ColumnStats, file_schema  # (a file that never flushes: not imported)

        name = KIND_TABLE[kind]
        frame = frame_from_columns(rows, name, {"node": "", "rank": 0})
        schema = file_schema(name)
        if kind not in self.writers:
            self.writers[kind] = pa.ipc.new_stream(self.folder / f"{kind}.arrows", schema, options=_IPC)
        stats = self.stats.setdefault(name, ColumnStats(schema.names))
        for lo in range(0, frame.height, CONFORM_ROWS):
            table = frame_to_arrow(frame.slice(lo, CONFORM_ROWS), name).select(schema.names)
            if "device" in schema.names and name in ("kernels", "memory"):
                self.devices.update(d for d in pc.unique(table.column("device")).to_pylist() if d is not None)
            stats.add(table)
            self.writers[kind].write_table(table)

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()


class StreamingSink(EventSink):
    """An EventSink that builds and writes its tables every FLUSH_BYTES (see the module docstring)."""

    def __init__(self, with_ops: bool, folder: Path, first_flush: int | None = None) -> None:
        super().__init__(with_ops=with_ops)
        self.folder = folder
        self.chunks: _Chunks | None = None
        self.flushed_bytes = 0
        self.held_cap = self.max_table_bytes
        """kineto_limits.MAX_TABLE_BYTES caps the tables held in memory: here, those not yet flushed."""
        self.first_flush = first_flush
        """Bytes of columns held before the first flush (None: FLUSH_BYTES); until then the file is read as the
        in-memory import reads it."""

    def merge(self, staged: Staged) -> None:
        """EventSink.merge, then a flush when the columns held reach FLUSH_BYTES (the first time: `first_flush`),
        or half the cap on them."""
        super().merge(staged)
        every = FLUSH_BYTES if self.chunks is not None or self.first_flush is None else self.first_flush
        if self.table_bytes - self.flushed_bytes >= min(every, self.held_cap // 2):
            self.flush()

    def flush(self) -> None:
        """Build every kind's rows held and write them (times from 0) to their streams (the store folder is made
        here, private, if it does not exist yet)."""
        if self.chunks is None:
            if not self.folder.parent.exists():
                self.folder.parent.mkdir(mode=0o700)
            self.folder.mkdir()
            self.chunks = _Chunks(self.folder)
        chunks = self.chunks
        for kind in KIND_TABLE:
            raw = self.table(kind)
            rows = kind_rows(kind, raw, chunks.fix) if raw is not None else None
            del raw
            if rows is not None and rows.num_rows:
                chunks.write(kind, rows)
        for frame in range_frames(self, chunks.fix):
            if frame.height:
                (chunks.gpu_ranges if frame["on_gpu"][0] else chunks.cpu_ranges).append(frame)
        self.flushed_bytes = self.table_bytes
        self.max_table_bytes = self.flushed_bytes + self.held_cap
        release_memory()


def import_to_store(path: Path, root: Path, *, progress: ProgressFn = no_progress, with_ops: bool = True) -> Imported:
    """Import the Kineto file `path` into the empty store folder `root` (what `store.write(import_kineto(path))`
    writes), in bounded memory: see the module docstring.

    Raises:
        TraceFormatError: the file is not a readable Kineto trace (one line, exit code 3).
    """
    from ktrace.model.store import write

    result = import_or_spill(path, root, progress=progress, with_ops=with_ops)
    if isinstance(result, Imported):
        return result
    write(result, root)  # small: built in memory, as before
    return Imported(result.counts(), result.meta, len(result.ranks))


def import_or_spill(
    path: Path, root: Path, *, progress: ProgressFn = no_progress, with_ops: bool = True, spill_above: int | None = None
) -> Trace | Imported:
    """The Kineto file `path` as the Trace `import_kineto(path)` returns, built in memory, while its columns stay
    under `spill_above` bytes (None: FLUSH_BYTES); once they pass it, written as it is read into the store folder
    `root` (empty, or not there yet: then made, private, at the first write), in bounded memory.

    Raises:
        TraceFormatError: the file is not a readable Kineto trace (one line, exit code 3).
    """
    sink = StreamingSink(with_ops, root / _CHUNKS, spill_above)
    try:
        read = arrow_errors(path, lambda: read_file(path, sink, progress))  # (flushes build tables as it reads)
        if sink.chunks is None:  # small: in memory
            trace, _ = arrow_errors(path, lambda: build_trace(read))
            release_memory()
            return scrub_trace(trace)
        return arrow_errors(path, lambda: _finish(read, sink, root))
    finally:
        if sink.chunks is not None:
            sink.chunks.close()
        shutil.rmtree(root / _CHUNKS, ignore_errors=True)


def _finish(read: FileRead, sink: StreamingSink, root: Path) -> Imported:
    from ktrace.model.store import partition_dir, write_meta
    from ktrace.model.store_append import TableAppender
    from ktrace.model.store_files import write_table

    sink.flush()
    assert sink.chunks is not None
    chunks = sink.chunks
    chunks.close()
    base = base_time(read)
    info, node = place_of(read)
    clean_node, node_secrets = scrub_strings([node])  # (the partition's name; scrub_meta scrubs the hosts)
    folder = partition_dir(root, clean_node.get(node, node), info.rank)
    folder.mkdir(parents=True)
    counts = dict.fromkeys(TABLES, 0)
    joins = JoinCounter()
    secrets = 0
    for name, stats in chunks.stats.items():
        if not stats.rows:
            continue
        constants = {c: _shift(v, base) if c in _TIMES else v for c, v in stats.constants().items()}
        appender = TableAppender(folder / f"{name}.parquet", name, stats.nulls(), constants)
        for kind in (k for k, t in KIND_TABLE.items() if t == name and k in chunks.writers):
            for batch in _shifted(chunks.folder / f"{kind}.arrows", base):
                joins.add(name, batch)
                appender.append(batch)
            (chunks.folder / f"{kind}.arrows").unlink()
        counts[name] = appender.close()
        secrets += appender.scrubber.count + (node_secrets if counts[name] else 0)
    small = _small_tables(read, sink, node, info.rank, base)
    for name, frame in small.items():
        frame, n = scrub_frame(frame)
        secrets += n
        counts[name] = frame.height
        if frame.height:
            write_table(frame_to_arrow(frame, name), folder / f"{name}.parquet", scrubbed=True)
    health = joins.counts()
    no_stream = NA_STREAM if chunks.fix.sync_on_na else None
    meta = _scrubbed_meta(file_meta(read, info, node, chunks.fix, no_stream, health, base), secrets)
    write_meta(root, meta, {clean_node.get(node, node)})
    return Imported(counts, meta, 1)


def _shift(value: object, base: int) -> object:
    """A time `value` (ns from 0) plus `base`, wrapping in int64 as the columns' sum does."""
    assert isinstance(value, int)
    return (value + base + 2**63) % 2**64 - 2**63


def _shifted(stream: Path, base: int) -> Iterator[pa.Table]:
    """The batches of a kind's stream, their times shifted by `base` ns (int64, wrapping as numpy's sum does)."""
    with pa.memory_map(str(stream)) as source:
        for batch in pa.ipc.open_stream(source):
            table = pa.Table.from_batches([batch])
            if base:
                for name in (c for c in _TIMES if c in table.column_names):
                    i = table.schema.get_field_index(name)
                    table = table.set_column(
                        i, table.schema.field(i), pc.add(table.column(i), pa.scalar(base, pa.int64()))
                    )
            yield table


def _small_tables(read: FileRead, sink: StreamingSink, node: str, rank: int, base: int) -> dict[str, pl.DataFrame]:
    """ranges (kept in memory), threads and devices, as frames of the trace."""
    assert sink.chunks is not None
    chunks = sink.chunks
    frames = [f.with_columns(pl.col("start_ns") + base, pl.col("end_ns") + base) for f in chunks.cpu_ranges]
    frames += [f.with_columns(pl.col("start_ns") + base, pl.col("end_ns") + base) for f in chunks.gpu_ranges]
    out = {}
    if frames:
        out["ranges"] = frame_from_columns(build_ranges(frames), "ranges", {"node": node, "rank": rank})
    dims = dimension_trace(read, node, rank, chunks.devices)
    out["threads"], out["devices"] = dims.threads, dims.devices
    return out


def _scrubbed_meta(meta: TraceMeta, secrets: int) -> TraceMeta:
    """`meta` scrubbed, with the tables' `secrets` counted, as `scrub.scrub_trace` leaves a trace's."""
    meta, n_meta = scrub_meta(meta)
    if not secrets + n_meta:
        return meta
    notes = (f"{secrets} secret-looking value(s) redacted from names in the tables",) if secrets else ()
    return meta.with_health({"secrets_scrubbed": secrets + n_meta}, notes)
