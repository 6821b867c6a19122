"""One pass over a table's rows, chunk by chunk: key ids, rows per key and a coarse busy overview (numba, nogil).

The TUI draws its first screen from this scan, so it reads polars' column chunks in place (no rechunk copy) and
keeps its state (hash table, bins) between chunks. Public wrappers:

- ``TrackScan(n_rows, t0, bin_ns, n_bins, max_code)``: ``.add(rows: ChunkRows)`` per chunk in row order, then
  ``.result() -> ScanResult`` (key ids per row, first row and count per key, per key and bin the covered ns and
  the colour code of the first/last slice starting in it, and the first row of every colour code seen);
  ``.track_of_rows(rows, remap, out, at)`` later writes remap[key id] of a chunk's rows (with_ids=False skips
  the per-row ids in the first pass: no 4 B/row array to fault in before the first screen).
- ``copy_into(out, at, src)`` and ``take_into(out, at, lut, codes)``: fill a slice of a preallocated int64 array
  from one chunk (copies that do not hold the GIL).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
AnyInt = npt.NDArray[np.integer]

_FIRST_KEYS = 64
"""Initial capacity of the key table (tracks per table); it grows by 4x when full."""


class ChunkRows(NamedTuple):
    """One chunk of rows: five integer key columns (length n, or 1 for a constant), start, end, colour code."""

    k0: AnyInt
    k1: AnyInt
    k2: AnyInt
    k3: AnyInt
    k4: AnyInt
    start: AnyInt
    end: AnyInt
    codes: AnyInt


class KeyTable(NamedTuple):
    """Open-addressing hash table of key tuples (state kept between chunks)."""

    slots: I64
    """Key id per slot, -1 if empty (size a power of two, 4x the capacity)."""
    keys: I64
    """(capacity, 5) key tuples by id."""
    first_row: I64
    """Global row where each key first appears."""
    counts: I64
    """Rows per key."""
    n: I64
    """[number of keys]."""


class BinState(NamedTuple):
    """Per key and time bin (capacity, n_bins): partial sums of the overview."""

    busy: I64
    """Covered ns from slices that start or end in the bin (whole bins are in `full`)."""
    full: I64
    """(capacity, n_bins + 1) difference array of bins covered whole."""
    first_code: I64
    last_code: I64
    first_start: I64
    last_start: I64


class ScanResult(NamedTuple):
    """What TrackScan found (arrays indexed by key id, in order of first appearance)."""

    ids: I32
    """Key id per row (empty when scanned without ids)."""
    keys: I64
    """(n_keys, 5) key tuples."""
    first_row: I64
    counts: I64
    busy: I64
    """(n_keys, n_bins) covered ns per bin (overlapping slices count twice)."""
    first_code: I64
    """(n_keys, n_bins) colour code of the slice starting first in the bin (earliest row among ties); -1 if none."""
    last_code: I64
    """Likewise for the slice starting last (latest row among ties)."""
    code_row: I64
    """First global row of each colour code (-1 where a code does not occur)."""


@jit
def _hash(k0: int, k1: int, k2: int, k3: int, k4: int) -> int:  # pragma: no cover - numba
    # shifts and xors only: no multiplication, so no overflow warning when the JIT is disabled
    h = k0 ^ (k1 << 11) ^ (k2 << 23) ^ (k3 << 37) ^ (k4 << 49)
    h ^= (h >> 17) ^ (k1 >> 5) ^ (k3 >> 9)
    h ^= h >> 31
    return h


@jit
def _rehash(table: KeyTable) -> None:  # pragma: no cover - numba
    mask = table.slots.size - 1
    table.slots[:] = -1
    for q in range(table.n[0]):
        s = _hash(table.keys[q, 0], table.keys[q, 1], table.keys[q, 2], table.keys[q, 3], table.keys[q, 4]) & mask
        while table.slots[s] >= 0:
            s = (s + 1) & mask
        table.slots[s] = q


@jit
def _find(table: KeyTable, k0: int, k1: int, k2: int, k3: int, k4: int, row: int) -> int:  # pragma: no cover
    """Id of a key, added if new; -1 when the table is full."""
    keys, slots = table.keys, table.slots
    mask = slots.size - 1
    slot = _hash(k0, k1, k2, k3, k4) & mask
    while True:
        j = slots[slot]
        if j < 0:
            break
        if keys[j, 0] == k0 and keys[j, 1] == k1 and keys[j, 2] == k2 and keys[j, 3] == k3 and keys[j, 4] == k4:
            return j
        slot = (slot + 1) & mask
    j = table.n[0]
    if j >= keys.shape[0]:
        return -1
    keys[j, 0], keys[j, 1], keys[j, 2], keys[j, 3], keys[j, 4] = k0, k1, k2, k3, k4
    table.first_row[j] = row
    slots[slot] = j
    table.n[0] = j + 1
    return j


@jit
def _scan_chunk(  # noqa: C901  # pragma: no cover - numba
    rows: ChunkRows,
    table: KeyTable,
    bins: BinState,
    code_row: I64,
    ids: I32,
    row0: int,
    i0: int,
    t0: int,
    bin_ns: int,
    n_bins: int,
) -> int:
    """Scan rows[i0:] of a chunk starting at global row0 (ids written unless empty); where the table filled, or n."""
    # one loop on purpose: a per-row helper taking the BinState tuple measured 1.6x slower
    n = rows.start.size
    a, b, c, d, f = rows.k0, rows.k1, rows.k2, rows.k3, rows.k4
    start, end, codes = rows.start, rows.end, rows.codes
    busy, full, first_code, last_code = bins.busy, bins.full, bins.first_code, bins.last_code
    first_start, last_start = bins.first_start, bins.last_start
    counts = table.counts
    t1 = t0 + bin_ns * n_bins
    prev = -1
    for i in range(i0, n):
        k0, k1 = np.int64(a[min(i, a.size - 1)]), np.int64(b[min(i, b.size - 1)])
        k2, k3 = np.int64(c[min(i, c.size - 1)]), np.int64(d[min(i, d.size - 1)])
        k4 = np.int64(f[min(i, f.size - 1)])
        keys = table.keys
        if (
            prev >= 0
            and keys[prev, 0] == k0
            and keys[prev, 1] == k1
            and keys[prev, 2] == k2
            and keys[prev, 3] == k3
            and keys[prev, 4] == k4
        ):
            j = prev
        else:
            j = _find(table, k0, k1, k2, k3, k4, row0 + i)
            if j < 0:
                return i
            prev = j
        if ids.size:
            ids[row0 + i] = j
        counts[j] += 1
        code = np.int64(codes[i])
        if code_row[code] < 0:
            code_row[code] = row0 + i
        s, e = start[i], end[i]
        if t0 <= s < t1:
            q = (s - t0) // bin_ns
            if first_code[j, q] < 0 or s < first_start[j, q]:
                first_start[j, q] = s
                first_code[j, q] = code
            if last_code[j, q] < 0 or s >= last_start[j, q]:
                last_start[j, q] = s
                last_code[j, q] = code
            edge = t0 + (q + 1) * bin_ns
            if e <= edge:  # the common case: the slice ends in the bin where it starts
                if e > s:
                    busy[j, q] += e - s
                continue
        s, e = max(s, t0), min(e, t1)
        if e <= s:
            continue
        b0 = (s - t0) // bin_ns
        b1 = (e - 1 - t0) // bin_ns
        if b0 == b1:
            busy[j, b0] += e - s
        else:
            busy[j, b0] += t0 + (b0 + 1) * bin_ns - s
            busy[j, b1] += e - (t0 + b1 * bin_ns)
            full[j, b0 + 1] += 1
            full[j, b1] -= 1
    return n


@jit
def _track_of_rows(rows: ChunkRows, table: KeyTable, remap: I64, out: I64, at: int) -> None:  # pragma: no cover
    """out[at + i] = remap[id of row i's key] (every key is already in the table)."""
    a, b, c, d, f = rows.k0, rows.k1, rows.k2, rows.k3, rows.k4
    keys = table.keys
    prev = -1
    for i in range(rows.start.size):
        k0, k1 = np.int64(a[min(i, a.size - 1)]), np.int64(b[min(i, b.size - 1)])
        k2, k3 = np.int64(c[min(i, c.size - 1)]), np.int64(d[min(i, d.size - 1)])
        k4 = np.int64(f[min(i, f.size - 1)])
        if not (
            prev >= 0
            and keys[prev, 0] == k0
            and keys[prev, 1] == k1
            and keys[prev, 2] == k2
            and keys[prev, 3] == k3
            and keys[prev, 4] == k4
        ):
            prev = _find(table, k0, k1, k2, k3, k4, -1)
        out[at + i] = remap[prev]


def _empty_state(capacity: int, n_bins: int) -> tuple[KeyTable, BinState]:
    table = KeyTable(
        np.full(4 * capacity, -1, np.int64),
        np.zeros((capacity, 5), np.int64),
        np.zeros(capacity, np.int64),
        np.zeros(capacity, np.int64),
        np.zeros(1, np.int64),
    )
    zeros = np.zeros((capacity, n_bins), np.int64)
    bins = BinState(zeros, np.zeros((capacity, n_bins + 1), np.int64), zeros - 1, zeros - 1, zeros.copy(), zeros.copy())
    return table, bins


def _contiguous(rows: ChunkRows) -> ChunkRows:
    k = [np.ascontiguousarray(x) for x in rows[:5]]
    return ChunkRows(
        k[0],
        k[1],
        k[2],
        k[3],
        k[4],
        np.ascontiguousarray(rows.start, np.int64),
        np.ascontiguousarray(rows.end, np.int64),
        np.ascontiguousarray(rows.codes),
    )


class TrackScan:
    """Key ids and coarse busy bins of a table's rows, fed one chunk at a time (each chunk scanned without the GIL).

    Args:
        n_rows: total rows that will be added.
        t0: start of bin 0.
        bin_ns: bin width (> 0).
        n_bins: number of bins.
        max_code: largest colour code that can occur.
    """

    def __init__(self, n_rows: int, t0: int, bin_ns: int, n_bins: int, max_code: int, *, with_ids: bool = True) -> None:
        self.t0, self.bin_ns, self.n_bins = int(t0), max(1, int(bin_ns)), int(n_bins)
        self.table, self.bins = _empty_state(_FIRST_KEYS, self.n_bins)
        self.code_row = np.full(max(0, int(max_code)) + 1, -1, np.int64)
        self.ids = np.empty(int(n_rows) if with_ids else 0, np.int32)
        self.row = 0
        self.n_rows = int(n_rows)
        """Rows of the whole table: each chunk's kernel runs compiled or as Python by this, not by the chunk's own
        size (a table of 1,024 one-rank chunks is one large input; per chunk it ran as Python, 2.7 s CPU)."""

    def add(self, rows: ChunkRows) -> None:
        """Scan the next chunk (rows in global order; key columns of length 1 are constants).

        Args:
            rows: the chunk's columns (codes must be in 0..max_code).
        """
        n = int(rows.start.size)
        chunk = _contiguous(rows)
        i = 0
        while i < n:
            i = _scan_chunk.sized(
                self.n_rows,
                chunk,
                self.table,
                self.bins,
                self.code_row,
                self.ids,
                self.row,
                i,
                self.t0,
                self.bin_ns,
                self.n_bins,
            )
            if i < n:
                self._grow()
        self.row += n

    def _grow(self) -> None:
        """Four times the key capacity (the table is full)."""
        old_t, old_b = self.table, self.bins
        cap = old_t.keys.shape[0]
        table, bins = _empty_state(4 * cap, self.n_bins)
        for new, old in zip((*table[1:], *bins), (*old_t[1:], *old_b), strict=True):
            new[:cap] = old
        _rehash(table)
        self.table, self.bins = table, bins

    def track_of_rows(self, rows: ChunkRows, remap: I64, out: I64, at: int) -> None:
        """out[at:at + n] = remap[key id] of a chunk's rows (a chunk that was added), without holding the GIL.

        Args:
            rows: a chunk given to add (only its keys and length are read).
            remap: int64 track per key id.
            out: int64 destination.
            at: first position written.
        """
        _track_of_rows.sized(
            self.n_rows, _contiguous(rows), self.table, np.ascontiguousarray(remap, np.int64), out, int(at)
        )

    def result(self) -> ScanResult:
        """Everything found so far, trimmed to the keys seen (whole-bin coverage folded into busy)."""
        n = int(self.table.n[0])
        bins = self.bins
        busy = bins.busy[:n] + np.cumsum(bins.full[:n, :-1], axis=1) * self.bin_ns
        return ScanResult(
            self.ids[: self.row] if self.ids.size else self.ids,
            self.table.keys[:n].copy(),
            self.table.first_row[:n].copy(),
            self.table.counts[:n].copy(),
            busy,
            bins.first_code[:n].copy(),
            bins.last_code[:n].copy(),
            self.code_row,
        )


@jit
def _copy_into(out: I64, at: int, src: AnyInt) -> None:  # pragma: no cover - numba
    for i in range(src.size):
        out[at + i] = src[i]


def copy_into(out: I64, at: int, src: AnyInt) -> None:
    """out[at:at + src.size] = src, without holding the GIL.

    Args:
        out: int64 destination (contiguous).
        at: first position written.
        src: integer values.
    """
    _copy_into(out, int(at), np.ascontiguousarray(src))


@jit
def _take_into(out: I64, at: int, lut: I64, codes: AnyInt) -> None:  # pragma: no cover - numba
    for i in range(codes.size):
        out[at + i] = lut[codes[i]]


def take_into(out: I64, at: int, lut: I64, codes: AnyInt) -> None:
    """out[at:at + codes.size] = lut[codes], without holding the GIL.

    Args:
        out: int64 destination (contiguous).
        at: first position written.
        lut: int64 lookup table.
        codes: integer indices into lut.
    """
    _take_into(out, int(at), np.ascontiguousarray(lut, np.int64), np.ascontiguousarray(codes))
