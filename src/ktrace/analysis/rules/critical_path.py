"""Timeline rule on the critical path (issue #15): a step whose critical path is mostly CPU work.

When most of the longest chain of dependent work is CPU operators and runtime calls, faster kernels do not
shorten the step: the GPU waits for the host. The share is the critical path's "cpu" category
(analysis.critical_path, HTA's "cpu_bound") over its length. The threshold is ktrace's own choice (HTA
reports the breakdown without a verdict): at 70 % even an infinitely fast GPU would save under a third.
Rank by rank the rule is exact: it reads the job's critical path the reduced Summary holds.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from ktrace.analysis.critical_path import CriticalPath, critical_path
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rules.base import Evidence, Outcome, Param, ParamValue, Rule, Skip
from ktrace.model.trace import Trace


def _cpu_bound(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    return cpu_bound_outcome(critical_path(trace, index=index), p)


def cpu_bound_outcome(cp: CriticalPath | None, p: Mapping[str, ParamValue]) -> Outcome:
    """The rule's verdict on a critical path: the trace's, or the job's the rank-by-rank Summary holds (the same
    CriticalPath, fleet.critical_path_map), which makes the rule exact there."""
    if cp is None:
        raise Skip("no CPU operators or runtime calls to build a dependency graph from")
    if cp.sync_records == 0:
        raise Skip(
            "no CUDA synchronization records (Kineto writes them from PyTorch 2.1 on): the critical path cannot "
            "pass through the GPU, so its CPU share says nothing"
        )
    if cp.length_ns < float(p["min_length_ms"]) * 1e6:
        raise Skip(f"the critical path of {cp.label} is shorter than {p['min_length_ms']} ms")
    cpu_ns = int(cp.composition.filter(pl.col("category") == "cpu")["ns"].item())
    share = 100.0 * cpu_ns / cp.length_ns if cp.length_ns else 0.0
    fired = share > float(p["threshold_pct"])
    top = cp.items.filter(pl.col("kind").is_in(["operator", "runtime"])).head(int(p["max_evidence"]))
    evidence = tuple(
        Evidence(kind=r["kind"], node=cp.node, rank=cp.rank, name=r["name"], value=r["ns"] / 1e6)
        for r in top.iter_rows(named=True)
    )
    message = (
        f"{share:.1f} % of the critical path of {cp.label} ({cpu_ns / 1e6:.2f} of {cp.length_ns / 1e6:.2f} ms) "
        "is CPU operators and runtime calls: faster kernels would barely shorten it (evidence: ms on the path)"
    )
    details = {"cpu_share_pct": round(share, 4), "length_ms": round(cp.length_ns / 1e6, 6), "window": cp.label}
    return Outcome(1, int(fired), fired, message, evidence, details=details)


CPU_BOUND_CRITICAL_PATH = Rule(
    name="CPUBoundCriticalPath",
    family="timeline",
    description="Most of the step's critical path (HTA's critical path analysis) is CPU work, not GPU work.",
    recommendation="Shorten the host side: capture the step in a CUDA graph or torch.compile it, move data "
    "preparation off the training thread, remove Python overhead in the operators listed; the what-if table "
    "of the critical path shows what faster kernels would gain.",
    params=(
        Param("threshold_pct", 70.0, "fire when the CPU part of the critical path exceeds this % of its length"),
        Param("min_length_ms", 1.0, "skip when the critical path is shorter than this many ms"),
        Param("max_evidence", 10, "how many CPU operators / runtime calls on the path to keep as evidence"),
    ),
    check=_cpu_bound,
    source="HTA critical_path_analysis (cpu_bound share); threshold: ktrace",
    fleet_mode="exact",
)

RULES: tuple[Rule, ...] = (CPU_BOUND_CRITICAL_PATH,)
