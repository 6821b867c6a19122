"""Chrome JSON export (legacy trace-event format) for tools that read only JSON (perfetto.md §4).

Times are µs relative to the trace start written as exact "%d.%03d" decimals (epoch µs in a double would lose
precision). Each rank is a process (its threads: API calls, ranges, ops; a "Steps" pseudo-thread); each GPU of a rank
is a pseudo-process placed after it with one pseudo-thread per stream. Launch->run flows are v1 `s`/`f` pairs with
`"bp":"e"`; counters are `C` events; process/thread names and sort order are `M` events.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
from numpy.typing import NDArray

from ktrace.exporters.background_writes import BackgroundWriter, streamed_output
from ktrace.exporters.chrome_compiled_lines import (
    COMPILED_MIN_ROWS,
    Formatting,
    TextBlob,
    flow_lines_prepared,
    slice_lines_prepared,
    warm_compiled,
)
from ktrace.exporters.chrome_layout import LANE_TID, SPECIAL_TIDS, ChromeLayout
from ktrace.exporters.chrome_slice_lines import COLUMNS, NameTokens, flow_lines, slice_lines
from ktrace.exporters.perfetto_slice_windows import RankSlices
from ktrace.exporters.perfetto_slices import STREAM_KINDS
from ktrace.exporters.perfetto_tracks import process_name, process_order
from ktrace.exporters.track_layout import allocation_counters, counter_title
from ktrace.model.errors import ProgressFn, no_progress
from ktrace.model.schema import LAUNCH_CONFIG, NODE_RANK
from ktrace.model.trace import Trace

SEP = ",\n"
"""Between two event lines."""
CHUNK_ROWS = 50_000
"""Event lines formatted at a time: polars' intermediates cost ~1.2 KB a line in flight (200,000 a chunk: 370 MB
above the opened store on 1 M kernels, 50,000: 194 MB, no slower). The bytes do not depend on it."""
FLOW_ROWS = 16_384
"""Flow ends formatted at a time: each batch's lines (~100 B each) wait in the writer's queue, ~1.6 MB."""
WINDOW_ROWS = 50_000
"""Rows each span table gives at most to a window of a rank's slices (perfetto_slice_windows)."""


def _line(template: str, *exprs: pl.Expr | str) -> pl.Expr:
    """An event line (SEP first) by _fmt."""
    return _fmt(SEP + template, *exprs)


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


def _args(frame: pl.DataFrame) -> pl.Series:
    """Each slice's args object: each kind's formatted on its own rows only (a when/then chain formatted every
    kind's on every row: ~2x the CPU)."""

    def num(c: str) -> pl.Expr:
        return pl.col(c).cast(pl.String).fill_null("null")

    def text(c: str) -> pl.Expr:
        return pl.concat_str(pl.lit('"'), pl.col(c), pl.lit('"')).fill_null("null")

    kind = frame["kind"]
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
    out = pl.select(pl.repeat("{}", frame.height, dtype=pl.String)).to_series()
    for rows, args in ((kind == "kernel", kernel), (kind == "memory", memory), (kind.is_in(["api", "sync"]), corr)):
        at = np.flatnonzero(rows.to_numpy())
        if at.size:
            used = frame.select(sorted(set(args.meta.root_names())))  # gather only the columns it reads
            out = out.scatter(at, used[at].select(args).to_series())
    return out


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


def _slice_lines(placed: pl.DataFrame, t0: int) -> pl.Series:
    rel = pl.col("start_ns") - t0
    return placed.with_columns(_quoted(placed["name"]).alias("qname"), _args(placed).alias("args")).select(
        _line(
            '{"ph":"X","cat":"%s","name":%s,"pid":%s,"tid":%s,"ts":%s,"dur":%s,"args":%s}',
            pl.col("kind"),
            pl.col("qname"),
            pl.col("out_pid"),
            pl.col("out_tid"),
            _us(rel),
            _us(pl.col("end_ns") - pl.col("start_ns")),
            pl.col("args"),
        )
    )[:, 0]


class _Lines:
    """Writes event lines that each begin with SEP, but the file's first: the same bytes as the lines joined by SEP.

    A batch of lines goes out from its Arrow buffer (the lines back to back), never joined into one str, encoded
    and copied again: ~4 copies of ~60 MB per chunk of slices saved, and ~0.1 s CPU.
    """

    def __init__(self, out: BackgroundWriter) -> None:
        self.out = out
        self.skip = len(SEP)

    def write(self, lines: pl.Series) -> None:
        """Append these lines (none: nothing)."""
        if not lines.len():
            return
        text = lines.to_arrow()
        if text.type != pa.large_string():
            text = text.cast(pa.large_string())
        _, offsets, data = text.buffers()
        if data is None:  # every line null: nothing to write
            return
        bounds = np.frombuffer(offsets, np.int64)[[text.offset, text.offset + len(text)]]
        self.out.write(memoryview(data)[int(bounds[0]) + self.skip : int(bounds[1])])
        self.skip = 0

    def write_bytes(self, data: bytes | bytearray | memoryview) -> None:
        """Append lines already encoded, each SEP first (none: nothing)."""
        if not len(data):
            return
        self.out.write(memoryview(data)[self.skip :] if self.skip else data)
        self.skip = 0

    def write_later(self, lines: Formatting) -> None:
        """Append lines that the writer's thread formats (the compiled kernel, in a buffer from the output's pool
        that goes back there once written) while the next ones are prepared (none: nothing)."""
        if lines.empty:
            return
        skip, self.skip = self.skip, 0

        def job() -> tuple[memoryview, NDArray[np.uint8] | None]:
            view, buffer = lines.run()
            return view[skip:], buffer

        self.out.write_job(job)

    def write_texts(self, lines: list[str]) -> None:
        """Append a few lines given as str (without SEP)."""
        self.write(pl.Series([SEP + line for line in lines], dtype=pl.String))


class _Export:
    """One Chrome JSON export in progress: its lines, process ids and counts."""

    def __init__(self, trace: Trace, lines: _Lines, t0: int, folder: Path) -> None:
        self.trace, self.lines, self.t0 = trace, lines, t0
        self.folder = folder
        """The output's folder: the layout's temporary files go there (spill.Spill)."""
        self.pids = _Pids()
        self.counts = {"slices": 0, "flows": 0, "counters": 0}
        self.names = NameTokens()
        self.name_texts = TextBlob()
        """The names' texts for the compiled formatter (chrome_compiled_lines), as `names` adds them."""
        self.kernel_load: threading.Thread | None = None
        """Loads the compiled formatter while the first large rank is laid out."""

    def process(self, node: str, rank: int) -> None:
        """A rank's (or a node's) metadata, counters, slices (a chunk at a time, in file order), then flows."""
        trace, lines, t0 = self.trace, self.lines, self.t0
        pid = self.pids.process(process_name(trace, node, rank))
        counters = _counter_lines(trace, node, rank, pid, t0)
        self.counts["counters"] += counters.len()
        slices = RankSlices(trace, node, rank, WINDOW_ROWS, self.folder) if rank != NODE_RANK else None
        load = None  # the compiled formatter's load, for a rank it formats
        if slices is not None and slices.height >= COMPILED_MIN_ROWS:
            load = self.kernel_load = self.kernel_load or warm_compiled()
        layout = ChromeLayout(trace, node, rank, slices, self.folder) if slices is not None and slices.height else None
        if layout is not None:
            devices = layout.devices
            gpu_pid = {
                d: self.pids.process(f"rank {rank} · GPU {d}" if d >= 0 else f"rank {rank} · GPU") for d in devices
            }
            layout.place(pid, gpu_pid)
            self._name_threads(node, rank, layout)
        lines.write_texts(self.pids.take_meta())
        lines.write(counters)
        if slices is None or layout is None:
            return
        compiled = load is not None
        if load is not None:
            load.join()  # numba's first call for a signature is not raced
        pool = lines.out.pool
        row = 0
        for chunk in slices.chunks(CHUNK_ROWS, COLUMNS):  # never the rank's lines in one string
            out_pid, out_tid = layout.pids_tids(chunk, row)
            if compiled:  # the rows' places as numpy columns: no frame is built to hold them
                places = (out_pid, out_tid)
                lines.write_later(slice_lines_prepared(chunk, t0, self.names, self.name_texts, pool, places))
            else:
                placed = chunk.with_columns(out_pid=out_pid, out_tid=out_tid)
                fast = slice_lines(placed, t0, self.names)
                if fast is not None:
                    lines.write_bytes(fast)
                else:  # a value chrome_lines refuses, or a pyarrow without binary views from buffers
                    lines.write(_slice_lines(placed, t0))
            row += chunk.height
        first = self.counts["flows"] + 1
        for kind, k, f_pid, f_tid, ts in layout.flows(FLOW_ROWS):
            fid = first + k + np.arange(f_pid.shape[0])
            if compiled:
                lines.write_later(flow_lines_prepared(kind, fid, f_pid, f_tid, ts - t0, pool))
            else:
                lines.write_bytes(flow_lines(kind, fid, f_pid, f_tid, ts - t0))
        self.counts["slices"] += slices.height
        self.counts["flows"] += layout.flow_count

    def _name_threads(self, node: str, rank: int, layout: ChromeLayout) -> None:
        """thread_name and thread_sort_index of every thread with slices, in (pid, tid) order."""
        mine = (pl.col("rank") == rank) & (pl.col("node") == node)
        threads = {
            (int(p), int(t)): str(nm)
            for p, t, nm in self.trace.threads.filter(mine)
            .select("pid", "tid", pl.col("name").cast(pl.String))
            .drop_nulls()
            .iter_rows()
        }
        for order, (p, t, (k, real_pid, real_tid)) in enumerate(layout.threads()):
            base, lane = t % LANE_TID, t // LANE_TID
            if k in SPECIAL_TIDS:
                label = SPECIAL_TIDS[k][1]
            elif k in STREAM_KINDS:
                label = f"Stream {base}"
            else:
                label = f"{threads.get((real_pid, real_tid), 'thread')} [{real_tid}]"  # type: ignore[arg-type]
            self.pids.thread(p, t, label + (f" (overlap {lane})" if lane else ""), order)


def _counter_lines(trace: Trace, node: str, rank: int, pid: int, t0: int) -> pl.Series:
    mine = (pl.col("rank") == rank) & (pl.col("node") == node)
    rows = trace.counters.filter(mine)
    rows = rows.select("ts_ns", pl.col("metric").cast(pl.String), pl.col("instance").fill_null(-1), "value")
    memory = allocation_counters(trace.allocations.filter(mine))  # the allocator's memory timeline, as in Perfetto
    rows = pl.concat([rows, memory.drop("node", "rank")]) if memory.height else rows
    keys = rows.select("metric", "instance").unique()
    titles = [json.dumps(counter_title(m, i)) for m, i in keys.iter_rows()]
    titled = keys.with_columns(pl.Series("title", titles, pl.String))
    rows = rows.join(titled, on=["metric", "instance"], maintain_order="left")
    value = pl.when(pl.col("value").is_finite()).then(pl.col("value").cast(pl.String)).otherwise(pl.lit("null"))
    return rows.sort("ts_ns", maintain_order=True).select(  # values at one time in table order, every run
        _line(
            '{"ph":"C","name":%s,"pid":%s,"ts":%s,"args":{"value":%s}}',
            "title",
            pl.lit(pid),
            _us(pl.col("ts_ns") - t0),
            value.fill_null("null"),
        )
    )[:, 0]  # JSON has no inf or nan


def export_chrome_json(trace: Trace, path: str | Path, *, progress: ProgressFn = no_progress) -> dict[str, int]:
    """Write `trace` as Chrome trace-event JSON (gzip when `path` ends in .gz); returns event counts.

    Streamed: a rank's slices are read window by window (perfetto_slice_windows) twice, once to place them
    (chrome_layout: pids, tids, lanes, flows) and once to write them CHUNK_ROWS lines at a time; what the layout
    notes per slice, per launch->run pair and per launch correlation id goes to unnamed temporary files in the
    output's folder (spill), read back a chunk at a time: memory holds no frame of the rank and, where the ids are
    dense, nothing per kernel.
    """
    span = trace.span_ns()
    t0 = min(span[0], int(trace.counters["ts_ns"].min() or span[0])) if span else 0  # type: ignore[arg-type]
    with streamed_output(path) as out:  # formatting the next lines overlaps writing (and gzip)
        out.write(b'{"traceEvents":[\n')
        export = _Export(trace, _Lines(out), t0, Path(path).parent)
        order = process_order(trace)
        for k, (node, rank) in enumerate(order):
            export.process(node, rank)
            progress(k + 1, len(order))
        meta = json.dumps({"source": trace.meta.source, "trace_start_ns": t0, "exporter": "ktrace"})
        out.write(f'\n],"displayTimeUnit":"ns","metadata":{meta}}}\n'.encode())
    return export.counts
