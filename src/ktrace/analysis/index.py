"""TraceIndex: what the analyses of one trace share, built lazily once and passed explicitly.

One TraceIndex per trace owns the numbering of row groups (dense (node, rank) ids of every table, the
per-rank/device/stream groups of the GPU records), their time order, the launch join (the api row of every
GPU record), the name codes, and the results the analyses share (``index.get(slot, compute)``, where a
Slot names the result and its type). Nothing is cached anywhere else: the public analyses take the trace
and an optional ``index=`` keyword; without one they build a fresh index, so results never depend on which
analysis ran first. Callers that run several analyses (summarize, the rules, the report, the TUI) build one
index (``TraceIndex(trace)``) and hand it to each.

Thread-safe: summarize runs analyses in threads; a thread asking for a member another thread is computing
waits for that result. Shared values are never mutated by callers; with KTRACE_READONLY_SHARED=1 (the test
suite sets it) their numpy arrays are made read-only, so a caller that writes into one fails loudly.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.columns import (
    FINER,
    GpuColumns,
    Per,
    RowGroups,
    build_gpu_columns,
    build_record_names,
    coarser_row_groups,
    combine_rank_ids,
    concat_i64,
    local_rank_ids,
    memory_name_expr,
    name_codes,
    stream_row_groups,
)
from ktrace.analysis.launch_join import LaunchRuns, build_launch_rows, build_launch_runs
from ktrace.model.schema import TABLES
from ktrace.model.trace import Trace

T = TypeVar("T")
I64 = npt.NDArray[np.int64]

_ACTIVITY_SCHEMA = {
    "node": pl.Categorical,
    "rank": pl.Int32,
    "device": pl.Int32,
    "stream": pl.Int64,
    "kind": pl.String,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "correlation_id": pl.Int64,
    "graph_id": pl.Int64,
}


@dataclass(frozen=True)
class Slot(Generic[T]):
    """The name of one shared result and, through its type parameter, the type of the value it holds.

    Declared once at module level next to the analysis that fills it (``BUSY = Slot[pl.DataFrame]("busy")``);
    two slots never share a name.
    """

    name: str


class TraceIndex:
    """The shared, lazily built per-trace structures of the analyses (see the module docstring)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._values: dict[Hashable, Any] = {}
        self._locks: dict[Hashable, threading.RLock] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, trace: Trace, index: TraceIndex | None = None) -> TraceIndex:
        """`index` when given (it must be the index of `trace`), else a new index of `trace`."""
        if index is None:
            return cls(trace)
        if index.trace is not trace:
            raise ValueError("index= belongs to another trace")
        return index

    def get(self, slot: Slot[T], compute: Callable[[], T], *args: Hashable) -> T:
        """The value of `slot` for these arguments: compute() the first time, the same object afterwards."""
        value: T = self._once((slot, args), compute)
        return value

    def seed(self, key: Hashable, value: Any) -> None:
        """Hold `value` for `key` (a structure's name as the methods below key it) unless something computed it
        already: analysis.rank_index_seeds gives a rank's index its share of a joined trace's structures."""
        self._once(key, lambda: value)

    def _once(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._values:
                return self._values[key]
            lock = self._locks.setdefault(key, threading.RLock())
        with lock:
            if key not in self._values:
                value = compute()
                self._values[key] = _read_only(value) if os.environ.get("KTRACE_READONLY_SHARED") == "1" else value
            return self._values[key]

    # Group numbering -------------------------------------------------------------------------------------

    def table_rank_ids(self, table: str) -> tuple[pl.DataFrame, I64]:
        """(keys: node String, rank Int32; id per row) of one table (merge several with combine_rank_ids)."""
        found: tuple[pl.DataFrame, I64] = self._once(
            ("table_rank_ids", table), lambda: local_rank_ids(self.trace.table(table))
        )
        return found

    def rank_pairs(self) -> pl.DataFrame:
        """(node, rank) pairs present in any table, sorted: Trace.ranks as a frame, without String casts."""
        keys, _ = combine_rank_ids([self.table_rank_ids(name) for name in TABLES])
        return keys

    def gpu_columns(self) -> GpuColumns:
        """Every GPU record (kernels then memory ops) as int64 arrays."""
        found: GpuColumns = self._once(
            "gpu_columns",
            lambda: build_gpu_columns(self.trace, self.table_rank_ids("kernels"), self.table_rank_ids("memory")),
        )
        return found

    # Time order ------------------------------------------------------------------------------------------

    def row_groups(self, per: Per) -> RowGroups:
        """GPU records grouped per "rank", "device" or "stream", each group in (start, row) order."""
        found: RowGroups = self._once(("row_groups", per), lambda: self._row_groups(per))
        return found

    def _row_groups(self, per: Per) -> RowGroups:
        c = self.gpu_columns()
        if per == "stream":
            groups, ordered = stream_row_groups(c)
            self._once(("sorted_start", per), lambda: ordered)  # sorted_times reuses it
            return groups
        return coarser_row_groups(c, per, self.row_groups(FINER[per]))

    def sorted_times(self, per: Per) -> tuple[I64, I64]:
        """(start, end) of the GPU records in row_groups(per) order (the finer grouping's arrays when the
        order is the same)."""
        found: tuple[I64, I64] = self._once(("sorted_times", per), lambda: self._sorted_times(per))
        return found

    def _sorted_times(self, per: Per) -> tuple[I64, I64]:
        perm = self.row_groups(per).perm
        if per in FINER and self.row_groups(FINER[per]).perm is perm:
            return self.sorted_times(FINER[per])
        c = self.gpu_columns()
        start: I64 = self._once(("sorted_start", per), lambda: c.start[perm])
        return start, c.end if start is c.start else c.end[perm]  # perm is the identity: no copies

    def sorted_intervals(self, per: Per) -> tuple[RowGroups, I64, I64, I64]:
        """(row groups, group id, start, end) of the GPU records in (group, start) order."""
        found: tuple[RowGroups, I64, I64, I64] = self._once(
            ("sorted_intervals", per), lambda: self._sorted_intervals(per)
        )
        return found

    def _sorted_intervals(self, per: Per) -> tuple[RowGroups, I64, I64, I64]:
        g = self.row_groups(per)
        if g.n_groups == 1:  # calloc'd zeros: no pass, no memory written
            gid = np.zeros(int(g.bounds[-1]), np.int64)
        else:
            gid = np.repeat(np.arange(g.n_groups, dtype=np.int64), np.diff(g.bounds))
        return (g, gid, *self.sorted_times(per))

    # Launch join -----------------------------------------------------------------------------------------

    def api_times(self) -> tuple[I64, I64]:
        """(start_ns, end_ns) of every api row as int64 arrays."""
        found: tuple[I64, I64] = self._once(
            "api_times", lambda: (concat_i64([self.trace.api], "start_ns"), concat_i64([self.trace.api], "end_ns"))
        )
        return found

    def launch_rows(self) -> I64:
        """The api row (index into trace.api) launching each GPU record, -1 without one."""
        found: I64 = self._once(
            "launch_rows",
            lambda: build_launch_rows(self.trace, self.gpu_columns(), self.table_rank_ids("api"), self.api_times()[0]),
        )
        return found

    def launch_runs(self) -> LaunchRuns:
        """The launch calls with a GPU record, one entry each (a CUDA graph launch counts once)."""

        def compute() -> LaunchRuns:
            c = self.gpu_columns()
            return build_launch_runs(self.launch_rows(), c.start, c.end)

        found: LaunchRuns = self._once("launch_runs", compute)
        return found

    # Names -----------------------------------------------------------------------------------------------

    def kernel_name_codes(self) -> tuple[I64, list[str]]:
        """Lexical code of each kernel's name (-1 for null) and the sorted distinct names."""
        found: tuple[I64, list[str]] = self._once("kernel_name_codes", lambda: name_codes(self.trace.kernels["name"]))
        return found

    def record_names(self) -> tuple[I64, pl.Series]:
        """Name code per GPU record ("Memset" / "Memcpy <kind>" for memory ops) and the names per code
        (a String Series: null first, then the names sorted)."""
        found: tuple[I64, pl.Series] = self._once(
            "record_names", lambda: build_record_names(self.trace, self.kernel_name_codes())
        )
        return found

    def gpu_activity(self, with_names: bool = False) -> pl.DataFrame:
        """Every GPU record (kernels, then memory ops) as one frame; see utilization.gpu_activity."""
        found: pl.DataFrame = self._once(("gpu_activity", with_names), lambda: _gpu_activity(self.trace, with_names))
        return found


def _gpu_activity(trace: Trace, with_names: bool) -> pl.DataFrame:
    base: list[str | pl.Expr] = ["node", "rank", "device", pl.col("stream").fill_null(-1)]
    k = trace.kernels.select(
        *base,
        pl.lit("kernel").alias("kind"),
        "start_ns",
        "end_ns",
        "correlation_id",
        "graph_id",
        *(["name"] if with_names else []),
    )
    m = trace.memory.select(
        *base,
        pl.col("op").cast(pl.String).alias("kind"),
        "start_ns",
        "end_ns",
        "correlation_id",
        "graph_id",
        *([memory_name_expr().cast(pl.Categorical).alias("name")] if with_names else []),
    )
    k = k.with_row_index("row")
    m = m.with_row_index("row")
    frames = [f for f in (k, m) if f.height] or [k]
    out = pl.concat(frames, how="vertical_relaxed")
    return out.cast({**_ACTIVITY_SCHEMA, "row": pl.UInt32, "kind": pl.Categorical})  # type: ignore[dict-item]


def _read_only(value: T) -> T:
    if isinstance(value, np.ndarray):
        value.setflags(write=False)
    elif isinstance(value, (tuple, list)):
        for item in value:
            _read_only(item)
    elif is_dataclass(value) and not isinstance(value, type):
        for f in fields(value):
            _read_only(getattr(value, f.name))
    return value
