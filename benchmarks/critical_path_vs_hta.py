"""Agreement table: ktrace's critical path against HTA's critical_path_analysis on the traces HTA tests it with.

For each case (trace, annotation, instance, as in HTA's tests/test_critical_path_analysis.py) it runs HTA
(benchmarks/_hta_critical_path.py under --hta-python, with CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE=1) and
ktrace (analysis.critical_path) and prints: path length (us), graph nodes/edges, path nodes/events, the
composition (HTA's bound_by: cpu, launch delay, kernel-kernel gap, GPU = compute + memcpy/memset + comm)
and the Jaccard index of the GPU records on the two paths (by correlation id), plus each tool's time
(ktrace: CPU seconds of the analysis alone; HTA: wall seconds of its whole run, load included). In
parentheses: ktrace on the trace with the syncs' event links cleared, which is the graph HTA 0.5 draws when
run under pandas >= 3 (its event-wait matching uses `Series.fillna(inplace=True)` on a column, a no-op under
copy-on-write, so it drops every cudaStreamWaitEvent / cudaEventSynchronize edge).

Usage: python benchmarks/critical_path_vs_hta.py --hta-python /tmp/hta-venv/bin/python [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from ktrace.analysis.critical_path import critical_path  # noqa: E402
from ktrace.analysis.index import TraceIndex  # noqa: E402
from ktrace.importers import load  # noqa: E402
from ktrace.model.schema import TABLES  # noqa: E402
from ktrace.model.trace import Trace  # noqa: E402

FIX = REPO / "fixtures" / "traces"
ALEX = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
CASES = (
    ("simple_add", FIX / "hta-critical-path" / "simple_add_trace.json.gz", ALEX, 1),
    ("simple_add (whole)", FIX / "hta-critical-path" / "simple_add_trace.json.gz", "", -1),
    ("alexnet", FIX / "hta-a100-alexnet-tiny" / "benchmark_result_2869224_1695835535_trace.json.gz", ALEX, 1),
    ("event_sync", FIX / "hta-critical-path" / "event_sync_trace.json.gz", "ProfilerStep", 0),
    ("event_sync_multi_stream", FIX / "hta-critical-path" / "event_sync_multi_stream_trace.json.gz", "", -1),
)


def run_hta(python: str, path: Path, annotation: str, instance: int) -> dict[str, Any]:
    script = REPO / "benchmarks" / "_hta_critical_path.py"
    t0 = time.perf_counter()
    out = subprocess.run(
        [python, str(script), str(path), annotation, str(instance)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE": "1"},
    )
    found: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    found["seconds"] = time.perf_counter() - t0
    return found


def without_event_waits(trace: Trace) -> Trace:
    """The trace with the syncs' event links cleared: the graph HTA 0.5 draws under pandas 3 (see RESULTS.md)."""
    tables = {name: trace.to_arrow(name) for name in TABLES}
    syncs = tables["syncs"]
    for col in ("wait_stream", "wait_correlation_id"):
        i = syncs.schema.get_field_index(col)
        syncs = syncs.set_column(i, col, pa.nulls(syncs.num_rows, syncs.schema.field(col).type))
    tables["syncs"] = syncs
    return Trace.from_arrow(tables, trace.meta)


def run_ktrace(path: Path, annotation: str, instance: int, *, event_waits: bool = True) -> dict[str, Any]:
    trace = load(path)
    if not event_waits:
        trace = without_event_waits(trace)
    ix = TraceIndex(trace)
    t0 = time.process_time()
    cp = critical_path(trace, annotation=annotation or None, instance=max(instance, 0), index=ix)
    seconds = time.process_time() - t0
    assert cp is not None, path
    comp = {r["category"]: r["ns"] // 1000 for r in cp.composition.iter_rows(named=True)}
    gpu_ids = ix.gpu_columns().correlation_id[cp.path_records]
    return {
        "length_us": cp.length_ns // 1000,
        "graph_nodes": cp.graph_nodes,
        "graph_edges": cp.graph_edges,
        "path_nodes": cp.path_nodes,
        "path_events": cp.path_events,
        "cpu": comp["cpu"],
        "launch": comp["launch_delay"],
        "gap": comp["gpu_gap"],
        "gpu": comp["gpu_compute"] + comp["memory"] + comp["communication"],
        "kernels": sorted(int(c) for c in gpu_ids),
        "seconds": seconds,
    }


def row(name: str, k: dict[str, Any], h: dict[str, Any], bare: dict[str, Any]) -> str:
    b = h["bound_by_us"]
    hta = {
        "cpu": b.get("cpu_bound", 0),
        "launch": b.get("gpu_kernel_launch_overhead", 0),
        "gap": b.get("gpu_kernel_kernel_overhead", 0),
        "gpu": b.get("gpu_compute_bound", 0) + b.get("gpu_communication_bound", 0),
    }
    ks, hs = set(k["kernels"]), {c for c, _ in h["kernels"]}
    jaccard = len(ks & hs) / len(ks | hs) if ks | hs else 1.0
    cells = [
        name,
        f"{k['length_us']:,} / {h['length_us']:,} ({bare['length_us']:,})",
        f"{k['graph_nodes']} / {h['graph_nodes']}",
        f"{k['graph_edges']} / {h['graph_edges']} ({bare['graph_edges']})",
        f"{k['path_nodes']} / {h['path_nodes']} ({bare['path_nodes']})",
        f"{k['path_events']} / {h['path_events']}",
        *(f"{k[c]:,} / {hta[c]:,}" for c in ("cpu", "launch", "gap", "gpu")),
        f"{jaccard:.2f} ({len(ks & hs)}/{len(ks | hs)})",
        f"{k['seconds']:.3f} / {h['seconds']:.1f}",
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hta-python", default="/tmp/hta-venv/bin/python")
    parser.add_argument("--json", type=Path, help="also write every figure as JSON here")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(
        "| case | length us (ktrace / HTA (ktrace without event waits)) | graph nodes | graph edges (idem) |"
        " path nodes (idem) | path events | cpu us |"
        " launch delay us | kernel gap us | GPU us | GPU records on path: Jaccard | seconds (analysis / HTA run) |"
    )
    print("|" + "---|" * 12)
    figures = {}
    for name, path, annotation, instance in CASES:
        k = run_ktrace(path, annotation, instance)
        h = run_hta(args.hta_python, path, annotation, instance)
        bare = run_ktrace(path, annotation, instance, event_waits=False)
        figures[name] = {"ktrace": k, "hta": h, "ktrace_without_event_waits": bare}
        print(row(name, k, h, bare), flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
