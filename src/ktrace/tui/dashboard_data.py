"""Computes the dashboard model (ktrace.analysis.dashboard) and turns it into panels, off the UI thread."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktrace.analysis.index import TraceIndex
from ktrace.model.trace import Trace
from ktrace.tui.dashboard_panels import Panel, findings_panel, summary_panels, unavailable
from ktrace.tui.memory_panel import memory_panel
from ktrace.tui.messages import SummaryReady
from ktrace.tui.rank_panels import rank_panels

__all__ = ["Panel", "compute_dashboard", "panels", "unavailable"]

if TYPE_CHECKING:  # the analyses load in the worker that runs them, not when the TUI starts
    from ktrace.analysis.dashboard import Dashboard


def compute_dashboard(trace: Trace, index: TraceIndex | None = None) -> SummaryReady:
    """The dashboard model (summary, rule findings, histograms, series) and the panels drawn from it (run in a
    worker: only widgets are left to make). The same model the report renders, so both show the same numbers.

    A failure is reported in the message and its panels, never raised: the timeline stays usable.
    """
    from ktrace.analysis.dashboard import build_dashboard
    from ktrace.analysis.summary import summarize

    ix = TraceIndex.of(trace, index)
    summary = None
    try:
        dashboard: Dashboard | None = build_dashboard(trace, index=ix)
        error = ""
    except Exception as exc:  # noqa: BLE001 - shown in the dashboard; the timeline stays usable
        dashboard, error = None, f"the dashboard analyses failed: {type(exc).__name__}: {exc}"
        try:  # the summary alone (already in the index when only the rules or the panels failed)
            summary = summarize(trace, index=ix)
        except Exception:  # noqa: BLE001 - the error above says why the dashboard is empty
            summary = None
    message = SummaryReady(dashboard, error, summary=summary)
    message.panels = panels(message)
    message.rank_panels = rank_panels(dashboard)
    return message


def panels(message: SummaryReady) -> list[Panel]:
    """The dashboard panels of a summary (each unavailable with a reason when its data is missing)."""
    out = summary_panels(message.dashboard, message.error, message.summary)
    summary = message.dashboard.summary if message.dashboard is not None else message.summary
    memory = memory_panel(summary) if summary is not None else None
    out += [memory] if memory is not None else []
    out.append(findings_panel(message.dashboard, message.error))
    return out
