"""What the dashboard's rank panels share: a focusable Static redrawn (its cursor shown or hidden) when it is resized,
focused or left."""

from __future__ import annotations

from textual.widgets import Static

RANK_VIEW = "rank-view"
"""CSS class of every rank panel's widget (the dashboard focuses the first)."""


class RankView(Static, can_focus=True):
    """A rank panel: subclasses draw themselves in `_show`."""

    def _show(self) -> None:
        raise NotImplementedError

    def on_resize(self) -> None:
        self._show()

    def on_focus(self) -> None:
        self._show()

    def on_blur(self) -> None:
        self._show()
