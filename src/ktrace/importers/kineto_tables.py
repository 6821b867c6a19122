"""Build ktrace tables from the raw Kineto columns: times to epoch ns, kinds, nesting, joins, health."""

from __future__ import annotations

import re
from typing import Any, TypeVar

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from ktrace.importers.kineto_combine import LeanBuilder
from ktrace.importers.kineto_events import STEP_PREFIX, EventSink, to_int
from ktrace.importers.kineto_schema import MAX_TS_US
from ktrace.importers.kineto_times import ts_to_ns
from ktrace.model.builder import TraceBuilder
from ktrace.model.nesting import nesting_depth

MAX_DUR_US = 7 * 24 * 3600 * 1e6
"""Longer events are CUPTI timestamp overflows (HTA drops them too)."""
NA_STREAM = 0xFFFFFFFF
"""CUPTI's "not applicable" stream id (context/device syncs)."""

_COPY = re.compile(r"Memcpy\s+(HtoD|DtoH|DtoD|HtoH|PtoP)", re.IGNORECASE)
_KINDS = re.compile(r"\(\s*(\w+)\s*(?:->\s*(\w+)\s*)?\)")
_MEM_KIND = {"pageable": "pageable", "pinned": "pinned", "device": "device", "managed": "managed", "array": "array"}
_COPY_CANON = {k.lower(): k for k in ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP")}
SYNC_KIND = {
    "stream sync": "stream",
    "event sync": "event",
    "stream wait event": "stream_wait_event",
    "context sync": "context",
    "device sync": "device",
}
LAUNCH_API = re.compile(r"^(cuda|cu)(Launch|GraphLaunch|Memcpy|Memset)", re.IGNORECASE)
"""API calls that put work on the GPU (so should have a kernel or memory record)."""
SYNC_API = re.compile(
    r"^(cuda|cu)(StreamWaitEvent|StreamSynchronize|DeviceSynchronize|EventSynchronize|"
    r"CtxSynchronize|ContextSynchronize)",
    re.IGNORECASE,
)
"""API calls CUPTI can record as a synchronization (a cuda_sync event when sync tracing is on)."""


def memcpy_kinds(name: str) -> tuple[str, str, str]:
    """(copy_kind, src_kind, dst_kind) from a Kineto memcpy/memset name, e.g. "Memcpy HtoD (Pageable -> Device)"."""
    copy = _COPY.search(name)
    kinds = _KINDS.search(name)
    copy_kind = _COPY_CANON[copy.group(1).lower()] if copy else "unknown"
    if kinds is None:
        return copy_kind, "unknown", "unknown"
    src = _MEM_KIND.get(kinds.group(1).lower(), "unknown")
    dst = _MEM_KIND.get((kinds.group(2) or kinds.group(1)).lower(), "unknown")
    if kinds.group(2) is None:  # "Memset (Device)": one kind, the destination
        return copy_kind, "unknown", dst
    return copy_kind, src, dst


def _map_names(names: pa.Array, fn: Any) -> list[pa.Array]:
    """Apply `fn` (str -> tuple of str) to each distinct name; return one dictionary column per output."""
    dict_names = names if pa.types.is_dictionary(names.type) else names.dictionary_encode()
    uniq = dict_names.dictionary.to_pylist()
    mapped = [fn(n) for n in uniq]
    idx = dict_names.indices
    width = len(mapped[0]) if mapped else 0
    return [
        pa.DictionaryArray.from_arrays(idx, pa.array([m[i] for m in mapped], type=pa.string())) for i in range(width)
    ]


_TableOrNone = TypeVar("_TableOrNone", pa.Table, None)


class TimeFixer:
    """Converts µs columns to epoch ns and drops rows with impossible times (counted)."""

    def __init__(self, base_ns: int) -> None:
        self.base_ns = base_ns
        self.bad_time = 0
        self.sync_on_na = False
        """A sync on no stream was written as CUPTI's NA_STREAM (see add_gpu_tables)."""

    def spans(self, table: _TableOrNone) -> _TableOrNone:
        """Replace ts/dur (µs) by start_ns/end_ns; drop non-finite, negative or overlong rows (None: None).

        Each µs column is freed as soon as its ns are made, when the caller holds no other reference to `table`
        (`fix.spans(sink.table(kind))`): 16 bytes a row less at the import's peak (0.6 GB at 41 M kernels).
        """
        if table is None:
            return None
        ts = table.column("ts").to_numpy()
        dur = table.column("dur").to_numpy()
        ok = (ts < MAX_TS_US) & (ts > -MAX_TS_US) & (dur >= 0) & (dur < MAX_DUR_US)  # (NaN fails each; no float
        # temporary as long as the column, as np.abs made)
        if not ok.all():
            self.bad_time += int((~ok).sum())
            table, ts, dur = table.filter(pa.array(ok)), ts[ok], dur[ok]
        start = ts_to_ns(ts, self.base_ns)
        del ts
        table = table.drop_columns(["ts"])
        if "ts_frac_ns" in table.column_names:  # exactly decoded slices: ts holds whole µs, this the ns after them
            start += pc.fill_null(table.column("ts_frac_ns"), 0).to_numpy().astype(np.int64)
            table = table.drop_columns(["ts_frac_ns"])
        end = ts_to_ns(dur, 0)
        del dur
        end += start
        table = table.drop_columns(["dur"])
        return table.append_column("start_ns", pa.array(start)).append_column("end_ns", pa.array(end))


def _frame(table: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def _stream_na(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    bad = pc.or_(pc.equal(arr, NA_STREAM), pc.less(arr, 0))
    return pc.if_else(pc.fill_null(bad, False), pa.scalar(None, pa.int64()), arr)


KIND_TABLE = {
    "kernel": "kernels",
    "memcpy": "memory",
    "memset": "memory",
    "sync": "syncs",
    "runtime": "api",
    "driver": "api",
    "op": "ops",
    "python": "ops",
    "alloc": "allocations",
}
"""The table each kind's rows go to, in the order a table's kinds follow each other (memcpy rows before memset
rows, runtime before driver, operators before Python frames). Annotations go to `ranges` (range_frames)."""
_API_DOMAIN = {"runtime": "runtime", "driver": "driver"}
_OPS_CATEGORY = {"op": "cpu_op", "python": "python_function"}
CUDA_DEVICE_TYPE = 1
"""c10::DeviceType::CUDA, the `Device Type` of GPU allocator events (0 is the CPU allocator, not imported)."""


def kind_rows(kind: str, raw: pa.Table, fix: TimeFixer) -> pa.Table | None:
    """The rows of `raw` (one kind's columns, µs; see KIND_TABLE) as its table's columns, without node and rank;
    None where no row is kept (allocator events of the CPU). Sets `fix.sync_on_na` as add_gpu_tables says."""
    rows = fix.spans(raw)  # (spans frees the µs columns when nothing else holds the table)
    if kind in ("memcpy", "memset"):
        copy_kind, src, dst = _map_names(rows.column("name").combine_chunks(), memcpy_kinds)
        rows = rows.drop_columns(["name"])
        for col, values in (("copy_kind", copy_kind), ("src_kind", src), ("dst_kind", dst)):
            rows = rows.append_column(col, values)
        return rows.append_column("op", pa.array([kind] * rows.num_rows, type=pa.string()).dictionary_encode())
    if kind == "sync":
        return _sync_rows(rows, fix)
    if kind in _API_DOMAIN:
        return rows.append_column("domain", pa.array([_API_DOMAIN[kind]] * rows.num_rows, pa.string()))
    if kind in _OPS_CATEGORY:
        label = pa.DictionaryArray.from_arrays(np.zeros(rows.num_rows, np.int32), [_OPS_CATEGORY[kind]])
        return rows.append_column("category", label)
    if kind == "alloc":
        return _allocation_rows(rows)
    return rows


def _sync_rows(syncs: pa.Table, fix: TimeFixer) -> pa.Table:
    (sync_type,) = _map_names(
        syncs.column("sync_kind").combine_chunks(), lambda k: (SYNC_KIND.get(str(k).strip().lower(), "unknown"),)
    )
    syncs = syncs.drop_columns(["sync_kind", "name", "external_id"])
    fix.sync_on_na = fix.sync_on_na or bool(pc.any(pc.equal(syncs["stream"], NA_STREAM)).as_py())
    for col in ("stream", "wait_stream", "wait_correlation_id"):  # Kineto writes -1 for "none"
        syncs = syncs.set_column(syncs.schema.get_field_index(col), col, _stream_na(syncs[col]))
    return syncs.append_column("sync_type", sync_type)


def _allocation_rows(rows: pa.Table) -> pa.Table | None:
    """The GPU caching allocator's `[memory]` events (CPU-allocator ones are not imported)."""
    frame = _frame(rows)
    gpu = (pl.col("device_type") == CUDA_DEVICE_TYPE) & (pl.col("device") >= 0) & pl.col("bytes").is_not_null()
    kept = frame.filter(gpu.fill_null(False))
    if not kept.height:
        return None
    return kept.select(
        pl.col("start_ns").alias("ts_ns"),
        pl.col("device").cast(pl.Int32),
        "pid",
        "tid",
        "address",
        "bytes",
        "total_allocated",
        "total_reserved",
    ).to_arrow()


def add_kind_tables(builder: LeanBuilder, sink: EventSink, fix: TimeFixer, kinds: tuple[str, ...]) -> None:
    """Add the rows of each of `kinds` that `sink` holds (handed over) to their tables, in order."""
    for kind in kinds:
        raw = sink.table(kind)
        rows = kind_rows(kind, raw, fix) if raw is not None else None
        if rows is not None:
            builder.add(KIND_TABLE[kind], rows)


def add_gpu_tables(builder: LeanBuilder, sink: EventSink, fix: TimeFixer) -> int | None:
    """kernels, memory (memcpy + memset) and syncs; NA_STREAM when the file writes a sync on no stream as CUPTI's
    4294967295 (Kineto of 2023; today's writes -1), which the Kineto export writes back, else None."""
    add_kind_tables(builder, sink, fix, ("kernel", "memcpy", "memset", "sync"))
    return NA_STREAM if fix.sync_on_na else None


def add_cpu_tables(builder: LeanBuilder, sink: EventSink, fix: TimeFixer) -> None:
    """api (runtime + driver), ranges (CPU and GPU annotations, with depth) and ops."""
    add_kind_tables(builder, sink, fix, ("runtime", "driver"))
    frames = range_frames(sink, fix)
    if frames:
        builder.add("ranges", ranges_table(frames))
    add_ops_tables(builder, sink, fix)


def range_frames(sink: EventSink, fix: TimeFixer) -> list[pl.DataFrame]:
    """The CPU and GPU annotations `sink` holds (handed over), as ranges rows without domain and depth."""
    frames = []
    cpu = sink.table("annotation")
    if cpu is not None:
        frames.append(
            _frame(fix.spans(cpu).drop_columns(["external_id"])).with_columns(
                pl.col("name").cast(pl.String),
                on_gpu=pl.lit(False),
                device=pl.lit(None, pl.Int32),
                stream=pl.lit(None, pl.Int64),
            )
        )
    gpu = sink.table("gpu_annotation")
    if gpu is not None:
        g = _frame(fix.spans(gpu).drop_columns(["external_id", "context_id", "correlation_id"]))
        frames.append(
            g.with_columns(
                pl.col("name").cast(pl.String),
                on_gpu=pl.lit(True),
                pid=pl.col("device").cast(pl.Int64),
                tid=pl.col("stream"),
                device=pl.col("device").cast(pl.Int32),
            )
        )
    return [f.select("start_ns", "end_ns", "pid", "tid", "name", "on_gpu", "device", "stream") for f in frames]


def ranges_table(frames: list[pl.DataFrame]) -> pa.Table:
    """The ranges table of `frames` (range_frames, in file order): domain and nesting depth per track."""
    return _with_depth(pl.concat(frames)).to_arrow()


def add_ops_tables(builder: LeanBuilder, sink: EventSink, fix: TimeFixer) -> None:
    """ops: framework operators (cpu_op) and Python frames (python_function), told apart by `category`."""
    add_kind_tables(builder, sink, fix, ("op", "python"))


def add_allocations(builder: LeanBuilder, sink: EventSink, fix: TimeFixer) -> None:
    """allocations: the GPU caching allocator's `[memory]` events (CPU-allocator ones are not imported)."""
    add_kind_tables(builder, sink, fix, ("alloc",))


def _with_depth(ranges: pl.DataFrame) -> pl.DataFrame:
    """Domain (profiler_step / user_annotation / gpu_user_annotation) and nesting depth per track."""
    ranges = ranges.with_columns(
        domain=pl.when(pl.col("on_gpu"))
        .then(pl.lit("gpu_user_annotation"))
        .when(pl.col("name").str.starts_with(STEP_PREFIX))
        .then(pl.lit("profiler_step"))
        .otherwise(pl.lit("user_annotation"))
    )
    ranges = ranges.sort(["on_gpu", "pid", "tid", "start_ns", "end_ns"], descending=[False, False, False, False, True])
    track = ranges.select(pl.struct("on_gpu", "pid", "tid").rank("dense")).to_series().to_numpy()
    depth = nesting_depth(track, ranges["start_ns"].to_numpy(), ranges["end_ns"].to_numpy())
    return ranges.with_columns(depth=pl.Series(depth, dtype=pl.Int32))


def add_dimension_tables(
    builder: TraceBuilder, sink: EventSink, header: dict[str, Any], used_devices: set[int]
) -> None:
    """threads (thread_name metadata of CPU processes) and devices (deviceProperties)."""
    gpu_pids = {
        to_int(pid)
        for name, pid, _, label in sink.meta_events
        if name == "process_labels" and isinstance(label, str) and label.startswith("GPU")
    }
    gpu_pids |= used_devices
    rows = [
        (to_int(pid), to_int(tid), label)
        for name, pid, tid, label in sink.meta_events
        if name == "thread_name" and isinstance(label, str)
    ]
    # Kineto repeats thread_name metadata (once per profiling window): keep one row per (pid, tid).
    unique = {(r[0], r[1]): r for r in rows if r[0] is not None and r[1] is not None and r[0] not in gpu_pids}
    rows = list(unique.values())
    if rows:
        builder.add("threads", {"pid": [r[0] for r in rows], "tid": [r[1] for r in rows], "name": [r[2] for r in rows]})
    props = header.get("deviceProperties")
    devices = [d for d in props if isinstance(d, dict)] if isinstance(props, list) else []
    if used_devices:
        devices = [d for d in devices if to_int(d.get("id")) in used_devices] or devices
    devices = [d for d in devices if to_int(d.get("id")) is not None]
    if devices:
        builder.add(
            "devices",
            {
                "device": [to_int(d.get("id")) for d in devices],
                "name": [d.get("name") if isinstance(d.get("name"), str) else None for d in devices],
                "compute_major": [to_int(d.get("computeMajor")) for d in devices],
                "compute_minor": [to_int(d.get("computeMinor")) for d in devices],
                "sm_count": [to_int(d.get("numSms")) for d in devices],
                "memory_bytes": [to_int(d.get("totalGlobalMem")) for d in devices],
            },
        )


def join_health(kernels: pl.DataFrame, memory: pl.DataFrame, syncs: pl.DataFrame, api: pl.DataFrame) -> dict[str, int]:
    """Launch <-> GPU-record join counts by correlation id (one-to-many kept; orphans counted)."""
    launch_ids = api.select(pl.col("correlation_id").drop_nulls().unique()).to_series()
    gpu_ids = pl.concat([kernels.select("correlation_id"), memory.select("correlation_id")]).to_series()
    k_corr = kernels["correlation_id"]
    joined = k_corr.is_in(launch_ids.implode()).fill_null(False)
    mem_joined = memory["correlation_id"].is_in(launch_ids.implode()).fill_null(False)
    per_corr = (
        kernels.group_by("correlation_id").len().filter(pl.col("correlation_id").is_not_null() & (pl.col("len") > 1))
    )
    names = pl.col("name").cast(pl.String)
    recorded = pl.col("correlation_id").is_in(gpu_ids.drop_nulls().implode()).fill_null(False)
    unmatched = api.filter(names.str.contains(LAUNCH_API.pattern) & ~recorded).height
    sync_ids = syncs.select(pl.col("correlation_id").drop_nulls()).to_series()
    unmatched_syncs = api.filter(
        names.str.contains(SYNC_API.pattern) & ~pl.col("correlation_id").is_in(sync_ids.implode()).fill_null(False)
    ).height
    return {
        "kernels_with_launch": int(joined.sum()),
        "kernels_without_launch": int(kernels.height - joined.sum()),
        "memory_ops_without_launch": int(memory.height - mem_joined.sum()),
        "launches_without_gpu_record": unmatched,
        "syncs_without_gpu_record": unmatched_syncs,
        "graph_fanout_kernels": int(per_corr["len"].sum()) if per_corr.height else 0,
        "graph_fanout_launches": per_corr.height,
    }
