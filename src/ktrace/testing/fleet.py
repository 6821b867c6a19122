"""A seeded synthetic multi-host job: many ranks on several hosts whose clocks disagree, NCCL collectives that end
together in true time, and one straggler rank.

Every rank runs the same steps: compute kernels on stream 7, and after each compute segment an NCCL collective on
stream 13. A collective starts on each rank when that rank is ready and ends on every rank at the same true time
(the last rank to arrive plus the transfer, plus a few µs of per-rank jitter), as NCCL's ring kernels do. The
straggler computes slower, so the others wait inside their collectives. Each host's clock reads
`true + offset + drift_ppm * 1e-6 * (true - start_ns)`; host 0 is the reference (offset 0, no drift). The planted
offsets and drifts are returned with the trace so tests can check an estimator against them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace, TraceMeta
from ktrace.testing.synthetic_config import KERNEL_CATALOGUE
from ktrace.testing.synthetic_steps import serialize_on_stream

FLEET_COLLECTIVES: tuple[tuple[str, str], ...] = (
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "allreduce"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "allgather"),
    ("ncclKernel_ReduceScatter_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "reducescatter"),
)
"""(kernel name, Kineto "Collective name") of the collectives each step issues, in turn."""
_T0 = 1_700_000_000_000_000_000
_COMPUTE_STREAM, _COMM_STREAM = 7, 13


@dataclass(frozen=True)
class FleetConfig:
    """Shape of the synthetic multi-host job."""

    ranks: int = 64
    hosts: int = 8
    """Ranks are spread evenly: rank r runs on host r // (ranks // hosts), device r % (ranks // hosts)."""
    steps: int = 12
    kernels_per_step: int = 24
    """Compute kernels per step (per rank)."""
    collectives_per_step: int = 3
    seed: int = 0
    max_offset_ns: int = 2_000_000_000
    """Host clock offsets are drawn uniformly from [-max_offset_ns, max_offset_ns] (host 0: 0)."""
    max_drift_ppm: float = 0.0
    """Host clock drifts are drawn uniformly from [-max_drift_ppm, max_drift_ppm] ppm (host 0: 0)."""
    straggler_rank: int | None = 13
    """This rank's compute kernels take `straggler_slowdown` times as long (None: no straggler); taken modulo
    `ranks` in smaller jobs."""
    straggler_slowdown: float = 1.6
    step_gap_ns: int = 50_000
    """Idle time between steps (data loading, evaluation): long gaps make a long trace, where drift shows."""
    jitter_ns: int = 2_000
    """Per-rank spread of a collective's end in true time (uniform in [0, jitter_ns])."""
    start_ns: int = _T0


@dataclass(frozen=True)
class FleetTrace:
    """The generated trace and what was planted in it."""

    trace: Trace
    offsets_ns: Mapping[str, int]
    """Host -> planted clock offset (host clock minus true time at start_ns), ns."""
    drift_ppm: Mapping[str, float]
    """Host -> planted clock drift, ppm."""
    straggler: tuple[str, int] | None
    """(host, rank) of the straggler."""
    config: FleetConfig = field(default_factory=FleetConfig)

    def true_ns(self, host: str, clock_ns: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """True time (the reference host's clock) of times read on `host`'s clock: the planted clock inverted."""
        k = self.drift_ppm[host] * 1e-6
        rel = (clock_ns - self.offsets_ns[host] - self.config.start_ns).astype(np.float64)
        return np.asarray(self.config.start_ns + np.round(rel / (1 + k)).astype(np.int64))

    def host_of(self, rank: int) -> str:
        """The host rank `rank` runs on."""
        return _host_names(self.config)[rank // _ranks_per_host(self.config)]


def _ranks_per_host(config: FleetConfig) -> int:
    return max(1, config.ranks // max(1, config.hosts))


def _host_names(config: FleetConfig) -> list[str]:
    width = len(str(max(0, config.hosts - 1)))
    return [f"node{h:0{width}d}" for h in range(config.hosts)]


def generate_fleet(config: FleetConfig = FleetConfig()) -> FleetTrace:
    """The whole job as one Trace (node = host, rank = global rank), with the planted clock errors."""
    if config.ranks < 1 or config.hosts < 1 or config.ranks % config.hosts:
        raise ValueError("ranks must be a positive multiple of hosts")
    rng = np.random.default_rng([config.seed, 13])
    hosts = _host_names(config)
    offsets = np.r_[0, rng.integers(-config.max_offset_ns, config.max_offset_ns + 1, config.hosts - 1)]
    drifts = np.r_[0.0, rng.uniform(-config.max_drift_ppm, config.max_drift_ppm, config.hosts - 1)]
    true = _true_times(config, rng)
    per_host = _ranks_per_host(config)
    builder = TraceBuilder(
        meta=TraceMeta(
            source="synthetic",
            job={"generator": "fleet", "world_size": config.ranks, "seed": config.seed, "steps": config.steps},
            hosts=tuple(hosts),
        )
    )
    for rank in range(config.ranks):
        h = rank // per_host

        def clock(t: np.ndarray, h: int = h) -> np.ndarray:
            return t + offsets[h] + np.round(drifts[h] * 1e-6 * (t - config.start_ns)).astype(np.int64)

        _add_rank(builder, config, true, rank, hosts[h], rank % per_host, clock)
    straggler = None if config.straggler_rank is None else config.straggler_rank % config.ranks
    return FleetTrace(
        trace=builder.build(),
        offsets_ns={hosts[h]: int(offsets[h]) for h in range(config.hosts)},
        drift_ppm={hosts[h]: float(drifts[h]) for h in range(config.hosts)},
        straggler=None if straggler is None else (hosts[straggler // per_host], straggler),
        config=config,
    )


@dataclass
class _TrueTimes:
    """Per (rank, step, launch position) true times; launch positions list compute kernels and collectives."""

    api_start: np.ndarray
    kernel_start: np.ndarray
    kernel_end: np.ndarray
    step_start: np.ndarray
    """(steps,), shared by all ranks."""
    step_end: np.ndarray
    """(ranks, steps)."""
    names: np.ndarray
    is_comm: np.ndarray
    comm_index: np.ndarray
    """Index into FLEET_COLLECTIVES per position (-1 for compute)."""
    nelems: np.ndarray


def _layout(config: FleetConfig, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Launch order of one step (shared by every rank): compute segments, each followed by one collective."""
    c = max(1, config.collectives_per_step)
    seg = np.array_split(np.arange(config.kernels_per_step), c)
    is_comm = np.concatenate([np.r_[np.zeros(s.size, bool), True] for s in seg])
    comm_index = np.full(is_comm.size, -1)
    comm_index[is_comm] = np.arange(c) % len(FLEET_COLLECTIVES)
    cat = rng.integers(0, len(KERNEL_CATALOGUE), is_comm.size)
    names = np.array([KERNEL_CATALOGUE[i][0] for i in cat], dtype=object)
    names[is_comm] = [FLEET_COLLECTIVES[i][0] for i in comm_index[is_comm]]
    means = np.array([KERNEL_CATALOGUE[i][1] for i in cat]) * 1_000
    return names, is_comm, comm_index, means


def _true_times(config: FleetConfig, rng: np.random.Generator) -> _TrueTimes:
    names, is_comm, comm_index, means = _layout(config, rng)
    n_pos, ranks, steps = is_comm.size, config.ranks, config.steps
    nelems = np.where(is_comm, 1 << (20 + comm_index.clip(0)), 0).astype(np.int64)
    slow = np.ones(ranks)
    if config.straggler_rank is not None:
        slow[config.straggler_rank % ranks] = config.straggler_slowdown
    shape = (ranks, steps, n_pos)
    api_start = np.zeros(shape, np.int64)
    k_start = np.zeros(shape, np.int64)
    k_end = np.zeros(shape, np.int64)
    step_start = np.zeros(steps, np.int64)
    step_end = np.zeros((ranks, steps), np.int64)
    t = config.start_ns + 500_000_000
    comm_pos = np.flatnonzero(is_comm)
    for s in range(steps):
        step_start[s] = t
        gaps = rng.lognormal(2.2, 0.3, (ranks, n_pos)).astype(np.int64) * 1_000  # ~9 µs of Python per launch
        loader = rng.integers(100_000, 300_000, ranks)
        api_start[:, s] = t + loader[:, None] + np.cumsum(gaps, axis=1)
        ready = api_start[:, s] + 4_000 + 3_000
        dur = (rng.lognormal(0.0, 0.2, (ranks, n_pos)) * means * slow[:, None]).astype(np.int64).clip(1_500)
        comp = ~is_comm
        for r in range(ranks):
            k_start[r, s, comp] = serialize_on_stream(ready[r, comp], dur[r, comp], t)
        k_end[:, s, comp] = k_start[:, s, comp] + dur[:, comp]
        prev_end = np.full(ranks, t)
        for p in comm_pos:
            segment_end = k_end[:, s, :p][:, comp[:p]].max(axis=1, initial=t)
            start = np.maximum.reduce([ready[:, p], segment_end, prev_end])
            xfer = int(rng.lognormal(0.0, 0.2) * 150_000 * (1 + comm_index[p]))
            end = start.max() + xfer + rng.integers(0, config.jitter_ns + 1, ranks)
            k_start[:, s, p], k_end[:, s, p] = start, end
            prev_end = end
        step_end[:, s] = k_end[:, s].max(axis=1) + 20_000
        t = int(step_end[:, s].max()) + config.step_gap_ns
    return _TrueTimes(api_start, k_start, k_end, step_start, step_end, names, is_comm, comm_index, nelems)


def _add_rank(
    builder: TraceBuilder,
    config: FleetConfig,
    true: _TrueTimes,
    rank: int,
    node: str,
    device: int,
    clock: Callable[[np.ndarray], np.ndarray],
) -> None:
    pid = tid = 10_000 + rank
    n = true.kernel_start[rank].size
    steps = config.steps
    comm = np.tile(true.is_comm, steps)
    corr = np.arange(1, n + 1, dtype=np.int64)
    comm_kind = np.array([c for _, c in FLEET_COLLECTIVES], dtype=object)[np.tile(true.comm_index, steps).clip(0)]
    ones = np.ones(n, np.int32)
    builder.add(
        "kernels",
        {
            "start_ns": clock(true.kernel_start[rank].reshape(-1)),
            "end_ns": clock(true.kernel_end[rank].reshape(-1)),
            "device": np.full(n, device, np.int32),
            "stream": np.where(comm, _COMM_STREAM, _COMPUTE_STREAM).astype(np.int64),
            "context_id": np.ones(n, np.int64),
            "correlation_id": corr,
            "external_id": corr,
            "name": np.tile(true.names, steps).tolist(),
            "grid_x": np.where(comm, 8, 264).astype(np.int32),
            "grid_y": ones,
            "grid_z": ones,
            "block_x": np.where(comm, 544, 256).astype(np.int32),
            "block_y": ones,
            "block_z": ones,
            "collective": [c if m else None for c, m in zip(comm_kind, comm, strict=True)],
            "in_nelems": [int(v) if m else None for v, m in zip(np.tile(true.nelems, steps), comm, strict=True)],
            "out_nelems": [int(v) if m else None for v, m in zip(np.tile(true.nelems, steps), comm, strict=True)],
            "comm_dtype": ["Float" if m else None for m in comm],
            "group_size": [config.ranks if m else None for m in comm],
        },
        node=node,
        rank=rank,
    )
    api_start = clock(true.api_start[rank].reshape(-1))
    builder.add(
        "api",
        {
            "start_ns": api_start,
            "end_ns": api_start + 4_000,
            "pid": np.full(n, pid),
            "tid": np.full(n, tid),
            "correlation_id": corr,
            "external_id": corr,
            "domain": ["runtime"] * n,
            "name": ["cudaLaunchKernel"] * n,
            "cbid": np.full(n, 211, np.int32),
        },
        node=node,
        rank=rank,
    )
    builder.add(
        "ranges",
        {
            "start_ns": clock(true.step_start + 1_000),
            "end_ns": clock(true.step_end[rank]),
            "pid": np.full(steps, pid),
            "tid": np.full(steps, tid),
            "name": [f"ProfilerStep#{s}" for s in range(steps)],
            "domain": ["profiler_step"] * steps,
            "depth": np.zeros(steps, np.int32),
            "on_gpu": np.zeros(steps, bool),
        },
        node=node,
        rank=rank,
    )
    builder.add("threads", {"pid": [pid], "tid": [tid], "name": ["python3"]}, node=node, rank=rank)
    builder.add(
        "devices",
        {"device": [device], "name": ["NVIDIA H100 80GB HBM3"], "uuid": [f"GPU-{rank:08x}-fleet"], "sm_count": [132]},
        node=node,
        rank=rank,
    )
