"""The dashboard's rank heatmap: one row per rank (tui/rank_grid.py draws it), a window of rows that scrolls with
the cursor (j/k, PgUp/PgDn, Home/End), a step/time axis that zooms (+/-) and pans (h/l), and enter (or a click)
showing the cursor's rank in the timeline."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text
from textual import events

from ktrace.tui.keymap import bindings
from ktrace.tui.messages import RankChosen
from ktrace.tui.rank_grid import HEADER_LINES, GridView, RankGrid, cell_columns, columns, draw, fit_group
from ktrace.tui.widgets.rank_view import RankView

SCREEN_CHROME = 12
"""Terminal lines the rows leave to the rest: header, tabs, footer, the panel's border and its two header lines, and
a few lines of the next panel."""
MIN_ROWS = 4


class RankHeatmap(RankView):
    """The rank x step (or time) heatmap with a cursor on its rank rows."""

    BINDINGS = bindings("ranks")  # type: ignore[assignment]
    DEFAULT_CSS = "RankHeatmap { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }"

    def __init__(self, grid: RankGrid, *, classes: str = "") -> None:
        super().__init__(classes=classes)
        self.grid = grid
        self.view = GridView()
        self.drawn = Text()
        """What the widget shows now."""
        self.border_title = grid.title
        self.border_subtitle = grid.summary

    @property
    def chosen(self) -> tuple[str, int]:
        """The rank under the cursor."""
        return self.grid.ranks[self.view.cursor]

    def _width(self) -> int:
        return self.content_size.width or 76

    def _show(self) -> None:
        rows = max(MIN_ROWS, min(len(self.grid.ranks), self.app.size.height - SCREEN_CHROME))
        top = min(max(self.view.top, self.view.cursor - rows + 1), self.view.cursor)
        self.view = replace(self.view, rows=rows, top=max(0, min(top, len(self.grid.ranks) - rows)))
        cursor = self.view if self.has_focus else replace(self.view, cursor=-1)  # the cursor shows with the focus
        self.drawn = draw(self.grid, cursor, self._width())
        self.update(self.drawn)

    def on_mount(self) -> None:
        self._show()

    def action_move(self, delta: int) -> None:
        """Move the cursor `delta` ranks down (up when negative); the rows scroll with it."""
        cursor = max(0, min(len(self.grid.ranks) - 1, self.view.cursor + delta))
        self.view = replace(self.view, cursor=cursor)
        self._show()

    def action_page(self, pages: int) -> None:
        """Move the cursor a window of rows down (up)."""
        self.action_move(pages * self.view.rows)

    def action_jump(self, end: int) -> None:
        """The first rank (end=0) or the last (end=1)."""
        self.action_move(-len(self.grid.ranks) if end == 0 else len(self.grid.ranks))

    def action_zoom(self, factor: float) -> None:
        """Fewer (factor > 1) or more steps (time bins) a column, keeping the first drawn column's step."""
        group = self.view.group or fit_group(self.grid, self._width())
        new = max(1, min(self.grid.n_bins, round(group / factor)))
        if new == group and factor > 1:
            new = max(1, group - 1)
        self.view = replace(self.view, group=new, first_col=self.view.first_col * group // new)
        self._show()

    def action_pan(self, fraction: float) -> None:
        """Show later (earlier) columns by a fraction of the columns that fit."""
        group = self.view.group or fit_group(self.grid, self._width())
        shown = cell_columns(self.grid, self._width())
        last = max(0, columns(self.grid, group) - shown)
        step = max(1, round(abs(fraction) * shown)) * (1 if fraction > 0 else -1)
        self.view = replace(self.view, first_col=max(0, min(last, self.view.first_col + step)))
        self._show()

    def action_choose(self) -> None:
        """Show the cursor's rank in the timeline."""
        self.post_message(RankChosen(*self.chosen))

    def on_click(self, event: events.Click) -> None:
        row = self.view.top + event.y - 1 - HEADER_LINES  # the border's top line, then the header lines
        if event.y - 1 >= HEADER_LINES and row < min(len(self.grid.ranks), self.view.top + self.view.rows):
            self.view = replace(self.view, cursor=row)
            self.action_choose()
            self._show()
