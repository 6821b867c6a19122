"""What `ktrace report` shows: the Report (the dashboard model, a title, the trace it is about and its system
usage), computed once; report_page lays it out as a Page and report.content serializes it as the JSON document."""

from __future__ import annotations

from dataclasses import dataclass

from ktrace.analysis.dashboard import Dashboard, build_dashboard
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rules.config import RulesConfig
from ktrace.analysis.system_usage import SystemUsage, system_usage
from ktrace.model.errors import ProgressFn, no_progress
from ktrace.model.trace import Trace
from ktrace.presentation.identity import TraceIdentity, trace_identity

REPORT_VERSION = 1
"""Bumped when the JSON report's shape changes incompatibly."""


@dataclass(frozen=True)
class Report:
    """Everything a report shows."""

    dashboard: Dashboard
    title: str
    identity: TraceIdentity
    """The trace's files, hosts and GPUs (the report header)."""
    system_usage: SystemUsage
    """GPU busy, CPU thread load and allocator memory per time bin, read from the events (the system usage
    section beside the counters)."""
    version: int = REPORT_VERSION


def build_report(
    trace: Trace,
    *,
    config: RulesConfig | None = None,
    annotations: tuple[str, ...] = (),
    top: int = 15,
    title: str = "",
    progress: ProgressFn = no_progress,
    index: TraceIndex | None = None,
) -> Report:
    """Compute what the report of `trace` shows: build_dashboard with these arguments (rule thresholds,
    annotation patterns, rows of the top-kernel tables, progress, index), the trace's identity and its system usage;
    `title` defaults to one naming the trace's source."""
    ix = TraceIndex.of(trace, index)
    dashboard = build_dashboard(trace, config=config, annotations=annotations, top=top, progress=progress, index=ix)
    title = title or f"ktrace profiling report ({trace.meta.source})"
    return Report(dashboard, title, trace_identity(trace), system_usage(trace, index=ix))
