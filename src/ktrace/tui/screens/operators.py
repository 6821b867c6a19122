"""The operator screen (`o`): operators by GPU and CPU self time -> the kernels of the highlighted one, and the
nn.Module table where the trace has module frames; `s` switches the table to operators by input shape (where the
trace records shapes), `r` to the roofline (per operator, shapes and dtype: achieved TFLOP/s, % of the GPU's peak,
compute- or memory-bound). Reads the dashboard worker's summary (tui.operators_model)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from ktrace.analysis.names import distinct_short_names
from ktrace.analysis.operator_shapes import NO_SHAPES
from ktrace.tui.keymap import bindings
from ktrace.tui.operators_model import (
    KERNEL_HEADERS,
    MODULE_HEADERS,
    OPERATOR_HEADERS,
    ROOFLINE_HEADERS,
    SHAPE_HEADERS,
    OperatorPanel,
)

PENDING = "operators: computing the summary in the background…"
_NAME_MIN = 16
"""The operator column is never cut narrower than this (the table scrolls sideways on a very narrow terminal)."""
_CHROME = 4
"""Columns the table takes besides its cells: the name column's padding and the vertical scrollbar."""
_PADDING = 0
"""The kernel and module panes' padding (the rich tables in them have no scrollbar but a padded Static)."""


def name_width(rows: list[tuple[str, ...]], screen_width: int, headers: tuple[str, ...] = OPERATOR_HEADERS) -> int:
    """How wide the first text column may be so that every other column fits on a `screen_width` screen."""
    others = sum(max(len(header), *(len(row[i]) for row in rows)) + 2 for i, header in enumerate(headers) if i)
    return max(_NAME_MIN, screen_width - others - _CHROME)


_SHAPES_SHARE = 0.6
"""In the by-shape table, the shapes column's share of the room the two text columns have."""


def _table(
    headers: tuple[str, ...], cells: list[tuple[str, ...]], title: str, screen_width: int, *, plain: bool = False
) -> Table:
    """A rich table whose first column's names are cut to the room the other columns leave, distinct (rich would
    cut them alike: two kernels of one operator that differ late in the name); `plain`: not C++ names (modules),
    only cut."""
    width = name_width(cells, screen_width, headers) - _PADDING
    shown = distinct_short_names([row[0] for row in cells], width, plain=plain)
    # rich reads "[...]" in a str as markup: names from the trace go in as Text, or escaped
    table = Table(title=escape(title), title_justify="left", expand=True, show_edge=False, pad_edge=False)
    for i, h in enumerate(headers):
        table.add_column(h, justify="left" if i == 0 else "right", no_wrap=True, ratio=1 if i == 0 else None)
    for row in cells:
        table.add_row(Text(shown[row[0]]), *(Text(cell) for cell in row[1:]))
    return table


class OperatorScreen(Screen[None]):
    """Operators table; the highlighted operator's kernels and the modules below it. escape, q or o closes."""

    BINDINGS = bindings("operators")  # type: ignore[assignment]
    DEFAULT_CSS = """
    OperatorScreen > Vertical > #op-note { height: auto; padding: 0 1; }
    OperatorScreen > Vertical > DataTable { height: 1fr; }
    OperatorScreen > Vertical > #op-kernels { height: auto; max-height: 8; padding: 0 1; }
    OperatorScreen > Vertical > #op-modules { height: auto; max-height: 10; padding: 0 1; }
    """

    def __init__(self, panel: OperatorPanel | None) -> None:
        super().__init__()
        self.panel = panel
        self.by_shape = False
        self.roofline = False
        """The roofline view (`r`); by_shape and roofline are never both on."""
        self._operator_of_row: dict[str, str] = {}
        self._shapes_of_row: dict[str, str] = {}
        """By-shape rows: the whole shapes text (the table cell may be cut), shown above the kernels."""

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
        shapes = self.by_shape and bool(panel.shapes)
        note = f"{panel.note}; {NO_SHAPES}" if self.by_shape and not panel.shapes else panel.note
        self.query_one("#op-note", Static).update(Text(panel.roofline_note if self.roofline else note))
        table = self.query_one(DataTable)
        table.clear(columns=True)
        if self.roofline:
            self._fill_shapes(table, panel.roofline, ROOFLINE_HEADERS)
        elif shapes:
            self._fill_shapes(table, panel.shapes)
        else:
            table.add_columns(*OPERATOR_HEADERS)
            width = name_width(panel.operators, self.app.size.width) if panel.operators else _NAME_MIN
            names = distinct_short_names([row[0] for row in panel.operators], width)
            self._operator_of_row = {row[0]: row[0] for row in panel.operators}
            self._shapes_of_row = {}
            for row in panel.operators:  # the key keeps the whole name: it picks the kernels shown below
                table.add_row(escape(names[row[0]]), *row[1:], key=row[0])
        if panel.modules:
            modules = _table(
                MODULE_HEADERS, panel.modules, f"modules: {panel.modules_note}", self.app.size.width, plain=True
            )
            self.query_one("#op-modules", Static).update(modules)
        else:
            self.query_one("#op-modules", Static).update(panel.modules_note)
        first = next(iter(self._operator_of_row), None)
        self._show_kernels(None if first is None else self._operator_of_row[first], first)

    def _fill_shapes(
        self, table: DataTable[str], rows: list[tuple[str, ...]], headers: tuple[str, ...] = SHAPE_HEADERS
    ) -> None:
        """The by-shape (or roofline) rows: the operator and shapes columns share the room the other columns
        leave."""
        table.add_columns(*headers)
        numbers = (headers[0], *headers[2:])
        room = name_width([(r[0], *r[2:]) for r in rows], self.app.size.width, numbers) - 2  # 2: the shapes' padding
        shape_width = max(_NAME_MIN, min(int(room * _SHAPES_SHARE), room - _NAME_MIN))
        width = max(_NAME_MIN, room - shape_width)
        # one operator's shapes often differ only in a later tensor: cut them where they differ, never alike
        shapes = distinct_short_names([row[1] for row in rows], shape_width)
        names = distinct_short_names([row[0] for row in rows], width)
        self._operator_of_row = {f"{i}": row[0] for i, row in enumerate(rows)}
        self._shapes_of_row = {f"{i}": row[1] for i, row in enumerate(rows)}
        for i, row in enumerate(rows):
            table.add_row(escape(names[row[0]]), escape(shapes[row[1]]), *row[2:], key=f"{i}")

    def action_toggle_shapes(self) -> None:
        """Operators by name <-> by (name, input shapes)."""
        self.by_shape, self.roofline = not self.by_shape, False
        if self.panel is not None:
            self.show(self.panel)

    def action_toggle_roofline(self) -> None:
        """Operators <-> the roofline of each (operator, input shapes, dtype)."""
        self.roofline, self.by_shape = not self.roofline, False
        if self.panel is not None:
            self.show(self.panel)

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = None if event.row_key.value is None else str(event.row_key.value)
        self._show_kernels(None if key is None else self._operator_of_row.get(key), key)

    def _show_kernels(self, name: str | None, key: str | None = None) -> None:
        out = self.query_one("#op-kernels", Static)
        if name is None or self.panel is None:
            out.update("")
            return
        cells = self.panel.kernels.get(name)
        shapes = self._shapes_of_row.get(key or "") if self.by_shape or self.roofline else None
        title = f"kernels of {name}" + (f" (all its shapes; this row's: {shapes})" if shapes else "")
        out.update(
            _table(KERNEL_HEADERS, cells, title, self.app.size.width)
            if cells
            else Text(f"{title}: none listed (it launched no kernel, or it is not a top operator by GPU time)")
        )

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
