"""The events of one rank as Kineto (PyTorch-profiler) JSON lines, built column by column in polars.

Each function takes one table's rows of a rank and returns one JSON text per event (a polars String Series), in the
categories, names and args PyTorch's profiler writes (shared/reference/formats.md §1.4): GPU work on pid = device,
tid = stream; CPU work on the OS pid/tid. Times are µs after the file's `baseTimeNanoseconds`, written as exact
decimals with 3 fractional digits, so the importer reads back the same nanoseconds. A null id is left out of
`args` (a null pid/tid is written as "", which the importer reads as null). Strings are JSON-quoted once per
distinct value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import polars as pl

MEMORY_KIND_TITLES = {
    "pageable": "Pageable",
    "pinned": "Pinned",
    "device": "Device",
    "managed": "Managed",
    "array": "Array",
    "unknown": "Unknown",
}
"""ktrace memory kinds -> the words in Kineto's memcpy/memset names ("Memcpy HtoD (Pageable -> Device)")."""
SYNC_KIND_NAMES = {
    "stream": "Stream Sync",
    "event": "Event Sync",
    "stream_wait_event": "Stream Wait Event",
    "context": "Context Sync",
    "device": "Device Sync",
    "unknown": "Unknown",
}
"""ktrace sync_type -> Kineto's cuda_sync event name and `cuda_sync_kind`."""
GPU_SORT_BASE = 0x1000000
"""Kineto's process_sort_index of GPU d is this + d (CPU processes sort by pid, before them)."""
CUDA_DEVICE_TYPE = 1
"""c10::DeviceType::CUDA: the `Device Type` of a GPU caching-allocator `[memory]` event."""


def exact_us(ns: pl.Expr) -> pl.Expr:
    """A non-negative ns count as exact µs text with 3 decimals (12345678 -> "12345.678")."""
    return pl.format("{}.{}", ns // 1000, (ns % 1000).cast(pl.String).str.zfill(3))


def quoted(series: pl.Series) -> pl.Series:
    """JSON string literals of a string column (null where null), each distinct value encoded once."""
    text = series.cast(pl.String)
    uniq = text.drop_nulls().unique()
    literals = [json.dumps(s, ensure_ascii=False) for s in uniq.to_list()]
    return text.replace_strict(uniq, literals, default=None, return_dtype=pl.String)


def _place(col: str) -> pl.Expr:
    """A pid/tid value: the id, or "" (read back as null) where there is none."""
    return pl.col(col).cast(pl.String).fill_null('""')


def _arg(key: str, value: pl.Expr) -> pl.Expr:
    """`"key":value`, null (left out of args) where value is null."""
    return pl.format(f'"{key}":{{}}', value)


def _num(key: str, col: str) -> pl.Expr:
    return _arg(key, pl.col(col).cast(pl.String))


def _args(*items: pl.Expr) -> pl.Expr:
    return pl.format("{{{}}}", pl.concat_str(list(items), separator=",", ignore_nulls=True))


def _triple(key: str, cols: tuple[str, str, str]) -> pl.Expr:
    """`"grid":[x,y,z]` (null parts as null), left out when all three are null."""
    parts = [pl.col(c).cast(pl.String).fill_null("null") for c in cols]
    any_set = pl.any_horizontal([pl.col(c).is_not_null() for c in cols])
    return pl.when(any_set).then(pl.format(f'"{key}":[{{}},{{}},{{}}]', *parts))


def _float(key: str, value: pl.Expr) -> pl.Expr:
    """A float arg at full precision (bytes / ns, as Kineto computes the memory bandwidth); left out where not
    finite."""
    return pl.when(value.is_finite()).then(_arg(key, value.cast(pl.String)))


def _decimal(key: str, value: pl.Expr) -> pl.Expr:
    """A float arg rounded to 6 decimals as Kineto prints them; left out where null or not finite."""
    return pl.when(value.is_finite()).then(_arg(key, value.round(6).cast(pl.String)))


def _lines(frame: pl.DataFrame, template: str, *exprs: pl.Expr) -> pl.Series:
    """One line per row: `template` with `{}` filled by `exprs` (a literal brace written `{{`)."""
    if not frame.height:
        return pl.Series([], dtype=pl.String)
    with_names = frame.with_columns(quoted(frame["name"]).alias("_qname")) if "name" in frame.columns else frame
    return with_names.select(pl.format(template, *exprs).alias("line"))["line"]


def _span(base_ns: int) -> list[pl.Expr]:
    return [exact_us(pl.col("start_ns") - base_ns), exact_us(pl.col("end_ns") - pl.col("start_ns"))]


_X = '{{"ph":"X","cat":"{}","name":{},"pid":{},"tid":{},"ts":{},"dur":{},"args":{}}}'


def kernel_lines(kernels: pl.DataFrame, base_ns: int) -> pl.Series:
    """`kernel` events. A `sm_count` column (the device's SMs; the caller joins it, null where unknown) gives
    `blocks per SM` and `warps per SM` as Kineto computes them, in C float (grid blocks / SMs; blocks per SM x
    threads per block / 32). `shared memory` is static + dynamic shared memory, as Kineto writes it."""
    shared = pl.when(pl.col("static_shared_bytes").is_not_null() | pl.col("dynamic_shared_bytes").is_not_null()).then(
        pl.col("static_shared_bytes").fill_null(0) + pl.col("dynamic_shared_bytes").fill_null(0)
    )
    args = _args(
        _num("External id", "external_id"),
        _num("queued", "queued_ns"),
        _num("device", "device"),
        _num("context", "context_id"),
        _num("stream", "stream"),
        _num("correlation", "correlation_id"),
        _num("registers per thread", "registers_per_thread"),
        _arg("shared memory", shared.cast(pl.String)),
        _decimal("blocks per SM", pl.col("_blocks_per_sm")),
        _decimal("warps per SM", pl.col("_warps_per_sm")),
        _triple("grid", ("grid_x", "grid_y", "grid_z")),
        _triple("block", ("block_x", "block_y", "block_z")),
        _num("est. achieved occupancy %", "est_occupancy_pct"),
        _num("graph id", "graph_id"),
        _num("graph node id", "graph_node_id"),
        _arg("Collective name", _quoted_col("collective")),
        _num("In msg nelems", "in_nelems"),
        _num("Out msg nelems", "out_nelems"),
        _num("Group size", "group_size"),
        _arg("dtype", _quoted_col("comm_dtype")),
        _arg("Process Group Name", _quoted_col("process_group")),
    )
    per_sm, warps = occupancy_args(kernels)
    frame = kernels.with_columns(
        quoted(kernels["collective"]).alias("_q_collective"),
        quoted(kernels["comm_dtype"]).alias("_q_comm_dtype"),
        quoted(kernels["process_group"]).alias("_q_process_group"),
        per_sm.alias("_blocks_per_sm"),
        warps.alias("_warps_per_sm"),
    )
    return _lines(
        frame, _X, pl.lit("kernel"), pl.col("_qname"), _place("device"), _place("stream"), *_span(base_ns), args
    )


def occupancy_args(kernels: pl.DataFrame) -> tuple[pl.Series, pl.Series]:
    """`blocks per SM` and `warps per SM` of each kernel computed in C float as Kineto does (grid blocks / SMs; that x
    threads per block / 32), so that the 6 decimals written are Kineto's; NaN where a part is unknown. In numpy:
    the same float32 expression in polars gave 1.481482 for 160 blocks on 108 SMs in a frame of 3 rows (1.481481
    in C float and in a frame of 1 row)."""

    def f32(*cols: str) -> npt.NDArray[np.float32]:
        product = np.ones(kernels.height, np.float64)
        for col in cols:
            product *= kernels[col].cast(pl.Float64).fill_null(np.nan).to_numpy() if col in kernels.columns else np.nan
        return product.astype(np.float32)

    with np.errstate(divide="ignore", invalid="ignore"):
        per_sm = f32("grid_x", "grid_y", "grid_z") / f32("sm_count")
        warps = per_sm * f32("block_x", "block_y", "block_z") / np.float32(32)
    return pl.Series(per_sm.astype(np.float64)), pl.Series(warps.astype(np.float64))


def _quoted_col(col: str) -> pl.Expr:
    return pl.col(f"_q_{col}")


def memory_name(op: str, copy_kind: str, src_kind: str, dst_kind: str) -> str:
    """Kineto's name of a memcpy/memset: "Memcpy HtoD (Pageable -> Device)", "Memset (Device)"."""
    src, dst = MEMORY_KIND_TITLES.get(src_kind, "Unknown"), MEMORY_KIND_TITLES.get(dst_kind, "Unknown")
    if op == "memset":
        return f"Memset ({dst})" if src_kind == "unknown" else f"Memset ({src} -> {dst})"
    copy = copy_kind if copy_kind != "unknown" else "Unknown"
    return f"Memcpy {copy} ({src} -> {dst})"


def memory_lines(memory: pl.DataFrame, base_ns: int) -> pl.Series:
    """`gpu_memcpy` and `gpu_memset` events, named so that the importer reads back the copy and memory kinds."""
    keys = ["op", "copy_kind", "src_kind", "dst_kind"]
    frame = memory.with_columns(pl.col(keys).cast(pl.String))
    kinds = frame.select(keys).unique()
    names = [memory_name(*row) for row in kinds.iter_rows()]
    frame = frame.join(kinds.with_columns(pl.Series("name", names, pl.String)), on=keys, how="left", nulls_equal=True)
    dur = (pl.col("end_ns") - pl.col("start_ns")).cast(pl.Float64)
    args = _args(
        _num("External id", "external_id"),
        _num("device", "device"),
        _num("context", "context_id"),
        _num("stream", "stream"),
        _num("correlation", "correlation_id"),
        _num("bytes", "bytes"),
        _num("graph id", "graph_id"),
        pl.when(dur > 0).then(_float("memory bandwidth (GB/s)", pl.col("bytes").cast(pl.Float64) / dur)),
    )
    category = pl.when(pl.col("op") == "memset").then(pl.lit("gpu_memset")).otherwise(pl.lit("gpu_memcpy"))
    return _lines(frame, _X, category, pl.col("_qname"), _place("device"), _place("stream"), *_span(base_ns), args)


NO_STREAM = -1
"""The `stream` (and tid) of a sync on no stream (a context or event sync) as today's Kineto writes it; Kineto of
2023 wrote CUPTI's 4294967295 in `stream` (tid -1), which HTA counts as a stream (its GPU span of such a file
includes those syncs): the importer keeps that value in meta.job["kineto_no_stream"] and the export writes it back."""


def sync_lines(syncs: pl.DataFrame, base_ns: int, no_stream: int = NO_STREAM) -> pl.Series:
    """`cuda_sync` events (CUPTI synchronization records), with the waited event's stream and record call; a sync on
    no stream has tid -1 and `stream` `no_stream` (-1 as PyTorch writes it, or the source file's own value)."""
    frame = syncs.with_columns(
        pl.col("sync_type").cast(pl.String).replace_strict(SYNC_KIND_NAMES, default="Unknown").alias("name")
    )
    args = _args(
        _num("device", "device"),
        _num("context", "context_id"),
        _arg("stream", pl.col("stream").fill_null(no_stream).cast(pl.String)),
        _num("correlation", "correlation_id"),
        pl.format('"cuda_sync_kind":{}', pl.col("_qname")),
        _num("wait_on_stream", "wait_stream"),
        _num("wait_on_cuda_event_record_corr_id", "wait_correlation_id"),
        _num("wait_on_cuda_event_id", "event_id"),
    )
    tid = pl.col("stream").fill_null(NO_STREAM).cast(pl.String)
    return _lines(frame, _X, pl.lit("cuda_sync"), pl.col("_qname"), _place("device"), tid, *_span(base_ns), args)


def api_lines(api: pl.DataFrame, base_ns: int) -> pl.Series:
    """`cuda_runtime` and `cuda_driver` events."""
    args = _args(_num("External id", "external_id"), _num("cbid", "cbid"), _num("correlation", "correlation_id"))
    category = pl.when(pl.col("domain") == "driver").then(pl.lit("cuda_driver")).otherwise(pl.lit("cuda_runtime"))
    return _lines(api, _X, category, pl.col("_qname"), _place("pid"), _place("tid"), *_span(base_ns), args)


def range_lines(ranges: pl.DataFrame, base_ns: int) -> pl.Series:
    """`user_annotation` (CPU ranges, ProfilerStep#N among them) and `gpu_user_annotation` (on pid = device,
    tid = stream) events."""
    on_gpu = pl.col("on_gpu")
    category = pl.when(on_gpu).then(pl.lit("gpu_user_annotation")).otherwise(pl.lit("user_annotation"))
    pid = pl.when(on_gpu).then(_place("device")).otherwise(_place("pid"))
    tid = pl.when(on_gpu).then(_place("stream")).otherwise(_place("tid"))
    return _lines(ranges, _X, category, pl.col("_qname"), pid, tid, *_span(base_ns), pl.lit("{}"))


def op_lines(ops: pl.DataFrame, base_ns: int) -> pl.Series:
    """`cpu_op` events (External id, Sequence number, Input Dims, Input type, Concrete Inputs) and
    `python_function` frames."""
    frame = ops.with_columns(_json_texts(ops[c]).alias(f"_{c}") for c in SHAPE_ARGS)
    python = pl.col("category") == "python_function"
    op_args = _args(
        _num("External id", "external_id"),
        _num("Sequence number", "sequence_number"),
        *(_arg(key, pl.col(f"_{c}")) for c, key in SHAPE_ARGS.items()),
    )
    args = pl.when(python.fill_null(False)).then(pl.lit("{}")).otherwise(op_args)
    category = pl.when(python.fill_null(False)).then(pl.lit("python_function")).otherwise(pl.lit("cpu_op"))
    return _lines(frame, _X, category, pl.col("_qname"), _place("pid"), _place("tid"), *_span(base_ns), args)


SHAPE_ARGS = {"input_dims": "Input Dims", "input_types": "Input type", "concrete_inputs": "Concrete Inputs"}
"""ops columns kept as the JSON text of a cpu_op arg, and the arg's name."""


def _json_texts(column: pl.Series) -> pl.Series:
    """An ops column of JSON texts as the args' JSON, computed once per distinct text."""
    texts = column.cast(pl.String)
    uniq = texts.drop_nulls().unique().to_list()
    return texts.replace_strict(uniq, [_dims_json(d) for d in uniq], default=None)


def _dims_json(text: str) -> str:
    """ops.input_dims text as the JSON of `Input Dims` (it is JSON already; anything else is written as a string)."""
    try:
        json.loads(text)
    except ValueError:
        return json.dumps(text, ensure_ascii=False)
    return text


def allocation_lines(allocations: pl.DataFrame, base_ns: int) -> pl.Series:
    """`[memory]` instants (`cpu_instant_event`) of the GPU caching allocator."""
    args = _args(
        _num("Total Reserved", "total_reserved"),
        _num("Total Allocated", "total_allocated"),
        _num("Bytes", "bytes"),
        _num("Addr", "address"),
        _num("Device Id", "device"),
        pl.lit(f'"Device Type":{CUDA_DEVICE_TYPE}'),
    )
    template = '{{"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":{},"tid":{},"ts":{},"args":{}}}'
    return _lines(allocations, template, _place("pid"), _place("tid"), exact_us(pl.col("ts_ns") - base_ns), args)


def flow_lines(api: pl.DataFrame, gpu: pl.DataFrame, base_ns: int) -> pl.Series:
    """`ac2g` flows, id = correlation: an `s` on each launch call that has GPU work in `gpu` (kernels and memory
    rows: start_ns, device, stream, correlation_id) and an `f` (`bp: "e"`) on each of its GPU records."""
    launches = api.filter(pl.col("correlation_id").is_not_null()).unique(
        "correlation_id", keep="first", maintain_order=True
    )
    targets = gpu.filter(pl.col("correlation_id").is_in(launches["correlation_id"].implode()))
    sources = launches.filter(pl.col("correlation_id").is_in(targets["correlation_id"].implode()))
    s = '{{"ph":"s","id":{},"pid":{},"tid":{},"ts":{},"cat":"ac2g","name":"ac2g"}}'
    f = '{{"ph":"f","id":{},"pid":{},"tid":{},"ts":{},"cat":"ac2g","name":"ac2g","bp":"e"}}'
    ts = exact_us(pl.col("start_ns") - base_ns)
    corr = pl.col("correlation_id").cast(pl.String)
    return pl.concat(
        [
            _lines(sources, s, corr, _place("pid"), _place("tid"), ts),
            _lines(targets, f, corr, _place("device"), _place("stream"), ts),
        ]
    )


def metadata_lines(tables: Mapping[str, pl.DataFrame]) -> pl.Series:
    """`M` events of one rank's tables: a CPU process per pid (named after its main thread, labels "CPU"), thread
    names, and a GPU process per device (labels "GPU N", which tells the importer that pid is a device) with its
    streams' names."""
    t, ts = tables, exact_us(pl.lit(0, pl.Int64))
    names = t["threads"].filter(pl.col("name").is_not_null()).select("pid", "tid", pl.col("name").cast(pl.String))
    main = names.filter(pl.col("pid") == pl.col("tid")).unique("pid", keep="first").select("pid", "name")
    pids = [t[n].select("pid") for n in ("api", "ops", "threads")] + [
        t["ranges"].filter(~pl.col("on_gpu")).select("pid"),
        t["allocations"].select("pid").drop_nulls(),
    ]
    cpu = pl.concat(pids).unique().sort("pid").join(main, on="pid", how="left")
    places = pl.concat(
        [t[n].select("device", "stream") for n in ("kernels", "memory", "syncs")]
        + [t["ranges"].filter(pl.col("on_gpu")).select("device", "stream")]
    ).drop_nulls("device")
    devices = sorted(set(places["device"].to_list()) | set(t["devices"]["device"].to_list()))
    gpus = pl.DataFrame({"device": devices}, schema={"device": pl.Int64})
    streams = places.drop_nulls().unique().sort("device", "stream")
    proc = '{{"name":"{}","ph":"M","ts":{},"pid":{},"tid":0,"args":{{"{}":{}}}}}'
    thread = '{{"name":"thread_name","ph":"M","ts":{},"pid":{},"tid":{},"args":{{"name":{}}}}}'
    label = pl.format('"GPU {}"', pl.col("device"))
    pid, dev, tid = (pl.col(c).cast(pl.String) for c in ("pid", "device", "tid"))
    gpu_sort = (pl.col("device") + GPU_SORT_BASE).cast(pl.String)
    stream_name = pl.format('"stream {} "', pl.col("stream"))
    return pl.concat(
        [
            _lines(cpu.drop_nulls("name"), proc, pl.lit("process_name"), ts, pid, pl.lit("name"), pl.col("_qname")),
            _lines(cpu, proc, pl.lit("process_labels"), ts, pid, pl.lit("labels"), pl.lit('"CPU"')),
            _lines(cpu, proc, pl.lit("process_sort_index"), ts, pid, pl.lit("sort_index"), pid),
            _lines(gpus, proc, pl.lit("process_name"), ts, dev, pl.lit("name"), label),
            _lines(gpus, proc, pl.lit("process_labels"), ts, dev, pl.lit("labels"), label),
            _lines(gpus, proc, pl.lit("process_sort_index"), ts, dev, pl.lit("sort_index"), gpu_sort),
            _lines(names, thread, ts, pid, tid, pl.col("_qname")),
            _lines(streams, thread, ts, dev, pl.col("stream").cast(pl.String), stream_name),
        ]
    )
