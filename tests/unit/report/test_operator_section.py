"""The report's operator section on the real H100 trace (operators, their kernels, nn.Module frames, kernel
sequences): HTML (tables and two bar plots), Markdown and the JSON document say the same."""

from __future__ import annotations

import pytest

from ktrace.presentation.report_model import Report


@pytest.fixture(scope="module")
def report(real_trace_path) -> Report:  # type: ignore[no-untyped-def]
    import ktrace
    from ktrace.presentation.report_model import build_report

    return build_report(ktrace.open(real_trace_path("tracelens")), top=5)


def test_html_section_has_the_tables_and_both_bar_plots(report: Report) -> None:
    from ktrace.report.html import all_sections, render_html

    (sec,) = [s for s in all_sections(report) if s.anchor == "operators"]
    titles = [f["layout"]["title"]["text"] for f in sec.figures]
    assert titles == ["Top operators by GPU time", "Top operators by CPU self time"]
    body = "".join(sec.body)
    for heading in ("Kernels of the top operators", "Modules (nn.Module)", "Frequent kernel sequences"):
        assert heading in body
    assert "aten::_softmax" in body and "Owlv2ForObjectDetection_0" in body and "→" in body
    assert '<a href="#operators">' in render_html(report)


def test_markdown_and_json_show_the_same_top_operator_and_module(report: Report) -> None:
    from ktrace.report.content import report_document
    from ktrace.report.markdown import render_markdown

    ops = report_document(report)["summary"]["operators"]
    top, module = ops["top_by_gpu_time"][0]["name"], ops["modules"]["top_by_gpu_time"][0]["module"]
    kernel = ops["kernels_of_top_operators"][0]
    assert kernel["operator"] == top
    text = render_markdown(report)
    start = text.index("## Operators and kernel sequences")
    section = text[start : text.index("\n## ", start + 1)]
    assert f"| {top.replace('_', chr(92) + '_')} |" in section
    assert f"| {module.replace('_', chr(92) + '_')} |" in section
    assert "### Frequent kernel sequences" in section
