"""The go-to-step prompt (`g`): asks for a step number and returns it."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class StepPrompt(ModalScreen[str | None]):
    """A one-line input; enter returns the text, escape returns None."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    StepPrompt { align: center middle; }
    StepPrompt > Vertical { width: 50; height: auto; border: round $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"go to step (number in its name, or 1..{self.count}):")
            yield Input(placeholder="e.g. 12", id="step-input")

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
