"""Rules on the memory timeline (analysis.memory_timeline): allocated GPU memory growing step over step
(MemoryGrowth, timeline family), and the allocator's memory series that GPUMemoryIncrease reads when the trace has
no GPU memory counters."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.memory_timeline import memory_timeline
from ktrace.analysis.phases import step_spans
from ktrace.analysis.rules.base import Evidence, Outcome, Param, ParamValue, Rule, Skip
from ktrace.analysis.rules.sagemaker_counters import _per_gpu
from ktrace.analysis.rules.samples import Series
from ktrace.analysis.units import format_bytes
from ktrace.model.schema import NODE_RANK
from ktrace.model.trace import Trace

_DEVICE = ["node", "rank", "device"]
MIB = 1 << 20


def _label(node: str, rank: int, device: int) -> str:
    return f"{node}/GPU{device}" if rank == NODE_RANK else f"{node}/rank{rank}/GPU{device}"


def allocator_memory_series(index: TraceIndex, samples: int) -> list[Series]:
    """Per-GPU memory held by the caching allocator, in % of the device's memory (the devices table's
    memory_bytes), from the allocator's events: the reserved bytes where the source records them, else the
    high-water mark of allocated bytes (what a caching allocator keeps reserved), which is what NVML's memory used
    follows. Read at `samples` evenly spaced times from the end of the rank's first training step (allocations
    of the first step are warm-up, and a running sum starts at 0 there) or the first event, to the last event.
    Empty when the trace has no allocator events or no memory sizes."""
    m = memory_timeline(index.trace, index=index)
    if m is None or m.source != "allocator":
        return []
    sizes = {
        (str(n), int(d)): int(b)
        for n, d, b in index.trace.devices.filter(pl.col("memory_bytes") > 0)
        .select(pl.col("node").cast(pl.String), "device", "memory_bytes")
        .iter_rows()
    }
    first_step_end = {
        (str(n), int(r)): int(e)
        for n, r, e in step_spans(index.trace, index=index)
        .group_by("node", "rank")
        .agg(pl.col("end_ns").min())
        .iter_rows()
    }
    out = []
    for (node, rank, device), part in m.series.group_by(_DEVICE, maintain_order=True):
        size = sizes.get((str(node), int(device)))
        if not size:
            continue
        ts = part["ts_ns"].to_numpy()
        reserved = part["reserved_bytes"]
        held = (
            reserved.to_numpy()
            if reserved.null_count() == 0
            else np.maximum.accumulate(part["allocated_bytes"].to_numpy())
        )
        start = min(max(int(ts[0]), first_step_end.get((str(node), int(rank)), int(ts[0]))), int(ts[-1]))
        grid = np.linspace(start, ts[-1], max(2, samples)).astype(np.int64)
        at = np.maximum(np.searchsorted(ts, grid, side="right") - 1, 0)
        value = 100.0 * held[at].astype(np.float64) / size
        label = _label(str(node), int(rank), int(device))
        out.append(Series(label, str(node), int(device), int(rank), grid, value, "allocator"))
    return out


def _device_growth(g: pl.DataFrame, label: str, p: Mapping[str, ParamValue]) -> Outcome | None:
    g = g.filter(pl.col("step") >= int(p["skip_steps"])).drop_nulls("allocated_bytes").sort("step")
    if g.height < max(2, int(p["min_steps"])):
        return None
    v = g["allocated_bytes"].to_numpy()
    rising = int((np.diff(v) > 0).sum())
    total = int(v[-1] - v[0])
    share = rising / (v.size - 1)
    fired = total > float(p["growth_mib"]) * MIB and share >= float(p["rising_share"])
    first, last = g.row(0, named=True), g.row(-1, named=True)
    message = (
        f"{label}: allocated GPU memory at the end of steps {first['step']}..{last['step']} went from "
        f"{format_bytes(v[0])} to {format_bytes(v[-1])} ({'+' if total >= 0 else ''}{format_bytes(total)}), "
        f"rising in {rising} of {v.size - 1} steps (thresholds {p['growth_mib']} MiB, {p['rising_share']} of steps)"
    )
    evidence = tuple(
        Evidence(
            kind="step",
            start_ns=int(a["end_ns"]),
            end_ns=int(b["end_ns"]),
            node=str(a["node"]),
            rank=None if a["rank"] == NODE_RANK else int(a["rank"]),
            device=int(a["device"]),
            name=f"step {a['step']} -> {b['step']}",
            value=round((b["allocated_bytes"] - a["allocated_bytes"]) / MIB, 3),
        )
        for a, b in zip(g.head(-1).iter_rows(named=True), g.tail(-1).iter_rows(named=True), strict=True)
        if b["allocated_bytes"] > a["allocated_bytes"]
    )[: int(p["max_evidence"])]
    return Outcome(
        v.size - 1,
        rising,
        fired,
        message,
        evidence if fired else (),
        details={"label": label, "growth_bytes": total, "rising_steps": rising, "steps": int(v.size)},
    )


def _memory_growth(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    m = memory_timeline(trace, index=index)
    if m is None:
        raise Skip("the trace has no GPU memory data (allocator events or NVML memory counters)")
    if not m.growth.height:
        raise Skip("the trace has no training steps")
    outcomes = [
        o
        for (node, rank, device), g in m.growth.group_by(_DEVICE, maintain_order=True)
        if (o := _device_growth(g, _label(str(node), int(rank), int(device)), p)) is not None
    ]
    if not outcomes:
        raise Skip(
            f"no GPU has allocated memory at the end of {p['min_steps']} steps after the first {p['skip_steps']}"
        )
    return _per_gpu(outcomes)


MEMORY_GROWTH = Rule(
    name="MemoryGrowth",
    family="timeline",
    description="Allocated GPU memory at the end of each training step keeps growing step over step (a leak: "
    "tensors kept alive across steps).",
    recommendation="Find what outlives a step: losses or outputs accumulated without .item()/.detach(), lists or "
    "caches that grow, autograd graphs kept by stored tensors. The memory timeline's never-freed allocations and "
    "their operators point at the allocation site.",
    params=(
        Param(
            "growth_mib",
            64.0,
            "fire when allocated memory grew by more than this many MiB from the first to the last step evaluated",
        ),  # fmt: skip
        Param("rising_share", 0.5, "... and it rose from one step's end to the next in at least this share of steps"),
        Param("min_steps", 3, "steps needed (after the skipped ones) to evaluate a GPU"),
        Param(
            "skip_steps",
            1,
            "first steps left out (warm-up: optimizer state, caches and workspaces are "
            "allocated once in the first steps)",
        ),  # fmt: skip
        Param("max_evidence", 10, "how many step-to-step increases to keep as evidence"),
    ),
    check=_memory_growth,
    source="ktrace (issue #15: memory growing step over step)",
    fleet_mode="per rank",
)

RULES: tuple[Rule, ...] = (MEMORY_GROWTH,)
