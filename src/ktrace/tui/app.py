"""The `ktrace view` app: loads a trace in thread workers and shows the tree, timeline, kernels and dashboard."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Footer, Header, Input, Static, TabbedContent, TabPane

from ktrace.analysis.index import TraceIndex
from ktrace.model.trace import Trace
from ktrace.tui.app_workers import BackgroundWork
from ktrace.tui.keymap import bindings
from ktrace.tui.live_follow import FOLLOW_EVERY_S, FollowState, Rerun
from ktrace.tui.loading_mode import LoadingMode
from ktrace.tui.messages import (
    DetailsReady,
    LinksReady,
    LoadFailed,
    LoadProgress,
    SliceSelected,
    StepsReady,
    SummaryReady,
    TraceLoaded,
    TracksReady,
    ViewportChanged,
    while_open,
)
from ktrace.tui.operators_model import OperatorPanel, operator_panel
from ktrace.tui.screens.operators import OperatorScreen
from ktrace.tui.steps import PENDING_STEPS, StepSpans, counts_line
from ktrace.tui.tracks import TrackIndex
from ktrace.tui.tree_model import device_busy
from ktrace.tui.viewmodel import format_duration, format_signed_offset
from ktrace.tui.widgets.dashboard import Dashboard
from ktrace.tui.widgets.details import Details
from ktrace.tui.widgets.host_device_tree import HostDeviceTree
from ktrace.tui.widgets.kernel_table import KernelTable
from ktrace.tui.widgets.timeline import Timeline

TIMELINE_CHROME = 5
"""Lines of the screen that are not the timeline pane: header, tab bar and its rule, status line, footer."""


class KtraceApp(BackgroundWork):
    """Browse one trace: host/device tree + timeline, kernel table, dashboard (keys and palette: AppActions; a
    capture in progress is followed: LiveFollowing; messages one widget sends another: WidgetRouting; the thread
    workers that read, index and analyse: BackgroundWork)."""

    CSS_PATH = "app.tcss"
    BINDINGS = bindings("app")  # type: ignore[assignment]
    TITLE = "ktrace view"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide"), (170, "-very-wide")]
    """Below 120 columns the tree narrows; below 170 the kernel details go under the table (the name keeps room)."""
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]
    """Below 32 rows the details pane shrinks so the timeline keeps its rows."""

    def __init__(
        self,
        path: str | Path | None = None,
        trace: Trace | None = None,
        *,
        analyses: bool = True,
        with_ops: bool = True,
        follow_every_s: float = FOLLOW_EVERY_S,
    ) -> None:
        super().__init__(follow_every_s)
        self.load_options = {} if with_ops else {"with_ops": False}
        if path is None and trace is None:
            raise ValueError("give a path or a Trace")
        self.path = None if path is None else Path(path)
        self.given_trace = trace
        self.analyses = analyses
        self.trace: Trace | None = None
        self.analysis_index: TraceIndex | None = None
        """The trace's analysis index, shared by the steps and dashboard workers."""
        self.index: TrackIndex | None = None
        self.steps: StepSpans = PENDING_STEPS
        self.selected: tuple[str, int] | None = None
        """(table, row) of the selected slice, whose details are shown."""
        self._details_asked = 0
        """Number of the latest details request: older answers are dropped."""
        self._status_counts = True
        """True while the status line shows the trace's counts (not yet a window)."""
        self._first_drawn = threading.Event()
        """Set once the first screen is drawn: the loader waits for it so that drawing gets the GIL to itself."""
        self.operator_panel: OperatorPanel | None = None
        self._steps_run, self._summary_run = Rerun(), Rerun()
        """The steps and dashboard workers: one at a time, again on the newest trace of a growing capture."""
        self.timings: dict[str, float] = {}
        """Seconds spent reading, indexing and until the first screen (for the benchmark)."""
        self.sub_title = self.path.name if self.path else (trace.meta.source if trace else "")
        self._loading = LoadingMode()
        # numba's import and cache load (0.4-1 s) overlap Textual's start-up and the read, off the event loop
        threading.Thread(target=_warm_kernels, name="ktrace-warm-kernels", daemon=True).start()

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(id="tabs", initial="timeline"):
            with TabPane("Timeline", id="timeline"), Horizontal(id="timeline-pane"):
                yield HostDeviceTree(id="tree")
                with Vertical(id="timeline-right"):
                    yield Timeline(id="timeline-view")
                    yield Details(id="timeline-details")
            with TabPane("Kernels", id="kernels"), Vertical():
                yield Input(placeholder="filter kernels by name (press / to focus, enter to apply)", id="kernel-filter")
                with Horizontal(id="kernels-body"):
                    yield KernelTable(id="kernel-table")
                    yield Details("move the cursor to a kernel for its details", id="kernel-details")
            with TabPane("Dashboard", id="dashboard"):
                yield Dashboard(id="dashboard-view")
        yield Static("reading trace…", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.timings["mount"] = time.perf_counter()
        self._loading.enter()  # short GIL hand-overs and no full GC passes while loader threads run
        self.query_one("#tabs").loading = True
        self._load_trace()

    def get_loading_widget(self) -> Widget:
        """The loading indicator shown over the tabs while the trace loads (a calm one: few repaints)."""
        from ktrace.tui.widgets.loading import CalmLoadingIndicator

        return CalmLoadingIndicator()

    @on(LoadProgress)
    @while_open
    def _progress(self, message: LoadProgress) -> None:
        pct = f" {100 * message.done / message.total:.0f}%" if message.total else ""
        self.query_one("#status", Static).update(f"{message.stage}…{pct}")

    @on(LoadFailed)
    def _failed(self, message: LoadFailed) -> None:
        from rich.text import Text

        from ktrace.model.display_text import printable

        self._loading_done()
        self.exit(return_code=message.exit_code, message=Text(f"ktrace view: error: {printable(message.text)}"))

    @on(TraceLoaded)
    @while_open
    def _loaded(self, message: TraceLoaded) -> None:
        from ktrace.tui.first_rows import default_rows

        self.trace, self.index = message.trace, message.index
        self.analysis_index = TraceIndex(message.trace)
        self.timings.update(read_s=message.read_s, index_s=message.index_s)
        self.query_one(HostDeviceTree).set_index(message.index)
        timeline = self.query_one(Timeline)
        if message.live:
            self.follow = FollowState(live=True).grown(message.index, ended=False)
            self.follow_seen = message.seen
        timeline.set_index(message.index, default_rows(message.index, self.rows_that_fit()), self.steps)
        self.query_one(KernelTable).set_kernels(message.trace.kernels, message.index.t0, message.trace.devices)
        self.query_one("#tabs").loading = False
        timeline.focus()
        self.show_counts()
        self.call_after_refresh(self._first_screen)
        if self.analyses:
            self.query_one(Dashboard).set_pending()
        else:
            self.query_one(Dashboard).set_unavailable("analyses disabled")
            self.operator_panel = OperatorPanel("operators: analyses disabled")

    def rows_that_fit(self) -> int:
        """Timeline rows the first screen has below the ruler with the details pane at its floor: the first rows
        are chosen to fit, so the GPU rows among them are on screen (and a tall terminal gets more of them)."""
        from ktrace.tui.first_rows import DEFAULT_LIMIT

        pane = self.query_one("#timeline-right").size.height
        if pane <= 0:  # hidden under the loading indicator: the screen less header, tabs, status line and footer
            pane = self.size.height - TIMELINE_CHROME
        if pane <= 0:  # no screen (yet)
            return DEFAULT_LIMIT
        return max(3, pane - 1 - self.details_floor())

    def _first_screen(self) -> None:
        """The first screen is drawn: let the loader go on."""
        self.timings["first_screen"] = time.perf_counter()
        self._first_drawn.set()

    def show_counts(self) -> None:
        """The status line's summary of the trace (steps say when they are still being detected)."""
        if self.trace is None or self.index is None:
            return
        self._status_counts = True
        self.set_status(f"{counts_line(self.trace, self.steps)} · {len(self.index.tracks)} tracks · press ? for keys")

    @on(StepsReady)
    @while_open
    def _steps_ready(self, message: StepsReady) -> None:
        self.steps = message.steps
        self.timings.update(steps_s=message.seconds, steps_ready=time.perf_counter())
        if self._steps_run.done() and self.trace is not None and self._steps_run.start():
            self._detect_steps(self.trace)
        self.query_one(Timeline).set_steps(message.steps)
        if self._status_counts:
            self.show_counts()
        self._describe_selection()

    @on(TracksReady)
    @while_open
    def _tracks_ready(self, message: TracksReady) -> None:
        if self.index is None:
            return
        self.index.attach(message.built)
        self.timings.update(tracks_s=message.seconds, tracks_ready=time.perf_counter())
        self.query_one(Timeline).tracks_ready()
        self.query_one(HostDeviceTree).refresh_labels()  # exact busy % replaces the overview's estimate
        self._describe_selection()

    @on(LinksReady)
    @while_open
    def _links_ready(self, message: LinksReady) -> None:
        if self.index is None:
            return
        self.index.attach_links(message.links)
        self.timings.update(links_s=message.seconds, links_ready=time.perf_counter())
        self.query_one(Timeline).links_ready()
        self._describe_selection()
        self._loading_done()
        if self.trace is not None:  # after the first screen, sorted tracks and links, which matter more
            self.analyse(self.trace)
        if self.follow.live:
            self.start_following()

    def analyse(self, trace: Trace) -> None:
        """Detect the steps and build the dashboard of `trace` in workers (for a growing capture: after the runs in
        flight, on the newest trace then)."""
        if self._steps_run.start():
            self._detect_steps(trace)
        if self.analyses and self._summary_run.start():
            self._load_summary(trace)

    def _loading_done(self) -> None:
        self._loading.leave()

    def on_unmount(self) -> None:
        """Leave the loading mode if loading did not finish; end the follow of a live capture."""
        self._loading_done()
        self.stop_following()

    @on(SummaryReady)
    @while_open
    def _summary(self, message: SummaryReady) -> None:
        if self._summary_run.done() and self.trace is not None and self._summary_run.start():
            self._load_summary(self.trace)
        self.query_one(Dashboard).show(message)
        summary = message.dashboard.summary if message.dashboard is not None else message.summary
        self.operator_panel = operator_panel(summary) if summary is not None else OperatorPanel(message.error)
        for screen in self.screen_stack:
            if isinstance(screen, OperatorScreen):
                screen.show(self.operator_panel)
        if self.index is not None and message.dashboard is not None:
            self.index.device_busy.update(device_busy(message.dashboard.summary))
            self.query_one(HostDeviceTree).refresh_labels()  # GPUs: exact busy time from the analysis

    # --- cross-widget messages ------------------------------------------------------------------------
    @on(SliceSelected)
    def _selected(self, message: SliceSelected) -> None:
        self.selected = (message.table, message.row)
        self._describe_selection()

    def _describe_selection(self) -> None:
        """Compute the selected slice's details in a worker (again when links, tracks or steps arrive)."""
        if self.index is not None and self.selected is not None:
            self._details_asked += 1
            self._describe(self._details_asked, self.index, self.steps, *self.selected)

    @on(DetailsReady)
    @while_open
    def _details_ready(self, message: DetailsReady) -> None:
        if message.asked != self._details_asked:
            return  # a later request's details are on their way
        for details in self.query(Details):
            details.show(message.fields)

    @on(ViewportChanged)
    def _viewport(self, message: ViewportChanged) -> None:
        if self.index is None:
            return
        t0 = self.index.t0
        self._status_counts = False
        self.hold_or_follow(message)
        self.set_status(
            f"window {format_signed_offset(message.start_ns - t0)} … {format_signed_offset(message.end_ns - t0)}"
            f" ({format_duration(message.end_ns - message.start_ns)}) · ? for keys"
        )


def _warm_kernels() -> None:
    """Load the index kernels (numba import and cache) while the app starts and the trace is read."""
    from ktrace.tui.index_build import warm_kernels

    warm_kernels()


def make_app(
    path: str | Path | None = None,
    trace: Trace | None = None,
    *,
    analyses: bool = True,
    with_ops: bool = True,
    follow_every_s: float = FOLLOW_EVERY_S,
) -> KtraceApp:
    """The one app factory used by `ktrace view` and the tests (`with_ops=False`: --no-ops, see open_trace;
    `follow_every_s`: seconds between two looks at a capture in progress)."""
    return KtraceApp(path, trace, analyses=analyses, with_ops=with_ops, follow_every_s=follow_every_s)
