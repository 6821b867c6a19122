"""Decode a raw CUPTI activity buffer into per-kind columns with no Python per record (the fast path).

One numba pass finds each record's kind and offset (ktrace.tracer.buffer_walk); each kind's records are
copied together and read through a numpy structured dtype of the loaded CUPTI release
(ktrace.tracer.layouts). C-string fields (kernel, NVTX and thread names) are addresses: each distinct
address is read once per buffer. The result equals what ktrace.tracer.records.RecordExtractor copies out
of cupti-python's record objects, column for column (tests/unit/tracer/test_fast_decode.py).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping
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

    def __init__(
        self, layout: Layout, step_over: StepOver | None = None, string_at: Callable[[int], str] = c_string
    ) -> None:
        from ktrace.tracer import buffer_walk  # numba: loaded here, on the decoder thread

        self.layout, self.step_over, self.string_at = layout, step_over, string_at
        self._walk, self._extract, self._decode = buffer_walk.walk, buffer_walk.extract, buffer_walk.decode
        self._first_seen = buffer_walk.first_seen
        self._specs: dict[int, tuple[tuple[str, ...], np.ndarray, np.ndarray]] = {}
        self._table = self._field_table()
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
            m, end = self._walk(words[nxt >> 2 :], valid - nxt, self.layout.sizes, kinds_r, offs_r)
            parts_k.append(kinds_r[:m])
            parts_o.append(offs_r[:m] + nxt)
            stop = nxt + end
        return np.concatenate(parts_k), np.concatenate(parts_o)

    def decode(self, buf: np.ndarray, valid: int) -> dict[int, Columns]:
        """Columns per numeric kind of the records in `buf[:valid]`, kinds in order of first appearance
        (as RecordExtractor buckets them)."""
        data = buf[:valid]
        stop, starts, first, values = self._decode(data, valid, self.layout.sizes, *self._table)
        if stop < valid:  # a kind without a layout: the walk goes on record by record through libcupti
            return self._decode_stepping(buf, valid)
        present = np.flatnonzero(np.diff(starts))
        out: dict[int, Columns] = {}
        for kind in present[np.argsort(first[present])].tolist():
            names, field_offsets, _ = self._spec(kind)
            run = values[:, starts[kind] : starts[kind + 1]]
            out[kind] = self._finish(names, field_offsets, run, data)
        return out

    def _decode_stepping(self, buf: np.ndarray, valid: int) -> dict[int, Columns]:
        kinds, offs = self.offsets(buf, valid)
        order = np.argsort(kinds.astype(np.uint8), kind="stable")  # kinds < 256: numpy's radix sort
        starts = np.concatenate([[0], np.cumsum(np.bincount(kinds, minlength=self.layout.sizes.size))])
        present = np.flatnonzero(np.diff(starts))
        out: dict[int, Columns] = {}
        for kind in present[np.argsort(order[starts[present]])].tolist():
            at = offs[order[starts[kind] : starts[kind + 1]]]
            names, field_offsets, codes = self._spec(kind)
            run = np.vstack([self._extract(buf[:valid], at, field_offsets, codes), at])
            out[kind] = self._finish(names, field_offsets, run, buf[:valid])
        return out

    def _finish(self, names: tuple[str, ...], field_offsets: np.ndarray, run: np.ndarray, data: np.ndarray) -> Columns:
        """Columns from the int64 field rows of one kind (last row: each record's byte offset)."""
        cols: list[Any] = []
        for j, name in enumerate(names):
            if name in STRING_FIELDS:
                cols.append(self._strings(run[j]))
            elif name == "uuid":
                at = run[-1] + field_offsets[j]
                cols.append([uuid_text(data[o : o + 16].tobytes()) for o in at.tolist()])
            else:
                cols.append(run[j])
        return Columns(cols, run.shape[1])

    def _spec(self, kind: int) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
        spec = self._specs.get(kind)
        if spec is not None:
            return spec
        names = FIELDS_BY_KIND[self.layout.name_of[kind]]
        fields: Mapping[str, Any] = self.layout.dtypes[kind].fields or {}
        offsets = np.array([fields[n][1] for n in names], np.int64)
        codes = np.array([TYPE_CODES.get(fields[n][0].str[1:], 0) for n in names], np.int64)
        self._specs[kind] = names, offsets, codes
        return names, offsets, codes

    def _field_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every kind's field offsets and type codes as 256 x F tables, for buffer_walk.decode."""
        specs = {kind: self._spec(kind) for kind in self.layout.struct_of}
        width = max(len(s[0]) for s in specs.values())
        offsets = np.zeros((self.layout.sizes.size, width), np.int64)
        codes = np.zeros((self.layout.sizes.size, width), np.int64)
        counts = np.zeros(self.layout.sizes.size, np.int64)
        for kind, (names, field_offsets, field_codes) in specs.items():
            offsets[kind, : len(names)], codes[kind, : len(names)], counts[kind] = (
                field_offsets,
                field_codes,
                len(names),
            )
        return offsets, codes, counts

    def _strings(self, addresses: np.ndarray) -> Any:
        """A dictionary-encoded string array, dictionary in order of first appearance (as pyarrow's
        dictionary_encode gives it): each distinct address read once."""
        import pyarrow as pa

        index, distinct = self._first_seen(addresses)
        texts = [self.string_at(a) for a in distinct.tolist()]
        if len(set(texts)) < len(texts):  # two addresses, one text: merge them, keeping first appearance
            first: dict[str, int] = {}
            remap = np.array([first.setdefault(t, len(first)) for t in texts], np.int32)
            index, texts = remap[index], list(first)
        return pa.DictionaryArray.from_arrays(pa.array(index, pa.int32()), pa.array(texts, pa.string()))

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
