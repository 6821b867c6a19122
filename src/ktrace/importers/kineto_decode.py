"""Typed, chunked decoding of a Kineto trace: split `traceEvents` into big slices, decode each with msgspec.

The document is never held whole: the byte stream is cut at event boundaries (`}, {`) into ~8 MB
slices, each decoded by a typed msgspec decoder (kineto_schema) that reads only the fields ktrace
uses. A cut that falls inside a string or a nested object makes the slice invalid JSON *at its end*,
so it is simply retried at the next boundary; an error inside a slice is real damage, and the events
around it are salvaged. Everything outside `traceEvents` is the header, decoded at the end.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from ktrace.importers.kineto_schema import RAWS, DecodeReport, decode_events, valid_utf8
from ktrace.model.errors import TraceFormatError

CHUNK_BYTES = 8 << 20
"""Target size of one decoded slice of events."""


_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_BYTE_POS = re.compile(r"\(byte (\d+)\)")


def _error_pos(exc: msgspec.DecodeError, size: int) -> int:
    """Byte offset of a syntax error; the end of the input for truncation."""
    m = _BYTE_POS.search(str(exc))
    return int(m.group(1)) if m else size


def _bracketed(data: bytes | bytearray | memoryview) -> bytes:
    """`[` + data + `]` with a single copy."""
    return b"".join((b"[", data, b"]"))


def _count_items(data: bytes | bytearray) -> int:
    return len(_BOUNDARY.findall(data)) + (1 if data.strip() else 0)


def _salvage(region: bytearray, err: int, report: DecodeReport, with_ops: bool) -> tuple[list[Any], int]:
    """Events of `region` before damage at byte `err`, and where to resume after it.

    Returns (events, resume offset into region, or len(region) when nothing after the damage is usable).
    """
    cuts = [m.start() + 1 for m in _BOUNDARY.finditer(region, 0, err)]
    events: list[Any] = []
    good = 0
    for cut in reversed(cuts[-8:]):
        try:
            events = decode_events(_bracketed(memoryview(region)[:cut]), report, with_ops)
            good = cut
            break
        except msgspec.DecodeError:
            continue
    after = _BOUNDARY.search(region, err)
    resume = after.end() - 1 if after else len(region)
    dropped = _count_items(bytes(region[good:resume]).strip(b" \t\r\n,"))
    report.dropped_events += max(dropped, 1)
    return events, resume


class EventSplitter:
    """Turns a stream of byte blocks into decoded event lists and a header dict (see module docstring)."""

    def __init__(self, report: DecodeReport, *, with_ops: bool = False, chunk_bytes: int | None = None) -> None:
        self.report = report
        self.with_ops = with_ops
        self.chunk_bytes = chunk_bytes or CHUNK_BYTES
        self.prefix: bytes | None = None
        """Bytes before `traceEvents`'s `[` (None: the document is a bare event array)."""
        self.buf = bytearray()

    def run(self, blocks: Iterable[bytes]) -> Iterator[list[Any]]:
        """Yield lists of events as the blocks arrive; fill report.header at the end."""
        it = iter(blocks)
        if not self._find_events(it):
            return
        for block in it:
            self.buf += block
            if len(self.buf) >= self.chunk_bytes:
                yield from self._drain(final=False)
        yield from self._finish()

    def _find_events(self, it: Iterator[bytes]) -> bool:
        head = bytearray()
        scanned = 0
        for block in it:
            head += block
            body = head.lstrip()
            if body[:1] == b"[":
                self.prefix = None
                self.buf = bytearray(body[1:])
                return True
            if body and body[:1] != b"{":
                raise TraceFormatError("not JSON: a Kineto trace starts with '{'")
            m = _KEY.search(head, max(0, scanned - 64))
            if m:
                self.prefix = bytes(head[: m.end() - 1])
                self.buf = bytearray(head[m.end():])
                return True
            scanned = len(head)
        _explain_no_events(bytes(head))
        return False

    def _drain(self, final: bool) -> Iterator[list[Any]]:
        """Decode ~chunk-sized slices of self.buf; keep the undecodable tail unless `final`."""
        search_from: int | None = None
        while True:
            size = len(self.buf)
            if final and not self.buf.strip():
                self.buf = bytearray()
                return
            if not final and size < self.chunk_bytes:
                return
            m = None
            if not (final and size <= self.chunk_bytes):
                pos = self.chunk_bytes - min(1 << 16, self.chunk_bytes // 8) if search_from is None else search_from
                m = _BOUNDARY.search(self.buf, pos)
                if m is None and not final:
                    return
            cut = m.start() + 1 if m else size
            chunk = _bracketed(memoryview(self.buf)[:cut])
            try:
                events = decode_events(chunk, self.report, self.with_ops)
            except msgspec.DecodeError as exc:
                err = max(0, _error_pos(exc, len(chunk)) - 1)
                if err >= cut - 1 and m is not None:
                    search_from = m.end()  # cut inside a string or nested object: try the next boundary
                    continue
                events, resume = _salvage(self.buf, min(err, cut), self.report, self.with_ops)
                self._emit(events)
                yield events
                del self.buf[:resume]
                search_from = None
                continue
            self._emit(events)
            yield events
            del self.buf[: (m.end() - 1) if m else cut]
            search_from = None

    def _emit(self, events: list[Any]) -> None:
        self.report.events += len(events)
        del events  # (the caller keeps them)

    def _finish(self) -> Iterator[list[Any]]:
        end = self._closing_bracket()
        if end is None:
            end = self._array_end()
        if end is None:
            self.report.truncated = True
            self.report.notes.append("the file ends inside traceEvents (truncated?): the last, partial event "
                                     "and every key after traceEvents are missing")
            self.report.header = _decode_header((self.prefix or b'{"traceEvents": ') + b"[]}", self.report)
        else:
            suffix = bytes(self.buf[end + 1:])
            if self.prefix is not None:
                self.report.header = _decode_header(self.prefix + b"[]" + suffix, self.report)
            elif suffix.strip():
                self.report.notes.append("bytes after the event array ignored")
            del self.buf[end:]
        yield from self._drain(final=True)

    def _closing_bracket(self) -> int | None:
        """Offset of the `]` closing traceEvents, found by a syntax-only decode of the rest; None if unsure."""
        chunk = _bracketed(self.buf)
        try:
            RAWS.decode(chunk)
        except UnicodeDecodeError:
            return None
        except msgspec.DecodeError as exc:
            if "trailing characters" not in str(exc):
                return None
            close = chunk.rfind(b"]", 0, _error_pos(exc, len(chunk)) - 1)
            return close - 1 if close > 0 else None
        return None

    def _array_end(self) -> int | None:
        """Fallback for damaged tails: the rightmost `]` after which the header decodes."""
        pos = len(self.buf)
        for _ in range(200):
            pos = self.buf.rfind(b"]", 0, pos)
            if pos < 0:
                return None
            before = self.buf[max(0, pos - 4096):pos].rstrip()
            after = self.buf[pos + 1:pos + 4097].lstrip()
            if (before and not before.endswith(b"}")) or (after and bytes(after[:1]) not in (b",", b"}")):
                continue
            if self.prefix is None:
                if not self.buf[pos + 1:].strip():
                    return pos
                continue
            try:
                header = msgspec.json.decode(valid_utf8(self.prefix + b"[]" + bytes(self.buf[pos + 1:])))
            except msgspec.DecodeError:
                continue
            if isinstance(header, dict):
                return pos
        return None


def _decode_header(data: bytes, report: DecodeReport) -> dict[str, Any]:
    try:
        header = msgspec.json.decode(valid_utf8(data))
    except msgspec.DecodeError:
        report.notes.append("the header before traceEvents is damaged: metadata ignored")
        return {}
    return header if isinstance(header, dict) else {}


def _explain_no_events(head: bytes) -> None:
    """Raise the right error for a stream that has no traceEvents array."""
    if not head.strip():
        raise TraceFormatError("empty file: not a Kineto trace")
    try:
        doc = msgspec.json.decode(valid_utf8(head))
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"invalid JSON ({exc}) and no traceEvents array found") from None
    if isinstance(doc, dict):
        keys = ", ".join(list(doc)[:5]) or "none"
        raise TraceFormatError(f"JSON, but not a Kineto trace: no traceEvents (top-level keys: {keys})")
    raise TraceFormatError("JSON, but not a Kineto trace: expected an object with traceEvents")
