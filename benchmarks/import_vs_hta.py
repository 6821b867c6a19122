"""Kineto import: ktrace vs Holistic Trace Analysis (HTA) on the same trace, in the same run.

Speed mode (default): tiles the biggest real Kineto trace in ../shared/traces N times in time
(benchmarks/tile_kineto.py), then times both tools on issue 29's footing, whole process against whole process on the
same file in one run: HTA's process (the interpreter starts, imports hta, builds TraceAnalysis(trace_dir) and runs
get_temporal_breakdown, get_gpu_kernel_breakdown, get_cuda_kernel_launch_stats and get_idle_time_breakdown) against
the whole `ktrace summary FILE --json` command with a warm numba cache (its first run, on an empty cache, is timed
apart). Peak memory counts every process of each tool: the process's peak RSS (VmHWM), or while it has children
(ktrace's decode workers, HTA's parser pool) their PSS summed with its own, sampled every 200 ms, if larger. The
loads alone follow (HTA to TraceAnalysis, ktrace to import_kineto, each a whole process), with the old footing
(after the imports) printed beside. The inflate library ktrace used (isal if installed, else zlib) is printed. The
last line reads `import_vs_hta: <N> events, HTA <s> s <MB> MB, ktrace summary <s> s <MB> MB: <x>x, RSS <r>; ...`.

Ops mode (--ops): for every real Kineto trace (per-rank folders included) and the tiled one, wall and CPU
time of ktrace's import with operators (cpu_op, the default since issue #15) and without (`with_ops=False`,
the `--no-ops` lean path), and of HTA's load of the same files; best of --repeat. CPU time is the process's
and its finished children's (HTA parses in a process pool).

Kernel-time mode (--kernel-time): for every real Kineto trace (per-rank folders included), sums
kernel durations per rank as HTA parses them and as ktrace imports them; they must agree within
0.1 %. HTA rounds ns-resolution traces inward (ceil start, floor end) unless HTA_DISABLE_NS_ROUNDING=1,
which this mode sets so both sides use the trace's own durations.

HTA runs in a throwaway venv: --hta-python names its python, else --venv (default /tmp/htavenv) is created with
`pip install holistictraceanalysis` when missing. Not part of the test suite.

examples:
  python benchmarks/import_vs_hta.py --hta-python /tmp/hta-venv/bin/python
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
hwm = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")]  # (see measure)
rss = max(hwm[0] if hwm else 0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
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
    interpreter's start and every import, to its exit: the footing the speed goals are judged on), peak memory
    (whole process, imports included; with child processes, the peak of their PSS summed with its own when larger:
    see TreeMemory; not sampled with `sample_memory=False`, for runs timed only) and extra results.

    The process's own peak is its VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss across exec, so a child
    of this (v)forked script reported this script's peak when that was larger (a script that had just tiled owlv2
    in memory gave every small trace's HTA run its ~0.8 GB).
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


def speed(args: argparse.Namespace, hta: str) -> None:
    """Tile, then time both tools on issue 29's footing and their loads alone (alternating, best of --repeat)."""
    from end_to_end_vs_hta import HTA_BODY  # (both import this module: imported here, not at the top)
    from end_to_end_vs_hta import HTA_SETUP as HTA_ANALYSES_SETUP
    from speed_everywhere import goal_of, ktrace_cmd, run_command
    from tile_kineto import tiled_copy

    src = biggest_kineto_trace(args.traces)
    tiled = tiled_copy(src, args.copies, args.workdir)
    events = events_in(src) * args.copies
    print(f"trace: {tiled} ({tiled.stat().st_size / 1e6:.1f} MB gz, {events:,} events), from {src.parent.name}")
    block = "import sys; sys.modules['isal'] = None\n" if args.no_isal else ""
    inflate = subprocess.run(
        [
            sys.executable,
            "-c",
            block + "from ktrace.importers.kineto_stream import inflate_module as m;print(m().__name__)",
        ],
        capture_output=True,
        text=True,
    ).stdout.strip()
    isal_note = " for the import alone (the summary command inflates with isal when installed)" if args.no_isal else ""
    print(f"ktrace inflate: {inflate}{isal_note}; machine load before: {os.getloadavg()[0]:.1f}")
    summary_cmd = ktrace_cmd("summary", str(tiled), "--json")
    with tempfile.TemporaryDirectory(prefix="ktrace-numba-") as cache:  # empty: the first run after install
        env = {"NUMBA_CACHE_DIR": cache}
        first = run_command(summary_cmd, env)
        runs: dict[str, list[dict[str, Any]]] = {"hta": [], "ktrace": [], "hta load": [], "ktrace import": []}
        for _ in range(args.repeat):  # the cache the first run filled: warm, and compiled from this very tree
            runs["hta"].append(measure(hta, HTA_BODY, tiled.parent, setup=HTA_ANALYSES_SETUP))
            c = run_command(summary_cmd, env)
            runs["ktrace"].append({"process_s": c.wall_s, "peak_rss_mb": c.peak_rss_mb})
            runs["hta load"].append(measure(hta, HTA_LOAD, tiled.parent, setup=HTA_SETUP))
            runs["ktrace import"].append(measure(sys.executable, KTRACE_LOAD, tiled, setup=block + KTRACE_SETUP))
    best = {k: min(v, key=lambda r: r["process_s"]) for k, v in runs.items()}
    h, k, hl, kl = best["hta"], best["ktrace"], best["hta load"], best["ktrace import"]
    print("issue 29's footing: whole process against whole process, the same file, this run; peak memory of every")
    print("process of each tool (PSS summed while it has children)")
    print(
        f"  HTA     interpreter + import hta + TraceAnalysis + its 4 analyses {h['process_s']:7.2f} s "
        f"(after its imports {h['wall_s']:.2f} s)  peak {h['peak_rss_mb']:6.0f} MB"
    )
    print(
        f"  ktrace  `ktrace summary FILE --json`, numba cache warm           {k['process_s']:7.2f} s  "
        f"peak {k['peak_rss_mb']:6.0f} MB; first run (empty numba cache) {first.wall_s:.2f} s, "
        f"{first.peak_rss_mb:.0f} MB"
    )
    print(
        f"  ratio {h['process_s'] / k['process_s']:.1f}x (goal at {events:,} events: {goal_of(events)[0]}), "
        f"peak memory {k['peak_rss_mb'] / h['peak_rss_mb']:.2f} of HTA's"
    )
    print(
        f"load alone, whole processes: HTA to TraceAnalysis {hl['process_s']:.2f} s (after imports "
        f"{hl['wall_s']:.2f} s) {hl['peak_rss_mb']:.0f} MB; ktrace import_kineto {kl['process_s']:.2f} s (after "
        f"imports {kl['wall_s']:.2f} s) {kl['peak_rss_mb']:.0f} MB {kl['extra']}"
    )
    print(
        f"load ratio: {hl['process_s'] / kl['process_s']:.1f}x whole process against whole process (the old footing, "
        f"loads alone after the imports: {hl['wall_s'] / kl['wall_s']:.1f}x); machine load after: "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(
        f"import_vs_hta: {events:,} events, HTA {h['process_s']:.2f} s {h['peak_rss_mb']:.0f} MB, ktrace summary "
        f"{k['process_s']:.2f} s {k['peak_rss_mb']:.0f} MB: {h['process_s'] / k['process_s']:.1f}x, RSS "
        f"{k['peak_rss_mb'] / h['peak_rss_mb']:.2f}; first run {first.wall_s:.2f} s; load alone "
        f"{hl['process_s'] / kl['process_s']:.1f}x"
    )


def events_in(trace: Path) -> int:
    """The events of a real trace file, from its folder's STATS.json."""
    return int(json.loads((trace.parent / "STATS.json").read_text())[trace.name]["n_events"])


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


def kernel_time(args: argparse.Namespace, hta: str) -> int:
    """Per trace and rank: kernel count and total kernel time, HTA vs ktrace; non-zero exit if > 0.1 % apart."""
    worst = 0.0
    for name, files in _kineto_sets(args.traces):
        with tempfile.TemporaryDirectory() as tmp:
            for f in files:
                (Path(tmp) / f.name).symlink_to(f)
            h = measure(hta, HTA_KERNEL_TIME, Path(tmp), env={"HTA_DISABLE_NS_ROUNDING": "1"})["extra"]
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


def ops_cost(args: argparse.Namespace, hta: str) -> None:
    """Per Kineto trace: HTA load, ktrace import with ops and without; wall and CPU seconds, best of --repeat."""
    sets = _kineto_sets(args.traces)
    from tile_kineto import tiled_copy

    sets.append((f"tiled x{args.copies}", [tiled_copy(biggest_kineto_trace(args.traces), args.copies, args.workdir)]))
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
                runs["hta"].append(measure(hta, HTA_LOAD, Path(tmp), setup=HTA_SETUP, sample_memory=False))
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
    parser.add_argument("--hta-python", help="python of a venv with HTA (default: --venv's, made when missing)")
    parser.add_argument("--venv", type=Path, default=Path("/tmp/htavenv"), help="throwaway venv with HTA")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "ktrace-bench")
    parser.add_argument("--kernel-time", action="store_true", help="check kernel time vs HTA on every trace")
    parser.add_argument("--ops", action="store_true", help="import time with ops vs --no-ops vs HTA, every trace")
    parser.add_argument("--only", default="", help="--ops: only the traces whose name contains this")
    parser.add_argument(
        "--no-isal", action="store_true", help="make ktrace inflate with zlib even if isal is installed"
    )
    args = parser.parse_args(argv)
    hta = args.hta_python or str(ensure_hta(args.venv))
    if args.kernel_time:
        return kernel_time(args, hta)
    if args.ops:
        ops_cost(args, hta)
        return 0
    speed(args, hta)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
