"""The TUI's dashboard tab and the report render one dashboard model: same numbers, names and formats."""

from __future__ import annotations

from rich.console import Console

from ktrace.analysis.distributions import memory_op_label
from ktrace.model.units import format_ns
from ktrace.report.content import build_report, report_document
from ktrace.tui.dashboard_data import compute_dashboard


def _text(panel) -> str:  # type: ignore[no-untyped-def]
    console = Console(width=200, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(panel.body)
    return console.export_text()


def test_tui_panels_show_the_reports_series_steps_and_durations(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    report = report_document(build_report(synthetic_trace))
    message = compute_dashboard(synthetic_trace)
    assert message.dashboard is not None and not message.error
    panels = {p.title: p for p in message.panels}

    util = _text(panels["utilization over time"])
    assert report["utilization"]["series"]
    for series in report["utilization"]["series"]:
        mean = sum(series["y_pct"]) / len(series["y_pct"])
        assert f"{series['label']}" in util and f"mean {mean:.1f}%" in util

    steps = message.dashboard.step_histogram
    assert list(steps.counts) == report["steps_histogram"]["counts"]
    assert len(steps.counts) == 16  # 8 steps on each of 2 ranks: one bin per step below 30 (the TUI used 20)
    assert list(steps.edges_ms) == report["steps_histogram"]["edges_ms"]

    top = _text(panels["top 15 kernels by time"])
    for row in report["summary"]["top_by_time"]:
        assert format_ns(row["total_ns"]) in top  # the report's duration format, not a second formatter

    memory = _text(panels["memory-op share"])
    for row in report["summary"]["memory"]:
        assert memory_op_label(row["op"], row["copy_kind"], row["host_memory"]) in memory
