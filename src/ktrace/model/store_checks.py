"""What `store.read` checks before it trusts a .ktrace folder: meta.json, partition.json, rank names, columns.

Every check raises a one-line TraceFormatError (exit 3) naming the file and what is wrong with it, so a
hand-edited or half-written store never becomes a traceback or, worse, a trace that opens as valid.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ktrace.model.clock import ClockAlignment
from ktrace.model.errors import TraceFormatError
from ktrace.model.schema import SCHEMA_VERSION, SCHEMAS
from ktrace.model.trace import TraceMeta

MAX_TIME_NS = 2**63 - 2**57
"""The largest time (ns) a store may hold: above the Kineto importer's 2**53 us, with room for the sums analyses
make (an end_ns of 2**63 - 1 overflowed the critical path)."""

_META_FIELDS: dict[str, type | tuple[type, ...]] = {
    "source": str,
    "schema_version": int,
    "created": str,
    "clock": str,
    "job": dict,
    "capture": dict,
    "hosts": list,
    "health": dict,
    "notes": list,
    "clock_alignment": dict,
}
_MAX_JSON_BYTES = 64 << 20


def load_json_object(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in `path`, or TraceFormatError saying why it is not one."""
    if path.is_dir():
        raise TraceFormatError(f"{path}: is a folder, not the {what} file")
    if not path.is_file():  # a FIFO would block the reader, a device never end
        raise TraceFormatError(f"{path}: is not a regular file, not the {what} file")
    try:
        with path.open("rb") as f:
            data = f.read(_MAX_JSON_BYTES + 1)
        if len(data) > _MAX_JSON_BYTES:
            raise TraceFormatError(f"{path}: {what} is larger than {_MAX_JSON_BYTES >> 20} MB")
        value = json.loads(data)
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    except RecursionError:
        raise TraceFormatError(f"{path}: {what} is nested too deeply to be ktrace's") from None
    except ValueError as exc:
        raise TraceFormatError(f"{path}: {what} is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise TraceFormatError(f"{path}: {what} holds a JSON {type(value).__name__}, not an object")
    return value


def check_meta(meta: Mapping[str, Any], path: Path) -> None:
    """Raise TraceFormatError unless `meta` is a meta.json this ktrace reads (right keys, types, version)."""
    if "schema_version" not in meta:
        raise TraceFormatError(f"{path}: no schema_version: not a ktrace meta.json")
    for key, kind in _META_FIELDS.items():
        value = meta.get(key)
        if key in meta and (not isinstance(value, kind) or isinstance(value, bool)):
            raise TraceFormatError(f"{path}: {key} is {_kind(value)}, expected {_kind_name(kind)}")
    version = meta["schema_version"]
    if version != SCHEMA_VERSION:
        newer = "a newer" if version > SCHEMA_VERSION else "an older"
        raise TraceFormatError(
            f"{path}: schema_version {version} (written by {newer} ktrace); this ktrace reads schema v{SCHEMA_VERSION}"
        )
    _check_items(meta.get("hosts", []), str, path, "hosts")
    _check_items(meta.get("notes", []), str, path, "notes")
    check_health(meta.get("health", {}), path)
    if "clock_alignment" in meta:
        try:
            ClockAlignment.from_dict(meta["clock_alignment"])
        except ValueError as exc:
            raise TraceFormatError(f"{path}: {exc}") from None
        except TypeError as exc:  # a field it needs is missing: "HostClock.__init__() missing 1 required ..."
            raise TraceFormatError(f"{path}: clock_alignment is not ktrace's ({exc})") from None


def checked_meta(path: Path) -> TraceMeta:
    """The TraceMeta of the meta.json at `path`, checked (`check_meta`) before it is trusted."""
    data = load_json_object(path, "meta.json")
    check_meta(data, path)
    return TraceMeta.from_dict(data)


@contextlib.contextmanager
def unreadable_parquet(path: Path) -> Iterator[None]:
    """Around reading the Parquet file `path` (its footer, its rows): an Arrow or OS error becomes one line,
    `PATH: unreadable Parquet (why)`."""
    try:
        yield
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceFormatError(f"{path}: unreadable Parquet ({exc})") from exc


def check_health(health: Mapping[str, Any], path: Path) -> None:
    """health must map names to integer counts."""
    for k, v in health.items():
        if not isinstance(v, int) or isinstance(v, bool):
            raise TraceFormatError(f"{path}: health[{k!r}] is {_kind(v)}, expected an integer count")


def check_partition_meta(part: Mapping[str, Any], path: Path) -> None:
    """A partition.json: {"health": {name: int}, "notes": [str]}."""
    health, notes = part.get("health", {}), part.get("notes", [])
    if not isinstance(health, dict):
        raise TraceFormatError(f"{path}: health is {_kind(health)}, expected an object")
    if not isinstance(notes, list):
        raise TraceFormatError(f"{path}: notes is {_kind(notes)}, expected a list")
    check_health(health, path)
    _check_items(notes, str, path, "notes")


def check_columns(schema: pa.Schema, name: str, path: Path) -> None:
    """The file's columns must be columns of table `name`, of a type that converts to the schema's."""
    expected = SCHEMAS[name]
    extra = [c for c in schema.names if c not in expected.names and c not in ("node", "rank")]
    if extra:
        raise TraceFormatError(f"{path}: unknown column(s) {', '.join(extra[:5])} for table {name}")
    for f in schema:
        if f.name in expected.names and not _convertible(f.type, expected.field(f.name).type):
            raise TraceFormatError(f"{path}: column {f.name} is {f.type}, expected {expected.field(f.name).type}")
    missing = [
        f.name for f in expected if not f.nullable and f.name not in schema.names and f.name not in ("node", "rank")
    ]
    if missing:
        raise TraceFormatError(f"{path}: required column(s) {', '.join(missing)} missing from table {name}")


def check_values(table: pa.Table, name: str, path: Path) -> None:
    """Every row has a value in each column table `name` requires, and every time (`*_ns`) is within
    MAX_TIME_NS: a crafted file's null start_ns, or an end_ns of 2**63 - 1, was a traceback in every verb. About
    5 ms per column of 10 M rows."""
    for f in SCHEMAS[name]:
        if f.name not in table.column_names:
            continue
        column = table.column(f.name)
        if not f.nullable and column.null_count:
            raise TraceFormatError(
                f"{path}: column {f.name} is empty in {column.null_count:,} row(s); table {name} needs it in all"
            )
        if f.name.endswith("_ns") and pa.types.is_integer(column.type) and len(column) > column.null_count:
            lo, hi = (v.as_py() for v in pc.min_max(column).values())
            worst = lo if abs(lo) > abs(hi) else hi
            if abs(worst) > MAX_TIME_NS:
                raise TraceFormatError(
                    f"{path}: column {f.name} holds {worst}, not a time in ns (within +/-{MAX_TIME_NS:.3g})"
                )


def _convertible(actual: pa.DataType, wanted: pa.DataType) -> bool:
    if actual == wanted or pa.types.is_null(actual):
        return True
    if pa.types.is_dictionary(actual):
        actual = actual.value_type
    if pa.types.is_dictionary(wanted):
        wanted = wanted.value_type
    if pa.types.is_string(wanted) or pa.types.is_large_string(wanted):
        return pa.types.is_string(actual) or pa.types.is_large_string(actual)
    if pa.types.is_integer(wanted):
        return pa.types.is_integer(actual)
    if pa.types.is_floating(wanted):
        return pa.types.is_floating(actual) or pa.types.is_integer(actual)
    return bool(actual == wanted)


def _check_items(values: list[Any], kind: type, path: Path, key: str) -> None:
    for v in values:
        if not isinstance(v, kind):
            raise TraceFormatError(f"{path}: {key} holds {_kind(v)}, expected {_kind_name(kind)} items")


def _kind(value: Any) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", dict: "an object", list: "a list"}
    return names.get(kind, str(kind)) if isinstance(kind, type) else "/".join(map(str, kind))
