"""The terminal renderer of a presentation Page (rich): `ktrace summary` lays out the summary's page here.

A Page's facts make the first line, its notes follow (what the trace lacks comes last, dimmed), then each section's
blocks: tables laid out to the console's width (report.terminal_tables), paragraphs, rule verdicts. Trace text is
made printable and never read as markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.text import Text as RichText

from ktrace.analysis.summary import Summary
from ktrace.model.display_text import printable, printable_tree
from ktrace.presentation.layout import lay_out
from ktrace.presentation.page import Figure, Page, RuleVerdict, Section, Table, Text
from ktrace.presentation.summary_gpu import latency_rows as latency_rows
from ktrace.presentation.summary_page import summary_page
from ktrace.presentation.summary_ranks import TERMINAL_STRAGGLERS as TERMINAL_STRAGGLERS
from ktrace.presentation.summary_ranks import load_balance_section, stragglers_section
from ktrace.presentation.summary_tables import frame_rows
from ktrace.report.terminal_tables import render_table

if TYPE_CHECKING:  # (types only: the multi-rank analyses are imported where a summary has 2+ ranks)
    from ktrace.analysis.ranks import LoadBalance
    from ktrace.analysis.stragglers import Stragglers

_TEXT_STYLES = {"plain": "", "dim": "dim", "note": "yellow", "headline": "bold"}


class TerminalRenderer:
    """Prints a Page on a rich Console as `lay_out` walks it (presentation.layout.Renderer[None])."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._page: Page | None = None

    def begin(self, page: Page) -> None:
        """The facts on one line, then the notes that change how to read the tables (before them)."""
        self._page = page
        if page.facts:
            self.console.print("   ".join(f"[bold]{escape(k)}[/] {escape(printable(v))}" for k, v in page.facts))
        for note in page.notes:
            if not note.absent:
                self.console.print(f"[yellow]note:[/] {escape(printable(note.line))}")

    def section(self, section: Section) -> None:
        """Sections have no heading in the terminal: each table carries its title."""

    def table(self, table: Table) -> None:
        """A table laid out to the console's width, its lines and the rows it left out."""
        render_table(self.console, table)

    def figure(self, figure: Figure) -> None:
        """A figure's title (the terminal draws no plots; its numbers are in the tables)."""
        self.console.print(RichText(printable(figure.title), style="dim"))

    def text(self, text: Text) -> None:
        """A paragraph in its style."""
        self.console.print(RichText(printable(text.text), style=_TEXT_STYLES[text.style]))

    def rules(self, verdicts: tuple[RuleVerdict, ...]) -> None:
        """One line per rule: verdict, rule and why."""
        for v in verdicts:
            self.console.print(RichText(printable(f"{v.verdict:9} {v.rule}: {v.why}")))

    def section_end(self, section: Section) -> None:
        """The section's notes, dimmed."""
        for note in section.notes:
            self.console.print(RichText(printable(note.line), style="dim"))

    def end(self) -> None:
        """What the trace lacks, last and dimmed."""
        absent = [n for n in self._page.notes if n.absent] if self._page else []
        if absent:
            self.console.print("[dim]not in this trace:[/]")
            for note in absent:
                self.console.print(RichText(printable(f"  {note.line}"), style="dim"))


def render_page(page: Page, console: Console) -> None:
    """Print `page` on `console`."""
    lay_out(page, TerminalRenderer(console))


def render_summary(summary: Summary, console: Console, *, by_shape: bool = False) -> None:
    """Print the summary's page on `console` (the numbers of summary_to_dict, trace text made printable);
    `by_shape` adds the operators by input shape (summary.operators.by_shape, when the summary has it)."""
    render_page(summary_page(summary, by_shape=by_shape), console)


def _print_section(console: Console, section: Section | None) -> None:
    if section is not None:
        renderer = TerminalRenderer(console)
        for block in section.blocks:
            if isinstance(block, Table):
                renderer.table(block)
            elif isinstance(block, Text):
                renderer.text(block)


def print_load_balance(console: Console, balance: LoadBalance | None, *, per_rank: bool = True) -> None:
    """The load-balance table (unless not `per_rank`) and its spreads (nothing with fewer than 2 ranks)."""
    _print_section(console, load_balance_section(balance, per_rank=per_rank))


def print_stragglers(console: Console, lag: Stragglers | None) -> None:
    """The ranks the others waited for and the step-time stragglers, top TERMINAL_STRAGGLERS of each (the fleet
    summary's)."""
    _print_section(console, stragglers_section(lag, TERMINAL_STRAGGLERS))


def text_rows(frame: pl.DataFrame | None) -> list[dict[str, Any]]:
    """A summary frame's rows (as in the JSON) with every trace string made printable for the terminal."""
    printable_rows: list[dict[str, Any]] = printable_tree(frame_rows(frame))
    return printable_rows
