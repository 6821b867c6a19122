"""Which ops row holds each GPU record's launch: the innermost range of a chosen kind (framework operator,
nn.Module frame) on the launch call's thread containing the call's start. Shared by the operator and module
views (operators.py, modules.py) so both attribute the same way."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.columns import dense_ids, node_rank_ids
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.steps_innermost import innermost_of_points, int64_values, key_ids
from ktrace.model.trace import Trace

I64 = npt.NDArray[np.int64]
THREAD = ("node", "rank", "pid", "tid")
MODULE_PREFIX = "nn.Module: "

_CATEGORY = pl.col("category").cast(pl.Categorical)
_NAME = pl.col("name").cast(pl.Categorical)
# Categorical predicates (a no-op cast on the importers' Categorical columns): compared and prefix-tested once per
# distinct value, where a String cast of the column cost ~20 MB and ~30 ms per test on 0.9 M ops rows (owlv2 x10)
IS_OPERATOR = pl.col("category").is_null() | (_CATEGORY == "cpu_op")
"""ops rows that are framework operators (cpu_op; null in stores written before ops.category), not Python frames."""


def has_operators(ops: pl.DataFrame) -> bool:
    """Whether an ops table holds any framework operator (IS_OPERATOR), not only Python frames."""
    return bool(ops.height) and bool(ops.select(IS_OPERATOR.fill_null(False).any()).item())


IS_MODULE = (_CATEGORY == "python_function") & _NAME.cat.starts_with(MODULE_PREFIX)
"""ops rows that are nn.Module frames (Kineto python_function `nn.Module: Linear_0`, with_modules=True)."""
BUILTIN_PREFIX = "<built-in"
IS_PYTHON_FRAME = (
    (_CATEGORY == "python_function") & ~_NAME.cat.starts_with(MODULE_PREFIX) & ~_NAME.cat.starts_with(BUILTIN_PREFIX)
)
"""ops rows that are Python source frames (Kineto python_function `file.py(12): f`): neither nn.Module frames nor
calls into C (`<built-in method mm of type object at 0x7f...>`, which Kineto also writes as frames)."""


def innermost_of_records(ix: TraceIndex, rows: pl.Expr) -> I64:
    """Row of trace.ops of the innermost of the ops rows selected by `rows` (an expression over trace.ops)
    on each GPU record's launch thread that contains the launch call's start; -1 where none (index order)."""
    trace = ix.trace
    launch = ix.launch_rows()
    out = np.full(launch.size, -1, np.int64)
    launched = np.flatnonzero(launch >= 0)
    if trace.ops.height == 0 or launched.size == 0:
        return out
    calls = trace.api.select(pl.col(*THREAD, "start_ns").gather(pl.Series(launch[launched])))
    out[launched] = innermost_at(trace, calls, "start_ns", rows)
    return out


def innermost_at(trace: Trace, points: pl.DataFrame, time_col: str, rows: pl.Expr) -> I64:
    """Row of trace.ops of the innermost of the ops rows selected by `rows` containing each point: same thread
    (node, rank, pid, tid, no nulls) and start <= t < end, t the point's `time_col` (GPU records by their launch
    call, allocator events by their own time).

    Returns:
        int64 ops row per point (in `points` order); -1 outside every selected range.
    """
    if trace.ops.height == 0 or points.height == 0:
        return np.full(points.height, -1, np.int64)
    p_time = points[time_col].to_numpy().astype(np.int64)
    # Only a range holding some point's time (on any thread) can be a point's innermost: one sorted search drops
    # the others before any frame is built (owlv2 x10: 332 k Python frames -> 115 k, 244 k operators -> 78 k).
    # Leaving out ranges that hold no point changes no answer (nesting.innermost_enclosing says why).
    op_row = _rows_holding(trace.ops, rows, np.sort(p_time))
    if op_row.size == 0:
        return np.full(points.height, -1, np.int64)
    # The ranges as arrays, one column at a time, never a frame of them (their keys go once they are ids): owlv2
    # x30's 345 k Python frames for 155 k launches peaked at +71 MB with the gathered frame, its sorted copy and the
    # kernel's copies of every array at once.
    taken = pl.Series(op_row)
    r_gid, p_gid, n_groups = key_ids(trace.ops.select(*THREAD)[taken], points, THREAD)
    start, end = (int64_values(trace.ops.get_column(c).gather(taken)) for c in ("start_ns", "end_ns"))
    del taken
    order = np.lexsort((-end, start, r_gid))  # by thread, start, then the outer (longer) range first
    op_row, r_gid, start, end = op_row[order], r_gid[order], start[order], end[order]
    del order
    idx = innermost_of_points(r_gid, start, end, p_gid, n_groups, p_time)
    found: I64 = np.where(idx >= 0, op_row[np.maximum(idx, 0)], -1)
    return found


SLICE_ROWS = 1 << 18
"""ops rows tested at once by _rows_holding (a slice's candidates, times and searches: ~10 MB at most)."""


def _rows_holding(ops: pl.DataFrame, rows: pl.Expr, times: I64) -> I64:
    """The ops rows selected by `rows` whose [start, end) holds one of the sorted `times`, in table order; slice
    by slice, so that no whole-table array is built (13.4 M ops rows at owlv2 x150: the Python frames' candidates,
    their times and two searches were ~400 MB at once)."""
    found = [np.zeros(0, np.int64)]
    table = ops.select(rows.fill_null(False).alias("selected"), "start_ns", "end_ns")  # a bitmask and two views
    for lo in range(0, table.height, SLICE_ROWS):
        part = table.slice(lo, SLICE_ROWS)
        candidates = np.flatnonzero(part["selected"].to_numpy())
        start = part["start_ns"].to_numpy()[candidates]
        end = part["end_ns"].to_numpy()[candidates]
        holds = np.searchsorted(times, end, "left") > np.searchsorted(times, start, "left")
        found.append(candidates[holds] + lo)
    return np.concatenate(found)


def enclosing_on_thread(spans: pl.DataFrame) -> I64:
    """Position (in `spans`: node, rank, pid, tid, start_ns, end_ns) of each span's innermost enclosing span on
    its thread; -1 for an outermost one."""
    from ktrace.analysis._kernels.nesting import enclosing_parents

    n = spans.height
    _, (rank_id,) = node_rank_ids([spans.select("node", "rank")])
    gid, _ = dense_ids([rank_id, int64_values(spans["pid"]), int64_values(spans["tid"])])
    del rank_id
    start, end = int64_values(spans["start_ns"]), int64_values(spans["end_ns"])  # read in place where they are int64
    # A frame made for this call (operators' self times: 731 k operators, ~29 MB at owlv2 x30) goes now, and each
    # array once sorted: never the frame, the arrays and their sorted copies at once.
    del spans
    order = np.lexsort((-end, start, gid))
    gid = gid[order]
    start = start[order]
    end = end[order]
    parent_sorted = enclosing_parents(gid, start, end)
    del gid, start, end
    parent = np.full(n, -1, np.int64)
    has = parent_sorted >= 0
    parent[order[has]] = order[parent_sorted[has]]
    return parent
