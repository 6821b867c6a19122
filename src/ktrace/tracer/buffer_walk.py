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
