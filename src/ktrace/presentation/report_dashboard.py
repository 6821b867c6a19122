"""The report's job summary, framework metrics and dashboard panels (SageMaker Profiler's): plots of active time,
utilization, top kernels, step times, precision, activity, memory operations and annotations, each beside the table
of its numbers. A Figure's data is plain lists; `shown_in` names the table that holds the same numbers (text views
show that table instead of the plot)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ktrace.analysis.dashboard import Dashboard
from ktrace.analysis.summary import ABSENT_DATA, Summary
from ktrace.presentation import summary_gpu as gpu
from ktrace.presentation.labels import memory_op_label, step_source_note
from ktrace.presentation.notes import grouped_notes
from ktrace.presentation.page import Column, Figure, Section, Table, Text, columns
from ktrace.presentation.report_rules import fmt_time_range
from ktrace.presentation.summary_gpu import phase_rows
from ktrace.presentation.summary_tables import frame_rows, json_float

MAX_IDLE_ROWS = 60
MAX_SERIES = 32
"""Utilization curves drawn in one plot."""
LATENCY_INTRO = (
    "start→start = run start − launch-call start; end→start = run start − launch-call end (HTA's launch delay, "
    "nsys queue time)."
)
IDLE_INTRO = (
    "The gaps of each device's busy union (every stream merged), so the causes add up to the device's idle time; "
    "a gap takes the cause of the record that ends it."
)
_PERCENTILES = (50, 95, 99)
LATENCY_COLUMNS = (
    Column("kind", unit="text"),
    Column("count"),
    *(Column(f"launch_latency_ns_p{q}", f"start→start p{q}", "ns") for q in _PERCENTILES),
    *(Column(f"queue_delay_ns_p{q}", f"end→start p{q}", "ns") for q in _PERCENTILES),
)
STEP_COLUMNS = columns("node", "rank", "steps", "min_ns", "mean_ns", "p50_ns", "p95_ns", "max_ns")
IDLE_COLUMNS = (
    *columns("node", "rank", "device"),
    Column("idle_category", "cause", "text"),
    *columns("idle_ns", "gaps"),
)


def job_section(summary: Summary) -> Section:
    """Source, ranks, kernels, span and steps; the initialization / training loop / finalization split; the notes
    (repeats grouped, what the trace lacks last)."""
    phases = summary.phases
    facts = (
        {"item": "source", "value": summary.source},
        {"item": "ranks", "value": f"{summary.ranks:,}"},
        {"item": "kernels", "value": f"{summary.kernels:,}"},
        {"item": "trace span", "value": fmt_time_range(phases.start_ns, phases.end_ns)},
        {
            "item": "steps per rank" if summary.ranks > 1 else "steps",
            "value": f"{phases.steps}{step_source_note(phases.step_source)}",
        },
    )
    phase_columns = (Column("phase"), Column("time_ns", "time"), Column("share", "% of job"))
    blocks = (
        Table("job_facts", "", (Column("item", unit="text"), Column("value", unit="text")), facts),
        Table("job_phases", "", phase_columns, tuple(phase_rows(phases))),
    )
    return Section("job", "Training job summary", blocks, grouped_notes(summary.notes, ABSENT_DATA))


def framework_section(summary: Summary) -> Section:
    """Step time per rank, launch→run latency, GPU idle time by cause."""
    blocks: list[Table | Text] = []
    steps = frame_rows(summary.step_stats)
    if steps:
        blocks.append(Table("step_time", "Step time per rank", STEP_COLUMNS, tuple(steps)))
    latency = frame_rows(summary.latency)
    if latency:
        blocks += [Text(LATENCY_INTRO), Table("launch_latency", "Launch→run latency", LATENCY_COLUMNS, tuple(latency))]
    idle = [r for r in frame_rows(summary.idle) if r["idle_ns"]]
    if idle:
        rest = max(0, len(idle) - MAX_IDLE_ROWS)
        table = Table(
            "gpu_idle_by_cause",
            "GPU idle time by cause, per device",
            IDLE_COLUMNS,
            tuple(idle[:MAX_IDLE_ROWS]),
            rest=rest,
        )
        blocks += [Text(IDLE_INTRO), table]
    return Section("framework", "Framework metrics", tuple(blocks))


def _pie(key: str, title: str, labels: list[Any], values: list[Any], unit: str, shown_in: str) -> Figure:
    return Figure(key, title, "pie", {"labels": labels, "values": values, "unit": unit, "shown_in": shown_in})


def summary_tables(summary: Summary) -> dict[str, Table]:
    """The summary page's tables the dashboard shows beside its plots (active time, top kernels, precision,
    activity, memory operations, annotations), by key: one definition of their columns for every view."""
    annotations = gpu.annotations_section(summary)
    sections = (
        *gpu.utilization_sections(summary),
        *gpu.kernel_sections(summary),
        *gpu.kernel_mix_sections(summary),
        *((annotations,) if annotations is not None else ()),
    )
    return {b.key: b for s in sections for b in s.blocks if isinstance(b, Table)}


def _titled(tables: Mapping[str, Table], key: str, title: str) -> list[Table]:
    """The summary's table of that key under the report's heading ([] when it has no rows)."""
    table = tables[key]
    return [replace(table, title=title)] if table.rows else []


def _active(summary: Summary, tables: Mapping[str, Table]) -> list[Figure | Table]:
    """One pie per resource (GPU, CPU): the mean active share over its devices; the table of every device."""
    active = frame_rows(summary.active)
    out: list[Figure | Table] = []
    for resource in ("gpu", "cpu"):
        shares = [r for r in active if r["resource"] == resource]
        if not shares:
            continue
        share = sum(r["active_share"] for r in shares) / len(shares)
        method = "/".join(sorted({r["method"] for r in shares}))
        title = f"{resource.upper()} active time ({method}, mean of {len(shares)})"
        values = [round(share, 6), round(1 - share, 6)]
        out.append(_pie(f"active_{resource}", title, ["active", "idle"], values, "share", "active_time"))
    return out + _titled(tables, "active_time", "Active time")


def _utilization(model: Dashboard) -> list[Figure]:
    """The utilization curves; past MAX_SERIES the least busy ones (by mean), in their order, and the title says
    how many of how many (the first 32 of 64 ranks' curves were drawn, the rest dropped unsaid)."""
    if not model.utilization:
        return []
    shown = model.utilization
    title = f"Utilization over time (timeline bins of {model.utilization_bin_ms:g} ms; counters as sampled"
    if len(shown) > MAX_SERIES:
        means = [sum(s.y_pct) / len(s.y_pct) if s.y_pct else 0.0 for s in shown]
        keep = set(sorted(range(len(shown)), key=lambda i: (means[i], i))[:MAX_SERIES])
        shown = tuple(s for i, s in enumerate(shown) if i in keep)
        title += f"; the {MAX_SERIES} least busy of {len(model.utilization)} curves"
    title += ")"
    series = [{"label": s.label, "x": list(s.x_s), "y": list(s.y_pct)} for s in shown]
    return [Figure("utilization", title, "lines", {"series": series, "y_title": "%", "y_range": [0, 105]})]


def _top_kernels(summary: Summary, tables: Mapping[str, Table]) -> list[Figure | Table]:
    out: list[Figure | Table] = []
    for key, title, frame, value, unit in (
        ("top_kernels_by_time", "Top kernels by total time", summary.top_by_time, "total_ns", "ms"),
        ("top_kernels_by_count", "Top kernels by launch count", summary.top_by_count, "count", "launches"),
    ):
        found = frame_rows(frame)
        if not found:
            continue
        values = [r[value] / 1e6 if unit == "ms" else float(r[value]) for r in found]
        data = {"names": [r["name"] for r in found], "values": values, "unit": unit, "shown_in": key}
        out += [Figure(key, title, "hbar", data), *_titled(tables, key, title)]
    return out


def _step_histogram(model: Dashboard) -> list[Figure]:
    hist = model.step_histogram
    if not hist.counts:
        return []
    data = {"edges": list(hist.edges_ms), "counts": list(hist.counts), "unit": "ms", "x_title": "step time (ms)"}
    return [Figure("step_histogram", "Step time distribution", "histogram", data)]


def _distributions(summary: Summary, tables: Mapping[str, Table]) -> list[Figure | Table]:
    """Kernel precision and GPU activity (excluded rows left out of the pie), memory operations: a pie of the
    non-empty slices and the table of every row."""
    out: list[Figure | Table] = []
    shown = [r for r in frame_rows(summary.precision) if r["time_ns"] and not r["excluded"]]
    if shown:
        title = "Kernel precision (share of compute time)"
        labels, values = [r["precision"] for r in shown], [r["time_ns"] for r in shown]
        out.append(_pie("precision", title, labels, values, "ns", "precision"))
    out += _titled(tables, "precision", "Kernel precision")
    shown = [r for r in frame_rows(summary.activity) if r["time_ns"]]
    if shown:
        labels, values = [r["activity"] for r in shown], [r["time_ns"] for r in shown]
        out.append(_pie("activity", "GPU activity", labels, values, "ns", "activity"))
    out += _titled(tables, "activity", "GPU activity")
    shown = [r for r in frame_rows(summary.memory) if r["time_ns"]]
    if shown:
        labels = [memory_op_label(r["op"], r["copy_kind"], r["host_memory"]) for r in shown]
        values = [r["time_ns"] for r in shown]
        out.append(_pie("memory_operations", "GPU memory operations", labels, values, "ns", "memory_operations"))
    return out + _titled(tables, "memory_operations", "Memory operations")


def _ms(ns: float) -> float:
    rounded = json_float(ns)
    return 0.0 if rounded is None else rounded / 1e6


def _annotations(summary: Summary, tables: Mapping[str, Table]) -> list[Figure | Table]:
    out: list[Figure | Table] = []
    for i, h in enumerate(summary.annotations):
        key, title = f"annotation_{i}", f"Annotation durations: {h.pattern}"
        if h.count:
            data = {
                "edges": [_ms(e) for e in h.edges_ns],
                "counts": list(h.counts),
                "unit": "ms",
                "x_title": "duration (ms)",
                "shown_in": key,
            }
            out.append(Figure(key, title, "histogram", data))
        out += _titled(tables, key, title)
    return out


def dashboard_section(model: Dashboard) -> Section:
    """The SageMaker Profiler dashboard panels, each plot beside the table of its numbers."""
    summary = model.summary
    tables = summary_tables(summary)
    blocks = (
        *_active(summary, tables),
        *_utilization(model),
        *_top_kernels(summary, tables),
        *_step_histogram(model),
        *_distributions(summary, tables),
        *_annotations(summary, tables),
    )
    return Section("dashboard", "Dashboard", blocks)
