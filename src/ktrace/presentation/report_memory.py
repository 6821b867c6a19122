"""The report's GPU memory timeline section: the peak line, the plot of allocated (and reserved) bytes over time,
the per-device, top-operator and step-growth tables; the same numbers as the summary JSON's `memory_timeline`."""

from __future__ import annotations

from typing import Any

from ktrace.analysis.memory_timeline import MemoryTimeline, plot_series
from ktrace.analysis.summary import Summary
from ktrace.model.schema import NODE_RANK
from ktrace.presentation.labels import peak_line
from ktrace.presentation.page import Column, Figure, Section, Table, Text
from ktrace.presentation.summary_tables import frame_rows

TITLE = "GPU memory timeline"
MAX_PLOT_POINTS = 2000
"""Points per device line in the plot (plot_series keeps the highest of each bin)."""
MAX_GROWTH_ROWS = 50
DEVICE_COLUMNS = (
    Column("device", unit="text"),
    Column("peak_allocated_bytes", "peak allocated"),
    Column("peak_s", "peak at", "text"),
    Column("allocated_by", "allocated by", "text"),
    Column("peak_reserved_bytes", "reserved at peak"),
    Column("end_allocated_bytes", "at end"),
    Column("allocations"),
    Column("frees"),
    Column("allocations_per_s", "allocs/s"),
    Column("freed_bytes", "freed (cycled)"),
    Column("never_freed", "never freed"),
    Column("never_freed_bytes", "never freed bytes"),
)
OPERATOR_COLUMNS = (
    Column("operator", unit="text"),
    Column("allocations"),
    Column("allocated_bytes", "allocated"),
    Column("never_freed", "never freed"),
    Column("never_freed_bytes", "never freed bytes"),
)
GROWTH_COLUMNS = (
    Column("device", unit="text"),
    Column("step", unit="id"),
    Column("allocated_bytes", "allocated at step end"),
    Column("growth_bytes", "growth"),
)
SOURCE_WORDS = {
    "allocator": "the PyTorch allocator's events (tensor bytes)",
    "nvml": "NVML counters (device memory used, caches and the CUDA context included)",
}
"""What each MemoryTimeline.source measures, in the words the report and the diff use."""


def device_label(row: dict[str, Any]) -> str:
    """node/rankR/GPUd (node/GPUd for NVML's node-wide samples)."""
    rank = "" if row["rank"] == NODE_RANK else f"/rank{row['rank']}"
    return f"{row['node']}{rank}/GPU{row['device']}"


def device_rows(m: MemoryTimeline, start_ns: int) -> list[dict[str, Any]]:
    """One row per device (DEVICE_COLUMNS)."""
    return [
        {
            **r,
            "device": device_label(r),
            "peak_s": f"{(r['peak_ns'] - start_ns) / 1e9:.3f} s",
            "allocated_by": (r["peak_operator"] or "-") + (f" in {r['peak_module']}" if r["peak_module"] else ""),
        }
        for r in frame_rows(m.per_device)
    ]


def operator_rows(m: MemoryTimeline) -> list[dict[str, Any]]:
    """The top allocating operators (OPERATOR_COLUMNS)."""
    return [{**r, "operator": r["operator"] or "(no operator)"} for r in frame_rows(m.by_operator)]


def growth_rows(m: MemoryTimeline) -> list[dict[str, Any]]:
    """Allocated bytes at each step's end (GROWTH_COLUMNS), the first MAX_GROWTH_ROWS rows."""
    return [{**r, "device": device_label(r)} for r in frame_rows(m.growth.head(MAX_GROWTH_ROWS))]


def lead(summary: Summary) -> str:
    """The section's first line: the peak line, or why there is no timeline."""
    m = summary.memory_timeline
    if m is None:
        return (
            "The trace has no GPU memory data: Kineto traces carry it when recorded with profile_memory=True, "
            "nsys exports with CUDA memory usage tracing, ktrace captures as NVML counters."
        )
    return f"{peak_line(m, summary.phases.start_ns)}. Source: {SOURCE_WORDS.get(m.source, m.source)}."


def memory_figure(m: MemoryTimeline, start_ns: int) -> Figure:
    """Allocated (and reserved, where known) GB over time, one line each per device."""
    thin = plot_series(m, MAX_PLOT_POINTS)
    series: list[dict[str, Any]] = []
    used = "used" if m.source == "nvml" else "allocated"
    for key, part in thin.group_by("node", "rank", "device", maintain_order=True):
        name = device_label(dict(zip(("node", "rank", "device"), key, strict=True)))
        x = [(t - start_ns) / 1e9 for t in part["ts_ns"].to_list()]
        series.append({"label": f"{name} {used}", "x": x, "y": [b / 1e9 for b in part["allocated_bytes"].to_list()]})
        if part["reserved_bytes"].null_count() < part.height:
            reserved = [None if b is None else b / 1e9 for b in part["reserved_bytes"].to_list()]
            series.append({"label": f"{name} reserved", "x": x, "y": reserved})
    return Figure("memory", "GPU memory over time", "lines", {"series": series, "y_title": "GB"})


def memory_tables(m: MemoryTimeline, start_ns: int) -> list[Table]:
    """The per-device table, then the top allocating operators and the growth per step where there are any."""
    out = [Table("memory_devices", "", DEVICE_COLUMNS, tuple(device_rows(m, start_ns)))]
    if m.by_operator.height:
        out.append(Table("memory_operators", "Top allocating operators", OPERATOR_COLUMNS, tuple(operator_rows(m))))
    if m.growth.height > 1:
        rest = max(0, m.growth.height - MAX_GROWTH_ROWS)
        growth = tuple(growth_rows(m))
        out.append(Table("memory_growth", "Allocated at the end of each step", GROWTH_COLUMNS, growth, rest=rest))
    return out


def memory_section(summary: Summary) -> Section:
    """The peak line, the plot and the tables (the lead alone without a memory timeline)."""
    m = summary.memory_timeline
    if m is None:
        return Section("memory", TITLE, (Text(lead(summary)),))
    start = summary.phases.start_ns
    return Section("memory", TITLE, (Text(lead(summary)), memory_figure(m, start), *memory_tables(m, start)))
