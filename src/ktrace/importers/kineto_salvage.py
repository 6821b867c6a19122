"""Damage inside a Kineto slice: where msgspec says it is, the events before it that still decode, and where
the stream resumes after it (the events in between are counted as dropped)."""

from __future__ import annotations

import re

import msgspec

from ktrace.importers.kineto_decode_report import DecodeReport
from ktrace.importers.kineto_schema import EventSlice, decode_events

BOUNDARY = re.compile(rb"\}\s*,\s*\{")
"""Between two events of traceEvents (or inside a string or nested object: a cut there fails to decode)."""
_BYTE_POS = re.compile(r"\(byte (\d+)\)")


def error_pos(exc: msgspec.DecodeError, size: int) -> int:
    """Byte offset of a syntax error; the end of the input for truncation."""
    m = _BYTE_POS.search(str(exc))
    return int(m.group(1)) if m else size


def bracketed(data: bytes | bytearray | memoryview) -> bytes:
    """`[` + data + `]` with a single copy."""
    return b"".join((b"[", data, b"]"))


def _count_items(data: bytes | bytearray) -> int:
    return len(BOUNDARY.findall(data)) + (1 if data.strip() else 0)


def salvage(region: bytearray, err: int, report: DecodeReport, with_ops: bool) -> tuple[EventSlice, int]:
    """Events of `region` before damage at byte `err`, and where to resume after it.

    Returns (events, resume offset into region, or len(region) when nothing after the damage is usable).
    """
    cuts = [m.start() + 1 for m in BOUNDARY.finditer(region, 0, err)]
    events = EventSlice([], b"[]")
    good = 0
    for cut in reversed(cuts[-8:]):
        text = bracketed(memoryview(region)[:cut])
        try:
            events = EventSlice(decode_events(text, report, with_ops), text)
            good = cut
            break
        except msgspec.DecodeError:
            continue
    after = BOUNDARY.search(region, err)
    resume = after.end() - 1 if after else len(region)
    dropped = _count_items(bytes(region[good:resume]).strip(b" \t\r\n,"))
    report.dropped_events += max(dropped, 1)
    return events, resume
