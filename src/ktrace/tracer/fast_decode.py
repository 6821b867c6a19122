"""Decode a raw CUPTI activity buffer into per-kind columns with no Python per record (the fast path).

One numba pass finds each record's kind and offset (ktrace.tracer.buffer_walk); each kind's records are
copied together and read through a numpy structured dtype of the loaded CUPTI release
(ktrace.tracer.layouts). C-string fields (kernel, NVTX and thread names) are addresses: each distinct
address is read once per buffer. The result equals what ktrace.tracer.records.RecordExtractor copies out
of cupti-python's record objects, column for column (tests/unit/tracer/test_fast_decode.py).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from ktrace.tracer.layouts import STRING_FIELDS, TYPE_CODES, Layout
from ktrace.tracer.records import FIELDS_BY_KIND, Columns, uuid_text

StepOver = Callable[[int, int, int], int | None]
"""(buffer address, valid bytes, offset of a record) -> offset of the next record (libcupti's walker)."""


def c_string(address: int) -> str:
    """The NUL-terminated UTF-8 string at `address` ('' for NULL)."""
    if not address:
        return ""
    return ctypes.string_at(address).decode("utf-8", "replace")


class FastDecoder:
    """Raw buffer -> {kind value: Columns}.

    Args:
        layout: the record layouts of the loaded CUPTI release.
        step_over: steps over a record whose kind has no layout (libcupti's cuptiActivityGetNextRecord);
            without it such a record ends the buffer and the rest is counted as undecoded.
        string_at: reads a C string (tests pass their own table).
    """

    def __init__(self, layout: Layout, step_over: StepOver | None = None,
                 string_at: Callable[[int], str] = c_string) -> None:
        from ktrace.tracer import buffer_walk  # numba: loaded here, on the decoder thread

        self.layout, self.step_over, self.string_at = layout, step_over, string_at
        self._walk, self._extract = buffer_walk.walk, buffer_walk.extract
        self._specs: dict[int, tuple[tuple[str, ...], np.ndarray, np.ndarray]] = {}
        self.health: dict[str, int] = {}

    def offsets(self, buf: np.ndarray, valid: int) -> tuple[np.ndarray, np.ndarray]:
        """(kind, byte offset) of every record of `buf` (uint8, 8-byte aligned) up to `valid`."""
        words = buf[: valid - valid % 4].view(np.uint32)
        cap = valid // 24 + 1  # the smallest record is 24 bytes
        kinds, offs = np.empty(cap, np.uint32), np.empty(cap, np.int64)
        n, stop = self._walk(words, valid, self.layout.sizes, kinds, offs)
        parts_k, parts_o = [kinds[:n]], [offs[:n]]
        while stop < valid:
            nxt = self.step_over(buf.ctypes.data, valid, stop) if self.step_over is not None else None
            self._count("unknown_kind_records", 1)
            if nxt is None or nxt <= stop:
                self._count("undecoded_bytes", valid - stop)
                break
            kinds_r, offs_r = np.empty(cap, np.uint32), np.empty(cap, np.int64)
            m, end = self._walk(words[nxt >> 2:], valid - nxt, self.layout.sizes, kinds_r, offs_r)
            parts_k.append(kinds_r[:m])
            parts_o.append(offs_r[:m] + nxt)
            stop = nxt + end
        return np.concatenate(parts_k), np.concatenate(parts_o)

    def decode(self, buf: np.ndarray, valid: int) -> dict[int, Columns]:
        """Columns per numeric kind of the records in `buf[:valid]`."""
        kinds, offs = self.offsets(buf, valid)
        # Stable sort by kind: kinds are < 256, so uint8 keys take numpy's radix sort (~1 ns a record).
        order = np.argsort(kinds.astype(np.uint8), kind="stable")
        starts = np.concatenate([[0], np.cumsum(np.bincount(kinds, minlength=self.layout.sizes.size))])
        data = buf[:valid]
        out: dict[int, Columns] = {}
        present = np.flatnonzero(np.diff(starts))
        firsts = order[starts[present]]  # kinds in order of first appearance, as RecordExtractor buckets them
        for kind in present[np.argsort(firsts)].tolist():
            at = offs[order[starts[kind]:starts[kind + 1]]]
            out[kind] = self._columns(kind, data, at)
        return out

    def _columns(self, kind: int, data: np.ndarray, at: np.ndarray) -> Columns:
        spec = self._specs.get(kind)
        if spec is None:
            spec = self._specs[kind] = self._spec(kind)
        names, field_offsets, codes = spec
        values = self._extract(data, at, field_offsets, codes)
        cols: list[Any] = []
        for j, name in enumerate(names):
            if name in STRING_FIELDS:
                cols.append(self._strings(values[j]))
            elif name == "uuid":
                cols.append([uuid_text(data[o + field_offsets[j]:o + field_offsets[j] + 16].tobytes())
                             for o in at.tolist()])
            else:
                cols.append(values[j])
        return Columns(cols, at.size)

    def _spec(self, kind: int) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
        names = FIELDS_BY_KIND[self.layout.name_of[kind]]
        fields = self.layout.dtypes[kind].fields or {}
        offsets = np.array([fields[n][1] for n in names], np.int64)
        codes = np.array([TYPE_CODES.get(fields[n][0].str[1:], 0) for n in names], np.int64)
        return names, offsets, codes

    def _strings(self, addresses: np.ndarray) -> Any:
        """A pyarrow string array: each distinct address read once."""
        import pyarrow as pa

        encoded = pa.array(addresses, pa.int64()).dictionary_encode()
        texts = pa.array([self.string_at(a) for a in encoded.dictionary.to_pylist()], pa.string())
        return texts.take(encoded.indices)

    def _count(self, key: str, n: int) -> None:
        self.health[key] = self.health.get(key, 0) + n


def by_name(decoded: list[dict[int, Columns]], layout: Layout) -> dict[str, Columns]:
    """Several buffers' columns keyed by kind name, as RecordDecoder takes them (KERNEL joins CONCURRENT_KERNEL)."""
    parts: dict[str, list[Columns]] = {}
    for buffer in decoded:
        for kind, cols in buffer.items():
            name = layout.name_of[kind]
            parts.setdefault("CONCURRENT_KERNEL" if name == "KERNEL" else name, []).append(cols)
    return {name: Columns.concat(p) for name, p in parts.items()}
