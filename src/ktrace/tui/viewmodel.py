"""Pure viewmodel of the timeline: (tracks, viewport) -> cells to draw, hit tests and the time ruler.

Every function here costs O(width x log n) per row whatever the number of slices: column boundaries are
searched in each track's sorted start array, busy time per column comes from prefix sums, and names are only
looked up when few enough slices are visible to show them. No textual here; the widget turns a RowPaint
into a Strip.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from ktrace.analysis.names import distinct_short_names
from ktrace.model.display_text import BLOCK_LEVELS
from ktrace.tui.track_types import Track

LEVELS = BLOCK_LEVELS
"""Glyphs for partly busy columns and counter sparklines, by ninths."""
SOLID = 0.85
"""Share of a column that must be busy for it to be drawn as a solid bar."""
MIN_LABEL_COLS = 4
"""A slice must span this many columns before its name is written on it."""


@dataclass(frozen=True)
class Viewport:
    """The visible time window [start_ns, end_ns) mapped onto `width` columns."""

    start_ns: int
    end_ns: int
    width: int

    @property
    def span_ns(self) -> int:
        """Duration of the window."""
        return max(1, self.end_ns - self.start_ns)

    def bounds(self) -> NDArray[np.int64]:
        """The width + 1 column boundaries in ns."""
        cols = np.arange(self.width + 1, dtype=np.float64)
        return (self.start_ns + np.floor(cols * self.span_ns / max(1, self.width))).astype(np.int64)

    def column_of(self, t_ns: int) -> int:
        """Column of time t (may be outside 0..width-1)."""
        return int(np.floor((t_ns - self.start_ns) * self.width / self.span_ns))

    def time_at(self, column: float) -> int:
        """Time at the left edge of a (fractional) column."""
        return int(self.start_ns + column * self.span_ns / max(1, self.width))

    def zoom(self, factor: float, anchor_col: float | None = None, min_span_ns: int = 1_000) -> Viewport:
        """Zoom by `factor` (> 1 zooms in) around a column (the centre by default)."""
        anchor = self.time_at(self.width / 2 if anchor_col is None else anchor_col)
        span = max(min_span_ns, int(self.span_ns / factor))
        left = (anchor - self.start_ns) / self.span_ns
        start = int(anchor - left * span)
        return replace(self, start_ns=start, end_ns=start + span)

    def pan(self, fraction: float) -> Viewport:
        """Move by a fraction of the window (negative: left)."""
        shift = int(self.span_ns * fraction)
        return replace(self, start_ns=self.start_ns + shift, end_ns=self.end_ns + shift)

    def show(self, start_ns: int, end_ns: int, margin: float = 0.02) -> Viewport:
        """A window showing [start, end] with a small margin on both sides."""
        pad = int(max(1, end_ns - start_ns) * margin)
        return replace(self, start_ns=start_ns - pad, end_ns=max(end_ns + pad, start_ns - pad + 1_000))

    def centre_on(self, t_ns: int) -> Viewport:
        """Same zoom, centred on t (only moves when t is off screen or near an edge)."""
        if self.start_ns + self.span_ns // 10 <= t_ns <= self.end_ns - self.span_ns // 10:
            return self
        start = t_ns - self.span_ns // 2
        return replace(self, start_ns=start, end_ns=start + self.span_ns)

    def within(self, t0: int, t1: int) -> Viewport:
        """The same span moved so that it does not run past the trace [t0, t1] (a wider one shows it all)."""
        if self.span_ns >= t1 - t0:
            return self if self.start_ns <= t0 and self.end_ns >= t1 else self.show(t0, t1)
        start = min(max(self.start_ns, t0), t1 - self.span_ns)
        return replace(self, start_ns=start, end_ns=start + self.span_ns)

    def with_width(self, width: int) -> Viewport:
        """Same window on another number of columns."""
        return replace(self, width=max(1, width))


LABEL_W = 32
"""Widest track label column (with its divider); a narrow timeline gives the labels at most a third of it."""
MIN_LABEL_W = 10


def label_cap(width: int) -> int:
    """The widest label column a timeline `width` columns wide allows: a quarter of a wide one (at most LABEL_W),
    a third of one under 100 columns (80x24 leaves ~53), never under MIN_LABEL_W."""
    return max(MIN_LABEL_W, min(LABEL_W, width // (4 if width >= 100 else 3)))


def row_labels(titles: list[tuple[str, str]], width: int) -> tuple[list[str], int]:
    """The track labels of the shown rows and the label column's width (labels + the divider).

    Full "what · where" titles when the longest fits the column; else each row says only what it is ("stream 7",
    "CUDA API") unless another shown row says the same, in which case it keeps its where ("CUDA API · T12"): the
    labels stay distinct and the column takes no more than the longest label needs.
    """
    cap = label_cap(width)
    full = [f"{what} · {where}" if where else what for what, where in titles]
    if not full:
        return [], cap
    if max(map(len, full)) + 1 > cap:
        seen = Counter(what for what, _ in titles)
        full = [what if seen[what] == 1 else text for (what, _), text in zip(titles, full, strict=True)]
    if max(map(len, full)) + 1 > cap:  # still too long: cut where the labels differ, never into equal labels
        shown = distinct_short_names(full, cap - 1, plain=True)
        full = [shown[text] for text in full]
    return full, max(MIN_LABEL_W, min(cap, max(map(len, full)) + 1))


@dataclass(frozen=True)
class RowPaint:
    """What one track row looks like in a viewport: a glyph and a colour per column, plus labels."""

    glyphs: list[str]
    """One character per column."""
    colour: NDArray[np.int64]
    """Colour seed per column (-1: empty)."""
    solid: NDArray[np.bool_]
    """True where the column is drawn as a solid bar (background colour)."""
    labels: list[tuple[int, int, int]]
    """(first column, last column + 1, slice position) of slices wide enough to carry their name."""


@dataclass(frozen=True)
class VisibleSlices:
    """Positions [first, stop) of the slices of a track that intersect the viewport."""

    first: int
    stop: int

    @property
    def count(self) -> int:
        """How many slices intersect the window."""
        return max(0, self.stop - self.first)


def visible(track: Track, vp: Viewport) -> VisibleSlices:
    """Slices of `track` that intersect the viewport (via searchsorted on starts and max_end)."""
    stop = int(np.searchsorted(track.starts, vp.end_ns, side="left"))
    first = int(np.searchsorted(track.max_end, vp.start_ns, side="right"))
    return VisibleSlices(min(first, stop), stop)


def paint_track(track: Track, vp: Viewport) -> RowPaint:
    """Cells of a slice track: solid bars where busy, partial-height glyphs where sparse, names where they fit."""
    if track.kind == "counter":
        return paint_counter(track, vp)
    width = vp.width
    bounds = vp.bounds()
    idx = np.searchsorted(track.starts, bounds, side="left")
    prev = idx[:-1] - 1
    has_prev = prev >= 0
    prev_c = np.where(has_prev, prev, 0)
    carried_end = np.where(has_prev, track.max_end[prev_c] if track.size else 0, np.int64(-(2**62)))
    carried = np.clip(np.minimum(carried_end, bounds[1:]) - bounds[:-1], 0, None)
    running = carried_end > bounds[:-1]  # an earlier slice runs into the column (also when it is 0 ns wide)
    inside = track.cum_ns[idx[1:]] - track.cum_ns[idx[:-1]]
    col_ns = np.maximum(1, bounds[1:] - bounds[:-1])
    frac = np.minimum(1.0, (carried + inside) / col_ns)
    starting = idx[1:] > idx[:-1]
    colour = np.full(width, -1, np.int64)
    if track.size:
        colour = np.where(running, track.colour[prev_c], colour)
        first_in = np.minimum(idx[:-1], track.size - 1)
        colour = np.where(~running & starting, track.colour[first_in], colour)
    busy = (frac > 0) | starting | running
    level = np.where(busy, np.maximum(1, np.round(frac * 8)).astype(np.int64), 0)
    solid = busy & (frac >= SOLID)
    glyphs = [LEVELS[v] for v in level.tolist()]
    labels = _labels(track, vp) if track.size else []
    return RowPaint(glyphs, colour, solid, labels)


def _labels(track: Track, vp: Viewport) -> list[tuple[int, int, int]]:
    vis = visible(track, vp)
    if vis.count == 0 or vis.count > vp.width:
        return []
    pos = np.arange(vis.first, vis.stop)
    scale = vp.width / vp.span_ns
    c0 = np.floor((track.starts[pos] - vp.start_ns) * scale).astype(np.int64)
    c1 = np.floor((track.ends[pos] - vp.start_ns) * scale).astype(np.int64)
    c0, c1 = np.clip(c0, 0, vp.width), np.clip(c1, 0, vp.width)
    wide = (c1 - c0) >= MIN_LABEL_COLS
    return [(int(a), int(b), int(p)) for a, b, p in zip(c0[wide], c1[wide], pos[wide], strict=False)]


def paint_counter(track: Track, vp: Viewport) -> RowPaint:
    """A sparkline: per column the largest sample in it (the last earlier sample where none), scaled to the max."""
    width = vp.width
    values = track.values if track.values is not None else np.zeros(track.size)
    glyphs = [" "] * width
    colour = np.full(width, -1, np.int64)
    if track.size == 0:
        return RowPaint(glyphs, colour, np.zeros(width, bool), [])
    bounds = vp.bounds()
    idx = np.searchsorted(track.starts, bounds, side="left")
    last = idx[1:] - 1
    has = last >= 0
    col_val = np.where(has, values[np.maximum(last, 0)], np.nan)
    nonempty = idx[1:] > idx[:-1]
    if nonempty.any():
        col_val[nonempty] = max_in_ranges(values, idx[:-1][nonempty], idx[1:][nonempty])
    after_end = bounds[:-1] > track.starts[-1]
    col_val[after_end & ~nonempty] = np.nan
    top = float(np.nanmax(values)) if values.size else 0.0
    low = min(0.0, float(np.nanmin(values)))
    scale = (top - low) or 1.0
    ok = ~np.isnan(col_val)
    level = np.zeros(width, np.int64)
    level[ok] = np.clip(np.round((col_val[ok] - low) / scale * 7), 0, 7).astype(np.int64) + 1
    glyphs = [LEVELS[v] for v in level.tolist()]
    colour[ok] = 1
    return RowPaint(glyphs, colour, np.zeros(width, bool), [])


def max_in_ranges(values: NDArray[np.float64], lo: NDArray[np.int64], hi: NDArray[np.int64]) -> NDArray[np.float64]:
    """max(values[lo_k:hi_k]) for non-empty, increasing ranges, in one reduceat (no Python loop)."""
    padded = np.append(values, -np.inf)
    cuts = np.empty(2 * lo.size, np.int64)
    cuts[0::2], cuts[1::2] = lo, hi
    return np.maximum.reduceat(padded, cuts)[0::2]


def slice_at(track: Track, vp: Viewport, column: int) -> int | None:
    """Position of the slice drawn at a column (the longest-running one there), or None."""
    if track.kind == "counter" or track.size == 0 or not 0 <= column < vp.width:
        return None
    b = vp.bounds()
    lo, hi = int(b[column]), int(b[column + 1])
    stop = int(np.searchsorted(track.starts, hi, side="left"))
    first = int(np.searchsorted(track.max_end, lo, side="right"))
    if stop <= first:
        return None
    pos = np.arange(first, min(stop, first + 4096))
    overlap = np.minimum(track.ends[pos], hi) - np.maximum(track.starts[pos], lo)
    best = int(np.argmax(overlap))
    return int(pos[best]) if overlap[best] >= 0 else None


def slice_columns(track: Track, vp: Viewport, pos: int) -> tuple[int, int]:
    """Columns [first, last] a slice occupies (at least one column), possibly off screen."""
    c0 = vp.column_of(int(track.starts[pos]))
    c1 = max(c0, vp.column_of(int(track.ends[pos]) - 1))
    return c0, c1


_UNITS = ((1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "µs"), (1, "ns"))


def format_duration(ns: float) -> str:
    """A short human duration: 1.25 s, 340 µs, 12 ns."""
    for size, unit in _UNITS:
        if abs(ns) >= size or size == 1:
            value = ns / size
            text = f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
            return f"{text} {unit}"
    return f"{ns} ns"


def format_offset(ns: int, resolution_ns: int = 1_000) -> str:
    """A time since the trace start, precise to `resolution_ns`: "2.0105s", "340.5ms", "0"."""
    if ns == 0:
        return "0"
    size, unit = next((s, u) for s, u in _UNITS if abs(ns) >= s or s == 1)
    decimals = max(0, math.ceil(math.log10(size / max(1, resolution_ns)) - 1e-9))
    return f"{ns / size:.{decimals}f}{unit}"


def format_signed_offset(ns: int, resolution_ns: int = 1_000) -> str:
    """format_offset with its sign: "+340.5ms", "-23.884ms" (a window or record before the trace start)."""
    return ("-" if ns < 0 else "+") + format_offset(abs(ns), resolution_ns)


def tick_step(span_ns: int, width: int, min_cols: int = 14) -> int:
    """A 1/2/5 x 10^k ns step so that ticks are at least `min_cols` columns apart."""
    target = span_ns * min_cols / max(1, width)
    step = 1
    while True:
        for mult in (1, 2, 5):
            if step * mult >= target:
                return step * mult
        step *= 10


def ruler(vp: Viewport, origin_ns: int) -> str:
    """The time ruler: tick marks with times relative to the trace start, exactly `width` characters."""
    step = tick_step(vp.span_ns, vp.width)
    first = ((vp.start_ns - origin_ns) // step + 1) * step + origin_ns
    cells = [" "] * vp.width
    t = first
    while t < vp.end_ns:
        col = vp.column_of(t)
        label = "|" + format_offset(t - origin_ns, step)
        if 0 <= col < vp.width:
            for i, ch in enumerate(label[: vp.width - col]):
                cells[col + i] = ch
        t += step
    return "".join(cells)
