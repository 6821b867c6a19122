"""Native Perfetto export (.pftrace[.gz]): rank processes, thread and GPU stream tracks, flows, counters, findings.

Layout (perfetto.md §1.3): one process track per rank ("rank R · host (pid P)") with its thread tracks (CUDA API
calls, NVTX ranges and framework ops, nested), a "Steps" track (ProfilerStep ranges), one "GPU d · model" group per
device holding a track per stream (kernels, memcpy, memset), a sync track and GPU-side annotations, and the rank's
counter tracks; node-level counters (rank -1) go on a "host" process per node. Every launch has a flow arrow to
each GPU record it caused. Descriptors are pb2 objects; events are encoded column-wise (perfetto_encoder).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (
    BuiltinClock,
    ClockSnapshot,
    DebugAnnotationName,
    EventName,
    InternedData,
    TracePacket,
    TrackEvent,
)

from ktrace.exporters import perfetto_encoder as enc
from ktrace.exporters.background_writes import BackgroundWriter, streamed_output
from ktrace.exporters.findings import Finding, finding_rows
from ktrace.exporters.perfetto_layout import TrackTree
from ktrace.exporters.perfetto_rank_layout import RankLayout
from ktrace.exporters.perfetto_slice_rows import (
    COMPILED_MIN_ROWS,
    Encoding,
    IntArg,
    SliceRows,
    StrArg,
    encode_numpy,
    split_rows,
    warm_compiled,
)
from ktrace.exporters.perfetto_slice_windows import RankSlices
from ktrace.exporters.perfetto_slices import ARG_INT_COLUMNS, ARG_KEYS
from ktrace.exporters.perfetto_tracks import process_name, process_order
from ktrace.exporters.track_layout import allocation_counters
from ktrace.model.errors import ExitCode, KtraceError, ProgressFn, no_progress
from ktrace.model.schema import NODE_RANK
from ktrace.model.trace import Trace

SEQ_CLEARED_AND_NEEDS = 3
CHUNK_ROWS = 200_000
"""Slices encoded per batch: bounds memory and paces the progress callback."""
JOB_ROWS = 50_000
"""Slices encoded per call of the compiled kernel (a chunk's share: the bytes do not depend on it); each waiting
call holds its inputs, ~150 bytes a slice."""
WRITE_COLUMNS = ("start_ns", "end_ns", "name", "kind", *ARG_KEYS)
"""The slice columns the writing pass reads: not pid, tid, device or stream, which the layout pass turned into each
slice's track code."""
WINDOW_ROWS = 50_000
"""Rows each span table gives at most to a window of a rank's slices (perfetto_slice_windows), ties at one start
aside: a window holds at most 8 such runs (one per table)."""


@dataclass
class PerfettoStats:
    """What an export wrote."""

    slices: int = 0
    flows: int = 0
    counters: int = 0
    instants: int = 0
    tracks: int = 0
    overlap_slices: int = 0
    """Slices moved to an "(overlap n)" track because they overlap others on their track without nesting."""
    bytes: int = 0


@dataclass
class _Sequence:
    seq: int
    names: dict[str, int] = field(default_factory=dict)


def frame_packet(packet: TracePacket) -> bytes:
    """One TracePacket as a `Trace.packet` field (concatenated frames form a valid Trace)."""
    body = packet.SerializeToString()
    return b"\x0a" + enc.varint_bytes(len(body)) + body


def export_perfetto(
    trace: Trace,
    path: str | Path,
    *,
    findings: Iterable[Finding] = (),
    progress: ProgressFn = no_progress,
    chunk_rows: int = CHUNK_ROWS,
) -> PerfettoStats:
    """Write `trace` as a native Perfetto protobuf trace (gzip-compressed when `path` ends in .gz).

    Args:
        trace: the trace (cut it first with ktrace.exporters.selection.select for a window or some ranks).
        path: output file, ".pftrace" or ".pftrace.gz".
        findings: rule findings (rule, severity, message, start_ns, end_ns, node, rank) drawn as instant events.
        progress: called with (rows written, total rows).
        chunk_rows: slices per encoded batch.

    Returns:
        Counts of what was written.

    Raises:
        KtraceError: the trace has times before 0 (Perfetto's timestamps are unsigned); nothing is written.
    """
    span = trace.span_ns()
    t0 = span[0] if span else 0
    if t0 < 0:
        raise KtraceError(
            f"the trace's times start before 0 (at {t0:,} ns), which Perfetto's timestamps (unsigned) cannot "
            "hold: export it with -f chrome (its times count from the trace's start)",
            ExitCode.BAD_INPUT,
        )
    order = process_order(trace)
    with streamed_output(path) as out:
        writer = _Writer(trace, progress, chunk_rows, Path(path).parent)
        writer.out = out
        out.write(frame_packet(_clock_snapshot(t0)))
        for seq, (node, rank) in enumerate(order, start=1):
            writer.process(seq, node, rank)
        writer.stats.instants = _write_findings(out, writer.tree, findings, len(order) + 1, t0)
        writer.stats.tracks = len(writer.tree.uuids)
    writer.stats.bytes = Path(path).stat().st_size
    progress(writer.total, writer.total)
    return writer.stats


class _Writer:
    """One export in progress: the track tree, the output, counts and the progress callback."""

    def __init__(self, trace: Trace, progress: ProgressFn, chunk_rows: int, folder: Path) -> None:
        self.trace, self.progress, self.chunk_rows = trace, progress, chunk_rows
        self.folder = folder
        """The output's folder: the layout's temporary files go there (spill.Spill)."""
        self.tree = TrackTree()
        self.stats = PerfettoStats()
        self.out: BackgroundWriter | None = None
        counts = trace.counts()
        self.total = sum(counts[t] for t in ("kernels", "memory", "syncs", "api", "ranges", "ops", "counters"))
        self.total += counts["allocations"] + trace.allocations["total_reserved"].drop_nulls().len()
        self.done = 0
        self.next_flow = 1
        self.kernel_load: threading.Thread | None = None
        """Loads the compiled encoder while the first large rank is laid out (perfetto_slice_rows.warm_compiled)."""

    def _advance(self, rows: int) -> None:
        self.done += rows
        self.progress(self.done, self.total)

    def process(self, seq: int, node: str, rank: int) -> None:
        """Write one process track (a rank, or a node's counters): descriptors, then its events on sequence seq."""
        assert self.out is not None
        trace, tree = self.trace, self.tree
        proc = tree.process(("process", node, rank), process_name(trace, node, rank), seq)
        slices = RankSlices(trace, node, rank, WINDOW_ROWS, self.folder) if rank != NODE_RANK else None
        load = None  # the compiled kernel's load, for a rank it encodes
        if slices is not None and slices.height >= COMPILED_MIN_ROWS:
            load = self.kernel_load = self.kernel_load or warm_compiled()
        layout = None
        if slices is not None and slices.height:
            layout = RankLayout(trace, node, rank, slices, tree, proc, self.folder)
        if layout is not None:
            self.stats.overlap_slices += int(layout.lane_rows.shape[0])
        counters = _counter_events(tree, proc, trace, node, rank)
        for p in tree.take_packets():
            self.out.write(frame_packet(p))
        self.out.write(frame_packet(_sequence_start(seq)))
        if slices is not None and layout is not None:
            self._slices(_Sequence(seq), slices, layout, load)
        if counters is not None:
            ts, ctrack, values = counters
            self.out.write(enc.encode(enc.counter_rows(seq, ts, ctrack, values), ts.shape[0]))
            self.stats.counters += ts.shape[0]
            self._advance(ts.shape[0])

    def _slices(self, state: _Sequence, slices: RankSlices, layout: RankLayout, load: threading.Thread | None) -> None:
        """The rank's slices, chunk by chunk in file order: each chunk's frame is let go once encoded; by the compiled
        kernel when `load` (its load) is given, else by numpy columns."""
        assert self.out is not None
        first_id = self.next_flow
        self.next_flow += layout.pairs
        self.stats.flows += layout.pairs
        compiled = load is not None
        if load is not None:
            load.join()  # numba's first call for a signature is not raced
        row = 0
        for chunk in slices.chunks(self.chunk_rows, WRITE_COLUMNS):
            track = layout.tracks(chunk, row)
            flows = layout.flows(chunk, first_id)
            head, batch = _encode_chunk(state, chunk, track, flows)
            self.out.write(head)
            if compiled:  # the kernel runs in the writer's thread, beside the next batch's preparing
                for part in split_rows(batch, JOB_ROWS):  # a few jobs' inputs wait in the queue, not whole chunks'
                    self.out.write_job(Encoding(part, self.out.pool).run)
            else:
                self.out.write(encode_numpy(batch))
            row += chunk.height
            self._advance(chunk.height)
        self.stats.slices += slices.height


def _clock_snapshot(t0: int) -> TracePacket:
    """BOOTTIME = REALTIME at t0: timestamps are epoch ns, so the UI can show wall time (perfetto.md §1.8)."""
    snap = ClockSnapshot(primary_trace_clock=BuiltinClock.BUILTIN_CLOCK_BOOTTIME)
    snap.clocks.add(clock_id=BuiltinClock.BUILTIN_CLOCK_BOOTTIME, timestamp=t0)
    snap.clocks.add(clock_id=BuiltinClock.BUILTIN_CLOCK_REALTIME, timestamp=t0)
    return TracePacket(timestamp=t0, clock_snapshot=snap)


def _sequence_start(seq: int) -> TracePacket:
    names = [DebugAnnotationName(iid=i, name=k) for i, k in enumerate(ARG_KEYS, start=1)]
    return TracePacket(
        trusted_packet_sequence_id=seq,
        sequence_flags=SEQ_CLEARED_AND_NEEDS,
        interned_data=InternedData(debug_annotation_names=names),
    )


def dense_codes(series: pl.Series) -> tuple[np.ndarray, list[str]]:
    """Codes into the sorted distinct non-null strings of `series` (-1 for null), and those strings.

    Categorical columns are coded from their physical ids (only the distinct values are turned into strings); the
    table is sorted by string so the codes never depend on the process's category cache. A mostly null column
    (string args of a few rows) is coded on its non-null rows only.
    """
    nulls = series.null_count()
    if nulls:
        codes = np.full(series.len(), -1, np.int64)
        if nulls == series.len():
            return codes, []
        present = series.is_not_null()
        sub_codes, table = dense_codes(series.filter(present))
        codes[np.flatnonzero(present.to_numpy())] = sub_codes
        return codes, table
    if series.dtype != pl.Categorical:
        s = series.cast(pl.String)
        codes = (s.rank("dense").cast(pl.Int64) - 1).fill_null(-1).to_numpy()
        return codes, s.drop_nulls().unique().sort().to_list()
    phys = series.to_physical()
    uniq = (
        pl.DataFrame({"c": phys, "s": series})
        .drop_nulls()
        .unique("c")
        .with_columns(pl.col("s").cast(pl.String))
        .sort("s")
    )
    ids = uniq["c"].to_numpy()
    order = np.argsort(ids)
    phys_np = phys.fill_null(0).to_numpy()
    pos = np.searchsorted(ids[order], phys_np).clip(0, max(0, ids.shape[0] - 1))
    codes = np.where(phys.is_null().to_numpy(), -1, order[pos] if ids.shape[0] else -1).astype(np.int64)
    return codes, uniq["s"].to_list()


def _name_codes(names: pl.Series) -> tuple[np.ndarray, list[str]]:
    """dense_codes of slice names, a null name coded as "?" after every real one."""
    codes, table = dense_codes(names)
    if (codes < 0).any():
        codes = np.where(codes < 0, len(table), codes)
        table = [*table, "?"]
    return codes, table


def _encode_chunk(
    state: _Sequence,
    chunk: pl.DataFrame,
    track: np.ndarray,
    flows: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple[bytes, SliceRows]:
    """The chunk's packet of the names it interns first (b"": none new), and its slices ready to encode."""
    codes, table = _name_codes(chunk["name"])
    used = np.flatnonzero(np.bincount(codes, minlength=len(table)))  # sorted codes = sorted names, "?" last
    new = [table[c] for c in used.tolist() if table[c] not in state.names]
    for s in new:
        state.names[s] = len(state.names) + 1
    head = b""
    if new:
        interned = InternedData(event_names=[EventName(iid=state.names[s], name=s) for s in new])
        head = frame_packet(
            TracePacket(
                trusted_packet_sequence_id=state.seq,
                interned_data=interned,
                sequence_flags=enc.SEQ_NEEDS_INCREMENTAL_STATE,
            )
        )
    iids = np.zeros(len(table), np.int64)
    iids[used] = [state.names[table[c]] for c in used.tolist()]
    ints: list[IntArg] = []
    str_args: list[StrArg] = []
    for key_iid, col in enumerate(ARG_KEYS, start=1):
        if col in ARG_INT_COLUMNS:
            values = chunk[col]
            nulls = values.null_count()
            if nulls == 0:
                ints.append(IntArg(key_iid, values.to_numpy(), None))
            elif nulls < values.len():
                ints.append(IntArg(key_iid, values.fill_null(0).to_numpy(), values.is_not_null().to_numpy()))
        else:
            arg_codes, arg_table = dense_codes(chunk[col])
            if (arg_codes >= 0).any():
                str_args.append(StrArg(key_iid, arg_codes, arg_table))
    f_rows, f_ids, t_rows, t_ids = flows
    batch = SliceRows(
        state.seq,
        chunk["start_ns"].to_numpy(),
        chunk["end_ns"].to_numpy(),
        track,
        iids[codes],
        tuple(ints),
        tuple(str_args),
        f_rows,
        f_ids,
        t_rows,
        t_ids,
    )
    return head, batch


def _counter_events(
    tree: TrackTree, proc: int, trace: Trace, node: str, rank: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    rows = trace.counters.filter((pl.col("rank") == rank) & (pl.col("node") == node))
    rows = rows.select("ts_ns", pl.col("metric").cast(pl.String), pl.col("instance").fill_null(-1), "value")
    memory = allocation_counters(trace.allocations.filter((pl.col("rank") == rank) & (pl.col("node") == node)))
    rows = pl.concat([rows, memory.drop("node", "rank")]) if memory.height else rows
    if not rows.height:
        return None
    keys = rows.select("metric", "instance").unique().sort(["metric", "instance"])
    uuids = [
        tree.counter(("counter", node, rank, m, i), proc, m, i, 1000 + k) for k, (m, i) in enumerate(keys.iter_rows())
    ]
    keys = keys.with_columns(pl.Series("track", uuids, pl.Int64))
    rows = rows.join(keys, on=["metric", "instance"]).sort(["ts_ns", "track"])
    return rows["ts_ns"].to_numpy(), rows["track"].to_numpy(), rows["value"].to_numpy()


def _write_findings(out: BackgroundWriter, tree: TrackTree, findings: Iterable[Any], seq: int, t0: int) -> int:
    """Findings as instant events on a "Findings" track per rank (or one global track), on their own sequence."""
    rows = finding_rows(findings)
    if not rows:
        return 0
    events = [TracePacket(trusted_packet_sequence_id=seq, sequence_flags=SEQ_CLEARED_AND_NEEDS)]
    for f in rows:
        start = t0 if f.start_ns is None else f.start_ns
        end = start if f.end_ns is None else f.end_ns
        proc = tree.uuids.get(("process", f.node, f.rank), 0) if f.node is not None else 0
        track = tree.custom(
            ("findings", proc),
            proc,
            "Findings" if proc else "ktrace findings",
            -1,
            description="rule findings (ktrace check)",
        )
        p = TracePacket(timestamp=start, trusted_packet_sequence_id=seq)
        te = p.track_event
        te.type = TrackEvent.TYPE_INSTANT
        te.track_uuid = track
        te.name = f"{f.severity}: {f.rule}"
        for key, value in (("rule", f.rule), ("severity", f.severity), ("message", f.message)):
            te.debug_annotations.add(name=key, string_value=value)
        te.debug_annotations.add(name="end_ns", int_value=end)
        te.debug_annotations.add(name="duration_ns", int_value=max(0, end - start))
        events.append(p)
    for p in [*tree.take_packets(), *events]:
        out.write(frame_packet(p))
    return len(events) - 1
