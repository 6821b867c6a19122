"""Terminal charts as rich Text: horizontal bars, share bars, sparklines and histograms (pure, no textual), and the
dashboard's charts of a page's figures and tables drawn to the panel's width (utilization lines, kernel bars)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from ktrace.analysis.names import distinct_short_names
from ktrace.tui.viewmodel import LEVELS

BAR_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7")
NAME_COLUMNS = 60
"""The most columns a kernel name takes in the top-kernel bars."""
SPARK_WIDTH = 160
"""The most columns of the utilization time axis (fewer when the panel is narrower)."""
UTILIZATION_MEAN = (
    "mean = mean of the points drawn: a GPU's busy % per whole bin between its first and last record "
    "(≈ its timeline % active), or a counter's samples\n"
)
"""What the utilization panel's `mean` is, so that it is not read as a second, different active share."""


def hbars(
    labels: Sequence[str], values: Sequence[float], texts: Sequence[str], width: int = 40, label_width: int = 38
) -> Text:
    """One line per item: label, a bar proportional to value, and its text (e.g. "12.3 ms 4.1%")."""
    out = Text()
    top = max((float(v) for v in values), default=0.0) or 1.0
    shown = distinct_short_names(labels, label_width, plain=True)  # cut where they differ, never into two equal labels
    for i, (label, value, text) in enumerate(zip(labels, values, texts, strict=False)):
        eighths = int(round(float(value) / top * width * 8))
        bar = "█" * (eighths // 8) + ("" if eighths % 8 == 0 else " ▏▎▍▌▋▊▉"[eighths % 8])
        out.append(shown[label].ljust(label_width) + " ", style="bold" if i == 0 else "")
        out.append(bar.ljust(width), style=BAR_COLOURS[i % len(BAR_COLOURS)])
        out.append(f" {text}\n")
    return out


def shares(labels: Sequence[str], values: Sequence[float], width: int = 60) -> Text:
    """A single stacked bar of shares with a legend (values need not sum to 1)."""
    total = sum(float(v) for v in values) or 1.0
    out = Text()
    for i, value in enumerate(values):
        out.append("█" * int(round(float(value) / total * width)), style=BAR_COLOURS[i % len(BAR_COLOURS)])
    out.append("\n")
    for i, (label, value) in enumerate(zip(labels, values, strict=False)):
        out.append("■ ", style=BAR_COLOURS[i % len(BAR_COLOURS)])
        out.append(f"{label} {100 * float(value) / total:.1f}%   ")
    return out


def sparkline(values: Sequence[float], width: int = 80, top: float | None = None) -> str:
    """Values resampled to `width` columns (max per column) as block glyphs, scaled to `top` (or the max)."""
    if not values:
        return ""
    n = len(values)
    cols = min(width, n)
    peak = top if top is not None else max(values) or 1.0
    glyphs = []
    for c in range(cols):
        chunk = values[c * n // cols : max(c * n // cols + 1, (c + 1) * n // cols)]
        level = int(round(max(0.0, min(1.0, max(chunk) / peak)) * 7)) + 1
        glyphs.append(LEVELS[level])
    return "".join(glyphs)


def histogram(edges: Sequence[float], counts: Sequence[int], height: int = 6, unit: str = "") -> Text:
    """Vertical bars of counts per bin, with the first and last edge underneath."""
    out = Text()
    top = max(counts, default=0) or 1
    for level in range(height, 0, -1):
        line = []
        for c in counts:
            fill = c / top * height - (level - 1)
            line.append("█" if fill >= 1 else LEVELS[int(round(max(0.0, fill) * 8))] if fill > 0 else " ")
        out.append("".join(ch * 2 for ch in line) + "\n", style="#4e79a7")
    if edges:
        left = f"{edges[0]:.3g}{unit}"
        right = f"{edges[-1]:.3g}{unit}"
        out.append(left + right.rjust(max(1, 2 * len(counts) - len(left))))
    return out


def colour(resource: str) -> str:
    """A GPU's colour (green) or a CPU's (blue)."""
    return "#59a14f" if resource == "gpu" else "#4e79a7"


@dataclass(frozen=True)
class Series:
    """One utilization curve of the page's figure: label, seconds since the trace start, % busy."""

    label: str
    x_s: tuple[float, ...]
    y_pct: tuple[float, ...]


def series_of(data: Mapping[str, Any]) -> Series:
    """A series of a "lines" Figure's data ({label, x, y})."""
    return Series(str(data["label"]), tuple(data["x"]), tuple(data["y"]))


@dataclass(frozen=True)
class UtilizationChart:
    """The utilization series on one time axis, as wide as the panel allows (at most SPARK_WIDTH columns): drawn
    when rich knows the width, so that an 80-column terminal gets one line per series instead of two."""

    series: tuple[Series, ...]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        series = self.series
        width = min(28, max(len(s.label) for s in series) + 1)
        x0 = min(s.x_s[0] for s in series if s.x_s)
        x1 = max(s.x_s[-1] for s in series if s.x_s)
        steps = [b - a for s in series for a, b in zip(s.x_s, s.x_s[1:], strict=False) if b > a]
        room = max(10, min(SPARK_WIDTH, options.max_width - width - len(" mean 100.0%")))
        columns = min(room, round((x1 - x0) / min(steps)) + 1) if steps else 1  # one column per bin if fewer
        lines = Text(f"{x0:g} s to {x1:g} s after the trace start\n", style="dim")
        lines.append(UTILIZATION_MEAN, style="dim")
        labels = distinct_short_names([s.label for s in series], width - 1, plain=True)  # long hosts differ late
        for s in series:
            mean = sum(s.y_pct) / max(1, len(s.y_pct))
            lines.append(labels[s.label].ljust(width))
            lines.append(_on_time_axis(s, x0, x1, columns).ljust(columns), style=colour(_resource(s.label)))
            lines.append(f" mean {mean:.1f}%\n")
        yield lines


def _resource(label: str) -> str:
    """ "cpu" for a CPU counter's series ("node/CPU"), else "gpu"."""
    return "cpu" if label.endswith("/CPU") else "gpu"


def _on_time_axis(s: Series, x0: float, x1: float, width: int) -> str:
    """The series as block glyphs on one time axis shared by every series (max per column; blank where the series
    has no point: before a GPU's first or after its last record), so the rows line up in time."""
    cols: list[float | None] = [None] * width
    scale = (width - 1) / (x1 - x0) if x1 > x0 else 0.0
    for x, y in zip(s.x_s, s.y_pct, strict=True):
        c = min(width - 1, round((x - x0) * scale))
        cols[c] = y if cols[c] is None else max(y, cols[c] or 0.0)
    return "".join(" " if v is None else sparkline([v], width=1, top=100.0) for v in cols)


@dataclass(frozen=True)
class KernelBars:
    """Top kernels as bars as wide as the panel: names get up to 60 columns (cut where they differ, never alike),
    the bar the rest, so an 80-column terminal gets one line per kernel and a 160-column one longer bars."""

    names: tuple[str, ...]
    values: tuple[float, ...]
    texts: tuple[str, ...]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        room = options.max_width - max(map(len, self.texts), default=0) - 2
        label = max(12, min(NAME_COLUMNS, max(map(len, self.names), default=0), room * 3 // 5))
        full = list(self.names)
        shown = distinct_short_names([n for n in full if n != "other"], label)  # "other" keeps its word
        labels = [shown.get(n, n) for n in full]
        yield hbars(labels, self.values, self.texts, width=max(8, room - label), label_width=label)
