"""Messages of the TUI: small dataclasses named for what happened, posted by workers and widgets."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from textual.message import Message

from ktrace.model.trace import Trace
from ktrace.tui.tracks import TrackIndex

if TYPE_CHECKING:  # the analyses are imported by the worker that runs them, not at start-up
    from textual.app import App

    from ktrace.analysis.dashboard import Dashboard
    from ktrace.analysis.summary import Summary

M = TypeVar("M", bound=Message)


def while_open(handler: Callable[[Any, M], None]) -> Callable[[Any, M], None]:
    """A worker's result handled only until exit is asked for: a result already queued when the app exits (the
    user's q, a test's app.exit()) can be dispatched after the screens are closed, where its widgets are gone."""

    @functools.wraps(handler)
    def handle(app: App[Any], message: M) -> None:
        if app.return_code is None:
            handler(app, message)

    return handle


@dataclass
class LoadProgress(Message):
    """The loader worker made progress (high rate: only the latest is kept)."""

    stage: str
    done: int = 0
    total: int = 0

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LoadProgress)


@dataclass
class TraceLoaded(Message):
    """The trace was read and its track list and overview built (in the loader worker); tracks and steps follow."""

    trace: Trace
    index: TrackIndex
    read_s: float
    index_s: float
    live: bool = False
    """The store is a capture still being recorded: the view follows it (ktrace.tui.live_follow)."""
    seen: tuple[Any, ...] = ()
    """A live capture's published batches when the read began (live_follow.store_signature)."""


@dataclass
class TracksReady(Message):
    """Every track's sorted arrays were built (in the loader worker, after the first screen)."""

    built: Any
    """ktrace.tui.index_build.BuiltTracks."""
    seconds: float


@dataclass
class StepsReady(Message):
    """Step detection finished (in its worker, started once the first screen is drawn)."""

    steps: Any
    """ktrace.tui.steps.StepSpans."""
    seconds: float


@dataclass
class LinksReady(Message):
    """The correlation lookups (launch <-> kernel links) were built."""

    links: Any
    """ktrace.tui.index_build.Links."""
    seconds: float


@dataclass
class LoadFailed(Message):
    """Reading the trace failed: one line for the user and the exit code."""

    text: str
    exit_code: int


@dataclass
class SummaryReady(Message):
    """The dashboard's analyses finished (or failed with `error`), with their panels built in the same worker."""

    dashboard: Dashboard | None
    """The dashboard model (summary, rule findings, histograms, series); None when its analyses failed."""
    error: str = ""
    summary: Summary | None = None
    """summarize() alone, when the dashboard failed but the summary did not (its panels are still shown)."""
    panels: list[Any] = field(default_factory=list)
    """ktrace.tui.dashboard_data.Panel list: only widgets remain to be made on the UI thread."""
    rank_panels: list[Any] = field(default_factory=list)
    """ktrace.tui.rank_panels.RankPanel list (2+ ranks), shown before the other panels."""


@dataclass
class SliceSelected(Message):
    """A slice (kernel, copy, API call, range) was selected in the timeline or the kernel table."""

    table: str
    row: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SliceSelected)


@dataclass
class DetailsReady(Message):
    """The details of a selected slice were computed (in a worker)."""

    table: str
    row: int
    fields: list[tuple[str, str]]
    asked: int = 0
    """Which request (the app's counter) these details answer."""


@dataclass
class ViewportChanged(Message):
    """The timeline's window moved or zoomed (high rate: only the latest is kept)."""

    start_ns: int
    end_ns: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ViewportChanged)


@dataclass
class TrackToggled(Message):
    """The tree asked to add or remove timeline tracks."""

    track_ids: list[int]


@dataclass
class RankChosen(Message):
    """A rank line of the dashboard's rank panels was chosen: show that rank's tracks in the timeline."""

    node: str
    rank: int


@dataclass
class RowsShown(Message):
    """The timeline's rows or its cursor row changed, or it was resized: the tree marks the shown tracks and
    highlights the cursor's, the details pane takes the lines the rows leave free (only the latest is kept)."""

    rows: tuple[int, ...]
    """Track ids shown, top to bottom."""
    cursor: int | None
    """Track id of the cursor row."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RowsShown)


@dataclass
class TrackHighlighted(Message):
    """The tree's cursor is on a track's leaf: the timeline moves its cursor to that track's row if shown."""

    track_id: int


@dataclass
class KernelOrderReady(Message):
    """The kernel table's filtered and sorted row order was computed (in a worker)."""

    order: Any
    """numpy int64 row indices of the kernels frame."""
    sort: int
    descending: bool
    text: str


@dataclass
class CriticalPathReady(Message):
    """The critical path was computed (in its worker): the timeline slices to mark and a line for the user."""

    marks: list[tuple[int, int]]
    """(track id, slice position) of the GPU records on the path."""
    text: str
    window: tuple[int, int] | None = None
    """The path's window (start_ns, end_ns), fitted in the timeline; None without a path."""


@dataclass
class CaptureGrew(Message):
    """The follow worker re-read a live capture: a new trace and its whole track index (tracks and links built)."""

    trace: Trace
    index: TrackIndex
    reload_s: float
    """Seconds the re-read and the index took."""
    ended: bool
    """It was the finalized capture: the follow stops."""


@dataclass
class FollowFailed(Message):
    """A re-read of a live capture failed (the view keeps what it shows; the next look retries)."""

    text: str
