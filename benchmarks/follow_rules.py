"""What one look of `ktrace check --follow` / `ktrace run --on-finding` costs (issue 31), without a GPU.

    python benchmarks/follow_rules.py [--steps 400] [--kernels-per-step 1000] [--rounds 3]

A synthetic one-rank store (ktrace.testing.synthetic: `steps` training steps of `kernels-per-step` kernels, about
80 ms each) is written once; then, interleaved, each mode runs `rounds` times and its median wall time is printed
with its ratio to the anchor:
  anchor           store.read + run_rules on the whole trace (what `ktrace check STORE` does after its start-up);
  look 60s         one WindowJudge.look: read, cut the last 60 s (exporters.selection.select), every rule;
  look 10steps     the same on the last 10 steps;
  stop rule 60s    the --on-finding watch's look: one rule (StepOutlier) on the last 60 s;
  stop rule 10st   ... on the last 10 steps.
A look is repeated every --publish seconds (5 by default) in the launcher's process, not in the traced one.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ktrace.analysis.rules.config import RulesConfig  # noqa: E402
from ktrace.analysis.rules.engine import rule_by_name, run_rules  # noqa: E402
from ktrace.analysis.rules.follow import parse_window  # noqa: E402
from ktrace.cli.follow_rules import WindowJudge  # noqa: E402
from ktrace.model import store  # noqa: E402
from ktrace.testing.synthetic import SyntheticConfig, generate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--kernels-per-step", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ktrace-follow-bench-"))
    try:
        trace = generate(SyntheticConfig(steps=args.steps, kernels_per_step=args.kernels_per_step))
        span = trace.span_ns()
        assert span is not None
        path = folder / "job.ktrace"
        store.write(trace, path)
        print(f"{trace.kernels.height:,} kernels over {(span[1] - span[0]) / 1e9:.1f} s, {args.steps} steps")
        one = [rule_by_name("StepOutlier")]

        def look(window: str, rules: list | None = None) -> Callable[[], object]:
            return lambda: WindowJudge(path, parse_window(window), RulesConfig(), rules=rules).look(live=False)

        modes: dict[str, Callable[[], object]] = {
            "anchor": lambda: run_rules(store.read(path)),
            "look 60s": look("60s"),
            "look 10steps": look("10steps"),
            "stop rule 60s": look("60s", one),
            "stop rule 10st": look("10steps", one),
        }
        for fn in modes.values():
            fn()  # warm: imports, numba caches
        times: dict[str, list[float]] = {name: [] for name in modes}
        for _ in range(args.rounds):
            for name, fn in modes.items():
                started = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - started)
        anchor = statistics.median(times["anchor"])
        for name, samples in times.items():
            median = statistics.median(samples)
            print(f"{name:15} {median:7.3f} s  x{median / anchor:5.2f} of the anchor")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
