"""The columnar encoder writes the same bytes as pb2 objects serialized one by one."""

from __future__ import annotations

import numpy as np
import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

from ktrace.exporters import perfetto_encoder as enc

EDGE_VALUES = [0, 1, 127, 128, 16383, 16384, 2**35, 2**56 - 1, 2**56, 2**63 - 1]


def test_varint_column_matches_scalar_varints_at_every_length() -> None:
    values = np.array(EDGE_VALUES + [-1, -(2**63)], np.int64)
    expected = b"".join(enc.varint_bytes(int(v)) for v in values)
    assert enc.encode([enc.Varint(values)], values.size) == expected
    assert enc.varint_lengths(values.view(np.uint64)).tolist() == [len(enc.varint_bytes(int(v))) for v in values]


def _reference_slices(
    seq: int,
    start: np.ndarray,
    end: np.ndarray,
    track: np.ndarray,
    name: np.ndarray,
    grid: np.ndarray,
    grid_ok: np.ndarray,
    kind: np.ndarray,
    table: list[str],
    flow_rows: np.ndarray,
    flow_ids: np.ndarray,
    term_rows: np.ndarray,
    term_ids: np.ndarray,
) -> bytes:
    """The naive writer: one pb2 TracePacket per event (the reference twin of the encoder)."""
    t = Trace()
    for i in range(start.size):
        p = t.packet.add()
        p.timestamp, p.trusted_packet_sequence_id, p.sequence_flags = int(start[i]), seq, 2
        te = p.track_event
        te.debug_annotations.add(name_iid=2, int_value=int(name[i]))
        if grid_ok[i]:
            te.debug_annotations.add(name_iid=3, int_value=int(grid[i]))
        if kind[i] >= 0:
            te.debug_annotations.add(name_iid=5, string_value=table[kind[i]])
        te.type, te.name_iid, te.track_uuid = 1, int(name[i]), int(track[i])
        te.flow_ids.extend(int(f) for r, f in zip(flow_rows, flow_ids, strict=True) if r == i)
        te.terminating_flow_ids.extend(int(f) for r, f in zip(term_rows, term_ids, strict=True) if r == i)
        q = t.packet.add()
        q.timestamp, q.trusted_packet_sequence_id, q.sequence_flags = int(end[i]), seq, 2
        q.track_event.type, q.track_event.track_uuid = 2, int(track[i])
    return t.SerializeToString()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_slice_rows_are_byte_identical_to_pb2(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 300
    start = rng.integers(0, 2**62, n)
    end = start + rng.integers(0, 10**9, n)
    track = rng.integers(1, 100_000, n)
    name = rng.integers(1, 3000, n)
    grid = rng.integers(-10, 2**40, n)
    grid_ok = rng.random(n) < 0.6
    kind = rng.integers(-1, 3, n)
    table = ["HtoD", "pinned", "é" * 100]
    flow_rows, flow_ids = rng.integers(0, n, 80), rng.integers(0, 2**63, 80).astype(np.uint64)
    term_rows, term_ids = rng.integers(0, n, 40), rng.integers(0, 2**63, 40).astype(np.uint64)
    fields = enc.slice_rows(
        9,
        start,
        end,
        track,
        name,
        [
            enc.int_annotation(2, name),
            enc.int_annotation(3, grid, grid_ok),
            enc.string_annotation(5, kind, table, kind >= 0),
        ],
        [
            enc.repeated_fixed64(enc.K_FLOW_IDS, flow_rows, flow_ids, n),
            enc.repeated_fixed64(enc.K_TERMINATING_FLOW_IDS, term_rows, term_ids, n),
        ],
    )
    assert enc.encode(fields, n) == _reference_slices(
        9, start, end, track, name, grid, grid_ok, kind, table, flow_rows, flow_ids, term_rows, term_ids
    )


def test_counter_rows_are_byte_identical_to_pb2() -> None:
    rng = np.random.default_rng(5)
    n = 100
    ts, track, values = rng.integers(0, 2**62, n), rng.integers(1, 500, n), rng.normal(0, 1e9, n)
    t = Trace()
    for i in range(n):
        p = t.packet.add()
        p.timestamp, p.trusted_packet_sequence_id = int(ts[i]), 4
        p.track_event.type, p.track_event.track_uuid = 4, int(track[i])
        p.track_event.double_counter_value = float(values[i])
    assert enc.encode(enc.counter_rows(4, ts, track, values), n) == t.SerializeToString()


def test_empty_batch_encodes_to_nothing() -> None:
    empty = np.zeros(0, np.int64)
    assert enc.encode(enc.slice_rows(1, empty, empty, empty, empty), 0) == b""
