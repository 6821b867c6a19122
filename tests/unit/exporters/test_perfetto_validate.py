"""The structural validator accepts a sound trace and catches every defect a writer can make."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (
    CounterDescriptor,
    EventName,
    InternedData,
    ProcessDescriptor,
    ThreadDescriptor,
    TracePacket,
    TrackDescriptor,
)
from reference.perfetto_validate import DecodedSlice, validate_perfetto

from ktrace.exporters.perfetto import frame_packet

SEQ, BEGIN, END, INSTANT, COUNTER = 1, 1, 2, 3, 4


def _desc(**kw: object) -> TracePacket:
    return TracePacket(track_descriptor=TrackDescriptor(**kw))  # type: ignore[arg-type]


def _event(
    ts: int,
    track: int,
    typ: int,
    name_iid: int = 0,
    *,
    seq: int = SEQ,
    flags: int = 2,
    flows: tuple[int, ...] = (),
    term: tuple[int, ...] = (),
    value: float | None = None,
) -> TracePacket:
    p = TracePacket(timestamp=ts, sequence_flags=flags)
    if seq:
        p.trusted_packet_sequence_id = seq
    te = p.track_event
    te.type, te.track_uuid = typ, track  # type: ignore[assignment]
    if name_iid:
        te.name_iid = name_iid
    te.flow_ids.extend(flows)
    te.terminating_flow_ids.extend(term)
    if value is not None:
        te.double_counter_value = value
    return p


def _good() -> list[TracePacket]:
    """process 1, thread 2, custom 3, counter 4; a launch on 2 with a flow to a kernel on 3."""
    return [
        _desc(uuid=1, process=ProcessDescriptor(pid=1, process_name="rank 0")),
        _desc(uuid=2, thread=ThreadDescriptor(pid=1, tid=1, thread_name="main")),
        _desc(uuid=3, parent_uuid=1, name="Stream 7"),
        _desc(uuid=4, parent_uuid=1, name="GPU 0 utilization", counter=CounterDescriptor(unit_name="%")),
        TracePacket(
            trusted_packet_sequence_id=SEQ,
            sequence_flags=3,
            interned_data=InternedData(
                event_names=[EventName(iid=1, name="cudaLaunchKernel"), EventName(iid=2, name="gemm")]
            ),
        ),
        _event(100, 2, BEGIN, 1, flows=(7,)),
        _event(150, 2, END),
        _event(160, 3, BEGIN, 2, term=(7,)),
        _event(300, 3, END),
        _event(300, 4, COUNTER, value=50.0),
    ]


def _write(tmp_path: Path, packets: list[TracePacket]) -> Path:
    path = tmp_path / "t.pftrace"
    path.write_bytes(b"".join(frame_packet(p) for p in packets))
    return path


def test_sound_trace_passes_and_is_decoded(tmp_path: Path) -> None:
    report = validate_perfetto(_write(tmp_path, _good()))
    assert report.errors == []
    assert sorted(report.slices, key=lambda s: s.start_ns) == [
        DecodedSlice(2, "cudaLaunchKernel", 100, 150),
        DecodedSlice(3, "gemm", 160, 300),
    ]
    assert (report.arrows, report.counters) == (1, 1)


def _replace(index: int, packet: TracePacket) -> Callable[[list[TracePacket]], list[TracePacket]]:
    def edit(packets: list[TracePacket]) -> list[TracePacket]:
        return packets[:index] + [packet] + packets[index + 1 :]

    return edit


DEFECTS: dict[str, tuple[Callable[[list[TracePacket]], list[TracePacket]], str]] = {
    "end without begin": (lambda ps: ps + [_event(400, 3, END)], "without an open slice"),
    "unclosed slice": (lambda ps: ps[:-2], "never closed"),
    "undefined iid": (_replace(5, _event(100, 2, BEGIN, 9, flows=(7,))), "used before it was interned"),
    "needs before cleared": (lambda ps: ps[:4] + [_event(1, 3, INSTANT, seq=5)] + ps[4:], "before its sequence"),
    "terminate without start": (_replace(5, _event(100, 2, BEGIN, 1)), "without a start"),
    "flow with one end": (_replace(7, _event(160, 3, BEGIN, 2)), "only one end"),
    "counter on slice track": (lambda ps: ps + [_event(500, 3, COUNTER, value=1.0)], "non-counter track"),
    "slice on counter track": (lambda ps: ps + [_event(500, 4, INSTANT, 1)], "on counter track"),
    "bad parent": (lambda ps: ps + [_desc(uuid=9, parent_uuid=77, name="x")], "parent 77"),
    "missing sequence id": (lambda ps: ps + [_event(500, 3, INSTANT, 1, seq=0)], "without trusted_packet"),
    "unknown track": (lambda ps: ps + [_event(500, 42, INSTANT, 1)], "not described"),
    "duplicate track": (lambda ps: ps + [_desc(uuid=3, parent_uuid=1, name="again")], "described twice"),
}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_each_defect_is_reported(tmp_path: Path, defect: str) -> None:
    edit, message = DEFECTS[defect]
    report = validate_perfetto(_write(tmp_path, edit(_good())))
    assert not report.ok
    assert any(message in e for e in report.errors), report.errors


def test_flow_written_in_reverse_file_order_is_accepted(tmp_path: Path) -> None:
    packets = _good()
    packets[5:9] = [packets[7], packets[8], packets[5], packets[6]]
    assert validate_perfetto(_write(tmp_path, packets)).ok


def test_truncated_file_is_a_framing_error(tmp_path: Path) -> None:
    path = _write(tmp_path, _good())
    path.write_bytes(path.read_bytes()[:-3])
    report = validate_perfetto(path)
    assert any(e.startswith("framing") for e in report.errors)
