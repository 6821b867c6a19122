"""The dashboard's GPU memory panel: the summary's peak line and a jump to the peak, only when there is memory data."""

from __future__ import annotations

from reference.memory_trace import T, memory_trace
from rich.console import Console

from ktrace.model import TraceBuilder
from ktrace.tui.dashboard_data import compute_dashboard
from ktrace.tui.memory_panel import POINTS, TITLE, FittedSparkline


def test_memory_panel_shows_the_peak_and_who_allocated_it() -> None:
    panels = compute_dashboard(memory_trace()).panels
    panel = next(p for p in panels if p.title == TITLE)
    console = Console(width=100, record=True, color_system=None)
    console.print(panel.body)
    text = console.export_text()
    assert "GPU memory peak 1.0 KB allocated (reserved 2.0 KB) on n0/rank0/GPU1" in text
    assert panel.evidence == [("peak", T + 80, T + 81)]  # device 1's 1,000 B beat device 0's 964 B


def test_the_sparkline_is_as_wide_as_the_panel_and_one_line() -> None:
    series = FittedSparkline([float(i % 50) for i in range(POINTS)])
    for width in (40, 76, 120):  # 76: the panel's inside at 80 columns, where a fixed 80-glyph line wrapped
        console = Console(width=width, record=True, color_system=None)
        console.print(series)
        lines = console.export_text().rstrip("\n").split("\n")
        assert len(lines) == 1 and len(lines[0]) == width, (width, lines)


def test_no_memory_panel_without_memory_data() -> None:
    assert all(p.title != TITLE for p in compute_dashboard(TraceBuilder().build()).panels)
