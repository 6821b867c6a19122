"""Typed, chunked decoding of a Kineto trace: split `traceEvents` into big slices, decode each with msgspec.

The document is never held whole: the byte stream is cut at event boundaries (`}, {`) into ~8 MB
slices, each decoded by a typed msgspec decoder (kineto_schema) that reads only the fields ktrace
uses. A cut that falls inside a string or a nested object makes the slice invalid JSON *at its end*,
so it is simply retried at the next boundary; an error inside a slice is real damage, and the events
around it are salvaged (`kineto_salvage`). Everything outside `traceEvents` is the header, decoded at the end
(`kineto_header`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from ktrace.importers.kineto_decode_report import DecodeReport
from ktrace.importers.kineto_header import decode_header, decode_text, explain_no_events
from ktrace.importers.kineto_json_repair import DeepJSONError, decode_shallow_if_deep
from ktrace.importers.kineto_limits import (
    MAX_EVENT_BYTES,
    MAX_WHITESPACE_RUN,
    TopLevelKey,
    squeeze_whitespace,
    value_starts,
)
from ktrace.importers.kineto_salvage import BOUNDARY, bracketed, error_pos, salvage
from ktrace.importers.kineto_schema import RAWS, EventSlice, decode_events
from ktrace.model.errors import TraceFormatError

CHUNK_BYTES = 8 << 20
"""Target size of one decoded slice of events."""


_RESUME = re.compile(rb"\}\s*(?:,\s*\{|\])")
"""Where skipping an oversized event ends: the next event, or the end of traceEvents."""
_RESUME_TAIL = 3 * MAX_WHITESPACE_RUN
_NON_BLANK = re.compile(rb"[^ \t\n\r\x0b\x0c]")
"""The first byte bytes.lstrip() keeps."""
MAX_DAMAGE_SKIPS = 64
"""Damaged events the search for the end of traceEvents steps over before it gives up (then: `_array_end`)."""


@dataclass(frozen=True)
class PendingSlice:
    """A slice handed out undecoded (EventSplitter.defer): its bracketed text, and the separator after it."""

    text: bytes
    sep: bytes
    """The bytes between the slice's last event and the next event (`, `), to put the stream back together."""

    def source(self) -> bytes:
        """The slice as it stood in the stream, separator included."""
        return b"".join((memoryview(self.text)[1:-1], self.sep))


SETTLE = object()
"""Yielded by a deferring EventSplitter before it decodes anything itself: every PendingSlice handed out so far
must be decoded (and any that failed put back with `restore`) before the splitter goes on."""


class EventSplitter:
    """Turns a stream of byte blocks into decoded event lists and a header dict (see module docstring).

    With `defer`, full slices are yielded undecoded (PendingSlice) for other processes to decode, on the
    guess that each cut is valid; a slice that does not decode is given back with `restore`, and the rest of
    the stream is then read as without `defer`. SETTLE is yielded before the first slice the splitter decodes
    itself (oversized events, the end of the array), after which it no longer defers.
    """

    def __init__(
        self, report: DecodeReport, *, with_ops: bool = True, chunk_bytes: int | None = None, defer: bool = False
    ) -> None:
        self.defer = defer
        self.report = report
        self.with_ops = with_ops
        self.chunk_bytes = chunk_bytes or CHUNK_BYTES
        self.prefix: bytes | None = None
        """Bytes before `traceEvents`'s `[` (None: the document is a bare event array)."""
        self.buf = bytearray()
        self.skipping: bytes | None = None
        """While skipping an oversized event: the last bytes seen (a boundary may span two blocks)."""
        self.squeezed = 0

    def run(self, blocks: Iterable[bytes]) -> Iterator[EventSlice | PendingSlice | object]:
        """Yield slices of events as the blocks arrive; fill report.header at the end."""
        it = self._squeezed(blocks)
        if not self._find_events(it):
            return
        for block in itertools.chain((b"",), it):  # (b"": what _find_events buffered may hold slices already)
            if self.skipping is not None and not (block := self._skip(block)):
                continue
            self.buf += block
            if len(self.buf) >= self.chunk_bytes:
                yield from self._drain(final=False)
                if len(self.buf) > self.chunk_bytes + MAX_EVENT_BYTES:
                    if self.defer:
                        yield from self._settle()
                        yield from self._drain(final=False)
                        if len(self.buf) <= self.chunk_bytes + MAX_EVENT_BYTES:
                            continue
                    yield from self._cut_oversized()
        yield from self._settle()  # (first: notes of slices still out come before this one, as in one process)
        if self.squeezed:
            self.report.notes.append(
                f"{self.squeezed:,} run(s) of more than {MAX_WHITESPACE_RUN:,} whitespace bytes squeezed to one"
            )
        yield from self._finish()

    def header_so_far(self) -> dict[str, Any]:
        """The header keys before traceEvents, for a read stopped before its end (the keys after it are unread)."""
        return decode_header((self.prefix or b'{"traceEvents": ') + b"[]}", self.report)

    def _settle(self) -> Iterator[Any]:
        if self.defer:
            self.defer = False
            yield SETTLE

    def restore(self, pending: list[PendingSlice]) -> None:
        """Put slices handed out undecoded back in front of the buffer, in order, and stop deferring."""
        self.buf[:0] = b"".join(p.source() for p in pending)
        self.defer = False

    def _squeezed(self, blocks: Iterable[bytes]) -> Iterator[bytes]:
        for block in blocks:
            out, n = squeeze_whitespace(block)
            self.squeezed += n
            yield out

    def _cut_oversized(self) -> Iterator[EventSlice | PendingSlice | object]:
        """The buffer ends in an event of more than MAX_EVENT_BYTES: decode the events before it, drop it (noted)
        and skip the stream to the next event."""
        yield from self._drop_oversized(len(self.buf))
        self.buf = bytearray()
        self.skipping = b""

    def _drop_oversized(self, end: int) -> Iterator[EventSlice | PendingSlice | object]:
        """self.buf[:end] holds an event of more than MAX_EVENT_BYTES: decode the events before it, drop it and
        keep what follows it in the buffer (a scan that skips strings finds where each event starts)."""
        starts = value_starts(self.buf, end) + [end]
        big = next((i for i in range(len(starts) - 1) if starts[i + 1] - starts[i] > MAX_EVENT_BYTES), len(starts) - 2)
        if big > 0:
            before = EventSplitter(self.report, with_ops=self.with_ops, chunk_bytes=self.chunk_bytes)
            before.buf = bytearray(self.buf[: starts[big]].rstrip(b" \t\r\n,"))
            yield from before._drain(final=True)
        del self.buf[: starts[big + 1] if big >= 0 else end]
        self.report.dropped_events += 1
        note = f"events of more than {MAX_EVENT_BYTES >> 20} MiB skipped (KTRACE_MAX_EVENT_BYTES raises the cap)"
        if note not in self.report.notes:
            self.report.notes.append(note)

    def _skip(self, block: bytes) -> bytes:
        """While skipping: `block` from the start of the next event (or the end of traceEvents), else b""."""
        assert self.skipping is not None
        data = self.skipping + block
        m = _RESUME.search(data)
        if m is None:
            self.skipping = data[-_RESUME_TAIL:]
            return b""
        self.skipping = None
        return data[m.end() - 1 :]

    def _find_events(self, it: Iterator[bytes]) -> bool:
        head = bytearray()
        key = TopLevelKey()
        for block in it:
            head += block
            start = _NON_BLANK.search(head)  # (not head.lstrip(): a copy of the first 8 MB block)
            opening = head[start.start() : start.end()] if start else b""
            if opening == b"[":
                assert start is not None
                del head[: start.end()]  # (deleting from the front of a bytearray copies nothing)
                self.prefix = None
                self.buf = head
                return True
            if opening and opening != b"{":
                raise TraceFormatError("not JSON: a Kineto trace starts with '{'")
            end = key.find(head)
            if end is not None and end <= MAX_EVENT_BYTES:
                self.prefix = bytes(head[: end - 1])
                del head[:end]
                self.buf = head
                return True
            if len(head) > MAX_EVENT_BYTES:
                raise TraceFormatError(
                    f"more than {MAX_EVENT_BYTES >> 20} MiB before the top-level traceEvents "
                    "array: not read (KTRACE_MAX_EVENT_BYTES raises the cap)"
                )
        explain_no_events(bytes(head))
        return False

    def _drain(self, final: bool) -> Iterator[EventSlice | PendingSlice | object]:
        """Decode ~chunk-sized slices of self.buf; keep the undecodable tail unless `final`."""
        search_from: int | None = None
        while (found := self._next_cut(final, search_from)) is not None:
            m, cut = found
            if cut > self.chunk_bytes + MAX_EVENT_BYTES:  # the slice holds an oversized event
                if self.defer:
                    yield from self._settle()  # decoded here from now on; the buffer may have grown
                else:
                    yield from self._drop_oversized((m.end() - 1) if m else cut)
                search_from = None
                continue
            chunk = bracketed(memoryview(self.buf)[:cut])
            if self.defer and m is not None:
                end = m.end() - 1
                sep = bytes(self.buf[cut:end])
                del self.buf[:end]
                yield PendingSlice(chunk, sep)
                search_from = None
                continue
            try:
                events = EventSlice(decode_events(chunk, self.report, self.with_ops), chunk)
            except msgspec.DecodeError as exc:
                err = max(0, error_pos(exc, len(chunk)) - 1)
                if err >= cut - 1 and m is not None:  # cut inside a string or nested object: try further on,
                    search_from = max(m.end(), cut + cut // 8)  # at least 1/8 further (linear on `},{` runs)
                    continue
                events, resume = salvage(self.buf, min(err, cut), self.report, self.with_ops)
                self._emit(events)
                yield events
                del self.buf[:resume]
                search_from = None
                continue
            self._emit(events)
            yield events
            del self.buf[: (m.end() - 1) if m else cut]
            search_from = None

    def _next_cut(self, final: bool, search_from: int | None) -> tuple[re.Match[bytes] | None, int] | None:
        """Where the next slice ends (the boundary found, or None for the whole buffer, and the cut offset);
        None when no slice is due (the buffer is short of a slice, or empty at the end)."""
        size = len(self.buf)
        if final and not self.buf.strip():
            self.buf = bytearray()
            return None
        if not final and size < self.chunk_bytes:
            return None
        m = None
        if not (final and size <= self.chunk_bytes):
            pos = self.chunk_bytes - min(1 << 16, self.chunk_bytes // 8) if search_from is None else search_from
            m = BOUNDARY.search(self.buf, pos)
            if m is None and not final:
                return None
        return m, (m.start() + 1 if m else size)

    def _emit(self, events: EventSlice) -> None:
        self.report.events += len(events.events)

    def _finish(self) -> Iterator[EventSlice | PendingSlice | object]:
        end = self._closing_bracket()
        if end is None:
            end = self._array_end()
        if end is None:
            self.report.truncated = True
            self.report.notes.append(
                "the file ends inside traceEvents (truncated?): the last, partial event "
                "and every key after traceEvents are missing"
            )
            self.report.header = self.header_so_far()
            tail = self.buf.rstrip(b" \t\r\n")
            if tail.endswith(b","):  # cut right after a separator: the last event is whole, not damaged
                del self.buf[len(tail) - 1 :]
        else:
            suffix = bytes(self.buf[end + 1 :])
            if self.prefix is not None:
                self.report.header = decode_header(self.prefix + b"[]" + suffix, self.report, self.prefix + b"[]}")
            elif suffix.strip():
                self.report.notes.append("bytes after the event array ignored")
            del self.buf[end:]
        yield from self._drain(final=True)

    def _closing_bracket(self) -> int | None:
        """Offset of the `]` closing traceEvents, found by a syntax-only decode of the rest; None if unsure. A damaged
        event on the way is stepped over to the next event boundary, as reading it slice by slice does, so the
        answer does not depend on how much of the file is still buffered (decode workers leave more here)."""
        start = 0
        for _ in range(MAX_DAMAGE_SKIPS):
            chunk = bracketed(memoryview(self.buf)[start:])
            try:
                decode_shallow_if_deep(RAWS.decode, chunk, DecodeReport())
            except UnicodeDecodeError:
                return None
            except msgspec.DecodeError as exc:
                shift = exc.shift if isinstance(exc, DeepJSONError) else 0
                err = error_pos(exc, len(chunk)) + shift
                if "trailing characters" in str(exc):
                    close = chunk.rfind(b"]", 0, err - 1)
                    return start + close - 1 if close > 0 else None
                m = BOUNDARY.search(self.buf, start + max(err - 2, 0))
                if m is None:
                    return None
                start = m.start() + 1
                continue
            return None
        return None

    def _array_end(self) -> int | None:
        """Fallback for damaged tails: the rightmost `]` after which the header decodes; else, where the keys after
        traceEvents are damaged themselves, the rightmost `}]` followed by a key or by bytes no JSON has there
        (`decode_header` then keeps the header before traceEvents). Whether damage earlier in the buffer made
        `_closing_bracket` unsure must not matter: the decode workers hold more of the file here than one process
        does."""
        pos = len(self.buf)
        damaged_keys: int | None = None
        for _ in range(200):
            pos = self.buf.rfind(b"]", 0, pos)
            if pos < 0:
                break
            before = self.buf[max(0, pos - 4096) : pos].rstrip()
            after = self.buf[pos + 1 : pos + 4097].lstrip()
            if before and not before.endswith(b"}"):
                continue
            if after and bytes(after[:1]) not in (b",", b"}"):
                if bytes(after[:1]) != b"]" and damaged_keys is None:  # `}]` then what no JSON has there: damage
                    damaged_keys = pos
                continue
            if self.prefix is None:
                if not self.buf[pos + 1 :].strip():
                    return pos
                continue
            if self._header_decodes_after(pos):
                return pos
            if damaged_keys is None and _KEY_AFTER.match(self.buf, pos + 1):
                damaged_keys = pos
        return damaged_keys

    def _header_decodes_after(self, pos: int) -> bool:
        """Whether the header with the keys after `pos` (a candidate end of traceEvents) decodes to an object."""
        assert self.prefix is not None
        try:
            header = decode_shallow_if_deep(
                decode_text, self.prefix + b"[]" + bytes(self.buf[pos + 1 :]), DecodeReport()
            )
        except msgspec.DecodeError:
            return False
        return isinstance(header, dict)


_KEY_AFTER = re.compile(rb"\s*,\s*\"")
"""A `]` followed by `, "`: the end of traceEvents when a key follows it."""
