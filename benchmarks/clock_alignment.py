"""Clock alignment (issue #13): planted host offsets recovered on the synthetic fleet job, and the estimator's cost
from per-rank inputs up to 4,096 ranks on 32 hosts.

    python benchmarks/clock_alignment.py [--seeds 5] [--ranks 4096 --hosts 32 --collectives 300]

Prints the worst |aligned - true| per seed (64 ranks, 8 hosts, offsets up to +-2 s; drift up to 50 ppm on a 12 s
trace), the CPU cost of reading a 64-rank store aligned against raw, then CPU seconds (time.process_time) of
estimate_offsets on inputs of the given size and their size in
memory, and as its last line:
`clock: worst error <ns> ns over <n> seeds (goal 10000), <ranks> ranks / <hosts> hosts estimate <s> s CPU, inputs <MB> MB of
RSS`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from ktrace.model import store
from ktrace.model.clock_estimate import COLLECTIVE_COLUMNS, RankClockInput, align_trace, estimate_offsets
from ktrace.testing.fleet import FleetConfig, generate_fleet


def worst_error_ns(seed: int, drift: float, gap: int) -> int:
    fleet = generate_fleet(FleetConfig(seed=seed, max_drift_ppm=drift, step_gap_ns=gap))
    alignment = align_trace(fleet.trace)
    comm = fleet.trace.kernels.filter(pl.col("collective").is_not_null())
    worst = 0
    for h in alignment.hosts:
        ends = comm.filter(pl.col("node").cast(pl.String) == h.host)["end_ns"].to_numpy()
        drift_ns = np.round((ends - h.anchor_ns) * (h.drift_ppm * 1e-6)).astype(np.int64)
        worst = max(worst, int(np.abs(ends - h.offset_ns - drift_ns - fleet.true_ns(h.host, ends)).max()))
    return worst


def scale_inputs(ranks: int, hosts: int, collectives: int, seed: int = 0) -> list[RankClockInput]:
    """Per-rank inputs as a streaming import keeps them: one small table of collective ends per rank."""
    rng = np.random.default_rng(seed)
    true_end = 1_700_000_000_000_000_000 + np.cumsum(rng.integers(1_000_000, 5_000_000, collectives))
    offsets = np.r_[0, rng.integers(-2_000_000_000, 2_000_000_001, hosts - 1)]
    per_host = ranks // hosts
    name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
    inputs = []
    for r in range(ranks):
        ends = true_end + offsets[r // per_host] + rng.integers(0, 2_000, collectives)
        frame = pl.DataFrame(
            {"name": [name] * collectives, "group": None, "seq": None, "end_ns": ends}, schema=COLLECTIVE_COLUMNS
        )
        inputs.append(RankClockInput(f"host{r // per_host:03d}", r, frame))
    return inputs


def read_cost(steps: int, folder: Path) -> tuple[int, float, float]:
    """(rows, CPU s of store.read raw, aligned): a 64-rank store of raw timestamps with its alignment in meta."""
    fleet = generate_fleet(FleetConfig(steps=steps, kernels_per_step=100))
    trace = fleet.trace.with_meta(dataclasses.replace(fleet.trace.meta, clock_alignment=align_trace(fleet.trace)))
    root = store.write(trace, folder / "fleet.ktrace")
    rows = sum(trace.counts().values())
    cost = {}
    for mode in ("raw", "aligned", "raw", "aligned", "raw", "aligned"):
        t = time.process_time()
        store.read(root, clock=mode)
        cost.setdefault(mode, []).append(time.process_time() - t)
    return rows, float(np.median(cost["raw"])), float(np.median(cost["aligned"]))


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--hosts", type=int, default=32)
    parser.add_argument("--collectives", type=int, default=300)
    parser.add_argument("--read-steps", type=int, default=100, help="steps of the 64-rank store read raw and aligned")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    worst = 0
    for seed in range(args.seeds):
        for drift, gap in ((0.0, 50_000), (50.0, 1_000_000_000)):
            t = time.process_time()
            err = worst_error_ns(seed, drift, gap)
            worst = max(worst, err)
            print(f"seed {seed} drift <= {drift:g} ppm: worst error {err} ns ({time.process_time() - t:.2f} s CPU)")
    with tempfile.TemporaryDirectory() as tmp:
        rows, raw_s, aligned_s = read_cost(args.read_steps, Path(tmp))
    print(f"store.read of {rows:,} rows on 8 hosts: raw {raw_s:.2f} s, aligned {aligned_s:.2f} s CPU "
          f"({aligned_s / raw_s:.2f}x), median of 3")  # fmt: skip
    before = _rss_mb()
    inputs = scale_inputs(args.ranks, args.hosts, args.collectives)
    size_mb = _rss_mb() - before  # estimated_size() counts a Categorical's whole category map in every frame
    t = time.process_time()
    alignment = estimate_offsets(inputs)
    cpu = time.process_time() - t
    print(f"{args.ranks} ranks x {args.collectives} collectives: {alignment.method}, residual p99 "
          f"{alignment.residual_p99_ns} ns, {cpu:.2f} s CPU, inputs {size_mb:.1f} MB of RSS")  # fmt: skip
    print(
        f"clock: worst error {worst} ns over {args.seeds} seeds (goal 10000), {args.ranks} ranks / {args.hosts} "
        f"hosts estimate {cpu:.2f} s CPU, inputs {size_mb:.1f} MB of RSS"
    )


if __name__ == "__main__":
    main()
