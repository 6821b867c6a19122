"""Time `ktrace report` and `ktrace check` on a big synthetic trace, against summarize() as the anchor.

Budget (issue 7): a 10 M-kernel trace's report in <= 10 s after load, and an HTML file <= 15 MB.

The trace is generated, written to a .ktrace store and read back, so the frames are laid out as the CLI sees
them. Every in-process stage runs on a trace freshly read from the store (the analyses share results per TraceIndex;
polars may rechunk on first use), after a warm-up on a small trace that loads the numba caches:

- anchor: summarize() alone (the analysis engine's dashboard numbers);
- rules alone: run_rules(), i.e. what `ktrace check` computes;
- report: build_report() (summary + rules sharing one TraceIndex) + render_html(), i.e. `ktrace report` after load.

Each stage runs --repeat times; the fastest run is its cost (the machine is shared), the slowest is shown too.
Then the CLI itself, in subprocesses: `ktrace report STORE -o FILE.html` and `ktrace check STORE` (wall clock,
process start, imports, numba cache loads and load included), next to the same commands on a 1,000-kernel
trace (the fixed cost of starting the CLI).

usage: python benchmarks/report_speed.py [--kernels 10000000] [--ranks 1] [--repeat 3] [--no-cli]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def _best(load: Callable[[], Any], fn: Callable[[Any], Any], repeat: int) -> tuple[Any, float, float]:
    """(result, fastest, slowest seconds) of `repeat` runs of fn(load()), timing fn only: the machine is shared,
    the fastest run is the cost. Each run gets a trace freshly read from the store (polars may rechunk a
    frame's columns on first use, and the analyses share results per TraceIndex), like a CLI process."""
    times, out = [], None
    for _ in range(repeat):
        trace = load()
        t = time.perf_counter()
        out = fn(trace)
        times.append(time.perf_counter() - t)
        del trace
    return out, min(times), max(times)


def _cli(*args: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ktrace", *args], check=True, capture_output=True)
    return time.perf_counter() - t


def _store(kernels: int, ranks: int, path: Path) -> float:
    """Generate a trace of about `kernels` kernels and write it to `path`; seconds spent generating."""
    from ktrace.model.store import write
    from ktrace.testing import SyntheticConfig, generate

    per_step = 200
    steps = max(1, kernels // per_step // ranks)
    trace, gen_s = _timed(
        lambda: generate(SyntheticConfig(steps=steps, kernels_per_step=per_step, ranks=ranks, seed=1))
    )
    write(trace, path)
    return gen_s


def _warm(tmp: Path) -> Path:
    """Load imports and numba caches on a small trace; returns its store (the CLI's fixed-cost probe)."""
    import ktrace
    from ktrace.analysis.rules.engine import run_rules
    from ktrace.presentation.report_model import build_report
    from ktrace.report.html import render_html

    small = tmp / "small.ktrace"
    _store(1_000, 1, small)
    render_html(build_report(ktrace.open(small)))
    run_rules(ktrace.open(small))
    return small


def main() -> None:
    """Generate, store, load; time the anchor, the rules, the report and the CLI; print seconds and ratios."""
    import ktrace
    from ktrace.analysis.rules.engine import run_rules
    from ktrace.analysis.summary import summarize
    from ktrace.presentation.report_model import build_report
    from ktrace.report.html import render_html

    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", type=int, default=10_000_000)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each stage; the fastest is reported")
    parser.add_argument("--no-cli", action="store_true", help="skip the subprocess timings of the CLI")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        store = tmp / "big.ktrace"
        gen_s = _store(args.kernels, args.ranks, store)
        small = _warm(tmp)
        trace, load_s = _timed(lambda: ktrace.open(store))
        print(
            f"{trace.kernels.height:,} kernels, {trace.api.height:,} API calls; generated in {gen_s:.1f} s, "
            f"loaded from the store in {load_s:.2f} s"
        )
        n = args.repeat
        del trace

        def load() -> Any:
            return ktrace.open(store)

        _, anchor, anchor_max = _best(load, summarize, n)
        _, rules_s, rules_max = _best(load, run_rules, n)
        html, total, total_max = _best(load, lambda t: render_html(build_report(t)), n)
        print(f"best of {n} (slowest in brackets), each on a trace freshly read from the store:")
        print(f"anchor summarize():   {anchor:.2f} s [{anchor_max:.2f}]")
        print(
            f"run_rules alone:      {rules_s:.2f} s [{rules_max:.2f}]  ({rules_s / anchor:.2f} x anchor; "
            "`ktrace check` after load)"
        )
        print(
            f"report after load:    {total:.2f} s [{total_max:.2f}]  ({total / anchor:.2f} x anchor; summary + "
            "rules + HTML; budget 10 s)"
        )
        print(f"HTML size:            {len(html.encode()) / 1e6:.2f} MB (budget 15 MB)")
        if args.no_cli:
            return
        fixed = min(_cli("report", str(small), "-o", str(tmp / "small.html")) for _ in range(n))
        cli_report = min(_cli("report", str(store), "-o", str(tmp / "big.html")) for _ in range(n))
        fixed_check = min(_cli("check", str(small), "--fail-on", "never") for _ in range(n))
        cli_check = min(_cli("check", str(store), "--fail-on", "never") for _ in range(n))
        print(
            f"CLI `ktrace report`:  {cli_report:.2f} s wall, best of {n} (= {load_s:.2f} s load + "
            f"{fixed:.2f} s start-up measured on a 1,000-kernel trace + {cli_report - load_s - fixed:.2f} s)"
        )
        print(
            f"CLI `ktrace check`:   {cli_check:.2f} s wall, best of {n} (= {load_s:.2f} s load + "
            f"{fixed_check:.2f} s start-up + {cli_check - load_s - fixed_check:.2f} s)"
        )


if __name__ == "__main__":
    main()
