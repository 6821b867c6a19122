"""A seeded synthetic trace that looks like a real training job, scalable to 10 M kernels in batches."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace, TraceMeta
from ktrace.testing.synthetic_config import RankState
from ktrace.testing.synthetic_config import SyntheticConfig as SyntheticConfig
from ktrace.testing.synthetic_steps import step_batches

DEFAULT_CONFIG = SyntheticConfig()
"""20 steps of 200 kernels on one rank."""


def generate(config: SyntheticConfig = DEFAULT_CONFIG) -> Trace:
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
    state = RankState(cpu_ns=config.start_ns + config.init_ns + int(rng.integers(0, 2_000_000)), corr=1)
    yield from _init_batches(config, node, rank, pid, tid, rng, state)
    for first in range(0, config.steps, steps_per_batch):
        n = min(steps_per_batch, config.steps - first)
        for table, rows in step_batches(config, rank, pid, tid, rng, state, first, n).items():
            yield node, rank, table, rows


def _init_batches(
    config: SyntheticConfig, node: str, rank: int, pid: int, tid: int, rng: np.random.Generator, state: RankState
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
