"""The Python samples screen (`P`): the top functions of `ktrace run --python-sample` by self and total samples, the
headline and the slowest sampled step's top function; the same rows as the summary's section
(presentation.summary_python). escape, q or P closes it."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from ktrace.analysis.python_samples import python_profile
from ktrace.model.display_text import printable
from ktrace.model.trace import Trace
from ktrace.presentation.cells import format_value
from ktrace.presentation.summary_python import READING_NOTE, functions_table, headline, step_line

NO_SAMPLES = (
    "no Python samples in this trace: record them with `ktrace run --python-sample 10 -- python train.py` "
    "(every thread's Python stack every 10 ms, no tracing hook)"
)
TOP = 50
"""Functions listed (the table scrolls)."""


class PythonSamplesScreen(Screen[None]):
    """The top Python functions of the trace's samples, computed when the screen opens."""

    BINDINGS = [Binding("escape,q,P", "dismiss", "close")]
    DEFAULT_CSS = """
    PythonSamplesScreen > Vertical > Static { height: auto; padding: 0 1; }
    PythonSamplesScreen > Vertical > DataTable { height: 1fr; }
    """

    def __init__(self, trace: Trace | None) -> None:
        super().__init__()
        self.trace = trace

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("", id="py-headline")
            yield DataTable(id="py-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="py-steps")
        yield Footer()

    def on_mount(self) -> None:
        profile = python_profile(self.trace) if self.trace is not None else None
        table = self.query_one(DataTable)
        if profile is None:
            self.query_one("#py-headline", Static).update(Text(NO_SAMPLES))
            table.display = False
            return
        self.query_one("#py-headline", Static).update(Text(printable(headline(profile))))
        found = functions_table(profile, TOP)
        table.add_columns(*(c.header for c in found.columns))
        for row in found.rows:
            table.add_row(
                Text(printable(str(row["name"]))),
                *(Text(format_value(c.kind, row[c.key]).strip(), justify="right") for c in found.columns[1:]),
            )
        steps = step_line(profile)
        below = f"{steps}\n{READING_NOTE}" if steps else READING_NOTE
        self.query_one("#py-steps", Static).update(Text(printable(below), style="dim"))
        table.focus()
