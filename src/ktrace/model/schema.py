"""Arrow schemas of the ktrace trace model, schema v1: one schema per table, enums, SCHEMA_VERSION."""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1
"""Bumped on any incompatible change of a table's columns or of meta.json."""

# Enumerations stored as dictionary strings. Anything a source cannot tell is "unknown".
MEMORY_OPS = ("memcpy", "memset")
COPY_KINDS = ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "unknown")
MEMORY_KINDS = ("pageable", "pinned", "device", "managed", "array", "unknown")
SYNC_TYPES = ("stream", "event", "stream_wait_event", "context", "device", "unknown")
API_DOMAINS = ("runtime", "driver")
OP_CATEGORIES = ("cpu_op", "python_function")
"""ops.category: a framework operator (Kineto cpu_op) or a Python frame (Kineto python_function, nn.Module
frames among them). Null (stores written before the column, sources without it) means an operator."""

NODE_RANK = -1
"""`rank` of rows that belong to a whole node rather than a process (the launcher's counters)."""

_STR = pa.dictionary(pa.int32(), pa.string())
"""Repeating strings (kernel names, API names, enums) are dictionary-encoded in memory and on disk."""


def _fields(*cols: tuple[str, pa.DataType, bool]) -> list[pa.Field]:
    return [pa.field(name, typ, nullable=nullable) for name, typ, nullable in cols]


# Every table starts with the partition keys: the host and the rank (process) a row came from.
_PARTITION = (("node", _STR, False), ("rank", pa.int32(), False))
_SPAN = (("start_ns", pa.int64(), False), ("end_ns", pa.int64(), False))
_GPU_PLACE = (("device", pa.int32(), False), ("stream", pa.int64(), True), ("context_id", pa.int64(), True))
_CORR = (("correlation_id", pa.int64(), True), ("external_id", pa.int64(), True))
_CPU_PLACE = (("pid", pa.int64(), False), ("tid", pa.int64(), False))

LAUNCH_CONFIG = (
    "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
    "registers_per_thread", "static_shared_bytes", "dynamic_shared_bytes",
)  # fmt: skip
"""The kernel table's launch-configuration columns (int32, null where the source lacks them), in table order."""

KERNELS_COLUMNS = _fields(
    *_PARTITION,
    *_SPAN,
    *_GPU_PLACE,
    *_CORR,
    ("name", _STR, False),
    *((column, pa.int32(), True) for column in LAUNCH_CONFIG),
    ("graph_id", pa.int64(), True),
    ("graph_node_id", pa.int64(), True),
    ("queued_ns", pa.int64(), True),
    ("submitted_ns", pa.int64(), True),
    ("est_occupancy_pct", pa.int32(), True),  # Kineto's `est. achieved occupancy %`, 0-100
    # NCCL collectives (Kineto args); null for compute kernels.
    ("collective", _STR, True),
    ("in_nelems", pa.int64(), True),
    ("out_nelems", pa.int64(), True),
    ("comm_dtype", _STR, True),
    ("group_size", pa.int32(), True),
    ("process_group", _STR, True),  # Kineto's `Process Group Name`
)

MEMORY_COLUMNS = _fields(
    *_PARTITION,
    ("op", _STR, False),
    *_SPAN,
    *_GPU_PLACE,
    *_CORR,
    ("bytes", pa.int64(), True),
    ("copy_kind", _STR, False),
    ("src_kind", _STR, False),
    ("dst_kind", _STR, False),
    ("graph_id", pa.int64(), True),
)

SYNCS_COLUMNS = _fields(
    *_PARTITION,
    *_SPAN,
    ("device", pa.int32(), True),
    ("stream", pa.int64(), True),
    ("context_id", pa.int64(), True),
    ("sync_type", _STR, False),
    ("correlation_id", pa.int64(), True),
    ("event_id", pa.int64(), True),
    # Event waits (Kineto's wait_on_stream / wait_on_cuda_event_record_corr_id): the stream the waited event
    # was recorded on and the correlation id of its cudaEventRecord call; null elsewhere.
    ("wait_stream", pa.int64(), True),
    ("wait_correlation_id", pa.int64(), True),
)

API_COLUMNS = _fields(
    *_PARTITION,
    *_SPAN,
    *_CPU_PLACE,
    ("correlation_id", pa.int64(), True),
    ("external_id", pa.int64(), True),
    ("domain", _STR, False),
    ("name", _STR, False),
    ("cbid", pa.int32(), True),
)

RANGES_COLUMNS = _fields(
    *_PARTITION,
    *_SPAN,
    *_CPU_PLACE,
    ("name", _STR, False),
    ("domain", _STR, False),
    ("depth", pa.int32(), False),
    ("on_gpu", pa.bool_(), False),
    ("device", pa.int32(), True),
    ("stream", pa.int64(), True),
    ("correlation_id", pa.int64(), True),
)

OPS_COLUMNS = _fields(
    *_PARTITION,
    *_SPAN,
    *_CPU_PLACE,
    ("name", _STR, False),
    ("external_id", pa.int64(), True),
    ("sequence_number", pa.int64(), True),
    ("category", _STR, True),
    # Kineto args["Input Dims"] (record_shapes=True) as normalized JSON text, "[[8, 3, 224, 224], []]"; null
    # without shapes (other sources, Python frames, stores written before the column)
    ("input_dims", _STR, True),
    # args["Input type"] and args["Concrete Inputs"] as JSON lists of strings (normalize_json); null likewise
    ("input_types", _STR, True),
    ("concrete_inputs", _STR, True),
)

COUNTERS_COLUMNS = _fields(
    *_PARTITION,
    ("ts_ns", pa.int64(), False),
    ("metric", _STR, False),
    ("instance", pa.int32(), True),
    ("value", pa.float64(), False),
)

ALLOCATIONS_COLUMNS = _fields(
    *_PARTITION,
    ("ts_ns", pa.int64(), False),
    ("device", pa.int32(), False),
    ("pid", pa.int64(), True),
    ("tid", pa.int64(), True),
    ("address", pa.int64(), True),
    ("bytes", pa.int64(), False),
    ("total_allocated", pa.int64(), True),
    ("total_reserved", pa.int64(), True),
)
"""GPU caching-allocator events (Kineto `[memory]`, nsys CUDA_GPU_MEMORY_USAGE_EVENTS): `bytes` > 0 allocates,
< 0 frees the block at `address`; the allocator's totals after the event where the source records them (null
otherwise); the calling thread where known (pid/tid, for the operator context). Instants, not spans."""

SAMPLES_COLUMNS = _fields(*_PARTITION, ("ts_ns", pa.int64(), False), *_CPU_PLACE, ("stack", _STR, False))
"""Python stack samples (`ktrace run --python-sample MS`): one row per sampled thread and tick. `stack` is the
thread's Python frames, outermost first, one `file:first_line function` per frame joined by STACK_SEPARATOR;
dictionary encoding stores each distinct stack once. Instants, read as empty from stores without the table."""

STACK_SEPARATOR = ";"
"""Between the frames of samples.stack, as in the collapsed stacks of flamegraph.pl and py-spy (the sampler writes a
";" in a file name as ","; a newline would be escaped wherever a trace is made printable for a terminal)."""

THREADS_COLUMNS = _fields(*_PARTITION, *_CPU_PLACE, ("name", _STR, True))

DEVICES_COLUMNS = _fields(
    *_PARTITION,
    ("device", pa.int32(), False),
    ("name", _STR, True),
    ("uuid", pa.string(), True),
    ("compute_major", pa.int32(), True),
    ("compute_minor", pa.int32(), True),
    ("sm_count", pa.int32(), True),
    ("memory_bytes", pa.int64(), True),
)

COUNTER_METRICS = (
    "cpu.util",
    "cpu.core.util",
    "cpu.iowait_pct",
    "mem.used_bytes",
    "mem.util",
    "disk.read_bytes",
    "disk.write_bytes",
    "net.rx_bytes",
    "net.tx_bytes",
    "gpu.util",
    "gpu.mem_util",
    "gpu.mem_used_bytes",
    "gpu.power_w",
    "gpu.sm_clock_mhz",
    "cpu.cycles",
    "cpu.instructions",
    "cpu.itlb_misses",
)
"""Metric names written by ktrace's sampler and the importers. Other names are allowed."""


def _schema(cols: list[pa.Field], table: str) -> pa.Schema:
    return pa.schema(
        cols, metadata={b"ktrace.schema_version": str(SCHEMA_VERSION).encode(), b"ktrace.table": table.encode()}
    )


SCHEMAS: dict[str, pa.Schema] = {
    "kernels": _schema(KERNELS_COLUMNS, "kernels"),
    "memory": _schema(MEMORY_COLUMNS, "memory"),
    "syncs": _schema(SYNCS_COLUMNS, "syncs"),
    "api": _schema(API_COLUMNS, "api"),
    "ranges": _schema(RANGES_COLUMNS, "ranges"),
    "ops": _schema(OPS_COLUMNS, "ops"),
    "counters": _schema(COUNTERS_COLUMNS, "counters"),
    "threads": _schema(THREADS_COLUMNS, "threads"),
    "devices": _schema(DEVICES_COLUMNS, "devices"),
    "allocations": _schema(ALLOCATIONS_COLUMNS, "allocations"),
    "samples": _schema(SAMPLES_COLUMNS, "samples"),
}
"""Table name -> Arrow schema. Column order is the order on disk."""

TABLES: tuple[str, ...] = tuple(SCHEMAS)

ENUMS: dict[tuple[str, str], tuple[str, ...]] = {
    ("memory", "op"): MEMORY_OPS,
    ("memory", "copy_kind"): COPY_KINDS,
    ("memory", "src_kind"): MEMORY_KINDS,
    ("memory", "dst_kind"): MEMORY_KINDS,
    ("syncs", "sync_type"): SYNC_TYPES,
    ("api", "domain"): API_DOMAINS,
    ("ops", "category"): OP_CATEGORIES,
}
"""(table, column) -> allowed values, checked by Trace.validate()."""

TIME_COLUMNS = ("start_ns", "end_ns", "ts_ns", "queued_ns", "submitted_ns")
"""Columns holding a timestamp (ns since the epoch, on the recording host's clock), in any table."""

SPAN_TABLES = ("kernels", "memory", "syncs", "api", "ranges", "ops")
"""Tables whose rows are [start_ns, end_ns] intervals."""


def empty_table(name: str) -> pa.Table:
    """An empty Arrow table with the schema of table `name`."""
    return SCHEMAS[name].empty_table()
