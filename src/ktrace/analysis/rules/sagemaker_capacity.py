"""SageMaker Debugger's capacity rules: BatchSize, GPUMemoryIncrease, LoadBalancing (analyses.md §5.2)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.ranks import LoadBalance
from ktrace.analysis.rules.base import Evidence, Outcome, Param, ParamValue, Rule, Skip
from ktrace.analysis.rules.frames import evidence_rows
from ktrace.analysis.rules.inputs import load_balance, utilization_histograms
from ktrace.analysis.rules.memory import allocator_memory_series
from ktrace.analysis.rules.sagemaker_counters import BIN_MS, MAX_EVIDENCE, PATIENCE, WINDOW, _gpus, _per_gpu
from ktrace.analysis.rules.samples import Series, evaluation_start, gpu_memory_series, node_series, require, windows
from ktrace.model.trace import Trace


def _p95(s: Series, lo_ts: int, hi_ts: int) -> float:
    sel = s.value[(s.ts_ns >= lo_ts) & (s.ts_ns < hi_ts)]
    return float(np.percentile(sel, 95)) if sel.size else float("nan")


def _batch_node(
    index: TraceIndex, cpu: Series, gpus: list[Series], mems: list[Series], p: Mapping[str, ParamValue]
) -> Outcome:
    start = evaluation_start(index, cpu, int(p["patience"]))
    spans = windows(cpu.value.size, start, int(p["window"]))
    limits = (float(p["cpu_threshold_p95"]), float(p["gpu_threshold_p95"]), float(p["gpu_memory_threshold_p95"]))
    low, evidence, last = 0, [], (np.nan, np.nan, np.nan)
    for lo, hi in spans:
        t0 = int(cpu.ts_ns[lo])
        t1 = int(cpu.ts_ns[hi - 1]) + 1
        c95 = float(np.percentile(cpu.value[lo:hi], 95))
        g95 = max(_p95(g, t0, t1) for g in gpus)
        m95 = max(_p95(m, t0, t1) for m in mems)
        last = (c95, g95, m95)
        if c95 < limits[0] and g95 < limits[1] and m95 < limits[2]:
            low += 1
            evidence.append(
                Evidence(kind="window", start_ns=t0, end_ns=t1, node=cpu.node, name=cpu.node, value=round(g95, 3))
            )
    message = (
        f"{cpu.node}: p95 CPU {last[0]:.1f} %, GPU {last[1]:.1f} %, GPU memory {last[2]:.1f} % in the last "
        f"window; {low} of {len(spans)} windows had all three below {limits[0]:g}/{limits[1]:g}/"
        f"{limits[2]:g} %"
    )
    return Outcome(
        len(spans),
        low,
        low > 0,
        message,
        tuple(evidence[: int(p["max_evidence"])]),
        details={
            "label": cpu.node,
            "cpu_p95": round(last[0], 3),
            "gpu_p95": round(last[1], 3),
            "gpu_memory_p95": round(last[2], 3),
        },
    )


def _batch_size(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    cpus = require(node_series(index, "cpu.util"), "cpu.util counters")
    gpus = _gpus(index, p)
    mems = require(gpu_memory_series(index), "GPU memory counters (gpu.mem_used_bytes with device memory sizes)")
    results = []
    for cpu in cpus:
        node_gpus = [g for g in gpus if g.node == cpu.node]
        node_mems = [m for m in mems if m.node == cpu.node]
        if node_gpus and node_mems:
            results.append(_batch_node(index, cpu, node_gpus, node_mems, p))
    if not results:
        raise Skip("no node has CPU, GPU and GPU-memory utilization together")
    return _per_gpu(results)


BATCH_SIZE = Rule(
    name="BatchSize",
    family="sagemaker",
    description="CPU, GPU and GPU-memory utilization all low (p95): the GPU could take a larger batch.",
    recommendation="Increase the batch size (scale the learning rate with it), or run on a smaller or "
    "cheaper GPU instance.",
    params=(
        Param("cpu_threshold_p95", 70.0, "p95 CPU utilization (%) below which the CPU counts as underused"),
        Param("gpu_threshold_p95", 70.0, "p95 GPU utilization (%) below which the GPU counts as underused"),
        Param("gpu_memory_threshold_p95", 70.0, "p95 GPU memory use (%) below which memory counts as underused"),
        WINDOW,
        PATIENCE,
        BIN_MS,
        MAX_EVIDENCE,
    ),
    check=_batch_size,
    source="SageMaker Debugger BatchSize",
    fleet_mode="per rank",
)


def _memory_rise(s: Series, p: Mapping[str, ParamValue], start: int) -> Outcome:
    window = max(1, int(p["window"]))
    v = s.value[start:]
    if v.size < window:
        return Outcome(int(v.size), 0, False, f"{s.label}: fewer than {window} samples", (), details={"label": s.label})
    ma = np.convolve(v, np.ones(window) / window, mode="valid")
    low_idx = np.minimum.accumulate(np.arange(ma.size) * 0 + ma)  # running minimum
    rise = ma - low_idx
    top = int(np.argmax(rise))
    bottom = int(np.flatnonzero(ma[: top + 1] == low_idx[top])[0])
    growth = float(rise[top])
    fired = growth > float(p["increase"])
    ts = s.ts_ns[start:]
    message = (
        f"{s.label}: GPU memory use (moving average of {window} samples) rose by {growth:.1f} points, "
        f"from {ma[bottom]:.1f} % to {ma[top]:.1f} % (threshold {p['increase']} points)"
    )
    evidence = (
        (
            Evidence(
                kind="window",
                start_ns=int(ts[bottom]),
                end_ns=int(ts[top + window - 1]),
                node=s.node,
                device=s.device,
                name=s.label,
                value=round(growth, 3),
            ),
        )
        if fired
        else ()
    )
    return Outcome(
        int(v.size),
        int((rise > float(p["increase"])).sum()),
        fired,
        message,
        evidence,
        details={"label": s.label, "rise_points": round(growth, 3)},
    )


def _memory_increase(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    mems = require(
        gpu_memory_series(index) or allocator_memory_series(index, int(p["timeline_samples"])),
        "GPU memory counters (gpu.mem_used_bytes) or allocator events, with device memory sizes",
    )
    return _per_gpu([_memory_rise(s, p, evaluation_start(index, s, int(p["patience"]))) for s in mems])


GPU_MEMORY_INCREASE = Rule(
    name="GPUMemoryIncrease",
    family="sagemaker",
    description="GPU memory use keeps growing (moving average rises by more than `increase` points).",
    recommendation="Look for tensors kept across steps (accumulating losses without .item()/.detach(), growing "
    "caches or lists of outputs); if growth is expected, make sure the peak fits the GPU.",
    params=(
        Param(
            "increase",
            5.0,
            "fire when the moving average of memory use (%) rises by more than this many percentage points",
        ),
        Param("window", 10, "samples in the moving average"),
        PATIENCE,
        Param(
            "timeline_samples",
            200,
            "without GPU memory counters: samples of the allocator's memory timeline that stand in for them "
            "(reserved bytes, else the high-water mark of allocated bytes; evenly spaced from the end of the first "
            "step to the last event)",
        ),
    ),
    check=_memory_increase,
    source="SageMaker Debugger GPUMemoryIncrease",
    fleet_mode="per rank",
)


def _load_balancing(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    if utilization_histograms(index) < 2:  # load_balance would give no distance: skip without computing it
        raise Skip("the trace has fewer than two ranks with GPU utilization")
    return load_balancing_outcome(load_balance(index), p)


def load_balancing_outcome(lb: LoadBalance, p: Mapping[str, ParamValue]) -> Outcome:
    """The LoadBalancing rule on a LoadBalance (a trace's, or one reduced from a fleet's ranks)."""
    if lb.histogram_distance is None:
        raise Skip("the trace has fewer than two ranks with GPU utilization")
    limit = float(p["threshold"])
    fired = lb.histogram_distance > limit
    pair = " vs ".join(lb.worst_pair or ())
    per_rank = lb.per_rank.sort("busy_share")
    step = "" if lb.step_spread is None else f", mean step time spread {100 * lb.step_spread:.1f} %"
    message = (
        f"largest distance between two ranks' GPU utilization histograms ({lb.source}): "
        f"{lb.histogram_distance:.2f} ({pair}; threshold {limit:g}); busy time spread "
        f"{100 * lb.busy_spread:.1f} % over {per_rank.height} ranks{step}"
    )
    ev = per_rank.select("node", "rank", (100 * pl.col("busy_share")).alias("value"))
    n = int(p["max_evidence"])
    evidence = tuple(
        evidence_rows(pl.concat([ev.head(n // 2), ev.tail(n - n // 2)]).unique(maintain_order=True), "rank")
    )
    return Outcome(
        per_rank.height,
        int(fired),
        fired,
        message,
        evidence,
        details={
            "distance": round(lb.histogram_distance, 4),
            "worst_pair": list(lb.worst_pair or ()),
            "busy_spread": round(lb.busy_spread, 4),
            "source": lb.source,
            "busy_share_pct": {
                f"{r['node']}/{r['rank']}": round(100 * r["busy_share"], 3)
                for r in per_rank.head(64).iter_rows(named=True)
            },
        },
    )


LOAD_BALANCING = Rule(
    name="LoadBalancing",
    family="sagemaker",
    description="GPUs loaded unevenly: the distance between per-GPU utilization histograms exceeds threshold.",
    recommendation="Balance work across ranks: check data sharding and uneven batches, stragglers "
    "(a slow GPU or host), and pipeline stages with unequal cost.",
    params=(
        Param(
            "threshold",
            0.5,
            "fire when two ranks' GPU utilization histograms (10 bins of 10 %) are "
            "more than this total-variation distance apart (0 = same, 1 = disjoint)",
        ),
        Param("max_evidence", 6, "how many ranks to keep as evidence (least and most busy)"),
    ),
    check=_load_balancing,
    source="SageMaker Debugger LoadBalancing",
    fleet_mode="exact",
)

RULES: tuple[Rule, ...] = (BATCH_SIZE, GPU_MEMORY_INCREASE, LOAD_BALANCING)
