"""Overhead of `ktrace run --python-sample MS` on a CPU-bound Python loop, whole process against whole process.

    python benchmarks/python_sampler.py                 # 5 rounds, a ~1-2 s loop, 30 frames deep
    python benchmarks/python_sampler.py --rounds 9 --work 4000000 --depth 60
    python benchmarks/python_sampler.py --analysis-only 1000000   # the summary's cost of 1 M samples

Each round runs, in turn: the bare loop (python, no ktrace), the anchor (`ktrace run --no-gpu --no-counters`, no
sampling) and `--python-sample 10` and `--python-sample 1`. It prints, per mode, the median over the rounds of the
whole process's wall time, of its CPU time (user + system of the process tree) and of the loop's own time (the
script times its work: wall, and the CPU of its whole process, the sampler thread included), with their ratios to
the anchor (goal: <= 1.02 at 10 ms; on a loaded machine the CPU times are the steadier figures), plus the samples
stored, their effective interval and the bytes of samples.parquet, and the CPU cost of one sample measured in
this process. The modes interleave, so load from other work on
the machine falls on each mode alike.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOOP = """
import sys, time

def leaf(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total

def nest(depth, n):
    return leaf(n) if depth == 0 else nest(depth - 1, n)

work, depth = int(sys.argv[1]), int(sys.argv[2])
time.sleep(1.5)  # let ktrace's writer thread import pyarrow first: its start-up CPU is not the sampler's
t0, c0 = time.perf_counter(), time.process_time()
for _ in range(100):
    nest(depth, work // 100)
print(time.perf_counter() - t0, time.process_time() - c0)
"""

MODES: dict[str, list[str] | None] = {
    "bare python": None,
    "ktrace run (anchor)": [],
    "--python-sample 10": ["--python-sample", "10"],
    "--python-sample 1": ["--python-sample", "1"],
}


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(folder: Path, options: list[str] | None, work: int, depth: int, k: int) -> dict[str, float]:
    """One whole process of a mode: wall s, CPU s (the process tree's user + system), loop s, samples stored and the bytes of their Parquet file."""
    script = [sys.executable, str(folder / "loop.py"), str(work), str(depth)]
    out = folder / f"run-{k}.ktrace"
    command = script if options is None else [sys.executable, "-m", "ktrace", "run", "-q", "--no-gpu"]
    if options is not None:
        command += ["--no-counters", "-o", str(out), *options, "--", *script]
    before, t0 = _children_cpu_s(), time.perf_counter()
    res = subprocess.run(command, capture_output=True, text=True, check=True, env=os.environ.copy())
    wall = time.perf_counter() - t0
    loop, loop_cpu = (float(v) for v in res.stdout.strip().splitlines()[-1].split())
    row = {"wall_s": wall, "cpu_s": _children_cpu_s() - before, "loop_s": loop, "loop_cpu_s": loop_cpu}
    row |= {"samples": 0.0, "bytes": 0.0}
    if options:
        from ktrace.model import store

        samples = store.read(out).samples
        row["samples"] = float(samples.height)
        row["bytes"] = float(sum(p.stat().st_size for p in out.rglob("samples.parquet")))
        ts = samples["ts_ns"].sort().diff().drop_nulls()
        row["interval_ms"] = float(ts.median() or 0) / 1e6  # type: ignore[arg-type]
    return row


def sample_cost_us(depth: int, n: int = 20_000) -> float:
    """CPU µs of one PythonSampler.sample_once() on this process: its main thread and one thread `depth` frames
    deep (the sampler's share of a tick, without the GIL hand-over the whole-process runs include)."""
    import threading

    from ktrace.tracer.python_sampler import PythonSampler

    release = threading.Event()

    def nest(d: int) -> None:
        release.wait() if d == 0 else nest(d - 1)

    thread = threading.Thread(target=nest, args=(depth,))
    thread.start()
    sampler = PythonSampler(10, lambda: True, os.getpid())
    c0 = time.process_time()
    for _ in range(n):
        sampler.sample_once()
    cost = (time.process_time() - c0) / n * 1e6
    release.set()
    thread.join()
    return cost


def analysis_cost(n: int, stacks: int = 200, depth: int = 40) -> tuple[float, float]:
    """(seconds, MB of peak RSS added) of analysis.python_samples.python_profile on `n` samples of `stacks` distinct
    stacks `depth` frames deep (~2 kB each), one a 10 ms tick, 100 ticks a step."""
    import numpy as np
    import pyarrow as pa

    from ktrace.analysis.python_samples import python_profile
    from ktrace.model.trace import Trace

    texts = [
        ";".join(f"/site-packages/pkg/module_{d}.py:{d * 10} function_{d}_{s}" for d in range(depth))
        for s in range(stacks)
    ]
    t0, tick = 1_700_000_000_000_000_000, 10_000_000
    codes = np.random.default_rng(0).integers(0, stacks, n).astype(np.int32)
    samples = {
        "node": pa.array(["h"] * n).dictionary_encode(),
        "rank": pa.array(np.zeros(n, np.int32)),
        "ts_ns": pa.array(t0 + np.arange(n, dtype=np.int64) * tick),
        "pid": pa.array(np.ones(n, np.int64)),
        "tid": pa.array(np.ones(n, np.int64)),
        "stack": pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(texts)),
    }
    k = n // 100
    starts = t0 + np.arange(k, dtype=np.int64) * 100 * tick
    ranges = {
        "node": ["h"] * k,
        "rank": pa.array(np.zeros(k, np.int32)),
        "start_ns": pa.array(starts),
        "end_ns": pa.array(starts + 100 * tick - 1),
        "pid": pa.array(np.ones(k, np.int64)),
        "tid": pa.array(np.ones(k, np.int64)),
        "name": [f"ProfilerStep#{i}" for i in range(k)],
        "domain": ["profiler_step"] * k,
        "depth": pa.array(np.zeros(k, np.int32)),
        "on_gpu": [False] * k,
    }
    trace = Trace.from_arrow({"samples": pa.table(samples), "ranges": pa.table(ranges)})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    python_profile(trace)
    return time.perf_counter() - t, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="runs of each mode (default: 5)")
    parser.add_argument("--work", type=int, default=15_000_000, help="loop iterations (default: 15,000,000)")
    parser.add_argument("--depth", type=int, default=30, help="extra frames above the hot loop (default: 30)")
    parser.add_argument("--json", action="store_true", help="print the medians as JSON too")
    parser.add_argument(
        "--analysis-only", type=int, metavar="N", help="only time the analysis of N samples (e.g. 1000000)"
    )
    args = parser.parse_args()
    if args.analysis_only:
        seconds, mb = analysis_cost(args.analysis_only)
        print(f"python_profile of {args.analysis_only:,} samples (200 stacks of ~2 kB): {seconds:.2f} s, +{mb:.0f} MB")
        return
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "loop.py").write_text(LOOP)
        k = 0
        for _ in range(args.rounds):
            for mode, options in MODES.items():
                results[mode].append(run_once(folder, options, args.work, args.depth, k))
                k += 1
    medians = {
        mode: {key: statistics.median(r[key] for r in rows) for key in rows[0]} for mode, rows in results.items()
    }
    anchor = medians["ktrace run (anchor)"]
    print(f"python_sampler: {args.rounds} rounds, loop of {args.work:,} iterations {args.depth} frames deep")
    keys = ("wall_s", "cpu_s", "loop_s", "loop_cpu_s")
    head = "".join(f"{h:>8} {'ratio':>6} " for h in ("wall s", "cpu s", "loop s", "loop cpu"))
    print(f"{'mode':20} {head}{'samples':>8} {'every':>8} {'bytes':>8}")
    for mode, m in medians.items():
        every = f"{m['interval_ms']:.2f}ms" if "interval_ms" in m else "-"
        cells = "".join(f"{m[k]:8.3f} {m[k] / anchor[k]:6.3f} " for k in keys)
        print(f"{mode:20} {cells}{int(m['samples']):8,} {every:>8} {int(m['bytes']):8,}")
    cost = sample_cost_us(args.depth)
    print(
        f"one sample of 2 threads ({args.depth} frames deep): {cost:.1f} us of CPU, {cost / 100:.3f} % of a 10 ms tick"
    )
    if args.json:
        print(json.dumps(medians, indent=1))


if __name__ == "__main__":
    main()
