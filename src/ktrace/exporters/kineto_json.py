"""Kineto export: one PyTorch-profiler JSON file per rank, the way `torch.profiler` writes them, for HTA, TraceLens and
scripts written against the profiler's JSON.

A file is `{"schemaVersion": 1, "deviceProperties": [...], "distributedInfo": {"rank": N, ...}, ..., "hostname": ...,
"traceEvents": [...], "traceName": ..., "displayTimeUnit": "ms", "baseTimeNanoseconds": ...}`: the events of
kineto_events, then the metadata events (process and thread names, `process_labels` "CPU" / "GPU N", stream names)
and a `Trace` span. The header is on the first line with PyTorch's `"key": value` spacing (HTA finds the rank by that
text); `hostname` is ktrace's own key, from which the import takes the node back. `baseTimeNanoseconds` is the
source Kineto file's (a trace imported from one: HTA then reads the very same floats), else the rank's first time
rounded down to the second, so every `ts` is a small exact decimal. Each rank is written table by table in slices
of CHUNK_ROWS rows: memory holds one slice's text, not the file.

`ktrace import` of the export gives back the trace it came from, but for what Kineto has no slot for (`left_out`
says what a trace loses; README "Kineto export"): counters, kernels' `submitted_ns` (and `queued_ns`, written as
Kineto's `queued` but not read back), dynamic shared memory (added into `shared memory`, Kineto's meaning), device
UUIDs, range domains other than ProfilerStep / user / GPU annotations (written as `user_annotation`) and range
correlation ids.
"""

from __future__ import annotations

import gzip
import importlib
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import IO, Any

import polars as pl

from ktrace.exporters.kineto_events import (
    NO_STREAM,
    allocation_lines,
    api_lines,
    flow_lines,
    kernel_lines,
    memory_lines,
    metadata_lines,
    op_lines,
    range_lines,
    sync_lines,
)
from ktrace.model.errors import ExitCode, KtraceError, ProgressFn, no_progress
from ktrace.model.outputs import OutputFormat, atomic_file
from ktrace.model.schema import NODE_RANK
from ktrace.model.trace import Trace

CHUNK_ROWS = 200_000
"""Rows formatted at a time (about 60 MB of text for kernels)."""
MAX_OFFSET_NS = 2**43 * 1000
"""A `ts` (µs after the base) below 2**43 µs carries its nanoseconds in a float64, which the importer's fast path
reads exactly (importers.kineto_schema.EXACT_FROM_US); a source file's base farther from the events is not reused."""
_OWN_KEYS = ("schemaVersion", "displayTimeUnit", "baseTimeNanoseconds")
"""Header keys the export sets itself; the source Kineto file's others (meta.job["kineto"]: cupti_version,
record_shapes, with_stack, ...) are written back as they were."""
_EVENT_TABLES = ("kernels", "memory", "syncs", "api", "ranges", "ops", "allocations")
"""The tables written as events (progress counts their rows)."""
_RANK_FILE = re.compile(r"^(?:[\w.-]+-)?rank\d+\.json(?:\.gz)?$")


class _RankFolder(OutputFormat):
    """A folder of `rank<N>.json` files (what --force may replace)."""

    def foreign_part(self, path: Path) -> str | None:
        if not path.is_dir():
            return "it is a file"
        for entry in path.iterdir():
            if not _RANK_FILE.match(entry.name) or entry.is_symlink() or not entry.is_file():
                return f"it holds {entry.name!r}"
        return None


KINETO_FILE = OutputFormat("a ktrace Kineto export", opening=(b'{"schemaVersion": 1, ',))
KINETO_FOLDER = _RankFolder("a folder of ktrace Kineto exports", folder=True)


def is_file_target(path: str | Path) -> bool:
    """A .json / .json.gz name is one rank's file; anything else is a folder of rank files."""
    return str(path).lower().endswith((".json", ".json.gz"))


@dataclass(frozen=True)
class KinetoExport:
    """What export_kineto wrote."""

    files: tuple[Path, ...]
    events: int
    flows: int
    bytes: int


def export_kineto(trace: Trace, path: str | Path, *, progress: ProgressFn = no_progress) -> KinetoExport:
    """Write `trace` as Kineto JSON: one file when `path` is a .json / .json.gz name (gzip for .gz), else one
    `rank<N>.json` per rank in the folder `path` (which exists).

    Raises:
        KtraceError: `path` names one file but the trace has several ranks (exit 2).
    """
    order = [(n, r) for n, r in trace.ranks if r != NODE_RANK] or [("localhost", 0)]
    if is_file_target(path):
        if len(order) > 1:
            raise KtraceError(
                f"{path}: one .json file holds one rank and the trace has {len(order)}: give a folder, or --ranks",
                ExitCode.USAGE,
            )
        targets = [Path(path)]
    else:
        targets = [Path(path) / name for name in rank_file_names(order)]
    world = _world_size(trace, len(order))
    job = trace.meta.job
    dist = job.get("distributedInfo")
    flags = job.get("kineto")
    extra = {
        "dist": {k: v for k, v in dist.items() if k not in ("rank", "world_size")} if isinstance(dist, dict) else {},
        "flags": {k: v for k, v in flags.items() if k not in _OWN_KEYS} if isinstance(flags, dict) else {},
    }
    info = record_counts_info(trace)
    raw_base = flags.get("baseTimeNanoseconds") if isinstance(flags, dict) else None
    source_base = raw_base if type(raw_base) is int and raw_base >= 0 else None
    raw_no_stream = job.get("kineto_no_stream")
    no_stream = raw_no_stream if type(raw_no_stream) is int else NO_STREAM
    events = flows = size = done = 0
    total = sum(trace.table(name).height for name in _EVENT_TABLES)

    def advance(rows: int) -> None:
        nonlocal done
        done += rows
        progress(min(done, total), total)

    for k, ((node, rank), target) in enumerate(zip(order, targets, strict=True)):
        with _open(target) as out:
            data = replace(_RankData.of(trace, node, rank, source_base), no_stream=no_stream)
            written = _write_rank(out, data, world, extra, info if k == 0 else [], advance)
        events, flows = events + written[0], flows + written[1]
        size += target.stat().st_size
    return KinetoExport(files=tuple(targets), events=events, flows=flows, bytes=size)


def rank_file_names(order: list[tuple[str, int]]) -> list[str]:
    """`rank<N>.json` per (node, rank); `<node>-rank<N>.json` where two nodes share a rank number."""
    ranks = [r for _, r in order]
    return [
        f"rank{r}.json" if ranks.count(r) == 1 else f"{re.sub(r'[^A-Za-z0-9_.-]', '_', n)}-rank{r}.json"
        for n, r in order
    ]


def record_counts_info(trace: Trace) -> list[str]:
    """Kineto's `Record counts:` INFO line of the trace's kineto_* health counts (records Kineto dropped), which
    the importer reads back into health; [] when there are none. A folder export writes it in its first file."""
    counts = {k.removeprefix("kineto_"): v for k, v in sorted(trace.meta.health.items()) if k.startswith("kineto_")}
    if not counts:
        return []
    return ["Record counts: " + ", ".join(f"{name.replace('_', ' ')} = {n}" for name, n in counts.items())]


def _world_size(trace: Trace, ranks: int) -> int:
    world = trace.meta.job.get("world_size")
    return world if isinstance(world, int) and world >= ranks else ranks


def _gzip_writer(raw: IO[bytes]) -> IO[bytes]:
    """A gzip stream over `raw`: ISA-L's at level 2 when the optional `isal` package is installed (17x faster than
    zlib's level 6, files 30 % larger: 0.2 s against 3.9 s per 150 MB of events), else zlib's at level 6."""
    try:
        igzip = importlib.import_module("isal.igzip")
    except ImportError:
        return gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=raw, mtime=0)  # type: ignore[return-value]
    writer: IO[bytes] = igzip.GzipFile(filename="", mode="wb", compresslevel=2, fileobj=raw, mtime=0)
    return writer


@contextmanager
def _open(path: Path) -> Iterator[IO[bytes]]:
    with atomic_file(path) as f:  # the file appears whole or not at all
        if path.name.lower().endswith(".gz"):
            with _gzip_writer(f) as gz:
                yield gz
        else:
            yield f


@dataclass(frozen=True)
class _RankData:
    """One rank's rows of every table ktrace writes to Kineto, and the file's base time."""

    node: str
    rank: int
    tables: dict[str, pl.DataFrame]
    base_ns: int
    no_stream: int = NO_STREAM
    """The `stream` of a sync on no stream (the source Kineto file's, meta.job["kineto_no_stream"], else -1)."""

    @classmethod
    def of(cls, trace: Trace, node: str, rank: int, source_base: int | None = None) -> _RankData:
        mine = (pl.col("node") == node) & (pl.col("rank") == rank)
        tables = {name: trace.table(name).filter(mine) for name in (*_EVENT_TABLES, "threads", "devices")}
        firsts = [int(f["start_ns"].min()) for n, f in tables.items() if f.height and "start_ns" in f.columns]  # type: ignore[arg-type]
        if tables["allocations"].height:
            firsts.append(int(tables["allocations"]["ts_ns"].min()))  # type: ignore[arg-type]
        if not firsts:
            return cls(node, rank, tables, 0)
        lasts = [int(f["start_ns"].max()) for f in tables.values() if f.height and "start_ns" in f.columns]  # type: ignore[arg-type]
        lasts += [int(tables["allocations"]["ts_ns"].max())] if tables["allocations"].height else []  # type: ignore[arg-type]
        if source_base is not None and source_base <= min(firsts) and max(lasts) - source_base < MAX_OFFSET_NS:
            return cls(node, rank, tables, source_base)  # the Kineto file's own: HTA then reads the same floats
        return cls(node, rank, tables, max((min(firsts) // 1_000_000_000) * 1_000_000_000, 0))


def _write_rank(
    out: IO[bytes],
    data: _RankData,
    world: int,
    extra: dict[str, dict[str, Any]],
    info: list[str],
    advance: Callable[[int], None],
) -> tuple[int, int]:
    """Write one rank's file, calling `advance` with the rows of each slice written; (events, flows) written."""
    t = data.tables
    header = {
        "schemaVersion": 1,
        "deviceProperties": device_properties(t["devices"]),
        "distributedInfo": {"rank": data.rank, "world_size": world, **extra["dist"]},
        **extra["flags"],
        "hostname": data.node,
    }
    out.write(_json(header)[:-1] + b', "traceEvents": [\n')
    events = flows = 0

    def emit(lines: pl.Series) -> int:
        # each line and ",\n" written by polars (4x a Python join); the Trace span, always last, closes the list
        if lines.len():
            frame = pl.DataFrame({"line": lines})
            frame.write_csv(out, include_header=False, quote_style="never", line_terminator=",\n")
        return lines.len()

    base = data.base_ns
    kernels = t["kernels"].join(
        t["devices"].select("device", "sm_count").unique("device"), on="device", how="left", suffix="_dev"
    )
    # CPU events first, as PyTorch writes them: HTA takes the GPU event at index 0 of the file for "no correlated
    # event" (its launch query wants index_correlation > 0), so a kernel written first loses its launch there
    writers: tuple[tuple[pl.DataFrame, Callable[[pl.DataFrame, int], pl.Series]], ...] = (
        (t["ranges"], range_lines),
        (t["ops"], op_lines),
        (t["api"], api_lines),
        (t["allocations"], allocation_lines),
        (kernels, kernel_lines),
        (t["memory"], memory_lines),
        (t["syncs"], partial(sync_lines, no_stream=data.no_stream)),
    )
    for frame, lines in writers:
        for part in _slices(frame):
            events += emit(lines(part, base))
            advance(part.height)
    gpu = pl.concat([t[n].select("start_ns", "device", "stream", "correlation_id") for n in ("kernels", "memory")])
    for api_part in _slices(t["api"].select("start_ns", "pid", "tid", "correlation_id")):
        flows += emit(flow_lines(api_part, gpu, base))
    events += emit(metadata_lines(t)) + 1
    out.write(trace_span(data))
    trailer: dict[str, Any] = {"INFO": info} if info else {}
    trailer |= {"traceName": f"rank{data.rank}", "displayTimeUnit": "ms", "baseTimeNanoseconds": base}
    out.write(b"\n], " + _json(trailer)[1:] + b"\n")
    return events, flows


def _json(value: Any) -> bytes:
    """The header's JSON with a space after each colon as PyTorch writes it: HTA finds a file's rank by the text
    `"rank": N` (a regular expression that wants the space), not by parsing."""
    return json.dumps(value, ensure_ascii=False).encode()


def _slices(frame: pl.DataFrame) -> Iterator[pl.DataFrame]:
    for offset in range(0, frame.height, CHUNK_ROWS):
        yield frame.slice(offset, CHUNK_ROWS)


def device_properties(devices: pl.DataFrame) -> list[dict[str, Any]]:
    """Kineto's `deviceProperties` of the devices table (only what the store knows: no invented limits)."""
    keys = {
        "device": "id",
        "name": "name",
        "memory_bytes": "totalGlobalMem",
        "compute_major": "computeMajor",
        "compute_minor": "computeMinor",
        "sm_count": "numSms",
    }
    rows = (
        devices.unique("device", keep="first")
        .sort("device")
        .select(list(keys))
        .with_columns(pl.col("name").cast(pl.String))
    )
    return [{keys[k]: v for k, v in row.items() if v is not None} for row in rows.iter_rows(named=True)]


def trace_span(data: _RankData) -> bytes:
    """Kineto's `Trace` span of the profiling window (the rank's first to last time; empty at the base when the rank
    has no spans)."""
    frames = [f for f in data.tables.values() if f.height and "end_ns" in f.columns]
    start = min((int(f["start_ns"].min()) for f in frames), default=data.base_ns)  # type: ignore[arg-type]
    end = max((int(f["end_ns"].max()) for f in frames), default=start)  # type: ignore[arg-type]

    def us(ns: int) -> str:
        return f"{ns // 1000}.{ns % 1000:03d}"

    return (
        '{"ph":"X","cat":"Trace","name":"PyTorch Profiler (0)","pid":"Spans","tid":"PyTorch Profiler",'
        f'"ts":{us(start - data.base_ns)},"dur":{us(end - start)},"args":{{"Op count":0}}}}'
    ).encode()


def left_out(trace: Trace) -> str | None:
    """One line naming what the trace has that Kineto has no slot for, and what it holds otherwise (None when
    nothing is lost)."""
    lost: list[str] = []
    changed: list[str] = []

    def count(into: list[str], n: Any, what: str) -> None:
        if n:
            into.append(what.format(f"{n:,}"))

    count(lost, trace.counters.height, "{} counter values")
    count(lost, trace.kernels["submitted_ns"].is_not_null().sum(), "{} kernel submit times")
    count(lost, trace.devices["uuid"].is_not_null().sum(), "{} device UUIDs")
    count(lost, trace.ranges["correlation_id"].is_not_null().sum(), "{} range correlation ids")
    dynamic = trace.kernels["dynamic_shared_bytes"].is_not_null().sum()
    count(changed, dynamic, "dynamic shared memory added into 'shared memory' ({} kernels)")
    domain = trace.ranges["domain"].cast(pl.String)
    others = sorted(set(domain.filter(~domain.is_in(["profiler_step", "user_annotation", "gpu_user_annotation"]))))
    if others:
        changed.append(f"range domains {', '.join(others)} written as user_annotation")
    parts = ([f"Kineto has no slot for {', '.join(lost)}: left out"] if lost else []) + changed
    return "; ".join(parts) if parts else None
