"""End to end vs Holistic Trace Analysis (HTA): load + the analyses HTA offers, on the same tiled real trace.

Tiles the biggest real Kineto trace in ../shared/traces 10x in time (benchmarks/tile_kineto.py), then
runs, each in its own fresh subprocess and timed from after the library imports:

- HTA (throwaway venv, default /tmp/htavenv): ``TraceAnalysis`` load, ``get_temporal_breakdown``,
  ``get_gpu_kernel_breakdown``, ``get_cuda_kernel_launch_stats`` and ``get_idle_time_breakdown``;
- ktrace: ``ktrace.open`` + the corresponding analyses (``breakdown.temporal_breakdown``,
  ``breakdown.kernel_type_breakdown`` + ``kernels.kernel_stats``, ``latency.latency_stats``,
  ``idle.idle_breakdown``) and then the whole ``summary.summarize()`` (the dashboard: ~15 analyses).

Prints wall time per phase, peak RSS (whole process, max of self and children) and the ratios.
Goal (the speed issue): ktrace >= 20x faster end to end, <= 1/4 of HTA's peak RSS. The numba kernels
are compiled or loaded from cache in a warm-up run on a tiny synthetic trace before the clock starts
(as the CLI's cache would have them); the ktrace figure includes summarize() on top of the four
analyses, so it is the conservative one.

examples:
  python benchmarks/end_to_end_vs_hta.py
  python benchmarks/end_to_end_vs_hta.py --copies 10 --repeat 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from import_vs_hta import SHARED, biggest_kineto_trace, ensure_hta, measure  # noqa: E402

HTA_SETUP = """
import logging, warnings; warnings.filterwarnings("ignore"); logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
"""
HTA_BODY = """
extra = {}
def phase(name, fn):
    t = time.perf_counter(); r = fn(); extra[name] = round(time.perf_counter() - t, 3); return r
ta = phase("load", lambda: TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=True))
ranks = sorted(ta.t.get_ranks())
phase("temporal_breakdown", lambda: ta.get_temporal_breakdown(visualize=False))
phase("kernel_breakdown", lambda: ta.get_gpu_kernel_breakdown(visualize=False))
phase("launch_stats", lambda: ta.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False))
phase("idle_breakdown", lambda: ta.get_idle_time_breakdown(ranks=ranks, visualize=False))
"""
KTRACE_SETUP = """
import ktrace
from ktrace.analysis import breakdown, idle, kernels, latency, summary
from ktrace.testing import SyntheticConfig, generate
summary.summarize(generate(SyntheticConfig(steps=3, kernels_per_step=50)))  # numba cache load
"""
KTRACE_BODY = """
extra = {}
def phase(name, fn):
    t = time.perf_counter(); r = fn(); extra[name] = round(time.perf_counter() - t, 3); return r
trace = phase("load", lambda: ktrace.open(sys.argv[1]))
phase("temporal_breakdown", lambda: breakdown.temporal_breakdown(trace))
phase("kernel_breakdown", lambda: (breakdown.kernel_type_breakdown(trace), kernels.kernel_stats(trace)))
phase("launch_stats", lambda: latency.latency_stats(trace))
phase("idle_breakdown", lambda: idle.idle_breakdown(trace))
phase("summarize", lambda: summary.summarize(trace))
extra["kernels"] = trace.kernels.height
"""


def tiled_trace(traces: Path, copies: int, workdir: Path) -> Path:
    """The biggest real Kineto trace tiled `copies` times, alone in its own folder (made once)."""
    from tile_kineto import tiled_copy

    src = biggest_kineto_trace(traces)
    tiled = tiled_copy(src, copies, workdir)
    print(f"trace: {tiled} ({tiled.stat().st_size / 1e6:.1f} MB gz), from {src.parent.name}/{src.name}")
    return tiled


def _phases(r: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in r["extra"].items() if k != "kernels")


def main(argv: list[str] | None = None) -> int:
    """Command line: tile, run both sides (alternating, best of --repeat), print figures and ratios."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=Path, default=SHARED, help="folder of real traces (shared/traces)")
    parser.add_argument("--copies", type=int, default=10, help="how many times to tile the trace in time")
    parser.add_argument("--repeat", type=int, default=1, help="runs per side; the fastest is kept")
    parser.add_argument("--venv", type=Path, default=Path("/tmp/htavenv"), help="throwaway venv with HTA")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "ktrace-bench")
    args = parser.parse_args(argv)
    hta = ensure_hta(args.venv)
    tiled = tiled_trace(args.traces, args.copies, args.workdir)
    print(f"machine load before: {os.getloadavg()[0]:.1f}")
    runs: dict[str, list[dict[str, Any]]] = {"hta": [], "ktrace": []}
    for _ in range(args.repeat):
        runs["hta"].append(measure(str(hta), HTA_BODY, tiled.parent, setup=HTA_SETUP))
        runs["ktrace"].append(measure(sys.executable, KTRACE_BODY, tiled, setup=KTRACE_SETUP))
    best = {k: min(v, key=lambda r: r["wall_s"]) for k, v in runs.items()}
    for name, r in best.items():
        print(f"{name:7s} total {r['wall_s']:7.2f} s   peak RSS {r['peak_rss_mb']:7.0f} MB   ({_phases(r)})")
    h, k = best["hta"], best["ktrace"]
    no_summary = k["wall_s"] - k["extra"]["summarize"]
    print(f"kernels: {k['extra']['kernels']:,}; machine load after: {os.getloadavg()[0]:.1f}")
    print(f"ratio, like for like (load + the four analyses): ktrace {h['wall_s'] / no_summary:.1f}x faster")
    print(
        f"ratio, ktrace also running summarize(): {h['wall_s'] / k['wall_s']:.1f}x faster (goal >= 20x); "
        f"peak RSS {k['peak_rss_mb'] / h['peak_rss_mb']:.2f} of HTA's (goal <= 0.25)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
