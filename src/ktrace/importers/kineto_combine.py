"""The per-slice Arrow tables of one Kineto event kind made into one table without holding its rows twice.

On the worst input (many small identical kernel events, issue 27 section 3) the tables are the import's memory: a
kernel row was ~135 bytes of columns, combining the slices' tables (concatenate, then copy into one chunk per column)
held every row twice, and conforming them to the schema added an array of nulls per missing column. Here each slice
leaves out its columns of nulls only and narrows the integer columns that the trace keeps as int32 (~50 bytes a row
remain); a kind's columns are combined one at a time, each column's slices freed as soon as it is copied; and
LeanBuilder builds the trace with scalar columns for what no event had. See benchmarks/RESULTS.md for the figures.
"""

from __future__ import annotations

import pyarrow as pa

from ktrace.model.heap import release_free_memory
from ktrace.model.schema import SCHEMAS, TABLES
from ktrace.model.trace import Trace, TraceMeta, frame_from_columns

_TABLE_OF_KIND = {"kernel": "kernels", "memcpy": "memory", "memset": "memory", "runtime": "api", "driver": "api"}
"""Kinds whose columns go to their table with the names and meaning they are built with (see kineto_tables)."""
NARROW: dict[str, frozenset[str]] = {
    kind: frozenset(f.name for f in SCHEMAS[table] if f.type == pa.int32()) for kind, table in _TABLE_OF_KIND.items()
}
"""The columns of each kind that the trace keeps as int32."""


_KEPT = frozenset({"ts", "dur", "name"})
"""Columns kineto_tables reads of every kind, kept even when all null."""


def slimmed(table: pa.Table, kind: str) -> pa.Table:
    """One slice's `table` of `kind` as the trace will keep it: columns of nothing but nulls left out (the table's
    build fills them, and the slices that have values give theirs: kineto_combine.combined), and int64 columns that
    the trace keeps as int32 cast to int32 where every value fits (a column with a value that does not stays int64:
    the table's build then says so, as before). Other kinds' tables are returned as they are."""
    names = NARROW.get(kind)
    if names is None:
        return table
    empty = [f.name for f in table.schema if f.name not in _KEPT and table.column(f.name).null_count == len(table)]
    table = table.drop_columns(empty) if empty and len(table) else table
    for i, field in enumerate(table.schema):
        if field.name in names and field.type == pa.int64():
            try:
                table = table.set_column(i, field.name, table.column(i).cast(pa.int32()))
            except (pa.ArrowInvalid, OverflowError):
                continue
    return table


RELEASE_BYTES = 16 << 20
"""`combined` gives the freed slices back to the operating system each time this many bytes of them were freed: a
small trace's columns are not worth a malloc_trim each (124 calls, ~10 ms and the pages faulted in again, for the
README demo's 132 k events)."""


def combined(parts: list[pa.Table]) -> pa.Table:
    """The rows of `parts` in one chunk per column, dictionaries unified, holding at most one column twice at any
    time. `parts` is emptied (the caller must hold no other reference to its tables, or they stay in memory)."""
    chunked = pa.concat_tables(parts, promote_options="permissive").unify_dictionaries()
    parts.clear()
    schema = chunked.schema
    columns = []
    freed = 0
    while chunked.num_columns:
        columns.append(chunked.column(0).combine_chunks())
        freed += columns[-1].nbytes
        chunked = chunked.remove_column(0)  # (the last reference to that column's slices: freed here, and given
        if freed >= RELEASE_BYTES:  # back: else the process held the rows twice all the same)
            release_memory()
            freed = 0
    return pa.Table.from_arrays(columns, schema=schema)


def release_memory() -> None:
    """Give Arrow's pool (mimalloc keeps freed pages: ~0.45 GB after 2 M kernel rows) and the freed heap (glibc's:
    slices from decode workers are unpickled into it) back to the operating system."""
    pa.default_memory_pool().release_unused()
    release_free_memory()


class LeanBuilder:
    """Collects a Kineto file's tables as TraceBuilder.add does, and builds the Trace with
    model.trace.frame_from_columns: node, rank and the columns no event had are then polars scalar columns, which
    take no memory (TraceBuilder conforms each table to its whole schema, an array of nulls per missing column:
    ~60 bytes per kernel row of the worst input, as much as the kernels' values)."""

    def __init__(self, node: str, rank: int) -> None:
        self.constants: dict[str, object] = {"node": node, "rank": rank}
        self.parts: dict[str, list[pa.Table]] = {}

    def add(self, table: str, columns: pa.Table) -> None:
        """Append the rows of `columns` (a subset of table `table`'s columns, without node and rank)."""
        if table not in SCHEMAS:
            raise KeyError(f"unknown table {table!r}")
        if columns.num_rows:
            self.parts.setdefault(table, []).append(columns)

    def build(self) -> Trace:
        """The Trace of every table added (its meta is the default one); the tables are handed over."""
        frames = {}
        for name in TABLES:
            parts = self.parts.pop(name, [])
            table = combined(parts) if len(parts) > 1 else parts[0] if parts else SCHEMAS[name].empty_table()
            frames[name] = frame_from_columns(table, name, self.constants)
        return Trace(**frames, meta=TraceMeta())
