"""Import cost of the allocator's `[memory]` events (issue #15), in one run, CPU time (time.process_time).

1. The H100 trace (tracelens, 13,474 `[memory]` events of 132,152) imported as it is, and the same trace with its
   `[memory]` events removed (a copy written once to a temporary file): what importing them costs.
2. A trace without memory events (alexnet) imported by this tree and by the tree named with --baseline (a folder
   holding src/ of the code before the allocations table: `git archive a3d6170 src | tar -x -C /tmp/memory/base`),
   in alternating fresh processes: that the change does not slow traces without memory events.

Best of --repeat runs per case; the load average is printed next to the figures.

    PYTHONPATH=src python benchmarks/memory_import.py [--repeat 7] [--baseline /tmp/memory/base]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "fixtures" / "traces"
H100 = TRACES / "tracelens-h100-hf-inference" / "google_owlv2-large-patch14-ensemble__1016001.json.gz"
PLAIN = TRACES / "hta-a100-alexnet-tiny" / "benchmark_result_2869224_1695835535_trace.json.gz"

_CHILD = """
import sys, time
from pathlib import Path
from ktrace.importers.kineto import import_kineto
path, repeat = Path(sys.argv[1]), int(sys.argv[2])
best = float("inf")
for _ in range(repeat):
    t0 = time.process_time()
    trace = import_kineto(path)
    best = min(best, time.process_time() - t0)
print(best, trace.allocations.height if hasattr(trace, "allocations") else -1)
"""


def _import_cpu(src: Path, trace: Path, repeat: int) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(trace), str(repeat)], env=env, check=True, capture_output=True, text=True
    ).stdout.split()
    return float(out[0]), int(out[1])


def _without_memory(path: Path, tmp: Path) -> Path:
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "[memory]"]
    out = tmp / "no_memory.json.gz"
    with gzip.open(out, "wt") as f:
        json.dump(doc, f)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--baseline", type=Path, default=Path("/tmp/memory/base"))
    args = ap.parse_args()
    src = ROOT / "src"
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        stripped = _without_memory(H100, Path(tmp))
        with_mem, n = _import_cpu(src, H100, args.repeat)
        without, m = _import_cpu(src, stripped, args.repeat)
    print(
        f"H100 trace, this tree: with [memory] {with_mem:.3f} s CPU ({n:,} allocations rows), without {without:.3f} s"
    )
    print(f"  -> the memory events cost {with_mem - without:+.3f} s ({100 * (with_mem / without - 1):+.1f} %)")
    mine, base = [], []
    for _ in range(3):  # alternate, so both see the same machine
        mine.append(_import_cpu(src, PLAIN, args.repeat)[0])
        base.append(_import_cpu(args.baseline / "src", PLAIN, args.repeat)[0])
    print(
        f"alexnet (no memory events): this tree best {min(mine):.3f} s CPU, baseline {args.baseline} "
        f"{min(base):.3f} s: ratio {min(mine) / min(base):.3f}"
    )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
