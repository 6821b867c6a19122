"""SageMaker Debugger's utilization rules: LowGPUUtilization, CPUBottleneck, IOBottleneck, BatchSize,
GPUMemoryIncrease, LoadBalancing. Defaults are those of smdebug_rulesconfig's rules.py (analyses.md §5.2)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rules.base import Outcome, Param, ParamValue, Rule, Skip
from ktrace.analysis.rules.samples import (
    Series,
    aligned,
    evaluation_start,
    gpu_util_series,
    node_series,
    require,
    run_evidence,
    windows,
)
from ktrace.model.trace import Trace

PATIENCE = Param(
    "patience",
    1000,
    "samples skipped at the start (SageMaker's warm-up; at 500 ms sampling 1000 = "
    "500 s); a series shorter than 2 x patience skips only what precedes the "
    "first training step",
)
WINDOW = Param("window", 500, "samples per evaluation window; percentiles are computed per window")
BIN_MS = Param(
    "timeline_bin_ms",
    0.0,
    "bin width (ms) of the timeline-derived GPU utilization used when the "
    "trace has no gpu.util counters; 0 = span/100 clamped to 1-500 ms",
)
MAX_EVIDENCE = Param("max_evidence", 10, "how many time ranges to keep as evidence per GPU or node")


def _gpus(index: TraceIndex, p: Mapping[str, ParamValue]) -> list[Series]:
    return require(
        gpu_util_series(index, float(p["timeline_bin_ms"])),
        "GPU utilization data (no gpu.util counters and no kernels)",
    )


def _low_gpu(index: TraceIndex, s: Series, p: Mapping[str, ParamValue]) -> Outcome:
    start = evaluation_start(index, s, int(p["patience"]))
    spans = windows(s.value.size, start, int(p["window"]))
    t95, t5 = float(p["threshold_p95"]), float(p["threshold_p5"])
    bad_mask = np.zeros(s.value.size, bool)
    verdicts = []
    for lo, hi in spans:
        p95, p5 = np.percentile(s.value[lo:hi], [95, 5])
        kind = "underused" if p95 < t95 else ("fluctuating" if p5 < t5 else "")
        if kind:
            bad_mask[lo:hi] = True
            verdicts.append((kind, float(p95), float(p5)))
    n = sum(hi - lo for lo, hi in spans)
    all_p95, all_p5 = np.percentile(s.value[start:], [95, 5]) if n else (np.nan, np.nan)
    kinds = sorted({v[0] for v in verdicts})
    message = (
        f"{s.label} ({s.source}): GPU utilization p95 {all_p95:.1f} %, p5 {all_p5:.1f} % over {n:,} "
        f"samples; {len(verdicts)} of {len(spans)} windows {' or '.join(kinds) or 'fine'} "
        f"(p95 < {t95:g} % = underused; p95 >= {t95:g} % with p5 < {t5:g} % = fluctuating)"
    )
    return Outcome(
        n,
        int(bad_mask.sum()),
        bool(verdicts),
        message,
        run_evidence(s, bad_mask, "window", int(p["max_evidence"])),
        details={"p95": round(float(all_p95), 3), "p5": round(float(all_p5), 3), "label": s.label},
    )


def _per_gpu(results: list[Outcome]) -> Outcome:
    """The first result carries the others as extra findings and all series' details."""
    fired = [o for o in results if o.fired] or results[:1]
    head, rest = fired[0], tuple(fired[1:])
    datapoints = sum(o.datapoints for o in results)
    if not datapoints:
        raise Skip("no samples left to evaluate after the warm-up (see the patience parameter)")
    triggered = sum(o.triggered for o in results)
    # The engine sums datapoints over head + extra: give head the remainder of the non-fired series.
    head_dp = datapoints - sum(o.datapoints for o in rest)
    head_tr = triggered - sum(o.triggered for o in rest)
    return Outcome(
        head_dp,
        head_tr,
        head.fired,
        head.message,
        head.evidence,
        details={"series": [dict(o.details) for o in results]},
        extra=rest,
    )


def _low_gpu_all(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    return _per_gpu([_low_gpu(index, s, p) for s in _gpus(index, p)])


LOW_GPU_UTILIZATION = Rule(
    name="LowGPUUtilization",
    family="sagemaker",
    description="GPU utilization too low (p95 below threshold_p95) or fluctuating (p95 high but p5 below "
    "threshold_p5), per GPU and evaluation window.",
    recommendation="Underused: increase the batch size, or move to a smaller/fewer GPU instance. Fluctuating: "
    "look for bottlenecks between steps (data loading, synchronization, checkpointing); see "
    "the GPUGaps, Dataloader and CPUBottleneck rules.",
    params=(
        Param("threshold_p95", 70.0, "p95 utilization (%) below which a GPU counts as underused"),
        Param("threshold_p5", 10.0, "p5 utilization (%) below which a busy GPU counts as fluctuating"),
        WINDOW,
        PATIENCE,
        BIN_MS,
        MAX_EVIDENCE,
    ),
    check=_low_gpu_all,
    source="SageMaker Debugger LowGPUUtilization",
    fleet_mode="per rank",
)


def _bottleneck(index: TraceIndex, p: Mapping[str, ParamValue], metric: str, metric_param: str, what: str) -> Outcome:
    gpus = _gpus(index, p)
    nodes = {s.node: s for s in require(node_series(index, metric), f"{metric} counters")}
    results = []
    for g in gpus:
        other = nodes.get(g.node)
        if other is None:
            continue
        start = evaluation_start(index, g, int(p["patience"]))
        gv, ov = g.value[start:], aligned(g, other)[start:]
        hit = (gv < float(p["gpu_threshold"])) & (ov > float(p[metric_param]))
        share = 100.0 * hit.sum() / max(1, gv.size)
        mask = np.zeros(g.value.size, bool)
        mask[start:] = hit
        message = (
            f"{g.label}: GPU below {p['gpu_threshold']} % while {what} above {p[metric_param]} % during "
            f"{share:.1f} % of {gv.size:,} samples (threshold {p['threshold']} %)"
        )
        results.append(
            Outcome(
                int(gv.size),
                int(hit.sum()),
                share > float(p["threshold"]),
                message,
                run_evidence(g, mask, "window", int(p["max_evidence"])),
                details={"label": g.label, "share_pct": round(float(share), 3)},
            )
        )
    return _per_gpu(require(results, f"{metric} counters on the nodes of the GPUs"))  # type: ignore[arg-type]


def _cpu_bottleneck(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    return _bottleneck(index, p, "cpu.util", "cpu_threshold", "CPU utilization")


def _io_bottleneck(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    return _bottleneck(index, p, "cpu.iowait_pct", "io_threshold", "I/O wait")


CPU_BOTTLENECK = Rule(
    name="CPUBottleneck",
    family="sagemaker",
    description="Share of time the GPU is nearly idle while the CPU is saturated.",
    recommendation="The CPU cannot feed the GPU: use more DataLoader workers, move preprocessing to the GPU "
    "(DALI, torchvision.transforms.v2 on CUDA tensors), or choose an instance with more vCPUs.",
    params=(
        Param("threshold", 50.0, "fire when the bottleneck lasts more than this % of the samples"),
        Param("gpu_threshold", 10.0, "GPU utilization (%) below which the GPU counts as idle"),
        Param("cpu_threshold", 90.0, "CPU utilization (%) above which the CPU counts as saturated"),
        PATIENCE,
        BIN_MS,
        MAX_EVIDENCE,
    ),
    check=_cpu_bottleneck,
    source="SageMaker Debugger CPUBottleneck",
    fleet_mode="per rank",
)

IO_BOTTLENECK = Rule(
    name="IOBottleneck",
    family="sagemaker",
    description="Share of time the GPU is nearly idle while the CPU waits on I/O.",
    recommendation="Input data arrives too slowly: prefetch (DataLoader prefetch_factor, persistent_workers), "
    "cache or shard the dataset on local NVMe, use a faster format (WebDataset, TFRecord, "
    "Parquet) or pipe-mode streaming.",
    params=(
        Param("threshold", 50.0, "fire when the bottleneck lasts more than this % of the samples"),
        Param("gpu_threshold", 10.0, "GPU utilization (%) below which the GPU counts as idle"),
        Param("io_threshold", 50.0, "I/O wait (%) above which the CPU counts as waiting on I/O"),
        PATIENCE,
        BIN_MS,
        MAX_EVIDENCE,
    ),
    check=_io_bottleneck,
    source="SageMaker Debugger IOBottleneck",
    fleet_mode="per rank",
)

RULES: tuple[Rule, ...] = (LOW_GPU_UTILIZATION, CPU_BOTTLENECK, IO_BOTTLENECK)
