"""numba kernels of the timeline exporters: Perfetto slice rows (a BEGIN and an END TracePacket per slice) and
Chrome JSON event lines, each written in one pass per row.

The numpy encoder (perfetto_encoder) lays every row out in a fixed-slot matrix as wide as the union of all fields
and compacts it: on mixed rows (kernels with ten args beside API calls with one) most of that matrix is padding,
and it costs ~4 s per million slices. `slice_packets` writes each row's real bytes once, the same bytes (field
order and encodings as perfetto_encoder.slice_rows; tests/reference/perfetto_rows_ref.py is its one-pb2-packet-
per-event twin). `format_rows` writes Chrome JSON lines by the small program of each line's template
(chrome_compiled_lines), the bytes of chrome_lines' numpy slots and of the polars formatter, in row order with no
sort by kind (tests/reference/chrome_rows_ref.py is its naive twin). `nogil`; imported lazily on large exports
only (numba costs ~0.5 s to load). Both write into a buffer the caller sizes (and reuses: its pages are resident)."""

from __future__ import annotations

import numba
import numpy as np

from ktrace.exporters.chrome_lines import OP_INT, OP_LITERAL, OP_MICROS

_jit = numba.njit(nogil=True, cache=True)

_SEVEN = np.uint64(7)
_LOW7 = np.uint64(0x7F)
_MORE = np.uint64(0x80)


@_jit
def varint_len(value: int) -> int:
    """Bytes of a protobuf varint (negative ints as their 64-bit two's complement: 10 bytes)."""
    u = np.uint64(value)
    n = 1
    while u > _LOW7:
        u = u >> _SEVEN
        n += 1
    return n


@_jit
def put_varint(out: np.ndarray, at: int, value: int) -> int:
    """Write a varint at out[at:], return the position after it."""
    u = np.uint64(value)
    while u > _LOW7:
        out[at] = np.uint8((u & _LOW7) | _MORE)
        u = u >> _SEVEN
        at += 1
    out[at] = np.uint8(u)
    return at + 1


@_jit
def _put(out: np.ndarray, at: int, data: np.ndarray, a: int, b: int) -> int:
    for k in range(a, b):
        out[at] = data[k]
        at += 1
    return at


@_jit
def _put_fixed64(out: np.ndarray, at: int, value: np.uint64) -> int:
    u = np.uint64(value)
    for _ in range(8):
        out[at] = np.uint8(u & np.uint64(0xFF))
        u = u >> np.uint64(8)
        at += 1
    return at


@_jit
def _begin_te_len(
    i: int,
    name_iid: np.ndarray,
    track: np.ndarray,
    int_head_off: np.ndarray,
    int_vals: np.ndarray,
    int_present: np.ndarray,
    str_off: np.ndarray,
    str_codes: np.ndarray,
    flow_off: np.ndarray,
    term_off: np.ndarray,
    flow_item: int,
    term_item: int,
    type_len: int,
) -> int:
    te = 0
    for j in range(int_vals.shape[0]):
        if int_present[j, i]:
            body = int_head_off[j + 1] - int_head_off[j] + varint_len(int_vals[j, i])
            te += 1 + varint_len(body) + body
    for j in range(str_codes.shape[0]):
        c = str_codes[j, i]
        if c >= 0:
            te += str_off[c + 1] - str_off[c]
    te += type_len + 1 + varint_len(name_iid[i]) + 1 + varint_len(track[i])
    te += (flow_off[i + 1] - flow_off[i]) * flow_item + (term_off[i + 1] - term_off[i]) * term_item
    return te


@_jit
def _packet_body(ts: int, te: int, const_off: np.ndarray) -> int:
    """Bytes of a TracePacket {timestamp, sequence id, TrackEvent of `te` bytes, flags} inside its frame."""
    return 1 + varint_len(ts) + (const_off[1] - const_off[0]) + 1 + varint_len(te) + te + (const_off[2] - const_off[1])


@_jit
def _put_packet_head(out: np.ndarray, at: int, ts: int, te: int, consts: np.ndarray, const_off: np.ndarray) -> int:
    """Frame key and length, timestamp, sequence id, TrackEvent key and length: the TrackEvent's bytes go next,
    then the flags (const 1)."""
    out[at] = 0x0A
    at = put_varint(out, at + 1, _packet_body(ts, te, const_off))
    out[at] = 0x40
    at = put_varint(out, at + 1, ts)
    at = _put(out, at, consts, const_off[0], const_off[1])
    out[at] = 0x5A
    return put_varint(out, at + 1, te)


@_jit
def slice_packets(
    out: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    track: np.ndarray,
    name_iid: np.ndarray,
    consts: np.ndarray,
    const_off: np.ndarray,
    int_heads: np.ndarray,
    int_head_off: np.ndarray,
    int_vals: np.ndarray,
    int_present: np.ndarray,
    str_blob: np.ndarray,
    str_off: np.ndarray,
    str_codes: np.ndarray,
    flow_off: np.ndarray,
    flow_ids: np.ndarray,
    term_off: np.ndarray,
    term_ids: np.ndarray,
) -> int:
    """Every slice as `Trace.packet` frames, written into `out` (perfetto_slice_rows.packets_bound bytes long at
    least); the bytes written. Frames: BEGIN {ts, seq, TrackEvent{int args, string args, type, name_iid,
    track_uuid, flow_ids, terminating_flow_ids}, flags}, then END {ts, seq, TrackEvent{type, track_uuid}, flags}.

    consts: the constant byte runs back to back, bounded by const_off: 0 sequence id field, 1 sequence flags
    field, 2 BEGIN type field, 3 END type field, 4 flow_ids key, 5 terminating_flow_ids key.
    int_heads[int_head_off[j]:int_head_off[j+1]]: DebugAnnotation bytes of int arg j before its value
    (name_iid field, then the int_value key); row i has it where int_present[j, i].
    str_blob[str_off[c]:str_off[c+1]]: a whole string DebugAnnotation field (key, length, body); row i gets entry
    str_codes[j, i] for each string arg j (negative: none).
    flow_ids[flow_off[i]:flow_off[i+1]] (and term_ids by term_off): row i's flow ids, in the order written.
    """
    n = start.shape[0]
    type_len = const_off[3] - const_off[2]
    end_type_len = const_off[4] - const_off[3]
    flow_key = const_off[5] - const_off[4]
    term_key = const_off[6] - const_off[5]
    # One pass: each row's TrackEvent length is worked out just before it is written.
    at = 0
    for i in range(n):
        te = _begin_te_len(
            i,
            name_iid,
            track,
            int_head_off,
            int_vals,
            int_present,
            str_off,
            str_codes,
            flow_off,
            term_off,
            flow_key + 8,
            term_key + 8,
            type_len,
        )
        at = _put_packet_head(out, at, start[i], te, consts, const_off)
        for j in range(int_vals.shape[0]):
            if int_present[j, i]:
                head_a, head_b = int_head_off[j], int_head_off[j + 1]
                out[at] = 0x22
                at = put_varint(out, at + 1, head_b - head_a + varint_len(int_vals[j, i]))
                at = _put(out, at, int_heads, head_a, head_b)
                at = put_varint(out, at, int_vals[j, i])
        for j in range(str_codes.shape[0]):
            c = str_codes[j, i]
            if c >= 0:
                at = _put(out, at, str_blob, str_off[c], str_off[c + 1])
        at = _put(out, at, consts, const_off[2], const_off[3])
        out[at] = 0x50
        at = put_varint(out, at + 1, name_iid[i])
        out[at] = 0x58
        at = put_varint(out, at + 1, track[i])
        for k in range(flow_off[i], flow_off[i + 1]):
            at = _put(out, at, consts, const_off[4], const_off[5])
            at = _put_fixed64(out, at, flow_ids[k])
        for k in range(term_off[i], term_off[i + 1]):
            at = _put(out, at, consts, const_off[5], const_off[6])
            at = _put_fixed64(out, at, term_ids[k])
        at = _put(out, at, consts, const_off[1], const_off[2])
        at = _put_packet_head(out, at, end[i], end_type_len + 1 + varint_len(track[i]), consts, const_off)
        at = _put(out, at, consts, const_off[3], const_off[4])
        out[at] = 0x58
        at = put_varint(out, at + 1, track[i])
        at = _put(out, at, consts, const_off[1], const_off[2])
    return at


@_jit
def _put_int(out: np.ndarray, at: int, value: int) -> int:
    """Write `value` in decimal at out[at:]; the position after it."""
    if value < 0:
        out[at] = 45  # "-"
        at += 1
        u = np.uint64(-(value + 1)) + np.uint64(1)  # -(-2**63) as 2**63
    else:
        u = np.uint64(value)
    digits = 1
    rest = u // np.uint64(10)
    while rest > 0:
        rest //= np.uint64(10)
        digits += 1
    k = at + digits - 1
    while k >= at:
        out[k] = np.uint8(48 + u % np.uint64(10))
        u //= np.uint64(10)
        k -= 1
    return at + digits


@_jit
def _copy(out: np.ndarray, at: int, data: np.ndarray, a: int, b: int) -> int:
    """Copy data[a:b] to out[at:]; the position after it (unsigned indices: no negative-index wraparound)."""
    to, k, end = np.uint64(at), np.uint64(a), np.uint64(b)
    while k < end:
        out[to] = data[k]
        to += np.uint64(1)
        k += np.uint64(1)
    return np.int64(to)


@_jit
def format_rows(
    out: np.ndarray,
    template: np.ndarray,
    program: np.ndarray,
    program_off: np.ndarray,
    literals: np.ndarray,
    literal_off: np.ndarray,
    ints: np.ndarray,
    valid: np.ndarray,
    tokens: np.ndarray,
    token_blob: np.ndarray,
    token_off: np.ndarray,
) -> int:
    """Row i's line by program[program_off[t]:program_off[t + 1]] of its template t = template[i], written back to
    back in row order into `out` (as long as the rows' bounds: chrome_compiled_lines.INT_BYTES an integer,
    MICROS_BYTES a time, the longest text a token); the bytes written.

    literals[literal_off[k]:literal_off[k + 1]]: literal k. ints[k, i] and valid[k, i]: row i's int slot k.
    tokens[k, i]: row i's token in token slot k, its text token_blob[token_off[c]:token_off[c + 1]].
    """
    n = template.shape[0]
    at = 0
    for i in range(n):
        t = template[i]
        for p in range(program_off[t], program_off[t + 1]):
            op, arg = program[p, 0], program[p, 1]
            if op == OP_LITERAL:
                at = _copy(out, at, literals, literal_off[arg], literal_off[arg + 1])
            elif op == OP_INT:
                if valid[arg, i]:
                    at = _put_int(out, at, ints[arg, i])
                else:
                    out[at], out[at + 1], out[at + 2], out[at + 3] = 110, 117, 108, 108  # null
                    at += 4
            elif op == OP_MICROS:
                ns = ints[arg, i]
                whole = ns // 1000
                frac = ns - whole * 1000
                at = _put_int(out, at, whole)
                out[at] = 46  # "."
                out[at + 1] = np.uint8(48 + frac // 100)
                out[at + 2] = np.uint8(48 + frac // 10 % 10)
                out[at + 3] = np.uint8(48 + frac % 10)
                at += 4
            else:
                c = tokens[arg, i]
                at = _copy(out, at, token_blob, token_off[c], token_off[c + 1])
    return at
