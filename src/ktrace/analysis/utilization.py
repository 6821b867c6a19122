"""GPU busy/idle time, utilization over time, and GPU/CPU active-time shares.

API:

- ``gpu_activity(trace, with_names=False) -> pl.DataFrame``: kernels + memcpy + memset as one frame
  (node String, rank, device, stream (null -> -1), kind, start_ns, end_ns, correlation_id, graph_id
  [, name]).
- ``grouped(frame, keys, order="start_ns") -> Grouped``: frame sorted by keys+order with dense group ids;
  ``change_flags(frame, keys)``: True where the keys change (row 0 included);
  ``names_matching(frame, col, pattern)``: distinct values of a column matching a regex.
- ``activity_grouped(trace, per) -> Grouped``; ``memo(trace, key, compute)``: per-trace memo.
- ``busy_time(trace, per="device") -> pl.DataFrame``: per "rank" | "device" | "stream": busy_ns (union
  of kernel+memcpy+memset intervals; concurrent streams counted once per device), first_ns, last_ns,
  span_ns, idle_ns, busy_pct, records.
- ``utilization_over_time(trace, bin_ns, per="device", t0_ns=None) -> pl.DataFrame``: busy ns and
  utilization (0-1) per fixed bin per (node, rank, device[, stream]).
- ``active_time_share(trace) -> pl.DataFrame``: GPU and CPU active-time share, from the timeline and
  from counters, with the method named in a column.

Definitions: "busy" is the timeline union of GPU records (HTA/TensorBoard semantics, not nsys' sum of
concurrent ops and not counter samples). GPU-side sync records are not busy time (they measure a
wait). Spans run from a group's first record start to its last record end.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.model.trace import Trace

Per = Literal["rank", "device", "stream"]
T = TypeVar("T")
_MEMO: dict[int, tuple[weakref.ref[Trace], dict[Hashable, Any], dict[Hashable, threading.RLock]]] = {}
_MEMO_LOCK = threading.Lock()
PER_KEYS: dict[str, tuple[str, ...]] = {
    "rank": ("node", "rank"),
    "device": ("node", "rank", "device"),
    "stream": ("node", "rank", "device", "stream"),
}
MAX_BINS = 20_000_000
"""utilization_over_time refuses more (groups x bins) cells than this."""

_ACTIVITY_SCHEMA = {"node": pl.Categorical, "rank": pl.Int32, "device": pl.Int32, "stream": pl.Int64,
                    "kind": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64,
                    "correlation_id": pl.Int64, "graph_id": pl.Int64}


def memory_name_expr() -> pl.Expr:
    """The display name of a memory-table row: "Memset" or "Memcpy <copy kind>" (as Kineto names them)."""
    return pl.when(pl.col("op").cast(pl.String) == "memset").then(pl.lit("Memset")).otherwise(
        pl.concat_str([pl.lit("Memcpy "), pl.col("copy_kind").cast(pl.String)]))


def gpu_activity(trace: Trace, with_names: bool = False) -> pl.DataFrame:
    """Every GPU record (kernel, memcpy, memset) as one frame.

    Args:
        trace: the trace.
        with_names: add a String `name` column (kernel name, or "Memcpy HtoD" / "Memset").

    Returns:
        Frame with node, rank, device, stream (null -> -1), kind ("kernel" | "memcpy" | "memset"),
        start_ns, end_ns, correlation_id, graph_id, row (row index in its source table) and optionally
        name; node, kind and name are Categorical (like the Trace's own tables). Memoized per trace.
    """
    return memo(trace, ("gpu_activity", with_names), lambda: _gpu_activity(trace, with_names))


def _gpu_activity(trace: Trace, with_names: bool) -> pl.DataFrame:
    base: list[str | pl.Expr] = ["node", "rank", "device", pl.col("stream").fill_null(-1)]
    k = trace.kernels.select(*base, pl.lit("kernel").alias("kind"), "start_ns", "end_ns", "correlation_id",
                             "graph_id", *(["name"] if with_names else []))
    memory_name = memory_name_expr()
    m = trace.memory.select(*base, pl.col("op").cast(pl.String).alias("kind"), "start_ns", "end_ns",
                            "correlation_id", "graph_id",
                            *([memory_name.cast(pl.Categorical).alias("name")] if with_names else []))
    k = k.with_row_index("row")
    m = m.with_row_index("row")
    frames = [f for f in (k, m) if f.height] or [k]
    out = pl.concat(frames, how="vertical_relaxed")
    return out.cast({**_ACTIVITY_SCHEMA, "row": pl.UInt32, "kind": pl.Categorical})  # type: ignore[dict-item]


@dataclass(frozen=True)
class Grouped:
    """A frame sorted by (keys, order column) with a dense group id per row."""

    frame: pl.DataFrame
    """The sorted frame."""
    gid: npt.NDArray[np.int64]
    """Group id per row (0..n_groups-1), non-decreasing."""
    keys: pl.DataFrame
    """One row per group (the key columns), in group-id order."""
    first: npt.NDArray[np.int64]
    """Index of each group's first row in `frame`."""

    @property
    def n_groups(self) -> int:
        """Number of groups."""
        return self.keys.height


def grouped(frame: pl.DataFrame, keys: tuple[str, ...], order: str | tuple[str, ...] = "start_ns") -> Grouped:
    """Sort by keys then `order`, and number the groups densely.

    Sorting avoids a multi-column sort: groups are numbered by hashing the keys, rows are put in
    `order` with a stable sort (timsort: near linear on the nearly sorted times traces hold) and then
    stably by group id (radix sort on small integers).

    Args:
        frame: any frame with the key columns and the order column(s) (no nulls in keys).
        keys: grouping columns.
        order: column(s) sorted within each group.

    Returns:
        A Grouped.
    """
    if frame.height == 0:
        return Grouped(frame, np.zeros(0, np.int64), frame.select(keys), np.zeros(0, np.int64))
    gid = _dense_ids(frame, keys)
    perm = np.arange(frame.height)
    for col in reversed((order,) if isinstance(order, str) else order):
        perm = perm[np.argsort(frame[col].to_numpy()[perm], kind="stable")]
    perm = perm[np.argsort(gid[perm], kind="stable")]
    sorted_frame = frame[perm]
    gid_sorted = gid[perm].astype(np.int64)
    first = np.flatnonzero(np.diff(gid_sorted, prepend=-1)).astype(np.int64)
    key_rows = sorted_frame.select(keys)[first]
    if "node" in keys and key_rows.schema["node"] != pl.String:
        key_rows = key_rows.with_columns(pl.col("node").cast(pl.String))
    return Grouped(sorted_frame, gid_sorted, key_rows, first)


def _lexical_codes(col: pl.Series) -> npt.NDArray[np.int64]:
    """Codes of a Categorical that sort like its strings (physical ids follow first-seen order)."""
    distinct = col.unique().drop_nulls()
    phys = distinct.to_physical().to_numpy().astype(np.int64)
    remap = np.zeros(int(phys.max()) + 1 if phys.size else 1, np.int64)
    remap[phys[np.argsort(distinct.cast(pl.String).to_numpy())]] = np.arange(phys.size)
    return remap[col.to_physical().to_numpy().astype(np.int64)]


def _dense_ids(frame: pl.DataFrame, keys: tuple[str, ...]) -> npt.NDArray[Any]:
    """Dense group id per row (uint16 when it fits), numbering groups in mixed-radix key order."""
    code = np.zeros(frame.height, np.int64)
    radix = 1
    for key in keys:
        col = frame[key]
        if col.dtype in (pl.Categorical, pl.String):
            a = _lexical_codes(col.cast(pl.Categorical))
        else:
            a = col.to_numpy().astype(np.int64, copy=False)
        lo, hi = int(a.min()), int(a.max())
        radix *= hi - lo + 1
        if radix > 2**62:  # keys too spread out for one int64: let polars rank the struct
            rank = frame.select(pl.struct(list(keys)).rank("dense").alias("g"))["g"].to_numpy()
            return (rank - 1).astype(np.int64)
        code = code * (hi - lo + 1) + (a - lo)
    uniq = np.sort(pl.Series(code).unique().to_numpy())
    gid = np.searchsorted(uniq, code)
    return gid.astype(np.uint16) if uniq.size <= 65535 else gid.astype(np.int64)


def memo(trace: Trace, key: Hashable, compute: Callable[[], T]) -> T:
    """compute() once per (trace, key) while the trace lives (analyses share joins and sorts).

    Thread-safe: a thread asking for a key another thread is computing waits for that result (summarize
    runs independent analyses in threads). Results are shared values (polars frames, tuples of arrays)
    that callers never mutate. With KTRACE_READONLY_SHARED=1 (the test suite sets it) their numpy arrays
    are made read-only, so a caller that writes into one fails loudly instead of changing every other
    analysis's numbers; it is off by default because read-only arrays are another numba type, and
    compiling both variants costs about 2 s on a first run.
    """
    with _MEMO_LOCK:
        entry = _MEMO.get(id(trace))
        if entry is None or entry[0]() is not trace:
            entry = (weakref.ref(trace), {}, {})
            _MEMO[id(trace)] = entry
            weakref.finalize(trace, _MEMO.pop, id(trace), None)
        values, locks = entry[1], entry[2]
        if key in values:
            return values[key]
        lock = locks.setdefault(key, threading.RLock())
    with lock:
        if key not in values:
            value = compute()
            values[key] = _read_only(value) if os.environ.get("KTRACE_READONLY_SHARED") == "1" else value
        return values[key]


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


def change_flags(frame: pl.DataFrame, keys: tuple[str, ...]) -> npt.NDArray[np.bool_]:
    """True at each row whose key columns differ from the previous row's (and at row 0)."""
    if frame.height == 0:
        return np.zeros(0, dtype=bool)
    change = pl.lit(False)
    for key in keys:
        change = change | (pl.col(key) != pl.col(key).shift(1)).fill_null(True)
    return frame.select(change.alias("c"))["c"].to_numpy().astype(bool)


def _i64(frame: pl.DataFrame, col: str) -> npt.NDArray[np.int64]:
    return frame[col].to_numpy().astype(np.int64, copy=False)


def activity_grouped(trace: Trace, per: Per) -> Grouped:
    """gpu_activity (key columns, start_ns, end_ns) grouped per rank/device/stream; memoized per trace."""
    keys = PER_KEYS[per]
    return memo(trace, ("activity_grouped", per),
                lambda: grouped(gpu_activity(trace).select(*keys, "start_ns", "end_ns"), keys))


def busy_time(trace: Trace, per: Per = "device") -> pl.DataFrame:
    """GPU busy and idle time per rank, device or stream.

    Args:
        trace: the trace.
        per: "rank" (node, rank), "device" (node, rank, device) or "stream" (+ stream).

    Returns:
        Frame: key columns, busy_ns, first_ns, last_ns, span_ns, idle_ns (span - busy), busy_pct
        (100 * busy / span), records. Empty when the trace has no GPU records.
    """
    return memo(trace, ("busy_time", per), lambda: _busy_time(trace, per))


def sorted_intervals(trace: Trace, per: Per) -> tuple[Any, npt.NDArray[np.int64], npt.NDArray[np.int64],
                                                       npt.NDArray[np.int64]]:
    """(columns.RowGroups, group id, start, end) of the GPU records in (group, start) order (memoized)."""
    return memo(trace, ("sorted_intervals", per), lambda: _sorted_intervals(trace, per))


def _sorted_intervals(trace: Trace, per: Per) -> tuple[Any, npt.NDArray[np.int64], npt.NDArray[np.int64],
                                                        npt.NDArray[np.int64]]:
    from ktrace.analysis.columns import row_groups, sorted_times

    g = row_groups(trace, per)
    if g.n_groups == 1:  # calloc'd zeros: no pass, no memory written
        gid = np.zeros(int(g.bounds[-1]), np.int64)
    else:
        gid = np.repeat(np.arange(g.n_groups, dtype=np.int64), np.diff(g.bounds))
    return (g, gid, *sorted_times(trace, per))


def _busy_time(trace: Trace, per: Per) -> pl.DataFrame:
    from ktrace.analysis._kernels.intervals import union_length

    keys = PER_KEYS[per]
    g, gid, s, e = sorted_intervals(trace, per)
    if g.n_groups == 0:
        return _empty_busy(g.keys, keys)
    first_row = g.bounds[:-1]
    busy = union_length(gid, s, e, g.n_groups)
    last = np.maximum.reduceat(e, first_row)
    first = s[first_row]
    span = last - first
    records = np.diff(g.bounds)
    return g.keys.with_columns(
        busy_ns=pl.Series(busy), first_ns=pl.Series(first), last_ns=pl.Series(last), span_ns=pl.Series(span),
        idle_ns=pl.Series(span - busy),
        busy_pct=pl.Series(np.where(span > 0, 100.0 * busy / np.maximum(span, 1), 0.0)),
        records=pl.Series(records.astype(np.int64)))


def _empty_busy(act: pl.DataFrame, keys: tuple[str, ...]) -> pl.DataFrame:
    cols = {c: pl.Int64 for c in ("busy_ns", "first_ns", "last_ns", "span_ns", "idle_ns")}
    return act.select(keys).clear().cast({"node": pl.String}).with_columns(
        *[pl.lit(None, dtype=t).alias(c) for c, t in cols.items()],
        pl.lit(None, dtype=pl.Float64).alias("busy_pct"), pl.lit(None, dtype=pl.Int64).alias("records"))


def utilization_over_time(trace: Trace, bin_ns: int, per: Per = "device", t0_ns: int | None = None) -> pl.DataFrame:
    """GPU utilization in fixed bins: busy ns (union of GPU records) per bin, per group.

    Bins are aligned on one origin for every group (`t0_ns`, default the first GPU record of the
    trace) so rows of different devices and ranks line up.

    Args:
        trace: the trace.
        bin_ns: bin width in ns (> 0).
        per: "rank", "device" (default) or "stream".
        t0_ns: origin of bin 0.

    Returns:
        Long frame: key columns, bin (int), bin_start_ns, busy_ns, utilization (busy / bin width,
        0-1). Every group has every bin.

    Raises:
        ValueError: bin_ns <= 0, or more than MAX_BINS cells.
    """
    from ktrace.analysis._kernels.intervals import busy_per_bin, merge_intervals

    if bin_ns <= 0:
        raise ValueError("bin_ns must be > 0")
    g, gid, s, e = sorted_intervals(trace, per)
    if g.n_groups == 0:
        return g.keys.with_columns(bin=pl.lit(0, pl.Int64), bin_start_ns=pl.lit(0, pl.Int64),
                                   busy_ns=pl.lit(0, pl.Int64), utilization=pl.lit(0.0)).clear()
    t0 = int(s.min()) if t0_ns is None else int(t0_ns)
    n_bins = max(1, -(-(int(e.max()) - t0) // bin_ns))
    if n_bins * g.n_groups > MAX_BINS:
        raise ValueError(f"{n_bins} bins x {g.n_groups} groups is too many; use a wider bin than {bin_ns} ns")
    mg, ms, me = merge_intervals(gid, s, e)
    busy = busy_per_bin(mg, ms, me, t0, bin_ns, n_bins, g.n_groups)
    bins = np.arange(n_bins, dtype=np.int64)
    idx = np.repeat(np.arange(g.n_groups), n_bins)
    return g.keys[idx].with_columns(
        bin=pl.Series(np.tile(bins, g.n_groups)), bin_start_ns=pl.Series(np.tile(t0 + bins * bin_ns, g.n_groups)),
        busy_ns=pl.Series(busy.reshape(-1)), utilization=pl.Series(busy.reshape(-1) / float(bin_ns)))


def active_time_share(trace: Trace) -> pl.DataFrame:
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

    Returns:
        Frame: node, rank (-1 for node-level counters), resource ("gpu" | "cpu"), instance (device
        or counter instance, -1 for the whole CPU), method, active_share (0-1), mean_util (0-100, null
        for the timeline method), samples.
    """
    parts = [_gpu_timeline_share(trace), *_counter_shares(trace), _cpu_timeline_share(trace)]
    parts = [p for p in parts if p.height]
    if not parts:
        return _share_frame(pl.DataFrame()).clear()
    return pl.concat(parts, how="vertical_relaxed").sort("resource", "node", "rank", "instance", "method")


_SHARE_SCHEMA = {"node": pl.String, "rank": pl.Int32, "resource": pl.String, "instance": pl.Int32,
                 "method": pl.String, "active_share": pl.Float64, "mean_util": pl.Float64, "samples": pl.Int64}


def _share_frame(frame: pl.DataFrame) -> pl.DataFrame:
    if frame.height == 0:
        return pl.DataFrame(schema=_SHARE_SCHEMA)
    return frame.select(list(_SHARE_SCHEMA)).cast(_SHARE_SCHEMA)  # type: ignore[arg-type]


def _gpu_timeline_share(trace: Trace) -> pl.DataFrame:
    b = busy_time(trace, per="device")
    return _share_frame(b.with_columns(
        resource=pl.lit("gpu"), instance=pl.col("device"), method=pl.lit("timeline"),
        active_share=pl.when(pl.col("span_ns") > 0).then(pl.col("busy_ns") / pl.col("span_ns")).otherwise(0.0),
        mean_util=pl.lit(None, pl.Float64), samples=pl.col("records")))


def _counter_shares(trace: Trace) -> list[pl.DataFrame]:
    c = trace.counters
    out = []
    for metric, resource in (("gpu.util", "gpu"), ("cpu.util", "cpu")):
        rows = c.filter(pl.col("metric").cast(pl.String) == metric)
        if rows.height == 0:
            continue
        agg = rows.group_by(pl.col("node").cast(pl.String), "rank", pl.col("instance").fill_null(-1)).agg(
            active_share=(pl.col("value") > 0).mean(), mean_util=pl.col("value").mean(), samples=pl.len())
        out.append(_share_frame(agg.with_columns(resource=pl.lit(resource), method=pl.lit("counter"))))
    return out


def _cpu_timeline_share(trace: Trace) -> pl.DataFrame:
    from ktrace.analysis._kernels.intervals import union_length
    from ktrace.analysis.columns import combine_rank_ids, node_rank_ids, table_rank_ids, time_order

    with_counter = trace.counters.filter(pl.col("metric").cast(pl.String) == "cpu.util").select(
        pl.col("node").cast(pl.String)).unique().to_series().to_list()
    ranges = trace.ranges.filter(~pl.col("on_gpu") & (pl.col("domain").cast(pl.String) != "profiler_step"))
    frames = [f.select("node", "rank", "start_ns", "end_ns") for f in (trace.api, trace.ops, ranges)]
    if with_counter:
        frames = [f.filter(~pl.col("node").is_in(with_counter)) for f in frames]
        keys, ids = node_rank_ids(frames)
    else:  # whole api/ops tables: reuse their memoized rank ids
        range_keys, (range_ids,) = node_rank_ids([frames[2]])
        keys, ids = combine_rank_ids([table_rank_ids(trace, "api"), table_rank_ids(trace, "ops"),
                                      (range_keys, range_ids)])
    if not sum(f.height for f in frames):
        return _share_frame(pl.DataFrame())
    gid = np.concatenate(ids)
    perm, bounds = time_order(gid, keys.height, np.concatenate([_i64(f, "start_ns") for f in frames]))
    s = np.concatenate([_i64(f, "start_ns") for f in frames])[perm]
    e = np.concatenate([_i64(f, "end_ns") for f in frames])[perm]
    busy = union_length(gid[perm], s, e, keys.height)
    span = np.maximum.reduceat(e, bounds[:-1]) - s[bounds[:-1]]
    return _share_frame(keys.with_columns(
        resource=pl.lit("cpu"), instance=pl.lit(-1), method=pl.lit("timeline"),
        active_share=pl.Series(np.where(span > 0, busy / np.maximum(span, 1), 0.0)),
        mean_util=pl.lit(None, pl.Float64), samples=pl.Series(np.diff(bounds))))
