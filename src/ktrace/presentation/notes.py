"""Notes that inform: repeated notes grouped into one line with a count, what the trace lacks listed apart."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from ktrace.presentation.page import Note

_NUMBERS = re.compile(r"\d[\d,.]*")


def note_shape(text: str) -> str:
    """A note with its numbers blanked: notes of one shape say the same thing about different ranks or files."""
    return _NUMBERS.sub("#", text)


def grouped_notes(notes: Iterable[str], absent: Collection[str] = ()) -> tuple[Note, ...]:
    """One Note per shape of note (note_shape), in first-said order: the first text said, and how many notes of
    that shape there were; notes in `absent` (what the trace lacks) are flagged and come last.

    64 ranks each lacking sync records give one line, "rank 0: ... (and 63 more like it)", not 64.
    """
    first: dict[str, str] = {}
    counts: dict[str, int] = {}
    same: dict[str, bool] = {}
    for text in notes:
        shape = note_shape(text)
        if shape not in first:
            first[shape], counts[shape], same[shape] = text, 0, True
        counts[shape] += 1
        same[shape] = same[shape] and text == first[shape]
    said = [Note(first[s], counts[s], first[s] in absent, same[s]) for s in first]
    return tuple([n for n in said if not n.absent] + [n for n in said if n.absent])
