"""Runs the dashboard's analyses (ktrace.analysis.summary, rules) and turns their results into panels, off the UI thread."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import RenderableType
from rich.text import Text

from ktrace.model.trace import Trace
from ktrace.tui.messages import SummaryReady


@dataclass
class Panel:
    """One dashboard panel: a title, what to draw, and evidence windows (label, start_ns, end_ns) to jump to."""

    title: str
    body: RenderableType
    evidence: list[tuple[str, int, int]] = field(default_factory=list)
    available: bool = True


def compute_dashboard(trace: Trace) -> SummaryReady:
    """Summary, rule findings and the panels drawn from them (run in a worker: only widgets are left to make).

    What is missing is reported in the message and its panels, never raised.
    """
    message = _analyses(trace)
    message.panels = panels(message)
    return message


def _analyses(trace: Trace) -> SummaryReady:
    """Summary and rule findings of a trace."""
    summary, error = _call("ktrace.analysis.summary", "summarize", trace)
    utilization, util_error = _call("ktrace.analysis.utilization", "utilization_over_time", trace,
                                    bin_ns=_bin_ns(trace), per="device")
    histogram, _ = _call("ktrace.analysis.steps", "step_histogram", trace, bins=20)
    findings, rules_error = _call("ktrace.analysis.rules", "run_rules", trace)
    if findings is None and "not available" in rules_error:
        findings, rules_error = _call("ktrace.analysis.rules.engine", "run_rules", trace)
    extras = {"utilization": utilization, "utilization_error": util_error, "step_histogram": histogram}
    return SummaryReady({"summary": summary, **extras} if summary is not None else None, findings, error,
                        "rules not available" if "not available" in rules_error else rules_error)


def _bin_ns(trace: Trace, bins: int = 120) -> int:
    span = trace.span_ns() or (0, 1)
    return max(1_000, (span[1] - span[0]) // bins)


def _call(module: str, function: str, *args: Any, **kwargs: Any) -> tuple[Any, str]:
    """module.function(*args, **kwargs), or (None, why) when it is missing or fails."""
    import importlib

    try:
        fn = getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError):
        return None, f"{module}.{function} is not available in this build"
    try:
        return fn(*args, **kwargs), ""
    except Exception as exc:  # noqa: BLE001 - shown in the dashboard; the timeline stays usable
        return None, f"{module}.{function} failed: {type(exc).__name__}: {exc}"


def unavailable(title: str, why: str) -> Panel:
    """A panel saying why it is empty."""
    return Panel(title, Text(why, style="italic dim"), available=False)


def panels(message: SummaryReady) -> list[Panel]:
    """The dashboard panels of a summary (each unavailable with a reason when its data is missing)."""
    from ktrace.tui.dashboard_panels import findings_panel, summary_panels

    out = summary_panels(message.summary, message.error)
    out.append(findings_panel(message.findings, message.rules_error))
    return out
