"""Read-only, column-wise access to an Nsight Systems SQLite export: tables, columns, strings, enums."""

from __future__ import annotations

import functools
import itertools
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ktrace.model.errors import ProgressFn, TraceFormatError, no_progress

CHUNK_ROWS = 1 << 14
"""Rows fetched per round trip; each chunk becomes one Arrow record batch (and is what a corrupt page costs)."""

NULL_CODE = np.iinfo(np.int64).min
"""Stand-in for SQL NULL while decoding integer codes with numpy."""

READ_ERRORS: tuple[type[BaseException], ...] = (
    sqlite3.Error,
    pa.ArrowException,
    ValueError,
    TypeError,
    OverflowError,
    KeyError,
    IndexError,
    MemoryError,
)
"""What reading one corrupt table may raise; the importer drops that table and says so."""

_READ_PRAGMAS = (
    "PRAGMA writable_schema = ON",  # a truncated file: read the pages that exist instead of refusing the file
    "PRAGMA cell_size_check = ON",  # detect corrupt b-tree cells early (a clean error, never a crash)
    "PRAGMA trusted_schema = OFF",  # a hostile schema may not run functions
    "PRAGMA query_only = ON",
)
"""Set on every connection; the file is opened read-only (mode=ro) and never written."""

_ARROW_TYPES = {"int": pa.int64(), "float": pa.float64(), "text": pa.string()}
_NUMPY_TYPES = {"int": np.int64, "float": np.float64, "text": object}
_SQL_CASTS = {"int": "INTEGER", "float": "REAL", "text": "TEXT"}


@dataclass(frozen=True)
class Col:
    """One column to fetch: the first of `sources` the table has, cast to `kind` (int, float or text)."""

    sources: tuple[str, ...]
    kind: str = "int"


def col(*sources: str, kind: str = "int") -> Col:
    """Shorthand for Col(sources, kind)."""
    return Col(tuple(sources), kind)


@dataclass
class ImportLog:
    """Health counts and notes gathered while importing (what was dropped, repaired or scrubbed)."""

    health: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def count(self, key: str, n: int = 1) -> None:
        """Add `n` to health counter `key` (zero counts are recorded too: they are facts)."""
        self.health[key] = self.health.get(key, 0) + int(n)

    def problem(self, key: str, n: int) -> None:
        """Add `n` to health counter `key` only when there is something to report (n > 0)."""
        if n:
            self.count(key, n)

    def note(self, text: str) -> None:
        """Record one line a human should read."""
        if text not in self.notes:
            self.notes.append(text)

    def drop_table(self, table: str, reason: str) -> None:
        """Record that `table` could not be read and was left out."""
        self.count("nsys_tables_unreadable")
        self.note(f"{table}: dropped, could not be read ({one_line(reason)})")


def pairs(table: pa.Table, a: str, b: str) -> Iterator[tuple[Any, Any]]:
    """(a, b) value pairs of two columns of a small table (metadata, enums, string ids)."""
    return zip(table.column(a).to_pylist(), table.column(b).to_pylist(), strict=True)


def one_line(text: object, limit: int = 160) -> str:
    """`text` on one line, shortened to `limit` characters."""
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _to_arrow(rows: np.ndarray, i: int, kind: str) -> pa.Array:
    """Column `i` of a fetched chunk as Arrow, with its NULLs restored."""
    values = rows[f"c{i}"]
    if kind == "int":
        return pa.array(values, type=pa.int64(), mask=values == NULL_CODE)
    if kind == "float":
        return pa.array(values, type=pa.float64(), mask=rows[f"null{i}"])
    return pa.array(values, type=pa.string(), from_pandas=False)


def _decode_text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


class NsysDb:
    """An nsys export opened read-only; probes tables and columns instead of trusting a version number."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            self.conn.text_factory = _decode_text
            for pragma in _READ_PRAGMAS:
                self.conn.execute(pragma)
            rows = self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        except sqlite3.Error as exc:
            raise TraceFormatError(f"{path}: not a readable SQLite database ({one_line(exc)})") from None
        self.tables: frozenset[str] = frozenset(str(r[0]) for r in rows if isinstance(r[0], str))
        self._columns: dict[str, frozenset[str]] = {}
        self._strings: dict[int, str] | None = None
        self.truncated: dict[str, tuple[int, str]] = {}
        """Tables whose reading stopped at a corrupt or missing page: table -> (rows kept, reason)."""

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def has(self, table: str) -> bool:
        """True if the export has `table` (nsys omits tables of features that recorded nothing)."""
        return table in self.tables

    def columns(self, table: str) -> frozenset[str]:
        """Column names of `table` (empty if absent)."""
        if table not in self._columns:
            cols: frozenset[str] = frozenset()
            if table in self.tables:
                info = self.conn.execute(f'PRAGMA table_info("{table}")').fetchall()
                cols = frozenset(str(r[1]) for r in info)
            self._columns[table] = cols
        return self._columns[table]

    def count(self, table: str) -> int:
        """Rows in `table` (0 if absent)."""
        if table not in self.tables:
            return 0
        return int(self.conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])

    def fetch(
        self, table: str, spec: Mapping[str, Col], *, where: str = "", progress: Callable[[int], None] | None = None
    ) -> pa.Table:
        """Columns of `table` as an Arrow table (int64/float64/string, NULL -> null), fetched in chunks.

        Rows go straight from the cursor into a structured numpy array (np.fromiter), one chunk at a
        time: no list of rows, no transposition. Absent source columns come back as all-null. Values are
        CAST in SQL so that a cell of the wrong storage class (a corrupt or hand-made export) cannot
        break the typed conversion; integer NULLs travel as NULL_CODE, float NULLs with a flag column.
        """
        present = self.columns(table)
        exprs: list[str] = []
        fields: list[tuple[str, Any]] = []
        for i, c in enumerate(spec.values()):
            source = next((s for s in c.sources if s in present), None)
            value = f'CAST("{source}" AS {_SQL_CASTS[c.kind]})' if source else "NULL"
            if c.kind == "int":
                exprs.append(f"IFNULL({value}, {NULL_CODE})")
            elif c.kind == "float":
                exprs += [f"IFNULL({value}, 0.0)", f"({value}) IS NULL"]
                fields.append((f"null{i}", np.bool_))
            else:
                exprs.append(value)
            fields.insert(len(fields) - (c.kind == "float"), (f"c{i}", _NUMPY_TYPES[c.kind]))
        sql = f'SELECT {", ".join(exprs)} FROM "{table}"' + (f" WHERE {where}" if where else "")
        dtype = np.dtype(fields)
        cursor = self.conn.execute(sql)
        chunks: list[np.ndarray] = []
        try:
            while (chunk := np.fromiter(itertools.islice(cursor, CHUNK_ROWS), dtype=dtype)).size:
                chunks.append(chunk)
                if progress is not None:
                    progress(chunk.size)
        except sqlite3.DatabaseError as exc:
            if not chunks:
                raise
            # a truncated or damaged file: keep the rows before the bad page, say what was lost
            self.truncated[table] = (sum(c.size for c in chunks), one_line(exc))
        rows = np.concatenate(chunks) if chunks else np.zeros(0, dtype)
        return pa.table({name: _to_arrow(rows, i, c.kind) for i, (name, c) in enumerate(spec.items())})

    def strings(self) -> dict[int, str]:
        """StringIds as id -> text (empty if the table is absent or unreadable)."""
        if self._strings is None:
            self._strings = {}
            if self.has("StringIds"):
                t = self.fetch("StringIds", {"id": col("id"), "value": col("value", kind="text")})
                self._strings = {int(i): v for i, v in pairs(t, "id", "value") if i is not None and v is not None}
        return self._strings

    def enum(self, table: str) -> dict[int, str]:
        """An ENUM_* table as id -> upper-case name ({} if absent); nsys's enums are not CUPTI's."""
        if not self.has(table):
            return {}
        t = self.fetch(table, {"id": col("id"), "name": col("name", kind="text")})
        return {int(i): str(n).upper() for i, n in pairs(t, "id", "name") if i is not None and n is not None}

    def key_values(self, table: str, key: str = "name", value: str = "value") -> list[tuple[str, str]]:
        """(key, value) rows of a metadata table such as META_DATA_EXPORT ([] if absent)."""
        if not self.has(table):
            return []
        t = self.fetch(table, {"k": col(key, kind="text"), "v": col(value, kind="text")})
        return [(k, v if v is not None else "") for k, v in pairs(t, "k", "v") if k is not None]


class MissingColumns(ValueError):
    """A table lacks a column the importer cannot do without (an unknown or damaged schema)."""


def require(db: NsysDb, table: str, spec: Mapping[str, Col], required: Sequence[str]) -> None:
    """Raise MissingColumns unless `table` has a source column for each of `required`."""
    present = db.columns(table)
    missing = [name for name in required if not any(s in present for s in spec[name].sources)]
    if missing:
        names = ", ".join("/".join(spec[m].sources) for m in missing)
        raise MissingColumns(f"no column {names}: unknown schema")


@functools.lru_cache(maxsize=256)
def scalar(value: int | str | None, kind: str = "int") -> pa.Scalar:
    """A cached Arrow scalar: building one from a Python object costs more than the kernel it feeds."""
    return pa.scalar(value, type=_ARROW_TYPES[kind])


def codes_to_numpy(codes: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Integer codes as int64 numpy with NULL_CODE for nulls."""
    filled = pc.fill_null(codes, scalar(NULL_CODE))
    return np.asarray(filled.to_numpy(), dtype=np.int64)


def decode(
    codes: pa.Array | pa.ChunkedArray, label: Callable[[int], str | None], default: str
) -> tuple[pa.DictionaryArray, int]:
    """Map integer codes to labels through their unique values (one lookup per distinct code, not per row).

    Returns the dictionary-encoded labels and how many rows had no label (they get `default`).
    """
    values = codes_to_numpy(codes)
    uniques, inverse = np.unique(values, return_inverse=True)
    labels = [None if u == NULL_CODE else label(int(u)) for u in uniques]
    missing = np.array([lab is None for lab in labels], dtype=bool)
    unresolved = int(np.bincount(inverse.ravel(), minlength=len(uniques))[missing].sum()) if missing.any() else 0
    dictionary = pa.array([default if lab is None else lab for lab in labels], type=pa.string())
    indices = pa.array(inverse.ravel().astype(np.int32))
    return pa.DictionaryArray.from_arrays(indices, dictionary), unresolved


def labels_from(
    table: Mapping[int, str],
    convert: Callable[[str], str | None] = lambda s: s,
    fallback: Mapping[int, str] | None = None,
) -> Callable[[int], str | None]:
    """A label function: code -> convert(table[code]) (or fallback[code] when the enum table is absent)."""
    source = table or (fallback or {})

    def label(code: int) -> str | None:
        name = source.get(code)
        return None if name is None else convert(name)

    return label


def first_number(text: str | None) -> int | None:
    """The leading integer of a version string such as "3.20.2" (None if there is none)."""
    m = re.match(r"\s*(\d+)", text or "")
    return int(m.group(1)) if m else None


def fit_int32(values: pa.Array | pa.ChunkedArray, log: ImportLog) -> pa.Array:
    """int64 values as int32, out-of-range values (corrupt cells) turned into nulls and counted."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    ok = pc.and_(pc.greater_equal(arr, scalar(-(2**31))), pc.less(arr, scalar(2**31)))
    bad = int(pc.sum(pc.invert(ok)).as_py() or 0)
    if bad:
        log.count("nsys_values_out_of_range", bad)
        arr = pc.if_else(ok, arr, scalar(None))
    return arr.cast(pa.int32())


def fetch_rows(
    db: NsysDb,
    table: str,
    spec: Mapping[str, Col],
    required: Sequence[str],
    log: ImportLog,
    advance: Callable[[int], None],
) -> pa.Table:
    """`table`'s columns in `spec` (the `required` ones must exist), without the rows missing a required value."""
    require(db, table, spec, required)
    return keep_rows(db.fetch(table, spec, progress=advance), required, log, table)


def to_epoch(values: pa.ChunkedArray | pa.Array, offset: int) -> pa.Array:
    """nsys timestamps (ns since the session start) + the session's epoch offset."""
    return pc.add(values, scalar(offset))


def keep_rows(table: pa.Table, required: Sequence[str], log: ImportLog, what: str) -> pa.Table:
    """`table` without the rows that have a null in a required column (counted as dropped)."""
    if not table.num_rows:
        return table
    mask = None
    for name in required:
        valid = pc.is_valid(table.column(name))
        mask = valid if mask is None else pc.and_(mask, valid)
    if mask is None:
        return table
    kept = table.filter(mask)
    dropped = table.num_rows - kept.num_rows
    if dropped:
        log.count("nsys_rows_dropped", dropped)
        log.note(f"{what}: {dropped} row(s) without {'/'.join(required)} dropped")
    return kept


def no_progress_rows(n: int) -> None:
    """A row-progress callback that shows nothing."""


def row_progress(progress: ProgressFn, total: int) -> Callable[[int], None]:
    """Turn a (done, total) ProgressFn into a callback that takes rows just read."""
    if progress is no_progress:
        return no_progress_rows
    done = [0]

    def advance(n: int) -> None:
        done[0] += n
        progress(min(done[0], total), total)

    return advance
