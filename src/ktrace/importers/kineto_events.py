"""Sort decoded Kineto events by kind and turn each slice into Arrow columns (no row objects kept)."""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from ktrace.importers.kineto_schema import (
    KIND_OF_CATEGORY,
    KINDS,
    KNOWN_CATEGORIES,
    NO_OP_ARGS,
    SKIPPED,
    SKIPPED_OP,
    Args,
    DecodeReport,
    Event,
    decode_args,
    tagged_decoder,
)

_CODE_OF_CATEGORY: dict[str, int] = {
    **{cat: SKIPPED for cat in KNOWN_CATEGORIES}, **{cat: KINDS.index(k) + 1 for cat, k in KIND_OF_CATEGORY.items()}}
"""Category -> code (see kineto_schema.KINDS); events with no or an unknown category get -1."""
_CAT = operator.attrgetter("cat")
_UNKNOWN = itertools.repeat(-1)
STEP_PREFIX = "ProfilerStep#"
_DIGITS = re.compile(r"-?\d+")


def to_int(value: Any) -> int | None:
    """An id or count from a JSON value of any type ("stream 7" -> 7, 3.0 -> 3); None if there is none."""
    if type(value) is int:
        return value if -(2**63) <= value < 2**63 else None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
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
        return pa.array([to_int(v) for v in values], type=pa.int64())


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
        "ts": pa.array([e.ts for e in evs], type=pa.float64()),
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
        "external_id": int_array([a.external_id if a.external_id is not None else a.external_id_old
                                  for a in args]),
    }


def _cpu_columns(evs: list[Event], args: list[Args]) -> dict[str, pa.Array]:
    return {
        **_common(evs),
        "pid": int_array([e.pid for e in evs]),
        "tid": int_array([e.tid for e in evs]),
        "external_id": int_array([a.external_id if a.external_id is not None else a.external_id_old
                                  for a in args]),
    }


def kernel_columns(evs: list[Event], args: list[Args]) -> dict[str, pa.Array]:
    """Raw columns of kernel events (times still in µs)."""
    cols = _gpu_columns(evs, args)
    cols["grid_x"], cols["grid_y"], cols["grid_z"] = _triples([a.grid for a in args])
    cols["block_x"], cols["block_y"], cols["block_z"] = _triples([a.block for a in args])
    cols["registers_per_thread"] = int_array([a.registers for a in args])
    cols["static_shared_bytes"] = int_array([a.shared for a in args])
    cols["graph_id"] = int_array([a.graph_id for a in args])
    cols["graph_node_id"] = int_array([a.graph_node_id for a in args])
    if any(a.collective is not None for a in args):
        cols["collective"] = str_array([a.collective for a in args])
        cols["in_nelems"] = int_array([a.in_nelems for a in args])
        cols["out_nelems"] = int_array([a.out_nelems for a in args])
        cols["comm_dtype"] = str_array([a.dtype for a in args])
        cols["group_size"] = int_array([a.group_size for a in args])
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
    cols["sync_kind"] = str_array([a.sync_kind if type(a.sync_kind) is str else e.name
                                   for a, e in zip(args, evs, strict=True)])
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
    return cols


BUILDERS: dict[str, Callable[[list[Event], list[Args]], dict[str, pa.Array]]] = {
    "kernel": kernel_columns, "memcpy": memory_columns, "memset": memory_columns, "sync": sync_columns,
    "runtime": api_columns, "driver": api_columns, "annotation": range_columns,
    "gpu_annotation": gpu_range_columns, "op": op_columns,
}


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

    def add(self, events: list[Any]) -> None:
        """Bucket one decoded slice by kind (no Python branch per event) and convert each bucket to columns."""
        if not events:
            return
        n = len(events)
        if type(events[0]) is Event:  # slow-path slice: kinds from the category strings
            codes = np.fromiter(map(_CODE_OF_CATEGORY.get, map(_CAT, events), _UNKNOWN), np.int8, count=n)
        else:
            code_of = tagged_decoder(self.with_ops)[1]
            codes = np.fromiter(map(code_of.__getitem__, map(type, events)), np.int8, count=n)
        present = np.bincount(codes + 1, minlength=len(KINDS) + 3)
        self.known_other += int(present[SKIPPED + 1])
        self.skipped_ops += int(present[SKIPPED_OP + 1])
        if present[0]:
            self._add_uncategorised([events[i] for i in np.flatnonzero(codes == -1).tolist()])
        op_code = KINDS.index("op") + 1
        for code in (np.flatnonzero(present[2:SKIPPED_OP + 1]) + 1).tolist():
            evs = [e for e in (events[i] for i in np.flatnonzero(codes == code).tolist()) if e.ph == "X"]
            if code == op_code:
                steps = [e for e in evs if e.name.startswith(STEP_PREFIX)]
                if steps:  # PyTorch 1.9 wrote ProfilerStep#N as an Operator
                    self._add_kind("annotation", steps)
                    evs = [e for e in evs if not e.name.startswith(STEP_PREFIX)]
                if not self.with_ops:
                    self.skipped_ops += len(evs)
                    continue
            self._add_kind(KINDS[code - 1], evs)

    def _add_uncategorised(self, events: list[Event]) -> None:
        for e in events:
            if e.ph == "M":
                self.meta_events.append((e.name, e.pid, e.tid, _meta_label(e.args)))

    def _add_kind(self, kind: str, evs: list[Event]) -> None:
        if not evs:
            return
        self.categories[kind] = self.categories.get(kind, 0) + len(evs)
        raws = [e.args for e in evs]
        # operators of the fast path come with their args decoded (kineto_schema.OpArgs); others are raw JSON
        args: list[Any] = decode_args(raws, self.report) if type(raws[0]) is msgspec.Raw else [
            a or NO_OP_ARGS for a in raws]
        self.parts.setdefault(kind, []).append(pa.table(BUILDERS[kind](evs, args)))

    def table(self, kind: str) -> pa.Table | None:
        """All rows of one kind, or None if there were none."""
        parts = self.parts.get(kind)
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        return pa.concat_tables(parts, promote_options="permissive").unify_dictionaries().combine_chunks()


def _meta_label(raw: msgspec.Raw) -> Any:
    """args.name (process/thread names) or args.labels ("GPU 0") of a metadata event."""
    try:
        args = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    return (args.get("name") or args.get("labels")) if isinstance(args, dict) else None


def ts_to_ns(ts_us: np.ndarray, base_ns: int) -> np.ndarray:
    """µs (int-valued or with ns decimals) -> int64 ns, exactly: integer part and fraction apart."""
    whole = np.floor(ts_us)
    frac_ns = np.rint((ts_us - whole) * 1000.0).astype(np.int64)
    return whole.astype(np.int64) * 1000 + frac_ns + np.int64(base_ns)
