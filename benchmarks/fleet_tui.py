"""`ktrace view` and the rank views on a many-rank synthetic job: time to the first screen, what the overview scan
costs, and the CPU and output size of the rank heatmap and straggler analyses.

Each variant runs in its own process (peak RSS is per process): the track list + overview scan (plan_index) with
the adaptive overview bins (tui.index_build.overview_bins) and, as the anchor in the same run, with the fixed
N_BINS = 4,096 bins used before; then the app itself on the in-memory trace (Pilot, analyses off): seconds from
mount to the first screen and to every track sorted. CPU times are process_time (the machine is shared: the load
average is printed beside them).

usage: python benchmarks/fleet_tui.py [--ranks 1024] [--hosts 128] [--anchor]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time


def _trace(ranks: int, hosts: int):  # type: ignore[no-untyped-def]
    from ktrace.testing.synthetic import SyntheticConfig, generate

    return generate(SyntheticConfig(ranks=ranks, nodes=hosts, steps=3, kernels_per_step=8, streams=1))


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def plan_only(ranks: int, hosts: int, n_bins: int | None) -> dict[str, float]:
    from ktrace.tui.index_build import build_tracks, overview_bins, plan_index

    trace = _trace(ranks, hosts)
    before = _rss_mb()
    t = time.process_time()
    index, plan = plan_index(trace, n_bins)
    plan_cpu = time.process_time() - t
    t = time.process_time()
    build_tracks(plan)
    return {
        "bins": float(n_bins or overview_bins(trace)),
        "tracks": float(len(index.tracks)),
        "plan_cpu_s": plan_cpu,
        "build_cpu_s": time.process_time() - t,
        "rss_added_mb": _rss_mb() - before,
    }


async def first_screen(ranks: int, hosts: int) -> dict[str, float]:
    from ktrace.tui.app import make_app
    from ktrace.tui.widgets.host_device_tree import HostDeviceTree
    from ktrace.tui.widgets.timeline import Timeline

    app = make_app(trace=_trace(ranks, hosts), analyses=False)
    async with app.run_test(size=(140, 40)):
        while "first_screen" not in app.timings:
            await asyncio.sleep(0.01)
        rows = len(app.query_one(Timeline).rows)
        expanded = sum(1 for n in app.query_one(HostDeviceTree).root.children if n.is_expanded)
        while "tracks_ready" not in app.timings:
            await asyncio.sleep(0.01)
        return {
            "first_screen_s": app.timings["first_screen"] - app.timings["mount"],
            "tracks_ready_s": app.timings["tracks_ready"] - app.timings["mount"],
            "timeline_rows": float(rows),
            "hosts_expanded": float(expanded),
        }


def views(ranks: int, hosts: int) -> dict[str, float]:
    """CPU of the rank views over one index (heatmap, stragglers) after the anchor ranks.load_balance (which builds
    the index's shared columns, numba loads included), and the size of what the report writes for them."""
    import json as json_module

    from ktrace.analysis.index import TraceIndex
    from ktrace.analysis.rank_heatmap import rank_heatmap
    from ktrace.analysis.ranks import load_balance
    from ktrace.analysis.stragglers import stragglers
    from ktrace.presentation.report_ranks import percent_matrix
    from ktrace.report.content import rank_heatmap_dict
    from ktrace.report.plots import heatmap

    trace = _trace(ranks, hosts)
    ix = TraceIndex(trace)
    t = time.process_time()
    load_balance(trace, index=ix)  # the anchor: today's per-rank analysis, which also builds the shared index
    anchor_cpu = time.process_time() - t
    t = time.process_time()
    heat = rank_heatmap(trace, index=ix)
    heat_cpu = time.process_time() - t
    t = time.process_time()
    lag = stragglers(trace, index=ix)
    lag_cpu = time.process_time() - t
    doc = json_module.dumps(rank_heatmap_dict(heat))
    ranks_rows = [(str(n), int(r)) for n, r in heat.ranks.iter_rows()]
    fig = heatmap("t", percent_matrix(heat, "time", "busy_share"), heat.hosts(), ranks_rows, [], "s", "%")
    return {
        "anchor_load_balance_cpu_s": anchor_cpu,
        "heatmap_cpu_s": heat_cpu,
        "stragglers_cpu_s": lag_cpu,
        "json_rank_heatmap_mb": len(doc) / 1e6,
        "html_one_heatmap_mb": len(json_module.dumps(fig)) / 1e6,
        "bins": float(heat.bins.n_bins),
        "straggler_rows": float(lag.table.height),
    }


def _child(args: list[str]) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--hosts", type=int, default=128)
    parser.add_argument("--anchor", action="store_true", help="also scan with the old fixed 4,096 bins (~5 GB)")
    parser.add_argument("--child", choices=["plan", "app", "views"], help=argparse.SUPPRESS)
    parser.add_argument("--bins", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "plan":
        print(json.dumps(plan_only(args.ranks, args.hosts, args.bins or None)))
        return
    if args.child == "views":
        print(json.dumps(views(args.ranks, args.hosts)))
        return
    if args.child == "app":
        print(json.dumps(asyncio.run(first_screen(args.ranks, args.hosts))))
        return
    shape = ["--ranks", str(args.ranks), "--hosts", str(args.hosts)]
    adaptive = _child([*shape, "--child", "plan"])
    print(f"load {os.getloadavg()[0]:.1f}: overview scan, adaptive bins: {json.dumps(adaptive)}")
    if args.anchor:
        fixed = _child([*shape, "--child", "plan", "--bins", "4096"])
        print(f"load {os.getloadavg()[0]:.1f}: overview scan, 4,096 bins (before): {json.dumps(fixed)}")
        print(
            f"adaptive vs fixed: plan CPU {adaptive['plan_cpu_s'] / fixed['plan_cpu_s']:.2f}x, "
            f"added RSS {adaptive['rss_added_mb']:.0f} MB vs {fixed['rss_added_mb']:.0f} MB"
        )
    print(f"load {os.getloadavg()[0]:.1f}: rank views: {json.dumps(_child([*shape, '--child', 'views']))}")
    app = _child([*shape, "--child", "app"])
    print(
        f"fleet_tui: {args.ranks} ranks on {args.hosts} hosts, {adaptive['tracks']:.0f} tracks, first screen "
        f"{app['first_screen_s']:.2f} s, all tracks sorted {app['tracks_ready_s']:.2f} s, timeline rows "
        f"{app['timeline_rows']:.0f}, hosts expanded {app['hosts_expanded']:.0f} (load {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
