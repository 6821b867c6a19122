"""The operator screen (`o`): operators by GPU and CPU self time -> the kernels of the highlighted one, and the
nn.Module table where the trace has module frames. Reads the dashboard worker's summary (tui.operators_model)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from ktrace.tui.operators_model import KERNEL_HEADERS, MODULE_HEADERS, OPERATOR_HEADERS, OperatorPanel

PENDING = "operators: computing the summary in the background…"
_NAME_MIN = 16
"""The operator column is never cut narrower than this (the table scrolls sideways on a very narrow terminal)."""
_CHROME = 4
"""Columns the table takes besides its cells: the name column's padding and the vertical scrollbar."""


def name_width(rows: list[tuple[str, ...]], screen_width: int) -> int:
    """How wide the operator column may be so that every number column fits on a `screen_width` screen."""
    others = sum(max(len(header), *(len(row[i]) for row in rows)) + 2 for i, header in enumerate(OPERATOR_HEADERS) if i)
    return max(_NAME_MIN, screen_width - others - _CHROME)


def _fit(name: str, width: int) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _table(headers: tuple[str, ...], cells: list[tuple[str, ...]], title: str) -> Table:
    # rich reads "[...]" in a str as markup: names from the trace go in as Text, or escaped
    table = Table(title=escape(title), title_justify="left", expand=True, show_edge=False, pad_edge=False)
    for i, h in enumerate(headers):
        table.add_column(h, justify="left" if i == 0 else "right", no_wrap=True, ratio=1 if i == 0 else None)
    for row in cells:
        table.add_row(*(Text(cell) for cell in row))
    return table


class OperatorScreen(Screen[None]):
    """Operators table; the highlighted operator's kernels and the modules below it. escape, q or o closes."""

    BINDINGS = [Binding("escape,q,o", "dismiss", "close")]
    DEFAULT_CSS = """
    OperatorScreen > Vertical > #op-note { height: auto; padding: 0 1; }
    OperatorScreen > Vertical > DataTable { height: 1fr; }
    OperatorScreen > Vertical > #op-kernels { height: auto; max-height: 8; padding: 0 1; }
    OperatorScreen > Vertical > #op-modules { height: auto; max-height: 10; padding: 0 1; }
    """

    def __init__(self, panel: OperatorPanel | None) -> None:
        super().__init__()
        self.panel = panel

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(PENDING, id="op-note")
            yield DataTable(id="op-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="op-kernels")
            yield Static("", id="op-modules")
        yield Footer()

    def on_mount(self) -> None:
        if self.panel is not None:
            self.show(self.panel)
        self.query_one(DataTable).focus()

    def show(self, panel: OperatorPanel) -> None:
        """Fill the screen from a panel (also when the summary arrives while the screen is open)."""
        self.panel = panel
        self.query_one("#op-note", Static).update(panel.note)
        table = self.query_one(DataTable)
        table.clear(columns=True)
        table.add_columns(*OPERATOR_HEADERS)
        width = name_width(panel.operators, self.app.size.width) if panel.operators else _NAME_MIN
        for row in panel.operators:  # the key keeps the whole name: it picks the kernels shown below
            table.add_row(escape(_fit(row[0], width)), *row[1:], key=row[0])
        if panel.modules:
            modules = _table(MODULE_HEADERS, panel.modules, f"modules: {panel.modules_note}")
            self.query_one("#op-modules", Static).update(modules)
        else:
            self.query_one("#op-modules", Static).update(panel.modules_note)
        self._show_kernels(panel.operators[0][0] if panel.operators else None)

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_kernels(None if event.row_key.value is None else str(event.row_key.value))

    def _show_kernels(self, name: str | None) -> None:
        out = self.query_one("#op-kernels", Static)
        if name is None or self.panel is None:
            out.update("")
            return
        cells = self.panel.kernels.get(name)
        out.update(
            _table(KERNEL_HEADERS, cells, f"kernels of {name}")
            if cells
            else Text(
                f"kernels of {name}: none listed (it launched no kernel, or it is not a top operator by GPU time)"
            )
        )

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
