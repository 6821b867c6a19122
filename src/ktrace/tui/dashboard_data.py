"""Computes the dashboard model (ktrace.analysis.dashboard) and turns it into panels, off the UI thread."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktrace.analysis.index import TraceIndex
from ktrace.model.trace import Trace
from ktrace.tui.dashboard_panels import FINDINGS_TITLE, PANEL_TITLES, Panel, PanelRenderer, unavailable
from ktrace.tui.memory_panel import memory_panel
from ktrace.tui.messages import SummaryReady
from ktrace.tui.rank_panels import rank_panels

__all__ = ["Panel", "compute_dashboard", "dashboard_page", "panels", "unavailable"]

if TYPE_CHECKING:  # the analyses load in the worker that runs them, not when the TUI starts
    from ktrace.analysis.dashboard import Dashboard
    from ktrace.analysis.summary import Summary
    from ktrace.presentation.page import Page


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


def dashboard_page(model: Dashboard) -> Page:
    """The report page's sections the dashboard tab shows (job facts, framework metrics, the dashboard panels, the
    rules summary and one section per rule), built by the report's own builders: same numbers, same titles."""
    from ktrace.presentation.findings import rule_sections
    from ktrace.presentation.page import Page
    from ktrace.presentation.report_dashboard import dashboard_section, framework_section, job_section
    from ktrace.presentation.report_rules import rules_summary_section
    from ktrace.presentation.verdicts import triggered_first

    s = model.summary
    summary = rules_summary_section(model.rules, triggered_first(model.rules.results)) if model.rules.results else None
    sections = (
        job_section(s),
        framework_section(s),
        dashboard_section(model),
        *((summary,) if summary is not None else ()),
        *rule_sections(model.rules),
    )
    return Page("dashboard", (), sections)


def _summary_only(summary: Summary) -> Dashboard:
    """A dashboard model of the summary alone (its series, histogram and rules failed): their panels say why."""
    from ktrace.analysis.dashboard import Dashboard, StepHistogram
    from ktrace.analysis.rules.engine import RulesReport

    return Dashboard(summary, StepHistogram((), ()), 0.0, (), RulesReport(()), ())


def panels(message: SummaryReady) -> list[Panel]:
    """The dashboard panels of a summary, laid out from its page (each unavailable with a reason when its data is
    missing), the GPU memory panel before the findings."""
    from ktrace.presentation.layout import lay_out

    model = message.dashboard
    if model is None and message.summary is not None:
        model = _summary_only(message.summary)
    if model is None:
        why = message.error or "no summary"
        return [*(unavailable(t, why) for t in PANEL_TITLES), unavailable(FINDINGS_TITLE, why)]
    out = lay_out(dashboard_page(model), PanelRenderer(message.error))
    memory = memory_panel(model.summary)
    return [*out[:-1], *([memory] if memory is not None else []), out[-1]]
