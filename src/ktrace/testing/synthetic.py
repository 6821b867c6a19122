"""A seeded synthetic trace that looks like a real training job, scalable to 10 M kernels in batches."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace, TraceMeta

# (name, mean duration µs, phase weight fwd/bwd/opt, stream role) — names as real traces show them.
KERNEL_CATALOGUE: tuple[tuple[str, float], ...] = (
    ("sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel", 180.0),
    ("ampere_sgemm_128x64_nn", 240.0),
    (
        "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>"
        "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8::Params)",
        150.0,
    ),
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_"
        "kernel__5x_cublas",
        120.0,
    ),
    (
        "void cudnn::cnn::conv2d_grouped_direct_kernel<float, float, float, float, float, float, true, false, 0, 0, 0>"
        "(cudnnTensorStruct, float const*, cudnnFilterStruct, float const*, cudnnConvolutionStruct, cudnnTensorStruct, "
        "float*, float, float, cudnn::reduced_divisor, int)",
        90.0,
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
        6.0,
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
        "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::"
        "{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl("
        "at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::"
        "operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)",
        9.0,
    ),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper<float>, "
        "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper<float>, unsigned int, float, 4>)",
        12.0,
    ),
    ("triton_poi_fused_add_mul_0", 4.0),
    ("triton_red_fused_native_layer_norm_1", 11.0),
    (
        "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
        "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false>"
        "(Flash_fwd_params)",
        70.0,
    ),
    (
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
        "TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4>, float*, float, "
        "float, float, float, float, float, float, bool, bool>",
        35.0,
    ),
)
NCCL_KERNELS = (
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
    "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
)
_T0 = 1_700_000_000_000_000_000


@dataclass(frozen=True)
class SyntheticConfig:
    """Shape of the synthetic job."""

    steps: int = 20
    """Training steps after the init phase."""
    kernels_per_step: int = 200
    """Compute kernels per step (plus NCCL kernels when ranks > 1)."""
    streams: int = 2
    """Compute streams, 1-4; with ranks > 1 a communication stream is added."""
    ranks: int = 1
    nodes: int = 1
    seed: int = 0
    init_ns: int = 2_000_000_000
    """Length of the initialization phase before the first step."""
    finalize_ns: int = 300_000_000
    """Length of the finalization phase after the last step."""
    pageable_fraction: float = 0.3
    """Share of per-step HtoD copies from pageable (not pinned) host memory."""
    counter_interval_ns: int = 500_000_000
    slow_step_every: int = 0
    """If > 0, every n-th step waits on a slow data loader (a host stall)."""
    start_ns: int = _T0


def generate(config: SyntheticConfig = SyntheticConfig()) -> Trace:
    """The whole synthetic trace in memory (use generate_batches for huge ones)."""
    builders: dict[tuple[str, int], TraceBuilder] = {}
    meta = _meta(config)
    b = TraceBuilder(meta=meta)
    for node, rank, table, batch in generate_batches(config):
        builders.setdefault((node, rank), b)
        b.add(table, batch, node=node, rank=rank)
    return b.build()


def _meta(config: SyntheticConfig) -> TraceMeta:
    return TraceMeta(
        source="synthetic",
        job={
            "command": ["python", "train.py"],
            "world_size": config.ranks,
            "seed": config.seed,
            "steps": config.steps,
            "kernels_per_step": config.kernels_per_step,
        },
        hosts=tuple(f"node{n}" for n in range(config.nodes)),
    )


def generate_batches(config: SyntheticConfig, steps_per_batch: int = 200) -> Iterator[tuple[str, int, str, pa.Table]]:
    """Yield (node, rank, table, rows) batches of bounded size; concatenated they form generate()'s trace."""
    ranks_per_node = max(1, config.ranks // max(1, config.nodes))
    for rank in range(config.ranks):
        node = f"node{min(rank // ranks_per_node, config.nodes - 1)}"
        yield from _rank_batches(config, node, rank, steps_per_batch)
    for n in range(config.nodes):
        yield from _counter_batches(config, f"node{n}")


def _rank_batches(
    config: SyntheticConfig, node: str, rank: int, steps_per_batch: int
) -> Iterator[tuple[str, int, str, pa.Table]]:
    rng = np.random.default_rng([config.seed, rank])
    pid, tid = 1000 + rank, 1000 + rank
    yield (
        node,
        rank,
        "threads",
        pa.table({"pid": [pid, pid], "tid": [tid, tid + 7], "name": ["python3", "pt_autograd_0"]}),
    )
    yield (
        node,
        rank,
        "devices",
        pa.table(
            {
                "device": [rank % 8],
                "name": ["NVIDIA H100 80GB HBM3"],
                "uuid": [f"GPU-{rank:08x}-synthetic"],
                "compute_major": [9],
                "compute_minor": [0],
                "sm_count": [132],
                "memory_bytes": [85_520_809_984],
            }
        ),
    )
    state = _RankState(cpu_ns=config.start_ns + config.init_ns + int(rng.integers(0, 2_000_000)), corr=1)
    yield from _init_batches(config, node, rank, pid, tid, rng, state)
    for first in range(0, config.steps, steps_per_batch):
        n = min(steps_per_batch, config.steps - first)
        for table, rows in _steps(config, rank, pid, tid, rng, state, first, n).items():
            yield node, rank, table, rows


@dataclass
class _RankState:
    cpu_ns: int
    corr: int


def _init_batches(
    config: SyntheticConfig, node: str, rank: int, pid: int, tid: int, rng: np.random.Generator, state: _RankState
) -> Iterator[tuple[str, int, str, pa.Table]]:
    """Model load during init: a few large HtoD copies."""
    t0 = config.start_ns + config.init_ns // 2
    n = 4
    starts = t0 + np.arange(n, dtype=np.int64) * 50_000_000
    dur = rng.integers(5_000_000, 20_000_000, n)
    corr = np.arange(state.corr, state.corr + n, dtype=np.int64)
    state.corr += n
    yield (
        node,
        rank,
        "api",
        pa.table(
            {
                "start_ns": starts - 20_000,
                "end_ns": starts + dur + 10_000,
                "pid": np.full(n, pid),
                "tid": np.full(n, tid),
                "correlation_id": corr,
                "domain": ["runtime"] * n,
                "name": ["cudaMemcpyAsync"] * n,
                "cbid": np.full(n, 41),
            }
        ),
    )
    yield (
        node,
        rank,
        "memory",
        pa.table(
            {
                "op": ["memcpy"] * n,
                "start_ns": starts,
                "end_ns": starts + dur,
                "device": np.full(n, rank % 8, np.int32),
                "stream": np.full(n, 7),
                "correlation_id": corr,
                "bytes": rng.integers(1 << 28, 1 << 30, n),
                "copy_kind": ["HtoD"] * n,
                "src_kind": ["pinned"] * n,
                "dst_kind": ["device"] * n,
            }
        ),
    )
    yield (
        node,
        rank,
        "ranges",
        pa.table(
            {
                "start_ns": [config.start_ns + 1_000],
                "end_ns": [config.start_ns + config.init_ns - 1_000],
                "pid": [pid],
                "tid": [tid],
                "name": ["model_init"],
                "domain": ["ktrace"],
                "depth": [0],
                "on_gpu": [False],
            }
        ),
    )


def serialize_on_stream(ready: np.ndarray, dur: np.ndarray, free_at: int) -> np.ndarray:
    """Start times of back-to-back work on one stream: s_i = max(ready_i, end_{i-1}), vectorized.

    With D the cumulative durations, end_i = D_i + max_{j<=i}(ready_j - D_{j-1}).
    """
    if ready.size == 0:
        return ready
    return serialize_segments(ready, dur, np.zeros(ready.size, np.int64), np.array([free_at], np.int64))


_SEGMENT_GAP = np.int64(1) << 42
"""Offset between segments in serialize_segments: larger than any in-segment time range (~73 minutes)."""


def serialize_segments(ready: np.ndarray, dur: np.ndarray, seg: np.ndarray, free_at: np.ndarray) -> np.ndarray:
    """serialize_on_stream for many independent segments at once (segment ids `seg` non-decreasing, 0..n-1).

    Each segment starts on an idle stream that is free at free_at[segment]. Adding segment * a large
    offset keeps the running maximum from carrying over between segments.
    """
    cd = np.cumsum(dur)
    first = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    before = np.r_[0, cd[first[1:] - 1]]
    rank = np.cumsum(np.r_[True, seg[1:] != seg[:-1]]) - 1
    d = cd - before[rank]
    r = ready.astype(np.int64).copy()
    r[first] = np.maximum(r[first], free_at[seg[first]])
    shifted = r - (d - dur) + rank * _SEGMENT_GAP
    ends = d + np.maximum.accumulate(shifted) - rank * _SEGMENT_GAP
    return ends - dur


def _segmented_cumsum(values: np.ndarray, per: int) -> np.ndarray:
    """Cumulative sums restarting every `per` elements (values.size is a multiple of per)."""
    return np.cumsum(values.reshape(-1, per), axis=1).reshape(-1)


def _steps(
    config: SyntheticConfig,
    rank: int,
    pid: int,
    tid: int,
    rng: np.random.Generator,
    state: _RankState,
    first: int,
    n_steps: int,
) -> dict[str, pa.Table]:
    """Steps laid out in step-relative time, then shifted: each step ends with a sync the CPU waits on."""
    k = config.kernels_per_step
    comm = config.ranks > 1
    per_step = k + (4 if comm else 0)
    total = per_step * n_steps
    cat_idx = rng.integers(0, len(KERNEL_CATALOGUE), total)
    means = np.array([m for _, m in KERNEL_CATALOGUE])[cat_idx]
    dur = np.maximum(1_500, (rng.lognormal(0.0, 0.35, total) * means * 1_000)).astype(np.int64)
    names = np.array([nm for nm, _ in KERNEL_CATALOGUE], dtype=object)[cat_idx]
    pos = np.tile(np.arange(per_step), n_steps)
    is_comm = pos >= k
    if comm:
        names[is_comm] = np.array(NCCL_KERNELS, dtype=object)[rng.integers(0, 2, int(is_comm.sum()))]
        dur[is_comm] = rng.integers(200_000, 900_000, int(is_comm.sum()))
    streams = np.where(is_comm, 13, 7 + 4 * (rng.integers(0, config.streams, total) * (pos % 5 == 0)))
    # CPU timeline: python overhead between launches, a data-loader wait at the start of each step.
    gaps = rng.lognormal(2.6, 0.4, total).astype(np.int64) * 1_000  # ~14 µs
    step = np.repeat(np.arange(n_steps), per_step)
    loader = rng.integers(300_000, 900_000, n_steps)
    if config.slow_step_every > 0:
        slow = (np.arange(first, first + n_steps) + 1) % config.slow_step_every == 0
        loader = np.where(slow, loader + 40_000_000, loader)
    gaps[pos == 0] += loader
    api_dur = rng.integers(2_500, 7_000, total)
    api_start = _segmented_cumsum(gaps + api_dur, per_step) - api_dur
    api_end = api_start + api_dur
    ready = api_start + rng.integers(3_000, 9_000, total)
    sf = np.arange(n_steps) * per_step
    sl = sf + per_step - 1
    # The input batch: an HtoD copy issued just before the first launch; stream 7 waits for it.
    pageable = rng.random(n_steps) < config.pageable_fraction
    copy_bytes = rng.integers(4 << 20, 32 << 20, n_steps)
    copy_start = api_start[sf] - 15_000
    copy_end = copy_start + (copy_bytes / np.where(pageable, 6.0, 22.0)).astype(np.int64)  # bytes/(GB/s) = ns
    start = np.empty(total, np.int64)
    for s in np.unique(streams):
        m = np.flatnonzero(streams == s)
        free = copy_end if s == 7 else np.zeros(n_steps, np.int64)
        start[m] = serialize_segments(ready[m], dur[m], step[m], free)
    end = start + dur
    gpu_end = np.maximum.reduceat(end, sf)
    sync_start = api_end[sl] + 2_000
    sync_end = np.maximum(sync_start + 3_000, gpu_end + 4_000)
    length = sync_end + 5_000
    offset = state.cpu_ns + np.r_[0, np.cumsum(length)[:-1]]
    state.cpu_ns = int(offset[-1] + length[-1])
    shift = offset[step]
    corr = np.arange(state.corr, state.corr + total, dtype=np.int64)
    state.corr += total
    return _step_tables(
        config,
        rank,
        pid,
        tid,
        rng,
        state,
        first,
        n_steps,
        dict(
            api_start=api_start + shift,
            api_end=api_end + shift,
            start=start + shift,
            end=end + shift,
            dur=dur,
            names=names,
            streams=streams,
            corr=corr,
            is_comm=is_comm,
            step_first=sf,
            step_last=sl,
            sync_start=sync_start + offset,
            sync_end=sync_end + offset,
            step_start=offset + 1_000,
            copy_start=copy_start + offset,
            copy_end=copy_end + offset,
            copy_bytes=copy_bytes,
            pageable=pageable,
        ),
    )


def _step_tables(
    config: SyntheticConfig,
    rank: int,
    pid: int,
    tid: int,
    rng: np.random.Generator,
    state: _RankState,
    first: int,
    n_steps: int,
    a: dict[str, np.ndarray],
) -> dict[str, pa.Table]:
    total = a["start"].size
    device = np.full(total, rank % 8, np.int32)
    grid = rng.choice(np.array([1, 16, 108, 132, 264, 1024, 4096]), total).astype(np.int32)
    kernels = pa.table(
        {
            "start_ns": a["start"],
            "end_ns": a["end"],
            "device": device,
            "stream": a["streams"].astype(np.int64),
            "context_id": np.ones(total, np.int64),
            "correlation_id": a["corr"],
            "name": pa.array(a["names"], pa.string()),
            "grid_x": grid,
            "grid_y": np.ones(total, np.int32),
            "grid_z": np.ones(total, np.int32),
            "block_x": rng.choice(np.array([128, 256, 512], np.int32), total),
            "block_y": np.ones(total, np.int32),
            "block_z": np.ones(total, np.int32),
            "registers_per_thread": rng.choice(np.array([32, 64, 128, 168], np.int32), total),
            "static_shared_bytes": rng.choice(np.array([0, 4096, 16384], np.int32), total),
            "dynamic_shared_bytes": rng.choice(np.array([0, 49152, 98304], np.int32), total),
            "queued_ns": a["api_end"] - 500,
            "submitted_ns": a["api_end"] + 200,
            "collective": pa.array(["allreduce"] * total, pa.string(), mask=~a["is_comm"]),
            "in_nelems": pa.array(np.full(total, 1 << 24, np.int64), mask=~a["is_comm"]),
        }
    )
    api = pa.table(
        {
            "start_ns": a["api_start"],
            "end_ns": a["api_end"],
            "pid": np.full(total, pid),
            "tid": np.full(total, tid),
            "correlation_id": a["corr"],
            "domain": ["runtime"] * total,
            "name": ["cudaLaunchKernel"] * total,
            "cbid": np.full(total, 211, np.int32),
        }
    )
    n = n_steps
    copy_start, pageable, copy_bytes = a["copy_start"], a["pageable"], a["copy_bytes"]
    copy_corr = np.arange(state.corr, state.corr + n, dtype=np.int64)
    state.corr += n
    memory = pa.table(
        {
            "op": ["memcpy"] * n,
            "start_ns": copy_start,
            "end_ns": a["copy_end"],
            "device": np.full(n, rank % 8, np.int32),
            "stream": np.full(n, 7),
            "correlation_id": copy_corr,
            "bytes": copy_bytes,
            "copy_kind": ["HtoD"] * n,
            "src_kind": pa.array(np.where(pageable, "pageable", "pinned"), pa.string()),
            "dst_kind": ["device"] * n,
        }
    )
    copy_api = pa.table(
        {
            "start_ns": copy_start - 15_000,
            "end_ns": copy_start - 5_000,
            "pid": np.full(n, pid),
            "tid": np.full(n, tid),
            "correlation_id": copy_corr,
            "domain": ["runtime"] * n,
            "name": ["cudaMemcpyAsync"] * n,
            "cbid": np.full(n, 41, np.int32),
        }
    )
    sync_corr = np.arange(state.corr, state.corr + n, dtype=np.int64)
    state.corr += n
    syncs = pa.table(
        {
            "start_ns": a["sync_start"],
            "end_ns": a["sync_end"],
            "device": np.full(n, rank % 8, np.int32),
            "stream": np.full(n, 7),
            "sync_type": ["stream"] * n,
            "correlation_id": sync_corr,
        }
    )
    sync_api = pa.table(
        {
            "start_ns": a["sync_start"],
            "end_ns": a["sync_end"],
            "pid": np.full(n, pid),
            "tid": np.full(n, tid),
            "correlation_id": sync_corr,
            "domain": ["runtime"] * n,
            "name": ["cudaStreamSynchronize"] * n,
            "cbid": np.full(n, 131, np.int32),
        }
    )
    ranges = _step_ranges(a, pid, tid, first, n)
    return {
        "kernels": kernels,
        "api": pa.concat_tables([api, copy_api, sync_api]),
        "memory": memory,
        "syncs": syncs,
        "ranges": ranges,
    }


def _step_ranges(a: dict[str, np.ndarray], pid: int, tid: int, first: int, n: int) -> pa.Table:
    sf, sl = a["step_first"], a["step_last"]
    per_step = int(sl[0] - sf[0] + 1)
    step_start = a["step_start"]
    step_end = a["sync_end"] + 1_000
    fwd_end = a["api_end"][sf + per_step * 2 // 5]
    bwd_end = a["api_end"][sf + per_step * 17 // 20]
    names = (
        [f"ProfilerStep#{first + i}" for i in range(n)] + ["forward"] * n + ["backward"] * n + ["optimizer.step"] * n
    )
    starts = np.concatenate([step_start, a["api_start"][sf] - 1_000, fwd_end + 500, bwd_end + 500])
    ends = np.concatenate([step_end, fwd_end, bwd_end, a["api_end"][sl] + 500])
    m = 4 * n
    return pa.table(
        {
            "start_ns": starts,
            "end_ns": ends,
            "pid": np.full(m, pid),
            "tid": np.full(m, tid),
            "name": pa.array(names, pa.string()),
            "domain": ["profiler_step"] * n + ["nvtx"] * (3 * n),
            "depth": np.repeat(np.array([0, 1, 1, 1], np.int32), n),
            "on_gpu": np.zeros(m, bool),
        }
    )


def _counter_batches(config: SyntheticConfig, node: str) -> Iterator[tuple[str, int, str, pa.Table]]:
    """Node-level counters from the launcher at config.counter_interval_ns (rank = NODE_RANK)."""
    from ktrace.model.schema import NODE_RANK

    rng = np.random.default_rng([config.seed, 99, int(node.removeprefix("node") or 0)])
    per_step_ns = max(1, config.kernels_per_step) * 40_000 + 1_000_000
    span = config.init_ns + config.steps * per_step_ns + config.finalize_ns
    ts = config.start_ns + np.arange(0, span, config.counter_interval_ns, dtype=np.int64)
    n = ts.size
    in_loop = (ts - config.start_ns) > config.init_ns
    gpus = max(1, min(8, config.ranks))
    parts = [
        ("cpu.util", -1, np.clip(rng.normal(35, 8, n) + 20 * in_loop, 0, 100)),
        ("mem.used_bytes", -1, 32e9 + np.cumsum(rng.normal(1e6, 1e6, n))),
        ("cpu.iowait_pct", -1, np.clip(rng.normal(2, 1, n), 0, 100)),
        ("net.rx_bytes", -1, np.abs(rng.normal(5e6, 1e6, n))),
    ]
    for g in range(gpus):
        parts.append(("gpu.util", g, np.clip(rng.normal(20, 5, n) + 65 * in_loop, 0, 100)))
        parts.append(("gpu.mem_used_bytes", g, 2e9 + 30e9 * in_loop + rng.normal(0, 1e7, n)))
        parts.append(("gpu.power_w", g, 90 + 500 * in_loop + rng.normal(0, 10, n)))
    for c in range(4):
        parts.append(("cpu.core.util", c, np.clip(rng.normal(40, 15, n), 0, 100)))
    yield (
        node,
        NODE_RANK,
        "counters",
        pa.table(
            {
                "ts_ns": np.concatenate([ts] * len(parts)),
                "metric": pa.array([p[0] for p in parts for _ in range(n)], pa.string()),
                "instance": np.concatenate([np.full(n, p[1], np.int32) for p in parts]),
                "value": np.concatenate([p[2].astype(np.float64) for p in parts]),
            }
        ),
    )
