"""Time ktrace's interval analyses on a ~10 M-kernel synthetic trace, against an anchor measured in the same run.

Anchor: HTA's own busy-time algorithm (`merge_kernel_intervals`: sort by start, group = start >
cummax(previous end), group-by min/max) written in polars over the same kernels — i.e. the
dataframe way, minus pandas' overheads. Every analysis is reported in seconds and as a ratio to the
anchor. Numba kernels are warmed up on a small trace first (compile/cache load is reported apart).

Usage: python benchmarks/analysis_speed.py [--kernels 10_000_000] [--ranks 2]
Set POLARS_MAX_THREADS=2 to emulate the 2-core target when running on a bigger machine.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import polars as pl

from ktrace.analysis import breakdown, idle, latency, overlap, steps, utilization
from ktrace.model.trace import Trace
from ktrace.testing import SyntheticConfig, generate


def analyses(t: Trace) -> list[tuple[str, Callable[[], Any]]]:
    """(label, thunk) for every analysis of this helper's modules."""
    return [
        ("busy_time per device", lambda: utilization.busy_time(t, per="device")),
        ("busy_time per stream", lambda: utilization.busy_time(t, per="stream")),
        ("utilization_over_time 100 ms", lambda: utilization.utilization_over_time(t, 100_000_000)),
        ("active_time_share", lambda: utilization.active_time_share(t)),
        ("temporal_breakdown", lambda: breakdown.temporal_breakdown(t)),
        ("kernel_type_breakdown", lambda: breakdown.kernel_type_breakdown(t)),
        ("comm_compute_overlap", lambda: overlap.comm_compute_overlap(t)),
        ("launch_latency", lambda: latency.launch_latency(t)),
        ("latency_stats by name", lambda: latency.latency_stats(t, by="name")),
        ("idle_breakdown", lambda: idle.idle_breakdown(t)),
        ("gpu_gaps >= 500 ms", lambda: idle.gpu_gaps(t, min_gap_ns=500_000_000)),
        ("queue_depth_stats", lambda: overlap.queue_depth_stats(t)),
        ("detect_steps", lambda: steps.detect_steps(t)),
        ("step_stats", lambda: steps.step_stats(t)),
        ("step_outliers", lambda: steps.step_outliers(t)),
        ("attribute_kernels", lambda: steps.attribute_kernels(t)),
    ]


def anchor(t: Trace) -> float:
    """HTA's merge_kernel_intervals busy time per rank, in polars; returns seconds."""
    s = time.perf_counter()
    k = t.kernels.select("rank", "start_ns", "end_ns").sort("rank", "start_ns")
    k = k.with_columns(
        grp=(pl.col("start_ns") > pl.col("end_ns").shift().cum_max().over("rank")).fill_null(True).cum_sum()
    )
    merged = k.group_by("rank", "grp").agg(pl.col("start_ns").min(), pl.col("end_ns").max())
    merged.group_by("rank").agg((pl.col("end_ns") - pl.col("start_ns")).sum())
    return time.perf_counter() - s


def timed(fn: Callable[[], Any]) -> float:
    s = time.perf_counter()
    fn()
    return time.perf_counter() - s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=10_000_000)
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    small = generate(SyntheticConfig(steps=4, kernels_per_step=50, ranks=2))
    warm = sum(timed(fn) for _, fn in analyses(small))
    print(f"warm-up on a small trace (numba compile or cache load): {warm:.2f} s")
    kps = 1000
    cfg = SyntheticConfig(steps=max(1, args.kernels // (kps * args.ranks)), kernels_per_step=kps, ranks=args.ranks)
    s = time.perf_counter()
    t = generate(cfg)
    print(
        f"generated {t.kernels.height:,} kernels, {t.api.height:,} api rows, {args.ranks} ranks "
        f"in {time.perf_counter() - s:.1f} s"
    )
    a = min(anchor(t) for _ in range(2))
    print(f"anchor (HTA merge_kernel_intervals in polars, busy per rank): {a:.3f} s")
    print(f"{'analysis':<32} {'seconds':>9} {'x anchor':>9}")
    total = 0.0
    for label, fn in analyses(t):
        sec = timed(fn)
        total += sec
        print(f"{label:<32} {sec:>9.3f} {sec / a:>9.2f}")
    print(f"{'total':<32} {total:>9.3f} {total / a:>9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
