"""GPU busy/idle time, utilization over time, and GPU/CPU active-time shares.

API:

- ``gpu_activity(trace, with_names=False) -> pl.DataFrame``: kernels + memcpy + memset as one frame
  (node String, rank, device, stream (null -> -1), kind, start_ns, end_ns, correlation_id, graph_id
  [, name]).
- ``names_matching(frame, col, pattern)``: distinct values of a column matching a regex.
- ``busy_time(trace, per="device") -> pl.DataFrame``: per "rank" | "device" | "stream": busy_ns (union
  of kernel+memcpy+memset intervals; concurrent streams counted once per device), first_ns, last_ns,
  span_ns, idle_ns, busy_pct, records.
- ``busy_union(trace, per="device") -> (group, start, end)``: the disjoint union of each group's GPU records,
  computed once per index and grouping (busy_time, utilization_over_time and the idle gaps read it).
- ``utilization_over_time(trace, bin_ns, per="device", t0_ns=None) -> pl.DataFrame``: busy ns and
  utilization (0-1) per fixed bin per (node, rank, device[, stream]).
- ``active_time_share(trace) -> pl.DataFrame``: GPU and CPU active-time share, from the timeline and
  from counters, with the method named in a column.

Each takes an optional ``index=`` (the trace's analysis.index.TraceIndex) to share its groups and results.

Definitions: "busy" is the timeline union of GPU records (HTA/TensorBoard semantics, not nsys' sum of
concurrent ops and not counter samples). GPU-side sync records are not busy time (they measure a
wait). Spans run from a group's first record start to its last record end.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.columns import FINER, PER_KEYS, Per, combine_rank_ids, memory_name_expr, node_rank_ids, time_order
from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.op_attribution import IS_OPERATOR
from ktrace.model.trace import Trace

__all__ = [
    "MAX_BINS",
    "PER_KEYS",
    "Per",
    "active_time_share",
    "busy_time",
    "busy_union",
    "gpu_activity",
    "memory_name_expr",
    "names_matching",
    "utilization_over_time",
]

MAX_BINS = 20_000_000
"""utilization_over_time refuses more (groups x bins) cells than this."""
BUSY_SLOT = Slot[pl.DataFrame]("busy_time")
I64 = npt.NDArray[np.int64]
_BUSY_UNION = Slot[tuple[I64, I64, I64]]("busy_union")


def gpu_activity(trace: Trace, with_names: bool = False, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """Every GPU record (kernel, memcpy, memset) as one frame.

    Args:
        trace: the trace.
        with_names: add a String `name` column (kernel name, or "Memcpy HtoD" / "Memset").
        index: the trace's TraceIndex (shares the frame with other analyses).

    Returns:
        Frame with node, rank, device, stream (null -> -1), kind ("kernel" | "memcpy" | "memset"),
        start_ns, end_ns, correlation_id, graph_id, row (row index in its source table) and optionally
        name; node, kind and name are Categorical (like the Trace's own tables).
    """
    return TraceIndex.of(trace, index).gpu_activity(with_names)


def names_matching(frame: pl.DataFrame, col: str, pattern: str, *, exclude: str | None = None) -> list[str]:
    """Distinct values of a (Categorical or String) column matching a regex (and not `exclude`), sorted.

    Matching distinct values only keeps regexes off the 10 M-row hot path; test rows with `.is_in()`.
    """
    if not frame.height:
        return []
    values = frame.select(pl.col(col).unique().cast(pl.String)).to_series().drop_nulls()
    hit = values.filter(values.str.contains(pattern))
    if exclude is not None:
        hit = hit.filter(~hit.str.contains(exclude))
    return sorted(hit.to_list())


def named(frame: pl.DataFrame, column: str, names: Sequence[str]) -> pl.Series:
    """Boolean mask: rows of `frame` whose (categorical) string `column` is one of `names`. A Categorical
    column is compared on its physical codes, so no String column of the frame's height is built."""
    if frame[column].dtype != pl.Categorical:
        return frame.select(pl.col(column).cast(pl.String).is_in(list(names))).to_series()
    distinct = frame.select(pl.col(column).unique()).to_series()
    codes = distinct.filter(distinct.cast(pl.String).is_in(list(names))).to_physical()
    return frame[column].to_physical().is_in(codes.implode()).fill_null(False)


def busy_union(trace: Trace, per: Per = "device", *, index: TraceIndex | None = None) -> tuple[I64, I64, I64]:
    """The busy intervals of each group: the disjoint union of its GPU records (touching ones merged).

    Args:
        trace: the trace.
        per: "rank", "device" or "stream" (the groups of index.row_groups(per)).
        index: the trace's TraceIndex: the union is computed once per index and grouping.

    Returns:
        (group id, start_ns, end_ns) int64 arrays of the merged intervals, sorted by (group, start); every
        group with a record has at least one.
    """
    ix = TraceIndex.of(trace, index)
    return ix.get(_BUSY_UNION, lambda: _busy_union(ix, per), per)


def _busy_union(ix: TraceIndex, per: Per) -> tuple[I64, I64, I64]:
    from ktrace.analysis._kernels.intervals import merge_intervals

    g, gid, s, e = ix.sorted_intervals(per)
    if per in FINER:  # the same groups as the finer grouping (one device per rank): the same union
        finer = ix.row_groups(FINER[per])
        if finer.perm is g.perm and np.array_equal(finer.bounds, g.bounds):
            return busy_union(ix.trace, FINER[per], index=ix)
    merged = merge_intervals(gid, s, e)
    # the kernel returns views of record-sized arrays: keep only the merged part alive in the index
    return merged[0].copy(), merged[1].copy(), merged[2].copy()


def busy_time(trace: Trace, per: Per = "device", *, index: TraceIndex | None = None) -> pl.DataFrame:
    """GPU busy and idle time per rank, device or stream.

    Args:
        trace: the trace.
        per: "rank" (node, rank), "device" (node, rank, device) or "stream" (+ stream).
        index: the trace's TraceIndex.

    Returns:
        Frame: key columns, busy_ns, first_ns, last_ns, span_ns, idle_ns (span - busy), busy_pct
        (100 * busy / span), records. Empty when the trace has no GPU records.
    """
    ix = TraceIndex.of(trace, index)
    return ix.get(BUSY_SLOT, lambda: _busy_time(ix, per), per)


def _busy_time(ix: TraceIndex, per: Per) -> pl.DataFrame:
    keys = PER_KEYS[per]
    g, _, s, e = ix.sorted_intervals(per)
    if g.n_groups == 0:
        return _empty_busy(g.keys, keys)
    first_row = g.bounds[:-1]
    mg, ms, me = busy_union(ix.trace, per, index=ix)
    busy = np.add.reduceat(me - ms, np.searchsorted(mg, np.arange(g.n_groups)))  # every group has an interval
    last = np.maximum.reduceat(e, first_row)
    first = s[first_row]
    span = last - first
    records = np.diff(g.bounds)
    return g.keys.with_columns(
        busy_ns=pl.Series(busy),
        first_ns=pl.Series(first),
        last_ns=pl.Series(last),
        span_ns=pl.Series(span),
        idle_ns=pl.Series(span - busy),
        busy_pct=pl.Series(np.where(span > 0, 100.0 * busy / np.maximum(span, 1), 0.0)),
        records=pl.Series(records.astype(np.int64)),
    )


def _empty_busy(act: pl.DataFrame, keys: tuple[str, ...]) -> pl.DataFrame:
    cols = {c: pl.Int64 for c in ("busy_ns", "first_ns", "last_ns", "span_ns", "idle_ns")}
    return (
        act.select(keys)
        .clear()
        .cast({"node": pl.String})
        .with_columns(
            *[pl.lit(None, dtype=t).alias(c) for c, t in cols.items()],
            pl.lit(None, dtype=pl.Float64).alias("busy_pct"),
            pl.lit(None, dtype=pl.Int64).alias("records"),
        )
    )


def utilization_over_time(
    trace: Trace, bin_ns: int, per: Per = "device", t0_ns: int | None = None, *, index: TraceIndex | None = None
) -> pl.DataFrame:
    """GPU utilization in fixed bins: busy ns (union of GPU records) per bin, per group.

    Bins are aligned on one origin for every group (`t0_ns`, default the first GPU record of the
    trace) so rows of different devices and ranks line up.

    Args:
        trace: the trace.
        bin_ns: bin width in ns (> 0).
        per: "rank", "device" (default) or "stream".
        t0_ns: origin of bin 0.
        index: the trace's TraceIndex.

    Returns:
        Long frame: key columns, bin (int), bin_start_ns, busy_ns, utilization (busy / bin width,
        0-1). Every group has every bin.

    Raises:
        ValueError: bin_ns <= 0, or more than MAX_BINS cells.
    """
    from ktrace.analysis._kernels.intervals import busy_per_bin

    if bin_ns <= 0:
        raise ValueError("bin_ns must be > 0")
    ix = TraceIndex.of(trace, index)
    g, _, s, e = ix.sorted_intervals(per)
    if g.n_groups == 0:
        return g.keys.with_columns(
            bin=pl.lit(0, pl.Int64),
            bin_start_ns=pl.lit(0, pl.Int64),
            busy_ns=pl.lit(0, pl.Int64),
            utilization=pl.lit(0.0),
        ).clear()
    t0 = int(s.min()) if t0_ns is None else int(t0_ns)
    n_bins = max(1, -(-(int(e.max()) - t0) // bin_ns))
    if n_bins * g.n_groups > MAX_BINS:
        raise ValueError(f"{n_bins} bins x {g.n_groups} groups is too many; use a wider bin than {bin_ns} ns")
    mg, ms, me = busy_union(trace, per, index=ix)
    busy = busy_per_bin(mg, ms, me, t0, bin_ns, n_bins, g.n_groups)
    bins = np.arange(n_bins, dtype=np.int64)
    idx = np.repeat(np.arange(g.n_groups), n_bins)
    return g.keys[idx].with_columns(
        bin=pl.Series(np.tile(bins, g.n_groups)),
        bin_start_ns=pl.Series(np.tile(t0 + bins * bin_ns, g.n_groups)),
        busy_ns=pl.Series(busy.reshape(-1)),
        utilization=pl.Series(busy.reshape(-1) / float(bin_ns)),
    )


def active_time_share(trace: Trace, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """Share of time the GPUs and CPUs were active, by timeline and by counters.

    - GPU, method "timeline": busy / span per (node, rank, device) from busy_time.
    - GPU, method "counter": share of `gpu.util` samples > 0 per (node, instance) (SageMaker's
      "GPU active time"), with the mean utilization.
    - CPU, method "counter": share of `cpu.util` samples > 0 per node, with the mean utilization.
    - CPU, method "timeline" (only for ranks whose node has no cpu.util counter): union of api, ops
      and ranges intervals over all threads of the rank (profiler-step ranges excluded: they cover
      the whole loop), divided by the rank's CPU span.

    Args:
        trace: the trace.
        index: the trace's TraceIndex.

    Returns:
        Frame: node, rank (-1 for node-level counters), resource ("gpu" | "cpu"), instance (device
        or counter instance, -1 for the whole CPU), method, active_share (0-1), mean_util (0-100, null
        for the timeline method), samples.
    """
    ix = TraceIndex.of(trace, index)
    parts = [_gpu_timeline_share(ix), *_counter_shares(trace), _cpu_timeline_share(ix)]
    parts = [p for p in parts if p.height]
    if not parts:
        return _share_frame(pl.DataFrame()).clear()
    return pl.concat(parts, how="vertical_relaxed").sort("resource", "node", "rank", "instance", "method")


_SHARE_SCHEMA = {
    "node": pl.String,
    "rank": pl.Int32,
    "resource": pl.String,
    "instance": pl.Int32,
    "method": pl.String,
    "active_share": pl.Float64,
    "mean_util": pl.Float64,
    "samples": pl.Int64,
}


def _share_frame(frame: pl.DataFrame) -> pl.DataFrame:
    if frame.height == 0:
        return pl.DataFrame(schema=_SHARE_SCHEMA)
    return frame.select(list(_SHARE_SCHEMA)).cast(_SHARE_SCHEMA)  # type: ignore[arg-type]


def _i64(frame: pl.DataFrame, col: str) -> npt.NDArray[np.int64]:
    return frame[col].to_numpy().astype(np.int64, copy=False)


def _gpu_timeline_share(ix: TraceIndex) -> pl.DataFrame:
    b = busy_time(ix.trace, per="device", index=ix)
    return _share_frame(
        b.with_columns(
            resource=pl.lit("gpu"),
            instance=pl.col("device"),
            method=pl.lit("timeline"),
            active_share=pl.when(pl.col("span_ns") > 0).then(pl.col("busy_ns") / pl.col("span_ns")).otherwise(0.0),
            mean_util=pl.lit(None, pl.Float64),
            samples=pl.col("records"),
        )
    )


def _counter_shares(trace: Trace) -> list[pl.DataFrame]:
    c = trace.counters
    out = []
    for metric, resource in (("gpu.util", "gpu"), ("cpu.util", "cpu")):
        rows = c.filter(pl.col("metric").cast(pl.String) == metric)
        if rows.height == 0:
            continue
        agg = rows.group_by(pl.col("node").cast(pl.String), "rank", pl.col("instance").fill_null(-1)).agg(
            active_share=(pl.col("value") > 0).mean(), mean_util=pl.col("value").mean(), samples=pl.len()
        )
        out.append(_share_frame(agg.with_columns(resource=pl.lit(resource), method=pl.lit("counter"))))
    return out


def _cpu_timeline_share(ix: TraceIndex) -> pl.DataFrame:
    from ktrace.analysis._kernels.intervals import union_length

    trace = ix.trace
    with_counter = (
        trace.counters.filter(pl.col("metric").cast(pl.String) == "cpu.util")
        .select(pl.col("node").cast(pl.String))
        .unique()
        .to_series()
        .to_list()
    )
    ranges = trace.ranges.filter(~pl.col("on_gpu") & (pl.col("domain").cast(pl.String) != "profiler_step"))
    # Python frames (a thread's whole run, a sleeping monitor's) are not work; the operators' four columns only
    # (filtering every column of 3.3 M operator rows first cost ~170 MB at owlv2 x150)
    ops = trace.ops.lazy().filter(IS_OPERATOR).select("node", "rank", "start_ns", "end_ns").collect()
    frames = [f.select("node", "rank", "start_ns", "end_ns") for f in (trace.api, ops, ranges)]
    if with_counter or ops.height < trace.ops.height:
        frames = [f.filter(~pl.col("node").is_in(with_counter)) for f in frames]
        keys, ids = node_rank_ids(frames)
    else:  # whole api/ops tables: reuse the rank ids the index holds for them
        range_keys, (range_ids,) = node_rank_ids([frames[2]])
        keys, ids = combine_rank_ids([ix.table_rank_ids("api"), ix.table_rank_ids("ops"), (range_keys, range_ids)])
    if not sum(f.height for f in frames):
        return _share_frame(pl.DataFrame())
    gid = np.concatenate(ids)
    start = np.concatenate([_i64(f, "start_ns") for f in frames])
    perm, bounds = time_order(gid, keys.height, start)
    s = start[perm]
    del start
    e = np.concatenate([_i64(f, "end_ns") for f in frames])[perm]
    busy = union_length(gid[perm], s, e, keys.height)
    span = np.maximum.reduceat(e, bounds[:-1]) - s[bounds[:-1]]
    return _share_frame(
        keys.with_columns(
            resource=pl.lit("cpu"),
            instance=pl.lit(-1),
            method=pl.lit("timeline"),
            active_share=pl.Series(np.where(span > 0, busy / np.maximum(span, 1), 0.0)),
            mean_util=pl.lit(None, pl.Float64),
            samples=pl.Series(np.diff(bounds)),
        )
    )
