"""Per-rank GPU busy and communication time in fixed time bins and in training steps.

The rank-level views (rank_heatmap, stragglers) read these two tables; both are computed from one rank's
records alone, so a worker holding one rank's partition computes exactly the rows the whole trace would give
for that rank (the map side of the fleet views).

API:

- ``HeatmapBins.over(start_ns, end_ns, max_bins=200)``: equal time bins over a span, at most `max_bins`.
- ``gpu_bins(trace) -> HeatmapBins``: those bins over the GPU records' span; ``job_bins`` the same bins from the
  spans of a job's parts (``gpu_span``, ``Trace.span_ns`` of each).
- ``rank_unions(trace) -> RankUnions``: per rank, the disjoint union of its GPU records (busy) and of its
  communication kernels (comm), shared through the index.
- ``time_bin_activity(trace, bins) -> pl.DataFrame``: busy and comm ns per (node, rank, bin).
- ``step_activity(trace) -> pl.DataFrame``: busy and comm ns inside each training step of each rank.

Definitions: busy = union of kernel, memcpy and memset records (utilization.busy_union); communication = the
kernels breakdown.record_types calls COMMUNICATION (NCCL/RCCL collectives, custom all-reduce), as a union.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.breakdown import KERNEL_TYPES, record_types
from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.phases import step_spans
from ktrace.analysis.utilization import busy_union
from ktrace.model.partition_spans import union_span
from ktrace.model.trace import Trace

I64 = npt.NDArray[np.int64]
MAX_TIME_BINS = 200
"""Time bins of the rank heatmap: 4,096 ranks x 200 bins stay under a million cells."""

_UNIONS = Slot["RankUnions"]("rank_unions")


@dataclass(frozen=True)
class HeatmapBins:
    """Equal time bins [t0 + k * bin_ns, t0 + (k + 1) * bin_ns), k < n_bins, shared by every rank of a job."""

    t0_ns: int
    bin_ns: int
    n_bins: int

    @classmethod
    def over(cls, start_ns: int, end_ns: int, max_bins: int = MAX_TIME_BINS) -> HeatmapBins:
        """At most `max_bins` bins of whole nanoseconds covering [start_ns, end_ns]."""
        span = max(1, end_ns - start_ns)
        n = max(1, min(max_bins, span))
        bin_ns = -(-span // n)
        return cls(start_ns, bin_ns, max(1, -(-span // bin_ns)))


def gpu_bins(trace: Trace, *, max_bins: int = MAX_TIME_BINS, index: TraceIndex | None = None) -> HeatmapBins:
    """HeatmapBins over the GPU records' span (first start to last end), the trace's span without any."""
    return job_bins([gpu_span(trace, index=index)], [trace.span_ns()], max_bins)


def gpu_span(trace: Trace, *, index: TraceIndex | None = None) -> tuple[int, int] | None:
    """(first start, last end) of the GPU records (kernels, memcpy, memset); None without any."""
    c = TraceIndex.of(trace, index).gpu_columns()
    return (int(c.start.min()), int(c.end.max())) if c.size else None


def job_bins(
    gpu_spans: Iterable[tuple[int, int] | None], spans: Iterable[tuple[int, int] | None], max_bins: int = MAX_TIME_BINS
) -> HeatmapBins:
    """gpu_bins of a job from the gpu_span and Trace.span_ns of each of its parts (the fleet driver reads them from
    the partitions' Parquet footers, model.partition_spans, or in a pass over them): bins over the union of the
    GPU spans, else over the union of the spans, else over [0, 1]."""
    for found in ([s for s in gpu_spans if s is not None], [s for s in spans if s is not None]):
        union = union_span(found)
        if union is not None:
            return HeatmapBins.over(*union, max_bins)
    return HeatmapBins.over(0, 1, max_bins)


@dataclass(frozen=True)
class RankUnions:
    """Disjoint busy and communication intervals of every rank, sorted by (rank id, start)."""

    keys: pl.DataFrame
    """One row per rank id: node (String), rank (Int32)."""
    busy: tuple[I64, I64, I64]
    """(rank id, start_ns, end_ns) of the union of every GPU record."""
    comm: tuple[I64, I64, I64]
    """(rank id, start_ns, end_ns) of the union of communication kernels."""


def rank_unions(trace: Trace, *, index: TraceIndex | None = None) -> RankUnions:
    """The busy and communication unions of every rank (see RankUnions), shared through the index."""
    ix = TraceIndex.of(trace, index)
    return ix.get(_UNIONS, lambda: _rank_unions(ix))


def _rank_unions(ix: TraceIndex) -> RankUnions:
    from ktrace.analysis._kernels.intervals import merge_intervals

    g, gid, s, e = ix.sorted_intervals("rank")
    comm = record_types(ix.trace, index=ix)[g.perm] == KERNEL_TYPES.index("COMMUNICATION")
    cg, cs, ce = merge_intervals(gid[comm], s[comm], e[comm])
    return RankUnions(g.keys, busy_union(ix.trace, "rank", index=ix), (cg.copy(), cs.copy(), ce.copy()))


def time_bin_activity(trace: Trace, bins: HeatmapBins, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """Busy and communication ns of every rank in every bin of `bins` (time outside the bins is ignored).

    Returns:
        Frame: node (String), rank (Int32), bin (Int64), busy_ns, comm_ns (Int64); every rank with a GPU
        record has every bin.
    """
    from ktrace.analysis._kernels.intervals import busy_per_bin

    u = rank_unions(trace, index=index)
    n = u.keys.height
    busy = busy_per_bin(*u.busy, bins.t0_ns, bins.bin_ns, bins.n_bins, n)
    comm = busy_per_bin(*u.comm, bins.t0_ns, bins.bin_ns, bins.n_bins, n)
    return u.keys[np.repeat(np.arange(n), bins.n_bins)].with_columns(
        bin=pl.Series(np.tile(np.arange(bins.n_bins, dtype=np.int64), n)),
        busy_ns=pl.Series(busy.reshape(-1), dtype=pl.Int64),
        comm_ns=pl.Series(comm.reshape(-1), dtype=pl.Int64),
    )


def step_activity(trace: Trace, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """Busy and communication ns inside each training step (phases.step_spans) of each rank.

    Returns:
        Frame: node (String), rank (Int32), step (Int64, 0-based per rank), start_ns, step_ns, busy_ns,
        comm_ns (Int64); empty without steps.
    """
    ix = TraceIndex.of(trace, index)
    spans = step_spans(trace, index=ix)
    u = rank_unions(trace, index=ix)
    ids = u.keys.with_row_index("gid").with_columns(pl.col("gid").cast(pl.Int64))
    found = spans.join(ids, on=["node", "rank"], how="left").with_columns(pl.col("gid").fill_null(-1))
    qg = found["gid"].to_numpy()
    a, b = found["start_ns"].to_numpy(), found["end_ns"].to_numpy()
    busy = covered_between(*u.busy, u.keys.height, qg, a, b)
    comm = covered_between(*u.comm, u.keys.height, qg, a, b)
    return found.select(
        "node",
        "rank",
        "step",
        "start_ns",
        step_ns=pl.col("end_ns") - pl.col("start_ns"),
        busy_ns=pl.Series(busy, dtype=pl.Int64),
        comm_ns=pl.Series(comm, dtype=pl.Int64),
    )


def covered_between(mg: I64, ms: I64, me: I64, n_groups: int, qg: I64, a: I64, b: I64) -> I64:
    """Time covered by each group's disjoint sorted intervals inside the windows [a, b) of group qg (-1: 0)."""
    out = np.zeros(qg.size, np.int64)
    lo = np.searchsorted(mg, np.arange(n_groups + 1))
    order = np.argsort(qg, kind="stable")  # the queries of one group together: one slice per group, no mask
    qlo = np.searchsorted(qg[order], np.arange(n_groups + 1))
    for g in range(n_groups):
        s, e = ms[lo[g] : lo[g + 1]], me[lo[g] : lo[g + 1]]
        sel = order[qlo[g] : qlo[g + 1]]
        if not s.size or not sel.size:  # no interval of this kind on the rank (no communication kernel, say): 0
            continue
        cum = np.concatenate([[0], np.cumsum(e - s)])
        out[sel] = _covered_before(s, e, cum, b[sel]) - _covered_before(s, e, cum, a[sel])
    return out


def _covered_before(s: I64, e: I64, cum: I64, t: I64) -> I64:
    """Covered time before each t: whole intervals ending before t plus the part of the one holding t."""
    j = np.searchsorted(s, t, side="right")  # intervals starting at or before t
    last = np.maximum(j - 1, 0)
    partial = np.where(j > 0, np.minimum(t, e[last]) - s[last], 0)
    return np.asarray(cum[np.maximum(j - 1, 0)] + np.maximum(partial, 0), np.int64) * (j > 0)
