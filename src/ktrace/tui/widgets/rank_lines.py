"""A dashboard panel whose lines stand for ranks (the stragglers): a cursor moves over the rank lines and enter (or
a click) shows the chosen rank's tracks in the timeline. `rank_widget` makes the widget of any rank panel (the
heatmap's is widgets/rank_heatmap.py)."""

from __future__ import annotations

from rich.text import Text
from textual import events

from ktrace.tui.keymap import bindings
from ktrace.tui.messages import RankChosen
from ktrace.tui.rank_grid import RankGrid
from ktrace.tui.rank_panels import RankPanel
from ktrace.tui.widgets.rank_heatmap import RankHeatmap
from ktrace.tui.widgets.rank_view import RANK_VIEW, RankView


def rank_widget(panel: RankGrid | RankPanel) -> RankHeatmap | RankLines:
    """The widget of one of rank_panels()'s panels."""
    classes = f"panel {RANK_VIEW}"
    return RankHeatmap(panel, classes=classes) if isinstance(panel, RankGrid) else RankLines(panel, classes=classes)


class RankLines(RankView):
    """One RankPanel with a cursor on its rank lines."""

    BINDINGS = bindings("ranks", only=("move", "choose", "app.focus_next"))  # type: ignore[assignment]
    DEFAULT_CSS = "RankLines { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }"

    def __init__(self, panel: RankPanel, *, classes: str = "") -> None:
        super().__init__(classes=classes)
        self.panel = panel
        self.lines = [i for i, who in enumerate(panel.ranks) if who is not None]
        self.cursor = 0
        self.border_title = panel.title
        self._show()

    def _show(self) -> None:
        body = self.panel.body.copy()
        if self.has_focus and self.lines:
            plain = body.plain.split("\n")
            line = self.lines[self.cursor]
            start = sum(len(x) + 1 for x in plain[:line])
            body.stylize("reverse", start, start + len(plain[line]))
        self.update(body)

    def action_move(self, delta: int) -> None:
        """Move the cursor to the next (previous) rank line."""
        if self.lines:
            self.cursor = max(0, min(len(self.lines) - 1, self.cursor + delta))
            self._show()

    def action_choose(self) -> None:
        """Show the cursor's rank in the timeline."""
        if self.lines:
            who = self.panel.ranks[self.lines[self.cursor]]
            if who is not None:
                self.post_message(RankChosen(*who))

    def on_click(self, event: events.Click) -> None:
        line = event.y - 1  # the border's top line
        if line in self.lines:
            self.cursor = self.lines.index(line)
            self.action_choose()

    @property
    def chosen(self) -> tuple[str, int] | None:
        """The rank under the cursor."""
        return self.panel.ranks[self.lines[self.cursor]] if self.lines else None

    def text(self) -> Text:
        """The panel's body (tests)."""
        return self.panel.body
