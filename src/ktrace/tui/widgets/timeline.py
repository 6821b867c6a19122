"""The timeline: one row per selected track drawn with Textual's Line API, a time ruler, pan/zoom/step keys."""

from __future__ import annotations

from itertools import groupby

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.cache import LRUCache
from textual.strip import Strip
from textual.widget import Widget

from ktrace.tui.keymap import bindings
from ktrace.tui.messages import RowsShown, SliceSelected, ViewportChanged
from ktrace.tui.overview import paint_overview
from ktrace.tui.steps import PENDING_STEPS, STEPS_PENDING, StepSpans
from ktrace.tui.tracks import TrackIndex
from ktrace.tui.viewmodel import RowPaint, Viewport, label_cap, paint_track, row_labels, ruler, slice_at, slice_columns
from ktrace.tui.widgets.timeline_style import CRITICAL, HEAD, HEAD_CURSOR, LINKED, RULER, SELECTED, cell_style


class Timeline(Widget, can_focus=True):
    """Rows of slices and sparklines over a shared, zoomable time axis."""

    BINDINGS = bindings("timeline")  # type: ignore[assignment]
    DEFAULT_CSS = "Timeline { height: 1fr; }"

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.index: TrackIndex | None = None
        self.steps: StepSpans = PENDING_STEPS
        self.rows: list[int] = []
        """Track ids shown, top to bottom."""
        self.viewport = Viewport(0, 1, 80)
        self.cursor = 0
        self.top = 0
        self.selection: tuple[int, int] | None = None
        self.linked: list[tuple[int, int]] = []
        self.critical: list[tuple[int, int]] = []
        """Slices on the critical path (the `c` key), painted in CRITICAL under the selection's marks."""
        self.labels: list[str] = []
        """Label of each shown row (viewmodel.row_labels: full titles, or short distinct ones when narrow)."""
        self.label_w = label_cap(80)
        """Width of the label column, its divider included."""
        self._announced: tuple[tuple[int, ...], int | None] | None = None
        self._paint_cache: LRUCache[tuple[int, Viewport, bool], tuple[RowPaint, dict[int, str]]] = LRUCache(512)

    # --- data -----------------------------------------------------------------------------------------
    def set_index(self, index: TrackIndex, rows: list[int], steps: StepSpans) -> None:
        """Show a freshly loaded trace: its default rows, fitted to the whole span."""
        self.index, self.rows, self.steps = index, rows, steps
        self._relabel()
        self.viewport = Viewport(index.t0, index.t1, self._body_width()).show(index.t0, index.t1)
        self.cursor, self.top, self.selection, self.linked, self.critical = 0, 0, None, [], []
        self._paint_cache.clear()
        self._changed()

    def regrow(self, index: TrackIndex, rows: list[int], viewport: Viewport, selection: tuple[int, int] | None) -> None:
        """Show a newer index of the same capture (ktrace.tui.live_follow): these rows, this window, the selection
        found again in it (None drops it); the cursor stays on its track when that is still a row."""
        cursor_key = self.index.tracks[self.rows[self.cursor]].key if self.index is not None and self.rows else None
        self.index, self.rows, self.selection, self.critical = index, rows, selection, []
        keys = [index.tracks[r].key for r in rows]
        self.cursor = keys.index(cursor_key) if cursor_key in keys else min(self.cursor, max(0, len(rows) - 1))
        self.linked = self._links(selection) if selection is not None else []
        self.viewport = viewport.with_width(self._body_width())
        self._paint_cache.clear()
        self._changed()

    def set_steps(self, steps: StepSpans) -> None:
        """The trace's steps were detected: the step keys work from now on."""
        self.steps = steps

    def links_ready(self) -> None:
        """The correlation lookups were attached: highlight the selection's launch/kernels."""
        if self.index is not None and self.selection is not None:
            self.linked = self._links(self.selection)
            self.refresh()

    def set_critical(self, marks: list[tuple[int, int]]) -> None:
        """Paint these slices as the critical path's (an empty list clears them)."""
        self.critical = list(marks)
        self.refresh()

    def tracks_ready(self) -> None:
        """The index's tracks were attached: redraw from them instead of the overview."""
        self._paint_cache.clear()
        self.refresh()

    def _ready(self, track_id: int) -> bool:
        """True when the track's slices are indexed (else tell the user and return False)."""
        assert self.index is not None
        if self.index.tracks[track_id].ready:
            return True
        self.notify("still indexing this track…", severity="warning", timeout=2)
        return False

    def toggle_tracks(self, track_ids: list[int]) -> None:
        """Add tracks not shown yet, or remove them all if all are shown."""
        if all(t in self.rows for t in track_ids):
            self.rows = [r for r in self.rows if r not in track_ids]
        else:
            self.rows += [t for t in track_ids if t not in self.rows]
        self.cursor = min(self.cursor, max(0, len(self.rows) - 1))
        self._changed()

    def _body_width(self) -> int:
        return max(10, self.size.width - self.label_w)

    def _relabel(self) -> None:
        """Labels and label width for the shown rows at the current width (the time axis takes the rest)."""
        titles = [self.index.title_parts(t) for t in self.rows] if self.index is not None else []
        self.labels, self.label_w = row_labels(titles, self.size.width)

    def _changed(self, viewport: bool = False) -> None:
        self._relabel()
        if self.viewport.width != self._body_width():
            self.viewport = self.viewport.with_width(self._body_width())
        self.refresh()
        self._announce()
        if viewport:
            self.post_message(ViewportChanged(self.viewport.start_ns, self.viewport.end_ns))

    def _announce(self, force: bool = False) -> None:
        """Tell the app the shown rows and the cursor's track when they changed (or on resize: `force`)."""
        state = (tuple(self.rows), self.rows[self.cursor] if self.rows else None)
        if force or state != self._announced:
            self._announced = state
            self.post_message(RowsShown(*state))

    def show_rows(self, track_ids: list[int]) -> None:
        """Add these tracks as rows (those not shown yet, after the others) and put the cursor on the first."""
        if not track_ids:
            return
        self.rows += [t for t in track_ids if t not in self.rows]
        self.cursor = self.rows.index(track_ids[0])
        self._changed()

    def show_track(self, track_id: int) -> None:
        """Move the cursor to a shown track's row (the tree's cursor went to its leaf); nothing if not shown."""
        if track_id in self.rows and self.rows[self.cursor] != track_id:
            self.action_move_row(self.rows.index(track_id) - self.cursor)

    def on_resize(self, event: events.Resize) -> None:
        self._changed()
        self._announce(force=True)

    # --- drawing --------------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if self.index is None:
            return Strip.blank(width)
        lw = self.label_w
        if y == 0:
            header = ("time since start" if lw > 17 else "time").ljust(lw - 1)[: lw - 1] + "│"
            return Strip([Segment(header, HEAD), Segment(ruler(self.viewport, self.index.t0), RULER)]).crop(0, width)
        row = self.top + y - 1
        if row >= len(self.rows):
            return Strip.blank(width)
        track_id = self.rows[row]
        label = self.labels[row] if row < len(self.labels) else self.index.title(track_id)
        head = Segment(label[: lw - 1].ljust(lw - 1) + "│", HEAD_CURSOR if row == self.cursor else HEAD)
        return Strip([head, *self._body(track_id)]).crop(0, width)

    def paint(self, track_id: int) -> tuple[RowPaint, dict[int, str]]:
        """The cached RowPaint of a track in the current viewport, with the names of its labelled slices."""
        assert self.index is not None
        track = self.index.tracks[track_id]
        key = (track_id, self.viewport, track.ready)
        cached = self._paint_cache.get(key)
        if cached is None:
            if not track.ready and self.index.overview is not None:
                cached = (paint_overview(self.index.overview, track_id, self.viewport), {})
                self._paint_cache[key] = cached
                return cached
            paint = paint_track(track, self.viewport)
            names = self.index.slice_names(track, [p for _, _, p in paint.labels])
            cached = (paint, names)
            self._paint_cache[key] = cached
        return cached

    def _body(self, track_id: int) -> list[Segment]:
        assert self.index is not None
        paint, names = self.paint(track_id)
        chars = list(paint.glyphs)
        counter = self.index.tracks[track_id].kind == "counter"
        styles = [cell_style(c, s, counter) for c, s in zip(paint.colour.tolist(), paint.solid.tolist(), strict=False)]
        written = 0
        for c0, c1, pos in paint.labels:
            first = max(c0 + 1, written)
            text = names.get(pos, "")[: max(0, c1 - first)]
            chars[first : first + len(text)] = text
            written = first + len(text) + 1
        self._overlay(track_id, styles)
        cells = zip(chars, styles, strict=False)
        return [Segment("".join(ch for ch, _ in run), style) for style, run in groupby(cells, key=lambda cs: cs[1])]

    def _overlay(self, track_id: int, styles: list[Style]) -> None:
        assert self.index is not None
        marks: list[tuple[tuple[int, int] | None, Style]] = [(c, CRITICAL) for c in self.critical]
        marks += [(self.selection, SELECTED)] + [(link, LINKED) for link in self.linked]
        for mark, style in marks:
            if mark is None or mark[0] != track_id:
                continue
            c0, c1 = slice_columns(self.index.tracks[track_id], self.viewport, mark[1])
            for c in range(max(0, c0), min(len(styles), c1 + 1)):
                styles[c] = style

    # --- actions --------------------------------------------------------------------------------------
    def set_viewport(self, viewport: Viewport) -> None:
        """Move the window (clamped to a sane zoom range) and redraw."""
        if self.index is None:
            return
        span = self.index.t1 - self.index.t0
        if viewport.span_ns > span * 4:
            viewport = viewport.show(self.index.t0, self.index.t1)
        self.viewport = viewport.with_width(self._body_width())
        self._changed(viewport=True)

    def action_pan(self, fraction: float) -> None:
        if self.index is not None:
            self.set_viewport(self.viewport.pan(fraction).within(self.index.t0, self.index.t1))

    def action_zoom(self, factor: float) -> None:
        self.set_viewport(self.viewport.zoom(factor))

    def action_fit(self) -> None:
        if self.index is not None:
            self.set_viewport(self.viewport.show(self.index.t0, self.index.t1))

    def action_step(self, direction: int) -> None:
        if not self.steps.ready:
            self.notify(STEPS_PENDING, severity="warning", timeout=3)
            return
        centre = self.viewport.time_at(self.viewport.width / 2)
        first = self.steps.after(self.viewport.start_ns - 1)
        if (
            direction > 0
            and first is not None
            and first + 1 < len(self.steps)
            and self.steps.ends[first + 1] <= self.viewport.end_ns
        ):
            i: int | None = first  # the window shows several steps (the whole trace): n starts at the first of them
        else:
            i = self.steps.after(centre) if direction > 0 else self.steps.before(self.viewport.start_ns)
        if i is None:
            self.notify("no next step" if direction > 0 else "no previous step", severity="warning")
            return
        self.show_step(i)

    def show_step(self, i: int) -> None:
        """Fit step i (an index into the steps) in the window."""
        self.set_viewport(self.viewport.show(int(self.steps.starts[i]), int(self.steps.ends[i])))
        self.notify(f"{self.steps.names[i]} ({i + 1} of {len(self.steps)})", timeout=2, markup=False)

    def action_goto_step(self) -> None:
        self.app.call_later(self.app.run_action, "goto_step")

    def action_move_row(self, delta: int) -> None:
        if not self.rows:
            return
        self.cursor = max(0, min(len(self.rows) - 1, self.cursor + delta))
        visible = max(1, self.size.height - 1)
        if self.cursor < self.top:
            self.top = self.cursor
        elif self.cursor >= self.top + visible:
            self.top = self.cursor - visible + 1
        self.refresh()
        self._announce()

    def action_next_slice(self, direction: int) -> None:
        if self.index is None or not self.rows:
            return
        track_id = self.rows[self.cursor]
        track = self.index.tracks[track_id]
        if track.kind == "counter" or track.size == 0 or not self._ready(track_id):
            return
        if self.selection is not None and self.selection[0] == track_id:
            pos = self.selection[1] + direction
        else:
            centre = self.viewport.time_at(self.viewport.width / 2)
            pos = int(np.searchsorted(track.starts, centre)) - (1 if direction < 0 else 0)
        self.select(track_id, max(0, min(track.size - 1, pos)), centre=True)

    def action_follow(self) -> None:
        if self.index is None or self.selection is None:
            return
        links = self._links(self.selection)
        if not links:
            self.notify(
                "no linked launch or kernel for this slice"
                if self.index.links_ready
                else "still linking launches and kernels…",
                severity="warning",
            )
            return
        target = links[0]
        if target[0] not in self.rows:
            self.rows.append(target[0])
        self.cursor = self.rows.index(target[0])
        self.select(*target, centre=True)

    def action_zoom_selection(self) -> None:
        if self.index is None or self.selection is None:
            return
        track = self.index.tracks[self.selection[0]]
        pos = self.selection[1]
        self.set_viewport(self.viewport.show(int(track.starts[pos]), int(track.ends[pos]), margin=0.5))

    def action_remove_row(self) -> None:
        if self.rows:
            self.toggle_tracks([self.rows[self.cursor]])

    def action_focus_tree(self) -> None:
        self.app.call_later(self.app.run_action, "focus_tree")

    # --- selection ------------------------------------------------------------------------------------
    def _links(self, sel: tuple[int, int]) -> list[tuple[int, int]]:
        assert self.index is not None
        table, row = self.index.source(sel[0], sel[1])
        found = (self.index.locate(t, r) for t, r in self.index.linked_rows(table, row))
        return [f for f in found if f is not None]

    def select(self, track_id: int, pos: int, centre: bool = False) -> None:
        """Select a slice: highlight it and its launch/kernels, tell the app, keep it in view."""
        if self.index is None:
            return
        self.selection = (track_id, pos)
        self.linked = self._links(self.selection)
        if centre:
            track = self.index.tracks[track_id]
            start, end = int(track.starts[pos]), int(track.ends[pos])
            if self.viewport.span_ns > 50 * max(1, end - start):  # a 2 ms kernel in a 1 s window: zoom to it
                self.viewport = self.viewport.show(start, end, margin=10.0).with_width(self._body_width())
            else:
                self.viewport = self.viewport.centre_on(start)
        table, row = self.index.source(track_id, pos)
        self.post_message(SliceSelected(table, row))
        self._changed(viewport=centre)

    def select_row(self, table: str, row: int) -> None:
        """Select a table row (e.g. from the kernel table), showing its track if needed."""
        if self.index is None:
            return
        found = self.index.locate(table, row)
        if found is None:
            return
        if found[0] not in self.rows:
            self.rows.append(found[0])
        self.cursor = self.rows.index(found[0])
        self.select(*found, centre=True)

    def on_click(self, event: events.Click) -> None:
        if self.index is None or event.y < 1 or event.x < self.label_w:
            return
        row = self.top + event.y - 1
        if row >= len(self.rows):
            return
        self.cursor = row
        if not self._ready(self.rows[row]):
            self.refresh()
            self._announce()
            return
        pos = slice_at(self.index.tracks[self.rows[row]], self.viewport, event.x - self.label_w)
        if pos is not None:
            self.select(self.rows[row], pos)
        self.refresh()
        self._announce()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._wheel(event, 1)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._wheel(event, -1)

    def _wheel(self, event: events.MouseEvent, direction: int) -> None:
        event.stop()
        if event.shift:
            self.action_pan(-0.1 * direction)
        else:
            anchor = max(0, event.x - self.label_w)
            self.set_viewport(self.viewport.zoom(1.5 if direction > 0 else 1 / 1.5, anchor))
