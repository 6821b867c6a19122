"""Capture files: one append-only Arrow IPC stream per table and process, readable after a SIGKILL.

Imports only pyarrow and the schemas (no polars): every traced process loads this on its writer thread.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from ktrace.model.layout import PARTITION_META_FILE, partition_dir
from ktrace.model.live import PUBLISHED_KEY, Published
from ktrace.model.outputs import CAPTURE_MARKER, write_atomically
from ktrace.model.schema import SCHEMAS

__all__ = ["PARTITION_META_FILE", "CaptureWriter", "partition_dir", "read_stream", "stream_schema"]


STREAM_DICTIONARIES = frozenset({("samples", "stack")})
"""Columns a capture stream keeps dictionary-encoded, each batch's dictionary extending the last (IPC dictionary
deltas: only new entries are written): a Python stack, kilobytes of text, repeats in most samples."""


def stream_schema(name: str) -> pa.Schema:
    """The schema of a capture stream: the table's schema with plain strings (no per-batch dictionaries), but for
    STREAM_DICTIONARIES."""
    fields = [
        pa.field(f.name, f.type.value_type if _plain(f.type, (name, f.name)) else f.type, f.nullable)
        for f in SCHEMAS[name]
        if f.name not in ("node", "rank")
    ]
    return pa.schema(fields, metadata=SCHEMAS[name].metadata)


def _plain(typ: pa.DataType, column: tuple[str, str]) -> bool:
    return pa.types.is_dictionary(typ) and column not in STREAM_DICTIONARIES


def read_stream(path: Path, limit: int | None = None) -> pa.Table:
    """Every complete batch of an Arrow IPC stream file, even one cut short by a killed writer; with `limit`,
    only its first `limit` bytes (what a live capture published: complete batches only)."""
    name = path.name.removesuffix(".arrows")
    batches: list[pa.RecordBatch] = []
    try:
        with pa.OSFile(str(path), "rb") as f:
            source = f if limit is None else pa.BufferReader(f.read_buffer(limit))
            reader = ipc.open_stream(source)
            while True:
                try:
                    batches.append(reader.read_next_batch())
                except StopIteration:
                    break
                except (pa.ArrowInvalid, OSError):
                    break  # a torn last batch: keep everything before it
    except (pa.ArrowInvalid, OSError):
        pass  # not even a schema was flushed
    if not batches:
        return stream_schema(name).empty_table()
    return pa.Table.from_batches(batches)


class CaptureWriter:
    """Append-only writer of one process's partition: one Arrow IPC stream per table.

    Each `append` writes a complete batch and flushes it to the OS, so a SIGKILL loses at most the
    batch being written. Not thread-safe: the tracer's single writer thread owns it.
    """

    def __init__(self, root: str | os.PathLike[str], node: str, rank: int) -> None:
        self.folder = partition_dir(Path(root), node, rank)
        self.folder.mkdir(parents=True, exist_ok=True)
        (Path(root) / CAPTURE_MARKER).touch()  # a capture: readable (recovered) before it is finalized
        self._writers: dict[str, tuple[pa.OSFile, ipc.RecordBatchStreamWriter]] = {}
        self._first_ns: int | None = None
        self._last_ns: int | None = None
        self.published: Published | None = None
        """What the last publish() made readable (kept in partition.json by write_partition_meta)."""
        self.bytes_written = 0
        """Bytes appended to the streams so far (the cost of publishing, for the benchmark)."""

    def append(self, name: str, batch: pa.RecordBatch | pa.Table) -> None:
        """Write rows of table `name`; columns are cast to the stream schema (strings undictionaried)."""
        if batch.num_rows == 0:
            return
        schema = stream_schema(name)
        table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        table = table.select([c for c in schema.names if c in table.column_names])
        arrays = [
            table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
            for f in schema
        ]
        table = pa.Table.from_arrays(arrays, schema=schema)
        if name not in self._writers:
            sink = pa.OSFile(str(self.folder / f"{name}.arrows"), "wb")
            deltas = ipc.IpcWriteOptions(emit_dictionary_deltas=True)
            self._writers[name] = (sink, ipc.new_stream(sink, schema, options=deltas))
        sink, writer = self._writers[name]
        before = sink.tell()
        for b in table.to_batches():
            writer.write_batch(b)
        sink.flush()
        self.bytes_written += sink.tell() - before
        self._widen_span(table)

    def _widen_span(self, table: pa.Table) -> None:
        """Keep the earliest and latest timestamp appended (the span a live reader is told)."""
        for column, earliest in (("start_ns", True), ("ts_ns", True), ("end_ns", False)):
            if column not in table.column_names:
                continue
            lo, hi = (v.as_py() for v in pc.min_max(table.column(column)).values())
            if lo is None:
                continue
            if earliest:
                self._first_ns = lo if self._first_ns is None else min(self._first_ns, lo)
            self._last_ns = hi if self._last_ns is None else max(self._last_ns, hi)

    def publish(self) -> Published:
        """Make what was appended so far readable by live readers: the streams' lengths now (each append ends on
        a complete batch) go into `published`, written out by the next write_partition_meta."""
        streams = {name: sink.tell() for name, (sink, _) in self._writers.items()}
        self.published = Published(streams, self._first_ns, self._last_ns, time.time_ns())
        return self.published

    def write_partition_meta(
        self, health: dict[str, int], notes: list[str], extra: dict[str, Any] | None = None
    ) -> None:
        """Record this process's health counts and notes (and `extra` keys: clock_pairs) beside its tables."""
        published = {PUBLISHED_KEY: self.published.to_dict()} if self.published is not None else {}
        text = json.dumps({**(extra or {}), **published, "health": health, "notes": notes}, indent=1, sort_keys=True)
        write_atomically(self.folder / PARTITION_META_FILE, text.encode())

    def close(self) -> None:
        """End every stream (the files stay readable as streams until finalize())."""
        for sink, writer in self._writers.values():
            try:
                writer.close()
            except OSError:
                pass  # a full disk: the batches flushed before stay readable
            finally:
                sink.close()
        self._writers.clear()
