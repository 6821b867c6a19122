"""The immutable Trace: one polars frame per table of schema v1, plus TraceMeta and validate()."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from ktrace.model.clock import ClockAlignment
from ktrace.model.schema import ENUMS, SCHEMA_VERSION, SCHEMAS, SPAN_TABLES, TABLES


@dataclass(frozen=True)
class TraceMeta:
    """What a trace is and where it came from; stored as meta.json."""

    source: str = "ktrace"
    """Producer: "ktrace" (capture), "kineto", "nsys" or "synthetic"."""
    schema_version: int = SCHEMA_VERSION
    """Schema version the tables follow."""
    created: str = ""
    """ISO-8601 UTC time the trace was written."""
    clock: str = "realtime"
    """Clock domain of every *_ns column: ns since the Unix epoch (CLOCK_REALTIME)."""
    job: Mapping[str, Any] = field(default_factory=dict)
    """The traced job: command line, world size, source file names, framework versions."""
    capture: Mapping[str, Any] = field(default_factory=dict)
    """Capture configuration (activity kinds, window, counter interval)."""
    hosts: tuple[str, ...] = ()
    """Hosts (nodes) present in the trace."""
    health: Mapping[str, int] = field(default_factory=dict)
    """Counts of what went wrong or was repaired: dropped records, orphans, scrubbed secrets, ..."""
    notes: tuple[str, ...] = ()
    """One line per problem a human should know about (e.g. recovered partitions)."""
    clock_alignment: ClockAlignment | None = None
    """Per-host clock offsets of a multi-host trace (None: never estimated, as in stores of older ktrace)."""

    def to_json(self) -> str:
        """Serialise to the meta.json text (without clock_alignment when there is none, as older ktrace wrote)."""
        d = dataclasses.asdict(self)
        d["hosts"] = list(self.hosts)
        d["notes"] = list(self.notes)
        if self.clock_alignment is None:
            del d["clock_alignment"]
        else:
            d["clock_alignment"] = self.clock_alignment.to_dict()
        return json.dumps(d, indent=1, sort_keys=True, default=str)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TraceMeta:
        """Build from a decoded meta.json; unknown keys are dropped. ValueError if clock_alignment is malformed."""
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in names}
        alignment = kwargs.get("clock_alignment")
        if alignment is not None and not isinstance(alignment, ClockAlignment):
            if not isinstance(alignment, Mapping):
                raise ValueError("clock_alignment must be an object")
            kwargs["clock_alignment"] = ClockAlignment.from_dict(alignment)
        kwargs["hosts"] = tuple(kwargs.get("hosts", ()))
        kwargs["notes"] = tuple(kwargs.get("notes", ()))
        kwargs["health"] = {str(k): int(v) for k, v in dict(kwargs.get("health", {})).items()}
        return cls(**kwargs)

    def with_health(self, counts: Mapping[str, int], notes: tuple[str, ...] = ()) -> TraceMeta:
        """A copy with `counts` added to health and `notes` appended."""
        health = dict(self.health)
        for k, v in counts.items():
            health[k] = health.get(k, 0) + int(v)
        return dataclasses.replace(self, health=health, notes=self.notes + tuple(notes))


@dataclass(frozen=True)
class Problem:
    """One finding of Trace.validate()."""

    table: str
    column: str
    message: str
    rows: int
    """How many rows show the problem."""

    def __str__(self) -> str:
        return f"{self.table}.{self.column}: {self.message} ({self.rows} rows)"


def arrow_to_frame(table: pa.Table) -> pl.DataFrame:
    """Arrow table -> polars frame (dictionary strings become Categorical), without a row loop."""
    frame = pl.from_arrow(table, rechunk=False)
    assert isinstance(frame, pl.DataFrame)
    return frame


@functools.cache
def frame_schema(name: str) -> pl.Schema:
    """The polars schema of table `name` (dictionary strings are Categorical)."""
    return arrow_to_frame(SCHEMAS[name].empty_table()).schema


def frame_from_columns(table: pa.Table, name: str, constants: Mapping[str, object] | None = None) -> pl.DataFrame:
    """Table `name` as a polars frame from an Arrow table holding some of its columns.

    Present columns are cast to the schema where their type differs. `constants` fill whole columns (a
    partition's node and rank); other missing columns are null if nullable. Filled columns are polars scalar
    columns, which take no memory until used: at 10 M rows the all-null and node/rank columns of kernels and
    api would otherwise be ~0.8 GB of memory touched on every re-open.
    """
    schema = SCHEMAS[name]
    constants = constants or {}
    extra = set(table.column_names) - set(schema.names)
    if extra:
        raise ValueError(f"{name}: unknown column(s) {', '.join(sorted(extra))}")
    present = [c for c in table.column_names if c not in constants]
    columns = []
    for col_name in present:
        col, typ = table.column(col_name), schema.field(col_name).type
        if pa.types.is_dictionary(typ):
            col = _as_dictionary(col, typ)
        elif col.type != typ:
            col = col.cast(typ)
        columns.append(col)
    fields = [schema.field(c) for c in present]
    frame = arrow_to_frame(pa.Table.from_arrays(columns, schema=pa.schema(fields)))
    dtypes = frame_schema(name)
    fill = []
    for f in schema:
        if f.name in constants:
            fill.append(pl.lit(constants[f.name], dtypes[f.name]).alias(f.name))
        elif f.name not in frame.columns:
            if not f.nullable:
                raise ValueError(f"{name}: required column {f.name!r} is missing")
            fill.append(pl.lit(None, dtypes[f.name]).alias(f.name))
    return frame.with_columns(fill).select(schema.names) if fill else frame.select(schema.names)


def frame_to_arrow(frame: pl.DataFrame, name: str) -> pa.Table:
    """Polars frame -> Arrow table cast exactly to the schema of table `name`."""
    schema = SCHEMAS[name]
    table = frame.select([c for c in schema.names if c in frame.columns]).to_arrow()
    columns = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            if pa.types.is_dictionary(f.type) and pa.types.is_dictionary(col.type):
                col = _first_use_dictionary(col, f.type)
            else:
                col = col.cast(f.type)
        else:
            col = pa.nulls(table.num_rows, f.type)
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema)


def _first_use_dictionary(col: pa.ChunkedArray, typ: pa.DictionaryType) -> pa.ChunkedArray:
    """The dictionary column `col` (polars' export: a dictionary per chunk) as `typ`, every chunk sharing one
    dictionary of the strings its rows use in the order of their first use: what casting to strings and
    dictionary-encoding gives, without a string per row (that was ~100 MB at every store write of 0.9 M operator
    rows with shapes, issue 29). Only the chunks' indices (4 bytes a row) are remapped."""
    used = []
    for chunk in col.chunks:
        codes = pc.unique(chunk.indices).drop_null()
        used.append((codes, chunk.dictionary.take(codes).cast(pa.string())))
    first_use = pa.concat_arrays([values for _, values in used] or [pa.array([], pa.string())]).dictionary_encode()
    chunks, start = [], 0
    for chunk, (codes, values) in zip(col.chunks, used, strict=True):
        lookup = np.zeros(len(chunk.dictionary), np.int32)
        lookup[codes.to_numpy()] = first_use.indices.to_numpy()[start : start + len(values)]
        start += len(values)
        indices = pc.take(pa.array(lookup), chunk.indices).cast(typ.index_type)
        chunks.append(pa.DictionaryArray.from_arrays(indices, first_use.dictionary.cast(typ.value_type)))
    return pa.chunked_array(chunks, typ)


@dataclass(frozen=True)
class Trace:
    """A whole trace: every table of schema v1 as a polars frame, and its meta.

    Build one with TraceBuilder, ktrace.open() or Trace.from_arrow(); never mutate its frames
    (polars frames are values: every operation returns a new frame).
    """

    kernels: pl.DataFrame
    memory: pl.DataFrame
    syncs: pl.DataFrame
    api: pl.DataFrame
    ranges: pl.DataFrame
    ops: pl.DataFrame
    counters: pl.DataFrame
    threads: pl.DataFrame
    devices: pl.DataFrame
    allocations: pl.DataFrame
    samples: pl.DataFrame = field(
        default_factory=lambda: frame_from_columns(SCHEMAS["samples"].empty_table(), "samples")
    )
    """Python stack samples (schema.SAMPLES_COLUMNS); a default so that code building a Trace table by table
    before the table existed still works."""
    meta: TraceMeta = field(default_factory=TraceMeta)
    scrubbed: bool = field(default=False, init=False, repr=False, compare=False)
    """True only on a Trace that `scrub.scrub_trace` or `store.read` returned (set by `scrub.mark_scrubbed`): its
    tables hold nothing the current secret rules redact, so `store.write` does not scrub them again. A new Trace
    (a constructor, `dataclasses.replace`, a selection) starts False and is scrubbed when written."""

    @classmethod
    def from_arrow(cls, tables: Mapping[str, pa.Table], meta: TraceMeta | None = None) -> Trace:
        """Build a Trace from Arrow tables (missing tables are empty); each is cast to its schema."""
        unknown = set(tables) - set(TABLES)
        if unknown:
            raise ValueError(f"unknown table(s): {', '.join(sorted(unknown))}")
        frames: dict[str, pl.DataFrame] = {}
        for name in TABLES:
            table = tables.get(name)
            frames[name] = frame_from_columns(SCHEMAS[name].empty_table() if table is None else table, name)
        return cls(**frames, meta=meta or TraceMeta())

    def table(self, name: str) -> pl.DataFrame:
        """The frame of table `name` (one of ktrace.model.TABLES)."""
        if name not in TABLES:
            raise KeyError(name)
        frame: pl.DataFrame = getattr(self, name)
        return frame

    def to_arrow(self, name: str) -> pa.Table:
        """Table `name` as Arrow with exactly its schema."""
        return frame_to_arrow(self.table(name), name)

    def counts(self) -> dict[str, int]:
        """Rows per table."""
        return {name: self.table(name).height for name in TABLES}

    @property
    def ranks(self) -> list[tuple[str, int]]:
        """(node, rank) pairs present in any table, sorted."""
        seen: set[tuple[str, int]] = set()
        for name in TABLES:
            frame = self.table(name)
            if frame.height:  # unique() on the Categorical first: casting 10 M names to String costs seconds
                keys = frame.select("node", "rank")  # (one node and rank, as an import makes: no pass over the rows,
                one = keys.select(pl.all().n_unique()).row(0) == (1, 1)  # which held ~44 B/row: 1.8 GB at 41 M)
                pairs = keys.head(1) if one else keys.unique()
                seen.update((str(n), int(r)) for n, r in pairs.iter_rows())
        return sorted(seen)

    def span_ns(self) -> tuple[int, int] | None:
        """(first start, last end) over every span table, counter sample and allocator event, or None if empty."""
        lo: list[int] = []
        hi: list[int] = []
        for name in SPAN_TABLES:
            frame = self.table(name)
            if frame.height:
                lo.append(int(frame["start_ns"].min()))  # type: ignore[arg-type]
                hi.append(int(frame["end_ns"].max()))  # type: ignore[arg-type]
        for instants in (self.counters, self.allocations):
            if instants.height:
                lo.append(int(instants["ts_ns"].min()))  # type: ignore[arg-type]
                hi.append(int(instants["ts_ns"].max()))  # type: ignore[arg-type]
        return (min(lo), max(hi)) if lo else None

    def with_meta(self, meta: TraceMeta) -> Trace:
        """A copy with another meta."""
        return dataclasses.replace(self, meta=meta)

    def validate(self) -> list[Problem]:
        """Check types, end >= start, known enums and correlation sanity; return problems, never raise."""
        problems: list[Problem] = []
        for name in TABLES:
            problems.extend(_check_types(self.table(name), name))
        for name in SPAN_TABLES:
            frame = self.table(name)
            if {"start_ns", "end_ns"} <= set(frame.columns):
                bad = frame.filter(pl.col("end_ns") < pl.col("start_ns")).height
                if bad:
                    problems.append(Problem(name, "end_ns", "ends before it starts", bad))
                neg = frame.filter(pl.col("start_ns") <= 0).height
                if neg:
                    problems.append(Problem(name, "start_ns", "zero or negative timestamp", neg))
        for (name, column), allowed in ENUMS.items():
            frame = self.table(name)
            if column in frame.columns and frame.height:
                values = frame[column].cast(pl.String)
                bad = int((~values.is_in(list(allowed))).sum())
                if bad:
                    problems.append(Problem(name, column, f"value outside {allowed}", bad))
        problems.extend(_check_correlation(self))
        return problems


def conform(table: pa.Table, name: str) -> pa.Table:
    """Cast an Arrow table with a subset of table `name`'s columns to its full schema (nulls fill)."""
    schema = SCHEMAS[name]
    extra = set(table.column_names) - set(schema.names)
    if extra:
        raise ValueError(f"{name}: unknown column(s) {', '.join(sorted(extra))}")
    columns = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            if pa.types.is_dictionary(f.type):
                col = _as_dictionary(col, f.type)
            elif col.type != f.type:
                col = col.cast(f.type)
        elif not f.nullable:
            raise ValueError(f"{name}: required column {f.name!r} is missing")
        else:
            col = pa.nulls(table.num_rows, f.type)
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema)


def _as_dictionary(col: pa.ChunkedArray, typ: pa.DataType) -> pa.ChunkedArray:
    """A string column as dictionary<int32, string>, re-encoding only when it is not one already."""
    if col.type == typ:
        return col
    if pa.types.is_dictionary(col.type) and col.type.value_type in (pa.string(), pa.large_string()):
        try:
            return col.cast(typ)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    return col.cast(pa.string()).dictionary_encode().cast(typ)


def _check_types(frame: pl.DataFrame, name: str) -> list[Problem]:
    expected = frame_schema(name)
    problems = []
    for col, dtype in expected.items():
        if col not in frame.columns:
            problems.append(Problem(name, col, "column missing", frame.height))
        elif frame.schema[col] != dtype:
            problems.append(Problem(name, col, f"type {frame.schema[col]} instead of {dtype}", frame.height))
    for f in SCHEMAS[name]:
        if not f.nullable and f.name in frame.columns:
            nulls = frame[f.name].null_count()
            if nulls:
                problems.append(Problem(name, f.name, "nulls in a required column", nulls))
    return problems


def _check_correlation(trace: Trace) -> list[Problem]:
    """A correlation id should name at most one API call per (node, rank)."""
    api = trace.api.filter(pl.col("correlation_id").is_not_null() & (pl.col("correlation_id") != 0))
    if not api.height:
        return []
    dup = api.group_by("node", "rank", "correlation_id").len().filter(pl.col("len") > 1).height
    return [Problem("api", "correlation_id", "correlation id shared by several API calls", dup)] if dup else []
