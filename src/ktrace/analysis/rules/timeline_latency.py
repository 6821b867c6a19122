"""Timeline rules about kernels: launch-bound tiny kernels, high launch→run latency, FP32 matmul/conv kernels.

Sources: HTA `get_cuda_kernel_launch_stats` (short kernels: GPU duration < CPU launch duration; launch-delay
outliers > 100 µs) and the TB plugin's Tensor-Core recommendation (analyses.md §2, §4, §6, §8).

The launch rules count launch calls (rules.launches.kernel_calls): a CUDA graph launch is one launch whose
GPU time is that of all its kernels and whose latency is its first kernel's, not one launch per graph node
(which would count the cudaGraphLaunch call's CPU time once per node).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rules.base import Outcome, Param, ParamValue, Rule, Skip
from ktrace.analysis.rules.frames import evidence_rows, pct
from ktrace.analysis.rules.inputs import kernel_precisions, stream_prev_end
from ktrace.analysis.rules.launches import kernel_calls, kernel_rows, top_names
from ktrace.model.trace import Trace

MAX_EVIDENCE = Param("max_evidence", 15, "how many kernel names to keep as evidence (most affected first)")


API_DURATION = pl.col("api_end_ns") - pl.col("api_start_ns")
LATENCIES = {
    "launch_latency_ns": pl.col("start_ns") - pl.col("api_start_ns"),  # start->start
    "queue_delay_ns": pl.col("start_ns") - pl.col("api_end_ns"),
}  # end->start


def _latency_or_skip(index: TraceIndex) -> pl.DataFrame:
    lat = kernel_calls(index)
    if not lat.height:
        raise Skip("no kernel in the trace could be matched to its launch call")
    return lat


def _counted(lat: pl.DataFrame) -> tuple[str, str]:
    """(what the launch rules count, a note on CUDA graphs): ("kernels", "") without graph launches of several
    kernels, else ("kernel launches", "; N CUDA graph launches of M kernels count once each")."""
    graphs = lat.filter(pl.col("kernels") > 1)
    if not graphs.height:
        return "kernels", ""
    return "kernel launches", (
        f"; {graphs.height:,} CUDA graph launches of {int(graphs['kernels'].sum()):,} kernels count once each"
    )


def _launch_bound(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    lat = _latency_or_skip(index)
    short = lat.filter(pl.col("gpu_ns") < API_DURATION)
    share = pct(short.height, lat.height)
    fired = short.height >= int(p["min_count"]) and share > float(p["min_pct"])
    gpu_ns, api_ns = short.select(pl.col("gpu_ns").sum(), API_DURATION.sum()).row(0) if short.height else (0, 0)
    gpu_ms = float(gpu_ns or 0) / 1e6
    api_ms = float(api_ns or 0) / 1e6
    counted, graphs = _counted(lat)
    message = (
        f"{short.height:,} of {lat.height:,} {counted} ({share:.1f} %) ran for less time than their launch "
        f"call took on the CPU ({gpu_ms:.2f} ms of GPU work cost {api_ms:.2f} ms of launches): the GPU "
        f"waits for the CPU to issue work{graphs}"
    )
    evidence = tuple(evidence_rows(top_names(index, short, int(p["max_evidence"]), pl.len()), "kernel"))
    return Outcome(
        lat.height,
        short.height,
        fired,
        message,
        evidence,
        details={"share_pct": round(share, 4), "gpu_ms": round(gpu_ms, 6), "api_ms": round(api_ms, 6)},
    )


LAUNCH_BOUND_KERNELS = Rule(
    name="LaunchBoundKernels",
    family="timeline",
    description="Kernels shorter than the CPU launch call that issued them (HTA's 'short kernels').",
    recommendation="Cut launches: fuse kernels (torch.compile), capture the step in a CUDA graph "
    "(torch.compile(mode='reduce-overhead'), torch.cuda.graphs), use fused optimizers "
    "(foreach/fused Adam) and a larger batch so each kernel does more work.",
    params=(
        Param("min_pct", 50.0, "fire when more than this % of launched kernels are shorter than their launch"),
        Param("min_count", 100, "... and at least this many are"),
        MAX_EVIDENCE,
    ),
    check=_launch_bound,
    source="HTA get_cuda_kernel_launch_stats (short kernels)",
    fleet_mode="per rank",
)


def _overhead(index: TraceIndex) -> pl.DataFrame:
    """Launch latency not explained by queueing: kernel start - max(launch end, previous kernel's end on the
    stream). Positive values are time the GPU stream sat idle after the launch returned."""
    lat = _latency_or_skip(index)
    rows = lat["row"].to_numpy() if index.launch_runs().fans_out else kernel_rows(index)[1]
    prev = stream_prev_end(index)[rows]  # FIRST_ON_STREAM (< any time): first on its stream
    overhead = np.maximum(lat["api_end_ns"].to_numpy(), prev)
    np.subtract(lat["start_ns"].to_numpy(), overhead, out=overhead)
    return lat.with_columns(overhead_ns=pl.Series(overhead, dtype=pl.Int64))


def _launch_latency(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    lat = _overhead(index)
    threshold_ns = float(p["threshold_us"]) * 1000
    slow = lat.filter(pl.col("overhead_ns") > threshold_ns)
    share = pct(slow.height, lat.height)
    fired = slow.height >= int(p["min_count"]) and share > float(p["max_pct"])
    q = lat.select(**LATENCIES).select(
        *[pl.col(c).quantile(x, "linear").alias(f"{c}_p{int(x * 100)}") for c in LATENCIES for x in (0.5, 0.95, 0.99)]
    )
    stats = {k: round(float(v) / 1e3, 3) for k, v in q.row(0, named=True).items() if v is not None}
    counted, graphs = _counted(lat)
    message = (
        f"{slow.height:,} of {lat.height:,} {counted} ({share:.1f} %) started more than {p['threshold_us']} µs "
        "after their launch returned while their stream was idle; launch latency p50/p95/p99: start→start "
        f"{stats.get('launch_latency_ns_p50', 0):g}/{stats.get('launch_latency_ns_p95', 0):g}/"
        f"{stats.get('launch_latency_ns_p99', 0):g} µs, end→start {stats.get('queue_delay_ns_p50', 0):g}/"
        f"{stats.get('queue_delay_ns_p95', 0):g}/{stats.get('queue_delay_ns_p99', 0):g} µs{graphs}"
    )
    evidence = tuple(
        evidence_rows(top_names(index, slow, int(p["max_evidence"]), pl.col("overhead_ns").max() / 1e3), "kernel")
    )
    return Outcome(
        lat.height,
        slow.height,
        fired,
        message,
        evidence,
        details={"latency_us": {k.replace("_ns", ""): v for k, v in stats.items()}, "share_pct": round(share, 4)},
    )


HIGH_LAUNCH_LATENCY = Rule(
    name="HighLaunchLatency",
    family="timeline",
    description="Kernels that start long after their launch call returned although their stream was idle "
    "(latency not explained by queueing behind earlier work).",
    recommendation="Look for CPU contention (too many threads per core, dataloader workers competing with the "
    "main process), driver-level serialization (cross-stream event waits, a full launch queue) "
    "or profiler overhead; pin the training process to its cores.",
    params=(
        Param("threshold_us", 100.0, "launch→run delay beyond this many µs counts (HTA: 100 µs)"),
        Param("max_pct", 5.0, "fire when more than this % of kernels are delayed that much"),
        Param("min_count", 10, "... and at least this many are"),
        MAX_EVIDENCE,
    ),
    check=_launch_latency,
    source="HTA get_cuda_kernel_launch_stats (launch delay); nsys cuda_kern_exec queue time",
    fleet_mode="per rank",
)

MATMUL = r"(?i)gemm|conv|matmul|cudnn|wgrad|dgrad|fprop|winograd|cublas|cutlass"


def _fp32_matmul(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    return fp32_matmul_outcome(kernel_precisions(index), compute_major(trace), p)


def compute_major(trace: Trace) -> int | None:
    """The highest compute capability major of the trace's GPUs, None when the devices table does not say."""
    cc = trace.devices["compute_major"].drop_nulls()
    return int(cc.max()) if cc.len() else None  # type: ignore[arg-type]


def fp32_matmul_outcome(per_name: pl.DataFrame, major: int | None, p: Mapping[str, ParamValue]) -> Outcome:
    """The FP32Matmul rule on kernel_precisions' per-name table (a trace's, or one summed over a job's ranks) and
    the GPUs' compute capability major."""
    if not per_name.height:
        raise Skip("the trace has no kernels")
    if major is not None and major < 7:
        raise Skip(f"the GPU (compute capability {major}.x) has no tensor cores")
    compute = per_name.filter(~pl.col("precision").is_in(["communication", "memory"]))
    fp32 = compute.filter((pl.col("precision") == "FP32") & pl.col("name").str.contains(MATMUL))
    total_ns = int(compute["time_ns"].sum() or 0)
    fp32_ns = int(fp32["time_ns"].sum() or 0)
    share = pct(fp32_ns, total_ns)
    fired = share > float(p["min_time_pct"])
    faster = "TF32 or BF16" if major is None or major >= 8 else "FP16 (AMP)"
    message = (
        f"FP32 matmul/conv kernels ({fp32.height} kernel names, {int(fp32['count'].sum() or 0):,} runs) take "
        f"{share:.1f} % of compute-kernel time ({fp32_ns / 1e6:.2f} ms); {faster} tensor-core kernels "
        f"would run them faster" + ("" if major is not None else " (compute capability unknown)")
    )
    top = (
        fp32.sort("time_ns", descending=True)
        .head(int(p["max_evidence"]))
        .select("name", (pl.col("time_ns") / 1e6).alias("value"))
    )
    evidence = tuple(evidence_rows(top, "kernel"))
    return Outcome(
        int(compute["count"].sum() or 0),
        int(fp32["count"].sum() or 0),
        fired,
        message,
        evidence,
        details={
            "fp32_matmul_ms": round(fp32_ns / 1e6, 6),
            "share_pct": round(share, 4),
            "compute_capability_major": major,
        },
    )


FP32_MATMUL = Rule(
    name="FP32Matmul",
    family="timeline",
    description="Matrix-multiply and convolution kernels running in plain FP32 on a GPU with tensor cores.",
    recommendation="Enable TF32 (torch.set_float32_matmul_precision('high'), torch.backends.cudnn.allow_tf32) "
    "or mixed precision (torch.autocast with bfloat16, or float16 + GradScaler on Volta/Turing).",
    params=(
        Param(
            "min_time_pct",
            5.0,
            "fire when FP32 matmul/conv kernels take more than this % of the GPU "
            "time of compute kernels (communication and memory kernels excluded)",
        ),
        MAX_EVIDENCE,
    ),
    check=_fp32_matmul,
    source="TB plugin Tensor-Core recommendation; analyses.md §7",
    fleet_mode="exact",
)

RULES: tuple[Rule, ...] = (LAUNCH_BOUND_KERNELS, HIGH_LAUNCH_LATENCY, FP32_MATMUL)
