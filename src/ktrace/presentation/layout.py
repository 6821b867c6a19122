"""The one renderer interface: a view implements one method per kind of block, and `lay_out` walks the page.

Terminal (rich), HTML, Markdown and the TUI's dashboard are renderers; JSON prints `Page.document`. A renderer
decides how a block looks in its medium (a Figure as a plotly chart, or block characters, or a table), never which
numbers it holds: those are the page's.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from ktrace.presentation.page import Figure, Page, RuleVerdict, Section, Table, Text

Out = TypeVar("Out", covariant=True)


class Renderer(Protocol[Out]):
    """A view of a Page. `lay_out(page, renderer)` calls begin, then per section `section` and one block method per
    block, then `end`, whose value is the rendered view."""

    def begin(self, page: Page) -> None:
        """The page's title, facts and notes."""

    def section(self, section: Section) -> None:
        """A section starts (its title; its notes come after its blocks, in `section_end`)."""

    def table(self, table: Table) -> None:
        """A table block."""

    def figure(self, figure: Figure) -> None:
        """A figure block."""

    def text(self, text: Text) -> None:
        """A paragraph."""

    def rules(self, verdicts: tuple[RuleVerdict, ...]) -> None:
        """The rules' verdicts and findings."""

    def section_end(self, section: Section) -> None:
        """A section ends (its notes)."""

    def end(self) -> Out:
        """The rendered view."""
        ...


def lay_out(page: Page, renderer: Renderer[Out]) -> Out:
    """Render `page` with `renderer`: every section, every block, in order."""
    renderer.begin(page)
    for section in page.sections:
        renderer.section(section)
        for block in section.blocks:
            if isinstance(block, Table):
                renderer.table(block)
            elif isinstance(block, Figure):
                renderer.figure(block)
            elif isinstance(block, Text):
                renderer.text(block)
            else:
                renderer.rules(block)
        renderer.section_end(section)
    return renderer.end()
