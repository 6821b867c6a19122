"""Labels every view puts on the analysis' numbers: one wording per kind of row or count, shared by all views."""

from __future__ import annotations

from ktrace.analysis.memory_timeline import MemoryTimeline
from ktrace.analysis.units import format_bytes
from ktrace.model.schema import NODE_RANK
from ktrace.model.units import format_ns


def step_source_note(source: str) -> str:
    """What every view appends to a step count: " (inferred from a periodic kernel)" for inferred steps, else ""."""
    return " (inferred from a periodic kernel)" if source == "periodic" else ""


def memory_op_label(op: object, copy_kind: object, host_memory: object) -> str:
    """The one name of a memory-operation row in every view: op, copy kind and host memory, e.g.
    "memcpy HtoD pageable", "memset - -" (memory_distribution writes "-" for what does not apply)."""
    return f"{op} {copy_kind} {host_memory}"


def peak_line(timeline: MemoryTimeline, start_ns: int) -> str:
    """One line for people (terminal summary, report, TUI): the highest peak over the devices, when (after
    `start_ns`, the trace's start), who allocated it, and the never-freed and churn figures of that device."""
    row = timeline.per_device.sort("peak_allocated_bytes", descending=True, nulls_last=True).row(0, named=True)
    rank = "" if row["rank"] == NODE_RANK else f"/rank{row['rank']}"
    what = "used (NVML)" if timeline.source == "nvml" else "allocated"
    if timeline.running_sum:
        what += " since the trace start"
    reserved = row["peak_reserved_bytes"]
    line = (
        f"GPU memory peak {format_bytes(row['peak_allocated_bytes'])} {what}"
        f"{'' if reserved is None else f' (reserved {format_bytes(reserved)})'} on {row['node']}{rank}/GPU{row['device']}"
        f" at {format_ns(row['peak_ns'] - start_ns)}"
    )
    if timeline.source == "nvml":
        return line
    line += f", allocated by {row['peak_operator'] or 'no operator'}"
    line += f" in {row['peak_module']}" if row["peak_module"] else ""
    line += f"; {row['allocations']:,} allocations"
    if row["never_freed"] is not None:
        line += f", {row['never_freed']:,} never freed ({format_bytes(row['never_freed_bytes'])})"
    rate = row["allocations_per_s"]
    return line + ("" if rate is None else f", {rate:,.0f}/s")
