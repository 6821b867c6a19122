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

from ktrace.analysis.names import distinct_short_names
from ktrace.analysis.python_samples import python_profile
from ktrace.model.display_text import printable
from ktrace.model.trace import Trace
from ktrace.presentation.cells import format_value
from ktrace.presentation.summary_python import READING_NOTE, functions_table, headline, step_line
from ktrace.tui.screens.operators import name_width

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
        headers = tuple(c.header for c in found.columns)
        cells = [
            (printable(str(row["name"])), *(format_value(c.kind, row[c.key]).strip() for c in found.columns[1:]))
            for row in found.rows
        ]
        # the names are cut (distinct) to the room the numbers leave, so that every number shows at 80 columns
        width = name_width(cells, self.app.size.width, headers) if cells else 16
        names = distinct_short_names([row[0] for row in cells], width, plain=True)
        table.add_columns(*headers)
        for row in cells:
            table.add_row(Text(names[row[0]]), *(Text(cell, justify="right") for cell in row[1:]))
        steps = step_line(profile)
        lines = [printable(line) for line in (steps, READING_NOTE) if line]
        self.query_one("#py-steps", Static).update(Text("\n".join(lines), style="dim"))
        table.focus()
