"""TraceBuilder: collect columns or record batches per table, then build one immutable Trace."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from ktrace.model.schema import SCHEMAS, TABLES
from ktrace.model.trace import Trace, TraceMeta, conform, frame_schema


def constant_column(value: object, n: int, typ: pa.DataType) -> pa.Array:
    """`n` copies of `value` as an Arrow array of `typ` without materialising a Python list."""
    if pa.types.is_dictionary(typ):
        indices = pa.array(np.zeros(n, dtype=np.int32))
        return pa.DictionaryArray.from_arrays(indices, pa.array([value], type=typ.value_type))
    return pa.repeat(pa.scalar(value, type=typ), n)


class TraceBuilder:
    """Accumulates rows for every table; `build()` returns the Trace.

    Columns may be numpy arrays, Arrow arrays or Python sequences. `node` and `rank` default to the
    builder's and need not be passed. Used by the tracer, every importer and the synthetic generator.
    """

    def __init__(self, node: str = "localhost", rank: int = 0, meta: TraceMeta | None = None) -> None:
        self.node = node
        self.rank = rank
        self.meta = meta or TraceMeta()
        self._parts: dict[str, list[pa.Table]] = {name: [] for name in TABLES}

    def add(
        self,
        table: str,
        columns: Mapping[str, Any] | pa.RecordBatch | pa.Table,
        *,
        node: str | None = None,
        rank: int | None = None,
    ) -> None:
        """Append rows to `table` from a column mapping, a record batch or a table."""
        if table not in SCHEMAS:
            raise KeyError(f"unknown table {table!r}; tables are {', '.join(TABLES)}")
        schema = SCHEMAS[table]
        data = _as_table(table, columns)
        n = data.num_rows
        if n == 0:
            return
        for key, default in (
            ("node", self.node if node is None else node),
            ("rank", self.rank if rank is None else rank),
        ):
            if key not in data.column_names:
                data = data.append_column(key, constant_column(default, n, schema.field(key).type))
        self._parts[table].append(conform(data, table))

    def rows(self, table: str) -> int:
        """Rows added so far to `table`."""
        return sum(t.num_rows for t in self._parts[table])

    def set_meta(self, meta: TraceMeta) -> None:
        """Replace the meta the built Trace will carry."""
        self.meta = meta

    def build(self) -> Trace:
        """The Trace of everything added (tables concatenated; dictionaries unified)."""
        tables = {name: concat_tables(parts, name) for name, parts in self._parts.items()}
        return Trace.from_arrow(tables, self.meta)


def _as_table(table: str, columns: Mapping[str, Any] | pa.RecordBatch | pa.Table) -> pa.Table:
    """Rows given as a column mapping, a record batch or a table, as an Arrow table (types per the schema)."""
    if isinstance(columns, pa.RecordBatch):
        return pa.Table.from_batches([columns])
    if isinstance(columns, pa.Table):
        return columns
    schema = SCHEMAS[table]
    arrays = {}
    for name, values in columns.items():
        if name not in schema.names:
            raise KeyError(f"{table}: unknown column {name!r}")
        typ = schema.field(name).type
        if isinstance(values, pa.Array | pa.ChunkedArray):
            arrays[name] = values
        elif pa.types.is_dictionary(typ):
            arrays[name] = pa.array(values, type=pa.string())
        else:
            arrays[name] = pa.array(values, type=typ)
    return pa.table(arrays) if arrays else pa.table({})


def concat_tables(parts: Sequence[pa.Table], name: str) -> pa.Table:
    """Concatenate tables of one schema, unifying their dictionaries."""
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return SCHEMAS[name].empty_table()
    if len(parts) == 1:
        return parts[0]
    # No combine_chunks(): polars takes chunked columns as they are, and copying 10 M rows costs ~0.2 s.
    return pa.concat_tables(parts).unify_dictionaries()


def merge_traces(traces: Iterable[Trace], meta: TraceMeta | None = None) -> Trace:
    """One Trace holding the rows of several (e.g. one per rank); health counts are summed."""
    traces = list(traces)
    if not traces:
        return Trace.from_arrow({}, meta)
    if meta is None:
        meta = traces[0].meta
        for other in traces[1:]:
            meta = meta.with_health(other.meta.health, other.meta.notes)
        hosts = sorted({h for t in traces for h in t.meta.hosts})
        meta = type(meta)(**{**meta.__dict__, "hosts": tuple(hosts)})
    if all(t.table(name).schema == frame_schema(name) for t in traces for name in TABLES):
        # every frame in its table's schema (any import's): polars concatenates them as they are, where a round
        # trip through Arrow cost ~10-25 ms a rank (8 small DLRM ranks: 80-220 ms against 1 ms, issue 29)
        frames = {name: pl.concat([t.table(name) for t in traces], how="vertical") for name in TABLES}
        return Trace(**frames, meta=meta)
    tables = {name: concat_tables([t.to_arrow(name) for t in traces], name) for name in TABLES}
    return Trace.from_arrow(tables, meta)
