"""CUPTI activity-record layouts per CUPTI release: which struct each kind uses, and where its fields lie.

The fast path reads records straight from CUPTI's buffers, so it must know the byte layout of the
*loaded* libcupti. Sources (2026-11-23): `cupti_activity.h` of the nvidia-cuda-cupti(-cu12) wheels
12.4.127, 12.6.80, 12.8.90, 12.9.79, 13.0.85, 13.1.115, 13.2.86, 13.3.75, 13.4.92 and 13.5.25:
- the struct per kind is the one the `CUpti_ActivityKind` comment names (e.g. CONCURRENT_KERNEL ->
  CUpti_ActivityKernel13 from 13.4);
- offsets, types and sizes were printed by gcc (`offsetof`/`sizeof`) against each header. Within a
  family (Kernel9..13, Memcpy5..7, ...) the fields read here never move; only the record size grows.
- libcupti 12.4-12.9 and 13.0.85 walk synthetic buffers without a GPU: their `cuptiActivityGetNextRecord`
  steps every kind by exactly the sizes below (libcupti 13.5 needs libcuda.so.1 to start).
tests/unit/tracer/test_layouts.py checks every field against cupti-python's own numpy dtypes.

A release not listed here has no layout: the tracer keeps cupti-python's per-record path for it.
"""

from __future__ import annotations

import numpy as np

Field = tuple[str, int, str]
"""(record attribute as cupti-python names it, byte offset, numpy type code). Enums are i4 (as cupti-python
reads them); `const char *` fields are u8 addresses."""

KERNEL: tuple[Field, ...] = (
    ("start", 16, "u8"),
    ("end", 24, "u8"),
    ("device_id", 40, "u4"),
    ("context_id", 44, "u4"),
    ("stream_id", 48, "u4"),
    ("correlation_id", 92, "u4"),
    ("name", 104, "u8"),
    ("grid_x", 52, "i4"),
    ("grid_y", 56, "i4"),
    ("grid_z", 60, "i4"),
    ("block_x", 64, "i4"),
    ("block_y", 68, "i4"),
    ("block_z", 72, "i4"),
    ("registers_per_thread", 6, "u2"),
    ("static_shared_memory", 76, "i4"),
    ("dynamic_shared_memory", 80, "i4"),
    ("graph_id", 156, "u4"),
    ("graph_node_id", 144, "u8"),
    ("queued", 120, "u8"),
    ("submitted", 128, "u8"),
)
API: tuple[Field, ...] = (
    ("start", 8, "u8"),
    ("end", 16, "u8"),
    ("process_id", 24, "u4"),
    ("thread_id", 28, "u4"),
    ("correlation_id", 32, "u4"),
    ("cbid", 4, "u4"),
    ("return_value", 36, "u4"),
)
MEMCPY: tuple[Field, ...] = (
    ("start", 16, "u8"),
    ("end", 24, "u8"),
    ("device_id", 32, "u4"),
    ("context_id", 36, "u4"),
    ("stream_id", 40, "u4"),
    ("correlation_id", 44, "u4"),
    ("runtime_correlation_id", 48, "u4"),
    ("bytes", 8, "u8"),
    ("copy_kind", 4, "u1"),
    ("src_kind", 5, "u1"),
    ("dst_kind", 6, "u1"),
    ("graph_id", 72, "u4"),
)
MEMCPY2: tuple[Field, ...] = (
    ("start", 16, "u8"),
    ("end", 24, "u8"),
    ("device_id", 32, "u4"),
    ("context_id", 36, "u4"),
    ("stream_id", 40, "u4"),
    ("correlation_id", 60, "u4"),
    ("bytes", 8, "u8"),
    ("copy_kind", 4, "u1"),
    ("src_kind", 5, "u1"),
    ("dst_kind", 6, "u1"),
    ("graph_id", 80, "u4"),
    ("src_device_id", 44, "u4"),
    ("dst_device_id", 52, "u4"),
)
MEMSET: tuple[Field, ...] = (
    ("start", 16, "u8"),
    ("end", 24, "u8"),
    ("device_id", 32, "u4"),
    ("context_id", 36, "u4"),
    ("stream_id", 40, "u4"),
    ("correlation_id", 44, "u4"),
    ("bytes", 8, "u8"),
    ("memory_kind", 50, "u2"),
    ("graph_id", 72, "u4"),
)
SYNC: tuple[Field, ...] = (
    ("start", 8, "u8"),
    ("end", 16, "u8"),
    ("context_id", 28, "u4"),
    ("stream_id", 32, "u4"),
    ("correlation_id", 24, "u4"),
    ("type", 4, "i4"),
    ("cuda_event_id", 36, "u4"),
)
MARKER: tuple[Field, ...] = (
    ("flags_", 4, "i4"),
    ("timestamp", 8, "u8"),
    ("id", 16, "u4"),
    ("object_kind", 20, "i4"),
    ("object_id.pt.process_id", 24, "u4"),
    ("object_id.pt.thread_id", 28, "u4"),
    ("name", 40, "u8"),
    ("domain", 48, "u8"),
)
MARKER_DATA: tuple[Field, ...] = (("id", 8, "u4"), ("flags_", 4, "i4"), ("color", 24, "u4"))
NAME: tuple[Field, ...] = (
    ("object_kind", 4, "i4"),
    ("object_id.pt.process_id", 8, "u4"),
    ("object_id.pt.thread_id", 12, "u4"),
    ("name", 24, "u8"),
)
EXTERNAL: tuple[Field, ...] = (("external_kind", 4, "i4"), ("external_id", 8, "u8"), ("correlation_id", 16, "u4"))
OVERHEAD: tuple[Field, ...] = (("overhead_kind", 4, "i4"), ("start", 24, "u8"), ("end", 32, "u8"))
CONTEXT: tuple[Field, ...] = (("context_id", 4, "u4"), ("device_id", 8, "u4"))
STREAM: tuple[Field, ...] = (
    ("context_id", 4, "u4"),
    ("stream_id", 8, "u4"),
    ("priority", 12, "u4"),
    ("flag", 16, "i4"),
)
DEVICE: tuple[Field, ...] = (
    ("id", 112, "u4"),
    ("name", 136, "u8"),
    ("uuid", 120, "V16"),
    ("compute_capability_major", 104, "u4"),
    ("compute_capability_minor", 108, "u4"),
    ("num_multiprocessors", 44, "u4"),
    ("global_memory_size", 16, "u8"),
)

FIELDS: dict[str, tuple[Field, ...]] = {
    "CONCURRENT_KERNEL": KERNEL,
    "KERNEL": KERNEL,
    "RUNTIME": API,
    "DRIVER": API,
    "MEMCPY": MEMCPY,
    "MEMCPY2": MEMCPY2,
    "MEMSET": MEMSET,
    "SYNCHRONIZATION": SYNC,
    "MARKER": MARKER,
    "MARKER_DATA": MARKER_DATA,
    "NAME": NAME,
    "EXTERNAL_CORRELATION": EXTERNAL,
    "OVERHEAD": OVERHEAD,
    "CONTEXT": CONTEXT,
    "STREAM": STREAM,
    "DEVICE": DEVICE,
}
"""Kind name -> the fields the tracer reads (the attributes of ktrace.tracer.records.FIELDS_BY_KIND)."""
TYPE_CODES = {"u1": 0, "u2": 1, "u4": 2, "i4": 3, "u8": 4}
"""Type code per numpy type, as ktrace.tracer.buffer_walk.extract reads fields."""
STRING_FIELDS = frozenset({"name", "domain"})
"""Fields that hold a `const char *` (read as an address, resolved once per distinct address)."""

STRUCTS: dict[str, str] = {
    "Kernel9": "CONCURRENT_KERNEL",
    "Kernel10": "CONCURRENT_KERNEL",
    "Kernel11": "CONCURRENT_KERNEL",
    "Kernel12": "CONCURRENT_KERNEL",
    "Kernel13": "CONCURRENT_KERNEL",
    "API": "RUNTIME",
    "Memcpy5": "MEMCPY",
    "Memcpy6": "MEMCPY",
    "Memcpy7": "MEMCPY",
    "MemcpyPtoP4": "MEMCPY2",
    "Memset4": "MEMSET",
    "Memset5": "MEMSET",
    "Synchronization": "SYNCHRONIZATION",
    "Synchronization2": "SYNCHRONIZATION",
    "Marker2": "MARKER",
    "MarkerData": "MARKER_DATA",
    "MarkerData2": "MARKER_DATA",
    "Name": "NAME",
    "ExternalCorrelation": "EXTERNAL_CORRELATION",
    "Overhead3": "OVERHEAD",
    "Context2": "CONTEXT",
    "Context3": "CONTEXT",
    "Context4": "CONTEXT",
    "Stream": "STREAM",
    "Device5": "DEVICE",
    "Device6": "DEVICE",
}
"""CUpti_Activity<struct> -> the kind family whose fields it carries."""
SIZES: dict[str, int] = {
    "Kernel9": 208,
    "Kernel10": 216,
    "Kernel11": 224,
    "Kernel12": 232,
    "Kernel13": 248,
    "API": 40,
    "Memcpy5": 88,
    "Memcpy6": 96,
    "Memcpy7": 112,
    "MemcpyPtoP4": 96,
    "Memset4": 88,
    "Memset5": 104,
    "Synchronization": 40,
    "Synchronization2": 56,
    "Marker2": 56,
    "MarkerData": 32,
    "MarkerData2": 40,
    "Name": 32,
    "ExternalCorrelation": 24,
    "Overhead3": 56,
    "Context2": 24,
    "Context3": 32,
    "Context4": 40,
    "Stream": 24,
    "Device5": 184,
    "Device6": 192,
}
"""sizeof(CUpti_Activity<struct>): also the step from one record to the next."""

_COMMON = {
    "RUNTIME": "API",
    "DRIVER": "API",
    "NAME": "Name",
    "MARKER": "Marker2",
    "OVERHEAD": "Overhead3",
    "MEMCPY2": "MemcpyPtoP4",
    "STREAM": "Stream",
    "EXTERNAL_CORRELATION": "ExternalCorrelation",
}
_R12_4 = {
    **_COMMON,
    "CONCURRENT_KERNEL": "Kernel9",
    "KERNEL": "Kernel9",
    "MEMCPY": "Memcpy5",
    "MEMSET": "Memset4",
    "SYNCHRONIZATION": "Synchronization",
    "MARKER_DATA": "MarkerData",
    "CONTEXT": "Context2",
    "DEVICE": "Device5",
}
_R12_6 = {**_R12_4, "CONTEXT": "Context3"}
_R12_8 = {**_R12_6, "MEMCPY": "Memcpy6", "SYNCHRONIZATION": "Synchronization2"}
_R13_0 = {**_R12_8, "CONCURRENT_KERNEL": "Kernel10", "KERNEL": "Kernel10", "MARKER_DATA": "MarkerData2"}
_R13_1 = {**_R13_0, "CONCURRENT_KERNEL": "Kernel11", "KERNEL": "Kernel11", "CONTEXT": "Context4"}
_R13_2 = {**_R13_1, "DEVICE": "Device6"}
_R13_3 = {**_R13_2, "CONCURRENT_KERNEL": "Kernel12", "KERNEL": "Kernel12"}
_R13_4 = {**_R13_3, "CONCURRENT_KERNEL": "Kernel13", "KERNEL": "Kernel13", "MEMCPY": "Memcpy7", "MEMSET": "Memset5"}
RELEASES: dict[tuple[int, int], dict[str, str]] = {
    (12, 4): _R12_4,
    (12, 6): _R12_6,
    (12, 8): _R12_8,
    (12, 9): _R12_8,
    (13, 0): _R13_0,
    (13, 1): _R13_1,
    (13, 2): _R13_2,
    (13, 3): _R13_3,
    (13, 4): _R13_4,
    (13, 5): _R13_4,
}
"""CUPTI release -> kind name -> the struct its records use (the header comments, listed above)."""
API_VERSION_12 = {22: (12, 4), 24: (12, 6), 26: (12, 8), 28: (12, 9)}
"""CUPTI 12 numbers its API versions 22, 24, ...; CUPTI 13 writes them as MMmmpp (130401 = 13.4.1)."""


def release_of(api_version: int) -> tuple[int, int] | None:
    """The CUPTI release (major, minor) of a `cuptiGetVersion` number, None when not known."""
    if api_version >= 130000:
        return api_version // 10000, api_version // 100 % 100
    return API_VERSION_12.get(api_version)


def record_dtype(struct: str) -> np.dtype:
    """The numpy dtype of one CUpti_Activity<struct> record: the fields the tracer reads, at their
    offsets, with itemsize = sizeof(struct) (so an array of them steps record by record)."""
    fields = FIELDS[STRUCTS[struct]]
    return np.dtype(
        {
            "names": ["kind", *(f[0] for f in fields)],
            "formats": ["<i4", *("<" + f[2] for f in fields)],
            "offsets": [0, *(f[1] for f in fields)],
            "itemsize": SIZES[struct],
        }
    )


class Layout:
    """The record layouts of one CUPTI release, keyed by numeric kind.

    Args:
        release: (major, minor) of the loaded libcupti.
        kind_values: kind name -> numeric CUpti_ActivityKind.
    """

    def __init__(self, release: tuple[int, int], kind_values: dict[str, int]) -> None:
        structs = RELEASES[release]
        self.release = release
        self.struct_of: dict[int, str] = {kind_values[k]: s for k, s in structs.items() if k in kind_values}
        self.name_of: dict[int, str] = {kind_values[k]: k for k in structs if k in kind_values}
        self.dtypes: dict[int, np.dtype] = {v: record_dtype(s) for v, s in self.struct_of.items()}
        self.sizes = np.zeros(256, np.int64)
        """Record size by kind (0: a kind without a layout here)."""
        for v, s in self.struct_of.items():
            self.sizes[v] = SIZES[s]


def layout_for(api_version: int, kind_values: dict[str, int]) -> Layout | None:
    """The layout for a `cuptiGetVersion` number, or None when this CUPTI release is not described."""
    release = release_of(api_version)
    if release is None or release not in RELEASES:
        return None
    return Layout(release, kind_values)
