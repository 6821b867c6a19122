"""Columnar protobuf encoder: whole columns of TracePackets written with numpy, no Python object per event.

A record is a list of fields (`Const`, `Varint`, `Fixed64`, `Ragged`, `Message`), each a column of N rows with
an optional presence mask. `encode(fields, n)` lays the N rows out back to back: row i is the concatenation of
every field's bytes for row i. Lengths are computed bottom-up when the fields are built (message lengths), then
rows are written into a matrix with one fixed-width slot per field and compacted with a boolean mask. Fields
must be given in field-number order for byte equality with pb2.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

U8 = NDArray[np.uint8]
I64 = NDArray[np.int64]
BoolArr = NDArray[np.bool_]

_SHIFTS = np.arange(0, 70, 7, dtype=np.uint64)[:10]


def varint_bytes(value: int) -> bytes:
    """Protobuf varint of one non-negative int (negative ints as their 64-bit two's complement)."""
    n = value & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    """The key bytes of a field: varint(field << 3 | wire_type)."""
    return varint_bytes(field << 3 | wire_type)


_CONTINUATION = np.array([sum(0x80 << (8 * j) for j in range(max(0, min(ln - 1, 8)))) for ln in range(10)], np.uint64)
"""Continuation bits of the first 8 bytes of a varint of length 0-9 (index 9 also covers length 10)."""
_THRESHOLDS = np.array([1 << (7 * k) for k in range(1, 10)], np.uint64)


def varint_lengths(values: NDArray[np.uint64]) -> I64:
    """Bytes each uint64 takes as a varint (1-10)."""
    if values.shape[0] == 0:
        return np.zeros(0, np.int64)
    top = values.max()
    if top < _THRESHOLDS[0]:
        return np.ones(values.shape[0], np.int64)
    if top < _THRESHOLDS[1]:
        return (values >= _THRESHOLDS[0]).astype(np.int64) + 1
    return np.searchsorted(_THRESHOLDS, values, side="right").astype(np.int64) + 1


def _as_u64(values: NDArray[np.generic] | Sequence[int]) -> NDArray[np.uint64]:
    arr = np.asarray(values)
    if arr.dtype == np.uint64:
        return arr
    return arr.astype(np.int64, copy=False).view(np.uint64)


class Field:
    """A column of one protobuf field (or a fixed run of bytes) over N rows.

    `lens` are the bytes of each row (0 where absent); `width` is the widest row: the field's slot in the row
    matrix that encode() fills and then compacts.
    """

    lens: I64
    mask: BoolArr | None
    width: int

    def _keep(self, rows: slice, present: BoolArr | None) -> BoolArr | None:
        own = None if self.mask is None else self.mask[rows]
        if present is None:
            return own
        return present if own is None else present & own

    def fill(self, out: U8, keep: BoolArr, col: int, rows: slice, present: BoolArr | None) -> None:
        """Write rows `rows` into out[:, col:col+width] and mark their real bytes in `keep`."""
        raise NotImplementedError


def _mark(keep: BoolArr, col: int, lens: I64, width: int, present: BoolArr | None) -> None:
    if width == 0:
        return
    k = np.arange(width) < lens[:, None]
    keep[:, col : col + width] = k if present is None else k & present[:, None]


class Const(Field):
    """The same bytes on every present row (tags, enum values, constant fields)."""

    def __init__(self, data: bytes, n: int, mask: BoolArr | None = None) -> None:
        self.data = np.frombuffer(data, np.uint8)
        self.mask = mask
        self.width = len(data)
        self.lens = np.full(n, len(data), np.int64) if mask is None else np.where(mask, len(data), 0)

    def fill(self, out: U8, keep: BoolArr, col: int, rows: slice, present: BoolArr | None) -> None:
        w = self.width
        out[:, col : col + w] = self.data
        p = self._keep(rows, present)
        keep[:, col : col + w] = True if p is None else p[:, None]


class Varint(Field):
    """A varint field column, key bytes first (int64 values: negatives become 10-byte two's complement)."""

    def __init__(
        self, values: NDArray[np.generic] | Sequence[int], key: bytes = b"", mask: BoolArr | None = None
    ) -> None:
        self.values = _as_u64(values)
        self.key = np.frombuffer(key, np.uint8)
        self.mask = mask
        self.vlens = varint_lengths(self.values)
        ln = self.vlens + len(key)
        self.lens = ln if mask is None else np.where(mask, ln, 0)
        self.top = int(self.vlens.max()) if self.vlens.size else 0
        self.width = len(key) + self.top

    def fill(self, out: U8, keep: BoolArr, col: int, rows: slice, present: BoolArr | None) -> None:
        k, top = self.key.size, self.top
        vlens = self.vlens[rows]
        p = self._keep(rows, present)
        if k:
            out[:, col : col + k] = self.key
            keep[:, col : col + k] = True if p is None else p[:, None]
        out[:, col + k : col + k + top] = _varint_grid(self.values[rows], vlens, top)
        if self.top and int(vlens.min()) == top:
            keep[:, col + k : col + k + top] = True if p is None else p[:, None]
        else:
            _mark(keep, col + k, vlens, top, p)


def _varint_grid(vals: NDArray[np.uint64], ln: I64, top: int) -> NDArray[np.uint8]:
    """Varint bytes as an (N, top) matrix: 7-bit groups spread into byte lanes with uint64 arithmetic."""
    lanes = vals & np.uint64(0x7F)
    for k in range(1, min(top, 8)):
        lanes |= (vals << np.uint64(k)) & np.uint64(0x7F << (8 * k))
    lanes |= _CONTINUATION[np.minimum(ln, 9)]
    grid = lanes.view(np.uint8).reshape(-1, 8)[:, :top]
    if top <= 8:
        return grid
    extra = np.empty((vals.shape[0], top - 8), np.uint8)
    extra[:, 0] = ((vals >> np.uint64(56)) & np.uint64(0x7F)).astype(np.uint8) | ((ln > 9).astype(np.uint8) << 7)
    if top == 10:
        extra[:, 1] = (vals >> np.uint64(63)).astype(np.uint8)
    return np.concatenate([grid, extra], axis=1)


class Fixed64(Field):
    """A fixed64/double field column: key bytes, then 8 little-endian bytes per present row."""

    def __init__(self, values: NDArray[np.generic], key: bytes = b"", mask: BoolArr | None = None) -> None:
        arr = np.ascontiguousarray(values)
        self.raw = arr.astype(arr.dtype.newbyteorder("<"), copy=False).view(np.uint8).reshape(-1, 8)
        self.key = np.frombuffer(key, np.uint8)
        self.width = len(key) + 8
        self.mask = mask
        self.lens = np.full(arr.shape[0], self.width, np.int64) if mask is None else np.where(mask, self.width, 0)

    def fill(self, out: U8, keep: BoolArr, col: int, rows: slice, present: BoolArr | None) -> None:
        k = self.key.size
        out[:, col : col + k] = self.key
        out[:, col + k : col + k + 8] = self.raw[rows]
        p = self._keep(rows, present)
        keep[:, col : col + self.width] = True if p is None else p[:, None]


class Ragged(Field):
    """Arbitrary bytes per row: `data` holds every row's bytes back to back, `row_lens` their lengths."""

    def __init__(self, data: U8, row_lens: I64) -> None:
        self.data = data
        self.lens = row_lens.astype(np.int64, copy=False)
        self.starts = np.cumsum(self.lens) - self.lens
        self.mask = None
        self.width = int(self.lens.max()) if self.lens.size else 0

    @classmethod
    def from_codes(cls, codes: NDArray[np.integer], table: Sequence[bytes]) -> Ragged:
        """Per-row bytes chosen from `table` by index (negative code: no bytes)."""
        lens_t = np.array([len(b) for b in table] + [0], np.int64)
        blob = np.frombuffer(b"".join(table), np.uint8)
        starts_t = np.concatenate(([0], np.cumsum(lens_t)[:-1]))
        idx = np.where(codes < 0, len(table), codes).astype(np.int64)
        lens = lens_t[idx]
        total = int(lens.sum())
        src = np.repeat(starts_t[idx] - (np.cumsum(lens) - lens), lens) + np.arange(total)
        return cls(blob[src] if total else np.zeros(0, np.uint8), lens)

    def fill(self, out: U8, keep: BoolArr, col: int, rows: slice, present: BoolArr | None) -> None:
        if self.width == 0:
            return
        lens, starts = self.lens[rows], self.starts[rows]
        total = int(lens.sum())
        if total:
            local = np.repeat(np.arange(lens.shape[0]), lens)
            offset = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
            out[local, col + offset] = self.data[np.repeat(starts, lens) + offset]
        _mark(keep, col, lens, self.width, present)


class Message(Field):
    """A length-delimited sub-message: key bytes, varint length, then its fields."""

    def __init__(self, key: bytes, fields: Sequence[Field], n: int, mask: BoolArr | None = None) -> None:
        self.fields = list(fields)
        body = np.zeros(n, np.int64)
        for f in self.fields:
            body += f.lens
        self.header = Varint(body, key, mask)
        self.mask = mask
        total = body + self.header.lens
        self.lens = total if mask is None else np.where(mask, total, 0)
        self.width = self.header.width + sum(f.width for f in self.fields)

    def fill(self, out: U8, keep: BoolArr, col: int, rows: slice, present: BoolArr | None) -> None:
        p = self._keep(rows, present)
        for f in [self.header, *self.fields]:
            f.fill(out, keep, col, rows, p)
            col += f.width


MATRIX_BYTES = 48 << 20
"""Rows are laid out in blocks whose (rows x widest row) matrix stays under this size."""


def encode(fields: Sequence[Field], n: int) -> bytes:
    """Encode N rows: row i is every field's bytes for row i, rows back to back.

    Each block of rows is laid out as a matrix with one fixed slot per field (filled with contiguous column
    writes, no per-byte index arithmetic), then compacted to the real bytes with one boolean mask.
    """
    width = sum(f.width for f in fields)
    if n == 0 or width == 0:
        return b""
    block = max(1, MATRIX_BYTES // width)
    parts = []
    for a in range(0, n, block):
        rows = slice(a, min(n, a + block))
        m = rows.stop - a
        out = np.zeros((m, width), np.uint8)
        keep = np.zeros((m, width), bool)
        col = 0
        for f in fields:
            f.fill(out, keep, col, rows, None)
            col += f.width
        parts.append(out[keep].tobytes())
    return b"".join(parts)


def packet(fields: Sequence[Field], n: int, mask: BoolArr | None = None) -> Message:
    """A TracePacket framed as one `Trace.packet` (field 1): concatenated rows form a valid Trace."""
    return Message(b"\x0a", fields, n, mask)


# --- TrackEvent rows -------------------------------------------------------------------------------------------

TYPE_SLICE_BEGIN, TYPE_SLICE_END, TYPE_INSTANT, TYPE_COUNTER = 1, 2, 3, 4
SEQ_NEEDS_INCREMENTAL_STATE = 2
_K_TS, _K_SEQ, _K_TE, _K_FLAGS = b"\x40", b"\x50", b"\x5a", b"\x68"
_K_TYPE, _K_NAME_IID, _K_TRACK = b"\x48", b"\x50", b"\x58"
K_FLOW_IDS, K_TERMINATING_FLOW_IDS = tag(47, 1), tag(48, 1)
_K_DOUBLE_COUNTER = tag(44, 1)


class IntAnnotation(Varint):
    """DebugAnnotation{name_iid, int_value} (TrackEvent field 4) as one flat field: 0x22, length, 0x08 iid,
    0x20 value. Same bytes as the Message form, without its per-row length bookkeeping."""

    def __init__(self, key_iid: int, values: NDArray[np.generic], mask: BoolArr | None = None) -> None:
        inner = b"\x08" + varint_bytes(key_iid) + b"\x20"
        super().__init__(values, b"\x22\x00" + inner, mask)
        self.body = (self.vlens + len(inner)).astype(np.uint8)  # < 128: one length byte

    def fill(self, out: U8, keep: BoolArr, col: int, rows: slice, present: BoolArr | None) -> None:
        super().fill(out, keep, col, rows, present)
        out[:, col + 1] = self.body[rows]


def int_annotation(key_iid: int, values: NDArray[np.generic], mask: BoolArr | None = None) -> Field:
    """DebugAnnotation{name_iid, int_value} (TrackEvent field 4) per present row."""
    return IntAnnotation(key_iid, values, mask)


def string_annotation(
    key_iid: int, codes: NDArray[np.integer], table: Sequence[str], mask: BoolArr | None = None
) -> Message:
    """DebugAnnotation{name_iid, string_value} per present row, the string chosen from `table` by code."""
    n = codes.shape[0]
    encoded = [b"\x32" + varint_bytes(len(b)) + b for b in (s.encode() for s in table)]
    return Message(b"\x22", [Const(b"\x08" + varint_bytes(key_iid), n), Ragged.from_codes(codes, encoded)], n, mask)


def repeated_fixed64(key: bytes, rows: I64, values: NDArray[np.uint64], n: int) -> Ragged:
    """A repeated fixed64 field (flow ids): row `rows[j]` gets `values[j]`; rows may repeat, in any order."""
    order = np.argsort(rows, kind="stable")
    item = np.concatenate(
        [
            np.broadcast_to(np.frombuffer(key, np.uint8), (rows.size, len(key))),
            values[order].astype("<u8").view(np.uint8).reshape(-1, 8),
        ],
        axis=1,
    )
    counts = np.bincount(rows, minlength=n).astype(np.int64)
    return Ragged(item.reshape(-1), counts * (len(key) + 8))


def slice_rows(
    seq: int,
    start: I64,
    end: I64,
    track: I64,
    name_iid: I64,
    annotations: Sequence[Field] = (),
    flows: Sequence[Ragged] = (),
) -> list[Field]:
    """Fields of one row = a BEGIN packet then its END packet (write rows sorted by (start, -duration)).

    Args:
        seq: trusted_packet_sequence_id of every packet.
        start, end, track, name_iid: one value per slice.
        annotations: DebugAnnotation messages (field 4) from int_annotation/string_annotation.
        flows: flow_ids / terminating_flow_ids fields from repeated_fixed64, in field-number order.
    """
    n = start.shape[0]
    seq_key = _K_SEQ + varint_bytes(seq)
    flags = Const(_K_FLAGS + varint_bytes(SEQ_NEEDS_INCREMENTAL_STATE), n)
    begin_te = [
        *annotations,
        Const(_K_TYPE + b"\x01", n),
        Varint(name_iid, _K_NAME_IID),
        Varint(track, _K_TRACK),
        *flows,
    ]
    begin = packet([Varint(start, _K_TS), Const(seq_key, n), Message(_K_TE, begin_te, n), flags], n)
    end_te = [Const(_K_TYPE + b"\x02", n), Varint(track, _K_TRACK)]
    end_p = packet(
        [
            Varint(end, _K_TS),
            Const(seq_key, n),
            Message(_K_TE, end_te, n),
            Const(_K_FLAGS + varint_bytes(SEQ_NEEDS_INCREMENTAL_STATE), n),
        ],
        n,
    )
    return [begin, end_p]


def counter_rows(seq: int, ts: I64, track: I64, values: NDArray[np.float64]) -> list[Field]:
    """Fields of one TYPE_COUNTER packet per row (double_counter_value)."""
    n = ts.shape[0]
    te = [
        Const(_K_TYPE + bytes([TYPE_COUNTER]), n),
        Varint(track, _K_TRACK),
        Fixed64(values.astype(np.float64), _K_DOUBLE_COUNTER),
    ]
    return [packet([Varint(ts, _K_TS), Const(_K_SEQ + varint_bytes(seq), n), Message(_K_TE, te, n)], n)]
