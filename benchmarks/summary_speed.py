"""Time the whole summarize() on a big synthetic trace (goal: <= 3 s for 10 M kernels on 2 cores, after load).

Two measurements:
- in memory: the generated trace, summarized 3 times (each time as a new Trace object, so nothing
  shared through an analysis index carries over); best and median.
- from the store (--store): the trace written to a .ktrace folder, then 5 fresh processes each open it
  and summarize it, as `ktrace summary` does; best and median of both the load and summarize().

Anchor, measured in the same run: the per-kernel statistics HTA's kernel breakdown computes (count/sum/
min/max/median per name) done with a plain numpy sort (pandas, HTA's engine, is not installed here),
i.e. one of the ~15 analyses the summary composes.

usage:
  python benchmarks/summary_speed.py [KERNELS] [--store]      # default 10_000_000
"""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _numpy_kernel_stats(codes: np.ndarray, dur: np.ndarray) -> list[tuple[int, int, int, int, float]]:
    order = np.lexsort((dur, codes))
    c, d = codes[order], dur[order]
    bounds = np.flatnonzero(np.diff(c)) + 1
    return [(len(g), int(g.sum()), int(g[0]), int(g[-1]), float(np.median(g))) for g in np.split(d, bounds)]


def _warm_up() -> None:
    from ktrace.analysis.summary import summarize
    from ktrace.testing import SyntheticConfig, generate

    summarize(generate(SyntheticConfig(steps=3, kernels_per_step=50)))  # numba compile / cache load


def _child(path: str) -> None:
    """Fresh process: open the store, summarize, print both times."""
    import ktrace
    from ktrace.analysis.summary import summarize

    _warm_up()
    t0 = time.perf_counter()
    trace = ktrace.open(path)
    t1 = time.perf_counter()
    summarize(trace)
    print(f"{t1 - t0:.4f} {time.perf_counter() - t1:.4f}")


def _spread(values: list[float]) -> str:
    return f"best {min(values):.2f} s, median {statistics.median(values):.2f} s"


def main(argv: list[str]) -> int:
    """Generate, warm up, time summarize() and the anchor, print seconds and the ratio."""
    if len(argv) > 2 and argv[1] == "--child":
        _child(argv[2])
        return 0
    import polars as pl

    from ktrace.analysis.summary import summarize
    from ktrace.testing import SyntheticConfig, generate

    args = [a for a in argv[1:] if not a.startswith("--")]
    kernels = int(args[0]) if args else 10_000_000
    per_step = 2_000
    config = SyntheticConfig(steps=max(1, kernels // per_step), kernels_per_step=per_step, ranks=1, seed=1)
    t0 = time.perf_counter()
    trace = generate(config)
    print(
        f"generated {trace.kernels.height:,} kernels in {time.perf_counter() - t0:.1f} s "
        f"(polars threads {pl.thread_pool_size()})"
    )
    _warm_up()
    times = []
    for _ in range(3):
        fresh = dataclasses.replace(trace)  # a new Trace object (and summarize builds a fresh TraceIndex)
        t0 = time.perf_counter()
        summary = summarize(fresh)
        times.append(time.perf_counter() - t0)
        del fresh
    t0 = time.perf_counter()
    _numpy_kernel_stats(
        trace.kernels["name"].to_physical().to_numpy(), (trace.kernels["end_ns"] - trace.kernels["start_ns"]).to_numpy()
    )
    anchor = time.perf_counter() - t0
    ours = statistics.median(times)
    print(
        f"summarize() in memory: {_spread(times)} for {summary.kernels:,} kernels "
        f"({summary.kernels / ours / 1e6:.1f} M kernels/s)"
    )
    print(f"anchor numpy per-kernel group-by: {anchor:.2f} s; summarize (median) / anchor = {ours / anchor:.2f}")
    if "--store" in argv:
        from ktrace.model import store

        root = Path(tempfile.mkdtemp()) / "summary-bench.ktrace"
        store.write(trace, root)
        del trace
        runs = []
        for _ in range(5):
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(root)], capture_output=True, text=True, check=True
            ).stdout.split()
            runs.append((float(out[0]), float(out[1])))
        shutil.rmtree(root.parent, ignore_errors=True)
        loads, sums = [r[0] for r in runs], [r[1] for r in runs]
        print(f"from the store, 5 fresh processes: open {_spread(loads)}; summarize() {_spread(sums)}")
        print(f"goal summarize() <= 3 s after load: {'met' if max(sums) <= 3 else 'MISSED'} (worst {max(sums):.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
