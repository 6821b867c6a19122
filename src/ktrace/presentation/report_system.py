"""The report's "System usage statistics": the sampled counters where the trace has them, and what its events show
on any trace (analysis.system_usage): GPU busy % per device, CPU-side operator and launch load per thread, allocated
GPU memory, as p50/p95/p99 over time bins; and, plainly, the counters only `ktrace run` records."""

from __future__ import annotations

from typing import Any

from ktrace.analysis.summary import Summary
from ktrace.analysis.system_usage import SystemUsage
from ktrace.model.units import format_ns
from ktrace.presentation.page import Column, Section, Table, Text, columns
from ktrace.presentation.report_memory import device_label
from ktrace.presentation.summary_tables import frame_rows

TITLE = "System usage statistics"
MAX_THREAD_ROWS = 16
"""CPU threads listed (the busiest); the JSON report has them all."""
COUNTER_STATS = ("min", "p50", "p95", "p99", "max")
"""The counter statistics the report shows."""
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

COUNTER_COLUMNS = (
    *columns("node", "metric", "instance", "samples"),
    *(Column(k, unit="number") for k in COUNTER_STATS),
)
GPU_COLUMNS = (
    Column("device", unit="text"),
    Column("bins"),
    *columns("min_pct", "p50_pct", "p95_pct", "p99_pct", "max_pct", "mean_pct"),
)
THREAD_COLUMNS = (
    Column("thread", unit="text"),
    Column("operators"),
    Column("operator_ns", "operator time"),
    Column("launches"),
    Column("launch_ns", "launch time"),
    Column("busy_pct", "busy % of span"),
    *columns("p50_pct", "p95_pct", "p99_pct", "max_pct"),
)
MEMORY_COLUMNS = (
    Column("device", unit="text"),
    Column("bins", "samples"),
    *(Column(f"{k}_bytes", k) for k in ("p50", "p95", "p99", "peak")),
)


def thread_label(row: dict[str, Any]) -> str:
    """node/rankR and the thread's name (pid/tid when it has none)."""
    name = row["thread"] or f"pid {row['pid']} tid {row['tid']}"
    return f"{row['node']}/rank{row['rank']} {name}"


def _thread_rows(usage: SystemUsage) -> list[dict[str, Any]]:
    return [
        {**r, "thread": thread_label(r), "busy_pct": 100.0 * r["busy_ns"] / r["span_ns"] if r["span_ns"] else None}
        for r in frame_rows(usage.cpu_threads.head(MAX_THREAD_ROWS))
    ]


def event_tables(usage: SystemUsage) -> list[Table]:
    """The event-derived tables that have rows: GPU busy per device, the busiest CPU threads, allocated memory."""
    more = max(0, usage.cpu_threads.height - MAX_THREAD_ROWS)
    threads = "CPU threads: operators and launch calls" + (f" (the busiest {MAX_THREAD_ROWS})" if more else "")
    found = [
        Table(
            "gpu_busy_bins",
            "GPU busy per device",
            GPU_COLUMNS,
            tuple({**r, "device": device_label(r)} for r in frame_rows(usage.gpu_busy)),
        ),
        Table("cpu_threads", threads, THREAD_COLUMNS, tuple(_thread_rows(usage)), rest=more, rest_what="threads"),
        Table(
            "gpu_memory_bins",
            "GPU memory allocated (allocator events)",
            MEMORY_COLUMNS,
            tuple({**r, "device": device_label(r)} for r in frame_rows(usage.gpu_memory)),
        ),
    ]
    return [t for t in found if t.rows]


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


def lead(summary: Summary, usage: SystemUsage) -> str:
    """The section's first sentence: what the statistics below are read from."""
    sampled = bool(summary.counters.height)
    if not (usage.gpu_busy.height or usage.cpu_threads.height or usage.gpu_memory.height):
        if sampled:
            return "Sampled counters; the trace has no GPU, operator or launch events to read usage from."
        return "The trace has no counter samples and no GPU, operator or launch events to read usage from."
    return (
        f"{'Sampled counters first, then w' if sampled else 'W'}hat the trace's events show: percentiles over time "
        f"bins of {format_ns(usage.bin_ns)} (the utilization plot's bins); GPU busy is the union of its "
        "kernels, copies and memsets, a CPU thread's load the union of its operators and the calls that launched "
        "GPU work."
    )


def system_section(summary: Summary, usage: SystemUsage) -> Section:
    """The lead, the sampled counters, the event tables and the counters the trace lacks."""
    blocks: list[Table | Text] = [Text(lead(summary, usage))]
    counters = frame_rows(summary.counters)
    if counters:
        blocks.append(Table("sampled_counters", "Sampled counters", COUNTER_COLUMNS, tuple(counters)))
    blocks += event_tables(usage)
    missing = missing_counters_line(usage, summary.source)
    if missing:
        blocks.append(Text(missing, "note"))
    return Section("system", TITLE, tuple(blocks))
