"""Fast on every trace, not one: every speed goal of the "Fast on every trace" issue, measured in one run.

What it measures (each side in its own fresh subprocess, HTA from a venv it is given or makes):

1. First run after install: `ktrace summary --json` on the README demo and on the alexnet fixture with an
   EMPTY numba cache (a fresh NUMBA_CACHE_DIR), wall time of the whole command (imports included) and the
   longest silence a user sees on a terminal: the command runs on a pseudo-terminal and the largest gap
   between its start, each burst of output (stdout or stderr) and its exit is reported.
2. Small traces, warm: the same commands again (cache now warm), best of --repeat, with peak RSS, against
   HTA's load + temporal/kernel breakdown + launch stats + idle breakdown on the same trace.
3. Every real Kineto trace in shared/traces, tiled --copies times in time (benchmarks/tile_kineto.py), once with an
   empty numba cache (the first run after install) and then warm on the cache that run filled (so never a stale
   one), whole process against whole process (issue 29's footing): HTA's process (the interpreter starts, imports
   hta, builds TraceAnalysis(trace_dir) and runs the four analyses) against the whole `ktrace summary FILE --json`
   command (the `ktrace` script beside this python); peak memory counts every process of each (decode workers and
   HTA's pool too; each process's own peak is its VmHWM: import_vs_hta.measure). HTA's time after its imports (the
   old footing) is printed beside it. Goals by size: >= 1 M events: 20x and
   <= 0.25 of HTA's peak RSS; >= 300 k events: 10x and <= 0.25; smaller: <= 1.0 s and no more RSS than HTA.
   The decode floor is measured in the same run: gunzip + msgspec decoding of the file's events into a
   minimal struct and nothing else; ktrace's import time is reported as a multiple of it.
4. `ktrace export -f perfetto` end to end on a synthetic trace of --export-kernels kernels (goal >= 1 M
   slices/s; export time only, the store read excluded).
5. `ktrace --help` (goal <= 100 ms) and `ktrace info` against `ktrace summary` on every tiled trace (goal
   <= 0.6x the summary's time).

The last line reads `speed_everywhere: worst <ratio>x HTA on <trace>; first run <s> s (demo), <s> s (alexnet)
...`. Timings on a loaded machine mean little: the load before and after is printed; run it on a quiet one.

examples:
  python benchmarks/speed_everywhere.py --hta-python /tmp/htavenv/bin/python
  python benchmarks/speed_everywhere.py --copies 2 --export-kernels 1000000 --skip-hta
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from end_to_end_vs_hta import HTA_BODY  # noqa: E402
from end_to_end_vs_hta import HTA_SETUP as HTA_ANALYSES_SETUP  # noqa: E402
from import_vs_hta import SHARED, TreeMemory, ensure_hta, measure  # noqa: E402
from tile_kineto import tiled_copy  # noqa: E402

DEMO = (
    REPO
    / "fixtures"
    / "traces"
    / "tracelens-h100-hf-inference"
    / "google_owlv2-large-patch14-ensemble__1016001.json.gz"
)
ALEXNET = REPO / "fixtures" / "traces" / "hta-a100-alexnet-tiny" / "benchmark_result_2869224_1695835535_trace.json.gz"

DECODE_SETUP = """
import msgspec
from ktrace.importers.kineto_stream import inflate_module
class E(msgspec.Struct, gc=False):
    ph: str = ""; cat: str = ""; name: str = ""; pid: int | str = 0; tid: int | str = 0
    ts: float = 0.0; dur: float = 0.0
class Doc(msgspec.Struct):
    traceEvents: list[E] = []
"""
DECODE_FLOOR = """
raw = open(sys.argv[1], "rb").read()
data = inflate_module().decompressobj(31).decompress(raw) if sys.argv[1].endswith(".gz") else raw  # 31: gzip
extra = {"events": len(msgspec.json.decode(data, type=Doc).traceEvents)}
"""
KTRACE_IMPORT_SETUP = """
from ktrace.importers.kineto import import_kineto
"""
KTRACE_IMPORT = """
extra = {"kernels": import_kineto(sys.argv[1]).kernels.height}
"""
EXPORT_SETUP = """
import ktrace
from ktrace.exporters.perfetto import export_perfetto
trace = ktrace.open(sys.argv[1])
"""
EXPORT_BODY = """
stats = export_perfetto(trace, sys.argv[1] + ".pftrace")
extra = {"slices": int(trace.kernels.height + trace.api.height + trace.memory.height + trace.ranges.height)}
"""
MAKE_STORE = """
import sys
from ktrace.model import store
from ktrace.testing import SyntheticConfig, generate
n = int(sys.argv[2])
store.write(generate(SyntheticConfig(steps=max(1, n // 2000), kernels_per_step=2000, streams=4)), sys.argv[1])
"""


@dataclass
class Command:
    """One whole CLI command: wall time, peak memory (MB) and the longest silence (s) on a terminal.

    peak_rss_mb is the command's peak RSS (VmHWM, GNU time's %M), or, while it had child processes (the
    importer's decode workers), the peak of their PSS summed with its own, sampled every 200 ms, whichever is
    larger: %M alone reports one process of the tree.
    """

    wall_s: float
    peak_rss_mb: float
    longest_silence_s: float


def run_command(argv: list[str], env: dict[str, str] | None = None, timeout: float = 900) -> Command:
    """Run `argv` on a pseudo-terminal (stdout and stderr both), as a user at a terminal would see it."""
    main_fd, child_fd = pty.openpty()
    start = time.perf_counter()
    proc = subprocess.Popen(
        ["/usr/bin/time", "-f", "KTRACE_BENCH_RSS_KB %M", *argv],
        stdin=subprocess.DEVNULL,
        stdout=child_fd,
        stderr=child_fd,
        env={**os.environ, **(env or {})},
        close_fds=True,
    )
    os.close(child_fd)
    tree = TreeMemory(proc.pid, wrapper=True)
    last, silence, text = start, 0.0, b""
    while True:
        ready, _, _ = select.select([main_fd], [], [], 0.05)
        now = time.perf_counter()
        if now - start > timeout:
            proc.kill()
            raise RuntimeError(f"timed out: {' '.join(argv)}")
        if ready:
            try:
                chunk = os.read(main_fd, 1 << 16)
            except OSError:  # the child closed the terminal
                chunk = b""
            if not chunk:
                break
            text += chunk
            silence, last = max(silence, now - last), now
        elif proc.poll() is not None:
            break
    proc.wait()
    end = time.perf_counter()
    os.close(main_fd)
    silence = max(silence, end - last)
    rss = [line for line in text.decode(errors="replace").splitlines() if "KTRACE_BENCH_RSS_KB" in line]
    if proc.returncode != 0 or not rss:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}):\n{text.decode(errors='replace')[-2000:]}")
    return Command(end - start, max(int(rss[-1].split()[-1]) / 1024, tree.peak_mb), silence)


def ktrace_cmd(*args: str) -> list[str]:
    """The `ktrace` command a user runs: the console script beside this python (else `python -m ktrace`)."""
    script = Path(sys.executable).parent / "ktrace"
    return [str(script), *args] if script.is_file() else [sys.executable, "-m", "ktrace", *args]


def first_and_warm(repeat: int) -> dict[str, dict[str, Command]]:
    """First run (empty numba cache) and best warm run of `ktrace summary --json` on the demo and alexnet."""
    out: dict[str, dict[str, Command]] = {}
    for name, path in (("demo", DEMO), ("alexnet", ALEXNET)):
        with tempfile.TemporaryDirectory(prefix="ktrace-numba-") as cache:  # one empty cache per trace
            env = {"NUMBA_CACHE_DIR": cache}
            first = run_command(ktrace_cmd("summary", "--json", str(path)), env)
            warm = min(
                (run_command(ktrace_cmd("summary", "--json", str(path)), env) for _ in range(repeat)),
                key=lambda c: c.wall_s,
            )
            out[name] = {"first": first, "warm": warm}
    return out


def kineto_traces(shared: Path) -> list[tuple[str, Path, int]]:
    """(short name, file, events) of every real Kineto trace file in shared/traces (rank files: rank 0 only)."""
    found = []
    for stats_path in sorted(shared.glob("*/STATS.json")):
        stats = json.loads(stats_path.read_text())
        files = sorted(n for n, e in stats.items() if n.endswith((".json", ".json.gz")) and "n_kernels" in e)
        if any(n.startswith("worker") for n in files):
            files = files[:1]  # one rank of a per-rank job: the ranks are alike
        for name in files:
            label = stats_path.parent.name if len(files) == 1 else f"{stats_path.parent.name}/{name.split('.')[0]}"
            found.append((label, stats_path.parent / name, int(stats[name]["n_events"])))
    return found


def goal_of(events: int) -> tuple[str, float | None, float]:
    """(goal text, minimum speed ratio or None for the small-trace rule, maximum RSS ratio) by trace size."""
    if events >= 1_000_000:
        return ">= 20x, RSS <= 0.25", 20.0, 0.25
    if events >= 300_000:
        return ">= 10x, RSS <= 0.25", 10.0, 0.25
    return "<= 1.0 s, RSS <= HTA", None, 1.0


def compare_traces(args: argparse.Namespace, hta: str | None) -> list[dict[str, Any]]:
    rows = []
    for label, src, events in kineto_traces(args.traces):
        path = tiled_copy(src, args.copies, args.workdir)
        n = events * args.copies
        with tempfile.TemporaryDirectory(prefix="ktrace-numba-") as cache:  # the first run after install
            cold = run_command(ktrace_cmd("summary", str(path), "--json"), {"NUMBA_CACHE_DIR": cache})
            summary = min(  # on the cache the first run filled: warm, and compiled from this very source tree
                (
                    run_command(ktrace_cmd("summary", str(path), "--json"), {"NUMBA_CACHE_DIR": cache})
                    for _ in range(args.repeat)
                ),
                key=lambda c: c.wall_s,
            )
        info = min((run_command(ktrace_cmd("info", str(path))) for _ in range(args.repeat)), key=lambda c: c.wall_s)
        floor = measure(sys.executable, DECODE_FLOOR, path, setup=DECODE_SETUP)
        imported = measure(sys.executable, KTRACE_IMPORT, path, setup=KTRACE_IMPORT_SETUP)
        row: dict[str, Any] = {
            "trace": label,
            "events": n,
            "summary": summary,
            "cold": cold,
            "info": info,
            "floor_s": floor["wall_s"],
            "import_s": imported["wall_s"],
        }
        if hta:
            h = min(
                (measure(hta, HTA_BODY, path.parent, setup=HTA_ANALYSES_SETUP) for _ in range(args.repeat)),
                key=lambda r: r["process_s"],
            )
            row["hta_s"], row["hta_rss_mb"], row["hta_after_imports_s"] = h["process_s"], h["peak_rss_mb"], h["wall_s"]
        rows.append(row)
        print(_trace_line(row), flush=True)
    return rows


def _trace_line(row: dict[str, Any]) -> str:
    s, i = row["summary"], row["info"]
    text = (
        f"{row['trace']:52s} {row['events']:>10,} ev  ktrace {s.wall_s:6.2f} s {s.peak_rss_mb:6.0f} MB "
        f"(first run {row['cold'].wall_s:.2f} s, silent {row['cold'].longest_silence_s:.2f} s)  "
        f"info/summary {i.wall_s / s.wall_s:.2f}  import {row['import_s']:.2f} s = "
        f"{row['import_s'] / row['floor_s']:.1f}x decode floor ({row['floor_s']:.2f} s)"
    )
    if "hta_s" in row:
        text += (
            f"  HTA {row['hta_s']:6.2f} s (after imports {row['hta_after_imports_s']:.2f} s) "
            f"{row['hta_rss_mb']:6.0f} MB  ratio {row['hta_s'] / s.wall_s:5.1f}x "
            f"(old footing {row['hta_after_imports_s'] / s.wall_s:.1f}x) "
            f"RSS {s.peak_rss_mb / row['hta_rss_mb']:.2f}  goal {goal_of(row['events'])[0]}"
        )
    return text


def verdict(row: dict[str, Any]) -> bool:
    """Whether one tiled trace meets its goal (speed and memory against HTA, or the small-trace rule)."""
    s = row["summary"]
    _, min_ratio, max_rss = goal_of(row["events"])
    if min_ratio is None:
        return s.wall_s <= 1.0 and s.peak_rss_mb <= max_rss * row["hta_rss_mb"]
    return row["hta_s"] / s.wall_s >= min_ratio and s.peak_rss_mb <= max_rss * row["hta_rss_mb"]


def export_speed(n_kernels: int, workdir: Path) -> float:
    """Slices per second of export_perfetto on a synthetic store of about `n_kernels` kernels."""
    store_path = workdir / f"synthetic_{n_kernels}.ktrace"
    if not store_path.exists():
        print(f"building a synthetic store of {n_kernels:,} kernels ...", file=sys.stderr)
        subprocess.run([sys.executable, "-c", MAKE_STORE, str(store_path), str(n_kernels)], check=True)
    r = measure(sys.executable, EXPORT_BODY, store_path, setup=EXPORT_SETUP)
    return float(r["extra"]["slices"] / r["wall_s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=Path, default=SHARED, help="folder of real traces (shared/traces)")
    parser.add_argument("--hta-python", help="python of a venv with HTA (default: make /tmp/htavenv)")
    parser.add_argument("--skip-hta", action="store_true", help="ktrace's figures only")
    parser.add_argument("--copies", type=int, default=10, help="how many times each trace is tiled in time")
    parser.add_argument("--repeat", type=int, default=2, help="runs per measurement; the fastest is kept")
    parser.add_argument("--export-kernels", type=int, default=10_000_000, help="kernels in the export benchmark")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "ktrace-bench")
    parser.add_argument("--parts", default="first,traces,export", help="which parts to run (comma-separated)")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    args.workdir.mkdir(parents=True, exist_ok=True)
    hta = None if args.skip_hta else (args.hta_python or str(ensure_hta(Path("/tmp/htavenv"))))
    print(f"machine: {os.cpu_count()} cores, load before {os.getloadavg()[0]:.1f}; python {sys.version.split()[0]}")

    runs = first_and_warm(args.repeat) if "first" in parts else {}
    for name, r in runs.items():
        print(
            f"{name:8s} first run {r['first'].wall_s:6.2f} s (longest silence {r['first'].longest_silence_s:.2f} s, "
            f"{r['first'].peak_rss_mb:.0f} MB)   warm {r['warm'].wall_s:5.2f} s ({r['warm'].peak_rss_mb:.0f} MB)"
        )
    if "first" in parts:
        helps = min(run_command(ktrace_cmd("--help")).wall_s for _ in range(5))
        print(f"ktrace --help {helps * 1000:.0f} ms (goal <= 100 ms)")
    rows = compare_traces(args, hta) if "traces" in parts else []
    if "export" in parts:
        slices = export_speed(args.export_kernels, args.workdir)
        print(f"export -f perfetto: {slices / 1e6:.2f} M slices/s on {args.export_kernels:,} kernels (goal >= 1 M/s)")
    print(f"machine load after {os.getloadavg()[0]:.1f}")

    first = (
        (f"first run {runs['demo']['first'].wall_s:.1f} s (demo), {runs['alexnet']['first'].wall_s:.1f} s (alexnet)")
        if runs
        else "first run not measured"
    )
    if hta and rows:
        worst = min(rows, key=lambda r: r["hta_s"] / r["summary"].wall_s)
        met = sum(verdict(r) for r in rows)
        print(
            f"speed_everywhere: worst {worst['hta_s'] / worst['summary'].wall_s:.1f}x HTA on {worst['trace']}; "
            f"{met}/{len(rows)} traces meet their goal; {first}"
        )
    elif rows:
        slowest = max(rows, key=lambda r: r["summary"].wall_s)
        print(f"speed_everywhere: slowest {slowest['summary'].wall_s:.1f} s on {slowest['trace']} (no HTA); {first}")
    else:
        print(f"speed_everywhere: no trace compared; {first}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
