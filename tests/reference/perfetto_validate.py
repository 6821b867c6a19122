"""Structural validator of .pftrace files: re-implements the import rules a writer can get wrong (no trace_processor).

Checks (perfetto.md §3.2): framing; every packet parses with the perfetto package's protos; every TrackEvent has a
trusted_packet_sequence_id, a timestamp and a known track; sequences start with SEQ_INCREMENTAL_STATE_CLEARED before
any packet that needs incremental state; interned names are defined before use; counters only on counter tracks and
slices never on them; track parents exist; replayed in trace-processor order (ts, file position), BEGIN/END nest per
track; every flow has a start and an end (terminations without a start are silently dropped by trace_processor).
"""

from __future__ import annotations

import gzip
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import text_format
from google.protobuf.message import DecodeError
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent

MAX_DEPTH = 512
"""trace_processor's SliceTracker::kMaxDepth."""
_CLEARED, _NEEDS = 1, 2


@dataclass(frozen=True)
class DecodedSlice:
    """A slice as trace_processor would rebuild it."""

    track: int
    name: str
    start_ns: int
    end_ns: int


@dataclass
class ValidationReport:
    """Result of validate_perfetto: errors (empty when the file is sound) and what the file holds."""

    errors: list[str] = field(default_factory=list)
    packets: int = 0
    tracks: dict[int, str] = field(default_factory=dict)
    """Track uuid -> name (process/thread/custom name)."""
    parents: dict[int, int] = field(default_factory=dict)
    counter_tracks: set[int] = field(default_factory=set)
    slices: list[DecodedSlice] = field(default_factory=list)
    instants: int = 0
    counters: int = 0
    arrows: int = 0
    """Flow arrows drawn (one per flow step or end)."""

    @property
    def ok(self) -> bool:
        """True when no error was found."""
        return not self.errors

    def error(self, message: str, limit: int = 50) -> None:
        """Record an error (the first `limit` are kept, then a count)."""
        if len(self.errors) < limit:
            self.errors.append(message)
        elif len(self.errors) == limit:
            self.errors.append("... more errors")


def read_bytes(path: str | Path) -> bytes:
    """The file's bytes, gunzipped when it is gzip."""
    data = Path(path).read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def iter_packets(data: bytes) -> Iterator[bytes]:
    """The serialized TracePackets of a Trace (field 1, length-delimited), without decoding the whole Trace."""
    pos, n = 0, len(data)
    while pos < n:
        if data[pos] != 0x0A:
            raise ValueError(f"byte {pos}: expected a Trace.packet field (0x0a), found 0x{data[pos]:02x}")
        pos += 1
        length, shift = 0, 0
        while True:
            if pos >= n:
                raise ValueError("truncated packet length")
            b = data[pos]
            pos += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        if pos + length > n:
            raise ValueError(f"packet at byte {pos} runs past the end of the file ({length} bytes)")
        yield data[pos : pos + length]
        pos += length


def to_text(path: str | Path) -> str:
    """Canonical text of every packet, in file order (for golden files)."""
    parts = []
    for raw in iter_packets(read_bytes(path)):
        p = TracePacket.FromString(raw)
        parts.append("packet {\n" + text_format.MessageToString(p, indent=2) + "}\n")
    return "".join(parts)


@dataclass
class _SeqState:
    cleared: bool = False
    names: dict[int, str] = field(default_factory=dict)
    annotation_names: dict[int, str] = field(default_factory=dict)


@dataclass
class _Event:
    ts: int
    pos: int
    type: int
    track: int
    name: str
    flows: tuple[int, ...]
    terminating: tuple[int, ...]


def validate_perfetto(path: str | Path) -> ValidationReport:
    """Check a .pftrace[.gz] file; the report lists every error and the slices trace_processor would build."""
    report = ValidationReport()
    seqs: dict[int, _SeqState] = defaultdict(_SeqState)
    events: list[_Event] = []
    try:
        raws = list(iter_packets(read_bytes(path)))
    except ValueError as exc:
        report.error(f"framing: {exc}")
        return report
    for pos, raw in enumerate(raws):
        report.packets += 1
        try:
            p = TracePacket.FromString(raw)
        except DecodeError as exc:
            report.error(f"packet {pos}: does not parse as TracePacket: {exc}")
            continue
        if p.HasField("track_descriptor"):
            _descriptor(report, p, pos)
        state = seqs[p.trusted_packet_sequence_id] if p.trusted_packet_sequence_id else None
        if state is not None:
            _sequence_state(report, p, pos, state)
        if p.HasField("track_event"):
            event = _track_event(report, p, pos, state)
            if event is not None:
                events.append(event)
    for uuid, parent in report.parents.items():
        if parent and parent not in report.tracks:
            report.error(f"track {uuid}: parent {parent} is not a known track")
    _replay(report, events)
    return report


def _sequence_state(report: ValidationReport, p: TracePacket, pos: int, state: _SeqState) -> None:
    """CLEARED resets interning; NEEDS before any CLEARED is dropped by trace_processor; intern new entries."""
    if p.sequence_flags & _CLEARED:
        state.cleared, state.names, state.annotation_names = True, {}, {}
    elif p.sequence_flags & _NEEDS and not state.cleared:
        report.error(f"packet {pos}: needs incremental state before its sequence was cleared")
    for en in p.interned_data.event_names:
        state.names[en.iid] = en.name
    for an in p.interned_data.debug_annotation_names:
        state.annotation_names[an.iid] = an.name


def _descriptor(report: ValidationReport, p: TracePacket, pos: int) -> None:
    d = p.track_descriptor
    if d.uuid in report.tracks and d.uuid != 0:
        report.error(f"packet {pos}: track {d.uuid} described twice")
    name = d.name or d.process.process_name or d.thread.thread_name
    report.tracks[d.uuid] = name
    if d.HasField("parent_uuid"):
        report.parents[d.uuid] = d.parent_uuid
    if d.HasField("counter"):
        report.counter_tracks.add(d.uuid)


def _event_name(report: ValidationReport, te: TrackEvent, where: str, state: _SeqState) -> str:
    for a in te.debug_annotations:
        if a.HasField("name_iid") and a.name_iid not in state.annotation_names:
            report.error(f"{where}: debug annotation name_iid {a.name_iid} not interned")
    if not te.HasField("name_iid"):
        return str(te.name)
    if te.name_iid not in state.names:
        report.error(f"{where}: name_iid {te.name_iid} used before it was interned on its sequence")
    return state.names.get(te.name_iid, "?")


def _event_kind(report: ValidationReport, te: TrackEvent, where: str) -> None:
    """Counters only on counter tracks (with a value), slices and instants never on them."""
    is_counter_track = te.track_uuid in report.counter_tracks
    if te.type == TrackEvent.TYPE_COUNTER:
        report.counters += 1
        if not is_counter_track:
            report.error(f"{where}: counter event on non-counter track {te.track_uuid}")
        if not (te.HasField("counter_value") or te.HasField("double_counter_value")):
            report.error(f"{where}: counter event without a value")
    elif is_counter_track:
        report.error(f"{where}: slice or instant event on counter track {te.track_uuid}")
    if te.type == TrackEvent.TYPE_INSTANT:
        report.instants += 1


def _track_event(report: ValidationReport, p: TracePacket, pos: int, state: _SeqState | None) -> _Event | None:
    te = p.track_event
    where = f"packet {pos}"
    if state is None:
        report.error(f"{where}: track event without trusted_packet_sequence_id (trace_processor drops it)")
        return None
    if not p.HasField("timestamp"):
        report.error(f"{where}: track event without timestamp")
    if te.track_uuid not in report.tracks:
        report.error(f"{where}: track {te.track_uuid} not described before its event")
    name = _event_name(report, te, where, state)
    _event_kind(report, te, where)
    return _Event(p.timestamp, pos, te.type, te.track_uuid, name, tuple(te.flow_ids), tuple(te.terminating_flow_ids))


def _replay(report: ValidationReport, events: list[_Event]) -> None:
    """Replay in trace_processor's sorter order: nesting stacks per track and flows (perfetto.md §1.5, §3.2)."""
    events.sort(key=lambda e: (e.ts, e.pos))
    stacks: dict[int, list[_Event]] = defaultdict(list)
    flows = _FlowReplay(report)
    for e in events:
        if e.type == TrackEvent.TYPE_SLICE_BEGIN:
            stacks[e.track].append(e)
            if len(stacks[e.track]) > MAX_DEPTH:
                report.error(f"track {e.track}: nesting deeper than {MAX_DEPTH}")
        elif e.type == TrackEvent.TYPE_SLICE_END:
            if not stacks[e.track]:
                report.error(f"track {e.track}: END at {e.ts} without an open slice")
            else:
                b = stacks[e.track].pop()
                report.slices.append(DecodedSlice(e.track, b.name, b.ts, e.ts))
        flows.replay(e)
    for track, stack in stacks.items():
        if stack:
            report.error(f"track {track}: {len(stack)} slice(s) never closed, first {stack[0].name!r}")
    flows.finish()


@dataclass
class _FlowReplay:
    """trace_processor's flow semantics: flow_ids begin or step a flow, terminating_flow_ids end an open one."""

    report: ValidationReport
    active: dict[int, int] = field(default_factory=dict)
    """Open flow id -> events bound so far."""
    arrows_of: dict[int, int] = field(default_factory=lambda: defaultdict(int))

    def replay(self, e: _Event) -> None:
        for f in e.flows:
            if f in self.active:
                self.report.arrows += 1
                self.arrows_of[f] += 1
            self.active[f] = self.active.get(f, 0) + 1
        for f in e.terminating:
            if f in self.active:
                self.report.arrows += 1
                self.arrows_of[f] += 1
                del self.active[f]
            else:
                self.report.error(f"flow {f}: terminated at {e.ts} without a start (trace_processor drops it)")

    def finish(self) -> None:
        for f in self.active:
            if not self.arrows_of.get(f):
                self.report.error(f"flow {f}: has only one end")
