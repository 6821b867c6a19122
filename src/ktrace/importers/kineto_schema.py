"""The typed msgspec schema of Kineto events: categories of every era, tagged fast-path types, args."""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import msgspec

from ktrace.importers.kineto_decode_report import DecodeReport
from ktrace.importers.kineto_json_repair import DeepJSONError, decode_shallow_if_deep, valid_utf8
from ktrace.importers.kineto_memory import MemArgs

KIND_OF_CATEGORY: dict[str, str] = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
    "cuda_runtime": "runtime",
    "Runtime": "runtime",
    "cuda_driver": "driver",
    "Driver": "driver",
    "cuda_sync": "sync",
    "user_annotation": "annotation",
    "User Annotation": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "cpu_op": "op",
    "Operator": "op",
    "cpu_instant_event": "alloc",
    "python_function": "python",
}
"""Kineto category (every era: 2021 capitalised names, 2023+ snake_case) -> ktrace kind of event."""

KNOWN_CATEGORIES = frozenset(KIND_OF_CATEGORY) | {
    "Trace",
    "ac2g",
    "async",
    "async_cpu_to_gpu",
    "fwdbwd",
    "overhead",
    "cuda_event",
    "external_correlation",
    "mtia_runtime",
    "xpu_runtime",
    "xpu_driver",
    "privateuse1_runtime",
    "privateuse1_driver",
    "collective_comm",
    "python",
    "Python",
    "cuda_profiler_range",
}
"""Categories that mark a file as a Kineto trace (those not in KIND_OF_CATEGORY are skipped)."""

KINDS = (
    "kernel",
    "memcpy",
    "memset",
    "runtime",
    "driver",
    "sync",
    "annotation",
    "gpu_annotation",
    "op",
    "alloc",
    "python",
)
"""Kinds of kept events; code k in `codes` below is KINDS[k - 1]."""
SKIPPED = 0
"""Code of events of a known category that ktrace does not import."""
SKIPPED_OP = len(KINDS) + 1
"""Code of cpu_op and python_function events skipped because ops were not asked for (counted only)."""
OPS_KINDS = ("op", "python")
"""Kinds that `with_ops` (ktrace import's default; --no-ops turns it off) imports into the ops table."""
_LEAN_SKIPS = ("cpu_op", "python_function")
"""Categories the tagged decoder skips without ops (the 2021 "Operator" is decoded: PyTorch 1.9 wrote its
ProfilerStep#N spans there; EventSink drops the rest)."""


class Args(msgspec.Struct, gc=False):
    """The `args` keys ktrace reads (all eras); every other key is skipped by the decoder."""

    correlation: int | None = None
    external_id: int | None = msgspec.field(default=None, name="External id")
    external_id_old: int | None = msgspec.field(default=None, name="external id")
    device: int | None = None
    stream: int | None = None
    context: int | None = None
    nbytes: Any = msgspec.field(default=None, name="bytes")
    cbid: Any = None
    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared: Any = msgspec.field(default=None, name="shared memory")
    grid: Any = None
    block: Any = None
    graph_id: Any = msgspec.field(default=None, name="graph id")
    graph_node_id: Any = msgspec.field(default=None, name="graph node id")
    occupancy: Any = msgspec.field(default=None, name="est. achieved occupancy %")
    sync_kind: Any = msgspec.field(default=None, name="cuda_sync_kind")
    wait_stream: Any = msgspec.field(default=None, name="wait_on_stream")
    wait_correlation: Any = msgspec.field(default=None, name="wait_on_cuda_event_record_corr_id")
    wait_event: Any = msgspec.field(default=None, name="wait_on_cuda_event_id")
    collective: Any = msgspec.field(default=None, name="Collective name")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    group_size: Any = msgspec.field(default=None, name="Group size")
    process_group: Any = msgspec.field(default=None, name="Process Group Name")
    dtype: Any = None
    sequence: Any = msgspec.field(default=None, name="Sequence number")
    name: Any = None
    labels: Any = None
    input_dims: Any = msgspec.field(default=None, name="Input Dims")
    input_types: Any = msgspec.field(default=None, name="Input type")
    concrete_inputs: Any = msgspec.field(default=None, name="Concrete Inputs")


class OpArgs(msgspec.Struct, gc=False):
    """The `args` keys ktrace reads of an operator (cpu_op), decoded with the event in one pass: operators are
    ~20 % of a trace's events and their args (input shapes, strides) the bulkiest, so a second pass over them
    cost ~0.3 s per 250 k. Untyped, so no value fails the fast path (int_array coerces later)."""

    external_id: Any = msgspec.field(default=None, name="External id")
    external_id_old: Any = msgspec.field(default=None, name="external id")
    sequence: Any = msgspec.field(default=None, name="Sequence number")
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b"null"), name="Input Dims")
    """Kept as raw JSON text (skipped, not parsed): kineto_shapes.shapes_array turns it into ops.input_dims."""
    input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(b"null"), name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=msgspec.Raw(b"null"), name="Concrete Inputs")


NULL = msgspec.Raw(b"null")
NO_ARGS = Args()
NO_OP_ARGS = OpArgs()


MAX_TS_US = 2.0**53
"""Larger |ts| cannot be converted exactly (and is not a real time): such events are dropped."""
EXACT_FROM_US = 2**43
"""From this |ts| (µs) on, a float64 cannot carry a ns fraction: its spacing exceeds 1/1024 µs, so rounding
ts * 1000 to an integer can miss by a nanosecond or more (2**43 µs is about 101 days after the epoch, so every
absolute epoch time); below it the error is at most 2**-11 µs (0.49 ns) and rounding recovers the exact ns."""


class Event(msgspec.Struct, gc=False):
    """One trace event, reduced to what the importer needs; `args` stays raw until the event is kept.

    `ts` decodes to int when its text is an integer, to float when it has a fraction or exponent: a float
    of EXACT_FROM_US or more may have lost its nanoseconds, and the slice is then decoded again as ExactEvent.
    """

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: int | float = 0.0
    dur: float = 0.0
    args: msgspec.Raw = NULL


class ExactEvent(Event, gc=False):
    """An Event whose fractional `ts` is kept exactly, as its decimal text reads (for ns traces with epoch µs)."""

    ts: int | Decimal = 0  # type: ignore[assignment]  # msgspec decodes by this annotation; readers take both


_EVENTS: dict[bool, msgspec.json.Decoder[Any]] = {
    False: msgspec.json.Decoder(list[Event]),
    True: msgspec.json.Decoder(list[ExactEvent]),
}
_EVENT: dict[bool, msgspec.json.Decoder[Any]] = {
    False: msgspec.json.Decoder(Event),
    True: msgspec.json.Decoder(ExactEvent),
}
_GENERIC: dict[bool, msgspec.json.Decoder[Any]] = {
    False: msgspec.json.Decoder(),
    True: msgspec.json.Decoder(float_hook=Decimal),
}
RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_ARGS_LIST = msgspec.json.Decoder(list[Args | None])
_ARGS = msgspec.json.Decoder(Args | None)


_TYPED_ARGS: dict[str, type] = {"op": OpArgs, "alloc": MemArgs}
"""Kinds whose args are decoded with the event (see OpArgs, MemArgs); others keep raw JSON until kept."""


def _kept_fields(exact: bool, kind: str | None = None) -> list[tuple[str, Any, Any]]:
    """The fields of a kept event; an operator's or allocator event's args are decoded with the event (see
    _TYPED_ARGS), so its `args` is an OpArgs/MemArgs or None; a Python frame's are not read at all (half of an
    H100 trace's events: skipping them costs nothing); every other event's are raw JSON."""
    ts: tuple[str, Any, Any] = ("ts", int | Decimal, 0) if exact else ("ts", int | float, 0.0)
    typed = _TYPED_ARGS.get(kind or "")
    args: tuple[str, Any, Any] = ("args", typed | None, None) if typed else ("args", msgspec.Raw, NULL)
    fields: list[tuple[str, Any, Any]] = [
        ("ph", str, ""),
        ("name", str, ""),
        ("pid", int | str, 0),
        ("tid", int | str, 0),
        ts,
        ("dur", float, 0.0),
    ]
    return fields if kind == "python" else [*fields, args]


@functools.cache
def tagged_decoder(with_ops: bool, exact: bool = False) -> tuple[msgspec.json.Decoder[Any], dict[type, int]]:
    """Fast path: a union tagged by `cat`; skipped categories decode to empty structs (no strings built).

    Returns the decoder and the code of each decoded type (see KINDS, SKIPPED, SKIPPED_OP). Events with
    no or an unknown category make it raise ValidationError; the slice is then decoded as list[Event].
    `exact` decodes fractional `ts` as Decimal (see ExactEvent).
    """
    types: list[type] = []
    code_of: dict[type, int] = {}
    for i, cat in enumerate(sorted(KNOWN_CATEGORIES)):
        kind = KIND_OF_CATEGORY.get(cat)
        keep = kind is not None and (with_ops or cat not in _LEAN_SKIPS)
        cls = msgspec.defstruct(
            f"{'Exact' if exact else ''}Cat{i}",
            _kept_fields(exact, kind) if keep else [],
            tag_field="cat",
            tag=cat,
            gc=False,
        )
        types.append(cls)
        code_of[cls] = KINDS.index(kind) + 1 if keep and kind else (SKIPPED_OP if cat in _LEAN_SKIPS else SKIPPED)
    union: Any = functools.reduce(operator.or_, types)
    return msgspec.json.Decoder(list[union]), code_of


@functools.cache
def code_of_type(with_ops: bool) -> dict[type, int]:
    """The code of every type the tagged decoders (plain and exact) produce."""
    return tagged_decoder(with_ops, False)[1] | tagged_decoder(with_ops, True)[1]


@dataclass(frozen=True)
class EventSlice:
    """Decoded events of one slice of traceEvents, with the JSON text they came from (to decode it again)."""

    events: list[Any]
    text: bytes | bytearray | memoryview
    """The bracketed JSON array that `events` were decoded from."""


def _decode_lenient(chunk: bytes | bytearray | memoryview, report: DecodeReport, exact: bool) -> list[Event]:
    """Decode a slice event by event, coercing wrongly typed fields and dropping what cannot be read."""
    out: list[Event] = []
    for raw in RAWS.decode(chunk):
        try:
            out.append(_EVENT[exact].decode(raw))
            continue
        except msgspec.ValidationError:
            pass
        generic = _GENERIC[exact].decode(raw)
        event = coerce_event(generic, exact)
        if event is None:
            report.dropped_events += 1
        else:
            report.repaired_events += 1
            out.append(event)
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | Decimal):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _exact_number(value: Any) -> int | Decimal | None:
    """`ts` for an ExactEvent: ints and Decimals as they are, numeric strings read as Decimal."""
    if isinstance(value, int | Decimal) and not isinstance(value, bool):
        return value
    number = _number(value)
    if number is None or not isinstance(value, str):
        return None if number is None else Decimal(number)
    try:
        return Decimal(value.strip())
    except ArithmeticError:
        return None


def coerce_event(value: Any, exact: bool = False) -> Event | None:
    """Best-effort Event (ExactEvent if `exact`) from a decoded JSON value (wrong types coerced); None if unusable."""
    if not isinstance(value, dict):
        return None
    text = {k: value[k] if isinstance(value.get(k), str) else "" for k in ("ph", "cat", "name")}
    ts: Any = _exact_number(value.get("ts")) if exact else _number(value.get("ts"))
    dur = _number(value.get("dur"))
    if ts is None and text["ph"] != "M":
        return None
    place = {k: value[k] if type(value.get(k)) in (int, str) else 0 for k in ("pid", "tid")}
    try:
        args = msgspec.Raw(msgspec.json.encode(value.get("args")))
    except (TypeError, ValueError, OverflowError):
        args = NULL
    cls = ExactEvent if exact else Event
    return cls(
        ph=text["ph"],
        cat=text["cat"],
        name=text["name"],
        pid=place["pid"],
        tid=place["tid"],
        ts=ts or 0,
        dur=dur or 0.0,
        args=args,
    )


def decode_args(raws: list[msgspec.Raw], report: DecodeReport) -> list[Args]:
    """Decode the raw `args` of kept events in one call; item by item (coercing) if one is malformed."""
    data = bytearray(b"[")
    data += b",".join(raws)
    data += b"]"
    try:
        return [a or NO_ARGS for a in _ARGS_LIST.decode(data)]
    except (msgspec.DecodeError, UnicodeDecodeError):
        pass
    out: list[Args] = []
    for raw in raws:
        try:
            out.append(_ARGS.decode(raw) or NO_ARGS)
            continue
        except (msgspec.DecodeError, UnicodeDecodeError):
            pass
        try:
            out.append(msgspec.convert(msgspec.json.decode(raw), Args, strict=False))
        except (msgspec.DecodeError, TypeError, ValueError, OverflowError):
            out.append(NO_ARGS)
        report.repaired_events += 1
    return out


def decode_events(
    chunk: bytes | bytearray | memoryview, report: DecodeReport, with_ops: bool, exact: bool | None = None
) -> list[Any]:
    """Decode a bracketed slice of events: tagged fast path, else list[Event], else event by event.

    `exact` (default: report.exact_ts) decodes fractional timestamps exactly (ExactEvent, tagged types alike).
    """
    exact = report.exact_ts if exact is None else exact

    def decode(data: bytes | bytearray | memoryview) -> list[Any]:
        try:
            return tagged_decoder(with_ops, exact)[0].decode(data)
        except msgspec.ValidationError:
            pass
        try:
            return _EVENTS[exact].decode(data)
        except msgspec.ValidationError:
            return _decode_lenient(data, report, exact)

    def decode_valid(data: bytes | bytearray | memoryview) -> list[Any]:
        try:
            return decode(data)
        except UnicodeDecodeError:
            note = "invalid UTF-8 in event text replaced by U+FFFD"
            if note not in report.notes:
                report.notes.append(note)
            return decode(valid_utf8(data))

    try:
        return decode_shallow_if_deep(decode_valid, chunk, report)
    except DeepJSONError:  # its byte offsets are those of the flattened copy: report none
        raise msgspec.DecodeError("invalid JSON in a slice nested too deep") from None
