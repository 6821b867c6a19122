"""numba kernels that walk a CUPTI activity buffer without Python per record (the tracer's only numba use).

Records lie back to back; each starts with its 4-byte kind and is sizeof(its struct) long (a multiple of 8),
so one sequential pass finds every record. `nogil`: the decoder thread runs these while the training
thread keeps the GIL. Imported lazily by the decoder thread (numba costs ~0.6 s to import).
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(nogil=True, cache=True)


@_jit
def walk(words: np.ndarray, valid: int, sizes: np.ndarray, kinds: np.ndarray, offsets: np.ndarray) -> tuple[int, int]:
    """Find the records of `words` (the buffer as uint32) up to byte `valid`.

    Fills kinds[i], offsets[i] (bytes) per record; returns (records found, byte offset where the walk
    stopped): `valid` when done, else the offset of a record whose kind has no size here (or that runs
    past `valid`), which the caller steps over with libcupti's own walker.
    """
    at = 0
    n = 0
    while at + 4 <= valid:
        kind = words[at >> 2]
        size = sizes[kind] if kind < sizes.size else 0
        if size == 0 or at + size > valid:
            return n, at
        kinds[n] = kind
        offsets[n] = at
        n += 1
        at += size
    return n, valid


@_jit
def extract(data: np.ndarray, offsets: np.ndarray, field_offsets: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """One int64 row per field of the records at `offsets` (bytes) of `data` (the buffer as uint8); `codes`
    are ktrace.tracer.layouts.TYPE_CODES (u8 keeps its low 63 bits, as the reference path does past int64)."""
    u2 = data[: data.size - data.size % 2].view(np.uint16)
    u4 = data[: data.size - data.size % 4].view(np.uint32)
    i4 = u4.view(np.int32)
    u8 = data[: data.size - data.size % 8].view(np.uint64)
    out = np.empty((field_offsets.size, offsets.size), np.int64)
    mask = np.uint64(0x7FFF_FFFF_FFFF_FFFF)
    for i in range(offsets.size):
        base = offsets[i]
        for f in range(field_offsets.size):
            at = base + field_offsets[f]
            code = codes[f]
            if code == 4:
                out[f, i] = np.int64(u8[at >> 3] & mask)
            elif code == 2:
                out[f, i] = u4[at >> 2]
            elif code == 3:
                out[f, i] = i4[at >> 2]
            elif code == 1:
                out[f, i] = u2[at >> 1]
            else:
                out[f, i] = data[at]
    return out


@_jit
def decode(
    data: np.ndarray, valid: int, sizes: np.ndarray, field_offsets: np.ndarray, codes: np.ndarray, n_fields: np.ndarray
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Walk, group by kind and read every field in one nogil call (one GIL hand-off per buffer).

    `field_offsets`/`codes`/`n_fields` give each kind's fields (rows of a 256 x F table). Returns (byte
    offset where the walk stopped, start of each kind's run, first record index of each kind, values):
    values[f, starts[k] + j] is field f of the j-th record of kind k, and values[F, ...] its byte offset.
    """
    words = data[: valid - valid % 4].view(np.uint32)
    cap = valid // 24 + 1
    kinds = np.empty(cap, np.int64)
    offsets = np.empty(cap, np.int64)
    n, stop = walk(words, valid, sizes, kinds, offsets)
    starts = np.zeros(sizes.size + 1, np.int64)
    first = np.full(sizes.size, -1, np.int64)
    for i in range(n):
        starts[kinds[i] + 1] += 1
        if first[kinds[i]] < 0:
            first[kinds[i]] = i
    for k in range(sizes.size):
        starts[k + 1] += starts[k]
    order = np.empty(n, np.int64)
    fill = starts[:-1].copy()
    for i in range(n):
        order[fill[kinds[i]]] = offsets[i]
        fill[kinds[i]] += 1
    width = field_offsets.shape[1]
    out = np.empty((width + 1, n), np.int64)
    out[width, :] = order
    for k in range(sizes.size):
        if starts[k + 1] > starts[k]:
            rows = extract(
                data, order[starts[k] : starts[k + 1]], field_offsets[k, : n_fields[k]], codes[k, : n_fields[k]]
            )
            out[: n_fields[k], starts[k] : starts[k + 1]] = rows
    return stop, starts, first, out


@_jit
def first_seen(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of each value among the distinct ones, the distinct values in order of first appearance)."""
    seen = dict()
    seen[np.int64(0)] = np.int64(-1)  # typed dict: int64 -> int64
    del seen[np.int64(0)]
    index = np.empty(values.size, np.int32)
    distinct = np.empty(values.size, np.int64)
    n = 0
    for i in range(values.size):
        v = values[i]
        j = seen.get(v, -1)
        if j < 0:
            j = n
            seen[v] = j
            distinct[n] = v
            n += 1
        index[i] = j
    return index, distinct[:n]
