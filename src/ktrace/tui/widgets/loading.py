"""A loading indicator that redraws 4 times a second instead of 16 (the event loop stays free while loading)."""

from __future__ import annotations

from textual.events import Mount
from textual.widgets import LoadingIndicator

REFRESH_S = 0.25
"""Seconds between two frames of the animation."""


class CalmLoadingIndicator(LoadingIndicator):
    """Textual's pulsing dots at a quarter of its frame rate: each frame costs the UI thread a GIL hand-over and a
    repaint while loader threads compete for the GIL."""

    def _on_mount(self, event: Mount) -> None:
        super()._on_mount(event)
        self.auto_refresh = REFRESH_S
