"""The help screen (`?`): every key of the app, read from the keymap, grouped by where it works."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ktrace.tui.keymap import KEYS, MOUSE_HELP

SCOPES = (
    ("app", "anywhere"),
    ("timeline", "timeline"),
    ("tree", "host/device tree"),
    ("kernels", "kernel table"),
    ("ranks", "dashboard ranks"),
    ("operators", "operator screen"),
)


def help_table() -> Table:
    """All keys as a rich table (also used by tests to check that every key is listed)."""
    table = Table(title="ktrace view — keys", title_justify="left", expand=True, show_edge=False)
    table.add_column("where", style="cyan", no_wrap=True)
    table.add_column("key", style="bold", no_wrap=True)
    table.add_column("does")
    for scope, title in SCOPES:
        for k in KEYS:
            if k.scope == scope:
                table.add_row(title, k.display or k.keys, k.description)
    for key, text in MOUSE_HELP:
        table.add_row("mouse", key, text)
    return table


class HelpScreen(ModalScreen[None]):
    """Lists every key; escape, q or ? closes it."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90; max-width: 100%; max-height: 100%; border: round $primary;
                                  background: $surface; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(help_table())
            yield Static("[dim]escape, q or ? closes this help · ctrl+p lists every action[/]")

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
