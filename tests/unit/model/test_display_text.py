"""printable(): control characters and bidi overrides from a trace become visible escapes before display."""

from __future__ import annotations

import polars as pl

from ktrace.model.builder import TraceBuilder
from ktrace.model.display_text import printable, printable_trace, printable_tree
from ktrace.model.trace import TraceMeta

UNSAFE = "\x1b]0;title\x07\x1b[2J\x9b31m\r\b\x00\x7f\u202eevil\u2066\u2028"


def test_every_control_character_becomes_a_visible_escape() -> None:
    shown = printable(f"k{UNSAFE}")
    assert shown == (
        "k\\x1b]0;title\\x07\\x1b[2J\\x9b31m\\x0d\\x08\\x00\\x7fevil".replace("evil", "\\u202eevil\\u2066\\u2028")
    )
    assert all(ch.isprintable() for ch in shown)


def test_clean_text_is_returned_as_is() -> None:
    text = "void gemm<float, 128>(float*) [memory] ümlaut 日本"
    assert printable(text) is text


def test_tree_keys_and_values() -> None:
    assert printable_tree({"a\x1b": ["b\x07", ("c", 1, None)], "n": 2.5}) == {
        "a\\x1b": ["b\\x07", ["c", 1, None]],
        "n": 2.5,
    }


def test_printable_trace_rewrites_only_unsafe_names() -> None:
    b = TraceBuilder(node=f"host{UNSAFE}", rank=0)
    b.add(
        "kernels",
        {"start_ns": [1, 5], "end_ns": [2, 6], "device": [0, 0], "stream": [7, 7], "name": [f"k{UNSAFE}", "plain"]},
    )
    trace = b.build()
    trace = trace.with_meta(TraceMeta(hosts=(f"host{UNSAFE}",), notes=(f"n{UNSAFE}",)))
    clean = printable_trace(trace)
    names = clean.kernels["name"].cast(pl.String).to_list()
    assert names == [printable(f"k{UNSAFE}"), "plain"]
    assert clean.kernels["name"].dtype == trace.kernels["name"].dtype
    assert clean.kernels["node"].cast(pl.String).to_list() == [printable(f"host{UNSAFE}")] * 2
    assert clean.meta.hosts == (printable(f"host{UNSAFE}"),) and clean.meta.notes == (printable(f"n{UNSAFE}"),)
    plain = printable_trace(clean)
    assert plain is clean


def test_share_glyphs_run_from_blank_to_full_and_dot_for_no_data() -> None:
    from ktrace.model.display_text import share_glyph

    assert [share_glyph(v) for v in (0.0, 0.5, 1.0, 1.7, -0.2, float("nan"))] == [" ", "▄", "█", "█", " ", "·"]


def test_fit_end_marks_the_cut_and_keeps_short_text() -> None:
    from ktrace.model.display_text import fit_end

    assert fit_end("abcdef", 4) == "abc…" and fit_end("abc", 4) == "abc" and fit_end("abcdef", 0) == "a…"
