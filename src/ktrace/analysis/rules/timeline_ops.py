"""Timeline rules about framework operators: an operator whose kernels are all tiny and launch-bound.

LaunchBoundKernels says that many kernels are shorter than their launch calls; this rule says which operators
launch them (operators.operator_of_records: the innermost cpu_op on the launching thread), so the fix has an
address: fuse that operator's kernels, or move it into a CUDA graph. Launches are counted as the launch rules
count them (rules.launches.kernel_calls: a CUDA graph launch is one launch with the GPU time of all its
kernels). Thresholds:

- tiny: a launch's GPU time below `tiny_us` (10 µs: a few µs is the CPU cost of one cudaLaunchKernel, so such
  a kernel cannot keep the GPU busy between launches; HTA's short-kernel view uses the launch call's own
  duration, which the second condition adds);
- launch-bound: its GPU time is also below the launch call's CPU duration (LaunchBoundKernels' test);
- an operator is reported when at least `bound_pct` % (default 90: all but a stray few) of its at least `min_launches`
  kernel launches are both.

A trace without framework operators (ktrace's own captures, Nsight Systems exports) has its CPU NVTX ranges judged
instead, as the operator view shows them (analysis/range_operators.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.op_attribution import has_operators
from ktrace.analysis.operators import operator_of_records
from ktrace.analysis.range_operators import range_view
from ktrace.analysis.rules.base import Outcome, Param, ParamValue, Rule, Skip
from ktrace.analysis.rules.frames import evidence_rows, pct
from ktrace.analysis.rules.launches import kernel_calls
from ktrace.model.trace import Trace

API_DURATION = pl.col("api_end_ns") - pl.col("api_start_ns")


def _per_operator(trace: Trace, index: TraceIndex, tiny_ns: float) -> pl.DataFrame:
    """Per operator name: kernel launches, how many were tiny and launch-bound, their GPU and launch time."""
    calls = kernel_calls(index)
    op = operator_of_records(trace, index=index)[calls["row"].to_numpy()]  # kernels lead the record order
    mine = np.flatnonzero(op >= 0)
    names = trace.ops["name"].cast(pl.String).gather(pl.Series(op[mine]))
    frame = calls[mine].with_columns(name=names)
    bound = (pl.col("gpu_ns") < tiny_ns) & (pl.col("gpu_ns") < API_DURATION)
    return frame.group_by("name").agg(
        launches=pl.len().cast(pl.Int64),
        bound=bound.sum().cast(pl.Int64),
        gpu_ns=pl.col("gpu_ns").sum(),
        api_ns=API_DURATION.sum(),
        start_ns=pl.col("start_ns").min(),
        end_ns=pl.col("end_ns").max(),
    )


def _operators(trace: Trace, index: TraceIndex) -> tuple[Trace, TraceIndex, str]:
    """The trace and index whose ops rows are the operators judged, and what they are: the framework operators, or
    where there are none (ktrace's captures, nsys exports) the CPU NVTX ranges (range_operators.range_view)."""
    if has_operators(trace.ops):
        return trace, index, "operators"
    view = range_view(trace, index=index)
    if view is None:
        raise Skip(
            "no framework operators in the trace (Kineto cpu_op; `ktrace import --no-ops` leaves them out) and, "
            "outside Kineto traces, no CPU NVTX ranges to stand for them"
        )
    return view[0], view[1], "NVTX ranges"


def _launch_bound_ops(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    trace, index, what = _operators(trace, index)
    if not kernel_calls(index).height:
        raise Skip("no kernel in the trace could be matched to its launch call")
    per = _per_operator(trace, index, float(p["tiny_us"]) * 1000)
    judged = per.filter(pl.col("launches") >= int(p["min_launches"]))
    hit = judged.filter(100 * pl.col("bound") >= float(p["bound_pct"]) * pl.col("launches"))
    hit = hit.sort(["api_ns", "name"], descending=[True, False])
    launches, gpu_ns, api_ns = (int(hit[c].sum()) for c in ("launches", "gpu_ns", "api_ns"))
    total_api = int(per["api_ns"].sum())
    message = (
        f"{hit.height:,} of {judged.height:,} {what} with >= {int(p['min_launches'])} kernel launches launch "
        f"only tiny kernels (< {float(p['tiny_us']):g} µs, shorter than their launch call): {launches:,} launches, "
        f"{gpu_ns / 1e6:.2f} ms of GPU work behind {api_ns / 1e6:.2f} ms of launch calls "
        f"({pct(api_ns, total_api):.1f} % of the {what}' launch time)"
    )
    evidence = hit.head(int(p["max_evidence"])).select(
        "name", "start_ns", "end_ns", pl.col("launches").cast(pl.Float64).alias("value")
    )
    return Outcome(
        judged.height,
        hit.height,
        hit.height > 0,
        message,
        tuple(evidence_rows(evidence, "operator")),
        details={"launches": launches, "gpu_ms": round(gpu_ns / 1e6, 6), "api_ms": round(api_ns / 1e6, 6)},
    )


LAUNCH_BOUND_OPERATORS = Rule(
    name="LaunchBoundOperators",
    family="timeline",
    description="Operators whose kernels are all tiny and shorter than the CPU launch calls that issued them.",
    recommendation="Fuse the operator's kernels (torch.compile), capture the code around it in a CUDA graph "
    "(torch.compile(mode='reduce-overhead'), torch.cuda.graphs), batch the small tensors it works on "
    "(foreach ops, one larger tensor instead of many small ones). Evidence value: the operator's kernel launches.",
    params=(
        Param("tiny_us", 10.0, "a kernel launch is tiny when its GPU time is below this (µs)"),
        Param("min_launches", 20, "judge only operators with at least this many kernel launches"),
        Param("bound_pct", 90.0, "report an operator when at least this % of its launches are tiny and launch-bound"),
        Param("max_evidence", 15, "how many operators to keep as evidence (most launch time first)"),
    ),
    check=_launch_bound_ops,
    source="ktrace (issue #15), after HTA get_cuda_kernel_launch_stats (short kernels) per operator",
    fleet_mode="per rank",
)

RULES: tuple[Rule, ...] = (LAUNCH_BOUND_OPERATORS,)
