"""The `ktrace view` app's routing of widget messages to other widgets: a rank chosen in the dashboard shown in the
timeline and the tree, tracks toggled or highlighted in the tree shown in the timeline, the timeline's rows marked
in the tree, the kernel filter typed into the kernel table. KtraceApp loads the trace and handles the workers'
results."""

from __future__ import annotations

from textual import on
from textual.widgets import Input

from ktrace.tui.app_live import LiveFollowing
from ktrace.tui.messages import RankChosen, RowsShown, TrackHighlighted, TrackToggled
from ktrace.tui.widgets.details import Details
from ktrace.tui.widgets.host_device_tree import HostDeviceTree
from ktrace.tui.widgets.kernel_table import KernelTable
from ktrace.tui.widgets.timeline import Timeline

DETAILS_SHORT, DETAILS_TALL = 5, 14
"""Lines the timeline's details pane may always take (below 32 rows, from 32 rows); more when the rows leave more."""


class WidgetRouting(LiveFollowing):
    """Messages of one widget that another one answers (attributes down, messages up: the app routes them)."""

    @on(RankChosen)
    def _rank_chosen(self, message: RankChosen) -> None:
        """Show a rank chosen in the dashboard: its streams (else any of its tracks) in the timeline, its tree leaf."""
        if self.index is None:
            return
        ids = self.index.tracks_of(message.node, message.rank, "stream") or [
            i for i, t in enumerate(self.index.tracks) if (t.node, t.rank) == (message.node, message.rank)
        ]
        if not ids:
            from ktrace.model.display_text import printable

            self.notify(f"no tracks for {printable(message.node)}/{message.rank}", severity="warning", markup=False)
            return
        self.action_show_tab("timeline")
        self.query_one(Timeline).show_rows(ids)
        self.query_one(HostDeviceTree).reveal(ids[0])

    @on(TrackToggled)
    def _toggle(self, message: TrackToggled) -> None:
        self.query_one(Timeline).toggle_tracks(message.track_ids)

    @on(RowsShown)
    def _rows_shown(self, message: RowsShown) -> None:
        """Mark the shown tracks in the tree and highlight the cursor's leaf (unless the user is in the tree); give
        the details pane the lines the timeline's rows leave free."""
        tree = self.query_one(HostDeviceTree)
        tree.mark_shown(message.rows)
        if message.cursor is not None and not tree.has_focus:
            tree.reveal(message.cursor)
        pane = self.query_one("#timeline-right").size.height
        details = self.query_one("#timeline-details", Details)
        details.styles.max_height = max(self.details_floor(), pane - len(message.rows) - 1)

    def details_floor(self) -> int:
        """The lines the details pane may always take on this screen (fewer on a short terminal)."""
        return DETAILS_SHORT if self.screen.has_class("-short") else DETAILS_TALL

    @on(TrackHighlighted)
    def _track_highlighted(self, message: TrackHighlighted) -> None:
        self.query_one(Timeline).show_track(message.track_id)

    @on(Input.Submitted, "#kernel-filter")
    @on(Input.Changed, "#kernel-filter")
    def _filter(self, event: Input.Changed | Input.Submitted) -> None:
        table = self.query_one(KernelTable)
        table.request_order(text=event.value.strip())
        if isinstance(event, Input.Submitted):
            table.focus()
