"""Sort decoded Kineto events by kind and turn each slice into Arrow columns (no row objects kept)."""

from __future__ import annotations

import itertools
import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from ktrace.importers.kineto_combine import combined, slimmed
from ktrace.importers.kineto_decode_report import DecodeReport
from ktrace.importers.kineto_limits import MAX_TABLE_BYTES, TablesFull
from ktrace.importers.kineto_memory import MEMORY_EVENT, NO_MEM_ARGS, decode_mem_args
from ktrace.importers.kineto_schema import (
    KIND_OF_CATEGORY,
    KINDS,
    KNOWN_CATEGORIES,
    NO_OP_ARGS,
    OPS_KINDS,
    SKIPPED,
    SKIPPED_OP,
    Args,
    Event,
    EventSlice,
    ExactEvent,
    code_of_type,
    decode_args,
    decode_events,
)
from ktrace.importers.kineto_shapes import normalize_json, shapes_array
from ktrace.importers.kineto_times import LostNanoseconds, ts_columns

_CODE_OF_CATEGORY: dict[str, int] = {
    **{cat: SKIPPED for cat in KNOWN_CATEGORIES},
    **{cat: KINDS.index(k) + 1 for cat, k in KIND_OF_CATEGORY.items()},
}
"""Category -> code (see kineto_schema.KINDS); events with no or an unknown category get -1."""
_CAT = operator.attrgetter("cat")
_UNKNOWN = itertools.repeat(-1)
STEP_PREFIX = "ProfilerStep#"
_DIGITS = re.compile(r"-?\d+")


def to_int(value: Any) -> int | None:
    """An id or count from a JSON value of any type ("stream 7" -> 7, 3.0 -> 3, 2.5 -> 2: truncated toward zero, as
    int_array's typed fast path converts floats); None if there is none."""
    if type(value) is int:
        return value if -(2**63) <= value < 2**63 else None
    if isinstance(value, float) and math.isfinite(value) and abs(value) < 2**63:
        return int(value)
    if isinstance(value, str):
        m = _DIGITS.search(value)
        if m and len(m.group()) < 19:
            return int(m.group())
    return None


def int_array(values: Sequence[Any]) -> pa.Array:
    """Nullable int64 Arrow array; fast when values are ints/None, tolerant otherwise."""
    try:
        return pa.array(values, type=pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array(_to_ints(values), type=pa.int64())


def id_array(values: Sequence[Any]) -> pa.Array:
    """A pid or tid column: `int_array`, with 0 where a value is no 64-bit integer ("main", -10**30), as where it is
    of no id type at all (kineto_schema.coerce_event): the columns are required (a null in them was a traceback)."""
    ids = int_array(values)
    return ids.fill_null(0) if ids.null_count else ids


def _to_ints(values: Sequence[Any]) -> list[int | None]:
    """`to_int` of every value, computed once per distinct (type, value): ids repeat (PyTorch 1.9 wrote every
    tid as a string, so all of a trace's CPU events took the regex, ~1 us each, for a handful of distinct tids)."""
    numeric = set(map(type, values)) - {str, type(None)}
    # equal numbers of different types (True, 1, 1.0) are one dict key but not one id: key those by (type, value)
    keys: Sequence[Any] = values if len(numeric) <= 1 else list(zip(map(type, values), values, strict=True))
    try:
        memo = {key: to_int(key if keys is values else key[1]) for key in set(keys)}
    except TypeError:  # an unhashable value (a list or an object where an id belongs)
        return [to_int(v) for v in values]
    return list(map(memo.__getitem__, keys))


def str_array(values: Sequence[Any]) -> pa.Array:
    """Nullable dictionary-encoded string array; non-strings become null."""
    return pa.array([v if type(v) is str else None for v in values], type=pa.string()).dictionary_encode()


def _place(primary: Sequence[Any], fallback: Sequence[int | str]) -> pa.Array:
    """args.device/args.stream where present, else the event's pid/tid (which may be "stream 7")."""
    merged = [p if p is not None else f for p, f in zip(primary, fallback, strict=True)]
    return int_array(merged)


def _triples(values: Sequence[Any]) -> list[pa.Array]:
    ok = [v if type(v) is list and len(v) == 3 else (None, None, None) for v in values]
    return [int_array([t[i] for t in ok]) for i in range(3)]


def _common(evs: list[Event]) -> dict[str, pa.Array]:
    return {
        **ts_columns([e.ts for e in evs]),
        "dur": pa.array([e.dur for e in evs], type=pa.float64()),
        "name": pa.array([e.name for e in evs], type=pa.string()).dictionary_encode(),
    }


def _gpu_columns(evs: list[Event], args: list[Args]) -> dict[str, pa.Array]:
    return {
        **_common(evs),
        "device": _place([a.device for a in args], [e.pid for e in evs]),
        "stream": _place([a.stream for a in args], [e.tid for e in evs]),
        "context_id": int_array([a.context for a in args]),
        "correlation_id": int_array([a.correlation for a in args]),
        "external_id": int_array([a.external_id if a.external_id is not None else a.external_id_old for a in args]),
    }


def _cpu_columns(evs: list[Event], args: list[Args]) -> dict[str, pa.Array]:
    return {
        **_common(evs),
        "pid": id_array([e.pid for e in evs]),
        "tid": id_array([e.tid for e in evs]),
        "external_id": int_array([a.external_id if a.external_id is not None else a.external_id_old for a in args]),
    }


def _percent(values: pa.Array) -> pa.Array:
    """A percentage column: null where a value is not within 0-100 (it is no estimate, and fits int32)."""
    v = values.fill_null(-1).to_numpy()
    bad = (v < 0) | (v > 100)
    return pa.array(np.where(bad, 0, v), pa.int32(), mask=bad)


def kernel_columns(evs: list[Event], args: list[Args]) -> dict[str, pa.Array]:
    """Raw columns of kernel events (times still in µs)."""
    cols = _gpu_columns(evs, args)
    cols["grid_x"], cols["grid_y"], cols["grid_z"] = _triples([a.grid for a in args])
    cols["block_x"], cols["block_y"], cols["block_z"] = _triples([a.block for a in args])
    cols["registers_per_thread"] = int_array([a.registers for a in args])
    cols["static_shared_bytes"] = int_array([a.shared for a in args])
    cols["graph_id"] = int_array([a.graph_id for a in args])
    cols["graph_node_id"] = int_array([a.graph_node_id for a in args])
    cols["est_occupancy_pct"] = _percent(int_array([a.occupancy for a in args]))
    if any(a.collective is not None for a in args):
        cols["collective"] = str_array([a.collective for a in args])
        cols["in_nelems"] = int_array([a.in_nelems for a in args])
        cols["out_nelems"] = int_array([a.out_nelems for a in args])
        cols["comm_dtype"] = str_array([a.dtype for a in args])
        cols["group_size"] = int_array([a.group_size for a in args])
        cols["process_group"] = str_array([a.process_group for a in args])
    return cols


def memory_columns(evs: list[Event], args: list[Args]) -> dict[str, pa.Array]:
    """Raw columns of memcpy/memset events."""
    cols = _gpu_columns(evs, args)
    cols["bytes"] = int_array([a.nbytes for a in args])
    cols["graph_id"] = int_array([a.graph_id for a in args])
    return cols


def sync_columns(evs: list[Event], args: list[Args]) -> dict[str, pa.Array]:
    """Raw columns of cuda_sync events; the sync kind falls back to the event name."""
    cols = _gpu_columns(evs, args)
    cols["sync_kind"] = str_array(
        [a.sync_kind if type(a.sync_kind) is str else e.name for a, e in zip(args, evs, strict=True)]
    )
    cols["event_id"] = int_array([a.wait_event for a in args])
    cols["wait_stream"] = int_array([a.wait_stream for a in args])
    cols["wait_correlation_id"] = int_array([a.wait_correlation for a in args])
    return cols


def api_columns(evs: list[Event], args: list[Args]) -> dict[str, pa.Array]:
    """Raw columns of runtime/driver calls."""
    cols = _cpu_columns(evs, args)
    cols["correlation_id"] = int_array([a.correlation for a in args])
    cols["cbid"] = int_array([a.cbid for a in args])
    return cols


def range_columns(evs: list[Event], args: list[Args]) -> dict[str, pa.Array]:
    """Raw columns of CPU-side annotations."""
    return _cpu_columns(evs, args)


def gpu_range_columns(evs: list[Event], args: list[Args]) -> dict[str, pa.Array]:
    """Raw columns of GPU-side annotations."""
    return _gpu_columns(evs, args)


def op_columns(evs: list[Event], args: list[Args]) -> dict[str, pa.Array]:
    """Raw columns of framework operators (cpu_op)."""
    cols = _cpu_columns(evs, args)
    cols["sequence_number"] = int_array([a.sequence for a in args])
    cols["input_dims"] = shapes_array([a.input_dims for a in args])
    cols["input_types"] = shapes_array([a.input_types for a in args], normalize_json)
    cols["concrete_inputs"] = shapes_array([a.concrete_inputs for a in args], normalize_json)
    return cols


def alloc_columns(evs: list[Event], args: list[Any]) -> dict[str, pa.Array]:
    """Raw columns of caching-allocator events (args are kineto_schema.MemArgs)."""
    return {
        **ts_columns([e.ts for e in evs]),
        "dur": pa.array(np.zeros(len(evs))),
        "pid": int_array([e.pid for e in evs]),  # nullable here: an allocator event may name no process
        "tid": int_array([e.tid for e in evs]),
        "device_type": int_array([a.device_type for a in args]),
        "device": int_array([a.device for a in args]),
        "address": int_array([a.address for a in args]),
        "bytes": int_array([a.nbytes for a in args]),
        "total_allocated": int_array([a.total_allocated for a in args]),
        "total_reserved": int_array([a.total_reserved for a in args]),
    }


def python_columns(evs: list[Event]) -> dict[str, pa.Array]:
    """Raw columns of Python frames (python_function): their args (Python ids) are not read."""
    return {**_common(evs), "pid": id_array([e.pid for e in evs]), "tid": id_array([e.tid for e in evs])}


BUILDERS: dict[str, Callable[[list[Event], list[Any]], dict[str, pa.Array]]] = {
    "kernel": kernel_columns,
    "memcpy": memory_columns,
    "memset": memory_columns,
    "sync": sync_columns,
    "runtime": api_columns,
    "driver": api_columns,
    "annotation": range_columns,
    "gpu_annotation": gpu_range_columns,
    "op": op_columns,
    "alloc": alloc_columns,
}


@dataclass
class Staged:
    """What one slice adds to an EventSink, kept apart until the slice has been read exactly."""

    tables: list[tuple[str, pa.Table]] = field(default_factory=list)
    meta_events: list[tuple[str, int | str, int | str, Any]] = field(default_factory=list)
    known_other: int = 0
    skipped_ops: int = 0
    args_report: DecodeReport = field(default_factory=DecodeReport)
    """Counts args that had to be coerced (added to the sink's report once the slice is kept)."""


@dataclass
class EventSink:
    """Accumulates per-kind Arrow tables, slice by slice, plus the few metadata events."""

    with_ops: bool = True
    report: DecodeReport = field(default_factory=DecodeReport)
    parts: dict[str, list[pa.Table]] = field(default_factory=dict)
    meta_events: list[tuple[str, int | str, int | str, Any]] = field(default_factory=list)
    categories: dict[str, int] = field(default_factory=dict)
    """Events seen per raw category (only categories ktrace maps, plus a count of known others)."""
    known_other: int = 0
    skipped_ops: int = 0
    table_bytes: int = 0
    """Bytes of the columns in `parts`."""
    max_table_bytes: int = MAX_TABLE_BYTES
    """`merge` raises TablesFull once `table_bytes` passes this (kineto_limits.MAX_TABLE_BYTES)."""

    def add(self, piece: EventSlice) -> None:
        """Bucket one decoded slice by kind (no Python branch per event) and convert each bucket to columns.

        A slice whose epoch timestamps have fractions float64 cannot hold is decoded again, exactly (and so
        are the slices after it: report.exact_ts).
        """
        self.merge(self.stage(piece))

    def stage(self, piece: EventSlice) -> Staged:
        """The columns one slice adds, not yet added (sets report.exact_ts if the slice needed exact times)."""
        try:
            return self._stage(piece.events)
        except LostNanoseconds:
            self.report.exact_ts = True
            return self._stage(decode_events(piece.text, DecodeReport(), self.with_ops, exact=True))

    def merge(self, staged: Staged) -> None:
        """Add what `stage` made of a slice (slices are merged in file order).

        Raises:
            TablesFull: the tables now hold more than `max_table_bytes` (this slice's rows are kept).
        """
        self.known_other += staged.known_other
        self.skipped_ops += staged.skipped_ops
        self.meta_events += staged.meta_events
        self.report.repaired_events += staged.args_report.repaired_events
        for kind, table in staged.tables:
            self.categories[kind] = self.categories.get(kind, 0) + table.num_rows
            self.parts.setdefault(kind, []).append(table)
            self.table_bytes += table.nbytes
        if self.table_bytes > self.max_table_bytes:
            raise TablesFull(self.table_bytes, self.max_table_bytes)

    def _stage(self, events: list[Any]) -> Staged:
        staged = Staged()
        if not events:
            return staged
        n = len(events)
        if type(events[0]) in (Event, ExactEvent):  # slow-path slice: kinds from the category strings
            codes = np.fromiter(map(_CODE_OF_CATEGORY.get, map(_CAT, events), _UNKNOWN), np.int8, count=n)
        else:
            code_of = code_of_type(self.with_ops)
            codes = np.fromiter(map(code_of.__getitem__, map(type, events)), np.int8, count=n)
        present = np.bincount(codes + 1, minlength=len(KINDS) + 3)
        staged.known_other += int(present[SKIPPED + 1])
        staged.skipped_ops += int(present[SKIPPED_OP + 1])
        if present[0]:
            other = [events[i] for i in np.flatnonzero(codes == -1).tolist()]
            staged.meta_events += [(e.name, e.pid, e.tid, _meta_label(e.args)) for e in other if e.ph == "M"]
            # PyTorch 1.9 wrote allocator events without a category
            self._stage_kind(staged, "alloc", [e for e in other if e.ph == "i" and e.name == MEMORY_EVENT])
        for code in (np.flatnonzero(present[2 : SKIPPED_OP + 1]) + 1).tolist():
            at = np.flatnonzero(codes == code).tolist()
            kind = KINDS[code - 1]
            if kind == "alloc":
                self._stage_kind(staged, "alloc", [e for e in map(events.__getitem__, at) if e.name == MEMORY_EVENT])
                continue
            evs = [e for e in map(events.__getitem__, at) if e.ph == "X"]
            if kind == "op":
                steps = [e for e in evs if e.name.startswith(STEP_PREFIX)]
                if steps:  # PyTorch 1.9 wrote ProfilerStep#N as an Operator
                    self._stage_kind(staged, "annotation", steps)
                    evs = [e for e in evs if not e.name.startswith(STEP_PREFIX)]
            if kind in OPS_KINDS and not self.with_ops:
                staged.skipped_ops += len(evs)
                continue
            self._stage_kind(staged, kind, evs)
        return staged

    def _stage_kind(self, staged: Staged, kind: str, evs: list[Event]) -> None:
        if not evs:
            return
        if kind == "python":
            staged.tables.append((kind, pa.table(python_columns(evs))))
            return
        raws = [e.args for e in evs]
        # operators and allocator events of the fast path come with their args decoded (kineto_schema._TYPED_ARGS);
        # others, and every event of a slow-path slice, are raw JSON
        args: list[Any]
        if type(raws[0]) is not msgspec.Raw:
            args = [a or (NO_MEM_ARGS if kind == "alloc" else NO_OP_ARGS) for a in raws]
        elif kind == "alloc":
            args = decode_mem_args(raws, staged.args_report)
        else:
            args = decode_args(raws, staged.args_report)
        staged.tables.append((kind, slimmed(pa.table(BUILDERS[kind](evs, args)), kind)))

    def table(self, kind: str) -> pa.Table | None:
        """All rows of one kind, or None if there were none. The kind's slices are handed over (kineto_combine):
        a second call returns None."""
        parts = self.parts.pop(kind, None)
        return combined(parts) if parts else None


def _meta_label(raw: msgspec.Raw) -> Any:
    """args.name (process/thread names) or args.labels ("GPU 0") of a metadata event."""
    try:
        args = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    return (args.get("name") or args.get("labels")) if isinstance(args, dict) else None
