"""Utilization samples for the SageMaker counter rules: per-GPU and per-node series, windows and runs.

GPU utilization comes from `gpu.util` counters (NVML, sampled by `ktrace run` or nsys GPU metrics) when the
trace has them, else from the kernel timeline: the busy share of each time bin
(ktrace.analysis.utilization.utilization_over_time), which is what NVML's utilization measures over its
sample period. Every series says which source it came from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.rules.base import Evidence, Skip
from ktrace.analysis.rules.inputs import first_step_ns, timeline_utilization


@dataclass(frozen=True)
class Series:
    """One sampled quantity (e.g. one GPU's utilization in %), sorted by time."""

    label: str
    """Where it was measured: "node0/GPU1" (counter) or "node0/rank3/GPU1" (timeline)."""
    node: str
    device: int | None
    rank: int | None
    ts_ns: np.ndarray
    value: np.ndarray
    source: str
    """"counter" or "timeline"."""


_GPU_UTIL = Slot[list[Series]]("rules.gpu_util_series")
_GPU_MEMORY = Slot[list[Series]]("rules.gpu_memory_series")


def counter_samples(index: TraceIndex, metric: str) -> pl.DataFrame:
    """Samples of one counter metric: node (String), instance, ts_ns, value, sorted by node, instance, time."""
    c = index.trace.counters
    if not c.height:
        return pl.DataFrame(schema={"node": pl.String, "instance": pl.Int32, "ts_ns": pl.Int64, "value": pl.Float64})
    return (
        c.filter(pl.col("metric") == metric)
        .select(pl.col("node").cast(pl.String), pl.col("instance").fill_null(-1), "ts_ns", "value")
        .sort("node", "instance", "ts_ns")
    )


def _split(frame: pl.DataFrame, source: str, rank_col: str | None, device_col: str) -> list[Series]:
    out = []
    keys = ["node"] + ([rank_col] if rank_col else []) + [device_col]
    for key, part in frame.sort(*keys, "ts_ns").group_by(keys, maintain_order=True):
        node, *rest = key
        rank = int(rest[0]) if rank_col else None
        device = int(rest[-1])
        label = f"{node}/rank{rank}/GPU{device}" if rank_col else f"{node}/GPU{device}"
        out.append(
            Series(
                label,
                str(node),
                device,
                rank,
                part["ts_ns"].to_numpy(),
                part["value"].to_numpy().astype(np.float64),
                source,
            )
        )
    return out


def gpu_util_series(index: TraceIndex, bin_ms: float) -> list[Series]:
    """Per-GPU utilization (%) series: counters when present, else timeline busy share per bin."""

    def compute() -> list[Series]:
        counters = counter_samples(index, "gpu.util")
        if counters.height:
            return _split(counters, "counter", None, "instance")
        util = timeline_utilization(index, bin_ms)
        if not util.height:
            return []
        return _split(util, "timeline", "rank", "device")

    return index.get(_GPU_UTIL, compute, bin_ms)


def node_series(index: TraceIndex, metric: str) -> list[Series]:
    """Node-level series of `metric` (instance -1 or null), one per node."""
    frame = counter_samples(index, metric).filter(pl.col("instance") < 0)
    return _split(frame, "counter", None, "instance") if frame.height else []


def require(series: list[Series], what: str) -> list[Series]:
    """`series` if not empty, else Skip saying which data is missing."""
    if not series:
        raise Skip(f"the trace has no {what}")
    return series


def evaluation_start(index: TraceIndex, s: Series, patience: int) -> int:
    """Index of the first sample to evaluate: `patience` samples are skipped (SageMaker's warm-up), or, when
    the series is shorter than 2 x patience, the samples before the first training step."""
    if patience <= 0:
        return 0
    if s.ts_ns.size >= 2 * patience:
        return patience
    first = first_step_ns(index)
    return int(np.searchsorted(s.ts_ns, first)) if first is not None else 0


def windows(n: int, start: int, window: int) -> list[tuple[int, int]]:
    """[lo, hi) sample windows of `window` samples from `start`; a short tail joins the previous window."""
    if n <= start:
        return []
    window = max(1, window)
    bounds = list(range(start, n, window)) + [n]
    spans = list(zip(bounds[:-1], bounds[1:], strict=True))
    if len(spans) > 1 and spans[-1][1] - spans[-1][0] < window // 2:
        spans[-2:] = [(spans[-2][0], n)]
    return spans


def runs(ts_ns: np.ndarray, mask: np.ndarray) -> list[tuple[int, int]]:
    """[first, last] sample indices of each run of consecutive True values in `mask`."""
    if not mask.any():
        return []
    m = np.concatenate(([False], mask, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(m))
    return [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def run_evidence(s: Series, mask: np.ndarray, kind: str, limit: int) -> tuple[Evidence, ...]:
    """The `limit` longest runs of `mask` in `s` as time-range Evidence (value = mean of the run)."""
    spans = runs(s.ts_ns, mask)
    spans.sort(key=lambda ab: (-(s.ts_ns[ab[1]] - s.ts_ns[ab[0]]), ab[0]))
    step = int(np.median(np.diff(s.ts_ns))) if s.ts_ns.size > 1 else 0
    return tuple(
        Evidence(
            kind=kind,
            start_ns=int(s.ts_ns[a]),
            end_ns=int(s.ts_ns[b]) + step,
            node=s.node,
            rank=s.rank,
            device=s.device,
            name=s.label,
            value=round(float(s.value[a : b + 1].mean()), 3),
        )
        for a, b in spans[:limit]
    )


def aligned(target: Series, other: Series) -> np.ndarray:
    """`other`'s value at each of `target`'s sample times (nearest sample), NaN when `other` is empty."""
    if other.ts_ns.size == 0:
        return np.full(target.ts_ns.size, np.nan)
    idx = np.clip(np.searchsorted(other.ts_ns, target.ts_ns), 0, other.ts_ns.size - 1)
    prev = np.clip(idx - 1, 0, other.ts_ns.size - 1)
    closer_prev = np.abs(other.ts_ns[prev] - target.ts_ns) < np.abs(other.ts_ns[idx] - target.ts_ns)
    return other.value[np.where(closer_prev, prev, idx)]


def gpu_memory_series(index: TraceIndex) -> list[Series]:
    """Per-GPU memory used in % of the device's memory: gpu.mem_used_bytes over the devices table's
    memory_bytes, else a gpu.mem_util counter already in %."""

    def compute() -> list[Series]:
        used = counter_samples(index, "gpu.mem_used_bytes")
        devices = (
            index.trace.devices.filter(pl.col("memory_bytes") > 0)
            .group_by(pl.col("node").cast(pl.String), pl.col("device").alias("instance"))
            .agg(pl.col("memory_bytes").max())
        )
        if used.height and devices.height:
            pct = used.join(devices, on=["node", "instance"], how="inner").with_columns(
                (100.0 * pl.col("value") / pl.col("memory_bytes")).alias("value")
            )
            if pct.height:
                return _split(pct, "counter", None, "instance")
        util = counter_samples(index, "gpu.mem_util")
        return _split(util, "counter", None, "instance") if util.height else []

    return index.get(_GPU_MEMORY, compute)
