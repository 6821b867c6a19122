"""GPU records joined to their launch calls, as int64 arrays taken from the analyses' shared launch join.

ktrace.analysis.latency.launch_latency materializes a 20-column frame of every launched GPU record (seconds
at 10 M kernels); the rules read a handful of its columns, so they take the same join
(TraceIndex.launch_rows, already computed by summarize() when it shares the rules' index) as numpy
arrays. Records come in launch_latency's row order: those not launched by a CUDA graph first, then those of
graph launches, each part in gpu_activity order (kernels, then memory ops), so aggregates that keep a
group's first row agree with it. Names, nodes and ranks stay integer codes until a result is small.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.columns import memory_name_expr
from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.rules.frames import named
from ktrace.analysis.utilization import names_matching

I64 = npt.NDArray[np.int64]


Index = slice | npt.NDArray[np.int64]
"""Positions into an array: a slice where they are a contiguous ascending run (a view, no copy), else indices."""


@dataclass(frozen=True)
class Launches:
    """Every GPU record with a launch call in the trace (launch_latency's rows, in its order)."""

    record: I64
    """Index into ktrace.analysis.columns.gpu_columns (kernels first, then memory ops)."""
    api_row: I64
    """Row of the launch call in trace.api."""
    start: I64
    end: I64
    api_start: I64
    api_end: I64
    is_graph: npt.NDArray[np.bool_]
    """Launched by a CUDA graph (graph_id set, or an API whose name contains "Graph")."""
    n_kernels: int
    """Records below this index are kernels (their index is their trace.kernels row)."""
    ascending: bool
    """`record` is strictly ascending (no graph launch reorders it)."""

    @property
    def size(self) -> int:
        """Number of launched records."""
        return int(self.record.size)


def as_index(positions: I64, ascending: bool) -> Index:
    """`positions` as a slice when they are one contiguous ascending run (`ascending`: known to be strictly
    ascending), else unchanged: gathering through a slice is a view, at 10 M rows a saving of 80 MB a column."""
    n = int(positions.size)
    if n == 0:
        return slice(0, 0)
    if ascending and int(positions[-1]) - int(positions[0]) + 1 == n:
        return slice(int(positions[0]), int(positions[0]) + n)
    return positions


_LAUNCHES = Slot[Launches]("rules.launches")
_KERNEL_ROWS = Slot[tuple[Index, Index]]("rules.kernel_rows")
_KERNEL_LAUNCHES = Slot[pl.DataFrame]("rules.kernel_launches")
_KERNEL_CALLS = Slot[pl.DataFrame]("rules.kernel_calls")


def launches(index: TraceIndex) -> Launches:
    """The launched GPU records of the trace (shared through the index)."""
    return index.get(_LAUNCHES, lambda: _launches(index))


def _launches(index: TraceIndex) -> Launches:
    t = index.trace
    cols = index.gpu_columns()
    rows = index.launch_rows()
    hit = np.flatnonzero(rows >= 0)
    api_row = rows[hit]
    graph_id = np.concatenate(
        [t.kernels["graph_id"].is_not_null().to_numpy(), t.memory["graph_id"].is_not_null().to_numpy()]
    )
    graph_names = names_matching(t.api, "name", "Graph")
    graph_api = named(t.api, "name", graph_names).to_numpy() if graph_names else np.zeros(t.api.height, bool)
    is_graph = graph_id[hit] | graph_api[api_row]
    ascending = not is_graph.any()
    if not ascending:  # launch_latency's order: records not launched by a graph, then the graph launches'
        order = np.concatenate([np.flatnonzero(~is_graph), np.flatnonzero(is_graph)])
        hit, api_row, is_graph = hit[order], api_row[order], is_graph[order]
    at = as_index(hit, ascending)
    return Launches(
        record=hit,
        api_row=api_row,
        start=cols.start[at],
        end=cols.end[at],
        api_start=index.api_times()[0][api_row],
        api_end=index.api_times()[1][api_row],
        is_graph=is_graph,
        n_kernels=cols.n_kernels,
        ascending=ascending,
    )


def kernel_rows(index: TraceIndex) -> tuple[Index, Index]:
    """(positions of the launched kernels in launches(index), their trace.kernels rows), slices where possible."""

    def compute() -> tuple[Index, Index]:
        lau = launches(index)
        if lau.ascending:  # kernels come first: a prefix
            at: Index = slice(0, int(np.searchsorted(lau.record, lau.n_kernels)))
        else:
            at = np.flatnonzero(lau.record < lau.n_kernels)
        return at, as_index(lau.record[at], lau.ascending)

    return index.get(_KERNEL_ROWS, compute)


def kernel_launches(index: TraceIndex) -> pl.DataFrame:
    """The launched kernels (launch_latency's kernel rows, in its order) with integer codes for names:
    row (trace.kernels row), rank_id (index into TraceIndex.gpu_columns().rank_keys), name_code (lexical
    code, -1 for null; see TraceIndex.kernel_name_codes), start_ns, end_ns, api_start_ns, api_end_ns, api_row
    (the launch call's trace.api row). Shared through the index; the columns are views of the shared arrays
    where the rows allow it."""

    def compute() -> pl.DataFrame:
        lau = launches(index)
        at, rows = kernel_rows(index)
        codes, _ = index.kernel_name_codes()
        row = lau.record[at]
        return pl.DataFrame(
            {
                "row": row,
                "rank_id": index.gpu_columns().rank_id[rows],
                "name_code": codes[rows],
                "start_ns": lau.start[at],
                "end_ns": lau.end[at],
                "api_start_ns": lau.api_start[at],
                "api_end_ns": lau.api_end[at],
                "api_row": lau.api_row[at],
            }
        )

    return index.get(_KERNEL_LAUNCHES, compute)


def kernel_calls(index: TraceIndex) -> pl.DataFrame:
    """The calls that launched kernels, one row each, for rules that count or sum launches: a CUDA graph
    launch is one row however many kernels its graph ran (TraceIndex.launch_runs).

    Columns: those of kernel_launches, taken from the call's first kernel (earliest start, then row), except
    end_ns (its last kernel's end); gpu_ns (the sum of its kernels' durations) and kernels (their number).
    Without fan-out this is kernel_launches itself (gpu_ns = end_ns - start_ns, kernels = 1), in its order;
    else ordered by the first kernel's row."""

    def compute() -> pl.DataFrame:
        lat = kernel_launches(index).with_columns(
            gpu_ns=pl.col("end_ns") - pl.col("start_ns"), kernels=pl.lit(1, pl.Int64)
        )
        if not index.launch_runs().fans_out:
            return lat
        calls = (
            lat.sort("api_row", "start_ns", "row")
            .group_by("api_row", maintain_order=True)
            .agg(
                pl.col("row", "rank_id", "name_code", "start_ns", "api_start_ns", "api_end_ns").first(),
                pl.col("end_ns").max(),
                pl.col("gpu_ns").sum(),
                pl.len().cast(pl.Int64).alias("kernels"),
            )
        )
        return calls.sort("row").select(lat.columns)

    return index.get(_KERNEL_CALLS, compute)


def top_names(index: TraceIndex, frame: pl.DataFrame, limit: int, value: pl.Expr) -> pl.DataFrame:
    """Per kernel name of a kernel_launches subset: `value`, first start, last end and the node and rank of
    its first row; the `limit` names with the largest value (ties: by name). Grouped on integer codes; only
    the result rows get strings."""
    per = frame.group_by("name_code").agg(
        value.alias("value"), pl.col("start_ns").min(), pl.col("end_ns").max(), pl.col("rank_id").first()
    )
    _, names = index.kernel_name_codes()
    lookup = pl.Series("name", [*names, None], dtype=pl.String)  # code -1 (null name) -> the last entry
    keys = index.gpu_columns().rank_keys
    codes = per["name_code"].to_numpy()
    per = per.with_columns(name=lookup[np.where(codes < 0, len(names), codes)])
    top = per.sort("value", "name", descending=[True, False]).head(limit)
    ids = top["rank_id"].to_numpy()
    return top.with_columns(node=keys["node"][ids], rank=keys["rank"][ids]).select(
        "name", "value", "start_ns", "end_ns", "node", "rank"
    )


def launched_calls(index: TraceIndex, is_call: npt.NDArray[np.bool_]) -> int:
    """How many of the API rows marked in `is_call` (a mask over trace.api) launched a GPU record: each
    record not launched by a graph counts once, the records of one graph launch count once
    (launch_latency's rows with graph_run == 0)."""
    lau = launches(index)
    if not lau.size:
        return 0
    hit = is_call[lau.api_row]
    plain = int((hit & ~lau.is_graph).sum())
    return plain + int(np.unique(lau.api_row[hit & lau.is_graph]).size)


def launched_api_keys(index: TraceIndex) -> pl.DataFrame:
    """(node String, rank, correlation_id) of every launch call with a GPU record, one row each."""
    lau = launches(index)
    rows = np.unique(lau.api_row)
    return index.trace.api.select(pl.col("node").cast(pl.String), "rank", "correlation_id")[rows]


def record_evidence_frame(index: TraceIndex, positions: I64) -> pl.DataFrame:
    """The launched records at `positions` (indices into launches(index)) as a frame with the Evidence columns
    (node, rank, device, stream, name, start_ns, end_ns) and launch_latency_ns, in the given order. Memory ops
    are named like gpu_activity names them ("Memset", "Memcpy <kind>")."""
    lau = launches(index)
    t = index.trace
    record = lau.record[positions]
    is_kernel = record < lau.n_kernels
    base: list[str | pl.Expr] = ["node", "rank", "device", pl.col("stream").fill_null(-1), "start_ns", "end_ns"]
    memory_name = memory_name_expr()
    kernels = t.kernels.select("node", "rank", "device", "stream", "start_ns", "end_ns", "name")[record[is_kernel]]
    parts = [
        kernels.select(*base, pl.col("name").cast(pl.String)).with_columns(
            pos=pl.Series(np.flatnonzero(is_kernel), dtype=pl.Int64)
        )
    ]
    if (~is_kernel).any():
        memory = t.memory.select("node", "rank", "device", "stream", "start_ns", "end_ns", "op", "copy_kind")[
            record[~is_kernel] - lau.n_kernels
        ]
        parts.append(
            memory.select(*base, memory_name.alias("name")).with_columns(
                pos=pl.Series(np.flatnonzero(~is_kernel), dtype=pl.Int64)
            )
        )
    out = pl.concat([p.with_columns(pl.col("node").cast(pl.String)) for p in parts]).sort("pos")
    latency = lau.start[positions] - lau.api_start[positions]
    return out.drop("pos").with_columns(launch_latency_ns=pl.Series(latency, dtype=pl.Int64))
