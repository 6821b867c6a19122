"""A Kineto trace's header: the top-level keys around `traceEvents`, decoded at the end of the read (the keys
after the events dropped where only they are damaged), and the one-line error for a file with no events array."""

from __future__ import annotations

from typing import Any

import msgspec

from ktrace.importers.kineto_decode_report import DecodeReport
from ktrace.importers.kineto_json_repair import decode_shallow_if_deep, valid_utf8
from ktrace.model.errors import TraceFormatError


def decode_text(data: bytes | bytearray | memoryview) -> Any:
    """Any JSON value, invalid UTF-8 replaced."""
    return msgspec.json.decode(valid_utf8(data))


def decode_header(data: bytes, report: DecodeReport, before: bytes | None = None) -> dict[str, Any]:
    """The top-level keys around traceEvents; where they do not decode and `before` (the header before
    traceEvents, closed) does, that alone: the keys after traceEvents were damaged."""
    try:
        header = decode_shallow_if_deep(decode_text, data, report)
    except msgspec.DecodeError:
        if before is not None and before != data:
            try:
                header = decode_shallow_if_deep(decode_text, before, report)
            except msgspec.DecodeError:
                header = None
            if isinstance(header, dict):
                report.notes.append("the keys after traceEvents are damaged: ignored")
                return header
        report.notes.append("the header before traceEvents is damaged: metadata ignored")
        return {}
    return header if isinstance(header, dict) else {}


def explain_no_events(head: bytes) -> None:
    """Raise the right error for a stream that has no traceEvents array."""
    if not head.strip():
        raise TraceFormatError("empty file: not a Kineto trace")
    try:
        doc = decode_shallow_if_deep(decode_text, head, DecodeReport())
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"invalid JSON ({exc}) and no traceEvents array found") from None
    if isinstance(doc, dict):
        keys = ", ".join(list(doc)[:5]) or "none"
        raise TraceFormatError(f"JSON, but not a Kineto trace: no traceEvents (top-level keys: {keys})")
    raise TraceFormatError("JSON, but not a Kineto trace: expected an object with traceEvents")
