"""Time the whole summarize() on a big synthetic trace (goal: <= 3 s for 10 M kernels on 2 cores, after load).

Anchor, measured in the same run: the per-kernel statistics HTA's kernel breakdown computes (count/sum/
min/max/median per name) done with a plain numpy sort (pandas, HTA's engine, is not installed here),
i.e. one of the ~15 analyses the summary composes.

usage:
  python benchmarks/summary_speed.py [KERNELS]      # default 10_000_000
"""

from __future__ import annotations

import sys
import time

import numpy as np


def _numpy_kernel_stats(codes: np.ndarray, dur: np.ndarray) -> list[tuple[int, int, int, int, float]]:
    order = np.lexsort((dur, codes))
    c, d = codes[order], dur[order]
    bounds = np.flatnonzero(np.diff(c)) + 1
    return [(len(g), int(g.sum()), int(g[0]), int(g[-1]), float(np.median(g))) for g in np.split(d, bounds)]


def main(argv: list[str]) -> int:
    """Generate, warm up, time summarize() and the anchor, print seconds and the ratio."""
    import polars as pl

    from ktrace.analysis.summary import summarize
    from ktrace.testing import SyntheticConfig, generate

    kernels = int(argv[1]) if len(argv) > 1 else 10_000_000
    per_step = 2_000
    config = SyntheticConfig(steps=max(1, kernels // per_step), kernels_per_step=per_step, ranks=1, seed=1)
    t0 = time.perf_counter()
    trace = generate(config)
    print(f"generated {trace.kernels.height:,} kernels in {time.perf_counter() - t0:.1f} s "
          f"(polars threads {pl.thread_pool_size()})")
    summarize(generate(SyntheticConfig(steps=3, kernels_per_step=50)))  # numba compile / cache load
    t0 = time.perf_counter()
    summary = summarize(trace)
    ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    _numpy_kernel_stats(trace.kernels["name"].to_physical().to_numpy(),
                        (trace.kernels["end_ns"] - trace.kernels["start_ns"]).to_numpy())
    anchor = time.perf_counter() - t0
    print(f"summarize(): {ours:.2f} s for {summary.kernels:,} kernels ({summary.kernels / ours / 1e6:.1f} M kernels/s)")
    print(f"anchor numpy per-kernel group-by: {anchor:.2f} s; summarize / anchor = {ours / anchor:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
