"""The timeline's colours: the slice palette and the styles of row heads, the ruler and marked slices."""

from __future__ import annotations

from rich.style import Style

PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#86bcb6",
    "#d37295",
    "#8cd17d",
)
SELECTED = Style(bgcolor="white", color="black", bold=True)
LINKED = Style(bgcolor="magenta", color="white", bold=True)
CRITICAL = Style(bgcolor="red", color="white", bold=True)
_EMPTY = Style()
HEAD = Style(color="grey70")
HEAD_CURSOR = Style(color="black", bgcolor="grey70", bold=True)
RULER = Style(color="grey50")
_COUNTER = Style(color="#59a14f")


def _styles() -> tuple[list[Style], list[Style]]:
    solid = [Style(bgcolor=c, color="black") for c in PALETTE]
    glyph = [Style(color=c) for c in PALETTE]
    return solid, glyph


_SOLID, _GLYPH = _styles()


def cell_style(colour: int, solid: bool, counter: bool) -> Style:
    """The style of one timeline cell: empty, a counter's sparkline, or a slice's colour (solid when busy)."""
    if colour < 0:
        return _EMPTY
    if counter:
        return _COUNTER
    return (_SOLID if solid else _GLYPH)[colour % len(PALETTE)]
