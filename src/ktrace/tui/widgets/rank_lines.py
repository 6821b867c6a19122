"""A dashboard panel whose lines stand for ranks (the rank heatmap, the stragglers): a cursor moves over the rank
lines and enter (or a click) shows the chosen rank's tracks in the timeline."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.widgets import Static

from ktrace.tui.keymap import bindings
from ktrace.tui.messages import RankChosen
from ktrace.tui.rank_panels import RankPanel


class RankLines(Static, can_focus=True):
    """One RankPanel with a cursor on its rank lines."""

    BINDINGS = bindings("ranks")  # type: ignore[assignment]
    DEFAULT_CSS = "RankLines { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }"

    def __init__(self, panel: RankPanel, *, classes: str = "") -> None:
        super().__init__(classes=classes)
        self.panel = panel
        self.lines = [i for i, who in enumerate(panel.ranks) if who is not None]
        self.cursor = 0
        self.border_title = panel.title
        self._show()

    def _show(self) -> None:
        body = self.panel.body_for(self.content_size.width).copy()  # as many time columns as the width allows
        if self.has_focus and self.lines:
            plain = body.plain.split("\n")
            line = self.lines[self.cursor]
            start = sum(len(x) + 1 for x in plain[:line])
            body.stylize("reverse", start, start + len(plain[line]))
        self.update(body)

    def on_resize(self) -> None:
        self._show()

    def on_focus(self) -> None:
        self._show()

    def on_blur(self) -> None:
        self._show()

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
