"""Copy fields out of CUPTI activity records into plain tuples (the only work done in the buffer callback).

CUPTI hands `buffer_completed` a list of cupti-python record objects; they may be views into a buffer
that is freed when the callback returns (cupti.md §1.2), so each record becomes a tuple of ints and
strings right away. `operator.attrgetter` does this in C, one call per record. Dispatch is on `.kind`
(never isinstance: record classes churn between CUPTI versions, cupti.md §2.1); a record missing an
attribute of its kind falls back to a slow per-field `getattr(..., None)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from operator import attrgetter
from typing import Any

ACTIVITY_KIND: dict[str, int] = {
    "MEMCPY": 1,
    "MEMSET": 2,
    "KERNEL": 3,
    "DRIVER": 4,
    "RUNTIME": 5,
    "DEVICE": 8,
    "CONTEXT": 9,
    "CONCURRENT_KERNEL": 10,
    "NAME": 11,
    "MARKER": 12,
    "MARKER_DATA": 13,
    "OVERHEAD": 17,
    "MEMCPY2": 22,
    "STREAM": 37,
    "SYNCHRONIZATION": 38,
    "EXTERNAL_CORRELATION": 39,
}
"""CUpti_ActivityKind values (cupti_activity.h; equal to cupti-python 13.4's cupti.ActivityKind)."""

KERNEL_FIELDS = (
    "start",
    "end",
    "device_id",
    "context_id",
    "stream_id",
    "correlation_id",
    "name",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "registers_per_thread",
    "static_shared_memory",
    "dynamic_shared_memory",
    "graph_id",
    "graph_node_id",
    "queued",
    "submitted",
)
API_FIELDS = ("start", "end", "process_id", "thread_id", "correlation_id", "cbid", "return_value")
MEMCPY_FIELDS = (
    "start",
    "end",
    "device_id",
    "context_id",
    "stream_id",
    "correlation_id",
    "runtime_correlation_id",
    "bytes",
    "copy_kind",
    "src_kind",
    "dst_kind",
    "graph_id",
)
MEMCPY2_FIELDS = (
    "start",
    "end",
    "device_id",
    "context_id",
    "stream_id",
    "correlation_id",
    "bytes",
    "copy_kind",
    "src_kind",
    "dst_kind",
    "graph_id",
    "src_device_id",
    "dst_device_id",
)
MEMSET_FIELDS = (
    "start",
    "end",
    "device_id",
    "context_id",
    "stream_id",
    "correlation_id",
    "bytes",
    "memory_kind",
    "graph_id",
)
SYNC_FIELDS = ("start", "end", "context_id", "stream_id", "correlation_id", "type", "cuda_event_id")
MARKER_FIELDS = (
    "flags_",
    "timestamp",
    "id",
    "object_kind",
    "object_id.pt.process_id",
    "object_id.pt.thread_id",
    "name",
    "domain",
)
NAME_FIELDS = ("object_kind", "object_id.pt.process_id", "object_id.pt.thread_id", "name")
EXTERNAL_FIELDS = ("external_kind", "external_id", "correlation_id")
OVERHEAD_FIELDS = ("overhead_kind", "start", "end")
CONTEXT_FIELDS = ("context_id", "device_id")
STREAM_FIELDS = ("context_id", "stream_id", "priority", "flag")
MARKER_DATA_FIELDS = ("id", "flags_", "color")
DEVICE_FIELDS = (
    "id",
    "name",
    "uuid",
    "compute_capability_major",
    "compute_capability_minor",
    "num_multiprocessors",
    "global_memory_size",
)

FIELDS_BY_KIND: dict[str, tuple[str, ...]] = {
    "CONCURRENT_KERNEL": KERNEL_FIELDS,
    "KERNEL": KERNEL_FIELDS,
    "RUNTIME": API_FIELDS,
    "DRIVER": API_FIELDS,
    "MEMCPY": MEMCPY_FIELDS,
    "MEMCPY2": MEMCPY2_FIELDS,
    "MEMSET": MEMSET_FIELDS,
    "SYNCHRONIZATION": SYNC_FIELDS,
    "MARKER": MARKER_FIELDS,
    "NAME": NAME_FIELDS,
    "EXTERNAL_CORRELATION": EXTERNAL_FIELDS,
    "OVERHEAD": OVERHEAD_FIELDS,
    "CONTEXT": CONTEXT_FIELDS,
    "DEVICE": DEVICE_FIELDS,
    "STREAM": STREAM_FIELDS,
    "MARKER_DATA": MARKER_DATA_FIELDS,  # copied, not stored (no schema columns yet)
}
"""Kind name -> the fields copied out, in tuple order (attribute names of cupti.md §2.2)."""


def _slow_getter(fields: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    def get(record: Any) -> tuple[Any, ...]:
        out = []
        for name in fields:
            value: Any = record
            for part in name.split("."):
                value = getattr(value, part, None)
            out.append(value)
        return tuple(out)

    return get


def uuid_text(value: Any) -> str | None:
    """A 16-byte CUuuid as nvidia-smi prints it (GPU-xxxxxxxx-...), None when all zero or not 16 bytes."""
    raw = getattr(value, "bytes", value)
    if not isinstance(raw, bytes | bytearray) or len(raw) != 16 or not any(raw):
        return None
    h = bytes(raw).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class RecordExtractor:
    """Turns lists of CUPTI records into per-kind lists of tuples; callable from the buffer callback.

    Args:
        kind_values: kind name -> the numeric `.kind` of this cupti-python (default: ACTIVITY_KIND).
    """

    def __init__(self, kind_values: Mapping[str, int] | None = None) -> None:
        values = dict(ACTIVITY_KIND if kind_values is None else kind_values)
        self.kind_names: dict[int, str] = {int(v): k for k, v in values.items() if k in FIELDS_BY_KIND}
        self._fast = {v: attrgetter(*FIELDS_BY_KIND[k]) for v, k in self.kind_names.items()}
        self._slow = {v: _slow_getter(FIELDS_BY_KIND[k]) for v, k in self.kind_names.items()}
        self._device = values.get("DEVICE", -1)

    def extract(self, records: Iterable[Any], out: dict[int, list[tuple[Any, ...]]]) -> int:
        """Append one tuple per known record to `out[kind]`; return how many records were skipped."""
        fast, slow, skipped = self._fast, self._slow, 0
        for record in records:
            kind = record.kind
            getter = fast.get(kind)
            if getter is None:
                skipped += 1
                continue
            try:
                row = getter(record)
            except AttributeError:
                row = slow[kind](record)
            if kind == self._device:
                row = (*row[:2], uuid_text(row[2]), *row[3:])
            bucket = out.get(kind)
            if bucket is None:
                bucket = out[kind] = []
            bucket.append(row)
        return skipped

    def by_name(self, rows: Mapping[int, list[tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
        """Re-key per-kind rows by kind name (KERNEL and CONCURRENT_KERNEL are merged)."""
        named: dict[str, list[tuple[Any, ...]]] = {}
        for kind, bucket in rows.items():
            name = self.kind_names.get(int(kind), "")
            name = "CONCURRENT_KERNEL" if name == "KERNEL" else name
            named.setdefault(name, []).extend(bucket)
        return named


class Columns:
    """One kind's records as columns, in FIELDS_BY_KIND order: int64 numpy arrays, and pyarrow string arrays
    for C-string fields (the fast path's output; RecordDecoder takes these or lists of tuples alike).

    Args:
        cols: one array per field.
        n: the number of records.
    """

    __slots__ = ("cols", "n")

    def __init__(self, cols: list[Any], n: int) -> None:
        self.cols, self.n = cols, n

    def __len__(self) -> int:
        return self.n

    def rows(self) -> list[tuple[Any, ...]]:
        """The records as tuples (for the few low-volume kinds decoded row by row: NVTX, names, devices)."""
        lists = [
            c.to_pylist() if hasattr(c, "to_pylist") else c.tolist() if hasattr(c, "tolist") else list(c)
            for c in self.cols
        ]
        return list(zip(*lists, strict=True))

    @staticmethod
    def concat(parts: list[Columns]) -> Columns:
        """One Columns of several (same kind, e.g. records of several buffers)."""
        if len(parts) == 1:
            return parts[0]
        import numpy as np
        import pyarrow as pa

        cols: list[Any] = []
        for j, first in enumerate(parts[0].cols):
            chunks = [p.cols[j] for p in parts]
            if isinstance(first, pa.Array):
                cols.append(pa.concat_arrays(chunks))
            elif isinstance(first, np.ndarray):
                cols.append(np.concatenate(chunks))
            else:
                cols.append([v for c in chunks for v in c])
        return Columns(cols, sum(p.n for p in parts))
