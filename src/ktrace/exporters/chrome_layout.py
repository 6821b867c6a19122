"""Where a rank's Chrome JSON slices go (pid, tid and overflow lane), the threads to name, and its launch->run
flows, found in one pass over the rank's windows (perfetto_slice_windows).

A slice's place before lanes is its process (the rank's, or its GPU's pseudo-process) and a tid: API calls,
ranges and ops keep their thread's tid, kernels and memory copies go on their stream, steps, syncs and GPU
annotations on a pseudo-thread each. Where slices on one place overlap without nesting, the later ones move to an
"(overlap n)" pseudo-thread (LANE_TID * n above), laid out cluster by cluster as the Perfetto export does
(perfetto_rank_layout.Overlaps), so the lanes are track_layout.overlap_lanes' of the whole rank.

What is noted per slice and per launch->run pair goes to temporary files, read back in order a chunk at a time
(spill.Spill): each slice's place code (RowCodes: `pids_tids` reads it rather than grouping the chunk's key columns
again), each pair's launch and whether its GPU record starts after the launch, then the record's place and start.
Per launch correlation id, its launch's start and place code lie in files by the id's key (launches.Launches,
spill.SpillTable). What stays in memory: on a place where slices overlap, the held cluster's start, end, row and
thread label; where ids are sparse, the sorted ids (launches).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
from numpy.typing import NDArray

from ktrace.exporters.chrome_lines import distinct_rows, int_column
from ktrace.exporters.launches import Launches
from ktrace.exporters.perfetto_rank_layout import LAYOUT_COLUMNS, Overlaps, RowCodes
from ktrace.exporters.perfetto_slice_windows import RankSlices
from ktrace.exporters.perfetto_slices import KINDS, STREAM_KINDS, THREAD_KINDS, kind_in
from ktrace.exporters.spill import Spill, SpillTable
from ktrace.model.trace import Trace

I64 = NDArray[np.int64]
I32 = NDArray[np.int32]

LANE_TID = 100_000_000
"""tid offset of an overflow pseudo-thread for slices that overlap without nesting."""
SPECIAL_TIDS = {
    "step": (0, "Steps"),
    "sync": (1_000_000, "Synchronization"),
    "gpu_range": (1_000_001, "GPU annotations"),
}
"""Pseudo-thread (tid, name) of the slice kinds that have no thread or stream of their own."""

Place = tuple[int | None, int]
"""(GPU device, or None for the rank's own process; tid before lanes)."""
Label = tuple[str, int | None, int | None]
"""(kind, pid, tid) of the first slice on a thread: what its name is made of."""
_KIND = {k: i for i, k in enumerate(KINDS)}
_KEY = ("device_key", "out_tid")
_LABEL = ("kind", "pid", "tid")


def _places(frame: pl.DataFrame) -> pl.DataFrame:
    """Place (device_key, out_tid) and label columns (kind as text, pid, tid) of each slice, and its row."""
    kind = pl.col("kind")
    tid = pl.col("tid").fill_null(0)
    for k, (t, _) in SPECIAL_TIDS.items():
        tid = pl.when(kind == k).then(pl.lit(t, pl.Int64)).otherwise(tid)
    tid = pl.when(kind.is_in(STREAM_KINDS)).then(pl.col("stream")).otherwise(tid)
    on_gpu = ~kind.is_in([*THREAD_KINDS, "step"])
    return frame.select(
        pl.when(on_gpu).then(pl.col("device")).alias("device_key"),
        tid.alias("out_tid"),
        kind.cast(pl.String),
        "pid",
        "tid",
    ).with_row_index("row")


class _PlaceCodes:
    """A code per place in the order places are first met, with the label and row of the first slice there."""

    def __init__(self) -> None:
        self.codes: dict[Place, int] = {}
        self.labels: dict[Label, int] = {}
        self.first: list[tuple[int, int]] = []  # per code: (row, label) of its first slice

    def of(self, frame: pl.DataFrame, first_row: int) -> tuple[I64, I64]:
        """Code of each slice of `frame` (rows first_row, ... in file order) and its label."""
        keys = _numpy_keys(frame)
        if keys is None:  # a hash collision: polars' group-by
            return self._of_polars(frame, first_row)
        key_rows, first, inverse = keys
        code = np.empty(len(key_rows), np.int64)
        tag = np.zeros(len(key_rows), np.int64)
        for g in np.argsort(first, kind="stable").tolist():
            values = key_rows[g]
            place = (values[0], values[1])
            label = self.labels.setdefault(values[2:], len(self.labels))
            if place not in self.codes:
                self.codes[place] = len(self.codes)
                self.first.append((first_row + int(first[g]), label))
            code[g], tag[g] = self.codes[place], label
        return code[inverse], tag[inverse]

    def _of_polars(self, frame: pl.DataFrame, first_row: int) -> tuple[I64, I64]:
        keys = [*_KEY, *_LABEL]
        groups = _places(frame).group_by(keys).agg(pl.col("row"), pl.col("row").min().alias("first"))
        groups = groups.sort("first")
        code = np.empty(frame.height, np.int64)
        tag = np.zeros(frame.height, np.int64)
        at = groups["row"].explode().to_numpy()
        sizes = groups["row"].list.len().to_numpy()
        group_codes, group_tags = [], []
        for values, first in zip(groups.select(keys).iter_rows(), groups["first"].to_list(), strict=True):
            place = (values[0], values[1])
            label = self.labels.setdefault(values[2:], len(self.labels))
            if place not in self.codes:
                self.codes[place] = len(self.codes)
                self.first.append((first_row + first, label))
            group_codes.append(self.codes[place])
            group_tags.append(label)
        code[at] = np.repeat(np.array(group_codes, np.int64), sizes)
        tag[at] = np.repeat(np.array(group_tags, np.int64), sizes)
        return code, tag


_KIND_NAMES = np.array(KINDS, dtype=object)


def _nulls(valid: NDArray[np.bool_] | None, like: I64) -> I64:
    return np.zeros_like(like) if valid is None else (~valid).astype(np.int64)


def _numpy_keys(frame: pl.DataFrame) -> tuple[list[tuple[object, ...]], I64, I64] | None:
    """The distinct (device_key, out_tid, kind, pid, tid) of the slices as _places gives them (None for null),
    the first row of each and each row's index among them (chrome_lines.distinct_rows: None on a collision)."""
    kind = frame["kind"].to_physical().to_numpy().astype(np.int64)
    tid, tid_valid = int_column(frame["tid"])
    out_tid = tid.copy()
    for k, (t, _) in SPECIAL_TIDS.items():
        out_tid[kind == _KIND[k]] = t
    on_stream = np.isin(kind, [_KIND[k] for k in STREAM_KINDS])
    out_tid[on_stream] = int_column(frame["stream"])[0][on_stream]
    on_gpu = ~np.isin(kind, [_KIND[k] for k in (*THREAD_KINDS, "step")])
    device = np.where(on_gpu, int_column(frame["device"])[0], 0)
    pid, pid_valid = int_column(frame["pid"])
    pid_null, tid_null = _nulls(pid_valid, pid), _nulls(tid_valid, tid)
    distinct = distinct_rows([device, on_gpu.astype(np.int64), out_tid, kind, pid, pid_null, tid, tid_null])
    if distinct is None:
        return None
    first, inverse = distinct
    rows: list[tuple[object, ...]] = [
        (
            int(device[r]) if on_gpu[r] else None,
            int(out_tid[r]),
            str(_KIND_NAMES[kind[r]]),
            None if pid_null[r] else int(pid[r]),
            None if tid_null[r] else int(tid[r]),
        )
        for r in first.tolist()
    ]
    return rows, first, inverse


class ChromeLayout:
    """Places, lanes, thread names and flows of one rank's Chrome JSON slices.

    Made by one layout pass over `slices`; `place` the rank's GPU processes (`devices` first) before `threads`
    and `pids_tids`; `pids_tids` each chunk in file order (it notes the flows' ends), then `flows`.
    """

    def __init__(self, trace: Trace, node: str, rank: int, slices: RankSlices, folder: Path) -> None:
        """`folder`: where the temporary files go (spill.Spill: the output's folder)."""
        self.places, overlaps, self.launches = _PlaceCodes(), Overlaps(), Launches(trace, node, rank, folder)
        self.row_codes = RowCodes(folder)
        row = 0
        self.pair_term = Spill(np.bool_, folder)
        """Per launch->run pair (file order of its GPU record): does the record start at or after its launch."""
        self.flow_corr = Spill(np.int64, folder)
        """Per flow (a pair whose record starts at or after its launch: JSON flows need f.ts >= s.ts), its launch's
        key (launches.Launches)."""
        for window in slices.windows(LAYOUT_COLUMNS):
            code, tag = self.places.of(window, row)
            self.row_codes.add(code)
            overlaps.add(row, code, window["start_ns"].to_numpy(), window["end_ns"].to_numpy(), tag)
            pair_corr, term = self.launches.add(window)
            self.pair_term.append(term)
            self.flow_corr.append(pair_corr[term])
            row += window.height
        self.lane_rows, lane_codes, lanes, lane_tags = overlaps.lanes()
        base = len(self.places.codes)
        lane_keys = lane_codes * (int(lanes.max(initial=0)) + 1) + lanes
        _, first, self.lane_code = np.unique(lane_keys, return_index=True, return_inverse=True)
        self.lane_code += base
        self.lane_of: list[tuple[int, int]] = [(int(lane_codes[j]), int(lanes[j])) for j in first.tolist()]
        self.lane_first = [(int(self.lane_rows[j]), int(lane_tags[j])) for j in first.tolist()]
        self.flow_count = self.flow_corr.count
        """Flows the rank writes."""
        codes = len(self.places.codes) + len(self.lane_of)
        self.code_type = np.uint16 if codes < 2**16 - 1 else np.int32  # a place per thread or stream: few
        self.launch_code = SpillTable(self.code_type, self.launches.keys, folder)
        """Per launch key, its launch's place code + 1 (0: not placed yet), in a file."""
        self.gpu_code = Spill(np.int32, folder)
        """Per flow, its GPU record's place code and start (noted by `pids_tids`, read by `flows`)."""
        self.gpu_start = Spill(np.int64, folder)
        self.next_pair = 0
        self.pid: I64 = np.zeros(0, np.int64)
        self.tid: I64 = np.zeros(0, np.int64)

    @property
    def devices(self) -> list[int]:
        """The GPUs the rank's slices run on, sorted (each a pseudo-process)."""
        return sorted({d for d, _ in self.places.codes if d is not None})

    def place(self, cpu_pid: int, gpu_pid: dict[int, int]) -> None:
        """Give every place its pid (the rank's `cpu_pid`, or its GPU's) and every lane its tid."""
        pid = [cpu_pid if d is None else gpu_pid[d] for d, _ in self.places.codes]
        tid = [t for _, t in self.places.codes]
        pid += [pid[c] for c, _ in self.lane_of]
        tid += [tid[c] + lane * LANE_TID for c, lane in self.lane_of]
        self.pid, self.tid = np.array(pid, np.int64), np.array(tid, np.int64)

    def threads(self) -> list[tuple[int, int, Label]]:
        """(pid, tid, label of its first slice) of every thread with slices, sorted by (pid, tid)."""
        labels = list(self.places.labels)
        first: dict[tuple[int, int], tuple[int, int]] = {}
        for code, (row, tag) in enumerate([*self.places.first, *self.lane_first]):
            key = (int(self.pid[code]), int(self.tid[code]))
            if key not in first or row < first[key][0]:
                first[key] = (row, tag)
        return [(p, t, labels[first[(p, t)][1]]) for p, t in sorted(first)]

    def pids_tids(self, chunk: pl.DataFrame, first_row: int) -> tuple[I64, I64]:
        """pid and tid of each slice of the chunk (rows first_row, ... in file order); notes its flows' ends."""
        code = self.row_codes.of(first_row, chunk.height)
        a, b = np.searchsorted(self.lane_rows, [first_row, first_row + chunk.height])
        code[self.lane_rows[a:b] - first_row] = self.lane_code[a:b]
        self._flow_ends(chunk, code)
        return self.pid[code], self.tid[code]

    def _flow_ends(self, chunk: pl.DataFrame, code: I64) -> None:
        kind = chunk["kind"]
        at, found = self.launches.match(chunk["correlation_id"], kind_in(kind, ["api"]))
        gpu = np.flatnonzero(kind_in(kind, STREAM_KINDS) & found)  # in file order: the pairs' order
        term = self.pair_term.read(self.next_pair, gpu.size)  # bool already: no copy
        self.next_pair += gpu.size
        gpu = gpu[term]
        self.gpu_code.append(code[gpu])
        self.gpu_start.append(chunk["start_ns"].to_numpy()[gpu])
        calls = np.flatnonzero(kind_in(kind, ["api"]) & found)
        corr, first = np.unique(at[calls], return_index=True)
        fresh = self.launch_code.get(corr) == 0
        self.launch_code.put(corr[fresh], code[calls[first[fresh]]] + 1)

    def flows(self, chunk_rows: int) -> Iterator[tuple[str, int, I64, I64, I64]]:
        """The flows' ends once every chunk was placed, `chunk_rows` at a time: ("s", k, pid, tid, ts) of the
        launches of flows k, k + 1, ..., then ("f", ...) of their GPU records; flow k is the k-th GPU record (in
        file order) that starts at or after its launch."""
        self.launches.ids = self.launches.ids[:0]  # done with: let go
        for a in range(0, self.flow_count, chunk_rows):
            corr = self.flow_corr.read(a, chunk_rows).astype(np.int64, copy=False)
            code = self.launch_code.get(corr).astype(np.int64) - 1  # flows follow their GPU records: ids lie close
            assert bool((code >= 0).all()), "a flow's launch was never placed"  # (-1 would take the last place)
            yield "s", a, self.pid[code], self.tid[code], self.launches.starts(corr)
        self.launch_code.close()
        for a in range(0, self.gpu_code.count, chunk_rows):
            code = self.gpu_code.read(a, chunk_rows).astype(np.int64)
            start: I64 = self.gpu_start.read(a, chunk_rows).astype(np.int64, copy=False)
            yield "f", a, self.pid[code], self.tid[code], start
