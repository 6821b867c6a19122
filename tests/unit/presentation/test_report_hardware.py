"""The report's roofline, collectives and kernel efficiency sections (issue 28): the roofline figure (log-log,
operators sized by GPU time under the GPU's roofs) and the busbw-vs-size figure in HTML, the tables of the terminal's
sections in both reports, and a line saying why a section is empty. Fails on the old code: the report had none of
these sections (no presentation.report_hardware)."""

from __future__ import annotations

import dataclasses
import html

import polars as pl
import pytest
from tests.real_traces import fixture_path

import ktrace
from ktrace.analysis.collectives import NO_MESSAGE_SIZES
from ktrace.analysis.kernels import EFFICIENCY_COLUMNS
from ktrace.analysis.roofline import NO_OPERATORS, NO_SHAPES
from ktrace.analysis.summary import Summary, summarize
from ktrace.presentation.layout import lay_out
from ktrace.presentation.page import Figure, Page, Section, Table, Text
from ktrace.presentation.report_hardware import NO_LAUNCH_FIGURES, hardware_sections
from ktrace.presentation.summary_hardware import collectives_section, roofline_section
from ktrace.report.html import HtmlRenderer
from ktrace.report.markdown import MarkdownRenderer, cell
from ktrace.report.plots import MARKER_PX
from ktrace.report.sections import figure_spec

H100_BF16_TFLOPS = 989.5
H100_HBM_TBPS = 3.35
"""NVIDIA H100 SXM datasheet (the owlv2 trace's 'NVIDIA H100 80GB HBM3'): dense BF16 and HBM3 bandwidth."""


@pytest.fixture(scope="module")
def owlv2() -> Summary:
    return summarize(ktrace.open(fixture_path("tracelens")))


@pytest.fixture(scope="module")
def nccl() -> Summary:
    return summarize(ktrace.open(fixture_path("nccl")))


def _by_key(sections: tuple[Section, ...]) -> dict[str, Section]:
    return {s.key: s for s in sections}


def _markdown(sections: tuple[Section, ...]) -> str:
    return lay_out(Page("t", (), sections, document={"k": 1}), MarkdownRenderer())


def _html(sections: tuple[Section, ...]) -> str:
    return lay_out(Page("t", (), sections, document={"k": 1}), HtmlRenderer())


def _leading_figure(summary: Summary, key: str) -> tuple[Section, Figure]:
    """The report's section `key` and its first block, a scatter Figure."""
    section = _by_key(hardware_sections(summary))[key]
    figure = section.blocks[0]
    assert isinstance(figure, Figure) and figure.kind == "scatter"
    return section, figure


def test_roofline_figure_draws_each_operator_with_flops_under_the_gpus_roof(owlv2: Summary) -> None:
    r = owlv2.roofline
    assert r is not None and r.reason is None
    _, figure = _leading_figure(owlv2, "roofline")
    points, *roofs = figure.data["series"]
    with_flops = r.operators.filter(pl.col("flops") > 0)
    assert len(points["x"]) == with_flops.height > 0
    assert points["x"] == with_flops["intensity"].round(6).to_list()
    assert points["y"] == with_flops["tflops"].round(6).to_list()
    assert points["sizes"] == with_flops["gpu_time_ns"].to_list()
    assert f"({r.operators.height - with_flops.height:,} bytes-only operator shapes" in figure.title
    # every modeled row of owlv2 is bf16: one roof, flat at the dense peak past the ridge, HBM-bound before it
    (roof,) = roofs
    assert roof["label"].startswith("bf16 roof")
    low, ridge, high = roof["x"]
    assert ridge == pytest.approx(H100_BF16_TFLOPS / H100_HBM_TBPS)
    assert roof["y"] == pytest.approx([low * H100_HBM_TBPS, H100_BF16_TFLOPS, H100_BF16_TFLOPS])
    assert low < min(points["x"]) and high > max(points["x"])
    spec = figure_spec(figure)
    assert spec["layout"]["xaxis"]["type"] == spec["layout"]["yaxis"]["type"] == "log"
    sizes = spec["data"][0]["marker"]["size"]
    assert max(sizes) == MARKER_PX[1] and min(sizes) >= MARKER_PX[0]
    biggest = points["sizes"].index(max(points["sizes"]))
    assert sizes[biggest] == MARKER_PX[1]


def test_roofline_tables_are_the_terminals_with_the_shapes(owlv2: Summary) -> None:
    terminal = roofline_section(owlv2.roofline)
    assert terminal is not None
    report = _by_key(hardware_sections(owlv2))["roofline"]
    tables = [b for b in report.blocks if isinstance(b, Table)]
    assert (
        [t.key for t in tables]
        == [t.key for t in terminal.blocks if isinstance(t, Table)]
        == ["roofline", "roofline_lost", "mfu"]
    )
    term_roofline = next(b for b in terminal.blocks if isinstance(b, Table) and b.key == "roofline")
    assert tables[0].rows == term_roofline.rows
    assert [c.header for c in tables[0].columns][:3] == ["name", "shapes", "dtype"]
    md = _markdown((report,))
    assert "| name | shapes | dtype | calls |" in md
    assert "| aten::bmm | \\[\\[16, 5185, 64\\], \\[16, 64, 5185\\]\\] | bf16 | 120 |" in md
    assert "Roofline: NVIDIA" not in md  # the figure's numbers are the table's (shown_in)
    assert "arithmetic intensity (FLOP/byte)" in _html((report,))


def test_busbw_figure_has_a_line_per_collective_by_message_size(nccl: Summary) -> None:
    c = nccl.collectives
    assert c is not None and c.reason is None
    section, figure = _leading_figure(nccl, "collectives")
    series = {s["label"]: s for s in figure.data["series"]}
    assert sorted(series) == ["all_reduce Float on 2 ranks", "broadcast Float on 2 ranks", "broadcast Long on 2 ranks"]
    reduce = c.by_size.filter(pl.col("collective") == "all_reduce").sort("bytes")
    assert series["all_reduce Float on 2 ranks"]["x"] == reduce["bytes"].to_list()
    assert series["all_reduce Float on 2 ranks"]["y"] == reduce["busbw_gbps"].to_list()
    assert len(reduce) == 5 and series["broadcast Long on 2 ranks"]["x"] == [424]
    terminal = collectives_section(c)
    assert terminal is not None and section.blocks[1:] == terminal.blocks
    md = _markdown((section,))
    assert md.count("| all\\_reduce | Float |") == 5 and "NCCL bus bandwidth by message size" not in md
    assert figure_spec(figure)["layout"]["xaxis"]["type"] == "log"


def test_each_empty_section_says_why_in_every_view(nccl: Summary, synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    roofline = _by_key(hardware_sections(nccl))["roofline"]
    assert roofline.blocks == (Text(NO_SHAPES, "dim"),)
    summary = summarize(synthetic_trace)  # no operators; NCCL kernels without message sizes
    no_figures = summary.top_by_time.with_columns(pl.lit(None, pl.Float64).alias(c) for c in EFFICIENCY_COLUMNS)
    bare = hardware_sections(dataclasses.replace(summary, top_by_time=no_figures))
    assert [s.key for s in bare] == ["roofline", "collectives", "kernel_efficiency"]
    reasons = [b.text for s in bare for b in s.blocks if isinstance(b, Text)]
    assert reasons == [NO_OPERATORS, NO_MESSAGE_SIZES, NO_LAUNCH_FIGURES]
    assert all(len(s.blocks) == 1 for s in bare)
    md, page = _markdown(bare), _html(bare)
    for s, reason in zip(bare, reasons, strict=True):
        assert f"## {s.title}\n\n_{cell(reason, 2000)}_" in md
        assert html.escape(reason) in page
