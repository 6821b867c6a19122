"""Map-reduce summary of a many-rank store against the single-process summary, in one run.

Builds a synthetic store (ktrace.testing.synthetic: --ranks ranks over --nodes hosts, written rank by rank), then
summarizes it, each side in a fresh subprocess so peak RSS is its own: one process (`store.read` + `summarize`),
and rank by rank (`fleet.summary_map.fleet_summary`) in-process, on 2 local processes and on a Dask LocalCluster
of 2 worker processes. Prints wall and CPU time of each (CPU: the client's own, plus its waited children), the
client's peak RSS, whether every engine's numbers are identical (summary_map.same_results: the rank heatmap and
straggler tables too) and whether they match the single-process summary and rank heatmap (testing.fleet_compare:
exact but for the quantiles' stated bound). The load average is
printed before and after: timings on a loaded machine mean little.

The last line: `fleet_summary: <N> ranks, one process <s> s, in-process <s> s, 2 processes <s> s, dask <s> s,
client RSS <MB> vs <MB>, results identical: yes|no`.

examples:
  python benchmarks/fleet_summary.py --ranks 64 --nodes 8
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import pickle, resource, sys, time
mode, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
t0, c0 = time.perf_counter(), time.process_time()
if mode == "single":
    from ktrace.analysis.rank_heatmap import rank_heatmap
    from ktrace.analysis.summary import summarize
    from ktrace.model import store
    trace = store.read(path)
    result = (summarize(trace), rank_heatmap(trace))  # the fleet reduces both (the heatmap: the dashboard's)
else:
    from ktrace.fleet.summary_map import fleet_summary
    if mode == "dask":
        from distributed import Client, LocalCluster
        with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as c:
            t0, c0 = time.perf_counter(), time.process_time()  # the cluster's start is not the summary's
            result = fleet_summary(path, cluster=c)
    else:
        result = fleet_summary(path, workers={"in-process": 1, "processes": 2}[mode])
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
children = resource.getrusage(resource.RUSAGE_CHILDREN)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
with open(out, "wb") as f:
    pickle.dump({"wall": wall, "cpu": cpu, "children_cpu": children.ru_utime + children.ru_stime, "rss_mb": rss,
                 "result": result}, f)
"""


def _build(path: Path, ranks: int, nodes: int, steps: int, kernels: int) -> None:
    from ktrace.model import store
    from ktrace.testing.synthetic import SyntheticConfig, generate

    store.write(generate(SyntheticConfig(steps=steps, kernels_per_step=kernels, ranks=ranks, nodes=nodes)), path)


def _run(mode: str, path: Path, tmp: Path) -> dict[str, object]:
    out = tmp / f"{mode}.pickle"
    subprocess.run([sys.executable, "-c", CHILD, mode, str(path), str(out)], check=True, env=os.environ.copy())
    with out.open("rb") as f:
        found: dict[str, object] = pickle.load(f)
    return found


def summary_fragment(path: Path) -> str:
    """benchmarks/fleet.py's SUMMARY_HOOKS part for a store: ", summary: one process <s> s, 2 workers <s> s, dask
    <s> s, client RSS <MB> vs <MB>, same numbers: yes|no" (each side in a fresh subprocess)."""
    with tempfile.TemporaryDirectory() as tmp_name:
        runs = {m: _run(m, path, Path(tmp_name)) for m in ("single", "processes", "dask")}
    from ktrace.fleet.summary_map import same_results
    from ktrace.testing.fleet_compare import fleet_differences

    same = same_results(runs["processes"]["result"], runs["dask"]["result"])  # type: ignore[arg-type]
    single, heatmap = runs["single"]["result"]  # type: ignore[misc]
    same = same and not fleet_differences(single, runs["processes"]["result"], heatmap)  # type: ignore[arg-type]
    w = {m: float(r["wall"]) for m, r in runs.items()}  # type: ignore[arg-type]
    return (
        f", summary: one process {w['single']:.2f} s, 2 workers {w['processes']:.2f} s, dask {w['dask']:.2f} s, "
        f"client RSS {runs['single']['rss_mb']:.0f} MB vs {runs['processes']['rss_mb']:.0f} MB, same numbers: "
        f"{'yes' if same else 'no'}"
    )


def main() -> None:
    """Build the store, summarize it every way, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--kernels-per-step", type=int, default=200)
    args = parser.parse_args()
    from ktrace.fleet.summary_map import same_results
    from ktrace.testing.fleet_compare import fleet_differences

    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        path = tmp / "job.ktrace"
        t0 = time.perf_counter()
        _build(path, args.ranks, args.nodes, args.steps, args.kernels_per_step)
        print(f"built {args.ranks} ranks in {time.perf_counter() - t0:.1f} s")
        runs = {m: _run(m, path, tmp) for m in ("single", "in-process", "processes", "dask")}
    for mode, r in runs.items():
        print(
            f"{mode:11} wall {r['wall']:.2f} s  client cpu {r['cpu']:.2f} s  children cpu {r['children_cpu']:.2f} s"
            f"  client peak RSS {r['rss_mb']:.0f} MB"
        )
    fleets = [runs[m]["result"] for m in ("in-process", "processes", "dask")]
    identical = all(same_results(fleets[0], f) for f in fleets[1:])  # type: ignore[arg-type]
    single, heatmap = runs["single"]["result"]  # type: ignore[misc]
    diffs = fleet_differences(single, fleets[0], heatmap)  # type: ignore[arg-type]
    print(f"engines identical: {identical}; differences from one process: {json.dumps(diffs)[:500]}")
    print(f"load average after: {os.getloadavg()}")
    w = {m: float(r["wall"]) for m, r in runs.items()}  # type: ignore[arg-type]
    print(
        f"fleet_summary: {args.ranks} ranks, one process {w['single']:.2f} s, in-process {w['in-process']:.2f} s, "
        f"2 processes {w['processes']:.2f} s, dask {w['dask']:.2f} s, client RSS {runs['single']['rss_mb']:.0f} MB "
        f"vs {runs['processes']['rss_mb']:.0f} MB, results identical: {'yes' if identical and not diffs else 'no'}"
    )


if __name__ == "__main__":
    main()
