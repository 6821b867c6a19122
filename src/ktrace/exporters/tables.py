"""The trace tables as Parquet or CSV files (one file per table) for DuckDB, pandas, spreadsheets.

Times are written on the clock the trace is in: a multi-host store is read aligned (`store.read`, unless
KTRACE_CLOCK=raw), so the files of `ktrace export -f parquet` hold every host's times on the reference host's clock,
and other engines compare ranks across hosts without meta.json. Each Parquet file says which clock in its metadata
(`ktrace.clock`, see `clock_state`; `ktrace.clock_alignment`: meta.json's offsets, when the trace has them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import polars as pl

from ktrace.model.errors import ExitCode, KtraceError, ProgressFn, no_progress
from ktrace.model.outputs import atomic_path
from ktrace.model.schema import TABLES
from ktrace.model.trace import Trace

FORMATS = ("parquet", "csv")
CLOCK_KEY = b"ktrace.clock"
ALIGNMENT_KEY = b"ktrace.clock_alignment"
ClockState = Literal["aligned", "as_recorded", "one_host"]


def clock_state(trace: Trace) -> ClockState:
    """Which clock the trace's times are on: "aligned" (every host on the reference host's clock), "as_recorded"
    (each host's own: KTRACE_CLOCK=raw, an alignment that was impossible, or none recorded) or "one_host"."""
    alignment = trace.meta.clock_alignment
    if alignment is not None and alignment.shifts:
        return "aligned" if alignment.applied else "as_recorded"
    hosts = set(trace.meta.hosts) | {node for node, _ in trace.ranks}
    return "one_host" if len(hosts) <= 1 else "as_recorded"


def export_tables(
    trace: Trace, directory: str | Path, fmt: str = "parquet", *, progress: ProgressFn = no_progress
) -> dict[str, Path]:
    """Write every table of `trace` to `directory`/<table>.<fmt>; returns table -> file written.

    Parquet keeps the schema (dictionary strings, int64 ns); CSV writes strings and plain numbers, nulls empty.

    Raises:
        KtraceError: for an unknown format or when `directory` exists and is not a folder.
    """
    if fmt not in FORMATS:
        raise KtraceError(f"unknown table format {fmt!r} (choose from {', '.join(FORMATS)})", ExitCode.USAGE)
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise KtraceError(f"{out}: exists and is not a folder (tables are written one file per table)", ExitCode.USAGE)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    clock = {CLOCK_KEY: clock_state(trace).encode()}
    if (alignment := trace.meta.clock_alignment) is not None:
        clock[ALIGNMENT_KEY] = json.dumps(alignment.to_dict(), sort_keys=True).encode()
    for k, name in enumerate(TABLES):
        path = out / f"{name}.{fmt}"
        with atomic_path(path) as tmp:  # each file whole or not at all
            if fmt == "parquet":
                import pyarrow.parquet as pq

                table = trace.to_arrow(name)
                table = table.replace_schema_metadata({**(table.schema.metadata or {}), **clock})
                pq.write_table(table, tmp, compression="zstd")
            else:
                frame = trace.table(name).with_columns(pl.col(pl.Categorical).cast(pl.String))
                csv_safe(frame).write_csv(tmp)
        written[name] = path
        progress(k + 1, len(TABLES))
    return written


FORMULA_START = r"^[=+\-@\t\r]"
"""A text cell starting with one of these is run as a formula by spreadsheets (OWASP CSV injection)."""


def csv_safe(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with every text cell that a spreadsheet would run as a formula prefixed with `'` (shown as text).

    Only text columns change: numbers (negative ones included) stay numbers.
    """
    text = [c for c, t in frame.schema.items() if t == pl.String]
    return frame.with_columns(
        pl.when(pl.col(c).str.contains(FORMULA_START)).then(pl.lit("'") + pl.col(c)).otherwise(pl.col(c)).alias(c)
        for c in text
    )
