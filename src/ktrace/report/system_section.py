"""The report's "System usage statistics" (HTML and Markdown): the sampled counters where the trace has them, and
what its events show on any trace (analysis.system_usage): GPU busy % per device, CPU-side operator and launch load
per thread, allocated GPU memory, as p50/p95/p99 over time bins; and, plainly, the counters only `ktrace run`
records."""

from __future__ import annotations

from typing import Any

from ktrace.analysis.system_usage import SystemUsage
from ktrace.analysis.units import format_bytes
from ktrace.report.content import Report
from ktrace.report.format import fmt_ns, fmt_num
from ktrace.report.memory import device_label
from ktrace.report.rows import COUNTER_STATS, rows
from ktrace.report.sections import Section, esc, table

TITLE = "System usage statistics"
MAX_THREAD_ROWS = 16
"""CPU threads listed (the busiest); the JSON report has them all."""
COUNTER_HEADERS = ("node", "metric", "instance", "samples", *COUNTER_STATS)
GPU_HEADERS = ("device", "bins", "min %", "p50 %", "p95 %", "p99 %", "max %", "mean %")
THREAD_HEADERS = (
    "thread",
    "operators",
    "operator time",
    "launches",
    "launch time",
    "busy % of span",
    "p50 %",
    "p95 %",
    "p99 %",
    "max %",
)
MEMORY_HEADERS = ("device", "samples", "p50", "p95", "p99", "peak")
COUNTER_GROUPS = (
    ("CPU utilization", ("cpu.util", "cpu.core.util", "cpu.iowait_pct")),
    ("host memory", ("mem.used_bytes", "mem.util")),
    ("disk and network I/O", ("disk.read_bytes", "disk.write_bytes", "net.rx_bytes", "net.tx_bytes")),
    (
        "GPU utilization, memory, power and clocks (NVML)",
        ("gpu.util", "gpu.mem_util", "gpu.mem_used_bytes", "gpu.power_w", "gpu.sm_clock_mhz"),
    ),
    ("CPU hardware counters", ("cpu.cycles", "cpu.instructions", "cpu.itlb_misses")),
)
"""Words for the counter metrics of schema.COUNTER_METRICS, in its order."""


def counter_cells(report: Report) -> list[list[object]]:
    """The sampled counters' statistics (COUNTER_HEADERS), one row per node, metric and instance."""
    return [
        [r["node"], r["metric"], r["instance"], r["samples"], *(fmt_num(r[k]) for k in COUNTER_STATS)]
        for r in rows(report.dashboard.summary.counters)
    ]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def gpu_cells(usage: SystemUsage) -> list[list[object]]:
    """GPU busy % per device over the bins (GPU_HEADERS)."""
    stats = ("min_pct", "p50_pct", "p95_pct", "p99_pct", "max_pct", "mean_pct")
    return [[device_label(r), r["bins"], *(_pct(r[k]) for k in stats)] for r in rows(usage.gpu_busy)]


def thread_label(row: dict[str, Any]) -> str:
    """node/rankR and the thread's name (pid/tid when it has none)."""
    name = row["thread"] or f"pid {row['pid']} tid {row['tid']}"
    return f"{row['node']}/rank{row['rank']} {name}"


def thread_cells(usage: SystemUsage) -> list[list[object]]:
    """The busiest MAX_THREAD_ROWS threads (THREAD_HEADERS)."""
    return [
        [
            thread_label(r),
            fmt_num(r["operators"]),
            fmt_ns(r["operator_ns"]),
            fmt_num(r["launches"]),
            fmt_ns(r["launch_ns"]),
            _pct(100.0 * r["busy_ns"] / r["span_ns"] if r["span_ns"] else None),
            *(_pct(r[k]) for k in ("p50_pct", "p95_pct", "p99_pct", "max_pct")),
        ]
        for r in rows(usage.cpu_threads.head(MAX_THREAD_ROWS))
    ]


def memory_cells(usage: SystemUsage) -> list[list[object]]:
    """Allocated GPU memory per device at the bin boundaries (MEMORY_HEADERS)."""
    return [
        [
            device_label(r),
            r["bins"],
            *(format_bytes(r[k]) for k in ("p50_bytes", "p95_bytes", "p99_bytes", "peak_bytes")),
        ]
        for r in rows(usage.gpu_memory)
    ]


def missing_counters_line(usage: SystemUsage, source: str) -> str:
    """Which counters the trace lacks, in words: only `ktrace run` records them ("" when none is missing)."""
    missing = set(usage.counters_missing)
    parts = [
        f"{words} ({', '.join(names)})"
        for words, metrics in COUNTER_GROUPS
        if (names := [m for m in metrics if m in missing])
    ]
    if not parts:
        return ""
    if source == "ktrace":
        return "Counters this capture did not record (the notes of ktrace info say why): " + "; ".join(parts) + "."
    return "Counters only ktrace run records, not in this trace: " + "; ".join(parts) + "."


def lead(report: Report) -> str:
    """The section's first sentence: what the statistics below are read from."""
    sampled = bool(report.dashboard.summary.counters.height)
    usage = report.system_usage
    if not (usage.gpu_busy.height or usage.cpu_threads.height or usage.gpu_memory.height):
        if sampled:
            return "Sampled counters; the trace has no GPU, operator or launch events to read usage from."
        return "The trace has no counter samples and no GPU, operator or launch events to read usage from."
    return (
        f"{'Sampled counters first, then w' if sampled else 'W'}hat the trace's events show: percentiles over time "
        f"bins of {fmt_ns(usage.bin_ns)} (the utilization plot's bins); GPU busy is the union of its "
        "kernels, copies and memsets, a CPU thread's load the union of its operators and the calls that launched "
        "GPU work."
    )


def system_section(report: Report) -> Section:
    """The HTML section."""
    usage = report.system_usage
    sec = Section("system", TITLE)
    sec.body.append(f"<p>{esc(lead(report))}</p>")
    counters = counter_cells(report)
    if counters:
        sec.body.append("<h3>Sampled counters</h3>" + table(COUNTER_HEADERS, counters))
    for title, headers, cells in event_tables(usage):
        sec.body.append(f"<h3>{esc(title)}</h3>" + table(headers, cells))
    missing = missing_counters_line(usage, report.dashboard.summary.source)
    if missing:
        sec.body.append(f'<p class="note">{esc(missing)}</p>')
    return sec


def event_tables(usage: SystemUsage) -> list[tuple[str, tuple[str, ...], list[list[object]]]]:
    """(title, headers, cells) of the event-derived tables that have rows."""
    more = usage.cpu_threads.height - MAX_THREAD_ROWS
    threads = "CPU threads: operators and launch calls" + (
        f" (the busiest {MAX_THREAD_ROWS}; {more} more)" if more > 0 else ""
    )
    found = [
        ("GPU busy per device", GPU_HEADERS, gpu_cells(usage)),
        (threads, THREAD_HEADERS, thread_cells(usage)),
        ("GPU memory allocated (allocator events)", MEMORY_HEADERS, memory_cells(usage)),
    ]
    return [t for t in found if t[2]]
