"""Markdown cells: long names cut where they differ from the column's others, never into two rows that read the
same; text escaped."""

from __future__ import annotations

import html

from ktrace.report.markdown import CELL_CHARS, cell, md_table


def test_long_names_in_one_column_stay_apart() -> None:
    """Two kernels that differ after 120 characters: the old cell() cut both to the same 119 characters + "…"."""
    names = [f"void {'a' * 130}_kernel<{t}>(float*)" for t in ("float", "half")]
    lines = md_table(["name", "time"], [[names[0], "1 ms"], [names[1], "2 ms"]])
    shown = [line.split(" | ")[0].removeprefix("| ") for line in lines[2:4]]
    assert shown[0] != shown[1], shown
    assert all(len(html.unescape(s).replace("\\", "")) <= CELL_CHARS for s in shown), shown


def test_short_cells_are_kept_and_escaped() -> None:
    assert md_table(["a"], [["x|y"], ["<b>"]]) == ["| a |", "|---|", "| x\\|y |", "| &lt;b&gt; |", ""]
    assert cell(None) == "" and cell("a_b") == "a\\_b"


def test_rows_shorter_than_the_header_keep_their_cells_in_place() -> None:
    assert md_table(["a", "b"], [["1", "2"], ["3"], ["4", "5"]])[2:5] == ["| 1 | 2 |", "| 3 |", "| 4 | 5 |"]
