"""Chrome JSON export (legacy trace-event format) for tools that read only JSON (perfetto.md §4).

Times are µs relative to the trace start written as exact "%d.%03d" decimals (epoch µs in a double would lose
precision). Each rank is a process (its threads: API calls, ranges, ops; a "Steps" pseudo-thread); each GPU of a rank
is a pseudo-process placed after it with one pseudo-thread per stream. Launch->run flows are v1 `s`/`f` pairs with
`"bp":"e"`; counters are `C` events; process/thread names and sort order are `M` events.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import polars as pl

from ktrace.exporters.perfetto_slices import STREAM_KINDS, THREAD_KINDS, launch_pairs, rank_slices
from ktrace.exporters.perfetto_tracks import process_name, process_order
from ktrace.exporters.track_layout import allocation_counters, counter_title, overlap_lanes
from ktrace.model.errors import ProgressFn, no_progress
from ktrace.model.outputs import atomic_file
from ktrace.model.schema import LAUNCH_CONFIG, NODE_RANK
from ktrace.model.trace import Trace

CHUNK_ROWS = 200_000
"""Event lines turned into one string at a time (a rank's lines at once took ~3x their size in memory)."""
LANE_TID = 100_000_000
"""tid offset of an overflow pseudo-thread for slices that overlap without nesting."""
_SPECIAL_TIDS = {
    "step": (0, "Steps"),
    "sync": (1_000_000, "Synchronization"),
    "gpu_range": (1_000_001, "GPU annotations"),
}


def _fmt(template: str, *exprs: pl.Expr | str) -> pl.Expr:
    """pl.format with literal braces: `%s` marks each placeholder."""
    return pl.format(template.replace("{", "{{").replace("}", "}}").replace("%s", "{}"), *exprs)


def _us(col: pl.Expr) -> pl.Expr:
    """ns (relative, >= 0) -> exact µs decimal text."""
    return pl.format("{}.{}", col // 1000, (col % 1000).cast(pl.String).str.zfill(3))


def _quoted(series: pl.Series) -> pl.Series:
    """JSON string literals of a string column, escaping each distinct value once."""
    uniq = series.drop_nulls().unique()
    return series.replace_strict(uniq, [json.dumps(s) for s in uniq], default="null", return_dtype=pl.String)


def _args(frame: pl.DataFrame) -> pl.Expr:
    def num(c: str) -> pl.Expr:
        return pl.col(c).cast(pl.String).fill_null("null")

    def text(c: str) -> pl.Expr:
        return pl.concat_str(pl.lit('"'), pl.col(c), pl.lit('"')).fill_null("null")

    kind = pl.col("kind")
    kernel = _fmt(
        '{"grid":[%s,%s,%s],"block":[%s,%s,%s],"registers_per_thread":%s,"static_shared_bytes":%s,'
        '"dynamic_shared_bytes":%s,"correlation_id":%s}',
        *[num(c) for c in (*LAUNCH_CONFIG, "correlation_id")],
    )
    memory = _fmt(
        '{"bytes":%s,"copy_kind":%s,"src_kind":%s,"dst_kind":%s,"correlation_id":%s}',
        num("bytes"),
        text("copy_kind"),
        text("src_kind"),
        text("dst_kind"),
        num("correlation_id"),
    )
    corr = _fmt('{"correlation_id":%s}', num("correlation_id"))
    return (
        pl.when(kind == "kernel")
        .then(kernel)
        .when(kind == "memory")
        .then(memory)
        .when(kind.is_in(["api", "sync"]))
        .then(corr)
        .otherwise(pl.lit("{}"))
    )


class _Pids:
    def __init__(self) -> None:
        self.next = 1
        self.meta: list[str] = []
        self.sort = 0

    def take_meta(self) -> list[str]:
        out, self.meta = self.meta, []
        return out

    def process(self, name: str) -> int:
        pid, self.next = self.next, self.next + 1
        self.sort += 1
        self.meta.append(f'{{"ph":"M","pid":{pid},"name":"process_name","args":{{"name":{json.dumps(name)}}}}}')
        self.meta.append(f'{{"ph":"M","pid":{pid},"name":"process_sort_index","args":{{"sort_index":{self.sort}}}}}')
        return pid

    def thread(self, pid: int, tid: int, name: str, order: int) -> None:
        self.meta.append(
            f'{{"ph":"M","pid":{pid},"tid":{tid},"name":"thread_name","args":{{"name":{json.dumps(name)}}}}}'
        )
        self.meta.append(
            f'{{"ph":"M","pid":{pid},"tid":{tid},"name":"thread_sort_index","args":{{"sort_index":{order}}}}}'
        )


def _places(pids: _Pids, trace: Trace, node: str, rank: int, cpu_pid: int, slices: pl.DataFrame) -> pl.DataFrame:
    """pid/tid of every slice (GPU work on a per-device pseudo-process), with overflow lanes for bad nesting."""
    kind = pl.col("kind")
    devices = sorted(set(slices.filter(~kind.is_in([*THREAD_KINDS, "step"]))["device"].to_list()))
    gpu_pid = {d: pids.process(f"rank {rank} · GPU {d}" if d >= 0 else f"rank {rank} · GPU") for d in devices}
    tid = pl.col("tid").fill_null(0)
    for k, (t, _) in _SPECIAL_TIDS.items():
        tid = pl.when(kind == k).then(pl.lit(t, pl.Int64)).otherwise(tid)
    tid = pl.when(kind.is_in(STREAM_KINDS)).then(pl.col("stream")).otherwise(tid)
    pid = (
        pl.when(kind.is_in([*THREAD_KINDS, "step"]))
        .then(pl.lit(cpu_pid, pl.Int64))
        .otherwise(pl.col("device").replace_strict(gpu_pid, default=cpu_pid, return_dtype=pl.Int64))
    )
    placed = slices.with_columns(pid.alias("out_pid"), tid.alias("out_tid"))
    key = placed.select(pl.struct("out_pid", "out_tid").rank("dense").cast(pl.Int64))[:, 0].to_numpy()
    lanes = overlap_lanes(key, placed["start_ns"].to_numpy(), placed["end_ns"].to_numpy())
    placed = placed.with_columns((pl.col("out_tid") + pl.Series(lanes) * LANE_TID).alias("out_tid"))
    threads = {
        (int(p), int(t)): str(nm)
        for p, t, nm in trace.threads.filter((pl.col("rank") == rank) & (pl.col("node") == node))
        .select("pid", "tid", pl.col("name").cast(pl.String))
        .drop_nulls()
        .iter_rows()
    }
    names = (
        placed.select("out_pid", "out_tid", "kind", "pid", "tid")
        .unique(["out_pid", "out_tid"])
        .sort(["out_pid", "out_tid"])
    )
    for order, (p, t, k, real_pid, real_tid) in enumerate(names.iter_rows()):
        base, lane = t % LANE_TID, t // LANE_TID
        if k in _SPECIAL_TIDS:
            label = _SPECIAL_TIDS[k][1]
        elif k in STREAM_KINDS:
            label = f"Stream {base}"
        else:
            label = f"{threads.get((real_pid, real_tid), 'thread')} [{real_tid}]"
        pids.thread(p, t, label + (f" (overlap {lane})" if lane else ""), order)
    return placed


def _slice_lines(placed: pl.DataFrame, t0: int) -> pl.Series:
    rel = pl.col("start_ns") - t0
    return placed.with_columns(_quoted(placed["name"]).alias("qname")).select(
        _fmt(
            '{"ph":"X","cat":"%s","name":%s,"pid":%s,"tid":%s,"ts":%s,"dur":%s,"args":%s}',
            pl.col("kind"),
            pl.col("qname"),
            pl.col("out_pid"),
            pl.col("out_tid"),
            _us(rel),
            _us(pl.col("end_ns") - pl.col("start_ns")),
            _args(placed),
        )
    )[:, 0]


class _Lines:
    """Writes groups of event lines, ",\n" between lines: the same bytes as the groups joined as one."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.sep = b""

    def write(self, lines: pl.Series) -> None:
        """Append these lines (none: nothing)."""
        if lines.len():
            self.out.write(self.sep + lines.str.join(",\n").item().encode())
            self.sep = b",\n"


def _write_flows(lines: _Lines, placed: pl.DataFrame, t0: int, first_id: int) -> int:
    """The rank's flow lines (all `s`, then all `f`), a chunk at a time; returns the flows written."""
    s, f, n = _flow_lines(placed, t0, first_id)
    for half in (s, f):
        for a in range(0, half.len(), CHUNK_ROWS):
            lines.write(half.slice(a, CHUNK_ROWS))
    return n


def _flow_lines(placed: pl.DataFrame, t0: int, first_id: int) -> tuple[pl.Series, pl.Series, int]:
    """s/f pairs; a GPU record that starts before its launch (clock skew) gets none: JSON flows need f.ts >= s.ts."""
    pairs = launch_pairs(placed).filter(pl.col("gpu_start") >= pl.col("launch_start"))
    ids = pl.int_range(first_id, first_id + pairs.height, dtype=pl.Int64, eager=True)
    where = placed.select("row", "out_pid", "out_tid")
    pairs = (
        pairs.with_columns(ids.alias("fid"))
        .join(where.rename({"row": "launch_row", "out_pid": "lp", "out_tid": "lt"}), on="launch_row")
        .join(where.rename({"row": "gpu_row", "out_pid": "gp", "out_tid": "gt"}), on="gpu_row")
    )
    s = pairs.select(
        _fmt(
            '{"ph":"s","cat":"launch","name":"launch","id":%s,"pid":%s,"tid":%s,"ts":%s}',
            "fid",
            "lp",
            "lt",
            _us(pl.col("launch_start") - t0),
        )
    )[:, 0]
    f = pairs.select(
        _fmt(
            '{"ph":"f","bp":"e","cat":"launch","name":"launch","id":%s,"pid":%s,"tid":%s,"ts":%s}',
            "fid",
            "gp",
            "gt",
            _us(pl.col("gpu_start") - t0),
        )
    )[:, 0]
    return s, f, pairs.height


def _counter_lines(trace: Trace, node: str, rank: int, pid: int, t0: int) -> pl.Series:
    mine = (pl.col("rank") == rank) & (pl.col("node") == node)
    rows = trace.counters.filter(mine)
    rows = rows.select("ts_ns", pl.col("metric").cast(pl.String), pl.col("instance").fill_null(-1), "value")
    memory = allocation_counters(trace.allocations.filter(mine))  # the allocator's memory timeline, as in Perfetto
    rows = pl.concat([rows, memory.drop("node", "rank")]) if memory.height else rows
    keys = rows.select("metric", "instance").unique()
    titles = [json.dumps(counter_title(m, i)) for m, i in keys.iter_rows()]
    rows = rows.join(keys.with_columns(pl.Series("title", titles, pl.String)), on=["metric", "instance"])
    value = pl.when(pl.col("value").is_finite()).then(pl.col("value").cast(pl.String)).otherwise(pl.lit("null"))
    return rows.sort("ts_ns").select(
        _fmt(
            '{"ph":"C","name":%s,"pid":%s,"ts":%s,"args":{"value":%s}}',
            "title",
            pl.lit(pid),
            _us(pl.col("ts_ns") - t0),
            value.fill_null("null"),
        )
    )[:, 0]  # JSON has no inf or nan


@contextmanager
def _open(path: str | Path) -> Iterator[IO[bytes]]:
    with atomic_file(path) as f:  # the file appears whole or not at all (Ctrl-C, disk full)
        if str(path).endswith(".gz"):
            with gzip.GzipFile(filename=str(path), mode="wb", compresslevel=6, fileobj=f) as gz:
                yield gz  # type: ignore[misc]
        else:
            yield f


def export_chrome_json(trace: Trace, path: str | Path, *, progress: ProgressFn = no_progress) -> dict[str, int]:
    """Write `trace` as Chrome trace-event JSON (gzip when `path` ends in .gz); returns event counts.

    Streamed one process at a time: memory holds one rank's slices (not yet its lines: those are made and written
    CHUNK_ROWS at a time), not the whole file.
    """
    span = trace.span_ns()
    t0 = min(span[0], int(trace.counters["ts_ns"].min() or span[0])) if span else 0  # type: ignore[arg-type]
    pids = _Pids()
    counts = {"slices": 0, "flows": 0, "counters": 0}
    order = process_order(trace)
    with _open(path) as out:
        out.write(b'{"traceEvents":[\n')
        lines = _Lines(out)
        for k, (node, rank) in enumerate(order):
            pid = pids.process(process_name(trace, node, rank))
            counters = _counter_lines(trace, node, rank, pid, t0)
            counts["counters"] += counters.len()
            slices = rank_slices(trace, node, rank) if rank != NODE_RANK else None
            if slices is None or not slices.height:
                lines.write(pl.Series(pids.take_meta(), dtype=pl.String))
                lines.write(counters)
            else:
                placed = _places(pids, trace, node, rank, pid, slices)
                del slices
                lines.write(pl.Series(pids.take_meta(), dtype=pl.String))
                lines.write(counters)
                for a in range(0, placed.height, CHUNK_ROWS):  # never the rank's lines in one string
                    lines.write(_slice_lines(placed.slice(a, CHUNK_ROWS), t0))
                counts["flows"] += _write_flows(lines, placed, t0, counts["flows"] + 1)
                counts["slices"] += placed.height
            progress(k + 1, len(order))
        meta = json.dumps({"source": trace.meta.source, "trace_start_ns": t0, "exporter": "ktrace"})
        out.write(f'\n],"displayTimeUnit":"ns","metadata":{meta}}}\n'.encode())
    return counts
