"""cupti-python support for the tracer tests, importable by name (`from cupti_support import ...`, like
real_traces): whether cupti-python is installed, and record factories: faithful fakes (exact cupti-python 13.4
attribute names) or objects of its own record classes."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace
from typing import Any

from ktrace.tracer.records import ACTIVITY_KIND

# Attribute names of cupti-python 13.4.0's record classes (dir() of each class, cupti.md §2.2).
CLASSES: dict[str, tuple[str, tuple[str, ...]]] = {
    "CONCURRENT_KERNEL": (
        "ActivityKernel13",
        (
            "block_x",
            "block_y",
            "block_z",
            "channel_id",
            "channel_type",
            "cluster_scheduling_policy",
            "cluster_x",
            "cluster_y",
            "cluster_z",
            "completed",
            "context_id",
            "correlation_id",
            "device_id",
            "dynamic_shared_memory",
            "end",
            "execution_model",
            "graph_id",
            "graph_node_id",
            "grid_id",
            "grid_x",
            "grid_y",
            "grid_z",
            "is_device_launched",
            "is_shared_memory_carveout_requested",
            "launch_type",
            "local_memory_per_thread",
            "local_memory_total",
            "local_memory_total_v2",
            "max_active_clusters",
            "max_potential_cluster_size",
            "name",
            "partitioned_global_cache_executed",
            "partitioned_global_cache_requested",
            "priority",
            "queued",
            "registers_per_thread",
            "shared_memory_carveout_requested",
            "shared_memory_config",
            "shared_memory_executed",
            "shmem_limit_config",
            "source_graph_id",
            "source_graph_node_id",
            "start",
            "static_shared_memory",
            "stream_id",
            "submitted",
        ),
    ),
    "RUNTIME": ("ActivityAPI", ("cbid", "correlation_id", "end", "process_id", "return_value", "start", "thread_id")),
    "DRIVER": ("ActivityAPI", ("cbid", "correlation_id", "end", "process_id", "return_value", "start", "thread_id")),
    "MEMCPY": (
        "ActivityMemcpy7",
        (
            "bytes",
            "channel_id",
            "channel_type",
            "context_id",
            "copy_count",
            "copy_kind",
            "correlation_id",
            "device_id",
            "dst_kind",
            "end",
            "flags_",
            "graph_id",
            "graph_node_id",
            "is_device_launched",
            "runtime_correlation_id",
            "source_graph_id",
            "source_graph_node_id",
            "src_kind",
            "start",
            "stream_id",
        ),
    ),
    "MEMCPY2": (
        "ActivityMemcpyPtoP4",
        (
            "bytes",
            "channel_id",
            "channel_type",
            "context_id",
            "copy_kind",
            "correlation_id",
            "device_id",
            "dst_context_id",
            "dst_device_id",
            "dst_kind",
            "end",
            "flags_",
            "graph_id",
            "graph_node_id",
            "src_context_id",
            "src_device_id",
            "src_kind",
            "start",
            "stream_id",
        ),
    ),
    "MEMSET": (
        "ActivityMemset5",
        (
            "bytes",
            "channel_id",
            "channel_type",
            "context_id",
            "correlation_id",
            "device_id",
            "end",
            "flags_",
            "graph_id",
            "graph_node_id",
            "is_device_launched",
            "memory_kind",
            "source_graph_id",
            "source_graph_node_id",
            "start",
            "stream_id",
            "value",
        ),
    ),
    "SYNCHRONIZATION": (
        "ActivitySynchronization2",
        (
            "context_id",
            "correlation_id",
            "cuda_event_id",
            "cuda_event_sync_id",
            "end",
            "return_value",
            "start",
            "stream_id",
            "type",
        ),
    ),
    "MARKER": ("ActivityMarker2", ("domain", "flags_", "id", "name", "object_id", "object_kind", "timestamp")),
    "NAME": ("ActivityName", ("name", "object_id", "object_kind")),
    "EXTERNAL_CORRELATION": ("ActivityExternalCorrelation", ("correlation_id", "external_id", "external_kind")),
    "OVERHEAD": (
        "ActivityOverhead3",
        ("correlation_id", "end", "object_id", "object_kind", "overhead_data", "overhead_kind", "start"),
    ),
    "CONTEXT": (
        "ActivityContext4",
        (
            "cig_mode",
            "compute_api_kind",
            "context_id",
            "device_id",
            "is_green_context",
            "null_stream_id",
            "num_multiprocessors",
            "parent_context_id",
            "process_id",
        ),
    ),
    "DEVICE": (
        "ActivityDevice6",
        (
            "compute_capability_major",
            "compute_capability_minor",
            "global_memory_size",
            "id",
            "name",
            "num_multiprocessors",
            "uuid",
        ),
    ),
    "STREAM": ("ActivityStream", ("context_id", "correlation_id", "flag", "priority", "stream_id")),
}

HAVE_CUPTI = importlib.util.find_spec("cupti") is not None


def _object_id(**values: int) -> Any:
    return SimpleNamespace(
        pt=SimpleNamespace(process_id=values.get("process_id", 0), thread_id=values.get("thread_id", 0)),
        dcs=SimpleNamespace(device_id=0, context_id=0, stream_id=0),
    )


def fake_record(kind: str, **fields: Any) -> Any:
    """A SimpleNamespace with every attribute of the kind's cupti-python class (0/'' unless given)."""
    _, attrs = CLASSES[kind]
    values: dict[str, Any] = {a: ("" if a in ("name", "domain") else 0) for a in attrs}
    values["object_id"] = _object_id(**fields.pop("object_id", {}))
    if kind == "DEVICE":
        values["uuid"] = SimpleNamespace(bytes=fields.pop("uuid", bytes(16)))
    unknown = set(fields) - set(attrs)
    assert not unknown, f"{kind} has no attribute(s) {unknown}"
    values.update(fields)
    return SimpleNamespace(kind=ACTIVITY_KIND[kind], **values)


def real_record(kind: str, **fields: Any) -> Any:
    """The same record built from cupti-python's own class."""
    from cupti import cupti

    cls, attrs = CLASSES[kind]
    rec = getattr(cupti, cls)()
    rec.kind = getattr(cupti.ActivityKind, kind)
    for key, value in fields.pop("object_id", {}).items():
        setattr(rec.object_id.pt, key, value)
    if "uuid" in fields:
        fields.pop("uuid")  # CUuuid is read-only through the record; the fakes cover its formatting
    for key, value in fields.items():
        assert key in attrs
        setattr(rec, key, value)
    return rec
