"""The `ktrace view` app's following of a live capture: the follow worker, the swap of a grown trace, `End`."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from textual import on, work
from textual.widgets import Static
from textual.worker import get_current_worker

from ktrace.analysis.index import TraceIndex
from ktrace.model.errors import KtraceError
from ktrace.model.trace import Trace
from ktrace.tui.app_actions import AppActions
from ktrace.tui.live_follow import (
    FOLLOW_EVERY_S,
    FollowState,
    Signature,
    carried_rows,
    carried_slice,
    followed_viewport,
    holds,
    is_capture_in_progress,
    read_capture,
    rest_after,
    store_signature,
)
from ktrace.tui.messages import CaptureGrew, FollowFailed, ViewportChanged, while_open
from ktrace.tui.tracks import TrackIndex
from ktrace.tui.widgets.host_device_tree import HostDeviceTree
from ktrace.tui.widgets.kernel_table import KernelTable
from ktrace.tui.widgets.timeline import Timeline


class LiveFollowing(AppActions):
    """Follows a store that `ktrace run` is still writing (ktrace.tui.live_follow): a thread worker looks at it every
    few seconds and re-reads it when it grew; the app swaps the new trace in and moves the view with the newest
    records until the user pans or zooms away from them (held); `End` resumes. KtraceApp loads and routes."""

    path: Path | None
    trace: Trace | None
    index: TrackIndex | None
    analysis_index: TraceIndex | None
    load_options: dict[str, bool]

    def __init__(self, follow_every_s: float = FOLLOW_EVERY_S) -> None:
        super().__init__()
        self.follow = FollowState()
        """Where the view of a live capture stands (not live: FollowState())."""
        self.follow_every_s = follow_every_s
        """Seconds between two looks at the capture."""
        self.status_tail = ""
        """The status line after its live lead (the counts, or the window shown)."""
        self._follow_on = threading.Event()
        """Set while the view follows: the worker re-reads only then."""
        self.follow_seen: Signature = ()
        """The capture's published batches when the loader began reading it (TraceLoaded.seen)."""
        self._follow_wake = threading.Event()
        """Set by `End`: the worker looks at once instead of finishing its rest."""
        self._follow_stop = threading.Event()
        """Set when the app closes: the worker ends now rather than after its rest (which held the exit)."""

    def set_status(self, text: str | None = None) -> None:
        """Show `text` (None: the last one) after the live lead (lag, held, ended) in the status line."""
        self.status_tail = self.status_tail if text is None else text
        self.query_one("#status", Static).update(self.follow.status() + self.status_tail)

    def start_following(self) -> None:
        """The trace loaded is a capture in progress (self.follow is live): follow it, from the index complete."""
        self._follow_on.set()
        self.set_interval(1.0, self.set_status)  # the lag grows between two re-reads
        assert self.path is not None
        self._follow_capture(self.path, self.follow_every_s, self.follow_seen)

    @work(thread=True, exclusive=True, group="follow")
    def _follow_capture(self, path: Path, every_s: float, seen: Signature) -> None:
        """Look at the capture every `every_s` (longer after a slow re-read); re-read it whole when its files
        changed since `seen`; stop once the finalized capture was read."""
        worker = get_current_worker()
        rest = every_s
        while not (worker.is_cancelled or self._follow_stop.is_set()):
            if self._follow_wake.wait(rest):
                self._follow_wake.clear()
            rest = every_s
            if worker.is_cancelled or self._follow_stop.is_set():
                return
            ended = not is_capture_in_progress(path)
            if not (ended or self._follow_on.is_set()):
                continue  # held: the view shows what the user chose; End resumes (the end is read all the same)
            signature = store_signature(path)
            if signature == seen and not ended:
                continue
            started = time.perf_counter()
            try:
                trace, index = read_capture(path, self.load_options)
            except (KtraceError, OSError, ValueError) as exc:  # the store changed under the read: retry
                self.post_message(FollowFailed(str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
                continue
            seen = signature
            reload_s = time.perf_counter() - started
            self.post_message(CaptureGrew(trace, index, reload_s, ended))
            if ended:
                return
            rest = rest_after(reload_s, every_s)

    @on(CaptureGrew)
    @while_open
    def _grew(self, message: CaptureGrew) -> None:
        """Swap the grown trace in: tree, timeline rows and window, kernels; then its steps and dashboard."""
        from ktrace.tui.first_rows import default_rows

        old = self.index
        if old is None:
            return
        new = message.index
        timeline = self.query_one(Timeline)
        rows = carried_rows(old, timeline.rows, new, default_rows(new, self.rows_that_fit()))
        following = self._follow_on.is_set()
        viewport = followed_viewport(timeline.viewport, old, new) if following else timeline.viewport
        selection = carried_slice(old, timeline.selection, new) if timeline.selection is not None else None
        self.trace, self.index = message.trace, new
        self.analysis_index = TraceIndex(message.trace)
        self.follow = self.follow.grown(new, message.ended)
        self.timings["reload_s"] = message.reload_s
        timeline.regrow(new, rows, viewport, selection)
        self.query_one(HostDeviceTree).regrow(new)
        self.query_one(KernelTable).set_kernels(message.trace.kernels, new.t0, message.trace.devices)
        self.show_counts()
        if message.ended:
            self.notify("capture ended: the view shows the finalized capture", timeout=4)
        self.analyse(message.trace)

    @on(FollowFailed)
    @while_open
    def _follow_failed(self, message: FollowFailed) -> None:
        from dataclasses import replace

        self.follow = replace(self.follow, trouble=message.text[:60])
        self.set_status()

    def stop_following(self) -> None:
        """The app closes: wake the follow worker so that it ends (a re-read under way finishes first)."""
        self._follow_stop.set()
        self._follow_wake.set()

    def hold_or_follow(self, message: ViewportChanged) -> None:
        """A window the user set: one that leaves the newest records holds the view (no more re-reads)."""
        if not self.follow.live or self.follow.ended or self.index is None:
            return
        if self._follow_on.is_set() and holds(message.end_ns, self.index.t1):
            self._follow_on.clear()
            self._set_following(False)

    def action_follow_live(self) -> None:
        """Follow the newest records of a live capture again (after a pan or zoom held the view)."""
        if not self.follow.live:
            self.notify("not a live capture: nothing to follow", severity="warning", timeout=3)
            return
        timeline = self.query_one(Timeline)
        if self.index is not None:
            timeline.regrow(
                self.index, timeline.rows, followed_viewport(timeline.viewport, self.index, self.index), None
            )
        if self.follow.ended:
            self.notify("capture ended: showing its end", timeout=3)
            return
        self._follow_on.set()
        self._follow_wake.set()
        self._set_following(True)

    def _set_following(self, following: bool) -> None:
        from dataclasses import replace

        self.follow = replace(self.follow, following=following)
        self.set_status()

    # provided by KtraceApp
    timings: dict[str, float]

    def rows_that_fit(self) -> int:  # type: ignore[empty-body]
        """Timeline rows the screen has (KtraceApp measures them)."""

    def show_counts(self) -> None:
        """Put the trace's counts in the status line (KtraceApp writes them)."""

    def analyse(self, trace: Trace) -> None:
        """Detect steps and build the dashboard of `trace` in workers (KtraceApp runs them)."""
