"""Load balance across ranks: per-rank busy time, step-time spread, SageMaker's utilization-histogram distance."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.phases import step_spans
from ktrace.analysis.utilization import busy_time, utilization_over_time
from ktrace.model.trace import Trace

HIST_BINS = 10
"""Utilization histograms have 10 bins of 10 % each."""


@dataclass(frozen=True)
class LoadBalance:
    """How evenly the work is spread over the ranks."""

    per_rank: pl.DataFrame
    """``node``, ``rank``, ``kernels``, ``kernel_time_ns`` (sum), ``busy_ns`` (union of kernel and memory-op
    intervals), ``busy_share`` (busy / the trace span), ``steps``, ``step_mean_ns``, ``step_p50_ns``."""
    busy_spread: float
    """(max - min) / max of busy_ns over the ranks; 0 = perfectly even (0 with fewer than 2 ranks)."""
    step_spread: float | None
    """(max - min) / max of the per-rank mean step time; None without steps on 2+ ranks."""
    histogram_distance: float | None
    """Largest total-variation distance (0-1) between two ranks' GPU-utilization histograms (SageMaker
    LoadBalancing fires above 0.5); None with fewer than 2 ranks."""
    worst_pair: tuple[str, str] | None
    """The two ranks ("node/rank") at that distance."""
    source: str
    """Where the utilization histograms come from: "counters" (gpu.util samples) or "kernels" (busy
    fraction per time bin)."""


_BALANCE = Slot[LoadBalance]("load_balance")


_RANK_BUSY = Slot[tuple[pl.DataFrame, dict[str, npt.NDArray[np.float64]]]]("rank_busy")


def _shared_rank_busy(
    ix: TraceIndex, bins: int, span: tuple[int, int] | None
) -> tuple[pl.DataFrame, dict[str, npt.NDArray[np.float64]]]:
    """_rank_busy shared through the index (load_balance and a fleet partial's utilization_samples both read it)."""
    return ix.get(_RANK_BUSY, lambda: _rank_busy(ix, bins, span), bins, span)


def _rank_busy(
    ix: TraceIndex, bins: int, span: tuple[int, int] | None
) -> tuple[pl.DataFrame, dict[str, npt.NDArray[np.float64]]]:
    """Per-rank busy time (utilization.busy_time) and the busy fraction of each of `bins` time bins of `span`
    (default the trace's)."""
    trace = ix.trace
    span = span or trace.span_ns() or (0, 1)
    busy = busy_time(trace, per="rank", index=ix)
    frame = busy.select(pl.col("node").cast(pl.String), pl.col("rank").cast(pl.Int32), pl.col("busy_ns").cast(pl.Int64))
    frame = frame.with_columns(busy_share=pl.col("busy_ns") / max(span[1] - span[0], 1))
    if busy.height == 0:
        return frame, {}
    bin_ns = max(1, -(-(span[1] - span[0]) // bins))
    util = utilization_over_time(trace, bin_ns, per="rank", t0_ns=span[0], index=ix)
    fractions = {
        f"{node}/{rank}": part["utilization"].to_numpy()
        for (node, rank), part in util.group_by(["node", "rank"], maintain_order=True)
    }
    return frame, fractions


def _counter_utilization(trace: Trace) -> dict[str, npt.NDArray[np.float64]]:
    util = trace.counters.filter(pl.col("metric").cast(pl.String) == "gpu.util")
    out = {}
    for (node, inst), part in util.group_by([pl.col("node").cast(pl.String), "instance"], maintain_order=True):
        out[f"{node}/gpu{inst}"] = part["value"].to_numpy() / 100.0
    return out


def utilization_samples(
    trace: Trace, *, bins: int = 100, span: tuple[int, int] | None = None, index: TraceIndex | None = None
) -> tuple[dict[str, npt.NDArray[np.float64]], dict[str, npt.NDArray[np.float64]]]:
    """The samples load_balance histograms: (gpu.util counter samples per "node/gpuN", 0-1; the busy fraction of
    each of `bins` bins of `span` (default the trace's) per "node/rank", from the span's start to the trace's last
    GPU record)."""
    ix = TraceIndex.of(trace, index)
    return _counter_utilization(trace), _shared_rank_busy(ix, bins, span)[1]


def utilization_histograms(samples: dict[str, npt.NDArray[np.float64]]) -> dict[str, npt.NDArray[np.int64]]:
    """The 10-bin histogram (counts) of each key's utilization samples (0-1, clipped); keys without samples left
    out. Counts of the same key from several ranks add up to the histogram of all its samples."""
    return {
        k: np.histogram(np.clip(v, 0, 1), bins=HIST_BINS, range=(0, 1))[0].astype(np.int64)
        for k, v in samples.items()
        if v.size
    }


def histogram_distance(samples: dict[str, npt.NDArray[np.float64]]) -> tuple[float | None, tuple[str, str] | None]:
    """Largest pairwise total-variation distance between the 10-bin histograms of utilization samples (0-1)."""
    return counts_distance(utilization_histograms(samples))


def counts_distance(counts: dict[str, npt.NDArray[np.int64]]) -> tuple[float | None, tuple[str, str] | None]:
    """Largest pairwise total-variation distance between utilization histograms given as counts per key."""
    keys = sorted(k for k, v in counts.items() if v.sum())
    if len(keys) < 2:
        return None, None
    hists = np.stack([counts[k] for k in keys])
    hists = hists / hists.sum(axis=1, keepdims=True)
    dist = 0.5 * np.abs(hists[:, None, :] - hists[None, :, :]).sum(axis=2)
    i, j = np.unravel_index(int(np.argmax(dist)), dist.shape)
    return float(dist[i, j]), (keys[min(i, j)], keys[max(i, j)])


def load_balance(
    trace: Trace,
    *,
    steps: pl.DataFrame | None = None,
    bins: int = 100,
    pattern: str | None = None,
    span: tuple[int, int] | None = None,
    index: TraceIndex | None = None,
) -> LoadBalance:
    """Load balance across ranks.

    Args:
        trace: the trace.
        steps: step spans (``node``, ``rank``, ``start_ns``, ``end_ns``), default phases.step_spans(trace).
        bins: time bins for the kernel-based utilization histograms when there is no gpu.util counter.
        pattern: regex of step range names when `steps` is not given.
        span: the job's (start, end) for busy shares and time bins, default the trace's (a rank's partial
            passes the whole job's, analysis.rank_partials).
        index: the trace's TraceIndex (the load balance over its step spans is shared through it).

    Returns:
        LoadBalance.
    """
    ix = TraceIndex.of(trace, index)
    if steps is None:
        return ix.get(
            _BALANCE,
            lambda: _load_balance(ix, step_spans(trace, pattern=pattern, index=ix), bins, span),
            bins,
            pattern,
            span,
        )
    return _load_balance(ix, steps, bins, span)


def _load_balance(ix: TraceIndex, found: pl.DataFrame, bins: int, span: tuple[int, int] | None) -> LoadBalance:
    trace = ix.trace
    busy, fractions = _shared_rank_busy(ix, bins, span)
    dur = pl.col("end_ns") - pl.col("start_ns")
    step_stats = found.group_by(["node", "rank"]).agg(
        steps=pl.len().cast(pl.Int64),
        step_mean_ns=dur.mean().cast(pl.Float64),
        step_p50_ns=dur.quantile(0.5, "linear").cast(pl.Float64),
    )
    kstats = trace.kernels.group_by(pl.col("node").cast(pl.String), "rank").agg(
        kernels=pl.len().cast(pl.Int64), kernel_time_ns=dur.sum().cast(pl.Int64)
    )
    per_rank = (
        busy.join(kstats, on=["node", "rank"], how="full", coalesce=True)
        .join(step_stats.with_columns(pl.col("rank").cast(pl.Int32)), on=["node", "rank"], how="left")
        .with_columns(
            pl.col("kernels", "kernel_time_ns", "busy_ns", "steps").fill_null(0), pl.col("busy_share").fill_null(0.0)
        )
        .select(
            "node", "rank", "kernels", "kernel_time_ns", "busy_ns", "busy_share", "steps", "step_mean_ns", "step_p50_ns"
        )
        .sort(["node", "rank"])
    )
    counters = _counter_utilization(trace)
    return balance_of(per_rank, utilization_histograms(counters), utilization_histograms(fractions))


def balance_of(
    per_rank: pl.DataFrame, counters: dict[str, npt.NDArray[np.int64]], busy: dict[str, npt.NDArray[np.int64]]
) -> LoadBalance:
    """The LoadBalance of a per_rank frame and the utilization histograms (counts) of the gpu.util counters and of
    the ranks' busy fractions: the counters' when there are 2 or more, else the busy fractions'."""
    source = "counters" if len(counters) >= 2 else "kernels"
    distance, pair = counts_distance(counters if source == "counters" else busy)
    return LoadBalance(
        per_rank,
        spread(per_rank["busy_ns"]) or 0.0,
        spread(per_rank["step_mean_ns"].drop_nulls()),
        distance,
        pair,
        source,
    )


def spread(values: pl.Series) -> float | None:
    """(max - min) / max of `values` (0 when max <= 0; None, or 0 for integers, with fewer than 2 values)."""
    if values.len() < 2:
        return None if values.dtype == pl.Float64 else 0.0
    hi = float(values.max())  # type: ignore[arg-type]
    lo = float(values.min())  # type: ignore[arg-type]
    return (hi - lo) / hi if hi > 0 else 0.0
