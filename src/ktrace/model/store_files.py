"""The store's Parquet files: how a partition's table is written (encodings, compression), the schema metadata that
lets `store.read` skip null and constant columns and trust a file's scrub, and writing many files at once."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ktrace.model.outputs import atomic_path
from ktrace.model.schema import TIME_COLUMNS
from ktrace.model.scrub import rules_fingerprint, scrub_table
from ktrace.model.trace import frame_to_arrow

_DELTA_COLUMNS = (*TIME_COLUMNS, "correlation_id", "external_id")
"""Near-sorted int64 columns: delta-encoded they take ~1 byte a row and decode fast (measured: 18 vs 21 bytes a
kernel row with its launch, and half the decode time, against dictionary/plain encoding)."""


def parquet_options(schema: pa.Schema) -> dict[str, object]:
    # Sorted int64 timestamps and ids compress far better delta-encoded; everything else is dictionary-encoded.
    # Strings (dictionary pages of kernel names) get zstd. Numbers get lz4: after delta/dictionary encoding zstd
    # saved 5 % of their bytes at 10 M kernels and cost 30 % of the re-open's decode time.
    delta = [c for c in _DELTA_COLUMNS if c in schema.names]
    strings = [f.name for f in schema if pa.types.is_dictionary(f.type) or pa.types.is_string(f.type)]
    return {
        "compression": {f.name: "zstd" if f.name in strings else "lz4" for f in schema},
        "compression_level": dict.fromkeys(strings, 3),
        "use_dictionary": [f.name for f in schema if f.name not in delta],
        "column_encoding": dict.fromkeys(delta, "DELTA_BINARY_PACKED"),
        "write_statistics": ["start_ns", "end_ns", "ts_ns"],
        "row_group_size": 1 << 20,
    }


NULL_COLUMNS_KEY = b"ktrace.null_columns"
"""Schema metadata naming the columns that hold only nulls: read() skips them without decoding."""
CONSTANT_COLUMNS_KEY = b"ktrace.constant_columns"
"""Schema metadata {column: value} for integer and string columns holding one value in every row (a rank's
device, context, pid): read() fills them without decoding. The columns stay in the file for other readers."""
SCRUBBED_KEY = b"ktrace.scrubbed"
"""Schema metadata: `scrub.rules_fingerprint()` of the rules this file's strings were scrubbed with. read() scrubs
a file again unless it carries the current one (a store of older ktrace, or a table copied in from one, has none).
Per file, not per store, so a table copied between stores keeps its own truth."""


def write_table(table: pa.Table, path: Path, *, scrubbed: bool = False, durable: bool = True) -> None:
    """Write one partition's table (without node/rank: those are the folder names) as Parquet, whole or not at
    all (a temporary sibling, fsynced, renamed: `outputs.atomic_path`). Its strings are scrubbed unless
    `scrubbed` (they come from a Trace marked scrubbed), and the file is marked with the rules' fingerprint.
    `durable=False`: written in place, neither fsynced nor renamed, for a folder that is itself renamed into place
    whole and synced by its owner (a folder import's rank entry: `fleet.rank_import`)."""
    table = table.drop_columns([c for c in ("node", "rank") if c in table.column_names])
    if not scrubbed:
        table, _ = scrub_table(table)
    nulls = [c for c in table.column_names if table.num_rows and table.column(c).null_count == table.num_rows]
    constants = {c: v for c in table.column_names if c not in nulls for v in constant_value(table.column(c))}
    metadata = {
        **(table.schema.metadata or {}),
        NULL_COLUMNS_KEY: json.dumps(nulls).encode(),
        CONSTANT_COLUMNS_KEY: json.dumps(constants).encode(),
    }
    metadata.pop(SCRUBBED_KEY, None)
    if (fingerprint := rules_fingerprint()) is not None:
        metadata[SCRUBBED_KEY] = fingerprint.encode()
    table = table.replace_schema_metadata(metadata)
    if not durable:
        pq.write_table(table, path, **parquet_options(table.schema))
        return
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, **parquet_options(table.schema))


def constant_value(col: pa.ChunkedArray) -> list[int | str]:
    """[value] if the integer or dictionary-string `col` holds one non-null value in every row, else []."""
    if not len(col) or col.null_count:
        return []
    values: set[int | str] = set()
    for chunk in col.chunks:
        if not len(chunk):
            continue
        if pa.types.is_dictionary(chunk.type) and pa.types.is_string(chunk.type.value_type):
            lo, hi = pc.min_max(chunk.indices).values()
            value = chunk.dictionary[lo.as_py()].as_py()
        elif pa.types.is_integer(chunk.type):
            lo, hi = pc.min_max(chunk).values()
            value = lo.as_py()
        else:
            return []
        values.add(value)
        if lo != hi or len(values) > 1:
            return []
    return list(values)


def write_files(jobs: list[tuple[pl.DataFrame, str, Path]], clean: bool, durable: bool) -> None:
    """Write each (rows, table, path); `clean`: the rows were scrubbed once already (imports, stores read): not
    again per write."""

    def write_job(job: tuple[pl.DataFrame, str, Path]) -> None:
        write_table(frame_to_arrow(job[0], job[1]), job[2], scrubbed=clean, durable=durable)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(write_job, jobs))
