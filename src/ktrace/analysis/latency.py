"""Launch-to-run latency of every GPU record (kernels, memcpy, memset), both definitions, and percentiles.

API:

- ``launch_latency(trace) -> pl.DataFrame``: one row per GPU record joined to its launch API call
  through (node, rank, correlation_id).
- ``latency_stats(trace, by="name", graph_runs="all", quantiles=QUANTILES) -> pl.DataFrame``:
  count, mean, percentiles and max of both latencies (and of the API duration) per group.
- ``unlaunched_count(trace) -> int``: GPU records with no launch call in the trace.
- ``launches(trace) -> pl.DataFrame``: the launch calls, one per (node, rank, correlation_id).

Definitions (shared/reference/analyses.md §6), both always reported, in ns:

- ``launch_latency_ns`` = run start - API call start ("start->start", NVIDIA's "launch latency").
- ``queue_delay_ns`` = run start - API call end ("end->start": HTA's "launch delay", nsys'
  "queue time"). Negative when the record starts before the call returns; not clipped (HTA clips
  at 0, nsys counts only positive values: `queued` below is nsys' QCount flag).

CUDA graphs: one `cudaGraphLaunch` fans out to many GPU records with one correlation id. Every run
gets the launch and its own latency; `graph_run` numbers the runs of one launch by start time, and
`latency_stats(graph_runs="first")` keeps only each launch's first run, so that its counts are launch calls
and its API-call times count each call once (the summary's latency table uses it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.columns import KINDS, dense_ids
from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.steps import step_of_launches
from ktrace.analysis.utilization import names_matching
from ktrace.model.trace import Trace

QUANTILES = (0.5, 0.9, 0.95, 0.99)
JOIN_KEYS = ("node", "rank", "correlation_id")
BY_ALIASES: dict[str, tuple[str, ...]] = {
    "name": ("name",),
    "kind": ("kind",),
    "api": ("api_name",),
    "stream": ("node", "rank", "device", "stream"),
    "device": ("node", "rank", "device"),
    "rank": ("node", "rank"),
    "step": ("step",),
}
"""`by=` shorthands -> group columns; any column of launch_latency (or "step") may also be named."""

_LAUNCHES = Slot[pl.DataFrame]("launches")
_LAUNCH_LATENCY = Slot[pl.DataFrame]("launch_latency")
_LATENCY_STATS = Slot[pl.DataFrame]("latency_stats")
_API_COLS = ("api_name", "api_start_ns", "api_end_ns", "pid", "tid")


def launches(trace: Trace, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """Launch API calls with a correlation id: node, rank, correlation_id, api_name, api_start_ns,
    api_end_ns, pid, tid; one per (node, rank, correlation_id) (the earliest if a source repeats one).
    Shared through the index."""
    return TraceIndex.of(trace, index).get(_LAUNCHES, lambda: _launches(trace))


def _launches(trace: Trace) -> pl.DataFrame:
    api = trace.api.filter(pl.col("correlation_id").is_not_null() & (pl.col("correlation_id") != 0))
    api = api.select(
        "node",
        "rank",
        "correlation_id",
        pl.col("name").alias("api_name"),
        pl.col("start_ns").alias("api_start_ns"),
        pl.col("end_ns").alias("api_end_ns"),
        "pid",
        "tid",
    )
    if api.height == 0 or api["correlation_id"].n_unique() == api.height:
        return api  # ids unique over the whole trace: nothing to drop (cheap check first)
    if not api.select(pl.struct(list(JOIN_KEYS)).is_duplicated().any()).item():
        return api
    # A correlation id names one call per process; if a source repeats one, keep the earliest call.
    return api.sort("api_start_ns").unique(subset=list(JOIN_KEYS), keep="first", maintain_order=True)


def launch_latency(trace: Trace, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """See _launch_latency; shared through the index."""
    ix = TraceIndex.of(trace, index)
    return ix.get(_LAUNCH_LATENCY, lambda: _launch_latency(ix))


def _launch_latency(ix: TraceIndex) -> pl.DataFrame:
    """Every GPU record with a launch call in the trace, with both latencies.

    Args:
        ix: the trace's index.

    Returns:
        Frame: node, rank, device, stream (-1 if unknown), kind ("kernel" | "memcpy" | "memset"),
        name, row (row in its source table), correlation_id, start_ns, end_ns, duration_ns,
        api_name, api_start_ns, api_end_ns, api_duration_ns, pid, tid, launch_latency_ns,
        queue_delay_ns, queued (queue_delay_ns > 0), is_graph, graph_run (0 for the first run of a
        launch). Records without a launch are left out (count them with unlaunched_count).
    """
    rows = ix.launch_rows()
    hit = np.flatnonzero(rows >= 0)
    api = ix.trace.api.select(
        pl.col("name").alias("api_name"),
        pl.col("start_ns").alias("api_start_ns"),
        pl.col("end_ns").alias("api_end_ns"),
        "pid",
        "tid",
    )
    joined = pl.concat([ix.gpu_activity(with_names=True)[hit], api[rows[hit]]], how="horizontal")
    lau = api
    graph_apis = names_matching(lau, "api_name", "Graph")
    out = joined.with_columns(
        duration_ns=pl.col("end_ns") - pl.col("start_ns"),
        api_duration_ns=pl.col("api_end_ns") - pl.col("api_start_ns"),
        launch_latency_ns=pl.col("start_ns") - pl.col("api_start_ns"),
        queue_delay_ns=pl.col("start_ns") - pl.col("api_end_ns"),
        is_graph=pl.col("graph_id").is_not_null() | pl.col("api_name").is_in(graph_apis),
    ).with_columns(queued=pl.col("queue_delay_ns") > 0)
    graph = out.filter(pl.col("is_graph"))
    if graph.height:
        graph = graph.with_columns(
            graph_run=(pl.col("start_ns").rank("ordinal").over(list(JOIN_KEYS)) - 1).cast(pl.Int64)
        )
    plain = out.filter(~pl.col("is_graph")).with_columns(graph_run=pl.lit(0, pl.Int64))
    out = pl.concat([plain, graph]) if graph.height else plain
    return out.select(
        "node",
        "rank",
        "device",
        "stream",
        "kind",
        "name",
        "row",
        "correlation_id",
        "start_ns",
        "end_ns",
        "duration_ns",
        *_API_COLS,
        "api_duration_ns",
        "launch_latency_ns",
        "queue_delay_ns",
        "queued",
        "is_graph",
        "graph_run",
    )


def unlaunched_count(trace: Trace, *, index: TraceIndex | None = None) -> int:
    """GPU records (kernels, memcpy, memset) whose launch call is not in the trace."""
    return int((TraceIndex.of(trace, index).launch_rows() < 0).sum())


def _group_columns(by: str | Sequence[str]) -> list[str]:
    names = [by] if isinstance(by, str) else list(by)
    cols: list[str] = []
    for name in names:
        for c in BY_ALIASES.get(name, (name,)):
            if c not in cols:
                cols.append(c)
    return cols


def latency_stats(
    trace: Trace,
    by: str | Sequence[str] = "name",
    graph_runs: Literal["all", "first"] = "all",
    quantiles: Sequence[float] = QUANTILES,
    *,
    index: TraceIndex | None = None,
) -> pl.DataFrame:
    """Percentiles of both launch latencies (and of the launch call's duration) per group.

    Args:
        trace: the trace.
        by: a shorthand ("name", "kind", "api", "stream", "device", "rank", "step") or column names of
            launch_latency, or a sequence of them. "name" groups across ranks; add "rank" for per rank.
            "step" attributes each record to the step whose range contains its launch call
            (steps.detect_steps); records outside every step get a null step.
        graph_runs: "all" (every run of a graph launch) or "first" (one per launch call: its first record,
            TraceIndex.launch_runs; the same rows as graph_run == 0).
        quantiles: percentiles to report (linear interpolation), as fractions.
        index: the trace's TraceIndex.

    Returns:
        Frame sorted by count descending: group columns, count, queued (nsys QCount), and for each of
        launch_latency_ns, queue_delay_ns, api_duration_ns: _mean, _p50, _p90, ... , _max (floats).
    """
    cols = _group_columns(by)
    ix = TraceIndex.of(trace, index)
    if set(cols) <= set(_FAST_BY):
        return ix.get(
            _LATENCY_STATS,
            lambda: _fast_latency_stats(ix, cols, tuple(quantiles), graph_runs),
            tuple(cols),
            tuple(quantiles),
            graph_runs,
        )
    lat = launch_latency(trace, index=ix)
    if graph_runs == "first":
        lat = lat.filter(pl.col("graph_run") == 0)
    if "step" in cols:
        lat = step_of_launches(trace, lat, index=ix)
    aggs: list[pl.Expr] = [pl.len().alias("count"), pl.col("queued").sum().cast(pl.Int64).alias("queued")]
    for col in ("launch_latency_ns", "queue_delay_ns", "api_duration_ns"):
        c = pl.col(col).cast(pl.Float64)
        aggs.append(c.mean().alias(f"{col}_mean"))
        aggs += [c.quantile(q, interpolation="linear").alias(f"{col}_p{quantile_suffix(q)}") for q in quantiles]
        aggs.append(c.max().alias(f"{col}_max"))
    out = lat.group_by(cols).agg(aggs).sort(["count", *cols], descending=[True] + [False] * len(cols))
    return out.with_columns(pl.col(pl.Categorical).cast(pl.String))


def quantile_suffix(q: float) -> str:
    """Column suffix of quantile `q`: 0.5 -> "50", 0.999 -> "99_9"."""
    p = round(q * 100, 3)
    return str(int(p)) if p == int(p) else str(p).replace(".", "_")


_FAST_BY = ("node", "rank", "device", "stream", "kind", "name")
_METRICS = ("launch_latency_ns", "queue_delay_ns", "api_duration_ns")


def _group_codes(ix: TraceIndex, col: str) -> tuple[npt.NDArray[np.int64], pl.Series]:
    """(code per GPU record, the value of each code) for one group column, codes in sort order."""
    c = ix.gpu_columns()
    if col == "node":
        nodes = c.rank_keys["node"]
        uniq = nodes.unique().sort()
        return np.searchsorted(uniq.to_numpy(), nodes.to_numpy()).astype(np.int64)[c.rank_id], uniq
    if col == "rank":
        return c.rank_keys["rank"].to_numpy().astype(np.int64)[c.rank_id], pl.Series(dtype=pl.Int32)
    if col in ("device", "stream"):
        return getattr(c, col), pl.Series(dtype=pl.Int32 if col == "device" else pl.Int64)
    if col == "kind":
        return c.kind, pl.Series(list(KINDS), dtype=pl.String)
    return ix.record_names()


def _fast_latency_stats(
    ix: TraceIndex, cols: list[str], quantiles: tuple[float, ...], graph_runs: Literal["all", "first"]
) -> pl.DataFrame:
    """latency_stats over arrays: launch_rows + dense group ids + one grouping pass + exact order statistics."""
    from ktrace.analysis._kernels.groups import linear_quantiles
    from ktrace.analysis._kernels.scatter import launch_groups

    c = ix.gpu_columns()
    rows = ix.launch_rows()
    runs = ix.launch_runs() if graph_runs == "first" else None
    if runs is not None and runs.fans_out:  # the later records of a call count as not launched
        first = np.full(rows.size, -1, np.int64)
        first[runs.first] = rows[runs.first]
        rows = first
    coded = [_group_codes(ix, col) for col in cols]
    gid, uniq = dense_ids([code for code, _ in coded]) if cols else (np.zeros(c.size, np.int64), [])
    n_groups = int(uniq[0].size) if cols else 1
    count, queued, totals, maxima, bounds, values = launch_groups(rows, *ix.api_times(), c.start, gid, n_groups)
    keep = np.flatnonzero(count > 0)  # groups of launched records only
    count = count[keep]
    out: dict[str, pl.Series] = {}
    for col, (_, labels), u in zip(cols, coded, uniq, strict=True):
        u = u[keep]
        out[col] = labels.gather(u) if labels.len() else pl.Series(col, u, dtype=labels.dtype)
    out["count"] = pl.Series(count, dtype=pl.UInt32)
    out["queued"] = pl.Series(queued[keep], dtype=pl.Int64)
    seg = np.append(bounds[keep], bounds[-1]) if keep.size else np.zeros(1, np.int64)
    for j, name in enumerate(_METRICS):
        q = linear_quantiles(values[j], seg, quantiles)
        out[f"{name}_mean"] = pl.Series(totals[j][keep].astype(np.float64) / np.maximum(count, 1))
        for k, x in enumerate(quantiles):
            out[f"{name}_p{quantile_suffix(x)}"] = pl.Series(q[:, k])
        out[f"{name}_max"] = pl.Series(maxima[j][keep].astype(np.float64))
    frame = pl.DataFrame({k: v.alias(k) for k, v in out.items()})
    return frame.sort(["count", *cols], descending=[True] + [False] * len(cols))
