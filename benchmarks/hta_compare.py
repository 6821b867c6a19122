"""Compare ktrace's interval analyses with HTA's on the real Kineto traces, side by side with the % difference.

Runs HTA (PyPI `HolisticTraceAnalysis`, installed on first use into a throwaway venv, /tmp/htavenv)
in a subprocess on every Kineto trace under ../shared/traces, and ktrace on the same files through
ktrace.open(). Printed per trace: temporal breakdown, kernel-type breakdown, comm/compute overlap,
launch delay (HTA's clipped end->start), queue length and idle-time breakdown, each with
HTA | ktrace | diff %, and the time each tool took (ratio, same run).

To compare like with like, ktrace's trace is cut the way HTA cuts it at load
(`include_last_profiler_step=False`): with >= 2 ProfilerStep ranges, GPU records are kept only if
their launch call started before the last ProfilerStep began. Remaining differences come from
definitions, listed in benchmarks/RESULTS.md.

Usage: python benchmarks/hta_compare.py [--traces DIR] [--only NAME]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any

import polars as pl

REPO = Path(__file__).resolve().parents[1]
HTA_VENV = Path("/tmp/htavenv")
TRACES = {
    "alexnet": "hta-a100-alexnet-tiny/benchmark_result_2869224_1695835535_trace.json.gz",
    "nccl": "hta-a100-nccl-rank0of2/nccl_data.json.gz",
    "resnet50": "kineto-resnet50-v100-pt1.9/worker0.1623143089861.pt.trace.json.gz",
    "tracelens": "tracelens-h100-hf-inference/google_owlv2-large-patch14-ensemble__1016001.json.gz",
    "dlrm": "param-dlrm-v100-8rank",
}

HTA_SCRIPT = r"""
import json, sys, time, os, logging, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)
path = sys.argv[1]
from hta.trace_analysis import TraceAnalysis
t0 = time.perf_counter()
if os.path.isdir(path):
    ta = TraceAnalysis(trace_dir=path)
else:
    ta = TraceAnalysis(trace_files={0: path}, trace_dir=os.path.dirname(path))
out = {"load_s": time.perf_counter() - t0, "times": {}}
ranks = sorted(ta.t.traces)
def timed(name, fn):
    t = time.perf_counter()
    try:
        r = fn()
    except Exception as e:
        r = None
        out.setdefault("errors", {})[name] = repr(e)[:200]
    out["times"][name] = time.perf_counter() - t
    return r
tb = timed("temporal", lambda: ta.get_temporal_breakdown(visualize=False))
out["temporal"] = None if tb is None else tb.to_dict(orient="records")
kb = timed("kernel_breakdown", lambda: ta.get_gpu_kernel_breakdown(visualize=False)[0])
out["kernel_types"] = None if kb is None else kb.to_dict(orient="records")
ov = timed("comm_comp", lambda: ta.get_comm_comp_overlap(visualize=False))
out["overlap"] = None if ov is None else ov.to_dict(orient="records")
ls = timed("launch_stats", lambda: ta.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False))
out["launch"] = None if ls is None else {str(r): {"count": int(len(d)), "mean": float(d.launch_delay.mean()),
    "median": float(d.launch_delay.median()), "cpu_mean": float(d.cpu_duration.mean())} for r, d in ls.items()}
ql = timed("queue_length", lambda: ta.get_queue_length_summary(ranks=ranks))
if ql is not None:
    ql.columns = ["_".join(str(x) for x in c if x) for c in ql.columns]
    out["queue"] = ql.reset_index().to_dict(orient="records")
ib = timed("idle_breakdown", lambda: ta.get_idle_time_breakdown(ranks=[ranks[0]], visualize=False)[0])
out["idle"] = None if ib is None else ib.to_dict(orient="records")
print("HTA_JSON" + json.dumps(out, default=float))
"""


def ensure_hta() -> Path:
    """The venv python with HTA installed (created on first use)."""
    py = HTA_VENV / "bin" / "python"
    probe = subprocess.run([str(py), "-c", "import hta"], capture_output=True) if py.exists() else None
    if probe is None or probe.returncode != 0:
        print(f"installing HolisticTraceAnalysis into {HTA_VENV} ...", file=sys.stderr)
        venv.create(HTA_VENV, with_pip=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "HolisticTraceAnalysis"], check=True)
    return py


def run_hta(py: Path, path: Path) -> dict[str, Any]:
    """Run HTA's analyses on one trace (file or folder of ranks) in the HTA venv."""
    t0 = time.perf_counter()
    proc = subprocess.run([str(py), "-c", HTA_SCRIPT, str(path)], capture_output=True, text=True)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("HTA_JSON")), None)
    if line is None:
        return {"error": (proc.stderr or proc.stdout)[-800:], "wall_s": time.perf_counter() - t0}
    out: dict[str, Any] = json.loads(line[len("HTA_JSON") :])
    out["wall_s"] = time.perf_counter() - t0
    return out


def hta_window(trace: Any) -> Any:
    """Cut a ktrace Trace the way HTA's loader does (include_last_profiler_step=False)."""
    from ktrace.analysis.latency import launches

    steps = trace.ranges.filter(pl.col("name").cast(pl.String).str.contains("ProfilerStep"))
    if steps["name"].n_unique() < 2:
        return trace
    last = steps.group_by(pl.col("node").cast(pl.String), "rank").agg(last_ns=pl.col("start_ns").max())
    ok = (
        launches(trace)
        .with_columns(pl.col("node").cast(pl.String))
        .join(last, on=["node", "rank"])
        .filter(pl.col("api_start_ns") < pl.col("last_ns"))
    )
    keys = ok.select("node", "rank", "correlation_id")

    def cut(frame: pl.DataFrame) -> pl.DataFrame:
        tagged = frame.with_row_index("_r").with_columns(pl.col("node").cast(pl.String).alias("_n"))
        kept = tagged.join(keys.rename({"node": "_n"}), on=["_n", "rank", "correlation_id"], how="semi")
        return frame[kept["_r"].to_list()] if kept.height else frame.clear()

    return dataclasses.replace(trace, kernels=cut(trace.kernels), memory=cut(trace.memory))


def hta_rounding(trace: Any) -> Any:
    """HTA's loader rounds float µs timestamps: start up to the next µs, end down (trace_parser.py,
    round_down_time_stamps). Applied to every span table so ktrace sees HTA's numbers."""

    def r(frame: pl.DataFrame) -> pl.DataFrame:
        s = (pl.col("start_ns") + 999) // 1000 * 1000
        e = pl.col("end_ns") // 1000 * 1000
        return frame.with_columns(start_ns=s, end_ns=pl.max_horizontal(e, s))

    return dataclasses.replace(trace, **{n: r(getattr(trace, n)) for n in ("kernels", "memory", "syncs", "api")})


def warm_up() -> None:
    """Compile (or load from cache) the numba kernels before timing."""
    from ktrace.analysis import breakdown, idle, latency, overlap
    from ktrace.testing import SyntheticConfig, generate

    t = generate(SyntheticConfig(steps=2, kernels_per_step=20, ranks=2))
    breakdown.temporal_breakdown(t), overlap.queue_depth_stats(t), idle.idle_breakdown(t), latency.launch_latency(t)


def pct(a: float | None, b: float | None) -> str:
    """(ktrace - HTA) / HTA in %."""
    if a is None or b is None:
        return "n/a"
    if a == 0:
        return "0.00" if b == 0 else "inf"
    return f"{100.0 * (b - a) / abs(a):+.2f}"


def fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:,.2f}"


def row(label: str, hta: float | None, kt: float | None) -> str:
    return f"  {label:<44} {fmt(hta):>16} {fmt(kt):>16} {pct(hta, kt):>9}"


def compare(name: str, path: Path, py: Path, args_rounding: bool) -> list[str]:
    """All comparison lines for one trace."""
    import ktrace
    from ktrace.analysis import breakdown, idle, latency, overlap

    lines = [f"== {name}: {path.name}" + ("  (ktrace on HTA-rounded µs timestamps)" if args_rounding else "")]
    hta = run_hta(py, path)
    if "error" in hta:
        return lines + ["  HTA failed: " + hta["error"].replace("\n", " | ")[-400:]]
    t0 = time.perf_counter()
    full = ktrace.open(path)
    load_s = time.perf_counter() - t0
    t = hta_window(full)
    if args_rounding:
        t = hta_rounding(t)
    kt_times: dict[str, float] = {}

    def timed(key: str, fn: Any) -> Any:
        s = time.perf_counter()
        r = fn()
        kt_times[key] = time.perf_counter() - s
        return r

    tb = timed("temporal", lambda: breakdown.temporal_breakdown(t)).sort("rank")
    kb = timed("kernel_breakdown", lambda: breakdown.kernel_type_breakdown(t))
    ov = timed("comm_comp", lambda: overlap.comm_compute_overlap(t)).sort("rank")
    lat = timed("launch_stats", lambda: latency.launch_latency(t))
    qs = timed("queue_length", lambda: overlap.queue_depth_stats(t, until="start"))
    ib = timed("idle_breakdown", lambda: idle.idle_breakdown(t))
    lines.append(f"  {'metric':<44} {'HTA':>16} {'ktrace':>16} {'diff %':>9}")
    lines += _temporal(hta, tb) + _ktypes(hta, kb) + _overlap(hta, ov) + _launch(hta, lat) + _queue(hta, qs)
    lines += _idle(hta, ib)
    for key, hs in hta["times"].items():
        ks = kt_times.get(key)
        lines.append(f"  time {key:<39} {hs:>15.3f}s {ks or 0:>15.4f}s  x{hs / max(ks or 1e-9, 1e-9):,.0f}")
    lines.append(
        f"  time load (HTA parse vs ktrace.open)          {hta['load_s']:>15.3f}s {load_s:>15.4f}s"
        f"  x{hta['load_s'] / max(load_s, 1e-9):,.1f}"
    )
    return lines


def _temporal(hta: dict[str, Any], tb: pl.DataFrame) -> list[str]:
    out = []
    for i, h in enumerate(hta.get("temporal") or []):
        k = tb.row(i, named=True) if i < tb.height else None
        for hk, kk in (
            ("idle_time(us)", "idle_ns"),
            ("compute_time(us)", "compute_ns"),
            ("non_compute_time(us)", "non_compute_ns"),
            ("kernel_time(us)", "span_ns"),
        ):
            out.append(row(f"temporal r{h['rank']} {hk}", h[hk], None if k is None else k[kk] / 1000))
    return out


def _ktypes(hta: dict[str, Any], kb: pl.DataFrame) -> list[str]:
    kt = dict(kb.group_by("kernel_type").agg(pl.col("time_ns").sum() / 1000).rows())
    return [
        row(f"kernel type {h['kernel_type'][:32]} (us)", h["sum"], kt.get(h["kernel_type"]))
        for h in hta.get("kernel_types") or []
    ]


def _overlap(hta: dict[str, Any], ov: pl.DataFrame) -> list[str]:
    out = []
    for h in hta.get("overlap") or []:
        k = ov.filter(pl.col("rank") == h["rank"])
        out.append(
            row(
                f"comm/comp overlap r{h['rank']} (%)",
                h["comp_comm_overlap_pctg"],
                k["overlap_pct"][0] if k.height else None,
            )
        )
    return out


def _launch(hta: dict[str, Any], lat: pl.DataFrame) -> list[str]:
    apis = ["cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"]
    out = []
    for r, h in (hta.get("launch") or {}).items():
        k = lat.filter((pl.col("rank") == int(r)) & pl.col("api_name").is_in(apis))
        d = k["queue_delay_ns"].clip(lower_bound=0) / 1000
        out.append(row(f"launch r{r} count", h["count"], k.height))
        out.append(row(f"launch r{r} delay mean, clipped at 0 (us)", h["mean"], d.mean() if k.height else None))
        out.append(row(f"launch r{r} delay median (us)", h["median"], d.median() if k.height else None))
        out.append(
            row(
                f"launch r{r} cpu duration mean (us)",
                h["cpu_mean"],
                k["api_duration_ns"].mean() / 1000 if k.height else None,
            )
        )  # type: ignore[operator]
    return out


def _queue(hta: dict[str, Any], qs: pl.DataFrame) -> list[str]:
    out = []
    for h in hta.get("queue") or []:
        k = qs.filter((pl.col("rank") == h["rank"]) & (pl.col("stream") == h["stream"]))
        kr = k.row(0, named=True) if k.height else None
        out.append(
            row(
                f"queue r{h['rank']} s{h['stream']} changes",
                h["queue_length_count"],
                None if kr is None else kr["changes"],
            )
        )
        out.append(
            row(
                f"queue r{h['rank']} s{h['stream']} mean",
                h["queue_length_mean"],
                None if kr is None else kr["sample_mean_depth"],
            )
        )
        out.append(
            row(
                f"queue r{h['rank']} s{h['stream']} max", h["queue_length_max"], None if kr is None else kr["max_depth"]
            )
        )
    return out


def _idle(hta: dict[str, Any], ib: pl.DataFrame) -> list[str]:
    out = []
    merged = (
        ib.with_columns(pl.col("idle_category").replace({"sync_wait": "other"}))
        .group_by("rank", "stream", "idle_category")
        .agg(pl.col("idle_ns").sum() / 1000)
    )
    for h in hta.get("idle") or []:
        k = merged.filter(
            (pl.col("rank") == h["rank"])
            & (pl.col("stream") == h["stream"])
            & (pl.col("idle_category") == h["idle_category"])
        )
        out.append(
            row(
                f"idle r{h['rank']} s{h['stream']} {h['idle_category']} (us)",
                h["idle_time"],
                k["idle_ns"][0] if k.height else 0.0,
            )
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=Path, default=REPO.parent / "shared" / "traces")
    ap.add_argument("--only", choices=sorted(TRACES))
    ap.add_argument(
        "--exact",
        action="store_true",
        help="keep ktrace's ns timestamps (default: round like HTA's loader to isolate definitions)",
    )
    args = ap.parse_args()
    py = ensure_hta()
    warm_up()
    for name, rel in TRACES.items():
        if args.only and name != args.only:
            continue
        path = args.traces / rel
        if not path.exists():
            print(f"== {name}: missing {path}")
            continue
        print("\n".join(compare(name, path, py, not args.exact)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
