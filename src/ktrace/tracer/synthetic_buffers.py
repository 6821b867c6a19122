"""CUPTI activity buffers built byte for byte in a release's layout, without a GPU (tests, benchmarks).

Every record is random bytes except its kind and the fields given; C-string fields point at strings this
module keeps alive for as long as the buffer lives.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ktrace.tracer.layouts import STRING_FIELDS, Layout, record_dtype

BENCH_MIX: dict[str, float] = {
    "RUNTIME": 0.42,
    "DRIVER": 0.08,
    "CONCURRENT_KERNEL": 0.38,
    "MEMCPY": 0.04,
    "MEMSET": 0.02,
    "SYNCHRONIZATION": 0.02,
    "EXTERNAL_CORRELATION": 0.04,
}
"""A training step's record mix: a runtime launch record per kernel, some driver calls, a few copies."""
SMALL = {
    "cbid": 40,
    "return_value": 2,
    "copy_kind": 11,
    "src_kind": 8,
    "dst_kind": 8,
    "memory_kind": 8,
    "type": 5,
    "device_id": 8,
    "stream_id": 16,
    "context_id": 8,
}
"""Fields that take few distinct values in real traces (enums, API ids, devices, streams)."""


class SyntheticBuffer:
    """A CUPTI activity buffer: `data` (uint8, 8-byte aligned, `size` bytes) holding `valid` bytes of records.

    Attributes:
        kinds, offsets: each record's kind value and byte offset (what libcupti's walker would find).
        structs: each record's struct name.
    """

    def __init__(self, size: int) -> None:
        self._words = np.zeros((size + 7) // 8, np.uint64)
        self.data = self._words.view(np.uint8)[:size]
        self.valid = 0
        self.kinds = np.zeros(0, np.uint32)
        self.offsets = np.zeros(0, np.int64)
        self.structs: list[str] = []
        self._keep: list[Any] = []

    @property
    def address(self) -> int:
        """Where the buffer starts."""
        return int(self.data.ctypes.data)

    def c_string(self, text: str) -> int:
        """The address of a NUL-terminated copy of `text`, alive as long as this buffer."""
        s = ctypes.create_string_buffer(text.encode())
        self._keep.append(s)
        return ctypes.addressof(s)


def build(
    records: Sequence[tuple[str, Mapping[str, Any]]],
    layout: Layout,
    kind_values: Mapping[str, int],
    seed: int = 0,
    spare: int = 0,
) -> SyntheticBuffer:
    """A buffer of `records` ((kind name, {field: value})); unset fields keep random bytes, strings are
    given as text. `spare` bytes of random garbage follow the valid part (as in a real, partly filled buffer)."""
    rng = np.random.default_rng(seed)
    structs = [layout.struct_of[kind_values[k]] for k, _ in records]
    sizes = np.array([record_dtype(s).itemsize for s in structs], np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if len(records) else np.zeros(0, np.int64)
    valid = int(sizes.sum())
    buf = SyntheticBuffer(valid + spare)
    buf.data[:] = rng.integers(0, 256, buf.data.size, dtype=np.uint8)
    for (kind, fields), struct, at in zip(records, structs, offsets.tolist(), strict=True):
        rec = buf.data[at : at + record_dtype(struct).itemsize].view(record_dtype(struct))
        rec["kind"] = kind_values[kind]
        for name in STRING_FIELDS & set(rec.dtype.names or ()):
            rec[name] = 0
        for name, value in fields.items():
            rec[name] = buf.c_string(value) if name in STRING_FIELDS and isinstance(value, str) else value
    buf.valid, buf.offsets, buf.structs = valid, offsets, structs
    buf.kinds = np.array([kind_values[k] for k, _ in records], np.uint32)
    return buf


def random_buffer(
    n: int,
    layout: Layout,
    kind_values: Mapping[str, int],
    mix: Mapping[str, float] = BENCH_MIX,
    seed: int = 0,
    names: int = 200,
) -> SyntheticBuffer:
    """`n` records drawn from `mix` (vectorized: millions of records in a second), with plausible values:
    increasing timestamps, correlation ids, `names` distinct kernel names."""
    rng = np.random.default_rng(seed)
    kinds = list(mix)
    p = np.array([mix[k] for k in kinds]) / sum(mix.values())
    which = rng.choice(len(kinds), size=n, p=p)
    sizes = np.array([layout.dtypes[kind_values[k]].itemsize for k in kinds], np.int64)[which]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    buf = SyntheticBuffer(int(sizes.sum()))
    buf.valid, buf.offsets = int(sizes.sum()), offsets
    buf.kinds = np.array([kind_values[k] for k in kinds], np.uint32)[which]
    buf.data[:] = rng.integers(0, 256, buf.data.size, dtype=np.uint8)
    pool = np.array([buf.c_string(f"void kernel_{i}<float, {i % 7}>(float*, int)") for i in range(names)], np.uint64)
    t0 = 1_795_000_000_000_000_000
    for j, kind in enumerate(kinds):
        at = offsets[which == j]
        dtype = layout.dtypes[kind_values[kind]]
        recs = np.frombuffer(rng.integers(0, 256, at.size * dtype.itemsize, dtype=np.uint8).tobytes(), dtype)
        recs = recs.copy()
        recs["kind"] = kind_values[kind]
        for name in dtype.names or ():
            if name in ("start", "timestamp"):
                recs[name] = t0 + at * 10
            elif name == "end":
                recs[name] = t0 + at * 10 + rng.integers(1, 5000, at.size)
            elif name in STRING_FIELDS:
                recs[name] = pool[rng.integers(0, names, at.size)] if name == "name" else 0
            elif name in ("queued", "submitted", "graph_node_id", "external_id", "bytes", "global_memory_size"):
                recs[name] = rng.integers(0, 1 << 40, at.size)
            elif name in SMALL:
                recs[name] = rng.integers(0, SMALL[name], at.size)
            elif name in ("correlation_id", "runtime_correlation_id"):
                recs[name] = at // 64
        step = dtype.itemsize // 8
        buf._words[(at // 8)[:, None] + np.arange(step)] = recs.view(np.uint64).reshape(-1, step)
    return buf
