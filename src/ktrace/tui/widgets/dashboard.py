"""The dashboard tab: SageMaker-Profiler-style panels as terminal charts, and rule findings with evidence."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Button, Static

from ktrace.tui.dashboard_data import Panel
from ktrace.tui.messages import SummaryReady
from ktrace.tui.widgets.rank_lines import rank_widget
from ktrace.tui.widgets.rank_view import RANK_VIEW


class Dashboard(VerticalScroll, can_focus=True):
    """Panels stacked vertically; each finding has a button that shows its evidence in the timeline."""

    DEFAULT_CSS = """
    Dashboard > .panel { border: round $primary; height: auto; padding: 0 1; margin: 0 0 1 0; }
    Dashboard > .panel.unavailable { border: round $panel; }
    Dashboard > Button { margin: 0 0 0 2; min-width: 30; }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.panels: list[Panel] = []
        self.last_shown: SummaryReady | None = None
        """The summary whose panels are shown (None until one is)."""

    def on_mount(self) -> None:
        self.mount(Static("waiting for the trace…", classes="panel"))

    def set_pending(self) -> None:
        """Analyses are running."""
        self.remove_children()
        self.mount(Static("computing the dashboard (summary and rules) in the background…", classes="panel"))

    def set_unavailable(self, why: str) -> None:
        """No analyses will run."""
        self.remove_children()
        self.mount(Static(why, classes="panel unavailable"))

    def show(self, message: SummaryReady) -> None:
        """Mount the panels of a finished summary (built by the worker: only widgets are made here). The old panels
        are removed first, and the new ones mounted once they are gone: a live capture's re-read (app_live) shows
        a new summary while the last one's widgets, evidence buttons and their ids included, may still be there."""
        self.panels = list(message.panels)
        self.last_shown = message
        self.call_later(self._replace, message, self.has_focus_within)

    async def _replace(self, message: SummaryReady, had_focus: bool) -> None:
        place = self.scroll_y
        await self.remove_children()
        widgets: list[Widget] = [rank_widget(p) for p in message.rank_panels]
        for panel in message.panels:
            static = Static(panel.body, classes="panel" if panel.available else "panel unavailable")
            static.border_title = panel.title
            widgets.append(static)
            for i, (label, start, end) in enumerate(panel.evidence):
                button = Button(Text(f"show: {label}"), id=f"evidence-{len(widgets)}-{i}", compact=True)
                button.evidence = (start, end)  # type: ignore[attr-defined]
                widgets.append(button)
        await self.mount_all(widgets)
        self.call_after_refresh(self._back_to, place, had_focus)

    def _back_to(self, place: float, had_focus: bool) -> None:
        """The reader's place again: the page was empty for a moment (which may have scrolled it to the top), and
        focusing the rank lines must not scroll to them. A user on the dashboard keeps the focus in it."""
        if had_focus:  # the rank lines answer j/k/enter at once
            self.focus_first(scroll_visible=False)
        self.scroll_to(y=place, animate=False)

    def focus_first(self, *, scroll_visible: bool = True) -> None:
        """Focus the first rank panel (its lines answer j/k/enter without a tab first), else the dashboard."""
        lines = self.query(f".{RANK_VIEW}")
        (lines.first() if lines else self).focus(scroll_visible=scroll_visible)

    @on(Button.Pressed)
    def _evidence(self, event: Button.Pressed) -> None:
        start, end = event.button.evidence  # type: ignore[attr-defined]
        self.app.call_later(self.app.run_action, f"show_evidence({start}, {end})")
