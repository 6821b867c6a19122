"""The dashboard's GPU memory panel (shown when the trace has memory data): the summary's peak line, a sparkline of
allocated bytes on the GPU that peaked, and the peak as evidence to jump to in the timeline."""

from __future__ import annotations

import polars as pl
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.text import Text

from ktrace.analysis.memory_timeline import plot_series
from ktrace.analysis.summary import Summary
from ktrace.model.display_text import printable
from ktrace.presentation.labels import peak_line
from ktrace.tui.charts import sparkline
from ktrace.tui.dashboard_panels import Panel

TITLE = "GPU memory timeline"
POINTS = 400
"""Samples kept for the sparkline; it is drawn as wide as the panel (a fixed 80 columns wrapped at 80x24)."""


class FittedSparkline:
    """A sparkline of `values` resampled to the width the panel gives it, on one line."""

    def __init__(self, values: list[float]) -> None:
        self.values = values

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(sparkline(self.values, max(1, options.max_width)), style="green", no_wrap=True)


def memory_panel(summary: Summary) -> Panel | None:
    """The panel, or None when the trace has no GPU memory data (the summary notes why)."""
    m = summary.memory_timeline
    if m is None:
        return None
    top = m.per_device.sort("peak_allocated_bytes", descending=True, nulls_last=True).row(0, named=True)
    mine = (pl.col("node") == top["node"]) & (pl.col("rank") == top["rank"]) & (pl.col("device") == top["device"])
    values = plot_series(m, POINTS).filter(mine)["allocated_bytes"].cast(pl.Float64).to_list()
    body = Group(Text(printable(peak_line(m, summary.phases.start_ns))), FittedSparkline(values))
    peak = int(top["peak_ns"])
    return Panel(TITLE, body, evidence=[("peak", peak, peak + 1)])
