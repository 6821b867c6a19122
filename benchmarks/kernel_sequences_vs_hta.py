"""Frequent kernel sequences: ktrace's kernel_sequences vs HTA 0.5.0's get_frequent_cuda_kernel_sequences.

The two answer neighbouring questions. HTA's takes an operator name: for every shallowest call of an
operator whose name contains it (with at least 3 GPU events), the pattern is the operator's name followed by
the GPU events of its whole call subtree in start order (kernels, memsets, memcpys and cuda_sync events such
as "Stream Wait Event", on any stream); it counts equal patterns. ktrace's (analysis.kernel_sequences) needs
no operator: on each stream, windows of `length` consecutive kernels (memory operations and syncs left out),
occurrences of one sequence never overlapping, counted over the whole trace.

For each of HTA's top patterns this script drops what ktrace leaves out (everything that is not a kernel of
the trace), and looks the remaining kernel tuple up among ktrace's sequences of that length; the table says
whether the counts agree and, if not, why (computed, not guessed):

- "agree": same count;
- "ktrace more: the kernels also run outside this pattern": under another operator (a backward op), or under
  this one with other memsets/syncs between them (another HTA pattern);
- "ktrace fewer": occurrences overlap or are interleaved with other kernels of the stream;
- "not consecutive on one stream": the operator's kernels ran on several streams or with others between them;
- "memsets/syncs dropped": HTA's pattern had non-kernel GPU events (ktrace's sequences hold kernels only).

HTA runs in its venv (default /tmp/hta-venv) in a subprocess. HTA 0.5.0 with pandas 3 leaves its call-stack
event array as objects (DataFrame.replace no longer downcasts) and np.unique(axis=0) refuses it; the runner
casts that one array to float (a compatibility shim, no change to HTA's logic). HTA's call graph raises on the
H100 trace (tracelens: "Unexpected case" on zero-duration events) and on resnet50 pt1.9 (abs() of a string),
so the second trace is DLRM rank 0 (PARAM, 2023).

examples:
  python benchmarks/kernel_sequences_vs_hta.py
  python benchmarks/kernel_sequences_vs_hta.py --venv /tmp/hta-venv
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "traces"
if not SHARED.is_dir():
    SHARED = HERE.parent / "fixtures" / "traces"

CASES = {
    "hta-a100-alexnet-tiny/benchmark_result_2869224_1695835535_trace.json.gz": ["aten::conv2d", "aten::linear"],
    "param-dlrm-v100-8rank/worker0_step_12.1694128201545.pt.trace.json.gz": [
        "aten::linear",
        "Optimizer.step",
        "autograd::engine::evaluate_function: AddmmBackward0",
    ],
}
"""Trace (under the shared traces folder) -> operator names handed to HTA (each with >= 3 GPU events a call)."""

HTA_RUNNER = """
import json, logging, os, sys, tempfile
logging.disable(logging.CRITICAL)
import numpy as np
_unique = np.unique
def _unique_numeric(ar, *a, **k):
    ar = np.asarray(ar)
    return _unique(ar.astype(np.float64) if ar.dtype == object and k.get("axis") is not None else ar, *a, **k)
np.unique = _unique_numeric
from hta.trace_analysis import TraceAnalysis
trace_file, top, ops = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
folder = tempfile.mkdtemp()
os.symlink(trace_file, os.path.join(folder, os.path.basename(trace_file)))
ta = TraceAnalysis(trace_dir=folder)
out = {}
for op in ops:
    df = ta.get_frequent_cuda_kernel_sequences(op, tempfile.mkdtemp(), min_pattern_len=3, top_k=top, visualize=False)
    out[op] = [] if df is None or df.empty else [
        {"pattern": r["pattern"].split("|"), "count": int(r["count"]), "gpu_us": float(r["GPU kernel duration (us)"])}
        for _, r in df.head(top).iterrows()
    ]
print("RESULT " + json.dumps(out))
"""


def hta_patterns(python: Path, trace: Path, ops: list[str], top: int) -> dict[str, list[dict[str, Any]]]:
    """HTA's top patterns per operator name (its own process)."""
    done = subprocess.run(
        [str(python), "-c", HTA_RUNNER, str(trace), str(top), *ops], capture_output=True, text=True, check=True
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result: dict[str, list[dict[str, Any]]] = json.loads(line[len("RESULT ") :])
    return result


def short(name: str, width: int = 28) -> str:
    """A kernel name cut for a table cell."""
    from ktrace.analysis.names import short_kernel_name

    return short_kernel_name(name, width).replace("|", "/")


def windows(streams: list[list[str]], kernels: tuple[str, ...]) -> int:
    """How many times `kernels` run back to back on one stream (overlapping windows counted)."""
    n = len(kernels)
    return sum(tuple(names[i : i + n]) == kernels for names in streams for i in range(len(names) - n + 1)) if n else 0


def compare(trace_path: Path, patterns: dict[str, list[dict[str, Any]]]) -> list[list[str]]:
    """One table row per HTA pattern: HTA's count and GPU time, ktrace's for the same kernel tuple, the verdict."""
    import ktrace
    from ktrace.analysis.index import TraceIndex
    from ktrace.analysis.kernel_sequences import kernel_sequences

    trace = ktrace.open(trace_path)
    ix = TraceIndex(trace)
    kernel_names = set(trace.kernels["name"].cast(str).unique().to_list())
    per_stream = trace.kernels.sort("device", "stream", "start_ns").group_by("device", "stream", maintain_order=True)
    streams = [frame["name"].cast(str).to_list() for _, frame in per_stream]
    by_length: dict[int, dict[tuple[str, ...], tuple[int, int]]] = {}
    rows = []
    for op, found in patterns.items():
        for p in found:
            events = p["pattern"][1:]
            kernels = tuple(e for e in events if e in kernel_names)
            n = len(kernels)
            if n not in by_length:
                seq = kernel_sequences(trace, length=n, top=10**9, index=ix) if n else None
                table = seq.top.rows() if seq is not None else []
                by_length[n] = {tuple(r[0]): (int(r[1]), int(r[3])) for r in table}
            count, total_ns = by_length[n].get(kernels, (0, 0))
            why = []
            if len(kernels) < len(events):
                why.append(f"{len(events) - len(kernels)} memsets/syncs dropped")
            if count == 0 and windows(streams, kernels):
                why.append("once only: ktrace lists repeated sequences (count >= 2)")
            elif count == 0:
                why.append("not consecutive on one stream")
            elif count > p["count"]:
                why.append("ktrace more: the kernels also run outside this pattern")
            elif count < p["count"]:
                why.append("ktrace fewer: interleaved or overlapping")
            else:
                why.append("agree")
            rows.append(
                [
                    trace_path.parent.name,
                    op,
                    " → ".join(short(k) for k in kernels[:4]) + (f" … ({n} kernels)" if n > 4 else "") or "-",
                    str(p["count"]),
                    f"{p['gpu_us']:.0f}",
                    str(count),
                    f"{total_ns / 1000:.0f}",
                    "; ".join(why),
                ]
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=Path, default=SHARED, help="folder of real traces (shared/traces)")
    parser.add_argument("--venv", type=Path, default=Path("/tmp/hta-venv"), help="venv with HTA 0.5.0")
    parser.add_argument("--top", type=int, default=3, help="HTA patterns per operator")
    args = parser.parse_args(argv)
    print(
        "| trace | HTA operator | kernels (HTA pattern less memsets/syncs) | HTA count | HTA GPU µs "
        "| ktrace count | ktrace GPU µs | verdict |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for rel, ops in CASES.items():
        path = args.traces / rel
        for row in compare(path, hta_patterns(args.venv / "bin" / "python", path, ops, args.top)):
            print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
