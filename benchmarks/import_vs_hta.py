"""Kineto import: ktrace vs Holistic Trace Analysis (HTA) on the same trace, in the same run.

Speed mode (default): tiles the biggest real Kineto trace in ../shared/traces N times in time
(benchmarks/tile_kineto.py), then loads it with HTA's TraceAnalysis and with ktrace's importer, each
in its own subprocess, and prints wall time, peak memory (the process's peak RSS, or while it has child processes
-- ktrace's decode workers, HTA's parser pool -- their PSS summed with its own, if larger) and the
ratios. Both are timed as a user runs them, whole process against whole process (the interpreter's start and the
libraries' imports included: pandas+HTA, polars+pyarrow+ktrace); the load alone, after the imports (the old
footing), is printed beside it. Peak RSS is the whole process tree's. Goal: ktrace >= 20x faster, <= 1/4 of HTA's peak RSS. The inflate
library ktrace used (isal if installed, else zlib) is printed.

Ops mode (--ops): for every real Kineto trace (per-rank folders included) and the tiled one, wall and CPU
time of ktrace's import with operators (cpu_op, the default since issue #15) and without (`with_ops=False`,
the `--no-ops` lean path), and of HTA's load of the same files; best of --repeat. CPU time is the process's
and its finished children's (HTA parses in a process pool).

Kernel-time mode (--kernel-time): for every real Kineto trace (per-rank folders included), sums
kernel durations per rank as HTA parses them and as ktrace imports them; they must agree within
0.1 %. HTA rounds ns-resolution traces inward (ceil start, floor end) unless HTA_DISABLE_NS_ROUNDING=1,
which this mode sets so both sides use the trace's own durations.

HTA runs in a throwaway venv (default /tmp/htavenv, created with `pip install holistictraceanalysis`
when missing). Not part of the test suite.

examples:
  python benchmarks/import_vs_hta.py
  python benchmarks/import_vs_hta.py --copies 10 --repeat 2
  python benchmarks/import_vs_hta.py --kernel-time
  python benchmarks/import_vs_hta.py --ops --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "traces"
if not SHARED.is_dir():  # a plain clone: the repository's byte-identical copy (tests/unit/test_fixtures.py checks it)
    SHARED = HERE.parent / "fixtures" / "traces"

_MEASURE = """
import json, resource, sys, time
{setup}
def _children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
t, c, cc = time.perf_counter(), time.process_time(), _children_cpu()
{body}
wall, cpu = time.perf_counter() - t, time.process_time() - c + _children_cpu() - cc
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print("RESULT " + json.dumps({{"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": rss / 1024, "extra": extra}}))
"""
HTA_SETUP = """
import logging; logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
"""
HTA_LOAD = """
ta = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=True)
extra = {r: int(len(ta.t.get_trace(r))) for r in ta.t.get_ranks()}
"""
KTRACE_SETUP = """
from ktrace.importers.kineto import import_kineto
"""
KTRACE_LOAD = """
trace = import_kineto(sys.argv[1])
extra = trace.counts()
"""
KTRACE_LOAD_LEAN = """
trace = import_kineto(sys.argv[1], with_ops=False)
extra = trace.counts()
"""
HTA_KERNEL_TIME = """
import logging; logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=True)
sym = ta.t.symbol_table.get_sym_table()
extra = {}
for r in ta.t.get_ranks():
    df = ta.t.get_trace(r)
    k = df[df["cat"].map(lambda i: sym[i]).isin(["kernel", "Kernel"])]
    extra[str(r)] = [int(len(k)), float(k["dur"].sum())]
"""
KTRACE_KERNEL_TIME = """
import polars as pl
from ktrace.importers.kineto import import_kineto
k = import_kineto(sys.argv[1]).kernels
g = k.group_by("rank").agg(pl.len(), ((pl.col("end_ns") - pl.col("start_ns")).sum() / 1000).alias("us"))
extra = {str(r): [int(n), float(us)] for r, n, us in g.iter_rows()}
"""


def ensure_hta(venv: Path) -> Path:
    """The venv's python, creating the venv and installing HTA on first use."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "holistictraceanalysis"], check=True)
    return python


class TreeMemory:
    """Samples the PSS of a process and its descendants in a thread; `peak_mb` is the largest sum seen while
    the measured process had children (ktrace's decode workers, HTA's parser pool), else 0: a lone process's
    peak RSS says the same more precisely. `wrapper`: `pid` is a wrapper (GNU time) of the measured process."""

    def __init__(self, pid: int, every_s: float = 0.2, *, wrapper: bool = False) -> None:
        self.pid, self.every_s, self.peak_kb, self.skip = pid, every_s, 0, int(wrapper)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @property
    def peak_mb(self) -> float:
        self.stop.set()
        self.thread.join()
        return self.peak_kb / 1024

    def _run(self) -> None:
        while not self.stop.wait(self.every_s):
            tree = self._tree()[self.skip :]
            if len(tree) > 1:
                self.peak_kb = max(self.peak_kb, sum(map(_pss_kb, tree)))

    def _tree(self) -> list[int]:
        todo, seen = [self.pid], []
        while todo:
            pid = todo.pop()
            seen.append(pid)
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    todo += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
            except OSError:
                continue
        return seen


def _pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def measure(
    python: str, body: str, target: Path, env: dict[str, str] | None = None, setup: str = "", sample_memory: bool = True
) -> dict[str, Any]:
    """Run `body` (timed; `setup` before it is not) in a fresh `python` on `target`.

    Returns its wall time (`wall_s`: `body` alone; `process_s`: the whole process, from its start, through the
    interpreter's start and every import, to its exit: the footing the speed goals are judged on), peak memory (whole process, imports included; with child processes, the peak of their
    PSS summed with its own when larger: see TreeMemory; not sampled with `sample_memory=False`, for runs timed
    only) and extra results.
    """
    code = _MEASURE.format(setup=setup.strip(), body=body.strip())
    started = time.perf_counter()
    proc = subprocess.Popen(
        [python, "-c", code, str(target)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    tree = TreeMemory(proc.pid) if sample_memory else None  # (sampling costs the measured run ~0.1 s of CPU)
    stdout, stderr = proc.communicate()
    process_s = time.perf_counter() - started
    tree_mb = tree.peak_mb if tree else 0.0
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[7:])
            result["peak_rss_mb"] = max(result["peak_rss_mb"], tree_mb)
            result["process_s"] = process_s
            return result
    raise RuntimeError(f"{python} failed on {target}:\n{stderr[-2000:]}")


def biggest_kineto_trace(shared: Path) -> Path:
    """The real Kineto trace with the most uncompressed bytes (from the STATS.json files)."""
    best: tuple[int, Path] | None = None
    for stats_path in shared.glob("*/STATS.json"):
        for name, entry in json.loads(stats_path.read_text()).items():
            if name.endswith((".json", ".json.gz")) and "n_kernels" in entry:
                size = int(entry.get("uncompressed_bytes", 0))
                if best is None or size > best[0]:
                    best = (size, stats_path.parent / name)
    if best is None:
        raise SystemExit(f"no Kineto traces under {shared}")
    return best[1]


def speed(args: argparse.Namespace, hta: Path) -> None:
    """Tile, then time both loaders (alternating, best of --repeat) and print the ratios."""
    src = biggest_kineto_trace(args.traces)
    work = Path(args.workdir)
    folder = work / f"tiled{args.copies}"
    folder.mkdir(parents=True, exist_ok=True)
    tiled = folder / f"{src.name.split('.json')[0]}_x{args.copies}.json.gz"
    if not tiled.exists():
        sys.path.insert(0, str(HERE))
        from tile_kineto import tile

        print(f"tiling {src.name} x{args.copies} ...", file=sys.stderr)
        tile(src, tiled, args.copies)
    print(f"trace: {tiled} ({tiled.stat().st_size / 1e6:.1f} MB gz), from {src.parent.name}/{src.name}")
    block = "import sys; sys.modules['isal'] = None;" if args.no_isal else ""
    inflate = subprocess.run(
        [
            sys.executable,
            "-c",
            block + "from ktrace.importers.kineto_stream import inflate_module;print(inflate_module().__name__)",
        ],
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(f"ktrace inflate: {inflate}; machine load before: {os.getloadavg()[0]:.1f}")
    runs: dict[str, list[dict[str, Any]]] = {"hta": [], "ktrace": []}
    for _ in range(args.repeat):
        runs["hta"].append(measure(str(hta), HTA_LOAD, folder, setup=HTA_SETUP))
        setup = ("import sys; sys.modules['isal'] = None\n" if args.no_isal else "") + KTRACE_SETUP
        runs["ktrace"].append(measure(sys.executable, KTRACE_LOAD, tiled, setup=setup))
    best = {k: min(v, key=lambda r: r["process_s"]) for k, v in runs.items()}
    for name, r in best.items():
        print(
            f"{name:7s} whole process {r['process_s']:7.2f} s (load alone {r['wall_s']:.2f} s)   "
            f"peak RSS {r['peak_rss_mb']:7.0f} MB   {r['extra']}"
        )
    h, k = best["hta"], best["ktrace"]
    print(
        f"ratio, whole process against whole process: ktrace is {h['process_s'] / k['process_s']:.1f}x faster "
        f"(goal >= 20x; the old footing, loads alone after the imports: {h['wall_s'] / k['wall_s']:.1f}x), "
        f"uses {k['peak_rss_mb'] / h['peak_rss_mb']:.2f} of HTA's peak RSS (goal <= 0.25)"
    )


def _kineto_sets(shared: Path) -> list[tuple[str, list[Path]]]:
    sets = []
    for stats_path in sorted(shared.glob("*/STATS.json")):
        stats = json.loads(stats_path.read_text())
        files = sorted(
            stats_path.parent / n for n, e in stats.items() if n.endswith((".json", ".json.gz")) and "n_kernels" in e
        )
        ranks = [stats[f.name].get("distributedInfo", {}).get("rank") for f in files]
        if len(set(ranks)) == len(ranks):  # one job's rank files: load them together
            sets += [(stats_path.parent.name, files)] if files else []
        else:  # unrelated traces side by side (hta-critical-path): one at a time
            sets += [(f"{stats_path.parent.name}/{f.name.split('.')[0]}", [f]) for f in files]
    return sets


def kernel_time(args: argparse.Namespace, hta: Path) -> int:
    """Per trace and rank: kernel count and total kernel time, HTA vs ktrace; non-zero exit if > 0.1 % apart."""
    worst = 0.0
    for name, files in _kineto_sets(args.traces):
        with tempfile.TemporaryDirectory() as tmp:
            for f in files:
                (Path(tmp) / f.name).symlink_to(f)
            h = measure(str(hta), HTA_KERNEL_TIME, Path(tmp), env={"HTA_DISABLE_NS_ROUNDING": "1"})["extra"]
            k = measure(sys.executable, KTRACE_KERNEL_TIME, Path(tmp))["extra"]
        for rank in sorted(h, key=int):
            (hn, hus), (kn, kus) = h[rank], k.get(rank, [0, 0.0])
            rel = abs(kus - hus) / hus if hus else float(kus != hus)
            worst = max(worst, rel)
            print(
                f"{name:32s} rank {rank}: kernels HTA {hn:6d} ktrace {kn:6d}   "
                f"time HTA {hus:14.3f} us ktrace {kus:14.3f} us   diff {rel * 100:.4f} %"
            )
    print(f"largest difference: {worst * 100:.4f} % (limit 0.1 %)")
    return 0 if worst <= 0.001 else 1


def ops_cost(args: argparse.Namespace, hta: Path) -> None:
    """Per Kineto trace: HTA load, ktrace import with ops and without; wall and CPU seconds, best of --repeat."""
    sets = _kineto_sets(args.traces)
    tiled = Path(args.workdir) / f"tiled{args.copies}"
    if tiled.is_dir():
        sets.append((f"tiled x{args.copies}", sorted(tiled.glob("*.json.gz"))))
    sets = [s for s in sets if args.only in s[0]]
    print(f"machine load before: {os.getloadavg()[0]:.1f}")
    print(
        "| trace | HTA load wall / CPU | ktrace ops on wall / CPU | ktrace --no-ops wall / CPU | ops cost (CPU) "
        "| ops rows | HTA / ktrace ops on (wall) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, files in sets:
        with tempfile.TemporaryDirectory() as tmp:
            for f in files:
                (Path(tmp) / f.name).symlink_to(f.resolve())
            target = Path(tmp) if len(files) > 1 else Path(tmp) / files[0].name
            runs: dict[str, list[dict[str, Any]]] = {"hta": [], "on": [], "off": []}
            for _ in range(args.repeat):
                runs["hta"].append(measure(str(hta), HTA_LOAD, Path(tmp), setup=HTA_SETUP, sample_memory=False))
                runs["on"].append(measure(sys.executable, KTRACE_LOAD, target, setup=KTRACE_SETUP, sample_memory=False))
                runs["off"].append(
                    measure(sys.executable, KTRACE_LOAD_LEAN, target, setup=KTRACE_SETUP, sample_memory=False)
                )
        b = {k: min(v, key=lambda r: r["cpu_s"]) for k, v in runs.items()}
        cost = (b["on"]["cpu_s"] - b["off"]["cpu_s"]) / b["off"]["cpu_s"] * 100
        print(
            f"| {name} | {b['hta']['wall_s']:.3f} / {b['hta']['cpu_s']:.3f} s "
            f"| {b['on']['wall_s']:.3f} / {b['on']['cpu_s']:.3f} s | {b['off']['wall_s']:.3f} / {b['off']['cpu_s']:.3f} s "
            f"| {cost:+.0f} % | {b['on']['extra'].get('ops', 0):,} | {b['hta']['wall_s'] / b['on']['wall_s']:.1f}x |"
        )
    print(f"machine load after: {os.getloadavg()[0]:.1f}")


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=Path, default=SHARED, help="folder of real traces (shared/traces)")
    parser.add_argument("--copies", type=int, default=10, help="how many times to tile the trace in time")
    parser.add_argument("--repeat", type=int, default=1, help="runs per loader; the best is kept")
    parser.add_argument("--venv", type=Path, default=Path("/tmp/htavenv"), help="throwaway venv with HTA")
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "ktrace-bench"))
    parser.add_argument("--kernel-time", action="store_true", help="check kernel time vs HTA on every trace")
    parser.add_argument("--ops", action="store_true", help="import time with ops vs --no-ops vs HTA, every trace")
    parser.add_argument("--only", default="", help="--ops: only the traces whose name contains this")
    parser.add_argument(
        "--no-isal", action="store_true", help="make ktrace inflate with zlib even if isal is installed"
    )
    args = parser.parse_args(argv)
    hta = ensure_hta(args.venv)
    if args.kernel_time:
        return kernel_time(args, hta)
    if args.ops:
        ops_cost(args, hta)
        return 0
    speed(args, hta)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
