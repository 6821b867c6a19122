"""The report's memory timeline section (HTML with a plot, and Markdown): the same numbers as the summary JSON's
`memory_timeline` and the terminal summary's line, read from the typed Summary."""

from __future__ import annotations

from typing import Any

from ktrace.analysis.memory_timeline import MemoryTimeline, peak_line, plot_series
from ktrace.analysis.summary import Summary
from ktrace.analysis.units import format_bytes
from ktrace.model.schema import NODE_RANK
from ktrace.report import plots
from ktrace.report.format import fmt_num
from ktrace.report.rows import rows
from ktrace.report.sections import Section, esc, table

TITLE = "GPU memory timeline"
MAX_PLOT_POINTS = 2000
"""Points per device line in the plot (plot_series keeps the highest of each bin)."""
MAX_GROWTH_ROWS = 50
DEVICE_HEADERS = (
    "device",
    "peak allocated",
    "peak at",
    "allocated by",
    "reserved at peak",
    "at end",
    "allocations",
    "frees",
    "allocs/s",
    "freed (cycled)",
    "never freed",
    "never freed bytes",
)
OPERATOR_HEADERS = ("operator", "allocations", "allocated", "never freed", "never freed bytes")
GROWTH_HEADERS = ("device", "step", "allocated at step end", "growth")


def device_label(row: dict[str, Any]) -> str:
    """node/rankR/GPUd (node/GPUd for NVML's node-wide samples)."""
    rank = "" if row["rank"] == NODE_RANK else f"/rank{row['rank']}"
    return f"{row['node']}{rank}/GPU{row['device']}"


def _sec(ns: int, start_ns: int) -> str:
    return f"{(ns - start_ns) / 1e9:.3f} s"


def device_cells(m: MemoryTimeline, start_ns: int) -> list[list[object]]:
    """One row per device (DEVICE_HEADERS)."""
    return [
        [
            device_label(r),
            format_bytes(r["peak_allocated_bytes"]),
            _sec(r["peak_ns"], start_ns),
            (r["peak_operator"] or "-") + (f" in {r['peak_module']}" if r["peak_module"] else ""),
            format_bytes(r["peak_reserved_bytes"]),
            format_bytes(r["end_allocated_bytes"]),
            fmt_num(r["allocations"]),
            fmt_num(r["frees"]),
            fmt_num(r["allocations_per_s"]),
            format_bytes(r["freed_bytes"]),
            fmt_num(r["never_freed"]),
            format_bytes(r["never_freed_bytes"]),
        ]
        for r in rows(m.per_device)
    ]


def operator_cells(m: MemoryTimeline) -> list[list[object]]:
    """The top allocating operators (OPERATOR_HEADERS)."""
    return [
        [
            r["operator"] or "(no operator)",
            fmt_num(r["allocations"]),
            format_bytes(r["allocated_bytes"]),
            fmt_num(r["never_freed"]),
            format_bytes(r["never_freed_bytes"]),
        ]
        for r in rows(m.by_operator)
    ]


def growth_cells(m: MemoryTimeline) -> list[list[object]]:
    """Allocated bytes at each step's end (GROWTH_HEADERS), the first MAX_GROWTH_ROWS rows."""
    return [
        [device_label(r), r["step"], format_bytes(r["allocated_bytes"]), format_bytes(r["growth_bytes"])]
        for r in rows(m.growth.head(MAX_GROWTH_ROWS))
    ]


SOURCE_WORDS = {
    "allocator": "the PyTorch allocator's events (tensor bytes)",
    "nvml": "NVML counters (device memory used, caches and the CUDA context included)",
}
"""What each MemoryTimeline.source measures, in the words the report and the diff use."""


def lead(summary: Summary) -> str:
    """The section's first line: the peak line, or why there is no timeline."""
    m = summary.memory_timeline
    if m is None:
        return (
            "The trace has no GPU memory data: Kineto traces carry it when recorded with profile_memory=True, "
            "nsys exports with CUDA memory usage tracing, ktrace captures as NVML counters."
        )
    return f"{peak_line(m, summary.phases.start_ns)}. Source: {SOURCE_WORDS.get(m.source, m.source)}."


def memory_figure(m: MemoryTimeline, start_ns: int) -> plots.Figure:
    """Allocated (and reserved, where known) bytes over time, one line each per device, in GB."""
    thin = plot_series(m, MAX_PLOT_POINTS)
    lines: list[tuple[str, list[float], list[float | None]]] = []
    for key, part in thin.group_by("node", "rank", "device", maintain_order=True):
        name = device_label(dict(zip(("node", "rank", "device"), key, strict=True)))
        x = [(t - start_ns) / 1e9 for t in part["ts_ns"].to_list()]
        used = "used" if m.source == "nvml" else "allocated"
        allocated: list[float | None] = [b / 1e9 for b in part["allocated_bytes"].to_list()]
        lines.append((f"{name} {used}", x, allocated))
        if part["reserved_bytes"].null_count() < part.height:
            reserved = [None if b is None else b / 1e9 for b in part["reserved_bytes"].to_list()]
            lines.append((f"{name} reserved", x, reserved))
    return plots.xy_lines("GPU memory over time", lines, "GB")


def memory_section(summary: Summary) -> Section:
    """The HTML section: the peak line, the plot, the per-device, top-operator and step-growth tables."""
    sec = Section("memory", TITLE)
    sec.body.append(f"<p>{esc(lead(summary))}</p>")
    m = summary.memory_timeline
    if m is None:
        return sec
    start = summary.phases.start_ns
    sec.figure(memory_figure(m, start))
    sec.body.append(table(DEVICE_HEADERS, device_cells(m, start)))
    if m.by_operator.height:
        sec.body.append("<h3>Top allocating operators</h3>" + table(OPERATOR_HEADERS, operator_cells(m)))
    if m.growth.height > 1:
        sec.body.append("<h3>Allocated at the end of each step</h3>" + table(GROWTH_HEADERS, growth_cells(m)))
    return sec
