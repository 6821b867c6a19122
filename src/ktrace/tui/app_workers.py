"""The app's thread workers: the read and the track index (first screen, sorted tracks, links), then step
detection, the dashboard's analyses, the critical path and a selected slice's details, each off the UI thread
and answered by a message (ktrace.tui.messages) that KtraceApp handles."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from textual import on, work
from textual.worker import get_current_worker

from ktrace.model.trace import Trace
from ktrace.tui.app_routing import WidgetRouting
from ktrace.tui.details import describe
from ktrace.tui.live_follow import is_capture_in_progress, store_signature
from ktrace.tui.messages import (
    CriticalPathReady,
    DetailsReady,
    LinksReady,
    LoadFailed,
    LoadProgress,
    StepsReady,
    TraceLoaded,
    TracksReady,
    while_open,
)
from ktrace.tui.steps import StepSpans
from ktrace.tui.tracks import TrackIndex
from ktrace.tui.widgets.timeline import Timeline

if TYPE_CHECKING:
    from ktrace.analysis.index import TraceIndex


class BackgroundWork(WidgetRouting):
    """Reads and indexes the trace, then detects steps, builds the dashboard, finds the critical path and
    describes the selected slice, in thread workers (one per group at a time); KtraceApp shows what they post."""

    given_trace: Trace | None
    _first_drawn: threading.Event

    @work(thread=True, exclusive=True, group="load")
    def _load_trace(self) -> None:
        """Read, then index in steps: track list + overview (first screen), sorted tracks, links.

        Step detection and the dashboard's analyses start in their own workers once the index is complete (on 2
        cores, running them beside the track sort and the links delayed those 2-3x).
        """
        from ktrace.model.display_text import printable_trace
        from ktrace.model.errors import KtraceError
        from ktrace.tui.index_build import build_links, build_tracks, plan_index

        t_read = time.perf_counter()
        live = self.given_trace is None and self.path is not None and is_capture_in_progress(self.path)
        # taken before the read: what is published during it is read again by the follow worker
        seen = store_signature(self.path) if live and self.path is not None else ()
        try:  # printable: no control character in a name reaches the screen
            trace = printable_trace(self.given_trace if self.given_trace is not None else self._read())
        except KtraceError as exc:
            self.post_message(LoadFailed(str(exc), int(exc.exit_code)))
            return
        except (OSError, ValueError) as exc:
            self.post_message(LoadFailed(f"{self.path}: {exc}", 3))
            return
        t_index = time.perf_counter()
        self.post_message(LoadProgress("indexing tracks"))
        index, plan = plan_index(trace)
        self.post_message(TraceLoaded(trace, index, t_index - t_read, time.perf_counter() - t_index, live, seen))
        self._first_drawn.wait(timeout=2.0)
        t_tracks = time.perf_counter()
        built = build_tracks(plan)
        del plan
        self.post_message(TracksReady(built, time.perf_counter() - t_tracks))
        t_links = time.perf_counter()
        links = build_links(trace)
        self.post_message(LinksReady(links, time.perf_counter() - t_links))

    def _read(self) -> Trace:
        from ktrace.importers import load

        def progress(done: int, total: int) -> None:
            self.post_message(LoadProgress(f"reading {self.path}", done, total))

        assert self.path is not None
        return load(self.path, progress=progress, **self.load_options)

    def _index_for(self, trace: Trace) -> TraceIndex | None:
        """The app's analysis index when it is `trace`'s, else None (the analysis makes its own): a live capture that
        grew replaces the trace and its index while a worker asked for the older trace may still be starting (a
        worker reading the newer index with the older trace failed: "index= belongs to another trace")."""
        index = self.analysis_index
        return index if index is not None and index.trace is trace else None

    @work(thread=True, exclusive=True, group="steps")
    def _detect_steps(self, trace: Trace) -> None:
        """ktrace.analysis.steps.detect_steps (through the trace's analysis index: the dashboard reuses it)."""
        from ktrace.tui.steps import step_spans

        t = time.perf_counter()
        steps = step_spans(trace, self._index_for(trace))
        self.post_message(StepsReady(steps, time.perf_counter() - t))

    @work(thread=True, exclusive=True, group="summary")
    def _load_summary(self, trace: Trace) -> None:
        """The dashboard's analyses and panels; the dashboard only mounts widgets for them."""
        from ktrace.tui.dashboard_data import compute_dashboard

        self.post_message(compute_dashboard(trace, self._index_for(trace)))

    def find_critical_path(self) -> None:
        if self.trace is not None and self.index is not None:
            self._critical_path(self.trace, self.index)

    @work(thread=True, exclusive=True, group="critical_path")
    def _critical_path(self, trace: Trace, index: TrackIndex) -> None:
        """analysis.critical_path through the app's analysis index, mapped to timeline slices."""
        from ktrace.tui.critical_marks import critical_marks

        self.post_message(critical_marks(trace, self._index_for(trace), index))

    @on(CriticalPathReady)
    @while_open
    def _critical_ready(self, message: CriticalPathReady) -> None:
        timeline = self.query_one(Timeline)
        timeline.set_critical(message.marks)
        if message.window is not None:
            timeline.set_viewport(timeline.viewport.show(*message.window))
        self.notify(message.text, timeout=6, markup=False)

    @work(thread=True, exclusive=True, group="details")
    def _describe(self, asked: int, index: TrackIndex, steps: StepSpans, table: str, row: int) -> None:
        """Details of the selected slice (row fetches and binary searches; off the UI thread all the same)."""
        fields = describe(index, steps, table, row)
        if not get_current_worker().is_cancelled:
            self.post_message(DetailsReady(table, row, fields, asked))
