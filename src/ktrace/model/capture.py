"""Capture files: one append-only Arrow IPC stream per table and process, readable after a SIGKILL.

Imports only pyarrow and the schemas (no polars): every traced process loads this on its writer thread.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from ktrace.model.layout import PARTITION_META_FILE, partition_dir
from ktrace.model.outputs import CAPTURE_MARKER, write_atomically
from ktrace.model.schema import SCHEMAS

__all__ = ["PARTITION_META_FILE", "CaptureWriter", "partition_dir", "read_stream", "stream_schema"]


def stream_schema(name: str) -> pa.Schema:
    """The schema of a capture stream: the table's schema with plain strings (no per-batch dictionaries)."""
    fields = [
        pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type, f.nullable)
        for f in SCHEMAS[name]
        if f.name not in ("node", "rank")
    ]
    return pa.schema(fields, metadata=SCHEMAS[name].metadata)


def read_stream(path: Path) -> pa.Table:
    """Every complete batch of an Arrow IPC stream file, even one cut short by a killed writer."""
    name = path.name.removesuffix(".arrows")
    batches: list[pa.RecordBatch] = []
    try:
        with pa.OSFile(str(path), "rb") as f:
            reader = ipc.open_stream(f)
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
            self._writers[name] = (sink, ipc.new_stream(sink, schema))
        sink, writer = self._writers[name]
        for b in table.to_batches():
            writer.write_batch(b)
        sink.flush()

    def write_partition_meta(
        self, health: dict[str, int], notes: list[str], extra: dict[str, Any] | None = None
    ) -> None:
        """Record this process's health counts and notes (and `extra` keys: clock_pairs) beside its tables."""
        text = json.dumps({**(extra or {}), "health": health, "notes": notes}, indent=1, sort_keys=True)
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
