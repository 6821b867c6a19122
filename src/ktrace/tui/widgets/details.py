"""The details pane: the selected slice's fields as a two-column grid."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import events
from textual.widgets import Static

from ktrace.analysis.names import short_kernel_name


class Details(Static):
    """Times, latency both ways, launch configuration, stream, enclosing step and ranges of one slice.

    A name too long for one line is shortened on the "what" line (a kernel's telling template arguments kept, see
    ktrace.analysis.names.short_kernel_name) and given whole on a last "full name" line, so that a short pane
    (80x24) shows the launch configuration and times instead of four lines of C++ template.
    """

    DEFAULT_CSS = "Details { height: auto; max-height: 14; border-top: solid $primary; padding: 0 1; }"

    def __init__(
        self, hint: str = "click a slice, or \\[ / ] on a row, for its details", *, id: str | None = None
    ) -> None:  # noqa: A002
        super().__init__(hint, id=id)
        self.fields: list[tuple[str, str]] = []

    def show(self, fields: list[tuple[str, str]]) -> None:
        """Replace the shown fields."""
        self.fields = fields
        self._draw()

    def on_resize(self, event: events.Resize) -> None:
        if self.fields:
            self._draw()

    def _draw(self) -> None:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold cyan", no_wrap=True)
        grid.add_column(overflow="fold")
        room = self.content_size.width - max((len(label) for label, _ in self.fields), default=0) - 1
        cut = ""
        for label, value in self.fields:
            if label == "what" and 0 < room < len(value):
                cut = value
                kind, _, name = value.partition(": ")
                if kind == "kernel" and room > len(kind) + 12:  # the telling part of a templated name
                    value = f"{kind}: {short_kernel_name(name, room - len(kind) - 2)}"
                grid.add_row(Text(label), Text(value, no_wrap=True, overflow="ellipsis"))
            else:
                grid.add_row(Text(label), Text(value))  # Text: trace names are not markup
        if cut:
            grid.add_row(Text("full name"), Text(cut.split(": ", 1)[-1]))
        self.update(grid)
