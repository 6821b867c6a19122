"""The summary's sections about time on the devices and hosts: job phases, active time, GPU busy and idle, top
kernels, launch latency, step times, precision, activity, memory operations, overlap, counters, annotations.

One builder per section, each reading the Summary's typed fields as the JSON has them (summary_tables.frame_rows).
"""

from __future__ import annotations

from typing import Any

from ktrace.analysis.phases import JobPhases
from ktrace.analysis.summary import Summary
from ktrace.presentation.cells import Unit
from ktrace.presentation.labels import peak_line
from ktrace.presentation.page import Section, Table, Text
from ktrace.presentation.summary_tables import capped, frame_rows, frame_table, json_float, rows_table


def phase_rows(phases: JobPhases) -> list[dict[str, Any]]:
    """phase, time_ns and share (of the job, 0-1) of initialization, the training loop and finalization."""
    return [
        {"phase": name, "time_ns": ns, "share": (json_float(pct) or 0.0) / 100.0}
        for name, ns, pct in (
            ("initialization", phases.init_ns, phases.init_pct),
            ("training loop", phases.training_ns, phases.training_pct),
            ("finalization", phases.finalize_ns, phases.finalize_pct),
        )
    ]


def phases_section(summary: Summary) -> Section:
    """Initialization, training loop and finalization with their share of the job."""
    return Section(
        "phases", "Job phases", (rows_table("job_phases", "job phases", phase_rows(summary.phases), bar="share"),)
    )


def utilization_sections(summary: Summary) -> tuple[Section, ...]:
    """Active time (timelines and counters), GPU busy / idle per device, GPU idle by cause."""
    active = frame_table(
        "active_time",
        "active time (timeline = busy/span; counter = share of samples > 0 %; mean util = mean sample, lower than "
        "the active share when the device is partly busy)",
        summary.active,
        ["resource", "method", "node", "rank", "instance", "active_share", "mean_util"],
        bar="active_share",
    )
    busy = frame_table(
        "gpu_busy",
        "GPU busy / idle per device",
        summary.busy,
        ["node", "rank", "device", "busy_ns", "idle_ns", "span_ns", "busy_pct", "records"],
    )
    idle = frame_table(
        "gpu_idle_by_cause",
        "GPU idle by cause (per device: each gap takes the cause of the record that ends it)",
        summary.idle,
        bar="idle_share",
        units={"idle_category": "text"},
    )
    return (
        Section("active", "Active time", (capped(active, "active_share", descending=False, first="least active"),)),
        Section("busy", "GPU busy / idle", (capped(busy, "busy_pct", descending=False, first="least busy"),)),
        Section("idle", "GPU idle by cause", (capped(idle, "idle_ns", descending=True, first="longest idle"),)),
    )


KERNEL_COLUMNS = ("name", "count", "total_ns", "mean_ns", "p50_ns", "p95_ns", "max_ns", "time_share")


def kernel_sections(summary: Summary) -> tuple[Section, ...]:
    """Top kernels by GPU time and by launch count (the rest as one "other" row)."""
    by_time = frame_table(
        "top_kernels_by_time", "top kernels by GPU time", summary.top_by_time, KERNEL_COLUMNS, bar="time_share"
    )
    by_count = frame_table(
        "top_kernels_by_count",
        "top kernels by launch count",
        summary.top_by_count,
        ["name", "count", "count_share", "total_ns", "mean_ns"],
        bar="count_share",
    )
    return (
        Section("kernels", "Top kernels by GPU time", (by_time,)),
        Section("kernel_counts", "Top kernels by launch count", (by_count,)),
    )


_LATENCY_METRICS = (
    ("launch_latency_ns", "API start → run"),
    ("queue_delay_ns", "API end → run"),
    ("api_duration_ns", "API call"),
)


def latency_rows(wide: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """latency_stats' wide rows (one per kind) as one row per (kind, definition)."""
    out = []
    for row in wide:
        for prefix, label in _LATENCY_METRICS:
            stats = {f"{k[len(prefix) + 1 :]}_ns": v for k, v in row.items() if k.startswith(prefix + "_")}
            out.append({"kind": row["kind"], "definition": label, "count": row["count"], **stats})
    return out


def latency_section(summary: Summary) -> Section:
    """Launch-to-run latency by kind, both definitions, and the API call's time."""
    table = rows_table(
        "launch_latency",
        "launch-to-run latency (start->start = launch latency; end->start = queue delay)",
        latency_rows(frame_rows(summary.latency)),
    )
    return Section("latency", "Launch-to-run latency", (table,))


def steps_section(summary: Summary) -> Section:
    """Step-time statistics per rank."""
    return Section(
        "steps",
        "Step time per rank",
        (
            capped(
                frame_table("step_time", "step time per rank", summary.step_stats, units={"source": "text"}),
                "mean_ns",
                descending=True,
                first="slowest",
            ),
        ),
    )


def kernel_mix_sections(summary: Summary) -> tuple[Section, ...]:
    """Kernel precision, GPU activity by kind, memory operations (and the GPU memory peak), overlap."""
    precision = frame_table(
        "precision",
        "kernel precision (communication/memory shown apart)",
        summary.precision,
        ["precision", "excluded", "kernels", "time_ns", "time_share", "count_share"],
        bar="time_share",
    )
    activity = frame_table("activity", "GPU activity (sum of durations)", summary.activity, bar="share")
    memory: tuple[Table | Text, ...] = (
        frame_table("memory_operations", "memory operations", summary.memory, bar="time_share"),
    )
    if summary.memory_timeline is not None:
        memory += (Text(peak_line(summary.memory_timeline, summary.phases.start_ns)),)
    overlap = capped(
        frame_table("overlap", "communication / compute overlap", summary.overlap),
        "comm_only_ns",
        descending=True,
        first="most communication not hidden",
    )
    return (
        Section("precision", "Kernel precision", (precision,)),
        Section("activity", "GPU activity", (activity,)),
        Section("memory", "Memory operations", memory),
        Section("overlap", "Communication / compute overlap", (overlap,)),
    )


COUNTER_STATS = ("min", "p50", "p95", "max", "mean")


def counter_rows(stats: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Counter statistics, one metric per row with its core/device index (cpu.core.util[3]): (the counters of
    quantities, the counters of bytes), so that each column has one unit."""
    plain: list[dict[str, Any]] = []
    in_bytes: list[dict[str, Any]] = []
    for r in stats:
        instance = r["instance"]
        metric = f"{r['metric']}[{instance}]" if isinstance(instance, int) and instance >= 0 else r["metric"]
        row = {"node": r["node"], "metric": metric, "samples": r["samples"], **{k: r[k] for k in COUNTER_STATS}}
        (in_bytes if str(r["metric"]).endswith("_bytes") else plain).append(row)
    return plain, in_bytes


def counters_section(summary: Summary) -> Section:
    """CPU and GPU counters' statistics (`ktrace run` samples them); byte counters in a table of their own."""
    plain, in_bytes = counter_rows(frame_rows(summary.counters))
    keys = ("node", "metric", "samples", *COUNTER_STATS)
    bytes_units: dict[str, Unit] = {k: "bytes" for k in COUNTER_STATS}
    blocks: list[Table] = []
    if plain or not in_bytes:
        blocks.append(rows_table("counters", "counters", plain, keys if plain else None))
    if in_bytes:
        blocks.append(rows_table("counters_bytes", "counters (bytes)", in_bytes, keys, units=bytes_units))
    return Section("counters", "Counters", tuple(blocks))


def annotations_section(summary: Summary) -> Section | None:
    """Per pattern of `--annotation`, the matched ranges' duration statistics by name; None without patterns."""
    if not summary.annotations:
        return None
    tables = tuple(
        frame_table(f"annotation_{i}", f"annotation {h.pattern!r}: {h.count} ranges", h.stats)
        for i, h in enumerate(summary.annotations)
    )
    return Section("annotations", "Annotations", tables)
