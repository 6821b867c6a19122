"""One partition table of a store written batch by batch (a streaming import), as `store_files.write_table` writes it whole.

`store_files.write_table` needs the whole table in memory; a table appended here holds at most one row group (1 Mi
rows, the row groups `write_table` cuts). What `write_table` learns from the whole table is gathered batch by
batch and written into the file's metadata when it is closed: the columns of nothing but nulls, the columns of one
value, and the rules' fingerprint. Strings are scrubbed by distinct value, each value once over all batches, and
counted as `scrub.scrub_frame` counts them on the whole table (a value redacted once per column).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ktrace.model.schema import SCHEMAS
from ktrace.model.scrub import rules_fingerprint
from ktrace.model.secrets import scrub_strings
from ktrace.model.store_files import (  # the store's own file format, shared with write_table
    CONSTANT_COLUMNS_KEY,
    NULL_COLUMNS_KEY,
    SCRUBBED_KEY,
    constant_value,
    parquet_options,
)

_NOT_CONSTANT = object()


def file_schema(name: str) -> pa.Schema:
    """The schema of table `name` as a partition's file holds it (without node and rank: the folder names)."""
    schema = SCHEMAS[name]
    return pa.schema([f for f in schema if f.name not in ("node", "rank")], metadata=schema.metadata)


class DistinctScrubber:
    """Scrubs the string columns of a table's batches, each distinct value of a column looked at once."""

    def __init__(self) -> None:
        self.seen: dict[str, set[str]] = {}
        self.changes: dict[str, dict[str, str]] = {}
        self.count = 0
        """Values redacted, once per column (as `scrub.scrub_frame` counts them on the whole table)."""

    def scrub(self, table: pa.Table) -> pa.Table:
        """`table` with its string columns scrubbed (its schema kept)."""
        for i, field in enumerate(table.schema):
            dictionary = pa.types.is_dictionary(field.type)
            typ = field.type.value_type if dictionary else field.type
            if not pa.types.is_string(typ) or not table.num_rows:
                continue
            distinct = self.look_at(field.name, _distinct(table.column(i), dictionary))
            changes = {v: c for v, c in self.changes.get(field.name, {}).items() if v in distinct}
            if changes:
                clean = pl.Series(table.column(i).cast(typ)).replace(changes).to_arrow().cast(typ)
                table = table.set_column(i, field, pa.chunked_array([clean]).cast(field.type))
        return table

    def look_at(self, column: str, distinct: set[str]) -> set[str]:
        """Count the secrets among the values of `column` not seen before; returns `distinct`."""
        seen = self.seen.setdefault(column, set())
        new = distinct - seen
        if new:
            changes, n = scrub_strings(sorted(new))
            self.count += n
            self.changes.setdefault(column, {}).update(changes)
            seen |= new
        return distinct


def _distinct(column: pa.ChunkedArray, dictionary: bool) -> set[str]:
    values: set[str] = set()
    for chunk in column.chunks:
        used = chunk.dictionary.take(pc.unique(chunk.indices).drop_null()) if dictionary else pc.unique(chunk)
        values.update(v for v in used.to_pylist() if v is not None)
    return values


class ColumnStats:
    """What `store_files.write_table` learns from a whole table, gathered batch by batch: its rows, the columns of
    nothing but nulls, and the columns of one value (its metadata; see store._constant_value)."""

    def __init__(self, names: list[str]) -> None:
        self.rows = 0
        self.null_counts = dict.fromkeys(names, 0)
        self.values: dict[str, object] = {}

    def add(self, table: pa.Table) -> None:
        """Count the rows of `table` in."""
        if not table.num_rows:
            return
        self.rows += table.num_rows
        for name in self.null_counts:
            column = table.column(name)
            self.null_counts[name] += column.null_count
            if self.values.get(name, None) is not _NOT_CONSTANT:
                value = constant_value(column)
                seen = self.values.setdefault(name, value[0] if value else _NOT_CONSTANT)
                if not value or seen != value[0]:
                    self.values[name] = _NOT_CONSTANT

    def nulls(self) -> list[str]:
        """The columns holding only nulls (none in a table without rows)."""
        return [c for c, n in self.null_counts.items() if self.rows and n == self.rows]

    def constants(self) -> dict[str, object]:
        """{column: its one value} of the integer and dictionary-string columns holding one value in every row."""
        return {c: v for c, v in self.values.items() if v is not _NOT_CONSTANT}


class TableAppender:
    """Table `name` of one partition, appended batch by batch (each of `file_schema(name)`, not yet scrubbed) to
    `path`: `nulls` and `constants` (ColumnStats of the unscrubbed rows to come) go in its metadata."""

    ROW_GROUP_ROWS = 1 << 20

    def __init__(self, path: Path, name: str, nulls: list[str], constants: dict[str, object]) -> None:
        self.schema = file_schema(name)
        self.scrubber = DistinctScrubber()
        for column, value in constants.items():
            if isinstance(value, str):
                self.scrubber.look_at(column, {value})
                constants[column] = self.scrubber.changes.get(column, {}).get(value, value)
        metadata = {
            **(self.schema.metadata or {}),
            NULL_COLUMNS_KEY: json.dumps(nulls).encode(),
            CONSTANT_COLUMNS_KEY: json.dumps(constants).encode(),
        }
        if (fingerprint := rules_fingerprint()) is not None:
            metadata[SCRUBBED_KEY] = fingerprint.encode()
        options = parquet_options(self.schema)
        options.pop("row_group_size")
        self.writer = pq.ParquetWriter(path, self.schema.with_metadata(metadata), **options)
        self.rows = 0
        self.waiting: list[pa.Table] = []
        self.waiting_rows = 0

    def append(self, table: pa.Table) -> None:
        """Add the rows of `table` (scrubbed here)."""
        if not table.num_rows:
            return
        table = self.scrubber.scrub(table)
        self.rows += table.num_rows
        self.waiting.append(table)
        self.waiting_rows += table.num_rows
        while self.waiting_rows >= self.ROW_GROUP_ROWS:
            self._write_row_group()

    def _write_row_group(self) -> None:
        table = pa.concat_tables(self.waiting)
        head, rest = table.slice(0, self.ROW_GROUP_ROWS), table.slice(self.ROW_GROUP_ROWS)
        self.writer.write_table(head, row_group_size=self.ROW_GROUP_ROWS)
        self.waiting = [rest] if rest.num_rows else []
        self.waiting_rows = rest.num_rows
        del table, head
        pa.default_memory_pool().release_unused()  # (the row group's columns: ~200 MB of 1 Mi kernel rows)

    def close(self) -> int:
        """Write what is left; returns the rows written."""
        if self.waiting_rows:
            self._write_row_group()
        self.writer.close()
        return self.rows
