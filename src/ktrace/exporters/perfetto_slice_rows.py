"""A batch of slices ready to encode (`SliceRows`), its two encoders (numpy columns or one compiled pass), and the
flow ids of each batch (`FlowChunks`).

Both write the same bytes (tests/unit/exporters/test_perfetto_slice_rows.py). The numpy encoder needs no compiler
and is quick on small batches; the compiled one (perfetto_kernel, numba) writes ~10x faster but costs numba's
import (~0.5 s) and, on a first run, its compilation (seconds), so it serves large exports only.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl
from numpy.typing import NDArray

from ktrace.exporters import perfetto_encoder as enc
from ktrace.exporters.background_writes import BufferPool, Kernel, KernelJob, load_in_thread, ragged

I64 = NDArray[np.int64]
U64 = NDArray[np.uint64]
BoolArr = NDArray[np.bool_]

COMPILED_MIN_ROWS = int(os.environ.get("KTRACE_PERFETTO_COMPILED_ROWS", "500000"))
"""A rank with at least this many slices is encoded by the compiled kernel; smaller ones by numpy columns.
KTRACE_PERFETTO_COMPILED_ROWS=0 always compiles; a huge value never does."""


@dataclass(frozen=True)
class IntArg:
    """An integer debug annotation column: DebugAnnotation{name_iid: key_iid, int_value} where `present`."""

    key_iid: int
    values: I64
    present: BoolArr | None
    """None: on every row."""


@dataclass(frozen=True)
class StrArg:
    """A string debug annotation column: DebugAnnotation{name_iid: key_iid, string_value: table[code]}."""

    key_iid: int
    codes: I64
    """Index into `table` per row; negative: no annotation on that row."""
    table: Sequence[str]


@dataclass(frozen=True)
class SliceRows:
    """N slices of one sequence, in file order; each becomes a BEGIN and an END packet.

    Debug annotations are written in the order given, integer ones before string ones. Flows: row flow_rows[j]
    gets flow_ids[j] (rows may repeat, in any order; a row's ids keep their order here), likewise terminating.
    """

    seq: int
    start: I64
    end: I64
    track: I64
    name_iid: I64
    ints: tuple[IntArg, ...] = ()
    strings: tuple[StrArg, ...] = ()
    flow_rows: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    flow_ids: U64 = field(default_factory=lambda: np.zeros(0, np.uint64))
    term_rows: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    term_ids: U64 = field(default_factory=lambda: np.zeros(0, np.uint64))


def split_rows(rows: SliceRows, size: int) -> list[SliceRows]:
    """`rows` cut into batches of `size` rows at most, in order: their packets back to back are the packets of
    `rows` (each slice's packets depend on its own row only)."""
    n = int(rows.start.shape[0])
    if n <= size:
        return [rows]
    out = []
    flows_sorted, terms_sorted = _sorted(rows.flow_rows), _sorted(rows.term_rows)
    for a in range(0, n, size):
        b = min(n, a + size)
        flows = slice(*np.searchsorted(rows.flow_rows, [a, b]).tolist()) if flows_sorted else None
        terms = slice(*np.searchsorted(rows.term_rows, [a, b]).tolist()) if terms_sorted else None
        f_at = flows if flows is not None else (rows.flow_rows >= a) & (rows.flow_rows < b)
        t_at = terms if terms is not None else (rows.term_rows >= a) & (rows.term_rows < b)
        out.append(
            SliceRows(
                rows.seq,
                rows.start[a:b],
                rows.end[a:b],
                rows.track[a:b],
                rows.name_iid[a:b],
                tuple(
                    IntArg(i.key_iid, i.values[a:b], None if i.present is None else i.present[a:b]) for i in rows.ints
                ),
                tuple(StrArg(t.key_iid, t.codes[a:b], t.table) for t in rows.strings),
                rows.flow_rows[f_at] - a,
                rows.flow_ids[f_at],
                rows.term_rows[t_at] - a,
                rows.term_ids[t_at],
            )
        )
    return out


def _sorted(rows: I64) -> bool:
    return bool((rows[1:] >= rows[:-1]).all())


def encode_numpy(rows: SliceRows) -> bytes:
    """The packets of `rows` by the columnar numpy encoder."""
    n = rows.start.shape[0]
    annotations: list[enc.Field] = [enc.int_annotation(a.key_iid, a.values, a.present) for a in rows.ints]
    annotations += [enc.string_annotation(a.key_iid, a.codes, a.table, a.codes >= 0) for a in rows.strings]
    flows = [
        enc.repeated_fixed64(enc.K_FLOW_IDS, rows.flow_rows, rows.flow_ids, n),
        enc.repeated_fixed64(enc.K_TERMINATING_FLOW_IDS, rows.term_rows, rows.term_ids, n),
    ]
    return enc.encode(enc.slice_rows(rows.seq, rows.start, rows.end, rows.track, rows.name_iid, annotations, flows), n)


def _read_only(a: np.ndarray) -> np.ndarray:
    """A C-contiguous read-only view of `a` (polars hands some columns zero-copy, read-only, others not): the
    kernel sees one writeability, so one numba signature, the one warm_compiled compiles."""
    view = np.ascontiguousarray(a).view()
    view.flags.writeable = False
    return view


def _csr(rows: I64, ids: U64, n: int) -> tuple[I64, U64]:
    order = np.argsort(rows, kind="stable")
    offsets = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=n)))).astype(np.int64)
    return offsets, np.ascontiguousarray(ids[order], np.uint64)


def encode_compiled(rows: SliceRows) -> memoryview:
    """The packets of `rows` by the numba kernel (perfetto_kernel.slice_packets), as a view of bytes that hold just
    them."""
    view, _ = Encoding(rows, BufferPool(0)).run()
    return memoryview(bytes(view))


def packets_bound(n: int, const_off: I64, int_head_off: I64, str_off: I64, strings: int, flow_bytes: int) -> int:
    """The most bytes slice_packets writes for `n` rows: varints of 10 bytes, every arg on every row."""
    ints = int_head_off.shape[0] - 1
    head = 2 * (1 + 10 + 1 + 10 + int(const_off[2] - const_off[0]) + 1 + 10)
    longest = int(np.diff(str_off).max(initial=0))
    types = int(const_off[4] - const_off[2])
    row = head + ints * (1 + 10 + 10) + int(int_head_off[-1]) + strings * longest + types + 3 * 11  # name, 2 tracks
    return n * row + flow_bytes


def _slice_packets() -> Kernel:
    from ktrace.exporters.perfetto_kernel import slice_packets  # noqa: PLC0415 - numba only for large exports

    return slice_packets


class Encoding(KernelJob):
    """A batch's packets by the numba kernel (perfetto_kernel.slice_packets), its inputs laid out here (in the
    caller's thread); `run` (KernelJob's) calls the kernel: the export runs it in the writer's thread."""

    def __init__(self, rows: SliceRows, pool: BufferPool) -> None:
        bound, inputs = _kernel_inputs(rows) if rows.start.shape[0] else (0, ())
        super().__init__(_slice_packets, bound, inputs, pool)


def _kernel_inputs(rows: SliceRows) -> tuple[int, tuple[np.ndarray, ...]]:
    """The bytes slice_packets writes at most (its output buffer's size) and its other arguments."""
    n = rows.start.shape[0]
    flags = enc.tag(13, 0) + enc.varint_bytes(enc.SEQ_NEEDS_INCREMENTAL_STATE)
    consts, const_off = ragged(
        [
            enc.tag(10, 0) + enc.varint_bytes(rows.seq),
            flags,
            enc.tag(9, 0) + bytes([enc.TYPE_SLICE_BEGIN]),
            enc.tag(9, 0) + bytes([enc.TYPE_SLICE_END]),
            enc.K_FLOW_IDS,
            enc.K_TERMINATING_FLOW_IDS,
        ]
    )
    int_heads, int_head_off = ragged([b"\x08" + enc.varint_bytes(a.key_iid) + b"\x20" for a in rows.ints])
    int_vals = np.zeros((len(rows.ints), n), np.int64)
    int_present = np.ones((len(rows.ints), n), np.bool_)
    for j, a in enumerate(rows.ints):
        int_vals[j] = a.values
        if a.present is not None:
            int_present[j] = a.present
    entries: list[bytes] = []
    str_codes = np.full((len(rows.strings), n), -1, np.int64)
    for j, s in enumerate(rows.strings):
        str_codes[j] = np.where(s.codes >= 0, s.codes + len(entries), -1)
        for text in s.table:
            body = (
                b"\x08" + enc.varint_bytes(s.key_iid) + b"\x32" + enc.varint_bytes(len(text.encode())) + text.encode()
            )
            entries.append(b"\x22" + enc.varint_bytes(len(body)) + body)
    str_blob, str_off = ragged(entries)
    flow_off, flow_ids = _csr(rows.flow_rows, rows.flow_ids, n)
    term_off, term_ids = _csr(rows.term_rows, rows.term_ids, n)
    flow_bytes = flow_ids.shape[0] * (len(enc.K_FLOW_IDS) + 8) + term_ids.shape[0] * (
        len(enc.K_TERMINATING_FLOW_IDS) + 8
    )
    bound = packets_bound(n, const_off, int_head_off, str_off, len(rows.strings), flow_bytes)
    inputs: tuple[np.ndarray, ...] = (
        *(np.ascontiguousarray(c, np.int64) for c in (rows.start, rows.end, rows.track, rows.name_iid)),
        *(consts, const_off, int_heads, int_head_off, int_vals, int_present, str_blob, str_off, str_codes),
        *(flow_off, flow_ids, term_off, term_ids),
    )
    return bound, tuple(_read_only(a) for a in inputs)


def warm_compiled() -> threading.Thread:
    """The compiled kernel loaded in a thread (background_writes.load_in_thread), on one row of every field."""
    one = np.zeros(1, np.int64)
    args = (IntArg(1, one, one > 0),), (StrArg(2, one, ("",)),)
    return load_in_thread(lambda: encode_compiled(SliceRows(1, one, one, one, one, *args, one, one.astype(np.uint64))))


class FlowChunks:
    """Flow ids of one rank's launch->run pairs, split by chunk of slice rows (each chunk's pairs found by binary
    search: a mask over every pair per chunk made the split quadratic, ~5 s on 10 M flows)."""

    def __init__(self, pairs: pl.DataFrame, first_id: int) -> None:
        self.launch = pairs["launch_row"].to_numpy()
        self.gpu = pairs["gpu_row"].to_numpy()  # sorted (launch_pairs)
        self.ids = (first_id + np.arange(pairs.height)).astype(np.uint64)
        # terminating_flow_ids is ignored by TP when the flow is not open yet: a GPU record that starts before
        # its launch (clock skew) uses flow_ids on both ends instead (perfetto.md §1.5).
        self.term = pairs["gpu_start"].to_numpy() >= pairs["launch_start"].to_numpy()
        self.by_launch = np.argsort(self.launch, kind="stable")
        self.launch_sorted = self.launch[self.by_launch]

    def chunk(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(flow_rows, flow_ids, terminating_rows, terminating_ids) with rows relative to `a`; a row's ids keep
        the pairs' order."""
        lo, hi = np.searchsorted(self.launch_sorted, [a, b])
        launches = self.by_launch[lo:hi]
        g = slice(*np.searchsorted(self.gpu, [a, b]).tolist())
        gpu, ids, term = self.gpu[g], self.ids[g], self.term[g]
        out_rows = np.concatenate([self.launch[launches], gpu[~term]]) - a
        out_ids = np.concatenate([self.ids[launches], ids[~term]])
        return out_rows, out_ids, gpu[term] - a, ids[term]
