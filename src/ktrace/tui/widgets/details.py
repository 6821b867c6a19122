"""The details pane: the selected slice's fields as a two-column grid."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static


class Details(Static):
    """Times, latency both ways, launch configuration, stream, enclosing step and ranges of one slice."""

    DEFAULT_CSS = "Details { height: auto; max-height: 14; border-top: solid $primary; padding: 0 1; }"

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__("select a slice (click, \\[ or ], enter in the kernel table) to see its details", id=id)
        self.fields: list[tuple[str, str]] = []

    def show(self, fields: list[tuple[str, str]]) -> None:
        """Replace the shown fields."""
        self.fields = fields
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold cyan", no_wrap=True)
        grid.add_column(overflow="fold")
        for label, value in fields:
            grid.add_row(Text(label), Text(value))  # Text: trace names are not markup
        self.update(grid)
