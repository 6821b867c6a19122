"""The big-trace case of issue 29: a 20 M-event Kineto trace imported and summarized in bounded memory.

Builds the big trace from a fixture by tiling it in time (benchmarks/tile_kineto.py; owlv2, 132 k events, x150 =
19.8 M events by default; written once under --workdir, never committed), then runs, each as a whole process with
its peak memory sampled across the process tree (speed_everywhere.run_command: GNU time's peak RSS, or the summed
PSS of the process and its decode workers while it has any, whichever is larger):

1. `ktrace import BIG -o BIG.ktrace` (goal: <= 1 GB at any size, workers counted);
2. `ktrace info BIG.ktrace`;
3. `ktrace summary BIG.ktrace --json` (goal: <= 2.5 GB at 20 M events);
4. the interpreter-and-libraries baseline: a process importing what the summary imports and nothing else.
   bytes/event = (summary's peak - baseline) / events (goal: <= 100 B/event).
5. With --hta-python, HTA (the interpreter, `import hta`, TraceAnalysis and its four analyses, as
   end_to_end_vs_hta.py runs it) on the same fixture tiled x10 and x30 (HTA cannot load 20 M events on a 2-core,
   16 GB machine: extrapolate from these); without it, says HTA was skipped.

Times on a loaded machine mean little (the load average is printed before and after); peak memory does not
depend on the load. The last line reads
`big trace: <N> events, import <s> s <MB> MB, summary <s> s <MB> MB, bytes/event <B>; HTA x10 <s> s <MB> MB,
x30 <s> s <MB> MB`.

examples:
  python benchmarks/big_trace.py                                   # x150: 19.8 M events (a few GB of disk)
  python benchmarks/big_trace.py --copies 10                       # 1.3 M events: minutes on 2 cores
  python benchmarks/big_trace.py --hta-python /tmp/htavenv/bin/python
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from end_to_end_vs_hta import HTA_BODY  # noqa: E402
from end_to_end_vs_hta import HTA_SETUP as HTA_ANALYSES_SETUP  # noqa: E402
from import_vs_hta import measure  # noqa: E402
from speed_everywhere import DEMO, Command, ktrace_cmd, run_command  # noqa: E402
from tile_kineto import tiled_copy  # noqa: E402

BIG_COPIES = 150
"""owlv2 (132,152 events) x150: the 20 M-event case of issue 29."""
HTA_COPIES = (10, 30)
SUMMARY_IMPORTS = (
    "import ktrace.cli.summary, ktrace.analysis.summary, ktrace.model.store, ktrace.presentation.summary_page, "
    "polars, pyarrow, numpy, numba, msgspec"
)
"""What `ktrace summary --json` imports once a kernel compiles: the baseline that bytes/event is counted above
(issue 29's footing, kept for comparison across the day's figures)."""
SUMMARY_IMPORTS_NO_NUMBA = SUMMARY_IMPORTS.replace(", numba", "")
"""What it imports where no kernel needs numba (a summary of up to ~1 M rows per kernel input, owlv2 x10 and x30:
analysis._kernels.NUMPY_MAX_ROWS): the second, stricter baseline."""


@dataclass
class BigRun:
    """The figures of one run: the events of the big trace, the commands' whole-process figures, HTA's."""

    events: int
    imported: Command
    info: Command
    summary: Command
    baseline: Command
    baseline_no_numba: Command
    hta: dict[int, tuple[float, float]]

    @property
    def bytes_per_event(self) -> float:
        """The summary's peak memory above the interpreter-and-libraries baseline, per event."""
        return (self.summary.peak_rss_mb - self.baseline.peak_rss_mb) * 2**20 / self.events

    @property
    def bytes_per_event_no_numba(self) -> float:
        """The same above the baseline without numba's import (the summary imports it only to compile a kernel)."""
        return (self.summary.peak_rss_mb - self.baseline_no_numba.peak_rss_mb) * 2**20 / self.events

    def last_line(self) -> str:
        """The line issue 29 asks for."""
        hta = (
            ", ".join(f"x{k} {s:.1f} s {mb:.0f} MB" for k, (s, mb) in sorted(self.hta.items()))
            if self.hta
            else "skipped (no --hta-python)"
        )
        return (
            f"big trace: {self.events:,} events, import {self.imported.wall_s:.1f} s {self.imported.peak_rss_mb:.0f} MB, "
            f"summary {self.summary.wall_s:.1f} s {self.summary.peak_rss_mb:.0f} MB, "
            f"bytes/event {self.bytes_per_event:.0f}; HTA {hta}"
        )


def count_events(tiled: Path) -> int:
    """Events in a file tile_kineto wrote (one a line after the header line): the footing of issue 29's
    bytes/event (owlv2 x10: 1.32 M events)."""
    with gzip.open(tiled, "rb") as f:
        return sum(1 for line in f if line.startswith(b"{")) - 1  # (the header line starts with "{" too)


def store_rows(store: Path) -> int:
    """Rows in every table of the imported store (`ktrace info --json`): what the analyses hold."""
    proc = subprocess.run(ktrace_cmd("info", "--json", str(store)), capture_output=True, text=True, check=True)
    rows = json.loads(proc.stdout).get("rows", {})
    return int(sum(v for v in rows.values() if isinstance(v, int)))


def hta_runs(hta_python: str, src: Path, workdir: Path) -> dict[int, tuple[float, float]]:
    """(whole-process seconds, peak MB) of HTA's load and four analyses on `src` tiled x10 and x30."""
    out = {}
    for copies in HTA_COPIES:
        tiled = tiled_copy(src, copies, workdir)
        r = measure(hta_python, HTA_BODY, tiled.parent, setup=HTA_ANALYSES_SETUP)
        out[copies] = (float(r["process_s"]), float(r["peak_rss_mb"]))
        print(f"HTA x{copies}: {r['process_s']:.1f} s, {r['peak_rss_mb']:.0f} MB", flush=True)
    return out


def run(args: argparse.Namespace) -> BigRun:
    """Tile, import, info, summary, baseline and (with --hta-python) HTA, printing each as it finishes."""
    big = tiled_copy(args.src, args.copies, args.workdir)
    store = big.parent / f"{big.name.split('.json')[0]}.ktrace"
    print(f"trace: {big} ({big.stat().st_size / 1e6:.0f} MB gz); load before: {os.getloadavg()[0]:.1f}", flush=True)
    imported = run_command(ktrace_cmd("import", str(big), "-o", str(store), "--force", "--no-progress", "-q"))
    print(f"import:   {imported.wall_s:7.1f} s {imported.peak_rss_mb:7.0f} MB", flush=True)
    info = run_command(ktrace_cmd("info", str(store)))
    print(f"info:     {info.wall_s:7.1f} s {info.peak_rss_mb:7.0f} MB", flush=True)
    summary = run_command(ktrace_cmd("summary", str(store), "--json"))
    print(f"summary:  {summary.wall_s:7.1f} s {summary.peak_rss_mb:7.0f} MB", flush=True)
    baseline = run_command([sys.executable, "-c", SUMMARY_IMPORTS])
    print(f"baseline: {baseline.wall_s:7.1f} s {baseline.peak_rss_mb:7.0f} MB ({SUMMARY_IMPORTS})", flush=True)
    no_numba = run_command([sys.executable, "-c", SUMMARY_IMPORTS_NO_NUMBA])
    print(f"baseline without numba: {no_numba.wall_s:7.1f} s {no_numba.peak_rss_mb:7.0f} MB", flush=True)
    events = count_events(big)
    print(f"events: {events:,} in the file, {store_rows(store):,} rows in the store", flush=True)
    hta = hta_runs(args.hta_python, args.src, args.workdir) if args.hta_python else {}
    if not args.keep:
        shutil.rmtree(store, ignore_errors=True)
    print(f"load after: {os.getloadavg()[0]:.1f}")
    return BigRun(events, imported, info, summary, baseline, no_numba, hta)


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, default=DEMO, help="the Kineto file to tile (default: owlv2, 132 k events)")
    parser.add_argument("--copies", type=int, default=BIG_COPIES, help="how many times to tile it (default 150)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "ktrace-big")
    parser.add_argument("--hta-python", help="python of a venv with HTA (import_vs_hta.ensure_hta makes one)")
    parser.add_argument("--keep", action="store_true", help="keep the imported store (the tiled files are kept)")
    args = parser.parse_args(argv)
    result = run(args)
    print(f"bytes/event above the baseline without numba: {result.bytes_per_event_no_numba:.0f}")
    print(result.last_line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
