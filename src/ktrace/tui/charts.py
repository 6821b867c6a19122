"""Terminal charts as rich Text: horizontal bars, share bars, sparklines and histograms (pure, no textual)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from ktrace.analysis.names import distinct_short_names
from ktrace.tui.viewmodel import LEVELS

BAR_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7")


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
