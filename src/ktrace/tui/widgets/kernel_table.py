"""The kernel table: a Line API view over the kernels frame, sorted and filtered in a worker."""

from __future__ import annotations

import numpy as np
import polars as pl
from rich.segment import Segment
from rich.style import Style
from textual import on, work
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ktrace.analysis.names import distinct_short_names
from ktrace.tui.keymap import bindings
from ktrace.tui.messages import KernelOrderReady, SliceSelected
from ktrace.tui.table_model import COLUMNS, NAME, NAME_MIN, SORTABLE, SmCounts, format_page, kernel_order, sm_counts

_HEADER = Style(bold=True, color="black", bgcolor="#4e79a7")
_CURSOR = Style(bgcolor="#3a3a5a", bold=True)
_ROW = Style()
PAGE = 64


class KernelTable(ScrollView, can_focus=True):
    """Every kernel, one line each; only the visible page is read from the frame."""

    BINDINGS = [
        *bindings("kernels"),
        ("j,down", "cursor(1)", "down"),
        ("k,up", "cursor(-1)", "up"),
        ("pagedown", "cursor(20)", "page down"),
        ("pageup", "cursor(-20)", "page up"),
        ("home", "cursor(-1000000000000)", "first"),
        ("end", "cursor(1000000000000)", "last"),
    ]
    DEFAULT_CSS = "KernelTable { height: 1fr; }"

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.kernels = pl.DataFrame()
        self.t0 = 0
        self.sms: SmCounts = {}
        self.order = np.empty(0, np.int64)
        self.sort, self.descending, self.text = 0, True, ""
        self.cursor = 0
        self.loading_order = False
        self._pages: LRUCache[tuple[int, int], list[list[str]]] = LRUCache(64)
        self._names: dict[int, dict[str, str]] = {}
        """Display width -> full kernel name -> distinct short name."""
        self._generation = 0
        self._ordered = True

    def set_kernels(self, kernels: pl.DataFrame, t0: int, devices: pl.DataFrame | None = None) -> None:
        """Show a trace's kernels (ordered by duration, longest first); sorting waits until the table is shown.
        `devices` (the trace's) gives the SM counts of the blocks/SM column."""
        self.kernels, self.t0 = kernels, t0
        self.sms = sm_counts(devices) if devices is not None else {}
        self._names.clear()
        self._ordered = False
        if self.display and self.is_on_screen:
            self.on_show()

    def on_show(self) -> None:
        """Sort lazily: the first time the Kernels tab is shown (keeps 10 M-kernel loading light)."""
        if not getattr(self, "_ordered", True):
            self._ordered = True
            self.request_order()

    def request_order(self, sort: int | None = None, descending: bool | None = None, text: str | None = None) -> None:
        """Recompute the row order in a thread worker (the latest request wins)."""
        self.sort = self.sort if sort is None else sort
        self.descending = self.descending if descending is None else descending
        self.text = self.text if text is None else text
        self.loading_order = True
        self._load_order(self.kernels, self.sort, self.descending, self.text)

    @work(thread=True, exclusive=True, group="kernel-order")
    def _load_order(self, kernels: pl.DataFrame, sort: int, descending: bool, text: str) -> None:
        order = kernel_order(kernels, sort, descending, text)
        self.post_message(KernelOrderReady(order, sort, descending, text))

    @on(KernelOrderReady)
    def _order_ready(self, message: KernelOrderReady) -> None:
        if (message.sort, message.descending, message.text) != (self.sort, self.descending, self.text):
            return
        self.order = message.order
        self._generation += 1
        self._pages.clear()
        self.loading_order = False
        self.cursor = 0
        self.virtual_size = Size(self._total_width(), int(self.order.size) + 1)
        self.scroll_to(y=0, animate=False)
        self.refresh()

    def _total_width(self) -> int:
        """The width every column needs (the name as _widths gives it): wider terminals need no horizontal
        scrollbar."""
        widths = self._widths()
        return sum(widths) + len(widths) - 1

    def _widths(self) -> list[int]:
        """Column widths: each at least its header and sort arrow; the name takes what is left (>= NAME_MIN), and
        where the columns after it do not fit anyway (80 columns: grid, block and the other launch figures), up to the
        screen's edge."""
        fixed = [max(c.width, len(c.header) + 2) if c.width else 0 for c in COLUMNS]
        room = self.scrollable_content_region.width  # the vertical scrollbar's columns left out
        rest = room - sum(w + 1 for w in fixed if w)
        if rest < NAME_MIN:
            rest = room - sum(w + 1 for w in fixed[:NAME])
        return [w or max(NAME_MIN, rest) for w in fixed]

    def _short(self, name: str, width: int) -> str:
        """The kernel's display name in `width` characters, distinct from every other kernel's at that width."""
        names = self._names.get(width)
        if names is None:
            unique = (
                self.kernels["name"].cast(pl.String).unique(maintain_order=True).drop_nulls().to_list()
                if self.kernels.height
                else []
            )
            names = self._names[width] = distinct_short_names(unique, width)
        return names.get(name, name)

    def _cells(self, i: int) -> list[str]:
        first = (i // PAGE) * PAGE
        key = (self._generation, first)
        page = self._pages.get(key)
        if page is None:
            page = format_page(self.kernels, self.order[first : first + PAGE], self.t0, self.sms)
            self._pages[key] = page
        return page[i - first]

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        widths = self._widths()
        if y == 0:
            heads = [
                (c.header + (" ▼" if self.descending else " ▲") if i == self.sort else c.header)
                for i, c in enumerate(COLUMNS)
            ]
            return Strip([Segment(_join(heads, widths), _HEADER)]).crop(0, width)
        i = int(self.scroll_offset.y) + y - 1
        if i >= self.order.size:
            if i == 0:
                msg = "sorting…" if self.loading_order else "no kernel matches the filter"
                return Strip([Segment(msg, Style(italic=True))]).crop(0, width)
            return Strip.blank(width)
        cells = list(self._cells(i))
        cells[NAME] = self._short(cells[NAME], widths[NAME])
        text = _join(cells, widths)
        return Strip([Segment(text, _CURSOR if i == self.cursor else _ROW)]).crop(0, width)

    def selected_row(self) -> int | None:
        """Row index (in the kernels frame) under the cursor."""
        return int(self.order[self.cursor]) if self.cursor < self.order.size else None

    def action_cursor(self, delta: int) -> None:
        if self.order.size == 0:
            return
        self.cursor = max(0, min(int(self.order.size) - 1, self.cursor + delta))
        visible = max(1, self.size.height - 1)
        top = int(self.scroll_offset.y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + visible:
            self.scroll_to(y=self.cursor - visible + 1, animate=False)
        self.refresh()
        row = self.selected_row()
        if row is not None:
            self.post_message(SliceSelected("kernels", row))

    def action_cycle_sort(self) -> None:
        nxt = SORTABLE[(SORTABLE.index(self.sort) + 1) % len(SORTABLE)]
        self.request_order(sort=nxt)
        self.notify(f"sorted by {COLUMNS[nxt].header}", timeout=2)

    def action_reverse_sort(self) -> None:
        self.request_order(descending=not self.descending)

    def action_focus_filter(self) -> None:
        self.app.call_later(self.app.run_action, "focus_filter")

    def action_show_in_timeline(self) -> None:
        row = self.selected_row()
        if row is not None:
            self.app.call_later(self.app.run_action, f"show_kernel({row})")

    def on_click(self, event) -> None:  # type: ignore[no-untyped-def]
        if event.y >= 1:
            self.action_cursor(int(self.scroll_offset.y) + event.y - 1 - self.cursor)


def _join(cells: list[str], widths: list[int]) -> str:
    return " ".join(
        c[:w].ljust(w) if i < len(widths) - 1 else c[:w] for i, (c, w) in enumerate(zip(cells, widths, strict=False))
    )
