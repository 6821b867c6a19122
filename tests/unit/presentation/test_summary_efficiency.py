"""The summary's kernel efficiency section: the top kernels' time-weighted launch figures, at 80 columns."""

from __future__ import annotations

import io

import polars as pl
from rich.console import Console
from tests.real_traces import fixture_path

import ktrace
from ktrace.analysis.kernels import EFFICIENCY_COLUMNS, OTHER
from ktrace.analysis.summary import summarize
from ktrace.presentation.page import Table
from ktrace.presentation.summary_hardware import EFFICIENCY_ROWS, efficiency_section
from ktrace.presentation.summary_page import summary_page
from ktrace.report.terminal import render_page


def test_the_section_lists_the_top_kernels_figures_and_fits_80_columns() -> None:
    summary = summarize(ktrace.open(fixture_path("tracelens")), top=15)
    section = summary_page(summary).section("kernel_efficiency")
    assert section is not None
    (table,) = section.blocks
    assert isinstance(table, Table) and [c.header for c in table.columns][2:] == [
        "blocks/SM",
        "occupancy",
        "regs",
        "shared",
    ]
    expected = summary.top_by_time.filter(pl.col("name") != OTHER).head(EFFICIENCY_ROWS)
    assert [r["name"] for r in table.rows] == expected["name"].to_list()
    for c in EFFICIENCY_COLUMNS:
        assert [r[c] for r in table.rows] == [None if v is None else round(v, 6) for v in expected[c].to_list()]
    out = io.StringIO()
    render_page(summary_page(summary), Console(file=out, width=80, color_system=None, force_terminal=False))
    text = out.getvalue()
    lines = text[text.index("launch figures of the top kernels") :].splitlines()[:14]
    assert all(len(line) <= 80 for line in lines)
    assert any("13.0 %" in line and "49.2 KB" in line for line in lines)  # the bmm's cutlass GEMM


def test_no_figures_no_section() -> None:
    summary = summarize(ktrace.open(fixture_path("tracelens")), top=5)
    bare = summary.top_by_time.with_columns(pl.lit(None, pl.Float64).alias(c) for c in EFFICIENCY_COLUMNS)
    from dataclasses import replace

    assert efficiency_section(replace(summary, top_by_time=bare)) is None
    assert efficiency_section(replace(summary, top_by_time=bare.drop(EFFICIENCY_COLUMNS))) is None
