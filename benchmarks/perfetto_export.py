"""`ktrace export -f perfetto` (or -f chrome) end to end on a synthetic store: slices per second (wall and CPU), peak
RSS above the opened store, stages.

The store (ktrace.testing's generator: --kernels kernels in steps of 2,000 on 4 streams, one rank; about two
slices per kernel with the API calls) is written once under --workdir and reused. Each run is a fresh subprocess:
it opens the store (not timed), then times the export to a file in the same folder. CPU time is the process's
user + system time (every thread), so a loaded machine inflates wall time far more than CPU time; the load average
before and after is printed. Memory: RSS sampled every 10 ms from a thread; "above the opened store" is the peak
during the export minus the RSS once the store is open and every column of it has been read (a store's columns
become resident when first read, which would otherwise count against the export; the RSS
right after ktrace.open is printed too). Issue 29's goal: <= 1 GB above the opened store at any size. `--stages` adds the
wall and CPU time of each step of the Perfetto export, and of the Chrome one (`kernel (writer)`: the compiled
kernels, which run in the writer's thread beside the main thread's work; every figure is the process's CPU, all
threads, so the stages' CPU overlap).

    python benchmarks/perfetto_export.py                        # 10,000,000 kernels
    python benchmarks/perfetto_export.py --kernels 3000000 --format both
    python benchmarks/perfetto_export.py --kernels 1000000 --repeat 3 --stages
    python benchmarks/perfetto_export.py --kernels 1000000 --numpy   # numpy encoder and line formatter, every rank

The last line (one per format) reads `perfetto_export: <M> M slices/s wall, <M> M slices/s per CPU second on <n>
kernels (...; peak RSS <MB> MB, <MB> MB above the opened store)`.

The export runs with the allocator settings `ktrace export` sets (polars' jemalloc hands freed pages back after 50
ms, pyarrow's system pool; `--allocators library` for the libraries' own). "Above the opened store" can fall as the
store grows: the export reuses pages the store's read freed and the allocator kept, which the baseline counts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ktrace.cli.options import ALLOCATOR_SETTINGS

MAKE_STORE = """
import sys
from ktrace.model import store
from ktrace.testing import SyntheticConfig, generate
n = int(sys.argv[2])
store.write(generate(SyntheticConfig(steps=max(1, n // 2000), kernels_per_step=2000, streams=4)), sys.argv[1])
"""

EXPORT = """
import collections, functools, json, resource, sys, threading, time
import polars as pl
import psutil
import ktrace
import ktrace.exporters.perfetto as P
from ktrace.exporters.chrome_json import export_chrome_json

stages = collections.defaultdict(lambda: [0.0, 0.0])
def timed(owner, name, label=None):
    f = getattr(owner, name)
    label = label or name
    @functools.wraps(f)
    def wrapper(*a, **k):
        t, c = time.perf_counter(), time.process_time()
        try:
            return f(*a, **k)
        finally:
            stages[label][0] += time.perf_counter() - t
            stages[label][1] += time.process_time() - c
    setattr(owner, name, wrapper)
if sys.argv[2] == "1":
    for name in ("RankLayout", "_encode_chunk", "encode_numpy", "_counter_events"):
        timed(P, name)
    from ktrace.exporters.perfetto_slice_rows import Encoding
    timed(Encoding, "__init__", "kernel inputs")  # the compiled kernel's inputs
    timed(Encoding, "run", "kernel (writer)")  # the compiled kernel, in the writer's thread
    import ktrace.exporters.chrome_json as C
    from ktrace.exporters.chrome_compiled_lines import Formatting
    from ktrace.exporters.chrome_layout import ChromeLayout
    for name in ("slice_lines", "flow_lines", "slice_lines_prepared", "flow_lines_prepared", "_counter_lines"):
        timed(C, name)  # numpy line formatters or the compiled kernel's inputs, counters by polars
    timed(Formatting, "run", "kernel (writer)")  # the compiled kernel, in the writer's thread
    timed(ChromeLayout, "__init__", "layout pass")  # the layout pass: windows, places, lanes, launches
    timed(ChromeLayout, "pids_tids")  # the second pass's placing of each chunk
trace = ktrace.open(sys.argv[1])
me = psutil.Process()
opened_lazy = me.memory_info().rss
for name in ("kernels", "api", "ranges", "ops", "memory", "syncs", "counters", "allocations"):
    getattr(trace, name).select(pl.all().hash().sum())  # read every column: the store's pages become resident
opened = me.memory_info().rss
peak = [opened]
done = threading.Event()
def sample():
    while not done.wait(0.01):
        peak[0] = max(peak[0], me.memory_info().rss)
sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
r0 = resource.getrusage(resource.RUSAGE_SELF)
t = time.perf_counter()
if sys.argv[3] == "chrome":
    counts = export_chrome_json(trace, sys.argv[1] + ".json")
    slices, flows, size = counts["slices"], counts["flows"], 0
else:
    stats = P.export_perfetto(trace, sys.argv[1] + ".pftrace")
    slices, flows, size = stats.slices, stats.flows, stats.bytes
wall = time.perf_counter() - t
r1 = resource.getrusage(resource.RUSAGE_SELF)
done.set()
sampler.join()
peak[0] = max(peak[0], me.memory_info().rss)
print(json.dumps({"slices": slices, "flows": flows, "bytes": size, "wall_s": wall,
                  "cpu_s": (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime),
                  "opened_rss_mb": opened / 2**20, "peak_rss_mb": peak[0] / 2**20,
                  "opened_lazy_rss_mb": opened_lazy / 2**20,
                  "stages": {k: v for k, v in stages.items()}}))
"""


def ensure_store(n_kernels: int, workdir: Path) -> Path:
    """The synthetic store of about `n_kernels` kernels under `workdir` (written on first use)."""
    path = workdir / f"synthetic_{n_kernels}.ktrace"
    if not path.exists():
        print(f"building a synthetic store of {n_kernels:,} kernels ...", file=sys.stderr)
        subprocess.run([sys.executable, "-c", MAKE_STORE, str(path), str(n_kernels)], check=True)
    return path


def export_once(store: Path, stages: bool, numpy_only: bool, fmt: str, allocators: str) -> dict[str, object]:
    """One export (perfetto or chrome) in a fresh process: its figures as a dict."""
    never = {"KTRACE_PERFETTO_COMPILED_ROWS": str(2**62), "KTRACE_CHROME_COMPILED_ROWS": str(2**62)}
    returning = {name: value for name, (_, value) in ALLOCATOR_SETTINGS.items()} if allocators == "export" else {}
    env = {**returning, **os.environ, **(never if numpy_only else {})}
    done = subprocess.run(
        [sys.executable, "-c", EXPORT, str(store), "1" if stages else "0", fmt],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    Path(str(store) + (".json" if fmt == "chrome" else ".pftrace")).unlink(missing_ok=True)
    return out


def report(fmt: str, runs: list[dict[str, object]], args: argparse.Namespace) -> None:
    """Each run's figures, then the fastest run's summary line."""
    for r in runs:
        above = float(r["peak_rss_mb"]) - float(r["opened_rss_mb"])  # type: ignore[arg-type]
        print(
            f"  {fmt}: {r['slices']:,} slices ({r['flows']:,} flows, {r['bytes'] / 1e6:.0f} MB): wall "  # type: ignore[operator]
            f"{r['wall_s']:.2f} s, CPU {r['cpu_s']:.2f} s; peak RSS {r['peak_rss_mb']:.0f} MB, {above:.0f} MB above "
            f"the opened store ({r['opened_rss_mb']:.0f} MB; {r['opened_lazy_rss_mb']:.0f} MB before its columns "
            "were read)"
        )
        for name, (wall, cpu) in sorted(r["stages"].items(), key=lambda kv: -kv[1][1]):  # type: ignore[attr-defined]
            print(f"    {name:14s} wall {wall:6.2f} s  CPU {cpu:6.2f} s")
    best = min(runs, key=lambda r: r["wall_s"])  # type: ignore[arg-type, return-value]
    slices, wall, cpu = float(best["slices"]), float(best["wall_s"]), float(best["cpu_s"])  # type: ignore[arg-type]
    peak, opened = float(best["peak_rss_mb"]), float(best["opened_rss_mb"])  # type: ignore[arg-type]
    print(f"machine load after {os.getloadavg()[0]:.1f}")
    print(
        f"{fmt}_export: {slices / wall / 1e6:.2f} M slices/s wall, {slices / cpu / 1e6:.2f} M slices/s per CPU "
        f"second on {args.kernels:,} kernels ({'numpy encoder' if args.numpy else 'default encoders'}, {args.allocators} allocators; "
        f"goal >= 1 M/s wall; peak RSS {peak:.0f} MB, {peak - opened:.0f} MB above the opened store, goal <= 1024)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", type=int, default=10_000_000, help="kernels in the synthetic store")
    parser.add_argument("--repeat", type=int, default=1, help="exports (fresh processes); the fastest is kept")
    parser.add_argument("--stages", action="store_true", help="time each step of the export too")
    parser.add_argument("--numpy", action="store_true", help="encode and format with numpy only (no numba kernel)")
    parser.add_argument("--format", choices=("perfetto", "chrome", "both"), default="perfetto", help="what to export")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "ktrace-bench")
    parser.add_argument(
        "--allocators",
        choices=("export", "library"),
        default="export",
        help="export: the allocator settings `ktrace export` sets (cli.options.ALLOCATOR_SETTINGS, where the "
        "environment has none); library: polars' and pyarrow's own (as before 2026-11-28 X3)",
    )
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    store = ensure_store(args.kernels, args.workdir)
    print(f"machine: {os.cpu_count()} cores, load before {os.getloadavg()[0]:.1f}; python {sys.version.split()[0]}")
    for fmt in ("perfetto", "chrome") if args.format == "both" else (args.format,):
        runs = [export_once(store, args.stages, args.numpy, fmt, args.allocators) for _ in range(args.repeat)]
        report(fmt, runs, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
