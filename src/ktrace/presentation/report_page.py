"""What `ktrace report` shows, as one Page: the HTML and Markdown reports lay it out (report.html, report.markdown),
so both show the same sections in the same order with the same numbers; the JSON report prints its document.

Sections in the order of SageMaker Debugger's report plus the Profiler dashboard panels: job summary, system usage,
framework metrics, rules summary, dashboard, ranks (2+ ranks), critical path, operators, how close to the hardware
(roofline, collectives, kernel efficiency), GPU memory timeline, then one section per rule (rules that found
something first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ktrace.presentation.identity import identity_line
from ktrace.presentation.page import Block, Figure, Page, Section, Text
from ktrace.presentation.report_dashboard import dashboard_section, framework_section, job_section
from ktrace.presentation.report_hardware import hardware_sections
from ktrace.presentation.report_memory import memory_section
from ktrace.presentation.report_model import Report
from ktrace.presentation.report_ranks import ranks_section
from ktrace.presentation.report_rules import rule_section, rules_summary_section
from ktrace.presentation.report_system import system_section
from ktrace.presentation.summary_critical_path import (
    CROSSING_NOTE,
    ITEM_ROWS,
    MODEL_NOTE,
    composition_rows,
    critical_path_tables,
    headline,
    what_if_notes,
)
from ktrace.presentation.summary_operators import operator_report_tables
from ktrace.presentation.summary_python import python_report_section
from ktrace.presentation.summary_tables import frame_rows
from ktrace.presentation.verdicts import triggered_first

NO_GRAPH = "No CPU operators or runtime calls to build a dependency graph from."


def report_facts(report: Report) -> tuple[tuple[str, str], ...]:
    """The header: the trace's files (or store), hosts, ranks and GPUs, then the report format."""
    facts = identity_line(report.identity)
    ranks = report.dashboard.summary.ranks
    at = next((i for i, (k, _) in enumerate(facts) if k == "GPU"), len(facts))
    facts.insert(at, ("ranks", f"{ranks:,}"))
    return (*facts, ("report", f"format v{report.version}, made by ktrace"))


def critical_path_section(report: Report) -> Section:
    """The median step's critical path: headline, composition plot, tables, what-if notes."""
    cp = report.dashboard.summary.critical_path
    if cp is None:
        return Section("critical-path", "Critical path", (Text(NO_GRAPH),))
    parts = [r for r in composition_rows(cp) if r["time_ns"]]
    data = {
        "names": [r["kind"] for r in parts],
        "values": [r["time_ns"] / 1e6 for r in parts],
        "unit": "ms",
        "shown_in": "critical_path_composition",
    }
    tables = critical_path_tables(cp, ITEM_ROWS)
    crossing = tuple(Text(CROSSING_NOTE) for t in tables if t.key == "critical_path_crossings")
    blocks: tuple[Block, ...] = (
        Text(headline(cp)),
        Text(MODEL_NOTE, "dim"),
        Figure("critical_path_composition", "Critical path composition", "hbar", data),
        *tables,
        *crossing,
        *(Text(n, "note") for n in what_if_notes(cp)),
    )
    return Section("critical-path", "Critical path", blocks)


def operators_section(report: Report) -> Section:
    """Operators, the kernels they launched, modules and frequent kernel sequences; bar plots of the top ones."""
    summary = report.dashboard.summary
    figures: list[Figure] = []
    ops = summary.operators
    if ops is not None:
        for key, title, frame, column in (
            ("operators_by_gpu", "Top operators by GPU time", ops.top_by_gpu_time, "gpu_ns"),
            ("operators_by_cpu_self", "Top operators by CPU self time", ops.top_by_cpu_self_time, "cpu_self_ns"),
        ):
            top = frame_rows(frame)
            if top:
                data: dict[str, Any] = {
                    "names": [r["name"] for r in top],
                    "values": [r[column] / 1e6 for r in top],
                    "unit": "ms",
                    "shown_in": key,
                }
                figures.append(Figure(key, title, "hbar", data))
    blocks: tuple[Block, ...] = (*figures, *operator_report_tables(summary))
    return Section("operators", "Operators and kernel sequences", blocks)


def report_page(report: Report, document: Mapping[str, Any] | None = None) -> Page:
    """The report as a Page (see the module doc) standing for `document`, the JSON report's dict (report.content
    gives it, made when first read)."""
    model = report.dashboard
    ranks = ranks_section(model.rank_heatmap, model.summary.stragglers)
    ordered = triggered_first(model.rules.results)
    python = python_report_section(model.summary.python_profile)
    sections = (
        job_section(model.summary),
        system_section(model.summary, report.system_usage),
        framework_section(model.summary),
        rules_summary_section(model.rules, ordered),
        dashboard_section(model),
        *((ranks,) if ranks is not None else ()),
        critical_path_section(report),
        operators_section(report),
        *((python,) if python is not None else ()),
        *hardware_sections(model.summary),
        memory_section(model.summary),
        *(rule_section(r) for r in ordered),
    )
    return Page(report.title, report_facts(report), sections, document=document if document is not None else {})
