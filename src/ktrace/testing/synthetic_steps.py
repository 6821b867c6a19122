"""The training steps of one synthetic rank: kernels, launches, copies and syncs laid out in step-relative time,
then shifted (testing.synthetic's batches of steps)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ktrace.testing.synthetic_config import KERNEL_CATALOGUE, NCCL_KERNELS, RankState, SyntheticConfig


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


def step_batches(
    config: SyntheticConfig,
    rank: int,
    pid: int,
    tid: int,
    rng: np.random.Generator,
    state: RankState,
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
    state: RankState,
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
