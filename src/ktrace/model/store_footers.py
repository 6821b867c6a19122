"""What a finished store holds, answered from meta.json and its Parquet footers without reading its rows.

`ktrace info STORE` shows the meta, the devices, the ranks, the rows per table and the time span. All but the
devices table (a few rows) are in the footers: the row counts, and the extremes of the time columns
(`partition_spans.footer_spans`, in the clock `store.read` gives). So `info` of a store of any size reads a few
kilobytes (it read every table: 1.4 GB at 20 M events). Where the footers cannot answer as `store.read` would,
`store_facts` says so (None) and the caller reads the store: a capture still recording or never finalized (its
Arrow streams have no footer), a file without the statistics, a store aligned when written read in the raw clock.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from ktrace.model.errors import TraceFormatError
from ktrace.model.layout import META_FILE
from ktrace.model.live import live_status
from ktrace.model.partition_spans import footer_spans, union_span
from ktrace.model.schema import SCHEMAS, TABLES
from ktrace.model.store import partitions, read
from ktrace.model.store_checks import MAX_TIME_NS, check_columns, unreadable_parquet
from ktrace.model.trace import TraceMeta


@dataclass(frozen=True)
class StoreFacts:
    """The parts of a store's Trace that `ktrace info` shows, each equal to what `store.read` gives."""

    meta: TraceMeta
    devices: pl.DataFrame
    ranks: list[tuple[str, int]]
    """(node, rank) of the partitions holding rows, sorted (Trace.ranks)."""
    rows: dict[str, int]
    """Rows per table, in TABLES order (Trace.counts)."""
    span: tuple[int, int] | None
    """(first start, last end) over the span tables and instants (Trace.span_ns)."""

    def counts(self) -> dict[str, int]:
        """Rows per table (as Trace.counts)."""
        return dict(self.rows)

    def span_ns(self) -> tuple[int, int] | None:
        """(first start, last end), or None for a store without rows (as Trace.span_ns)."""
        return self.span


def store_facts(path: str | os.PathLike[str]) -> StoreFacts | None:
    """The facts of the store at `path` from its footers, or None where only reading it answers (see the module
    docstring).

    Raises:
        TraceFormatError: not a store, or a malformed one (meta.json, partitions, a table's columns or footer).
    """
    root = Path(path)
    if live_status(root) is not None or not (root / META_FILE).is_file():
        return None
    small = read(root, skip=[name for name in TABLES if name != "devices"])  # meta as read() gives it, and devices
    parts = list(partitions(root))
    rows = dict.fromkeys(TABLES, 0)
    ranks: set[tuple[str, int]] = set()
    for node, rank, folder in parts:
        for name in TABLES:
            file = folder / f"{name}.parquet"
            found = _rows(file, name) if file.exists() else 0
            rows[name] += found
            if found:
                ranks.add((node, rank))
    spans = footer_spans(root, [(node, folder) for node, _, folder in parts])  # (in the clock read() gives)
    if spans is None:
        return None
    span = union_span([s.span for s in spans if s.span is not None])
    return StoreFacts(small.meta, small.devices, sorted(ranks), rows, span)


def _rows(file: Path, name: str) -> int:
    """The rows of a partition's table `name` from its footer, its columns checked as `store.read` checks them
    (their values as far as the footer's statistics tell: `_check_statistics`)."""
    with unreadable_parquet(file), pq.ParquetFile(file) as parquet:
        check_columns(parquet.schema_arrow, name, file)
        footer = parquet.metadata
    _check_statistics(footer, name, file)
    return int(footer.num_rows)


def _check_statistics(footer: pq.FileMetaData, name: str, file: Path) -> None:
    """store_checks.check_values on what the statistics say: a required column with nulls, a time beyond
    MAX_TIME_NS. ktrace records statistics only for the times `info` uses (a time without them makes
    partition_spans give up, and the store is read whole); a crafted file's, for every column."""
    schema = SCHEMAS[name]
    for index in range(footer.num_columns):
        column = footer.schema.column(index).name
        if column not in schema.names:
            continue
        nulls, extremes = 0, []
        for group in range(footer.num_row_groups):
            stats = footer.row_group(group).column(index).statistics
            if stats is None:
                continue
            nulls += stats.null_count if stats.has_null_count else 0
            if stats.has_min_max and isinstance(stats.min, int) and isinstance(stats.max, int):
                extremes += [stats.min, stats.max]
        if nulls and not schema.field(column).nullable:
            raise TraceFormatError(
                f"{file}: column {column} is empty in {nulls:,} row(s); table {name} needs it in all"
            )
        worst = max(extremes, key=abs, default=0)
        if column.endswith("_ns") and abs(worst) > MAX_TIME_NS:
            raise TraceFormatError(
                f"{file}: column {column} holds {worst}, not a time in ns (within +/-{MAX_TIME_NS:.3g})"
            )
