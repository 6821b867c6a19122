"""Trace text made safe to show: control characters and bidi overrides become visible escapes.

Names in a trace (kernels, ranges, hosts, metadata) are written by whoever made the trace. Shown raw, an ESC or
C1 sequence in a kernel name drives the user's terminal (clears the screen, sets the window title, rewrites what
was printed), and a bidi override makes text read backwards. Every place that shows trace text to a person (the
terminal summary, info, check, the Markdown report, the TUI) passes it through `printable` first. Markup (rich,
Markdown, HTML) is escaped separately, by each renderer, on the printable text.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ktrace.model.trace import Trace

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 controls (ESC, BEL, CR, BS, CSI U+009B, ...), DEL, line separators and bidi marks/overrides."""


def _visible(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character and bidi override replaced by a visible escape (`\\x1b`, `\\u202e`)."""
    return _UNSAFE.sub(_visible, text) if _UNSAFE.search(text) else text


def printable_tree(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, tuples, scalars) with every string in it, keys included, made printable."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_tree(k): printable_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable_tree(v) for v in value]
    return value


def printable_trace(trace: Trace) -> Trace:
    """`trace` with every string in its tables and meta made printable; the same object when none needed it.

    Checks the distinct values of each text column (the categories of a categorical one), so a clean trace costs
    little; only a trace holding unsafe text is rewritten.
    """
    from ktrace.model.string_columns import map_distinct_strings
    from ktrace.model.trace import Trace

    def changes_for(values: list[str]) -> dict[str, str]:
        return {v: printable(v) for v in values if _UNSAFE.search(v)}

    frames = {name: map_distinct_strings(trace.table(name), changes_for) for name in trace.counts()}
    frames = {name: frame for name, frame in frames.items() if frame is not trace.table(name)}
    meta = trace.meta
    clean = dataclasses.replace(
        meta,
        hosts=tuple(printable(h) for h in meta.hosts),
        notes=tuple(printable(n) for n in meta.notes),
        job=printable_tree(meta.job),
    )
    if not frames and clean == meta:
        return trace
    return Trace(**{n: frames.get(n, trace.table(n)) for n in trace.counts()}, meta=clean)


BLOCK_LEVELS = " ▁▂▃▄▅▆▇█"
"""Glyphs for a 0-1 share by eighths (blank = 0): sparklines, partly busy columns and heatmap cells."""


def share_glyph(share: float) -> str:
    """The block glyph of a 0-1 share (clipped), "·" for NaN (no data)."""
    if share != share:
        return "·"
    return BLOCK_LEVELS[round(min(max(share, 0.0), 1.0) * (len(BLOCK_LEVELS) - 1))]


def fit_end(text: str, width: int) -> str:
    """`text` cut to at most `width` characters, "…" marking the cut (at least one character kept)."""
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"
