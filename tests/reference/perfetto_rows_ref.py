"""Naive twin of ktrace.exporters.perfetto_kernel.slice_packets: one pb2 TracePacket per BEGIN and END event."""

from __future__ import annotations

from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

from ktrace.exporters.perfetto_slice_rows import SliceRows


def slice_packets_reference(rows: SliceRows) -> bytes:
    """The bytes of `rows` written event by event with the protobuf library."""
    t = Trace()
    flows: dict[int, list[int]] = {}
    terms: dict[int, list[int]] = {}
    for r, f in zip(rows.flow_rows.tolist(), rows.flow_ids.tolist(), strict=True):
        flows.setdefault(r, []).append(f)
    for r, f in zip(rows.term_rows.tolist(), rows.term_ids.tolist(), strict=True):
        terms.setdefault(r, []).append(f)
    for i in range(rows.start.shape[0]):
        p = t.packet.add()
        p.timestamp, p.trusted_packet_sequence_id, p.sequence_flags = int(rows.start[i]), rows.seq, 2
        te = p.track_event
        for a in rows.ints:
            if a.present is None or a.present[i]:
                te.debug_annotations.add(name_iid=a.key_iid, int_value=int(a.values[i]))
        for s in rows.strings:
            if s.codes[i] >= 0:
                te.debug_annotations.add(name_iid=s.key_iid, string_value=s.table[int(s.codes[i])])
        te.type, te.name_iid, te.track_uuid = 1, int(rows.name_iid[i]), int(rows.track[i])
        te.flow_ids.extend(flows.get(i, []))
        te.terminating_flow_ids.extend(terms.get(i, []))
        q = t.packet.add()
        q.timestamp, q.trusted_packet_sequence_id, q.sequence_flags = int(rows.end[i]), rows.seq, 2
        q.track_event.type, q.track_event.track_uuid = 2, int(rows.track[i])
    return t.SerializeToString()
